"""The rows both store engines keep: column lists, and the conversions between rows and model values.

Times are stored as naive UTC (neither engine keeps a zone) and come back aware;
`refs`, `meta` and `evidence` are stored as a text list and JSON text. Nothing here
runs SQL: these are the values the shared queries (`store.sql`) read and write.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timezone
from typing import Any, NamedTuple

from .. import validate
from ..errors import EmbedderMismatch, StoreError
from ..model import Event, Link, MemoryRecord, Turn, TurnOutcome, context_of

SCHEMA_VERSION = 5  # both engines number their migrations alike and move together
# Columns of `memories` in the order of MemoryRecord fields (user -> user_id, references -> refs); the
# vector column `embedding` follows them in both engines.
MEM_COLS = [f.name for f in fields(MemoryRecord)]
SQL_COLS = ["user_id" if c == "user" else "refs" if c == "references" else c for c in MEM_COLS]
TIMES = frozenset({"created_at", "valid_from", "last_accessed", "expires_at", "status_at"})
# PostgreSQL types of the memories columns in `SQL_COLS` order, then the vector: what binary COPY sends.
PG_MEMORY_TYPES = [
    "timestamp" if col in TIMES else {"refs": "text[]", "importance": "float8", "pinned": "bool",
                                       "single_valued": "bool", "access_count": "int4",
                                       "corroborations": "int4"}.get(col, "text")
    for col in SQL_COLS
] + ["vector"]
TURN_COLS = "id, user_id, text, ts, session, agent, role, meta"
EVENT_COLS = "id, memory_id, ts, action, status_from, status_to, reason, evidence, other_id"
LINK_COLS = "src, dst, kind, ts"
OUTCOME_COLS = "turn_id, ts, outcome, detail"
# Version 4 keeps what became of each turn; the turns a store already held were processed (or lost) before.
MIGRATED = "recorded before turn outcomes were kept (schema 4)"


def searched_text(r: MemoryRecord) -> str:
    """Return the text lexical search indexes for a memory: its own words, then its context (`model.context_of`)."""
    context = context_of(r.text, r.meta)
    return f"{r.text} {context}" if context else r.text


def naive(dt: datetime | None) -> datetime | None:
    """Return `dt` as naive UTC for storage (the store keeps UTC without a zone)."""
    if dt is None:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


def aware(dt: datetime | None) -> datetime | None:
    """Return a stored naive-UTC time as an aware one."""
    return None if dt is None else dt.replace(tzinfo=timezone.utc)


def check_text(value: str, what: str = "text") -> str:
    """Return `value` as storable text or raise InvalidInput (NUL and lone surrogates cannot be stored).

    The last line of defence: the library checks its input first (`mnemo.validate`, the same rule).
    """
    return validate.storable(value, what)


def record_of(row: Sequence[Any]) -> MemoryRecord:
    """Return the memory of a row read in `SQL_COLS` order."""
    values = dict(zip(MEM_COLS, row, strict=True))
    for name in TIMES:
        values[name] = aware(values[name])
    values["references"] = tuple(values["references"] or ())
    values["meta"] = json.loads(values["meta"] or "{}")
    return MemoryRecord(**values)


def record_values(r: MemoryRecord) -> list[Any]:
    """Return a memory's column values in `SQL_COLS` order, ready to store."""
    values = []
    for name in MEM_COLS:
        value = getattr(r, name)
        if name in TIMES:
            value = naive(value)
        elif name == "references":
            value = list(value)
        elif name == "meta":
            value = json.dumps(value, default=str)
        values.append(value)
    return values


def turn_of(row: Sequence[Any]) -> Turn:
    """Return the turn of a row read in `TURN_COLS` order."""
    return Turn(id=row[0], user=row[1], text=row[2], at=aware(row[3]), session=row[4], agent=row[5], role=row[6],
                meta=json.loads(row[7] or "{}"))


def turn_values(t: Turn) -> list[Any]:
    """Return a turn's values in `TURN_COLS` order, ready to store."""
    return [t.id, t.user, check_text(t.text, "turn text"), naive(t.at), t.session, t.agent, t.role,
            json.dumps(t.meta, default=str)]


def event_of(row: Sequence[Any]) -> Event:
    """Return the event of a row read in `EVENT_COLS` order."""
    return Event(row[0], row[1], aware(row[2]), row[3], row[4], row[5], row[6], json.loads(row[7] or "{}"), row[8])


def event_values(e: Event) -> list[Any]:
    """Return an event's values in `EVENT_COLS` order, ready to store."""
    return [e.id, e.memory_id, naive(e.at), e.action, e.status_from, e.status_to, e.reason,
            json.dumps(e.evidence, default=str), e.other_id]


def link_of(row: Sequence[Any]) -> Link:
    """Return the link of a row read in `LINK_COLS` order."""
    return Link(row[0], row[1], row[2], aware(row[3]))


def link_values(lk: Link) -> list[Any]:
    """Return a link's values in `LINK_COLS` order, ready to store."""
    return [lk.src, lk.dst, lk.kind, naive(lk.at)]


def outcome_of(row: Sequence[Any]) -> TurnOutcome:
    """Return the turn outcome of a row read in `OUTCOME_COLS` order."""
    return TurnOutcome(row[0], aware(row[1]), row[2], row[3] or "")


def outcome_values(o: TurnOutcome) -> list[Any]:
    """Return a turn outcome's values in `OUTCOME_COLS` order, ready to store."""
    return [o.turn_id, naive(o.at), o.outcome, check_text(o.detail, "outcome detail")]


class Table(NamedTuple):
    """How a table's rows are read and written: its columns in row order, row -> value, value -> row."""

    cols: str
    of: Callable[[Sequence[Any]], Any]
    values: Callable[[Any], list[Any]]


MEMORIES = Table(", ".join(SQL_COLS), record_of, record_values)  # without the vector column
TURNS = Table(TURN_COLS, turn_of, turn_values)
EVENTS = Table(EVENT_COLS, event_of, event_values)
LINKS = Table(LINK_COLS, link_of, link_values)
OUTCOMES = Table(OUTCOME_COLS, outcome_of, outcome_values)


def new_meta(embedder: str, dim: int) -> list[tuple[str, str]]:
    """Return the `store_meta` rows of a new store: its embedder, dimension, schema version 0 and birth time."""
    return [("embedder", embedder), ("dim", str(dim)), ("schema_version", "0"),
            ("created_at", datetime.now(timezone.utc).isoformat())]


def check_embedder(meta: Mapping[str, str], embedder: str, dim: int, path: str) -> None:
    """Raise EmbedderMismatch unless the store at `path` (its `store_meta`) was written with `embedder` and `dim`."""
    if meta.get("embedder") != embedder or int(meta.get("dim", -1)) != dim:
        raise EmbedderMismatch(
            f"{path} was written with embedder {meta.get('embedder')!r} ({meta.get('dim')} dims), "
            f"not {embedder!r} ({dim} dims); open it with embedder={meta.get('embedder')!r} "
            "or export and re-import it into a new store"
        )


def check_version(version: int, path: str) -> None:
    """Raise StoreError when a store's schema is newer than this mnemo knows."""
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} has schema version {version}, newer than this mnemo ({SCHEMA_VERSION}); upgrade mnemo")
