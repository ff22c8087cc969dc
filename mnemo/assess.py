"""Trust assessment of a recall pack: re-ground what can be checked, score the rest, act or escalate.

    a = mem.assess(r, tools={"lead_time": erp_lead_time})     # or a callable, an SQLTool, or a list
    a.verdict      # "act" | "escalate"
    a.trust        # min trust over the load-bearing claims
    a.claims       # one Claim per packed memory: kind, status, trust, tool answer, provenance factors
    a.pack         # the Recall with re-grounded values substituted
    a.regrounded   # Supersessions written with reason "re-grounded"

A claim is *verifiable* when a system of record could check it now (a lead time,
a stock level, an invoice amount of a named record), else *unverifiable*
(preferences, routines, hearsay about people). Verifiable claims go to the first
registered tool that covers them; unverifiable ones are scored from provenance.

The tool protocol is one callable: `tool(memory: MemoryRecord) -> value | None`,
where None means "the system of record does not know this record". An object may
also carry `attributes` (the attributes it covers) and `name`. A mapping
`{"lead_time": fn}` is shorthand for tools keyed by attribute, each called with the
record key (`memory.record_id or memory.subject`). `SQLTool` reads a DuckDB table.

Fail closed: a tool that raises, times out, or has no answer leaves its claim
"unverified" with trust 0, and a verifiable claim is always load-bearing, so the
pack escalates. A claim no registered tool covers is "unchecked" and scored from
provenance like an unverifiable one (nobody was asked).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Config, TrustConfig
from .decay import age_days
from .errors import InvalidInput
from .model import Action, Candidate, MemoryRecord, Packed, Recall, Supersession
from .normalise import RECORD_ID, normalise_value, parse_date, value_key

if TYPE_CHECKING:
    from .embed import Embedder
    from .store import Store

VERDICTS = ("act", "escalate")
CLAIM_STATUSES = ("verified", "regrounded", "unverified", "unchecked", "unverifiable")
# Prior trust by where a memory came from (model.SOURCES order): a record outranks hearsay.
SOURCE_PRIOR = {"structured": 1.0, "tool": 0.95, "user": 0.9, "derived": 0.75}
# Categories that describe tastes, habits and judgements: no system of record holds them.
SUBJECTIVE = frozenset({"preference", "profile", "routine", "instruction", "lesson", "decision",
                        "failure", "change", "event", "note"})
# Categories that drift slowly, so their confirmations age on the longer `stable_half_life_days`.
STABLE = frozenset({"preference", "profile", "routine", "instruction"})
# Attributes an ERP, ledger or inventory holds for a named record, whatever the subject's spelling.
CHECKABLE = frozenset({"lead_time", "stock", "amount", "price", "quantity", "status", "deadline", "eta",
                       "payment_terms", "min_order_quantity", "capacity", "version", "balance", "supplier",
                       "owner", "discount", "currency", "start_date", "end_date", "launch_date",
                       "release_date", "budget", "due_date", "credit_limit"})
# Units a value may carry, as (dimension, scale to the dimension's base unit).
UNITS = {
    **{u: ("time", 1.0) for u in ("d", "day", "days", "calendar days")},
    **{u: ("time", 7.0) for u in ("w", "wk", "wks", "week", "weeks")},
    **{u: ("time", 1 / 24) for u in ("h", "hr", "hrs", "hour", "hours")},
    **{u: ("count", 1.0) for u in ("pc", "pcs", "piece", "pieces", "unit", "units", "item", "items", "ea")},
    **{u: ("percent", 1.0) for u in ("%", "percent", "pct")},
    **{u: ("mass", 1.0) for u in ("kg", "kilogram", "kilograms")},
    "g": ("mass", 0.001), "t": ("mass", 1000.0),
}
# How a bare number is written once its dimension is known (the scale-1 unit of each dimension).
BASE_UNIT = {"time": "days", "count": "units", "percent": "%", "mass": "kg"}
_QUANTITY = re.compile(r"^(?P<num>[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\s*(?P<unit>[^\d\s].*?)?$", re.I)
# A tool call runs at most this many at once; packs are small, so this is rarely reached.
MAX_PARALLEL_TOOLS = 16


# ----------------------------------------------------------------- values
def quantity(value: Any) -> tuple[float, str | None, str | None] | None:
    """Return (number in base unit, dimension, unit as written) for "21 days", "3 weeks", 21; None if not one."""
    text = normalise_value(answer_text(value)) or ""
    m = _QUANTITY.match(text.strip())
    if not m:
        return None
    number = float(m["num"])
    raw = (m["unit"] or "").strip().rstrip(".") or None
    if raw is None:
        return number, None, None
    # An unknown unit (a currency code, "km") is its own dimension, compared case-insensitively.
    dim, scale = UNITS.get(raw.lower(), (raw.lower(), 1.0))
    return number * scale, dim, raw


def answer_text(value: Any) -> str | None:
    """Return a tool answer or memory value as text (21.0 -> "21", dates as ISO); None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return str(value)


def values_agree(a: Any, b: Any, rel_tol: float = 1e-9) -> bool:
    """Return True when two values say the same thing: "21 days" == "21 d" == "21" == "3 weeks".

    Dates compare as dates, quantities by number (to `rel_tol`, so float noise agrees)
    with units converted and a missing unit taken to be the other's; anything else by
    its normalised text. An unknown value (None) agrees with nothing.
    """
    ta, tb = answer_text(a), answer_text(b)
    if ta is None or tb is None:
        return False
    da, db = parse_date(ta, None)[0], parse_date(tb, None)[0]
    if da is not None and db is not None:
        return da == db
    qa, qb = quantity(ta), quantity(tb)
    if qa is not None and qb is not None:
        same_dim = qa[1] is None or qb[1] is None or qa[1] == qb[1]
        return same_dim and math.isclose(qa[0], qb[0], rel_tol=rel_tol, abs_tol=1e-9)
    return value_key(ta) == value_key(tb)


def render_value(answer: Any, old_value: str | None) -> str:
    """Return a tool answer as a memory value, giving a bare number the unit `values_agree` reads it in.

    A bare number is in its dimension's base unit (42 against "3 weeks" is 42 days,
    not 42 weeks); for a unit mnemo does not know (a currency) it takes the old unit.
    """
    text = answer_text(answer) or ""
    new_q, old_q = quantity(text), quantity(old_value)
    if new_q is not None and new_q[2] is None and old_q is not None and old_q[2] is not None:
        return f"{text} {BASE_UNIT.get(old_q[1] or '', old_q[2])}"
    return text


def rewrite_text(memory: MemoryRecord, fresh: str) -> str:
    """Return the memory's sentence with the stale value replaced by `fresh`."""
    old = memory.value or ""
    if old and old.lower() in memory.text.lower():
        at = memory.text.lower().index(old.lower())
        return memory.text[:at] + fresh + memory.text[at + len(old):]
    what = (memory.attribute or "value").replace("_", " ")
    return f"The {what} of {memory.record_id or memory.subject or 'the record'} is {fresh}."


# ----------------------------------------------------------------- claims (pure)
def classify_claim(memory: MemoryRecord) -> str:
    """Return "verifiable" when a system of record could check the memory now, else "unverifiable".

    Verifiable: an attribute and a value about a record that is not the user or the
    team, in an objective category, where the record has an id, the attribute is one
    systems of record hold (`CHECKABLE`), or the memory was itself read from one.
    """
    if not memory.attribute or memory.value is None or memory.category in SUBJECTIVE:
        return "unverifiable"
    subject = (memory.subject or "").lower()
    if subject in ("user", "team") or subject.startswith(("user's ", "team's ")):
        return "unverifiable"
    named = bool(memory.record_id) or bool(memory.subject and RECORD_ID.fullmatch(memory.subject))
    if named or memory.attribute in CHECKABLE or memory.source in ("structured", "tool"):
        return "verifiable"
    return "unverifiable"


def provenance_factors(memory: MemoryRecord, now: datetime, cfg: TrustConfig) -> dict[str, float]:
    """Return the provenance of a claim and the trust it earns, in [0, 1].

        age      = days since the memory was last stated or corroborated (valid_from)
        half     = half-life (stable categories: stable_half_life_days, else
                   confirmation_half_life_days) * (1 + corroborations)
        trust    = clip(SOURCE_PRIOR[source] * 0.5 ** (age / half)
                        - single_source_penalty if never corroborated)

    Recency and confirmation age share one clock: the store moves valid_from to the
    latest corroboration, so a re-confirmed claim is as fresh as its last confirmation.
    Each corroboration stretches the half-life, so agreeing sources age more slowly.
    """
    confirmed = memory.valid_from or memory.created_at
    age = age_days(confirmed, now)
    base = cfg.stable_half_life_days if memory.category in STABLE else cfg.confirmation_half_life_days
    corroborations = max(0, int(memory.corroborations))
    half = max(1e-9, base) * (1 + corroborations)
    prior = SOURCE_PRIOR.get(memory.source, SOURCE_PRIOR["derived"])
    penalty = cfg.single_source_penalty if corroborations == 0 else 0.0
    trust = min(1.0, max(0.0, prior * 0.5 ** (age / half) - penalty))
    return {"source_prior": prior, "corroborations": float(corroborations), "confirmation_age_days": age,
            "recency_days": age_days(memory.created_at, now), "half_life_days": half,
            "single_source_penalty": penalty, "trust": trust}


def provenance_trust(memory: MemoryRecord, now: datetime, cfg: TrustConfig) -> float:
    """Return the trust a claim earns from provenance alone (see `provenance_factors`)."""
    return provenance_factors(memory, now, cfg)["trust"]


@dataclass(frozen=True)
class Check:
    """What one tool said about one claim."""

    tool: str
    answer: Any = None  # the tool's value; None = it had no answer
    error: str | None = None  # the exception or "timed out after Ns": the claim stays unverified
    at: datetime | None = None
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class Claim:
    """One packed memory as a claim: whether it can be checked, what the check said, how far to trust it."""

    memory: MemoryRecord
    kind: str  # verifiable | unverifiable
    status: str  # see CLAIM_STATUSES
    trust: float
    load_bearing: bool
    check: Check | None = None
    fresh_value: str | None = None  # the system of record's value, when it disagreed
    provenance: dict[str, float] = field(default_factory=dict)


def ground(memory: MemoryRecord, check: Check | None) -> tuple[str, str | None]:
    """Return (status, fresh value) of a verifiable claim from its check; failures never verify."""
    if check is None:
        return "unchecked", None
    if check.error is not None or answer_text(check.answer) in (None, ""):
        return "unverified", None
    if values_agree(memory.value, check.answer):
        return "verified", None
    return "regrounded", render_value(check.answer, memory.value)


def judge_claim(memory: MemoryRecord, check: Check | None, now: datetime, cfg: TrustConfig) -> Claim:
    """Return the Claim a packed memory makes, given its tool check (None when no tool covered it)."""
    kind = classify_claim(memory)
    factors = provenance_factors(memory, now, cfg)
    if kind == "unverifiable":
        status, fresh = "unverifiable", None
    else:
        status, fresh = ground(memory, check)
    # A value the system of record just gave is as good as the record; a failed check is worth nothing.
    trust = {"verified": 1.0, "regrounded": 1.0, "unverified": 0.0}.get(status, factors["trust"])
    bearing = kind == "verifiable" or memory.pinned or memory.importance >= cfg.load_bearing_importance
    return Claim(memory, kind, status, trust, bearing, check if kind == "verifiable" else None, fresh, factors)


def pack_trust(claims: Sequence[Claim]) -> float:
    """Return the trust of a pack: the minimum over its load-bearing claims.

    With no load-bearing claim the answer rests on the top-ranked memory, so its
    trust stands for the pack; an empty pack has nothing to act on (0).
    """
    bearing = [c.trust for c in claims if c.load_bearing]
    if bearing:
        return min(bearing)
    return claims[0].trust if claims else 0.0


def decide(trust: float, cfg: TrustConfig) -> str:
    """Return "act" when pack trust reaches `cfg.act_threshold`, else "escalate"."""
    return "act" if trust >= cfg.act_threshold else "escalate"


# ----------------------------------------------------------------- tools
@dataclass(frozen=True)
class BoundTool:
    """A registered tool: its name, the callable, and the attributes it covers (None = any)."""

    name: str
    fn: Callable[[MemoryRecord], Any]
    attributes: frozenset[str] | None = None

    def covers(self, memory: MemoryRecord) -> bool:
        """Return True when this tool can be asked about `memory`."""
        return self.attributes is None or memory.attribute in self.attributes


def _keyed(attribute: str, fn: Callable[[str], Any]) -> BoundTool:
    name = f"{getattr(fn, 'name', None) or getattr(fn, '__name__', type(fn).__name__)}[{attribute}]"
    return BoundTool(name, lambda m: fn(m.record_id or m.subject), frozenset({attribute}))


def bind_tools(tools: Any) -> list[BoundTool]:
    """Return the tools a caller registered, in order: a callable, a mapping by attribute, or a list of them."""
    if tools is None:
        return []
    if isinstance(tools, BoundTool):
        return [tools]
    if isinstance(tools, Mapping):
        return [_keyed(str(attr), fn) for attr, fn in tools.items()]
    if callable(tools):
        attrs = getattr(tools, "attributes", None)
        name = getattr(tools, "name", None) or getattr(tools, "__name__", type(tools).__name__)
        return [BoundTool(str(name), tools, frozenset(attrs) if attrs is not None else None)]
    if isinstance(tools, Iterable) and not isinstance(tools, (str, bytes)):
        return [b for t in tools for b in bind_tools(t)]
    raise InvalidInput(f"tools must be a callable, a mapping of attribute to callable, or a list; got {tools!r}")


def run_checks(jobs: Sequence[tuple[MemoryRecord, BoundTool]], timeout_s: float,
               now: datetime) -> dict[str, Check]:
    """Return, by memory id, what each tool said; errors and timeouts become Check.error.

    Each call runs on its own daemon thread and is waited for at most `timeout_s`:
    concurrent.futures would join a hung worker at interpreter exit, and a hung tool
    must not hang the agent. A timed-out thread is abandoned, never trusted.
    """
    out: dict[str, Check] = {}
    for start in range(0, len(jobs), MAX_PARALLEL_TOOLS):
        batch = jobs[start:start + MAX_PARALLEL_TOOLS]
        results: dict[str, tuple[Any, str | None, float]] = {}

        def call(memory: MemoryRecord, tool: BoundTool, results=results) -> None:
            began = time.perf_counter()
            try:
                answer, error = tool.fn(memory), None
            # A tool is the caller's code talking to a remote system: any failure is "unverified".
            except Exception as exc:  # noqa: BLE001
                answer, error = None, f"{type(exc).__name__}: {exc}"
            results[memory.id] = (answer, error, time.perf_counter() - began)

        threads = [threading.Thread(target=call, args=job, daemon=True) for job in batch]
        deadline = time.perf_counter() + timeout_s
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.perf_counter()))
        for memory, tool in batch:
            got = results.get(memory.id)
            if got is None:
                out[memory.id] = Check(tool.name, None, f"timed out after {timeout_s:g}s", now, timeout_s)
            else:
                out[memory.id] = Check(tool.name, got[0], got[1], now, got[2])
    return out


class SQLTool:
    """A DuckDB table as the system of record: one row per record, one column per attribute.

        erp = SQLTool("erp.duckdb", "parts", key_col="part_no", attr_cols={"lead_time": "lead_time_days"})

    This class runs SQL outside mnemo/store/ on purpose: it queries the caller's system of
    record, never mnemo's store. A path is opened read-only; a connection you pass is
    only ever SELECTed from, through a cursor per call (tools run on worker threads).
    """

    def __init__(self, con_or_path: Any, table: str, key_col: str, attr_cols: Sequence[str] | Mapping[str, str],
                 *, name: str | None = None):
        import duckdb

        owned = isinstance(con_or_path, (str, Path))
        self._con = duckdb.connect(str(con_or_path), read_only=True) if owned else con_or_path
        self._owned = owned
        self._table = ".".join(_ident(part) for part in table.split("."))
        cols = dict(attr_cols) if isinstance(attr_cols, Mapping) else {c: c for c in attr_cols}
        have = {d[0] for d in self._con.execute(f"SELECT * FROM {self._table} LIMIT 0").description}
        missing = sorted({key_col, *cols.values()} - have)
        if missing:
            raise InvalidInput(f"table {table} has no column {', '.join(missing)}; it has {', '.join(sorted(have))}")
        self._key = _ident(key_col)
        self._cols = {attr: _ident(col) for attr, col in cols.items()}
        self.attributes = frozenset(cols)
        self.name = name or f"sql:{table}"

    @classmethod
    def from_rows(cls, rows: Mapping[str, Mapping[str, Any]], *, table: str = "records",
                  key_col: str = "record_key", name: str | None = None) -> SQLTool:
        """Return an SQLTool over an in-memory DuckDB table built from `rows` ({record key: {attribute: value}}).

        For a system of record held as data (a fixture, a labelled case): a column whose
        every value is an int is BIGINT, any other VARCHAR (values as text), a missing value
        NULL. The tool owns the connection, so after `close()` every call raises, as an
        unreachable database would.
        """
        import duckdb

        attrs = sorted({a for r in rows.values() for a in r})
        ints = {a for a in attrs if all(isinstance(r.get(a), int) for r in rows.values() if a in r)}
        cols = [f"{_ident(key_col)} VARCHAR", *(f"{_ident(a)} {'BIGINT' if a in ints else 'VARCHAR'}" for a in attrs)]
        con = duckdb.connect()
        con.execute(f"CREATE TABLE {_ident(table)} ({', '.join(cols)})")
        for key, r in rows.items():
            con.execute(f"INSERT INTO {_ident(table)} VALUES (?{', ?' * len(attrs)})",
                        [key, *[r.get(a) if a in ints or r.get(a) is None else str(r[a]) for a in attrs]])
        tool = cls(con, table, key_col, attrs, name=name)
        tool._owned = True
        return tool

    def __call__(self, memory: MemoryRecord) -> Any:
        """Return the record's current value of the memory's attribute; None when there is no such row."""
        col = self._cols.get(memory.attribute or "")
        key = memory.record_id or memory.subject
        if col is None or key is None:
            return None
        cur = self._con.cursor()
        try:
            rows = cur.execute(f"SELECT {col} FROM {self._table} WHERE upper(CAST({self._key} AS VARCHAR)) = "
                               "upper(?) LIMIT 2", [key]).fetchall()
        finally:
            cur.close()
        if len(rows) > 1:
            raise LookupError(f"{self.name}: more than one row for key {key!r}; the record is ambiguous")
        return rows[0][0] if rows else None

    def close(self) -> None:
        """Close the connection if this tool opened it."""
        if self._owned:
            self._con.close()


def _ident(name: str) -> str:
    """Return a double-quoted SQL identifier (columns are checked against the table before use)."""
    return '"' + name.replace('"', '""') + '"'


# ----------------------------------------------------------------- the stage
@dataclass(frozen=True)
class Assessment:
    """The verdict on one recall pack, with every claim and what re-grounding wrote."""

    verdict: str  # act | escalate
    trust: float
    claims: tuple[Claim, ...]
    pack: Recall
    regrounded: tuple[Supersession, ...] = ()
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def escalate(self) -> bool:
        return self.verdict == "escalate"


def assess(store: Store, embedder: Embedder, recall: Recall, tools: Any = None, *, cfg: Config,
           now: datetime) -> Assessment:
    """Return the Assessment of `recall` at `now`: check verifiable claims, supersede stale ones, score, decide.

    `cfg.trust` sets thresholds and the tool timeout; a re-grounded value is written through
    the write path (`cfg` whole) with its vector from `embedder`.
    """
    trust_cfg = cfg.trust
    bound = bind_tools(tools)
    jobs = []
    for p in recall.memories:
        if classify_claim(p.memory) == "verifiable":
            tool = next((b for b in bound if b.covers(p.memory)), None)
            if tool is not None:
                jobs.append((p.memory, tool))
    checks = run_checks(jobs, trust_cfg.tool_timeout_s, now)
    claims = tuple(judge_claim(p.memory, checks.get(p.id), now, trust_cfg) for p in recall.memories)
    packed: list[Packed] = []
    written: list[Supersession] = []
    for p, claim in zip(recall.memories, claims, strict=True):
        if claim.status != "regrounded":
            packed.append(p)
            continue
        new = _supersede(store, embedder, claim, cfg, now, written)
        note = f"re-grounded by {claim.check.tool} at {now.isoformat(timespec='seconds')}: was {p.memory.value!r}"
        packed.append(Packed(new, p.score, p.tokens, p.scores, note))
    from .recall import cite

    trust = pack_trust(claims)
    pack = replace(recall, memories=packed, citations=cite(packed))
    provenance = {"at": now.isoformat(), "act_threshold": trust_cfg.act_threshold,
                  "tools": [b.name for b in bound], "checked": len(jobs),
                  "config": {k: getattr(trust_cfg, k) for k in trust_cfg.__dataclass_fields__},
                  "store": getattr(store, "path", None)}
    return Assessment(decide(trust, trust_cfg), trust, claims, pack, tuple(written), provenance)


def _supersede(store: Store, embedder: Embedder, claim: Claim, cfg: Config, now: datetime,
               written: list[Supersession]) -> MemoryRecord:
    """Write the re-grounded value through the write path and return the memory that now holds it.

    A memory already superseded since the recall, or a read-only store, gets the
    fresh value in the pack only: there is nothing (or no way) to supersede.
    """
    from . import write

    old, check, fresh = claim.memory, claim.check, claim.fresh_value or ""
    text = rewrite_text(old, fresh)
    current = store.get(old.id)
    if not current.active or store.read_only:
        return replace(old, text=text, value=fresh, source="tool")
    turn = write.record_turn(store, f"{check.tool} reports {old.record_id or old.subject} {old.attribute} = "
                             f"{answer_text(check.answer)} (memory {old.id} said {old.value})", user=old.user,
                             session=old.session, agent="mnemo.assess", at=now, cfg=cfg, role="tool",
                             meta={"tool": check.tool, "memory_id": old.id})
    cand = Candidate(text=text, kind=old.kind, category=old.category, subject=old.subject, attribute=old.attribute,
                     value=fresh, record_id=old.record_id, references=old.references, importance=old.importance,
                     single_valued=old.single_valued, pinned=old.pinned, source="tool",
                     meta={**old.meta, "regrounded_from": old.id})
    evidence = {"tool": check.tool, "answer": answer_text(check.answer), "old_value": old.value,
                "at": now.isoformat()}
    action = Action(op="supersede", candidate=cand, target_id=old.id, reason="re-grounded", evidence=evidence)
    report = write.apply(store, [action], [cand], embedder.embed([text]), turn=turn, cfg=cfg)
    written.extend(report.superseded)
    return report.superseded[0].new if report.superseded else replace(old, text=text, value=fresh, source="tool")
