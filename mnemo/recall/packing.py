"""Packing: fill the token budget with the ranked candidates, then fit history beside them.

    packed, trace = pack(scored, budget, cfg, pinned)       # quotas by kind, pinned first, hard ceiling
    packed, history, evicted = make_room(packed, notes, costs, links, budget)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..config import RecallConfig
from ..model import Link, Packed, Scored, TraceEntry
from .confidence import evidence_of
from .ranking import tie_break, trace_scores


def pack(scored: Sequence[Scored], budget_tokens: int, cfg: RecallConfig,
         pinned: Sequence[Scored] = ()) -> tuple[list[Packed], list[TraceEntry]]:
    """Return the memories packed under the hard token ceiling, and a trace of every candidate.

    Pinned memories go first, by score, bypassing quotas and thresholds but not the
    budget. Then pass 1 packs by score within per-kind quotas (a share of the whole
    budget; an unknown kind has none), and pass 2 fills what is left with the best
    leftovers of any kind. Inactive memories are never packed, nor a second memory with words
    already packed (two claims of one sentence share it). Each id is traced once:
    pinned | packed | inactive | below_threshold | budget | quota | same_text.
    """
    budget = max(0, int(budget_tokens))
    left = budget
    packed: list[Packed] = []
    trace: dict[str, TraceEntry] = {}
    shown: dict[str, str] = {}  # text -> the id packed with it: two claims of one sentence share its words

    def put(s: Scored, reason: str, included: bool, detail: str = "") -> None:
        trace[s.memory.id] = TraceEntry(s.memory.id, s.memory.text, included, reason, trace_scores(s), detail)
        if included:
            shown[s.memory.text] = s.memory.id
            packed.append(Packed(s.memory, s.score, s.tokens, dict(s.scores)))

    def repeated(s: Scored) -> bool:
        if s.memory.text not in shown:
            return False
        put(s, "same_text", False, f"its words are packed already as {shown[s.memory.text]}")
        return True

    def by_score(items: Iterable[Scored]) -> list[Scored]:
        return sorted(items, key=tie_break)

    for s in by_score(pinned):
        if s.memory.id in trace or repeated(s):
            continue
        if not s.memory.active:
            put(s, "inactive", False, f"status {s.memory.status}")
        elif s.tokens <= left:
            left -= s.tokens
            put(s, "pinned", True, "pinned: bypasses quotas")
        else:
            put(s, "budget", False, f"pinned but needs {s.tokens} tokens, {left} left")

    quota = {"semantic": cfg.semantic_quota, "procedural": cfg.procedural_quota, "episodic": cfg.episodic_quota}
    room = {kind: int(share * budget) for kind, share in quota.items()}
    deferred: list[tuple[Scored, bool]] = []
    for s in by_score(scored):
        if s.memory.id in trace or repeated(s):
            continue
        relevance = s.scores.get("fused", s.score)
        if not s.memory.active:
            put(s, "inactive", False, f"status {s.memory.status}")
        elif relevance < cfg.min_relevance:
            put(s, "below_threshold", False, f"relevance {relevance:.3f} < min_relevance {cfg.min_relevance}")
        elif s.tokens <= left and s.tokens <= room.get(s.memory.kind, 0):
            left -= s.tokens
            room[s.memory.kind] = room.get(s.memory.kind, 0) - s.tokens
            put(s, "packed", True, f"pass 1: within the {s.memory.kind} quota")
        else:
            # Remember whether the quota, not the budget, stopped it: that decides its reason later.
            deferred.append((s, s.tokens <= left))

    # Pass 2: quota a kind did not use flows to the best leftovers of any kind.
    for s, quota_blocked in deferred:
        if repeated(s):
            continue
        if s.tokens <= left:
            left -= s.tokens
            put(s, "packed", True, "pass 2: unused quota of other kinds")
        elif quota_blocked:
            put(s, "quota", False, f"{s.memory.kind} quota used up; needs {s.tokens} tokens, {left} left")
        else:
            put(s, "budget", False, f"needs {s.tokens} tokens, {left} left")

    first = {s.memory.id for s in pinned}
    packed.sort(key=lambda p: (p.memory.id not in first, -p.score, p.memory.text, p.memory.id))
    return packed, list(trace.values())


def make_room(packed: list[Packed], notes: list[Packed], costs: list[int], links: Sequence[Link],
              budget: int) -> tuple[list[Packed], list[Packed], dict[str, TraceEntry]]:
    """Return the pack and history fitted together under the budget, and trace entries for evictions.

    A note costs its own tokens. It takes what the pack left; if that is not enough,
    it may evict packed memories that are not pinned and score lower than the
    memory the note explains (its root) and carry no better evidence for the query
    than it, lowest first: the correction behind the best memory is worth more than
    the last filler, but not more than the answer. Otherwise the note is dropped.
    """
    parent = {x.dst: x.src for x in links if x.kind == "supersedes"}
    by_id = {p.id: p for p in packed}
    left = budget - sum(p.tokens for p in packed)
    kept: list[Packed] = []
    roots: set[str] = set()
    evicted: dict[str, TraceEntry] = {}
    for note, cost in zip(notes, costs, strict=True):
        # An older correction is shown only after the newer one it leads to.
        if parent.get(note.id) not in by_id and parent.get(note.id) not in {k.id for k in kept}:
            continue
        root = note.id
        for _ in range(len(parent) + 1):
            if root in by_id or root not in parent:
                break
            root = parent[root]
        carrier = by_id.get(root)
        if carrier is None:
            continue
        victims, free = [], left
        for p in sorted(by_id.values(), key=lambda p: (p.score, p.text, p.id)):
            if free >= cost:
                break
            # A memory with better evidence for the query than the carrier is the answer, not filler.
            if (not p.memory.pinned and p.score < carrier.score and p.id not in roots
                    and evidence_of(p.scores) <= evidence_of(carrier.scores)):
                victims.append(p)
                free += p.tokens
        if free < cost:
            continue
        for p in victims:
            del by_id[p.id]
            evicted[p.id] = TraceEntry(p.id, p.text, False, "budget",
                                       {**p.scores, "score": p.score, "tokens": float(p.tokens)},
                                       f"evicted to make room for the history of {root}")
        left = free - cost
        roots.add(root)
        kept.append(Packed(note.memory, note.score, cost, note.scores, note.note))
    return [p for p in packed if p.id in by_id], kept, evicted
