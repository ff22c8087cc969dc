"""Recall: hybrid retrieval, scoring, veto, budget packing, confidence, history and citations.

Recall is a packing problem, not a search: under a hard token ceiling the caller
must get the memories that matter and know how far to trust them. Every decision
is a pure function: fusing, scoring, the veto and packing live in `mnemo.ranking`;
reading the query (`resolve_self`, `query_vector`, `coverage`), evidence and
confidence, history notes and citations here; `recall` only wires them to a store
and an embedder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from . import evidence
from .clock import utc
from .config import DecayConfig, RecallConfig
from .errors import InvalidInput
from .extract.questions import ask, describe
from .model import Citation, Link, MemoryRecord, Packed, Recall, TraceEntry
from .normalise import canonical_attribute
from .ranking import (
    became_true,
    current_first,
    fuse,
    fuse_scoped,
    in_time,
    pack,
    score,
    veto,
)

NOT_IN_RECORD = "not in the record"
NO_ROOM = "nothing relevant fits the budget"
UNCERTAIN = "uncertain: what the record holds on this rested on a fact that has since changed (see history)"

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
    return [Citation(p.id, p.memory.session, p.memory.turn_id, became_true(p.memory), p.memory.source) for p in packed]


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
