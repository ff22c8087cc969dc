"""The values mnemo passes around: memories, turns, events, plans, reports, recalls.

Everything here is a plain dataclass with no I/O. The store turns rows into these,
the pure stages (`extract`, `plan_writes`, `pack`, `salience`) take and return them.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_last_ms, _seq = 0, 0
_id_lock = threading.Lock()


def new_id(prefix: str = "m") -> str:
    """Return a fresh id such as 'm-0193a1f2c3d40000-9c0d1e4b' (memories "m", events "e", turns "t").

    Ids sort in the order they were made, as UUIDv7's do: milliseconds since the epoch, then a
    counter within the millisecond (this process's), then random bits for uniqueness across
    processes. Rows made at one instant (a batch under a simulated clock) are ordered by id, so
    the order they were written in is the order they are read back in, run after run.
    """
    global _last_ms, _seq
    with _id_lock:
        ms = max(time.time_ns() // 1_000_000, _last_ms)
        _seq = _seq + 1 if ms == _last_ms else 0
        if _seq > 0xFFFF:  # more than 65,536 ids in one millisecond: borrow the next one
            ms, _seq = ms + 1, 0
        _last_ms = ms
        return f"{prefix}-{ms:012x}{_seq:04x}-{secrets.token_hex(4)}"


# What a memory was said with: the sentences around it in its turn (extract.said.said_with), kept in its meta,
# searched beside its words by both retrievers and never shown (store.rows.searched_text, write.searched_vectors).
CONTEXT_KEY = "context"
# The words of what a memory corrected, its values left out (`write.corrected_words`): part of its context, and
# what recall reads it as mentioning and covering beside its own words (`topic_of`).
CORRECTS_KEY = "corrects"


def context_of(text: str, meta: dict[str, Any] | None) -> str | None:
    """Return what a memory or candidate with `text` was said with, when its meta holds words other than its own."""
    context = (meta or {}).get(CONTEXT_KEY)
    return context if isinstance(context, str) and context and context != text else None


def topic_of(text: str, meta: dict[str, Any] | None) -> str:
    """Return the words a memory is read as saying: its text, and the words of what it corrected."""
    corrects = (meta or {}).get(CORRECTS_KEY)
    return f"{text} {corrects}" if isinstance(corrects, str) and corrects else text


KINDS = ("semantic", "procedural", "episodic")
CATEGORIES = (
    "fact",
    "profile",
    "preference",
    "decision",
    "change",
    "failure",
    "lesson",
    "event",
    "deadline",
    "instruction",
    "routine",
    "note",
)
STATUSES = ("active", "superseded", "forgotten", "decayed")
LINK_KINDS = ("supersedes", "because", "refers_to", "follows")  # follows: said right after (one session, in order)
# Where a memory came from, most authoritative first: the audit's resolution ladder uses this order.
SOURCES = ("structured", "tool", "user", "derived")
OPS = ("add", "corroborate", "duplicate", "supersede", "forget", "ignore")
CONFIDENCE = ("certain", "vague", "unknown")


@dataclass(frozen=True)
class Turn:
    """One raw input, recorded before anything is extracted from it."""

    id: str
    user: str
    text: str
    at: datetime
    session: str | None = None
    agent: str | None = None
    role: str = "user"
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """A memory proposed by extraction, not yet reconciled or stored."""

    text: str  # the memory as a self-contained sentence
    kind: str = "semantic"  # semantic | procedural | episodic
    category: str = "fact"  # see CATEGORIES
    subject: str | None = None  # who or what it is about ("user", "IC-MC-44")
    attribute: str | None = None  # normalised attribute name ("lead_time", "city")
    value: str | None = None  # normalised value ("21 days", "Lisbon")
    record_id: str | None = None  # an explicit record id named in the text
    references: tuple[str, ...] = ()  # other record ids or memory ids it refers to
    importance: float = 0.5  # in [0, 1]
    single_valued: bool = True  # a new value replaces the old one
    negated: bool = False  # "I no longer ...", "I don't like ...": retracts `value`
    old_value: str | None = None  # "moved from 21 to 35": the value it corrects, if stated
    cause: str | None = None  # "because the migration failed": the stated reason
    command: str | None = None  # "forget" for an explicit forget request, else None
    pinned: bool = False  # "remember that ..." may pin
    source: str = "user"  # see SOURCES
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryRecord:
    """A stored memory, active or tombstoned. Tombstones keep their row."""

    id: str
    user: str
    text: str
    kind: str = "semantic"
    category: str = "fact"
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    record_id: str | None = None
    references: tuple[str, ...] = ()
    importance: float = 0.5
    pinned: bool = False
    single_valued: bool = True
    agent: str | None = None
    session: str | None = None
    turn_id: str | None = None
    source: str = "user"
    created_at: datetime | None = None
    valid_from: datetime | None = None
    last_accessed: datetime | None = None
    expires_at: datetime | None = None  # TTL by importance tier; None = permanent
    access_count: int = 0
    corroborations: int = 0
    status: str = "active"
    status_reason: str | None = None
    status_at: datetime | None = None
    successor_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.status == "active"


@dataclass(frozen=True)
class Event:
    """One status change of a memory, with its reason and evidence."""

    id: str
    memory_id: str
    at: datetime
    action: str  # created | corroborated | superseded | forgotten | decayed | restored | accessed | reviewed
    status_from: str | None
    status_to: str | None
    reason: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    other_id: str | None = None  # the successor, the corroborating turn, ...


@dataclass(frozen=True)
class Link:
    """A typed edge between two memories: src supersedes / because / refers_to / follows dst."""

    src: str
    dst: str
    kind: str
    at: datetime | None = None


@dataclass(frozen=True)
class Action:
    """One step of a write plan, decided by `plan_writes` and applied by the store."""

    op: str  # see OPS
    candidate: Candidate | None = None
    target_id: str | None = None  # the existing memory it corroborates, duplicates, supersedes or forgets
    reason: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)  # scores, thresholds, judge verdict
    because_id: str | None = None  # an existing memory (a failure) that caused this change


@dataclass(frozen=True)
class Supersession:
    """An old memory replaced by a new one, and why."""

    old: MemoryRecord
    new: MemoryRecord
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class WriteReport:
    """What one `remember` did: every candidate ends up in exactly one list."""

    turn_id: str
    added: list[MemoryRecord] = field(default_factory=list)
    corroborated: list[tuple[MemoryRecord, dict[str, Any]]] = field(default_factory=list)
    duplicates: list[tuple[MemoryRecord, dict[str, Any]]] = field(default_factory=list)
    superseded: list[Supersession] = field(default_factory=list)
    forgotten: list[tuple[MemoryRecord, str]] = field(default_factory=list)
    ignored: list[tuple[Candidate, str]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.superseded or self.forgotten or self.corroborated)


@dataclass(frozen=True)
class TurnOutcome:
    """What became of a recorded turn; a turn with none was recorded and never processed (`mnemo.recover`).

    outcome: written (the write path applied what it said) | recovered (processed after its
    writer died) | skipped | failed | imported | migrated (recorded before outcomes were kept).
    """

    turn_id: str
    at: datetime
    outcome: str
    detail: str = ""

    @classmethod
    def of(cls, report: WriteReport, at: datetime, outcome: str = "written") -> TurnOutcome:
        """Return the outcome of a turn whose write produced `report`, with what it did as the detail."""
        parts = [(len(report.added), "added"), (len(report.superseded), "superseded"),
                 (len(report.corroborated), "corroborated"), (len(report.duplicates), "duplicates"),
                 (len(report.forgotten), "forgotten"), (len(report.ignored), "ignored")]
        return cls(report.turn_id, at, outcome, ", ".join(f"{n} {what}" for n, what in parts if n) or "nothing")


class Forgetting(list):
    """The memories a forget request took (or would take): a list, with why each matched and what was near.

    `why[memory_id]` is how the request named it ("entity+slot (exact)", "marks", "terms", ...);
    when nothing matched, the list is empty, `message` says so and `nearest` holds the closest
    memories ({"memory_id", "text", "sim"}) so a caller can ask instead of guessing. `kept` holds, for a
    memory taken because it was said in the same words as a named one, what it said besides the forgotten
    value: (the derived memory to write, the memory it comes from).
    """

    def __init__(self, records=(), why: dict[str, str] | None = None, nearest: list[dict[str, Any]] | None = None,
                 message: str = "", kept: list[tuple[Candidate, MemoryRecord]] | None = None):
        super().__init__(records)
        self.why = dict(why or {})
        self.nearest = list(nearest or [])
        self.message = message
        self.kept = list(kept or [])


@dataclass(frozen=True)
class Scored:
    """A recall candidate with its component scores."""

    memory: MemoryRecord
    score: float
    scores: dict[str, float] = field(default_factory=dict)  # dense, bm25, fused, recency, salience, prior
    tokens: int = 0


@dataclass(frozen=True)
class Packed:
    """A memory placed in the recall pack."""

    memory: MemoryRecord
    score: float
    tokens: int
    scores: dict[str, float] = field(default_factory=dict)
    note: str | None = None  # e.g. "corrected from X on DATE, because Y (not current)"

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def text(self) -> str:
        return self.memory.text

    @property
    def kind(self) -> str:
        return self.memory.kind


@dataclass(frozen=True)
class TraceEntry:
    """Why one candidate was packed or left out."""

    memory_id: str
    text: str
    included: bool
    reason: str  # packed | pinned | budget | quota | veto | inactive | below_threshold | expansion | same_text
    scores: dict[str, float] = field(default_factory=dict)
    detail: str = ""


@dataclass(frozen=True)
class Citation:
    """Where a packed memory came from."""

    memory_id: str
    session: str | None
    turn_id: str | None
    at: datetime | None
    source: str


@dataclass
class Recall:
    """The answer to `recall`: a pack under a budget, with confidence, citations and trace."""

    query: str
    memories: list[Packed]
    confidence: str  # certain | vague | unknown
    citations: list[Citation]
    trace: list[TraceEntry]
    budget_tokens: int
    tokens_used: int
    history: list[Packed] = field(default_factory=list)  # superseded context reached by expansion, not current
    message: str = ""  # "not in the record" when confidence is unknown
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self.memories]
