"""PostgreSQL connections for the store and the quota counter: addresses, opening, and connections that heal.

A restart or failover of PostgreSQL (or `pg_terminate_backend`) drops every connection.
Nothing tells a connection until it is used, so without care the next request fails and
every later one too. Here:

- `alive(con)` is asked before an idle connection is used: an idle connection's socket
  has nothing to read unless the server sent something on its own, which is almost
  always "terminating connection" followed by its close. So an empty socket costs one
  `select` and no round trip; a readable one is asked `SELECT 1`. A connection found
  dead is reopened by its owner (`PgStore.con`, `meter.PgCounter`), never inside an
  open transaction, whose statements would otherwise land on the new connection outside it.
- `answering(what)` turns a lost or refused connection (psycopg's OperationalError and
  InterfaceError) into `StoreUnavailable`: the HTTP service answers 503 with Retry-After
  while the database is away, and the first request after it is back reconnects.
- `connect` gives up after CONNECT_TIMEOUT_S on an address that does not answer.

A connection dropped without a word (a host that vanished, no FIN) shows it only when a
statement fails: that request gets 503, and the next finds the connection broken and reopens it.
"""

from __future__ import annotations

import re
import select
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ExtensionUnavailable, InvalidInput, StoreError, StoreUnavailable

DSN_PREFIXES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "mnemo"
CONNECT_TIMEOUT_S = 5  # an address that does not answer is given up on after this long
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def is_dsn(path: str | Path) -> bool:
    """Return True when `path` is a PostgreSQL URI rather than a DuckDB file."""
    return isinstance(path, str) and path.startswith(DSN_PREFIXES)


def split_dsn(dsn: str) -> tuple[str, str]:
    """Return (the DSN libpq understands, the store's schema) from a DSN that may carry ?schema=NAME."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.match(schema):
        raise InvalidInput(f"schema {schema!r} is not a plain lower-case identifier (letters, digits, _)")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), schema


def redact(dsn: str) -> str:
    """Return `dsn` with any password replaced by ***, fit for logs and provenance."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def psycopg_module() -> Any:
    """Import psycopg and the pgvector adapter, or raise saying what to install."""
    try:
        import pgvector.psycopg  # noqa: F401
        import psycopg
    except ImportError as exc:
        raise StoreError("the PostgreSQL store needs psycopg and pgvector; run: pip install 'mnemo-ltm[postgres]'"
                         ) from exc
    return psycopg


def connect(dsn: str) -> Any:
    """Open an autocommit connection in UTC, turning an unreachable server into StoreUnavailable."""
    psycopg = psycopg_module()
    conninfo, _ = split_dsn(dsn)
    try:
        con = psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        con.execute("SET TIME ZONE 'UTC'")
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"cannot connect to {redact(dsn)}: {str(exc).strip()}; start PostgreSQL "
                               "(in a checkout: bash .ci/services.sh start) or fix the DSN") from exc
    return con


def alive(con: Any) -> bool:
    """Return whether a connection can be used: False if closed, broken, or idle with a dead server behind it.

    A connection inside a transaction is never judged here (it must not be replaced mid-transaction).
    """
    if con is None or con.closed or con.broken:
        return False
    psycopg = psycopg_module()
    if con.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return True
    try:
        readable, _, _ = select.select([con.fileno()], [], [], 0)
    except (OSError, ValueError):
        return False
    if not readable:
        return True
    # The server spoke first: usually to say it is terminating the connection. Ask it once.
    try:
        con.execute("SELECT 1").fetchone()
    except psycopg.Error:
        return False
    return True


@contextmanager
def answering(what: str) -> Iterator[None]:
    """Turn a lost or refused database connection in the block into StoreUnavailable (retry later)."""
    psycopg = psycopg_module()
    try:
        yield
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable(f"{what} does not answer ({' '.join(str(exc).split())}); retry shortly") from exc


def vector_schema(con: Any, *, create: bool) -> str:
    """Return the schema holding the `vector` extension, creating the extension when allowed."""
    row = con.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                      "WHERE e.extname = 'vector'").fetchone()
    if row:
        return row[0]
    psycopg = psycopg_module()
    if create:
        try:
            # In public, not the store's schema: every store in the database shares the one type.
            con.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            return "public"
        except psycopg.Error as exc:
            raise ExtensionUnavailable(
                f"cannot create the pgvector extension ({str(exc).strip()}); install pgvector on the server and "
                "run CREATE EXTENSION vector as a superuser, or grant this role the right to") from exc
    raise ExtensionUnavailable("the pgvector extension is not installed in this database; "
                               "run CREATE EXTENSION vector as a superuser")
