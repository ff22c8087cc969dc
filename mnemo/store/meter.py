"""Call counts shared by every replica of the service: a sliding window per key, counted in PostgreSQL.

    counter = PgCounter("postgresql://host/db?schema=mnemo_quota")
    counter.admit("acme", calls=120, window_s=60)   # None: counted; else seconds until a call is free

The HTTP and MCP services charge each model-calling request to its tenant's quota
(`server.tenants.Quota`). On DuckDB one process serves a store, so it counts in memory;
on PostgreSQL several replicas serve one database, so each count is a row of one
table there, `quota_calls (key, at)`, and every replica reads the same rows. One
transaction per call takes an advisory lock on the key, drops the calls that left
the window, counts the rest and, if there is room, inserts the new call: two replicas
admitting at once are serialised by the lock, so the limit holds exactly. Times are
the database's clock, which every replica shares.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import StoreUnavailable
from .pg_connect import alive, connect, redact, split_dsn


class PgCounter:
    """A sliding window of calls per key in one PostgreSQL table, exact across processes."""

    scope = "database"

    def __init__(self, dsn: str):
        self._dsn = dsn
        _, self.schema = split_dsn(dsn)
        self.path = redact(dsn)
        self._lock = threading.Lock()
        self._con: Any = None
        self._ready = False  # the table is made on first use, so a replica starts while the database is down

    @contextmanager
    def _db(self) -> Iterator[Any]:
        """Yield the counter's connection under its lock; a database error becomes StoreUnavailable (503)."""
        import psycopg
        from psycopg import sql

        with self._lock:
            # A connection the server dropped (a restart, a failover) is replaced before it is used (`alive`).
            try:
                if not alive(self._con):
                    if self._con is not None:
                        self._con.close()
                    self._con = connect(self._dsn)
                    self._con.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
                if not self._ready:
                    self._setup(self._con)
                    self._ready = True
                yield self._con
            except psycopg.Error as exc:
                raise StoreUnavailable(f"the quota table in {self.path} did not answer: {str(exc).strip()}; "
                                       "retry shortly") from exc

    def _setup(self, con: Any) -> None:
        from psycopg import sql

        with con.transaction():
            # Replicas starting together: one creates the table, the others wait and find it.
            con.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"mnemo.meter:{self.schema}"])
            con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            con.execute('CREATE TABLE IF NOT EXISTS quota_calls (key text COLLATE "C" NOT NULL, '
                        "at timestamptz NOT NULL DEFAULT clock_timestamp())")
            con.execute("CREATE INDEX IF NOT EXISTS quota_calls_key_at ON quota_calls (key, at)")

    def _call(self, fn: Callable[[Any], Any]) -> Any:
        """Return fn(connection); a connection the server dropped since its last use is replaced once, then fn rerun."""
        try:
            with self._db() as con:
                return fn(con)
        except StoreUnavailable:
            if self._con is None or not (self._con.closed or self._con.broken):
                raise
        # Safe to rerun: a transaction on a dropped connection was rolled back by the server.
        with self._db() as con:
            return fn(con)

    def admit(self, key: str, calls: int, window_s: float) -> float | None:
        """Count one call for `key` and return None, or return the seconds until the window has room."""
        def count(con: Any) -> float | None:
            with con.transaction():
                con.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"mnemo.meter:{self.schema}:{key}"])
                con.execute("DELETE FROM quota_calls WHERE key = %s "
                            "AND at <= clock_timestamp() - make_interval(secs => %s)", [key, window_s])
                used, oldest, now = con.execute("SELECT count(*), min(at), clock_timestamp() FROM quota_calls "
                                                "WHERE key = %s", [key]).fetchone()
                if used >= calls:
                    return max(0.0, window_s - (now - oldest).total_seconds()) if oldest else window_s
                con.execute("INSERT INTO quota_calls (key) VALUES (%s)", [key])
            return None

        return self._call(count)

    def used(self, key: str, window_s: float) -> int:
        """Return how many calls of `key` are in the window now."""
        return self._call(lambda con: con.execute(
            "SELECT count(*) FROM quota_calls WHERE key = %s AND at > clock_timestamp() - "
            "make_interval(secs => %s)", [key, window_s]).fetchone()[0])

    def ping(self) -> None:
        """Ask the database for one row; raise StoreError when it does not answer."""
        self._call(lambda con: con.execute("SELECT 1").fetchone())

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
