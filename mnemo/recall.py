"""Recall: hybrid retrieval, scoring, veto, budget packing, confidence, history and citations.

Recall is a packing problem, not a search: under a hard token ceiling the caller
must get the memories that matter and know how far to trust them. Every decision
is a pure function (`fuse`, `score`, `veto`, `pack`, `confidence`,
`history_notes`, `cite`); `recall` only wires them to a store and an embedder.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import numpy as np

from . import decay, evidence
from .clock import utc
from .config import DecayConfig, RecallConfig
from .errors import ConfigError, InvalidInput
from .extract.questions import ask, describe
from .model import Citation, Link, MemoryRecord, Packed, Recall, Scored, TraceEntry
from .normalise import canonical_attribute

NOT_IN_RECORD = "not in the record"
NO_ROOM = "nothing relevant fits the budget"
UNCERTAIN = "uncertain: what the record holds on this rested on a fact that has since changed (see history)"

# Type priors: what a kind and a category are usually worth in a context window,
# before relevance. The prior is KIND_PRIOR[kind] * CATEGORY_PRIOR[category]:
# a semantic preference is 1.0, a procedural instruction 0.81, an episodic note 0.18.
KIND_PRIOR = {"semantic": 1.0, "procedural": 0.9, "episodic": 0.6}
CATEGORY_PRIOR = {
    "preference": 1.0, "profile": 1.0, "instruction": 0.9, "fact": 0.8, "decision": 0.8,
    "deadline": 0.8, "lesson": 0.8, "failure": 0.7, "routine": 0.7, "change": 0.6,
    "event": 0.4, "note": 0.3,
}
# Evidence weights (see `evidence`): the calibration notebook fits certain_at / vague_at on top.
EVIDENCE_DENSE = 0.5
EVIDENCE_COVERAGE = 0.5

_STOPWORDS = frozenset(
    "a an the is are was were be been being am do does did done what whats where when who whom whose "
    "which why how of in on at to for from by with about into over and or but if then than so my your "
    "his her their our its i you he she we they it me us them that this these those there here have has "
    "had can could would should will shall may might must not no any some much many tell know remember "
    "recall please again ever still just also user".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
FUSIONS = ("rrf", "weighted", "weighted_rank")


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
            else:
                entry["fused"] += weight * ((value - low) / (high - low) if high > low else 1.0)
    if cfg.fusion == "weighted_rank":
        # Only hits of a retriever with weight are ranked; the others keep relevance 0, as under RRF.
        weighted = {m for hits, weight in ((dense, 1.0 - w), (lexical, w)) if weight > 0 for m, _ in hits}
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
    out.sort(key=lambda s: (-s.score, s.memory.id))
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
                when = _when(winner.memory)
                vetoed[s.memory.id] = TraceEntry(
                    s.memory.id, s.memory.text, False, "veto", _trace_scores(s),
                    f"{s.memory.attribute}={s.memory.value!r} is stale: {winner.memory.id} says "
                    f"{winner.memory.value!r}" + (f" (newer, {when.date().isoformat()})" if when else " (newer)"))
    kept = [s for s in scored if s.memory.id not in vetoed]
    return kept, [vetoed[s.memory.id] for s in scored if s.memory.id in vetoed]


def current_first(scored: list[Scored]) -> list[Scored]:
    """Return the candidates with, for each (subject, slot), the newest statement ranked above older ones.

    The veto removes what a single-valued slot no longer holds; text that was never reconciled
    (a long chat written as episodes, a multi-valued slot) can still hold an older value of the
    same slot. There the newest statement takes the best score of its group and the older ones
    keep theirs, so the current value comes first and the history after it.
    """
    groups: dict[tuple[str, str, str], list[Scored]] = {}
    for s in scored:
        m = s.memory
        if m.active and m.subject and m.attribute and m.value is not None:
            groups.setdefault((m.user, m.subject.casefold(), m.attribute.casefold()), []).append(s)
    lift: dict[str, float] = {}
    for group in groups.values():
        if len({_norm(s.memory.value) for s in group}) < 2:
            continue
        newest = max(group, key=lambda s: _newness(s.memory))
        best = max(s.score for s in group)
        if newest.score < best:
            lift[newest.memory.id] = best + 1e-6
    if not lift:
        return scored
    out = [replace(s, score=lift.get(s.memory.id, s.score), scores={**s.scores, "current_first": 1.0})
           if s.memory.id in lift else s for s in scored]
    out.sort(key=lambda s: (-s.score, s.memory.id))
    return out


def _norm(value: str | None) -> str:
    return " ".join((value or "").casefold().split())


def _when(memory: MemoryRecord) -> datetime | None:
    """Return when a memory became true: valid_from, else created_at."""
    when = memory.valid_from or memory.created_at
    return utc(when) if when else None


def _newness(memory: MemoryRecord) -> tuple:
    """Sort key for "newest": valid_from/created_at, then created_at, then id for a stable tie-break."""
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    created = utc(memory.created_at) if memory.created_at else epoch
    return (_when(memory) or epoch, created, memory.id)


def _trace_scores(s: Scored) -> dict[str, float]:
    return {**s.scores, "score": s.score, "tokens": float(s.tokens)}


def pack(scored: Sequence[Scored], budget_tokens: int, cfg: RecallConfig,
         pinned: Sequence[Scored] = ()) -> tuple[list[Packed], list[TraceEntry]]:
    """Return the memories packed under the hard token ceiling, and a trace of every candidate.

    Pinned memories go first, by score, bypassing quotas and thresholds but not the
    budget. Then pass 1 packs by score within per-kind quotas (a share of the whole
    budget; an unknown kind has none), and pass 2 fills what is left with the best
    leftovers of any kind. Inactive memories are never packed. Each id is traced once:
    pinned | packed | inactive | below_threshold | budget | quota.
    """
    budget = max(0, int(budget_tokens))
    left = budget
    packed: list[Packed] = []
    trace: dict[str, TraceEntry] = {}

    def put(s: Scored, reason: str, included: bool, detail: str = "") -> None:
        trace[s.memory.id] = TraceEntry(s.memory.id, s.memory.text, included, reason, _trace_scores(s), detail)
        if included:
            packed.append(Packed(s.memory, s.score, s.tokens, dict(s.scores)))

    def by_score(items: Iterable[Scored]) -> list[Scored]:
        return sorted(items, key=lambda s: (-s.score, s.memory.id))

    for s in by_score(pinned):
        if s.memory.id in trace:
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
        if s.memory.id in trace:
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
        if s.tokens <= left:
            left -= s.tokens
            put(s, "packed", True, "pass 2: unused quota of other kinds")
        elif quota_blocked:
            put(s, "quota", False, f"{s.memory.kind} quota used up; needs {s.tokens} tokens, {left} left")
        else:
            put(s, "budget", False, f"needs {s.tokens} tokens, {left} left")

    first = {s.memory.id for s in pinned}
    packed.sort(key=lambda p: (p.memory.id not in first, -p.score, p.memory.id))
    return packed, list(trace.values())


def resolve_self(query: str, names: Sequence[str]) -> str:
    """Return `query` with the user's own names replaced by "the user", as memory texts say it.

    Extraction writes first-person facts about "the user"; a question that names the
    user ("Where does Alice live?") would otherwise match the memory holding the name
    rather than the one holding the answer.
    """
    for name in sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True):
        pattern = re.compile(rf"\b{re.escape(name)}(?=\W|$)", re.IGNORECASE)
        query = pattern.sub("the user", query)
    return query


def query_vector(embedder: Any, query: str, names: Sequence[str]) -> np.ndarray:
    """Return the dense query vector: the query as asked, blended with its "the user" form.

    Memories written by extraction say "the user", imported ones may use the name;
    the normalised sum of both embeddings serves either in one search.
    """
    resolved = resolve_self(query, names)
    if resolved == query:
        return embedder.embed([query])[0]
    both = embedder.embed([query, resolved])
    return both.sum(axis=0) / max(float(np.linalg.norm(both.sum(axis=0))), 1e-12)


def coverage(query: str, text: str, names: Sequence[str] = (), attribute: str | None = None) -> float:
    """Return the share of the query's content words found in `text`, in [0, 1].

    Words are lower-cased, stop words and single letters dropped, a plural "s"
    stripped and the rest cut to four letters (crude prefix stemming: "lives",
    "lived" and "live" meet). The user's own names count as stop words, like
    "user": every memory of the user is about them, so naming them is no evidence.
    A query with no content word covers nothing. A typed memory also covers the
    words that name its own attribute ("what diet ..." and a `diet` memory, "do for
    a living" and a `job_title` one, through the slot table (`mnemo.lexicon`)): only
    the memory of that attribute gains, so a question about an attribute the record
    lacks stays uncovered.
    """
    skip = frozenset(w for n in names for w in _WORD.findall(n.casefold()))
    wanted = _terms(query, skip)
    if not wanted:
        return 0.0
    covered = _terms(text, skip)
    if attribute:
        covered |= _terms(" ".join(_attribute_phrases(query).get(attribute, ())), skip)
    return len(wanted & covered) / len(wanted)


@lru_cache(maxsize=256)
def _attribute_phrases(query: str) -> dict[str, tuple[str, ...]]:
    """Return {attribute: phrases of `query` (one to four words) that name it}: once per query, not per memory."""
    words = _WORD.findall(query.casefold())
    out: dict[str, list[str]] = {}
    for n in (1, 2, 3, 4):
        for i in range(len(words) - n + 1):
            phrase = " ".join(words[i:i + n])
            if phrase not in _STOPWORDS:
                out.setdefault(canonical_attribute(phrase), []).append(phrase)
    return {a: tuple(p) for a, p in out.items() if a}


def _terms(text: str, skip: frozenset[str] = frozenset()) -> set[str]:
    out = set()
    for word in _WORD.findall(text.casefold()):
        if word in _STOPWORDS or word in skip or (len(word) < 2 and not word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word[:4])
    return out


def evidence_of(entry: Mapping[str, Any]) -> float:
    """Return how strongly one candidate is supported, in [0, 1]: the value confidence thresholds.

    evidence = EVIDENCE_DENSE * clip(dense cosine, 0, 1) + EVIDENCE_COVERAGE * coverage,
    where coverage is `coverage(query, memory text)`. Both are absolute signals: fused
    relevance is rank-based and is 1 for the top hit of any query, even an unrelated
    one, so it cannot say whether the record holds the answer. A memory both
    retrievers agree on (similar meaning and the query's own words) scores high.
    """
    dense = min(1.0, max(0.0, float(entry.get("dense") or 0.0)))
    cover = min(1.0, max(0.0, float(entry.get("coverage") or 0.0)))
    return EVIDENCE_DENSE * dense + EVIDENCE_COVERAGE * cover


def confidence(packed: Sequence[Packed], fused: Mapping[str, dict], cfg: RecallConfig) -> str:
    """Return "certain", "vague" or "unknown" from the best evidence among the packed memories.

    Only retrieved memories count: a pinned memory that no retriever found does not
    make the pack relevant to the query.
    """
    top = max((evidence_of(fused[p.id]) for p in packed if p.id in fused), default=0.0)
    if top >= cfg.certain_at:
        return "certain"
    if top >= cfg.vague_at:
        return "vague"
    return "unknown"


def cite(packed: Sequence[Packed]) -> list[Citation]:
    """Return one citation per packed memory: its session, turn, time and source."""
    return [Citation(p.id, p.memory.session, p.memory.turn_id, _when(p.memory), p.memory.source) for p in packed]


def history_notes(packed: Sequence[Packed], links: Sequence[Link], records: Mapping[str, MemoryRecord],
                  hops: int) -> list[Packed]:
    """Return the memories the packed ones superseded, up to `hops` steps back, each with a note.

    A note reads "corrected from <old value or text> on <date>, because <cause> (not
    current)"; the cause is the text of the memory a `because` link points to, else
    the old memory's status reason. These are history, never current memories.
    """
    older: dict[str, list[Link]] = {}
    causes: dict[str, str] = {}
    for link in links:
        if link.kind == "supersedes":
            older.setdefault(link.src, []).append(link)
        elif link.kind == "because" and link.dst in records:
            causes.setdefault(link.src, records[link.dst].text)
    out: list[Packed] = []
    seen = {p.id for p in packed}
    frontier = [p.memory for p in packed]
    for _ in range(max(0, hops)):
        nxt = []
        for new in frontier:
            for link in sorted(older.get(new.id, []), key=lambda x: x.dst):
                old = records.get(link.dst)
                if old is None or old.id in seen:
                    continue
                seen.add(old.id)
                nxt.append(old)
                out.append(Packed(old, 0.0, 0, {}, _note(old, new, link, causes)))
        frontier = nxt
    return out


def _note(old: MemoryRecord, new: MemoryRecord, link: Link, causes: Mapping[str, str]) -> str:
    when = link.at or old.status_at or new.created_at
    cause = causes.get(new.id) or causes.get(old.id) or old.status_reason
    was = repr(old.value) if old.value is not None else repr(old.text)
    return (f"corrected from {was}" + (f" on {utc(when).date().isoformat()}" if when else "")
            + (f", because {cause}" if cause else "") + " (not current)")


def recall(store: Any, embedder: Any, query: str, *, user: str, budget_tokens: int | None, cfg: RecallConfig,
           decay_cfg: DecayConfig, now: datetime, count_many: Callable[[list[str]], list[int]],
           filters: dict | None = None, tokenizer: str | None = None) -> Recall:
    """Return the recall pack for `query`: retrieve, fuse, score, veto, pack, judge, expand, cite, touch.

    The dense retriever always runs, because its cosine is half of the evidence
    behind the confidence; BM25 runs when it has weight. Only ids found by a
    retriever with weight become candidates. On "unknown" nothing is packed: every
    candidate is traced as "abstain" and the message says "not in the record" (or,
    when strong evidence was left out only by the budget, that nothing fits it).
    History shares the budget with the pack (`make_room`); touch runs once, on the pack.
    """
    if not isinstance(query, str):
        raise InvalidInput("query must be a string")
    budget = cfg.budget_tokens if budget_tokens is None else int(budget_tokens)
    if budget < 0:
        raise InvalidInput(f"budget_tokens must be >= 0, got {budget}")
    w = cfg.lexical_weight
    names = [user, *store.self_names(user)]
    q = ask(resolve_self(query, names))
    vector = query_vector(embedder, query, names)
    dense = store.search_dense(vector, cfg.candidates, user=user, filters=filters)
    lexical = store.search_lexical(query, cfg.candidates, user=user, filters=filters) if w > 0 else []
    fused = fuse(dense, lexical, cfg)
    when = evidence.spans(q, now) if cfg.time_scope else []
    if when:
        scope = in_time(filters, (min(a for a, _ in when), max(b for _, b in when)))
        dense_in = store.search_dense(vector, cfg.candidates, user=user, filters=scope)
        lexical_in = store.search_lexical(query, cfg.candidates, user=user, filters=scope) if w > 0 else []
        fused = fuse_scoped(fused, fuse(dense_in, lexical_in, cfg), cfg)
        dense, lexical = dense + dense_in, lexical + lexical_in
    wanted = ([m for m, _ in dense] if w < 1 else []) + [m for m, _ in lexical]
    records = store.get_many(list(dict.fromkeys(wanted)))
    candidates = [m for m in records.values() if m.user == user]
    # A memory that held only while a root fact did is not current once that fact is gone: shown as uncertain.
    shaken = _shaken(store, candidates)
    candidates = [m for m in candidates if m.id not in shaken]
    pins = [m for m in store.pinned(user, filters) if m.user == user]
    aliases = evidence.aliases(candidates + pins)
    fit_of: dict[str, str] = {}
    for m in candidates + pins:
        fit_of[m.id] = evidence.fit(q, m, aliases)
        if m.id in fused:
            fused[m.id]["coverage"] = coverage(query, m.text, names, m.attribute)
            fused[m.id]["claim"] = evidence.FIT_SCORE[fit_of[m.id]]

    everyone = list({m.id: m for m in candidates + pins}.values())
    counts = dict(zip([m.id for m in everyone], count_many([m.text for m in everyone]), strict=True))
    scored, vetoed = veto(score(everyone, fused, now, cfg, decay_cfg, counts))
    scored = current_first(scored)
    pin_ids = {m.id for m in pins}
    packed, trace = pack([s for s in scored if s.memory.id not in pin_ids], budget, cfg,
                         [s for s in scored if s.memory.id in pin_ids])
    trace = vetoed + trace
    top = evidence.top_evidence(q, [(fit_of.get(p.id, "other"), evidence_of(fused[p.id])) for p in packed
                                    if p.id in fused])
    missing = evidence.missing_names(q, [p.memory for p in packed], aliases, names)
    pack_fits = [fit_of.get(p.id, "other") for p in packed if p.id in fused]
    verdict, why = evidence.verdict(q, pack_fits, top, missing, cfg.certain_at, cfg.vague_at)

    history: list[Packed] = []
    message = ""
    if verdict == "unknown":
        trace = [TraceEntry(t.memory_id, t.text, False, "abstain", t.scores, f"was {t.reason}; {t.detail}")
                 for t in trace]
        # Strong evidence left out of an "unknown" pack was left out by the budget, not absent.
        found = not missing and any(evidence_of(fused[s.memory.id]) >= cfg.vague_at for s in scored
                                    if s.memory.id in fused and s.memory.active)
        packed, message = [], (NO_ROOM if found else NOT_IN_RECORD)
    elif cfg.expand_hops > 0:
        links, notes = _expand(store, packed, cfg.expand_hops)
        costs = count_many([n.note or "" for n in notes]) if notes else []
        packed, history, evicted = make_room(packed, notes, costs, links, budget)
        trace = [evicted.get(t.memory_id, t) for t in trace]
        shown = {h.id for h in history}
        trace += [TraceEntry(n.id, n.text, n.id in shown, "expansion" if n.id in shown else "budget",
                             {"tokens": float(c)}, f"history: {n.note}") for n, c in zip(notes, costs, strict=True)]
    if shaken:
        # Uncertain notes take what the pack and its history left; they never evict anything.
        notes = [Packed(m, 0.0, 0, {}, note) for m, note in shaken.values()]
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
        "fusion": cfg.fusion, "time_scope": [(a.isoformat(), b.isoformat()) for a, b in when], "evidence": "claims, then dense cosine + query coverage",
        "question": describe(q), "confidence_why": why, "evidence_top": round(top, 4),
        "about_asked": evidence.about_asked(q, pack_fits),
        "tokenizer": tokenizer or getattr(count_many, "name", None) or getattr(count_many, "__name__", "?"),
    }
    used = sum(p.tokens for p in packed) + sum(h.tokens for h in history)
    return Recall(query, packed, verdict, cite(packed), trace, budget, used, history, message, provenance)


def _shaken(store: Any, candidates: Sequence[MemoryRecord]) -> dict[str, tuple[MemoryRecord, str]]:
    """Return {id: (memory, note)} of candidates linked `depends_on` to a fact that is no longer active."""
    # Only a memory extracted with a condition ("if the team lead changes, ...") can have such a link: the
    # links are read for those alone, so an ordinary recall pays no query for this.
    ids = {m.id for m in candidates if m.meta.get("depends_on")}
    deps = [x for x in store.links(sorted(ids), ("depends_on",)) if x.src in ids] if ids else []
    if not deps:
        return {}
    roots = store.get_many(sorted({x.dst for x in deps}))
    out = {}
    by_id = {m.id: m for m in candidates}
    for x in deps:
        root = roots.get(x.dst)
        if root is not None and not root.active:
            when = f" on {utc(root.status_at).date().isoformat()}" if root.status_at else ""
            out[x.src] = (by_id[x.src], f"uncertain: it held while {root.text.rstrip('.')!r}, which was "
                                        f"{root.status}{when} (not current)")
    return out


def _expand(store: Any, packed: list[Packed], hops: int) -> tuple[list[Link], list[Packed]]:
    """Return the supersedes / because links reached from the pack within `hops`, and the history notes."""
    links: list[Link] = []
    records: dict[str, MemoryRecord] = {p.id: p.memory for p in packed}
    frontier = [p.id for p in packed]
    for _ in range(hops):
        fresh = [x for x in store.links(frontier, ("supersedes", "because")) if x not in links] if frontier else []
        links += fresh
        missing = list(dict.fromkeys(i for x in fresh for i in (x.src, x.dst) if i not in records))
        records.update(store.get_many(missing) if missing else {})
        frontier = [x.dst for x in fresh if x.kind == "supersedes" and x.src in frontier]
    return links, history_notes(packed, links, records, hops)


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
        for p in sorted(by_id.values(), key=lambda p: (p.score, p.id)):
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
