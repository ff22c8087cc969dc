"""The SQL both store engines run, written once over a `Dialect` that supplies what differs.

A `Dialect` says how the engine marks a parameter, tests a column against a list,
reads a key of the JSON `meta`, keeps insertion order, writes a float literal, a
base-2 logarithm and the seconds between two times. `SQLStore` holds the queries
that are the same on both engines but for those; `store.duckdb` and
`store.postgres` subclass it with what differs (connections, bulk writes, search,
status changes, snapshots). Salience is rendered here from its one definition,
`decay.salience_formula`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ..config import DecayConfig
from ..decay import kind_half_lives, salience_formula
from ..errors import InvalidInput, NotFound, StoreError
from ..model import Event, Link, MemoryRecord, Turn, TurnOutcome
from .counts import StoredCounts
from .rows import (
    EVENT_COLS,
    LINK_COLS,
    OUTCOME_COLS,
    SQL_COLS,
    TURN_COLS,
    check_embedder,
    check_text,
    event_of,
    link_of,
    naive,
    new_meta,
    outcome_of,
    record_of,
    turn_of,
)

# The order `review` yields memories in: by user, active first, then by kind and age.
REVIEW_ORDER = ("user_id, CASE status WHEN 'active' THEN 0 WHEN 'superseded' THEN 1 WHEN 'forgotten' THEN 2 "
                "WHEN 'decayed' THEN 3 ELSE 4 END, kind, created_at, id")
FILTER_KEYS = ("agent", "session", "subject", "attribute", "record_id", "status")


@dataclass(frozen=True)
class Dialect:
    """What differs in the shared SQL between the engines."""

    name: str
    mark: str  # a parameter
    text_mark: str  # a text parameter that may be NULL (PostgreSQL must be told its type)
    seq: str  # the column that keeps insertion order of turns and events within a timestamp
    for_update: str  # what locks a row read before it is updated ("" where one writer holds the file)
    any_of: Callable[[str, Sequence[Any]], tuple[str, list[Any]]]  # column IN a list -> (sql, params)
    meta_eq: Callable[[str, str], tuple[str, list[Any]]]  # meta's key = value -> (sql, params)
    number: Callable[[float], str]  # a float literal
    log2: Callable[[str], str]  # the base-2 logarithm of an expression
    seconds: Callable[[str, str], str]  # seconds from time expression a to b (b - a)


def where(user: str | None, filters: dict[str, Any] | None, *, active_only: bool,
          dialect: Dialect) -> tuple[str, list[Any]]:
    """Return a WHERE clause and its parameters for a user and the recall filters, in `dialect`."""
    q = dialect.mark
    clauses, params = ["TRUE"], []
    if user is not None:
        clauses.append(f"user_id = {q}")
        params.append(user)
    if active_only:
        clauses.append("status = 'active'")
    for key, value in (filters or {}).items():
        if value is None:
            continue
        if key in FILTER_KEYS:
            sql, values = f"{key} = {q}", [value]
        elif key in ("kinds", "categories"):
            sql, values = dialect.any_of("kind" if key == "kinds" else "category", list(value))
        elif key in ("since", "until"):
            sql, values = f"created_at {'>=' if key == 'since' else '<='} {q}", [naive(value)]
        elif key == "meta":
            pairs = [dialect.meta_eq(str(k), str(v)) for k, v in value.items()]
            sql, values = " AND ".join(p[0] for p in pairs) or "TRUE", [x for p in pairs for x in p[1]]
        else:
            raise InvalidInput(f"unknown filter {key!r}; use agent, session, kinds, categories, since, until, meta")
        clauses.append(sql)
        params.extend(values)
    return " AND ".join(clauses), params


class Expr:
    """An SQL expression that composes with numbers through + * / **, so a Python formula renders to SQL."""

    def __init__(self, sql: str, dialect: Dialect):
        self.sql, self.dialect = sql, dialect

    def _of(self, value: Any) -> str:
        return value.sql if isinstance(value, Expr) else self.dialect.number(float(value))

    def _op(self, op: str, a: Any, b: Any) -> Expr:
        return Expr(f"({self._of(a)} {op} {self._of(b)})", self.dialect)

    def __add__(self, o: Any) -> Expr: return self._op("+", self, o)  # noqa: E704
    def __radd__(self, o: Any) -> Expr: return self._op("+", o, self)  # noqa: E704
    def __mul__(self, o: Any) -> Expr: return self._op("*", self, o)  # noqa: E704
    def __rmul__(self, o: Any) -> Expr: return self._op("*", o, self)  # noqa: E704
    def __truediv__(self, o: Any) -> Expr: return self._op("/", self, o)  # noqa: E704
    def __rtruediv__(self, o: Any) -> Expr: return self._op("/", o, self)  # noqa: E704
    def __pow__(self, o: Any) -> Expr: return Expr(f"power({self._of(self)}, {self._of(o)})", self.dialect)  # noqa: E704
    def __rpow__(self, o: Any) -> Expr: return Expr(f"power({self._of(o)}, {self._of(self)})", self.dialect)  # noqa: E704


class _SQLFunctions:
    """`decay.salience_formula`'s least, greatest and log2, rendered in a dialect."""

    def __init__(self, dialect: Dialect):
        self.dialect = dialect

    def _call(self, name: str, *args: Any) -> Expr:
        e = Expr("", self.dialect)
        return Expr(f"{name}({', '.join(e._of(a) for a in args)})", self.dialect)

    def least(self, *args: Any) -> Expr:
        return self._call("least", *args)

    def greatest(self, *args: Any) -> Expr:
        return self._call("greatest", *args)

    def log2(self, x: Any) -> Expr:
        return Expr(self.dialect.log2(Expr("", self.dialect)._of(x)), self.dialect)


def salience_sql(dialect: Dialect, cfg: DecayConfig) -> str:
    """Return `decay.salience_formula` as an SQL expression over the columns of `salience_inputs`."""
    col = {name: Expr(name, dialect) for name in ("importance", "access_count", "corroborations", "age", "h")}
    return salience_formula(col["importance"], col["access_count"], col["corroborations"], col["age"], col["h"],
                            cfg, _SQLFunctions(dialect)).sql


def salience_inputs(dialect: Dialect, cfg: DecayConfig) -> tuple[str, list[Any]]:
    """Return the SELECT list (after id) giving salience's inputs per row, and its parameters (exempt, now).

    `h` is the half-life (`decay.half_life_days`: NULL when pinned or exempt, else by
    kind, unknown kinds as semantic); `age` is `decay.age_days` of the latest of
    created_at, valid_from and last_accessed.
    """
    exempt, params = dialect.any_of("category", list(cfg.exempt_categories))
    by_kind = kind_half_lives(cfg)
    cases = " ".join(f"WHEN kind = '{kind}' THEN {dialect.number(float(h))}" for kind, h in by_kind.items()
                     if kind != "semantic")
    h = f"CASE WHEN pinned OR {exempt} THEN NULL {cases} ELSE {dialect.number(float(by_kind['semantic']))} END"
    seconds = dialect.seconds("greatest(created_at, valid_from, last_accessed)", dialect.mark)
    zero, day = dialect.number(0.0), dialect.number(86400.0)
    age = f"greatest({zero}, coalesce({seconds}, {zero}) / {day})"
    return f"importance, access_count, corroborations, {h} AS h, {age} AS age", params


def decay_select(dialect: Dialect, now: datetime, cfg: DecayConfig) -> tuple[str, list[Any]]:
    """Return SELECT id, salience of the active, non-exempt memories under `cfg.threshold` at `now`, and its params."""
    inputs, params = salience_inputs(dialect, cfg)
    s = salience_sql(dialect, cfg)
    sql = (f"SELECT id, {s} AS salience FROM (SELECT id, {inputs} FROM memories WHERE status = 'active') s "
           f"WHERE h IS NOT NULL AND {s} < {dialect.mark}")
    return sql, [*params, naive(now), float(cfg.threshold)]


def dump_queries(dialect: Dialect, user: str | None) -> list[tuple[str, str, list[Any]]]:
    """Return (section, SELECT, params) of what `dump` streams: turns, memories (with vectors), events, links.

    Orders are total, so equal stores dump equal streams; turns and events keep insertion
    order within a timestamp, so an import replays them in the same order. With `user`,
    events and links are those touching the user's memories.
    """
    mine, params = (f"user_id = {dialect.mark}", [user]) if user is not None else ("TRUE", [])
    owned = f"IN (SELECT id FROM memories WHERE {mine})" if user is not None else "IS NOT NULL"
    return [
        ("turns", f"SELECT {TURN_COLS} FROM turns WHERE {mine} ORDER BY ts, {dialect.seq}", params),
        ("memories", f"SELECT {', '.join(SQL_COLS)}, embedding FROM memories WHERE {mine} ORDER BY created_at, id",
         params),
        ("events", f"SELECT {EVENT_COLS} FROM events WHERE memory_id {owned} ORDER BY ts, {dialect.seq}", params),
        ("links", f"SELECT {LINK_COLS} FROM links WHERE src {owned} OR dst {owned} ORDER BY ts, src, dst, kind",
         params * 2),
    ]


class SQLStore(StoredCounts):
    """The queries that read the same on both engines; a backend sets `dialect` and supplies `_run`."""

    dialect: Dialect
    keeps_records = False  # True where reading the same ids twice costs one query (store.cache)
    path: str
    read_only: bool
    embedder: str
    dim: int
    _lock: Any  # a re-entrant lock held by every write

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Execute one statement and return a cursor (fetchone / fetchall)."""
        raise NotImplementedError

    def _adopt_meta(self, embedder: str, dim: int, create_table: str, *, where: str = "") -> tuple[str, int]:
        """Check that the store was written with `embedder` and `dim`, or record them in a new store.

        `create_table` is the engine's CREATE TABLE store_meta; `where` says where a
        read-only store that holds none was looked for.
        """
        meta = self._meta()
        if meta:
            check_embedder(meta, embedder, dim, self.path)
            return embedder, dim
        if self.read_only:
            raise StoreError(f"{self.path} is not a mnemo store (no store_meta table{where})")
        self._run(create_table)
        q = self.dialect.mark
        for key, value in new_meta(embedder, dim):
            self._run(f"INSERT INTO store_meta VALUES ({q}, {q})", [key, value])
        return embedder, dim

    def _where(self, user: str | None, filters: dict[str, Any] | None, *, active_only: bool) -> tuple[str, list[Any]]:
        return where(user, filters, active_only=active_only, dialect=self.dialect)

    # ----------------------------------------------------------------- memories
    def _records(self, where: str, params: Sequence[Any], order: str = "created_at, id") -> list[MemoryRecord]:
        sql = f"SELECT {', '.join(SQL_COLS)}, {self.tokens_col} FROM memories WHERE {where} ORDER BY {order}"
        rows = self._run(sql, list(params)).fetchall()
        out = [record_of(row[:-1]) for row in rows]
        self._learn_counts([r.text for r in out], [row[-1] for row in rows])  # store.counts
        return out

    def get(self, memory_id: str) -> MemoryRecord:
        """Return one memory, or raise NotFound (through `get_many`, which an engine may answer from memory)."""
        found = self.get_many([memory_id])
        if memory_id not in found:
            raise NotFound(f"no memory with id {memory_id!r}")
        return found[memory_id]

    def get_many(self, ids: list[str]) -> dict[str, MemoryRecord]:
        """Return {id: memory} of the `ids` that exist."""
        if not ids:
            return {}
        sql, params = self.dialect.any_of("id", ids)
        return {r.id: r for r in self._records(sql, params)}

    def memories(self, user: str | None = None, *, include_inactive: bool = False,
                 filters: dict[str, Any] | None = None, limit: int | None = None) -> list[MemoryRecord]:
        """Return memories of `user` (all users when None), oldest first."""
        where, params = self._where(user, filters, active_only=not include_inactive)
        order = "created_at, id" + (f" LIMIT {int(limit)}" if limit else "")
        return self._records(where, params, order)

    def active_for(self, user: str, subjects: Iterable[str] = ()) -> list[MemoryRecord]:
        """Return the user's active memories about any of `subjects`."""
        subjects = [s for s in subjects if s]
        if not subjects:
            return []
        sql, params = self.dialect.any_of("subject", subjects)
        return self._records(f"user_id = {self.dialect.mark} AND status = 'active' AND {sql}", [user, *params])

    def self_names(self, user: str) -> list[str]:
        """Return the names the user goes by, from their active name memories."""
        rows = self._run(f"SELECT DISTINCT value FROM memories WHERE user_id = {self.dialect.mark} AND status = "
                         "'active' AND subject = 'user' AND attribute = 'name' AND value IS NOT NULL", [user])
        return [r[0] for r in rows.fetchall()]

    def expired(self, now: datetime, user: str | None = None) -> list[MemoryRecord]:
        """Return active, unpinned memories whose TTL has passed at `now`."""
        where, params = self._where(user, None, active_only=True)
        return self._records(where + f" AND NOT pinned AND expires_at IS NOT NULL AND expires_at <= {self.dialect.mark}",
                             [*params, naive(now)])

    # ----------------------------------------------------------------- small updates
    def _writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only; open it without read_only=True to write")

    def _insertable(self, records: Sequence[MemoryRecord], vectors: Any) -> np.ndarray:
        """Return `vectors` as float32 after checking the store is writable, one vector a record and storable texts."""
        self._writable()
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(records), self.dim):
            raise InvalidInput(f"expected {len(records)} vectors of dimension {self.dim}, got shape {vectors.shape}")
        for r in records:
            check_text(r.text, "memory text")
        return vectors

    def analyse_ahead(self, texts: Iterable[str]) -> None:
        """Do nothing: lexical analysis runs in SQL at write and search (DuckDB overrides this)."""

    def hold_memories(self) -> Any:
        """Return a no-op context: memories are written at once (DuckDB overrides this, see `store.held`)."""
        return nullcontext()

    def _writing(self, ids: list[str]) -> AbstractContextManager[Any]:
        """What every write of the rows of memories `ids` runs inside: nothing here; an engine that keeps
        records in process forgets theirs before and after (DuckDB's `store.cache`)."""
        return nullcontext()

    def set_status(self, memory_id: str, status: str, *, reason: str, at: datetime,
                   successor: str | None = None) -> str:
        """Change one memory's status and return the old one (callers write the event in the same transaction)."""
        self._writable()
        q = self.dialect.mark
        with self._writing([memory_id]), self._status_transaction():
            old = self._run(f"SELECT status FROM memories WHERE id = {q}{self.dialect.for_update}",
                            [memory_id]).fetchone()
            if old is None:
                raise NotFound(f"no memory with id {memory_id!r}")
            self._run(f"UPDATE memories SET status = {q}, status_reason = {q}, status_at = {q}, successor_id = {q} "
                      f"WHERE id = {q}", [status, reason, naive(at), successor, memory_id])
        self._status_changed([memory_id], status == "active")
        return old[0]

    def _status_transaction(self) -> Any:
        """What `set_status` runs in: nothing of its own by default (callers hold the transaction)."""
        return nullcontext()

    def _status_changed(self, ids: list[str], active: bool) -> None:
        """Follow a status change of `ids` outside the database (an engine's in-process indexes)."""

    def corroborate(self, memory_id: str, at: datetime) -> None:
        """Count one more corroboration of a memory, valid from `at` at the latest."""
        q = self.dialect.mark
        with self._writing([memory_id]):
            self._run(f"UPDATE memories SET corroborations = corroborations + 1, valid_from = greatest(valid_from, "
                      f"{q}) WHERE id = {q}", [naive(at), memory_id])

    def touch(self, ids: list[str], at: datetime) -> None:
        """Reinforce recalled memories: one UPDATE for the whole pack (nothing on a read-only store)."""
        if not ids or self.read_only:
            return
        sql, params = self.dialect.any_of("id", ids)
        with self._lock, self._writing(ids):  # readers on other cursors touch too: one UPDATE at a time
            self._run(f"UPDATE memories SET access_count = access_count + 1, last_accessed = {self.dialect.mark} "
                      f"WHERE {sql}", [naive(at), *params])

    def flush_touches(self) -> int:
        """Write touches that wait to the table; here every touch is written at once, so none wait: return 0."""
        return 0

    def set_expiry(self, memory_id: str, expires_at: datetime | None) -> None:
        """Set (or clear, with None) when a memory's TTL runs out."""
        q = self.dialect.mark
        with self._writing([memory_id]):
            self._run(f"UPDATE memories SET expires_at = {q} WHERE id = {q}", [naive(expires_at), memory_id])

    def set_importance(self, memory_id: str, importance: float) -> None:
        """Set one memory's importance (approved consolidation); callers write the event in the same transaction."""
        self._writable()
        q = self.dialect.mark
        with self._writing([memory_id]):
            if self._run(f"SELECT count(*) FROM memories WHERE id = {q}", [memory_id]).fetchone()[0] == 0:
                raise NotFound(f"no memory with id {memory_id!r}")
            self._run(f"UPDATE memories SET importance = {q} WHERE id = {q}",
                      [min(1.0, max(0.0, float(importance))), memory_id])

    # ----------------------------------------------------------------- events, links, turns
    def events(self, memory_id: str) -> list[Event]:
        """Return the events of a memory, and those naming it as the other memory, in the order they happened."""
        q = self.dialect.mark
        rows = self._run(f"SELECT {EVENT_COLS} FROM events WHERE memory_id = {q} OR other_id = {q} "
                         f"ORDER BY ts, {self.dialect.seq}", [memory_id, memory_id]).fetchall()
        return [event_of(r) for r in rows]

    def links(self, ids: list[str], kinds: tuple[str, ...] = ("supersedes", "because", "refers_to")) -> list[Link]:
        """Return the links of those kinds from or to any of `ids`, oldest first."""
        if not ids:
            return []
        d = self.dialect
        (src, src_p), (dst, dst_p), (kind, kind_p) = d.any_of("src", ids), d.any_of("dst", ids), d.any_of("kind", kinds)
        rows = self._run(f"SELECT {LINK_COLS} FROM links WHERE ({src} OR {dst}) AND {kind} ORDER BY ts",
                         [*src_p, *dst_p, *kind_p]).fetchall()
        return [link_of(r) for r in rows]

    def follows(self, ids: list[str]) -> list[Link]:
        """Return the `follows` links (a session's turns in order) from or to any of `ids`, oldest first."""
        return self.links(ids, ("follows",))

    def turn(self, turn_id: str) -> Turn:
        """Return one recorded turn, or raise NotFound."""
        row = self._run(f"SELECT {TURN_COLS} FROM turns WHERE id = {self.dialect.mark}", [turn_id]).fetchone()
        if row is None:
            raise NotFound(f"no turn with id {turn_id!r}")
        return turn_of(row)

    def recent_turns(self, user: str, session: str | None, limit: int) -> list[Turn]:
        """Return the last `limit` turns of a user's session, oldest first."""
        d = self.dialect
        rows = self._run(f"SELECT {TURN_COLS} FROM turns WHERE user_id = {d.mark} AND session IS NOT DISTINCT FROM "
                         f"{d.text_mark} ORDER BY ts DESC, {d.seq} DESC LIMIT {d.mark}", [user, session, limit])
        return [turn_of(r) for r in reversed(rows.fetchall())]

    def turns(self, user: str | None = None) -> list[Turn]:
        """Return the turns of `user` (all users when None), oldest first."""
        where = f"user_id = {self.dialect.mark}" if user else "TRUE"
        rows = self._run(f"SELECT {TURN_COLS} FROM turns WHERE {where} ORDER BY ts, id", [user] if user else [])
        return [turn_of(r) for r in rows.fetchall()]

    def turns_before(self, turn: Turn, limit: int) -> list[Turn]:
        """Return the last `limit` turns of `turn`'s session stored before it (by time, then order stored), oldest first."""
        d = self.dialect
        rows = self._run(
            f"SELECT {TURN_COLS} FROM turns WHERE user_id = {d.mark} AND session IS NOT DISTINCT FROM {d.text_mark} "
            f"AND (ts < {d.mark} OR (ts = {d.mark} AND {d.seq} < (SELECT {d.seq} FROM turns WHERE id = {d.mark}))) "
            f"ORDER BY ts DESC, {d.seq} DESC LIMIT {d.mark}",
            [turn.user, turn.session, naive(turn.at), naive(turn.at), turn.id, limit])
        return [turn_of(r) for r in reversed(rows.fetchall())]

    def pending_turns(self, user: str | None = None) -> list[Turn]:
        """Return the turns recorded and never processed (no outcome), of `user` or all, in the order stored."""
        mine, params = (f"user_id = {self.dialect.mark} AND", [user]) if user is not None else ("", [])
        rows = self._run(f"SELECT {TURN_COLS} FROM turns WHERE {mine} NOT EXISTS (SELECT 1 FROM turn_outcomes o "
                         f"WHERE o.turn_id = turns.id) ORDER BY ts, {self.dialect.seq}", params)
        return [turn_of(r) for r in rows.fetchall()]

    def turn_outcomes(self, turn_id: str) -> list[TurnOutcome]:
        """Return what became of a turn, in the order it was recorded (none: never processed)."""
        rows = self._run(f"SELECT {OUTCOME_COLS} FROM turn_outcomes WHERE turn_id = {self.dialect.mark} "
                         f"ORDER BY ts, {self.dialect.seq}", [turn_id])
        return [outcome_of(r) for r in rows.fetchall()]

    # ----------------------------------------------------------------- imports (mnemo.portable)
    def existing(self, table: str, ids: Sequence[str]) -> set[str]:
        """Return which of `ids` are already in `table` ("turns", "memories" or "events"): imports refuse clashes."""
        if table not in ("turns", "memories", "events"):
            raise InvalidInput(f"existing() checks turns, memories or events, not {table!r}")
        if not ids:
            return set()
        sql, params = self.dialect.any_of("id", list(ids))
        return {r[0] for r in self._run(f"SELECT DISTINCT id FROM {table} WHERE {sql}", params).fetchall()}

    def existing_links(self, links: Sequence[Link]) -> set[tuple[str, str, str, datetime | None]]:
        """Return the (src, dst, kind, at) of `links` already stored, with `at` as aware UTC."""
        if not links:
            return set()
        sql, params = self.dialect.any_of("src", list({lk.src for lk in links}))
        rows = self._run(f"SELECT {LINK_COLS} FROM links WHERE {sql}", params).fetchall()
        return {(lk.src, lk.dst, lk.kind, lk.at) for lk in map(link_of, rows)}

    # ----------------------------------------------------------------- stats
    @property
    def schema_version(self) -> int:
        """The version of the store's schema (`rows.SCHEMA_VERSION` once migrated)."""
        return int(self._meta()["schema_version"])

    def _meta(self) -> dict[str, str]:
        raise NotImplementedError

    def _index_stats(self) -> dict[str, Any]:
        """What `stats` says about the similarity index, if the backend keeps one."""
        return {}

    def stats(self, user: str | None = None) -> dict[str, Any]:
        """Return the store's schema, embedder and counts of memories (by status), turns, ...

        For the whole store also where it lives and its index; for one `user`, that user's counts only
        (by status, active by kind, turns), and nothing about other users or where the store lives.
        """
        about = {"schema_version": self.schema_version, "embedder": self.embedder, "dim": self.dim}
        if user is not None:
            return {"user": user, **about, **self._user_counts(user)}
        return {"path": self.path, **about, **self._index_stats(), **self._counts()}

    def _user_counts(self, user: str) -> dict[str, Any]:
        q = self.dialect.mark
        by_status = dict(self._run(f"SELECT status, count(*) FROM memories WHERE user_id = {q} GROUP BY status",
                                   [user]).fetchall())
        by_kind = dict(self._run(f"SELECT kind, count(*) FROM memories WHERE user_id = {q} AND status = 'active' "
                                 "GROUP BY kind", [user]).fetchall())
        turns = self._run(f"SELECT count(*) FROM turns WHERE user_id = {q}", [user]).fetchone()[0]
        return {"memories": sum(by_status.values()), "by_status": by_status, "active_by_kind": by_kind,
                "turns": turns}

    def _counts(self) -> dict[str, Any]:
        by_status = dict(self._run("SELECT status, count(*) FROM memories GROUP BY status").fetchall())
        users, turns, events, links = self._run(
            "SELECT (SELECT count(DISTINCT user_id) FROM memories), (SELECT count(*) FROM turns), "
            "(SELECT count(*) FROM events), (SELECT count(*) FROM links)").fetchone()
        return {"memories": sum(by_status.values()), "by_status": by_status, "users": users, "turns": turns,
                "events": events, "links": links}
