"""Recall: hybrid retrieval, scoring, veto, budget packing, confidence, history and citations.

Recall is a packing problem, not a search: under a hard token ceiling the caller
must get the memories that matter and know how far to trust them. Every decision
is a pure function in one of this package's modules; `recall` only wires them to a
store and an embedder:

    candidates.py   reading the query as memories are written: resolve_self, query_vector, coverage
    ranking.py      relevance: fuse, in_context (neighbours), the time scope (time_scope, in_time, fuse_scoped);
                    score, veto, current_first
    rerank.py       a fitted linear model over each candidate's features reorders them (cfg.rerank)
    packing.py      pack under the budget with per-kind quotas, make_room for history
    confidence.py   evidence_of, confidence: the score bands behind `recall.evidence`'s claims
    history.py      history_notes, shaken (held only while a changed fact did), expand, cite
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..config import DecayConfig, RecallConfig
from ..errors import InvalidInput
from ..extract.questions import describe
from ..model import Packed, Recall, Scored, TraceEntry, topic_of
from . import evidence
from . import judge as judge_stage
from . import rerank as rerank_stage
from .candidates import ask_soon, coverage, namesakes, prefetch, query_vector, resolve_self
from .confidence import EVIDENCE_COVERAGE, EVIDENCE_DENSE, confidence, evidence_of
from .history import cite, expand, history_notes, shaken
from .judge import Answerability
from .packing import make_room, pack
from .ranking import (
    CATEGORY_PRIOR,
    FUSIONS,
    KIND_PRIOR,
    current_first,
    fuse,
    fuse_scoped,
    in_context,
    in_time,
    prior,
    recency,
    relevance,
    score,
    time_scope,
    veto,
)
from .rerank import Reranker, people_of, reranked

if TYPE_CHECKING:
    from ..embed import Embedder
    from ..store import Store

__all__ = ["CATEGORY_PRIOR", "EVIDENCE_COVERAGE", "EVIDENCE_DENSE", "FUSIONS", "KIND_PRIOR", "NOT_IN_RECORD",
           "NO_ROOM", "Reranker", "UNCERTAIN", "cite", "confidence", "coverage", "current_first", "evidence_of",
           "expand", "fuse", "fuse_scoped", "history_notes", "in_context", "in_time", "make_room", "pack",
           "people_of", "prior", "query_vector", "recall", "recency", "relevance", "reranked", "resolve_self",
           "score", "shaken", "time_scope", "veto"]

NOT_IN_RECORD = "not in the record"
NOT_AN_ANSWER = "near the question, but it does not answer it"


def _focus_cosine(store: Store, embedder: Embedder, q, best: list) -> list[float]:
    """Return the cosines of what the question asks for ("instrument") with the best three candidates ("a banjo")."""
    phrase = judge_stage.asked_phrase(q)
    if not phrase or not best:
        return []
    return [float(v) for v in store.vectors([s.memory.id for s in best[:3]]) @ embedder.embed([phrase])[0]]


def joined_neighbours(store: Store, fused: dict[str, dict], records: dict, user: str, filters: dict | None,
                      vector: Any) -> dict[str, dict]:
    """Return `fused` with the neighbours `ranking.in_context` joined to the hits kept when they may be recalled.

    A neighbour no retriever found ("The little cross stands for love, faith and strength." after
    "My grandma gave me this necklace.") joins when it is the user's, active, and the recall has
    no filters (the retrievers applied those; a neighbour is read by id). Its record joins
    `records` and its entry gains its dense cosine with the question (the judge's evidence, as a
    hit's); a neighbour that may not be recalled leaves `fused`.
    """
    joined = [m for m, e in fused.items() if e.get("joined")]
    if not joined:
        return fused
    found = store.get_many(joined) if filters is None else {}
    ok = [m for m in joined if m in found and found[m].user == user and found[m].active]
    records.update((m, found[m]) for m in ok)
    cosines = dict(zip(ok, (store.vectors(ok) @ vector).tolist(), strict=True)) if ok else {}
    return {m: {**e, "dense": cosines[m]} if m in cosines else e for m, e in fused.items()
            if not e.get("joined") or m in cosines}


def always_applies(memory) -> bool:
    """Return True for a pinned rule the person meant for every answer: an instruction or a lesson they asked to keep."""
    return memory.pinned and memory.category in ("instruction", "lesson")
NO_ROOM = "nothing relevant fits the budget"
UNCERTAIN = "uncertain: what the record holds on this rested on a fact that has since changed (see history)"


@dataclass
class Ranked:
    """What `rank` knows of a question and its candidates: what `judge` and `pack` decide on."""

    query: str
    q: Any  # the question's reading (extract.questions.Ask)
    names: list[str]  # the user's own names
    scored: list[Scored]  # every candidate, pins included, best first (current values first)
    vetoed: list[TraceEntry]
    fused: dict[str, dict]  # the retrievers' scores and fused relevance, by id
    fits: dict[str, str]  # what the claim index says of each candidate (evidence.fit)
    aliases: dict[str, str]
    heads: set[str]  # the pinned ids that head the pack
    unsure: dict  # memories that held only while a changed fact did (history.shaken)
    retrieved: int  # how many memories the retrievers gave
    scope: dict | None  # the time the question names, as a filter
    follows: int  # `follows` links read


def rank(store: Store, embedder: Embedder, query: str, *, user: str, cfg: RecallConfig, decay_cfg: DecayConfig,
         now: datetime, count_many: Callable[[list[str]], list[int]], filters: dict | None = None,
         qvec: Any = None) -> Ranked:
    """Return the candidates of `query`, ranked as recall packs them: retrieve, fuse, rerank, score, veto.

    The dense retriever always runs, because its cosine is evidence for the judge; BM25 runs
    when it has weight. Only ids found by a retriever with weight become candidates, and what
    is filed under another name of an entity the question names (`candidates.namesakes`;
    unfiltered, with vectors weighted). Their relevance is `ranking.relevance` (the time scope,
    and the hits' `follows` neighbours when `context_weight` > 0), then the reranker's
    (`rerank.apply`), then `ranking.score` (relevance, and recency, salience, kind and the claim
    index beside it). The benchmarks rank with this same function. `qvec`, a precomputed
    embedding of `query`, is used when name resolution leaves the query as it is.
    """
    if not isinstance(query, str):
        raise InvalidInput("query must be a string")
    w = cfg.lexical_weight
    names = [user, *store.self_names(user)]
    asked = ask_soon(resolve_self(query, names))  # read on a worker thread while the retrievers run
    vector = qvec if qvec is not None and resolve_self(query, names) == query else query_vector(embedder, query, names)
    dense = store.search_dense(vector, cfg.candidates, user=user, filters=filters)
    lexical = store.search_lexical(query, cfg.candidates, user=user, filters=filters) if w > 0 else []
    prefetch(store, (dense if w < 1 else []) + lexical, count_many)  # while the question is still being read
    q = asked.result()
    scope = time_scope(q, now, filters) if cfg.time_scope else None
    then = None
    if scope is not None:
        then = (store.search_dense(vector, cfg.candidates, user=user, filters=scope),
                store.search_lexical(query, cfg.candidates, user=user, filters=scope) if w > 0 else [])
    lists = [dense, lexical, *(then or ())]  # dense, lexical, and the time scope's dense, lexical
    follows = []
    if cfg.context_weight > 0 or cfg.rerank:
        follows = store.follows(sorted({m for hits in lists for m, _ in hits}))
    fused = relevance(dense, lexical, cfg, then, follows)
    # A dense hit is a candidate only while vectors have weight (odd positions are lexical lists).
    records = store.get_many(list(dict.fromkeys(m for k, hits in enumerate(lists) if k % 2 or w < 1
                                                for m, _ in hits)))
    extra = namesakes(store, query, user, vector, records, cfg.candidates) if filters is None and w < 1 else []
    if extra:
        # What is filed under another name of an entity the question names joins the dense hits, at its own cosine.
        dense = sorted(dense + [(m.id, s) for m, s in extra], key=lambda h: -h[1])
        records.update((m.id, m) for m, _ in extra)
        fused = relevance(dense, lexical, cfg, then, follows)
    fused = joined_neighbours(store, fused, records, user, filters, vector)
    if cfg.rerank:
        fused = rerank_stage.apply(fused, cfg.rerank, query, dense, lexical, then, follows,
                                   people_of(records.values()))
    candidates = [m for m in records.values() if m.user == user]
    # A memory that held only while a root fact did is not current once that fact is gone: shown as uncertain.
    unsure = shaken(store, candidates)
    candidates = [m for m in candidates if m.id not in unsure]
    pins = [m for m in store.pinned(user, filters) if m.user == user]
    aliases = evidence.aliases(candidates + pins)
    fits: dict[str, str] = {}
    for m in candidates + pins:
        fits[m.id] = evidence.fit(q, m, aliases)
        if m.id in fused:
            fused[m.id]["coverage"] = coverage(query, topic_of(m.text, m.meta), names, m.attribute)
            fused[m.id]["claim"] = evidence.FIT_SCORE[fits[m.id]]
    everyone = list({m.id: m for m in candidates + pins}.values())
    counts = dict(zip([m.id for m in everyone], count_many([m.text for m in everyone]), strict=True))
    scored, vetoed = veto(score(everyone, fused, now, cfg, decay_cfg, counts))
    scored = current_first(scored, q)
    # A pinned memory heads the pack when it bears on the question or is a rule meant to apply always
    # ("always answer in Portuguese"); otherwise it is ranked like any other memory.
    heads = {m.id for m in pins if always_applies(m) or (m.id in fused and evidence_of(fused[m.id]) >= cfg.vague_at)}
    return Ranked(query, q, names, scored, vetoed, fused, fits, aliases, heads, unsure, len(records), scope,
                  len(follows))


def judge(store: Store, embedder: Embedder, ranked: Ranked, packed: list[Packed], cfg: RecallConfig,
          answerable: Answerability | None) -> tuple[str, str, float | None, list[float], list[str]]:
    """Return (confidence, why, P(answerable) or None, the judge's features, names the pack never mentions).

    The claim rules of `recall.evidence.verdict` decide; a fitted answerability model
    (`recall.judge`) overturns their "unknown" at P(answerable) >= `cfg.rescue_at` (a pack the
    words miss but the model reads as answered), or decides alone when `rescue_at` is None. A
    "vague" pack with no value of the type the question wants (`evidence.holds_the_type`) is "unknown".
    """
    q, fused, fits = ranked.q, ranked.fused, ranked.fits
    top = evidence.top_evidence(q, [(fits.get(p.id, "other"), evidence_of(fused[p.id])) for p in packed
                                    if p.id in fused])
    missing = evidence.missing_names(q, [p.memory for p in packed], ranked.aliases, ranked.names)
    best = [s for s in ranked.scored if s.memory.active and s.memory.id in fused][:judge_stage.TOP]
    silent = evidence.missing_names(q, [s.memory for s in best], ranked.aliases, ranked.names)
    x = judge_stage.features(q, best, fused, fits, silent, _focus_cosine(store, embedder, q, best), ranked.retrieved)
    if not best:
        return "unknown", "no stored memory is a candidate for the question", None, x, missing
    pack_fits = [fits.get(p.id, "other") for p in packed if p.id in fused]
    verdict, why = evidence.verdict(q, pack_fits, top, missing, cfg.certain_at, cfg.vague_at)
    p = answerable.probability(x) if answerable is not None else None
    if p is not None and cfg.rescue_at is None:
        verdict = answerable.verdict(p)
        why = f"P(answerable) {p:.2f} (certain at {answerable.certain_at:.2f}, vague at {answerable.vague_at:.2f})"
    elif p is not None and verdict == "unknown" and p >= cfg.rescue_at:
        verdict, why = "vague", f"{why}; but P(answerable) {p:.2f} >= {cfg.rescue_at:.2f}"
    elif p is not None:
        why = f"{why}; P(answerable) {p:.2f}"
    if verdict == "vague" and evidence.holds_the_type(q, [m.memory.text for m in packed]) is False:
        # Hedging needs something to hedge: a pack with no value of the type asked ("how much" over dates) does
        # not answer the question, whatever rule or model found it near.
        verdict, why = "unknown", f"no packed memory says a {evidence.type_asked(q)}: {why}"
    return verdict, why, p, x, missing


def recall(store: Store, embedder: Embedder, query: str, *, user: str, budget_tokens: int | None, cfg: RecallConfig,
           decay_cfg: DecayConfig, now: datetime, count_many: Callable[[list[str]], list[int]],
           filters: dict | None = None, tokenizer: str | None = None,
           answerable: Answerability | None = None) -> Recall:
    """Return the recall pack for `query`: rank, pack under the budget, judge, then history, citations, touch.

    `rank` orders the candidates; `pack` fills the budget (the one place it is decided); `judge`
    says how far the pack answers the question. On "unknown" only the memories close to the
    question stay, each marked as not answering it, and the message says "not in the record"
    (or, when strong evidence was left out only by the budget, that nothing fits it). History
    shares the budget with the pack (`make_room`); touch runs once, on the pack.
    """
    budget = cfg.budget_tokens if budget_tokens is None else int(budget_tokens)
    if budget < 0:
        raise InvalidInput(f"budget_tokens must be >= 0, got {budget}")
    ranked = rank(store, embedder, query, user=user, cfg=cfg, decay_cfg=decay_cfg, now=now, count_many=count_many,
                  filters=filters)
    fused, fit_of, scored, q, unsure = ranked.fused, ranked.fits, ranked.scored, ranked.q, ranked.unsure
    packed, trace = pack([s for s in scored if s.memory.id not in ranked.heads], budget, cfg,
                         [s for s in scored if s.memory.id in ranked.heads])
    trace = ranked.vetoed + trace
    verdict, why, p_answer, x, missing = judge(store, embedder, ranked, packed, cfg, answerable)
    w = cfg.lexical_weight
    pack_fits = [fit_of.get(p.id, "other") for p in packed if p.id in fused]
    top = evidence.top_evidence(q, [(fit_of.get(p.id, "other"), evidence_of(fused[p.id])) for p in packed
                                    if p.id in fused])

    history: list[Packed] = []
    message = ""
    if verdict == "unknown":
        # "Unknown" never hides evidence: the memories close to the question stay in the pack, each marked as
        # not answering it, so an agent can check: any at or above the floor, and the `unknown_nearest`
        # nearest (by evidence) that are topically near at all (half the vague band: as a request is served).
        near = {p.id for p in packed if p.id in fused and evidence_of(fused[p.id]) >= cfg.unknown_floor}
        nearest = sorted(((evidence_of(fused[p.id]), p.id) for p in packed if p.id in fused), reverse=True)
        near |= {m for e, m in nearest[:cfg.unknown_nearest] if e >= cfg.vague_at / 2}
        trace = [t if t.memory_id in near else
                 TraceEntry(t.memory_id, t.text, False, "abstain", t.scores, f"was {t.reason}; {t.detail}")
                 for t in trace]
        # Strong evidence left out of an "unknown" pack was left out by the budget, not absent.
        found = not missing and any(evidence_of(fused[s.memory.id]) >= cfg.vague_at for s in scored
                                    if s.memory.id in fused and s.memory.active)
        packed = [replace(p, note=NOT_AN_ANSWER) for p in packed if p.id in near]
        message = NO_ROOM if found and not packed else NOT_IN_RECORD
    elif cfg.expand_hops > 0:
        links, notes = expand(store, packed, cfg.expand_hops)
        costs = count_many([n.note or "" for n in notes]) if notes else []
        packed, history, evicted = make_room(packed, notes, costs, links, budget)
        trace = [evicted.get(t.memory_id, t) for t in trace]
        shown = {h.id for h in history}
        trace += [TraceEntry(n.id, n.text, n.id in shown, "expansion" if n.id in shown else "budget",
                             {"tokens": float(c)}, f"history: {n.note}") for n, c in zip(notes, costs, strict=True)]
    if unsure:
        # Uncertain notes take what the pack and its history left; they never evict anything.
        notes = [Packed(m, 0.0, 0, {}, note) for m, note in unsure.values()]
        costs = count_many([f"{n.memory.text} ({n.note})" for n in notes])
        left = budget - sum(p.tokens for p in packed) - sum(h.tokens for h in history)
        shown = 0
        for n, c in zip(notes, costs, strict=True):
            fits = c <= left
            if fits:
                history.append(replace(n, tokens=c))
                left, shown = left - c, shown + 1
            trace.append(TraceEntry(n.id, n.memory.text, fits, "uncertain" if fits else "budget",
                                    {"tokens": float(c)}, n.note or ""))
        if verdict == "unknown" and message == NOT_IN_RECORD and shown:
            message = UNCERTAIN
    # Only memories that support the answer are reinforced: filler packed to use the budget must
    # not be kept alive by being shown (a recall would otherwise reinforce everything it packs).
    used_ids = [p.id for p in packed if p.id in fused and (evidence_of(fused[p.id]) >= cfg.vague_at
                                                           or fit_of.get(p.id) == "answers")]
    if used_ids:
        store.touch(used_ids, now)
    provenance = {
        "retrievers": [name for name, on in (("dense", w < 1), ("bm25", w > 0)) if on],
        "fusion": cfg.fusion,
        "time_scope": [ranked.scope["since"].isoformat(), ranked.scope["until"].isoformat()] if ranked.scope else [],
        "context": {"weight": cfg.context_weight, "links": ranked.follows},
        # What reordered the candidates, and how many dialog turns it reordered (0: none among the hits).
        "rerank": {"model": cfg.rerank, "turns": sum("rerank" in e for e in fused.values()),
                   **Reranker.load(cfg.rerank).provenance} if cfg.rerank else {},
        "evidence": "answerability model" if p_answer is not None else "claims, then dense cosine + query coverage",
        "answerability": {"p": None if p_answer is None else round(p_answer, 4),
                          "model": answerable.info.get("file") if answerable is not None else None,
                          "features": [round(v, 5) for v in x]},
        "question": describe(q), "confidence_why": why, "evidence_top": round(top, 4),
        "about_asked": evidence.about_asked(q, pack_fits),
        "tokenizer": tokenizer or getattr(count_many, "name", None) or getattr(count_many, "__name__", "?"),
    }
    used = sum(p.tokens for p in packed) + sum(h.tokens for h in history)
    return Recall(query, packed, verdict, cite(packed), trace, budget, used, history, message, provenance)
