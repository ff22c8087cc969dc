"""Consistency audit (read-only) and consolidation proposals (applied only when approved).

    report = mem.audit(user="ops")        # changes nothing
    report.contradictions   # two values for one attribute of one record, each with a .recommendation
    report.absences         # references to records (or memories) that no active memory holds
    report.semantic         # opposite-meaning pairs about one subject: "conflict" or "inconclusive"
    plan = mem.consolidate(user="ops")    # proposals only
    mem.apply_consolidation(plan.approve("p1", "p3"))   # or the stage: apply_consolidation(store, ..., cfg=, now=)

Memories are grouped by the record they describe: an explicit record id, else the
source record named in `meta["record"]`, else the canonical subject. Never by a
coarser key (an attribute name, a category): that would manufacture conflicts
between distinct records that share an attribute.

A recommendation follows a fixed ladder and says which rung decided:
importance (a gap of at least IMPORTANCE_GAP), then source authority
(model.SOURCES: a structured record outranks a tool, a user, a derived note),
then recency (the latest confirmation); a full tie is "undecided".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from .assess import values_agree
from .config import Config, TrustConfig
from .decay import age_days, salience
from .errors import InvalidInput, MnemoError
from .model import SOURCES, Action, Event, MemoryRecord
from .normalise import RECORD_ID, content_tokens

if TYPE_CHECKING:
    from .llm import LLM
    from .store import Store

IMPORTANCE_GAP = 0.2  # importance difference that decides a contradiction on the first rung
MAX_SEMANTIC_PAIRS = 200  # judge calls per audit at most; the rest are counted as not judged
RAISE_AT_ACCESSES = 5  # a low-importance memory recalled this often is proposed for more importance
LOWER_AFTER_DAYS = 180.0  # an important memory never recalled for this long is proposed for less
SALIENCE_STEP = 0.2  # the importance change a salience proposal makes
PAIR_SCHEMA = {"type": "object", "required": ["verdict", "rationale"], "additionalProperties": False,
               "properties": {"verdict": {"type": "string", "enum": ["conflict", "no_conflict", "inconclusive"]},
                              "rationale": {"type": "string"}}}


@dataclass(frozen=True)
class Contradiction:
    """Active memories giving different values to one attribute of one record."""

    record: str
    attribute: str
    memories: tuple[MemoryRecord, ...]
    values: tuple[str, ...]  # one per agreeing group, in the order first seen
    recommendation: dict[str, Any] = field(default_factory=dict)  # memory_id, value, rule, confidence, rationale


@dataclass(frozen=True)
class Absence:
    """A memory that refers to a record (or memory) that no active memory holds."""

    memory_id: str
    reference: str
    rationale: str


@dataclass(frozen=True)
class SemanticFinding:
    """A judged pair of memories about one subject: conflict or inconclusive (no_conflict is not reported)."""

    a_id: str
    b_id: str
    subject: str
    cosine: float
    verdict: str  # conflict | inconclusive
    judge: str  # "model" or "polarity-heuristic-v1"
    rationale: str
    error: str | None = None


@dataclass(frozen=True)
class AuditReport:
    """What the audit found for one user; the store is unchanged."""

    user: str
    at: datetime
    contradictions: tuple[Contradiction, ...]
    absences: tuple[Absence, ...]
    semantic: tuple[SemanticFinding, ...]
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not (self.contradictions or self.absences or self.semantic)


# ----------------------------------------------------------------- grouping and findings (pure)
def record_key(memory: MemoryRecord) -> str | None:
    """Return the record a memory describes: its record id, its source record, or its subject (None: no record)."""
    for raw in (memory.record_id, memory.meta.get("record"), memory.subject):
        if raw:
            text = str(raw).strip()
            return text.upper() if RECORD_ID.fullmatch(text) else text.lower()
    return None


def _value_groups(memories: Sequence[MemoryRecord]) -> list[list[MemoryRecord]]:
    """Return memories grouped by agreeing value ("21 days" and "21 d" share a group)."""
    groups: list[list[MemoryRecord]] = []
    for m in memories:
        home = next((g for g in groups if values_agree(g[0].value, m.value)), None)
        if home is None:
            groups.append([m])
        else:
            home.append(m)
    return groups


def find_contradictions(memories: Iterable[MemoryRecord]) -> list[Contradiction]:
    """Return every (record, attribute) whose active single-valued memories disagree, with a recommendation."""
    by_slot: dict[tuple[str, str], list[MemoryRecord]] = {}
    for m in memories:
        key = record_key(m)
        if m.active and m.single_valued and key and m.attribute and m.value is not None:
            by_slot.setdefault((key, m.attribute), []).append(m)
    found = []
    for (key, attribute), members in sorted(by_slot.items()):
        groups = _value_groups(members)
        if len(groups) > 1:
            c = Contradiction(key, attribute, tuple(members), tuple(str(g[0].value) for g in groups))
            found.append(Contradiction(c.record, c.attribute, c.memories, c.values, recommend(c)))
    return found


NEAREST_OLDER = 10  # older memories (by cosine, beside those of the same subject) each memory is weighed against


def fitted_contradictions(active: Sequence[MemoryRecord], vecs: np.ndarray, model: Any, cfg: Any,
                          known: Iterable[Contradiction] = ()) -> list[Contradiction]:
    """Return pairs of active memories where the fitted update model says the newer one updates the older.

    Both still active means the write path missed the change (another verb, another slot name:
    "My manager is Helga." and "I now report to Farid."), so the claim index and the model find
    what the structured check cannot: each memory is weighed, as reconciliation weighs a new claim
    (`reconcile.pool`, `reconcile.features_of`), against the older memories of its subject and its
    nearest older ones. Pairs a structured contradiction already holds are not repeated.
    """
    from .model import Candidate
    from .reconcile import features_of, pool, replaces, row
    from .updates import CLASSES

    if model is None or len(active) < 2:
        return []
    held = {frozenset((a.id, b.id)) for c in known for a in c.memories for b in c.memories if a.id != b.id}
    order = sorted(range(len(active)), key=lambda i: (active[i].created_at or datetime.min.replace(tzinfo=timezone.utc),
                                                       active[i].id))
    sims = vecs @ vecs.T if len(vecs) else np.zeros((0, 0))
    update = CLASSES.index("update")
    found: list[Contradiction] = []
    for k, i in enumerate(order[1:], start=1):
        m = active[i]
        older = order[:k]
        near = sorted(older, key=lambda j: -float(sims[i, j]))[:NEAREST_OLDER]
        olds = sorted(set(near) | {j for j in older if active[j].subject and active[j].subject == m.subject})
        c = Candidate(text=m.text, kind=m.kind, category=m.category, subject=m.subject, attribute=m.attribute,
                      value=m.value, record_id=m.record_id, references=m.references, importance=m.importance,
                      single_valued=m.single_valued, negated=bool(m.meta.get("negated")), meta=dict(m.meta))
        r = row(0, c, [active[j] for j in olds], sims[i, olds], np.zeros(len(olds)), cfg)
        js = pool(r)
        for j, p in zip(js, model.proba(features_of(r, js)), strict=True):
            old = r.active[j]
            # The index decides what can be compared: two claims (a slot and a value each), one able to replace
            # the other (`reconcile.replaces`); memories without claims are the semantic check's business.
            claims = bool(m.attribute and m.value and old.attribute and old.value) and not (
                values_agree(old.value, m.value) and bool(old.meta.get("negated")) == bool(m.meta.get("negated")))
            if claims and p[update] >= model.update_at and frozenset((old.id, m.id)) not in held and replaces(
                    c, old, r.slot(j)):
                conflict = Contradiction(record_key(m) or record_key(old) or "?", m.attribute or old.attribute or
                                         "statement", (old, m), (str(old.value or old.text), str(m.value or m.text)))
                # One value said both ways ("stops at Elm Road" / "no longer stops there"): the ladder has one
                # group to weigh, so the newer statement is the one to keep.
                rec = recommend(conflict) if len(_value_groups(conflict.memories)) > 1 else {
                    "memory_id": m.id, "value": m.value, "rule": "recency", "confidence": 0.5,
                    "rationale": f"{conflict.record}: the newer statement says otherwise of {m.value!r}"}
                rec["rationale"] = f"the update model reads the newer as replacing the older (p={p[update]:.2f}); " \
                                   + str(rec.get("rationale", ""))
                found.append(Contradiction(conflict.record, conflict.attribute, conflict.memories, conflict.values,
                                           rec))
    return found


def find_absences(memories: Sequence[MemoryRecord], known: dict[str, str]) -> list[Absence]:
    """Return references no active memory satisfies; `known` maps every memory id in the store to its status."""
    active = [m for m in memories if m.active]
    records = {record_key(m) for m in active} | {str(m.record_id).upper() for m in active if m.record_id}
    out = []
    for m in active:
        for ref in m.references:
            if ref in known:
                if known[ref] != "active":
                    out.append(Absence(m.id, ref, f"refers to memory {ref}, which is {known[ref]}"))
            elif (ref.upper() if RECORD_ID.fullmatch(ref) else ref.lower()) not in records:
                out.append(Absence(m.id, ref, f"refers to record {ref}, which no active memory stores"))
    return out


def _strength(m: MemoryRecord) -> tuple:
    """Return the ladder's view of one memory: (importance, source authority, confirmation time); pinned = 1."""
    rank = len(SOURCES) - SOURCES.index(m.source) if m.source in SOURCES else 0
    when = m.valid_from or m.created_at
    return (1.0 if m.pinned else float(m.importance), rank, when.timestamp() if when else 0.0)


def recommend(conflict: Contradiction) -> dict[str, Any]:
    """Return {memory_id, value, rule, confidence, rationale} for a contradiction, by the fixed ladder.

    Each value group is represented by its strongest memory; the rungs compare the
    best group with the runner-up: importance (decides on a gap >= IMPORTANCE_GAP),
    then source authority (strictly higher), then recency (strictly later). The
    memory recommended is the winning group's most recently confirmed one.
    """
    groups = _value_groups(conflict.memories)
    # On each rung a group stands on its best member for that rung.
    best = [tuple(max(_strength(m)[k] for m in g) for k in range(3)) for g in groups]
    label = f"{conflict.record} {conflict.attribute}"
    rungs = (
        ("importance", 0, lambda gap: min(0.95, 0.6 + gap), lambda gap: gap >= IMPORTANCE_GAP,
         "importance {w} vs {r}"),
        ("source", 1, lambda gap: min(0.9, 0.6 + 0.1 * gap), lambda gap: gap > 0, "source {w} outranks {r}"),
        ("recency", 2, lambda gap: 0.5 + min(0.3, gap / 86400 / 100), lambda gap: gap > 0,
         "confirmed {w} vs {r}"),
    )
    for rule, k, conf, decisive, how in rungs:
        order = sorted(range(len(groups)), key=lambda i: best[i][k], reverse=True)
        gap = best[order[0]][k] - best[order[1]][k]
        if decisive(gap):
            win = groups[order[0]]
            pick = max(win, key=lambda m: _strength(m)[2])
            w, r = (_show(rule, best[order[0]][k]), _show(rule, best[order[1]][k]))
            tied = [n for n, kk, *_ in rungs[:k]]
            because = f"; tied on {', '.join(tied)}" if tied else ""
            return {"memory_id": pick.id, "value": pick.value, "rule": rule, "confidence": round(conf(gap), 3),
                    "rationale": f"{label}: keep {pick.value!r} ({how.format(w=w, r=r)}){because}"}
    return {"memory_id": None, "value": None, "rule": "undecided", "confidence": 0.0,
            "rationale": f"{label}: values {', '.join(map(repr, conflict.values))} tie on importance, source "
                         "and recency; ask a person"}


def _show(rule: str, x: float) -> str:
    if rule == "source":
        return SOURCES[len(SOURCES) - int(x)] if 0 < x <= len(SOURCES) else "unknown"
    if rule == "recency":
        return datetime.fromtimestamp(x, timezone.utc).date().isoformat() if x else "never"
    return f"{x:.2f}"


# ----------------------------------------------------------------- semantic audit
_PHRASES = {"on time": "on_time", "in stock": "in_stock", "out of stock": "out_of_stock", "no longer": "no_longer",
            "behind schedule": "late", "ahead of schedule": "early"}
_NEGATORS = frozenset({"not", "no", "never", "no_longer", "without", "hardly", "rarely", "seldom", "cannot",
                       "nor", "neither"})
# Polar words by aspect: two memories conflict when they give one aspect opposite signs.
_POLAR = {
    "timeliness": ({"on_time", "punctual", "prompt", "promptly", "early", "timely"},
                   {"late", "overdue", "delayed", "tardy", "behind"}),
    "reliability": ({"reliable", "dependable", "trustworthy", "consistent"}, {"unreliable", "flaky", "inconsistent"}),
    "liking": ({"like", "likes", "love", "loves", "enjoys", "enjoy", "prefers", "prefer", "fan"},
               {"hate", "hates", "dislike", "dislikes", "avoids", "avoid", "detests"}),
    "availability": ({"available", "in_stock", "stocked"}, {"unavailable", "out_of_stock", "discontinued"}),
    "price": ({"cheap", "affordable", "inexpensive"}, {"expensive", "pricey", "overpriced", "costly"}),
    "speed": ({"fast", "quick", "quickly", "rapid"}, {"slow", "slowly", "sluggish"}),
    "approval": ({"approved", "accepted", "agreed"}, {"rejected", "denied", "declined", "refused"}),
    "payment": ({"paid", "settled"}, {"unpaid", "outstanding", "defaulted"}),
    "quality": ({"good", "great", "excellent", "positive", "solid"}, {"bad", "poor", "terrible", "awful", "shoddy"}),
    "responsiveness": ({"responsive", "helpful"}, {"unresponsive", "unhelpful"}),
    "accuracy": ({"accurate", "correct", "right"}, {"inaccurate", "incorrect", "wrong"}),
    "safety": ({"safe", "secure"}, {"unsafe", "dangerous", "insecure"}),
    "function": ({"works", "working", "stable", "healthy"}, {"broken", "fails", "failing", "unstable", "crashes"}),
}
_SIGN = {w: (aspect, s) for aspect, (pos, neg) in _POLAR.items() for s, ws in ((1, pos), (-1, neg)) for w in ws}
_TOKEN = re.compile(r"[a-z_']+")


def polarity(text: str) -> tuple[dict[str, int], int]:
    """Return ({aspect: sign}, number of negations) for a sentence; a negator flips the next polar word."""
    low = text.lower().replace("n't", " not")
    for phrase, token in _PHRASES.items():
        low = low.replace(phrase, token)
    words = _TOKEN.findall(low)
    signs: dict[str, int] = {}
    negations = 0
    pending = 0
    for w in words:
        if w in _NEGATORS:
            negations += 1
            pending = 3
        elif w in _SIGN:
            aspect, s = _SIGN[w]
            signs[aspect] = signs.get(aspect, 0) + (-s if pending else s)
            pending = 0
        else:
            pending = max(0, pending - 1)
    return {a: (1 if s > 0 else -1) for a, s in signs.items() if s}, negations


def polarity_judge(a: str, b: str) -> dict[str, str]:
    """Return the offline verdict on two texts about one subject: opposite polarity on one aspect, or
    the same statement with and without a negation, is a "conflict"; anything else "no_conflict"."""
    pa, na = polarity(a)
    pb, nb = polarity(b)
    opposed = sorted(x for x in pa.keys() & pb.keys() if pa[x] != pb[x])
    if opposed:
        return {"verdict": "conflict", "rationale": f"opposite {', '.join(opposed)}"}
    ta, tb = content_tokens(a) - _NEGATORS, content_tokens(b) - _NEGATORS
    shared = len(ta & tb) / max(1, min(len(ta), len(tb)))
    if (na % 2) != (nb % 2) and shared >= 0.75 and not (pa or pb):
        return {"verdict": "conflict", "rationale": "the same statement, negated in one of them"}
    return {"verdict": "no_conflict", "rationale": "no aspect with opposite polarity"}


def model_pair_judge(llm: Any) -> Callable[[MemoryRecord, MemoryRecord, str], dict[str, str]]:
    """Return a judge that asks the live model (prompt audit_pair, role judge) about one pair."""
    def judge(a: MemoryRecord, b: MemoryRecord, subject: str) -> dict[str, str]:
        return llm.complete_json("audit_pair", {"subject": subject, "a": {"id": a.id, "text": a.text},
                                                "b": {"id": b.id, "text": b.text}}, PAIR_SCHEMA, role="judge")
    return judge


def judge_pair(judge: Callable[..., dict], a: MemoryRecord, b: MemoryRecord, subject: str) -> tuple[str, str, str | None]:
    """Return (verdict, rationale, error); fail closed: a judge error or odd answer is "inconclusive", never "no_conflict"."""
    try:
        answer = judge(a, b, subject)
        verdict, rationale = answer["verdict"], str(answer.get("rationale", ""))
    except (MnemoError, KeyError, TypeError, ValueError) as exc:
        return "inconclusive", "the judge gave no usable answer", f"{type(exc).__name__}: {exc}"
    if verdict not in ("conflict", "no_conflict", "inconclusive"):
        return "inconclusive", "the judge gave no usable answer", f"unknown verdict {verdict!r}"
    return verdict, rationale, None


def semantic_pairs(memories: Sequence[MemoryRecord], vecs: np.ndarray, min_cosine: float) -> list[tuple[int, int, float]]:
    """Return (i, j, cosine) for memory pairs about one record with no comparable field, most similar first."""
    by_key: dict[str, list[int]] = {}
    for i, m in enumerate(memories):
        if record_key(m):
            by_key.setdefault(record_key(m), []).append(i)
    pairs = []
    for idx in by_key.values():
        sims = vecs[idx] @ vecs[idx].T
        for x, y in zip(*np.nonzero(np.triu(sims >= min_cosine, k=1)), strict=True):
            a, b = memories[idx[x]], memories[idx[y]]
            # Pairs with one attribute and two values are the structured check's business.
            if not (a.attribute and a.attribute == b.attribute and a.value is not None and b.value is not None):
                pairs.append((idx[x], idx[y], float(sims[x, y])))
    return sorted(pairs, key=lambda p: (-p[2], p[0], p[1]))


# ----------------------------------------------------------------- the audit stage
def audit(store: Store, llm: LLM, user: str, *, cfg: TrustConfig, now: datetime, model: Any = None,
          write_cfg: Any = None) -> AuditReport:
    """Return the AuditReport of one user's active memories at `now`; reads the store, never writes it.

    Contradictions come from the claim index: one attribute of one record with two values, and,
    with the fitted update `model`, two memories the model reads as an update of one by the other
    (`fitted_contradictions`). An offline `llm` judges opposite-meaning pairs by polarity, a live
    one by the model; `cfg.audit_pair_cosine` sets how alike two memories must be to be judged.
    """
    everything = store.memories(user, include_inactive=True)
    known = {m.id: m.status for m in everything}
    active = [m for m in everything if m.active]
    contradictions = find_contradictions(active)
    if model is not None and active:
        contradictions += fitted_contradictions(active, store.vectors([m.id for m in active]), model, write_cfg,
                                                contradictions)
    absences = find_absences(active, known)
    offline = getattr(llm, "offline", True)
    judge = (lambda a, b, s: polarity_judge(a.text, b.text)) if offline else model_pair_judge(llm)
    name = "polarity-heuristic-v1" if offline else "model"
    vecs = store.vectors([m.id for m in active]) if active else np.zeros((0, 1), np.float32)
    pairs = semantic_pairs(active, vecs, cfg.audit_pair_cosine)
    semantic = []
    for i, j, cos in pairs[:MAX_SEMANTIC_PAIRS]:
        verdict, why, error = judge_pair(judge, active[i], active[j], record_key(active[i]) or "")
        if verdict != "no_conflict":
            semantic.append(SemanticFinding(active[i].id, active[j].id, record_key(active[i]) or "", round(cos, 4),
                                            verdict, name, why, error))
    provenance = {"at": now.isoformat(), "judge": name, "llm": llm.provenance() if not offline else "offline",
                  "active": len(active), "pairs": len(pairs), "judged": min(len(pairs), MAX_SEMANTIC_PAIRS),
                  "importance_gap": IMPORTANCE_GAP, "ladder": ["importance", "source", "recency"]}
    return AuditReport(user, now, tuple(contradictions), tuple(absences), tuple(semantic), provenance)


# ----------------------------------------------------------------- consolidation
@dataclass(frozen=True)
class Proposal:
    """One proposed change: merge near-duplicates, forget a stale crumb, or change a memory's importance."""

    id: str
    op: str  # merge | forget | salience
    memory_ids: tuple[str, ...]  # the memories it changes (merge: the duplicates folded into keep_id)
    reason: str
    keep_id: str | None = None
    importance: float | None = None  # salience: the new importance
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Consolidation:
    """Proposals for one user; nothing is applied until passed to `apply_consolidation`."""

    user: str
    at: datetime
    proposals: tuple[Proposal, ...]

    def approve(self, *ids: str) -> list[Proposal]:
        """Return the proposals with these ids (all when none given); an unknown id raises InvalidInput."""
        by_id = {p.id: p for p in self.proposals}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise InvalidInput(f"no proposal {', '.join(unknown)}; this plan has {', '.join(by_id) or 'none'}")
        return [by_id[i] for i in ids] if ids else list(self.proposals)


@dataclass
class ConsolidationReport:
    """What applying approved proposals did: applied, and refused with why."""

    applied: list[Proposal] = field(default_factory=list)
    refused: list[tuple[Proposal, str]] = field(default_factory=list)
    turn_id: str | None = None


def _near_duplicates(active: list[MemoryRecord], vecs: np.ndarray, threshold: float) -> list[list[MemoryRecord]]:
    """Return clusters of memories of one kind and record whose vectors are near-identical and values agree."""
    parent = list(range(len(active)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for start in range(0, len(active), 1024):
        sims = vecs[start:start + 1024] @ vecs.T
        for di, j in zip(*np.nonzero(sims >= threshold), strict=True):
            i = start + int(di)
            a, b = active[i], active[int(j)]
            values_ok = a.value is None or b.value is None or values_agree(a.value, b.value)
            if i < j and a.kind == b.kind and record_key(a) == record_key(b) and values_ok:
                parent[root(i)] = root(int(j))
    clusters: dict[int, list[MemoryRecord]] = {}
    for i, m in enumerate(active):
        clusters.setdefault(root(i), []).append(m)
    return [c for c in clusters.values() if len(c) > 1]


def propose_consolidation(store: Store, user: str, *, cfg: Config, now: datetime) -> Consolidation:
    """Return merge, forget and salience proposals for one user's active memories at `now`; writes nothing."""
    active = store.memories(user)
    vecs = store.vectors([m.id for m in active]) if active else np.zeros((0, 1), np.float32)
    proposals: list[Proposal] = []

    def propose(op: str, ids: tuple[str, ...], reason: str, **kw: Any) -> None:
        proposals.append(Proposal(f"p{len(proposals) + 1}", op, ids, reason, **kw))

    touched: set[str] = set()
    for cluster in _near_duplicates(active, vecs, cfg.write.duplicate_threshold):
        keep = max(cluster, key=lambda m: (m.pinned, _strength(m)[1], m.corroborations, m.importance,
                                           _strength(m)[2]))
        touched.update(m.id for m in cluster)
        propose("merge", tuple(m.id for m in cluster if m.id != keep.id), f"near-duplicates of {keep.id}",
                keep_id=keep.id, evidence={"threshold": cfg.write.duplicate_threshold})
    referenced = {r for m in active for r in m.references}
    for m in active:
        if m.id in touched or m.pinned:
            continue
        s, age = salience(m, now, cfg.decay), age_days(m.created_at, now)
        if m.kind == "episodic" and s < cfg.trust.crumb_salience and m.id not in referenced:
            propose("forget", (m.id,), "stale episodic crumb",
                    evidence={"salience": round(s, 4), "threshold": cfg.trust.crumb_salience})
        elif m.access_count >= RAISE_AT_ACCESSES and m.importance < 0.5:
            propose("salience", (m.id,), "recalled often, rated low",
                    importance=round(min(1.0, m.importance + SALIENCE_STEP), 3),
                    evidence={"access_count": m.access_count, "importance": m.importance})
        elif m.kind != "episodic" and m.importance >= 0.7 and m.access_count == 0 and age >= LOWER_AFTER_DAYS:
            propose("salience", (m.id,), "rated high, never recalled",
                    importance=round(max(0.0, m.importance - SALIENCE_STEP), 3),
                    evidence={"age_days": round(age, 1), "importance": m.importance})
    return Consolidation(user, now, tuple(proposals))


def _refusal(p: Proposal, found: dict[str, MemoryRecord]) -> str | None:
    """Return why a proposal cannot be applied, or None."""
    named = [*p.memory_ids, *([p.keep_id] if p.keep_id else [])]
    missing = [i for i in named if i not in found]
    if missing:
        return f"names memories that do not exist: {', '.join(missing)}"
    gone = [i for i in named if not found[i].active]
    if gone:
        return f"names memories that are no longer active: {', '.join(gone)}"
    if p.op == "merge" and (not p.keep_id or p.keep_id in p.memory_ids or not p.memory_ids):
        return "a merge needs a keep_id and at least one other memory"
    if p.op == "salience" and (p.importance is None or not 0.0 <= p.importance <= 1.0):
        return "a salience change needs an importance in [0, 1]"
    if p.op not in ("merge", "forget", "salience") or not p.memory_ids:
        return f"unknown or empty operation {p.op!r}"
    return None


def apply_consolidation(store: Store, approved: Iterable[Proposal], *, cfg: Config,
                        now: datetime) -> ConsolidationReport:
    """Apply exactly the approved proposals through the write path at `now`; refuse any that name unknown ids."""
    from . import write
    from .store import new_id

    approved = list(approved)
    report = ConsolidationReport()
    named = [i for p in approved for i in (*p.memory_ids, p.keep_id) if i]
    found = store.get_many(list(dict.fromkeys(named)))
    plan: list[Action] = []
    salience_changes: list[Proposal] = []
    claimed: set[str] = set()
    owner: str | None = None
    for p in approved:
        why = _refusal(p, found)
        named_here = {*p.memory_ids, *([p.keep_id] if p.keep_id else [])}
        users = {found[i].user for i in named_here if i in found}
        if why is None and claimed & named_here:
            why = f"names memories another approved proposal changes: {', '.join(sorted(claimed & named_here))}"
        if why is None and (len(users) > 1 or (owner is not None and users != {owner})):
            why = "names memories of another user; apply one user's proposals at a time"
        if why:
            report.refused.append((p, why))
            continue
        owner = users.pop()
        claimed.update(named_here)
        report.applied.append(p)
        ev = {"proposal": p.id, **p.evidence}
        if p.op == "merge":
            plan += [Action("forget", target_id=d, reason=f"merged into {p.keep_id}", evidence=ev)
                     for d in p.memory_ids]
            plan.append(Action("corroborate", target_id=p.keep_id, reason="merged",
                               evidence={**ev, "merged": list(p.memory_ids)}))
        elif p.op == "forget":
            plan.append(Action("forget", target_id=p.memory_ids[0], reason=p.reason, evidence=ev))
        else:
            salience_changes.append(p)
    if not report.applied:
        return report
    turn = write.record_turn(store, f"consolidation: approved {', '.join(p.id for p in report.applied)}",
                             user=owner, session=None, agent="mnemo.audit", at=now, cfg=cfg, role="system")
    report.turn_id = turn.id
    if plan:
        write.apply(store, plan, [], np.zeros((0, store.dim), np.float32), turn=turn, cfg=cfg)
    # Importance is not a status, so the write plan has no op for it: a reviewed event records the change.
    with store.transaction():
        for p in salience_changes:
            old = found[p.memory_ids[0]]
            store.set_importance(old.id, float(p.importance))
            store.insert_events([Event(new_id("e"), old.id, now, "reviewed", "active", "active", p.reason,
                                           {"proposal": p.id, "importance_from": old.importance,
                                            "importance_to": p.importance}, turn.id)])
    return report
