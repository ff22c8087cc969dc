"""Ranking: fuse the retrievers, score the candidates, veto stale values, put the current value first.

    fused = fuse(dense, lexical, cfg)                 # per id: raw scores, ranks, fused relevance
    scored, vetoed = veto(score(cands, fused, now, cfg, decay_cfg, tokens))
    scored = current_first(scored)

Pure functions of their arguments, no store: `mnemo.recall.recall` wires them to one. `time_scope`,
`in_time` and `fuse_scoped` are the time scope (a question naming a time ranks what was said then first);
`in_context` lets a memory share its neighbours' relevance (what was said just before and after it);
`relevance` composes fuse, in_context and the time scope.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timezone

from .. import decay
from ..clock import utc
from ..config import DecayConfig, RecallConfig
from ..errors import ConfigError
from ..model import Link, MemoryRecord, Scored, TraceEntry
from . import evidence

# Type priors: what a kind and a category are usually worth in a context window,
# before relevance. The prior is KIND_PRIOR[kind] * CATEGORY_PRIOR[category]:
# a semantic preference is 1.0, a procedural instruction 0.81, an episodic note 0.18.
KIND_PRIOR = {"semantic": 1.0, "procedural": 0.9, "episodic": 0.6}
CATEGORY_PRIOR = {
    "preference": 1.0, "profile": 1.0, "instruction": 0.9, "fact": 0.8, "decision": 0.8,
    "deadline": 0.8, "lesson": 0.8, "failure": 0.7, "routine": 0.7, "change": 0.6,
    "event": 0.4, "note": 0.3,
}
FUSIONS = ("rrf", "weighted", "weighted_rank", "scores")


def fuse(dense: list[tuple[str, float]], lexical: list[tuple[str, float]], cfg: RecallConfig) -> dict[str, dict]:
    """Return, per id, the raw retriever scores, their ranks and a fused relevance in [0, 1].

    Each list is sorted by score here (ties share the better rank), so the input
    order never matters. "rrf": dense contributes (1 - w) / (k + rank), lexical
    w / (k + rank), with w = cfg.lexical_weight, divided by the best possible
    1 / (k + 1). "weighted": each list is min-max normalised (a list whose scores are
    all equal normalises to 1) and mixed with the same weights. Absent is 0.
    "weighted_rank": the weighted mix decides the order, and the relevance is that order's
    rank on RRF's scale, (k + 1) / (k + rank): the same ranking as "weighted", but the gaps
    between neighbours stay as small as RRF's, so recency, salience and claims weigh as much
    against relevance in `score` as they do under RRF (min-max gaps drown them in a small store).
    "scores": each retriever's own magnitudes, divided by its best hit's (the dense cosine
    clipped at 0, BM25 as it is), mixed with the same weights: a clear winner stays a clear
    winner in a store of ten, and a near tie stays a near tie, so what `score` adds beside
    relevance reorders only near ties.
    """
    if cfg.fusion not in FUSIONS:
        raise ConfigError(f"unknown fusion '{cfg.fusion}'; use one of {', '.join(FUSIONS)}")
    w = min(1.0, max(0.0, cfg.lexical_weight))
    out: dict[str, dict] = {}
    for name, hits, weight in (("dense", dense, 1.0 - w), ("bm25", lexical, w)):
        best: dict[str, float] = {}
        # A retriever should not return an id twice; if it does, its best score counts.
        for mid, value in hits:
            best[mid] = max(float(value), best.get(mid, float("-inf")))
        # Negated and ascending, so that bisect counts the strictly better scores.
        ordered = sorted(-v for v in best.values())
        low, high = (-ordered[-1], -ordered[0]) if ordered else (0.0, 0.0)
        for mid, value in best.items():
            entry = out.setdefault(mid, {"dense": None, "bm25": None, "dense_rank": None, "bm25_rank": None,
                                         "fused": 0.0})
            # Competition ranking: the number of strictly better scores, plus one.
            rank = bisect_left(ordered, -value) + 1
            entry[name], entry[f"{name}_rank"] = value, rank
            if cfg.fusion == "rrf":
                entry["fused"] += weight * (cfg.rrf_k + 1) / (cfg.rrf_k + rank)
            elif cfg.fusion == "scores":
                top = max(high, 0.0)
                entry["fused"] += weight * (max(value, 0.0) / top if top > 0 else 0.0)
            else:
                entry["fused"] += weight * ((value - low) / (high - low) if high > low else 1.0)
    if cfg.fusion == "weighted_rank":
        # Only hits of a retriever with weight are ranked; the others keep relevance 0, as under RRF.
        weighted = {m for hits, weight in ((dense, 1.0 - w), (lexical, w)) if weight > 0 for m, _ in hits}
        for entry in out.values():
            entry["mix"] = entry["fused"]  # the weighted mix the rank replaces: what `in_context` raises
        ordered = sorted(-out[m]["fused"] for m in weighted)
        for mid in weighted:
            out[mid]["fused"] = (cfg.rrf_k + 1) / (cfg.rrf_k + bisect_left(ordered, -out[mid]["fused"]) + 1)
    for entry in out.values():
        entry["fused"] = min(1.0, max(0.0, entry["fused"]))
    return out


def fuse_scoped(fused: Mapping[str, dict], scoped: Mapping[str, dict], cfg: RecallConfig) -> dict[str, dict]:
    """Return `fused` with the hits said in the time a question names ranked first.

    `scoped` is `fuse` over the same retrievers run only on memories said then
    (`evidence.spans`: "What did Joanna watch on 1 May, 2022?"). The order is the
    scoped hits by their fused relevance, then the other hits by theirs; the relevance is
    that order's rank on RRF's scale, (k + 1) / (k + rank), as in "weighted_rank". Each
    entry keeps the retrievers' scores over the whole record (cosine and coverage do not
    depend on the scope), and `scoped` says whether it was said then. Hits with relevance 0
    (a retriever without weight) stay at 0.
    """
    def best_first(entries: Mapping[str, dict]) -> list[str]:
        return sorted((m for m in entries if entries[m]["fused"] > 0), key=lambda m: -entries[m]["fused"])

    order = best_first(scoped) + [m for m in best_first(fused) if m not in scoped]
    out = {m: {**(fused.get(m) or scoped[m]), "fused": 0.0, "scoped": m in scoped} for m in {**fused, **scoped}}
    for rank, mid in enumerate(order, 1):
        out[mid]["fused"] = (cfg.rrf_k + 1) / (cfg.rrf_k + rank)
    return out


Hits = list[tuple[str, float]]


def relevance(dense: Hits, lexical: Hits, cfg: RecallConfig, then: tuple[Hits, Hits] | None = None,
              links: Iterable[Link] = ()) -> dict[str, dict]:
    """Return each hit's fused relevance: `fuse`, each hit raised by its neighbours (`in_context`), time scope first.

    `then` holds the same retrievers' hits among the memories said in the time the question
    names (`time_scope`), None when it names none; `links` the `follows` links of the hits
    (read only when `cfg.context_weight` is above 0). One definition for recall and the
    benchmark runner.
    """
    links = list(links) if cfg.context_weight > 0 else []
    fused = in_context(fuse(dense, lexical, cfg), links, cfg)
    if cfg.time_scope and then is not None:
        fused = fuse_scoped(fused, in_context(fuse(then[0], then[1], cfg), links, cfg), cfg)
    return fused


def neighbours(links: Iterable[Link]) -> dict[str, set[str]]:
    """Return {id: the ids a `follows` link joins it to} (said just before or just after it)."""
    near: dict[str, set[str]] = {}
    for link in links:
        if link.kind == "follows" and link.src != link.dst:
            near.setdefault(link.src, set()).add(link.dst)
            near.setdefault(link.dst, set()).add(link.src)
    return near


def in_context(fused: Mapping[str, dict], links: Iterable[Link], cfg: RecallConfig) -> dict[str, dict]:
    """Return `fused` with each hit's relevance raised by `cfg.context_weight` times its best neighbour's.

    A turn is read in its conversation: "What does Caroline do?" matches the question turn
    ("what do you do?") as well as the answer after it ("I just started at the shelter"),
    and each lends the other relevance. Neighbours are the memories a `follows` link joins
    (said right after one another in one session: a session's raw turns, or the clauses one
    turn wrote); a neighbour that no retriever found lends nothing, but a neighbour of one of the
    `cfg.context_joins` best hits joins the candidates on what its neighbours lend it (its entry
    has no retriever scores and `joined` set; the bound keeps recall's cost near the hits'): a
    clause that leans on its turn ("It stands for love, faith and strength.") is found through the
    clause it leans on. What is raised is the retrievers' mix before ranking (`mix`: under
    "weighted_rank" the rank scale's gaps are too even to weigh a neighbour against).
    The raised values decide the order; "weighted_rank" keeps its rank scale,
    (k + 1) / (k + rank), and the other fusions are scaled back to their best relevance.
    The time scope's `scoped` flag and the retrievers' scores are kept. A weight of 0, or
    no links, returns `fused` unchanged.
    """
    beta = cfg.context_weight
    near = neighbours(links)
    if beta <= 0 or not near:
        return dict(fused)
    mix = {m: e.get("mix", e["fused"]) for m, e in fused.items() if e["fused"] > 0}
    ids = list(mix)
    if cfg.context_joins > 0:
        best = sorted(mix, key=lambda m: (-mix[m], m))[:cfg.context_joins]
        ids += sorted({n for m in best for n in near.get(m, ()) if n not in fused})
    raised = {m: mix.get(m, 0.0) + beta * max((mix[n] for n in near.get(m, ()) if n in mix), default=0.0)
              for m in ids}
    out = {m: dict(e) for m, e in fused.items()}
    for m in ids:
        if m not in out:
            # A neighbour no retriever found joins on what it lends: its relevance is all context.
            out[m] = {"dense": None, "bm25": None, "dense_rank": None, "bm25_rank": None, "fused": 0.0,
                      "joined": True}
    if not raised:
        return out
    if cfg.fusion == "weighted_rank":
        ordered = sorted(-v for v in raised.values())
        for mid, value in raised.items():  # competition ranking, as `fuse`: ties share the better rank
            out[mid]["fused"] = (cfg.rrf_k + 1) / (cfg.rrf_k + bisect_left(ordered, -value) + 1)
    else:
        scale = max(mix.values()) / max(raised.values())
        for mid, value in raised.items():
            out[mid]["fused"] = value * scale
    for mid, value in raised.items():
        out[mid]["mix"] = value
    return out


def time_scope(q, now: datetime, filters: dict | None) -> dict | None:
    """Return the recall filters narrowed to the times question `q` names (`evidence.spans`), None if it names none.

    Several times named make one window, from the first to the last (`in_time`).
    """
    spans = evidence.spans(q, now)
    if not spans:
        return None
    return in_time(filters, (min(a for a, _ in spans), max(b for _, b in spans)))


def in_time(filters: dict | None, span: tuple[datetime, datetime]) -> dict:
    """Return `filters` narrowed to memories said within `span` (since/until intersected with the caller's)."""
    out = dict(filters or {})
    start, end = span
    out["since"] = max(start, utc(out["since"])) if out.get("since") else start
    out["until"] = min(end, utc(out["until"])) if out.get("until") else end
    return out


def prior(memory: MemoryRecord) -> float:
    """Return the type prior of a memory: KIND_PRIOR[kind] * CATEGORY_PRIOR[category] (0.5 if unknown)."""
    return KIND_PRIOR.get(memory.kind, 0.5) * CATEGORY_PRIOR.get(memory.category, 0.5)


def recency(memory: MemoryRecord, now: datetime, decay_cfg: DecayConfig) -> float:
    """Return 0.5 ** (age / kind half-life), age from the later of created_at and valid_from.

    Unlike salience, recency ignores exemptions and accesses: it says how new the
    information is, so that a newer fact outranks an older one of the same kind.
    """
    times = [t for t in (memory.created_at, memory.valid_from) if t is not None]
    age = decay.age_days(max(times, key=utc) if times else None, now)
    return 0.5 ** (age / decay.kind_half_life(memory.kind, decay_cfg))


def tie_break(s: Scored) -> tuple:
    """Return the order of scored candidates: best first; equal scores by their words, then id (ids are random,
    so two stores written alike rank alike)."""
    return -s.score, s.memory.text, s.memory.id


def score(candidates: Iterable[MemoryRecord], fused: Mapping[str, dict], now: datetime, cfg: RecallConfig,
          decay_cfg: DecayConfig, tokens: Mapping[str, int] | None = None) -> list[Scored]:
    """Return the candidates scored and sorted best first.

    final = weight_relevance * fused + weight_recency * recency + weight_salience * salience
    + weight_prior * prior + weight_claim * claim, where claim is what the memory's claim says to the
    question (`evidence.FIT_SCORE`: +1 answers it, -1 is about a conflicting entity). `Scored.scores` keeps every component (and the raw retriever
    scores, ranks and query coverage when known) for the trace.
    """
    out = []
    for memory in candidates:
        entry = fused.get(memory.id, {})
        parts = {
            "fused": float(entry.get("fused", 0.0)),
            "recency": recency(memory, now, decay_cfg),
            "salience": decay.salience(memory, now, decay_cfg),
            "prior": prior(memory),
        }
        parts["claim"] = float(entry.get("claim", 0.0))
        final = (cfg.weight_relevance * parts["fused"] + cfg.weight_recency * parts["recency"]
                 + cfg.weight_salience * parts["salience"] + cfg.weight_prior * parts["prior"]
                 + cfg.weight_claim * parts["claim"])
        for key in ("dense", "bm25", "dense_rank", "bm25_rank", "coverage"):
            if entry.get(key) is not None:
                parts[key] = float(entry[key])
        out.append(Scored(memory, final, parts, int((tokens or {}).get(memory.id, 0))))
    out.sort(key=tie_break)
    return out


def veto(scored: list[Scored]) -> tuple[list[Scored], list[TraceEntry]]:
    """Return the candidates with stale single-valued values removed, and trace entries for those removed.

    For single-valued attributes only one value may be current per (user, subject,
    attribute): among active memories that disagree, the newest (valid_from, else
    created_at) wins and the others are vetoed. Memories repeating the winner's value
    stay, since they do not contradict it.
    """
    groups: dict[tuple[str, str, str], list[Scored]] = {}
    for s in scored:
        m = s.memory
        if m.active and m.single_valued and m.subject and m.attribute and m.value is not None:
            groups.setdefault((m.user, m.subject.casefold(), m.attribute.casefold()), []).append(s)
    vetoed: dict[str, TraceEntry] = {}
    for group in groups.values():
        winner = max(group, key=lambda s: _newness(s.memory))
        for s in group:
            if _norm(s.memory.value) != _norm(winner.memory.value):
                when = became_true(winner.memory)
                vetoed[s.memory.id] = TraceEntry(
                    s.memory.id, s.memory.text, False, "veto", trace_scores(s),
                    f"{s.memory.attribute}={s.memory.value!r} is stale: {winner.memory.id} says "
                    f"{winner.memory.value!r}" + (f" (newer, {when.date().isoformat()})" if when else " (newer)"))
    kept = [s for s in scored if s.memory.id not in vetoed]
    return kept, [vetoed[s.memory.id] for s in scored if s.memory.id in vetoed]


def current_first(scored: list[Scored], q=None) -> list[Scored]:
    """Return the candidates with, for each (subject, slot), the newest statement ranked above older ones.

    The veto removes what a single-valued slot no longer holds; text that was never reconciled
    (a long chat written as episodes, a multi-valued slot) can still hold an older value of the
    same slot. There the newest statement takes the best score of its group and the older ones
    keep theirs, so the current value comes first and the history after it. Groups are the
    stored claims' (subject, slot) and, given the question's reading `q`, the memories that state
    a value for what it asks (`evidence.stated`), whatever keys their claims were stored under;
    among those the statement said last is current, or said first when the question asks for an
    earlier value ("my original budget").
    """
    groups: dict[tuple[str, str, str], list[tuple[Scored, object]]] = {}
    for s in scored:
        m = s.memory
        if m.active and m.subject and m.attribute and m.value is not None:
            groups.setdefault((m.user, m.subject.casefold(), m.attribute.casefold()), []).append((s, _norm(m.value)))
    lift: dict[str, float] = {}
    for group in groups.values():
        _lift_newest(group, _newness, lift)
    if q is not None:
        answers = [(s, said) for s in scored if s.memory.active and (said := evidence.stated(q, s.memory))]
        _lift_newest(answers, _said_last, lift, first=q.earlier)
    if not lift:
        return scored
    out = [replace(s, score=lift.get(s.memory.id, s.score), scores={**s.scores, "current_first": 1.0})
           if s.memory.id in lift else s for s in scored]
    out.sort(key=tie_break)
    return out


def _lift_newest(group: list[tuple[Scored, object]], newness: Callable[[MemoryRecord], tuple],
                 lift: dict[str, float], first: bool = False) -> None:
    """Give the group's newest member (by `newness`; its oldest with `first`) the group's best score, when
    the group disagrees."""
    if len({value for _, value in group}) < 2:
        return
    pick = min if first else max
    newest = pick((s for s, _ in group), key=lambda s: newness(s.memory))
    best = max(s.score for s, _ in group)
    if newest.score < best:
        lift[newest.memory.id] = max(lift.get(newest.memory.id, 0.0), best + 1e-6)


def _said_last(memory: MemoryRecord) -> tuple:
    """Sort key for "said last": when the memory was written (its turn's time), then valid_from, then id."""
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    return (utc(memory.created_at) if memory.created_at else epoch, became_true(memory) or epoch, memory.id)


def _norm(value: str | None) -> str:
    return " ".join((value or "").casefold().split())


def became_true(memory: MemoryRecord) -> datetime | None:
    """Return when a memory became true: valid_from, else created_at."""
    when = memory.valid_from or memory.created_at
    return utc(when) if when else None


def _newness(memory: MemoryRecord) -> tuple:
    """Sort key for "newest": valid_from/created_at, then created_at, then id for a stable tie-break."""
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    created = utc(memory.created_at) if memory.created_at else epoch
    return (became_true(memory) or epoch, created, memory.id)


def trace_scores(s: Scored) -> dict[str, float]:
    return {**s.scores, "score": s.score, "tokens": float(s.tokens)}
