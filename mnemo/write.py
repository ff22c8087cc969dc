"""The write path: record the turns, extract, reconcile, apply the plan in one transaction.

There is one path: `Memory.remember` is `remember_many` of one turn, and `Memory.add` reconciles
its structured memory with the same collaborators (the embedder, the judge, the update model).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from . import validate
from .config import Config
from .corrections import (
    SAME_WORDS,
    corrected_words,
    forgotten_siblings,
    moved,
    remainder,
    rest,
    restating,
    said_alike,
)
from .decay import ttl_for
from .embed import PhraseVectors
from .extract import AHEAD, parse_later, parsed_texts, read_ahead, start_parse_worker
from .model import (
    CONTEXT_KEY,
    CORRECTS_KEY,
    Action,
    Candidate,
    Event,
    Link,
    MemoryRecord,
    Supersession,
    Turn,
    TurnOutcome,
    WriteReport,
    context_of,
)
from .reconcile import plan_writes
from .store import Store, new_id
from .store.cache import order_key
from .store.protocol import analyse_ahead, holding
from .updates import UpdateModel

if TYPE_CHECKING:
    from .embed import Embedder
    from .extract import Extractor

# Slot phrases recur turn after turn; each is embedded once per embedder (embed.PhraseVectors).
PHRASES = PhraseVectors()
# How many nearest active memories (beyond those with the same subject) reconciliation sees per candidate.
NEIGHBOURS = 20
# How many memories that share words with a candidate's named subject reconciliation also sees.
NAMED_NEIGHBOURS = 5


def record_turn(store: Store, text: str, *, user: str, session: str | None, agent: str | None,
                at: datetime, cfg: Config, role: str = "user", meta: dict[str, Any] | None = None) -> Turn:
    """Validate and store a raw turn in its own transaction, so it survives whatever follows."""
    turn = new_turn(text, user=user, session=session, agent=agent, at=at, cfg=cfg, role=role, meta=meta)
    store.insert_turn(turn)
    return turn


def new_turn(text: str, *, user: str, session: str | None, agent: str | None, at: datetime, cfg: Config,
             role: str = "user", meta: dict[str, Any] | None = None) -> Turn:
    """Return a validated raw turn, not yet stored (InvalidInput says what is wrong with it)."""
    validate.turn(text, user=user, session=session, agent=agent, meta_=meta, max_chars=cfg.write.max_turn_chars)
    return Turn(id=new_id("t"), user=user, text=text, at=at, session=session, agent=agent, role=role,
                meta=dict(meta or {}))


def neighbourhood(store: Store, user: str, candidates: Sequence[Candidate], vecs: np.ndarray,
                  active_for: Callable[[str, Iterable[str]], list[MemoryRecord]] | None = None) -> list[MemoryRecord]:
    """Return the active memories reconciliation must see: same subject, plus nearest neighbours.

    `active_for` reads the user's active memories by subject (`store.active_for`, or a block's
    `SubjectReads`, which answers the same from one read)."""
    same = (active_for or store.active_for)(user, {c.subject for c in candidates})
    ids: dict[str, None] = {m.id: None for m in same}
    for vec in vecs:
        for mid, _ in store.search_dense(vec, NEIGHBOURS, user=user):
            ids.setdefault(mid)
    # A named entity's other memories, however worded ("Ferris" and "the mechanic's name is Ferris").
    for name in sorted({c.subject for c in candidates if c.subject and c.subject not in ("user", "team")}):
        for mid, _ in store.search_lexical(name, NAMED_NEIGHBOURS, user=user):
            ids.setdefault(mid)
    records = store.get_many(list(ids))
    return [records[i] for i in ids if i in records]


CONTEXT_WEIGHT = 0.5  # the share of its context in a memory's stored vector (docs/benchmarks.md, "Through the write path")


def searched_vectors(embedder: Embedder, candidates: Sequence[Candidate], vecs: np.ndarray) -> np.ndarray:
    """Return the vectors the candidates are stored with: each one's words, with what they were said with
    (`model.context_of`) at CONTEXT_WEIGHT, normalised, so dense search finds a clause by its turn as lexical
    search does (`rows.searched_text`). The write path compares claims by their words alone (`vecs`).
    Each distinct context is embedded once; a candidate without one keeps its vector."""
    contexts = [context_of(c.text, c.meta) for c in candidates]
    todo = sorted({x for x in contexts if x})
    if not todo:
        return vecs
    of = dict(zip(todo, embedder.embed(todo), strict=True))
    out = np.array(vecs, dtype=np.float32, copy=True)
    for k, x in enumerate(contexts):
        if x:
            mixed = out[k] + CONTEXT_WEIGHT * np.asarray(of[x], np.float32)
            out[k] = mixed / (np.linalg.norm(mixed) or 1.0)
    return out


def carry(store: Store, embedder: Embedder, actions: Sequence[Action], candidates: Sequence[Candidate],
          stored: np.ndarray, pending: Sequence[Link] = ()) -> tuple[list[Action], list[Candidate], np.ndarray]:
    """Return the plan, its candidates and their stored vectors with what each correction carries (`corrections`).

    A candidate that supersedes memories gains their words (`corrections.corrected_words`) in its context
    (`model.context_of`), which both retrievers search beside its own words and never show, and in
    `meta["corrects"]`, which recall reads as what it mentions and covers: "What time is the anniversary
    dinner?" finds and is answered by "they've moved us to 8:15". And what a superseded memory said besides
    the corrected value is added back as a derived memory (`corrections.remainder`), linked to it. Only
    superseding candidates change (one read of their targets and one embedding call a turn, when any);
    `pending`: the links the caller holds to write later.
    """
    targets: dict[int, list[str]] = {}
    forgets = [a for a in actions if a.op == "forget" and a.target_id]
    for a in actions:
        if a.op == "supersede" and a.candidate is not None and a.target_id:
            targets.setdefault(id(a.candidate), []).append(a.target_id)
    if not targets and not forgets:
        return list(actions), list(candidates), stored
    found = store.get_many([t for ts in targets.values() for t in ts] + [a.target_id for a in forgets])
    mixing: dict[int, tuple[str, str]] = {}
    kept: list[tuple[Candidate, MemoryRecord, Candidate]] = []
    moves: list[Action] = []
    gone = {a.target_id for a in forgets}
    for a in forgets:
        # A forgotten memory's words must not stay in the other claims of its sentence: each goes too, and what
        # it said besides the forgotten value is kept (`corrections.unsaid`).
        for m, r in forgotten_siblings(store, [found[a.target_id]], gone):
            gone.add(m.id)
            moves.append(Action("forget", a.candidate, m.id, f"{a.reason} (said in the same words)",
                                {**a.evidence, "match": SAME_WORDS}))
            if r is not None:
                kept.append((r, m, a.candidate))
    for k, c in enumerate(candidates):
        olds = [found[t] for t in targets.get(id(c), ()) if t in found]
        taken = {t for ts in targets.values() for t in ts} | {a.target_id for a in moves}
        also = [m for m in restating(store, olds, pending) if m.id not in taken and moved(m, c) is not None]
        # The other claims of a sentence kept whole: its words say the corrected value too.
        alike = {m.id: (m, o) for o in olds for m in said_alike(store, [o]) if m.id not in taken}
        moves += [Action("supersede", c, m.id, f"restates the value {c.text!r} corrects", {"restates": True})
                  for m in [*also, *(m for m, _ in alike.values())]]
        kept += [(r, m, c) for m, o in alike.values() if (r := rest(m, o, c)) is not None]
        olds += also
        words = " ".join(corrected_words(o) for o in olds).strip()
        if words:
            c.meta.update({CORRECTS_KEY: words, CONTEXT_KEY: " ".join(x for x in (context_of(c.text, c.meta), words)
                                                                        if x)})
            mixing[k] = (c.text, c.meta[CONTEXT_KEY])
        kept += [(r, o, c) for o in olds if (r := remainder(o, c)) is not None]
    mixing.update({len(candidates) + n: (r.text, context_of(r.text, r.meta) or r.text) for n, (r, _, _) in
                   enumerate(kept)})
    out = np.vstack([np.asarray(stored, np.float32), np.zeros((len(kept), stored.shape[1]), np.float32)])
    if mixing:
        vecs = np.asarray(embedder.embed([x for pair in mixing.values() for x in pair]), np.float32)
        for n, k in enumerate(mixing):
            mixed = vecs[2 * n] + CONTEXT_WEIGHT * vecs[2 * n + 1]
            out[k] = mixed / (np.linalg.norm(mixed) or 1.0)
    extra = [Action("add", r, reason=f"what {o.id} said besides the value {'forgotten' if o.id in gone else 'it corrects'}"
                    f" ({c.text!r})", evidence={"remainder_of": o.id, "correction": c.text}) for r, o, c in kept]
    return [*actions, *moves, *extra], [*candidates, *(r for r, _, _ in kept)], out


def slot_phrase(item: Candidate | MemoryRecord) -> str | None:
    """Return the words a claim's slot was said in ("warranty period"), else its canonical slot's words."""
    said = item.meta.get("slot_phrase")
    if isinstance(said, str) and said.strip():
        return said.replace("_", " ").strip()
    return item.attribute.replace("_", " ") if item.attribute else None


def slot_similarity(embedder: Embedder, candidates: Sequence[Candidate], active: Sequence[MemoryRecord]) -> np.ndarray:
    """Return the cosine of every candidate's slot phrase with every active memory's (0 where one has none).

    Each distinct phrase is embedded once (and kept: `PHRASES`), and each distinct pair of phrases multiplied once, then
    spread over the memories a row at a time: the cost grows with the number of distinct slots.
    """
    out = np.zeros((len(candidates), len(active)), np.float32)
    left = [slot_phrase(c) for c in candidates]
    right = [slot_phrase(m) for m in active]
    phrases = sorted({p for p in left + right if p})
    if not phrases or not any(left) or not any(right):
        return out
    vec = PHRASES.embed(embedder, phrases)
    cols = _positions(right)
    slots = list(cols)  # the memories' distinct phrases
    which = np.empty(len(right), np.int64)  # each memory's phrase, as a position in `slots`
    for k, b in enumerate(slots):
        which[cols[b]] = k
    has = np.array([bool(b) for b in right])
    for a, i in _positions(left).items():
        # float64 cosines cast to float32 on assignment, exactly as one float per cell would be.
        cos = np.array([float(vec[a] @ vec[b]) for b in slots], np.float64)
        out[np.ix_(i, np.flatnonzero(has))] = cos[which[has]]
    return out


def _positions(phrases: list[str | None]) -> dict[str, list[int]]:
    """Return {phrase: the positions it is at}, for the positions that have one."""
    out: dict[str, list[int]] = {}
    for k, p in enumerate(phrases):
        if p:
            out.setdefault(p, []).append(k)
    return out


def plan(store: Store, user: str, candidates: list[Candidate], vecs: np.ndarray, cfg: Config,
         judge: Callable[[Candidate, MemoryRecord], dict], embedder=None,
         active_for: Callable[[str, Iterable[str]], list[MemoryRecord]] | None = None,
         model: UpdateModel | None = None, declared: bool = False) -> list[Action]:
    """Return the write plan for `candidates` against the user's active memories (`reconcile.plan_writes` over
    the neighbourhood read here; `model`: the fitted update decision, `mnemo.updates`; the hand rules without
    one; `declared`: a structured write)."""
    active = neighbourhood(store, user, candidates, vecs, active_for)
    sims = vecs @ store.vectors([m.id for m in active]).T if active else np.zeros((len(candidates), 0))
    slots = slot_similarity(embedder, candidates, active) if embedder is not None and active else None
    return plan_writes(candidates, active, sims, cfg.write, judge=judge, slot_sims=slots, model=model,
                       declared=declared)


def remember_many(store: Store, embedder: Embedder, extractor: Extractor, turns: Sequence[Turn], cfg: Config,
                  judge: Callable[[Candidate, MemoryRecord], dict], model: UpdateModel | None = None
                  ) -> list[WriteReport]:
    """Remember validated turns in order, with the outcomes of one `remember` each; return one report a turn.

    The raw turns are recorded first, in one committed transaction (one turn: in the transaction of
    its memories, or alone if reading it raises). Then each block of turns is
    parsed in one pass (`extract.read_ahead`) and its candidates embedded in one call; every turn
    is still reconciled against what the turns before it wrote (a correction in the fifth turn
    supersedes a fact of the third), and all the memories are written in one transaction.
    """
    contexts = _contexts(store, turns, cfg.write.context_turns + 1)
    blocks = _blocks(turns, contexts, cfg, extractor.offline)
    # With a worker, each next block is parsed in another process while this one is read and written;
    # asked for now, so that a worker that must still load its parser loads while the turns are recorded.
    # (A model, not the parser, extracts when not offline: then there is nothing to parse.)
    later = extractor.offline and cfg.write.parse_worker and len(blocks) > 1 and start_parse_worker() is not None
    if len(turns) == 1:
        # One turn: recorded in the transaction that writes its memories (one commit, not two), and
        # alone if reading it fails, so a turn is never lost.
        try:
            return process(store, embedder, extractor, turns, contexts, cfg, judge, model, blocks=blocks, record=True)
        except BaseException:
            with store.transaction():
                store.insert_turns(turns)
            raise
    with store.transaction():
        store.insert_turns(turns)
    return process(store, embedder, extractor, turns, contexts, cfg, judge, model, blocks=blocks, worker=later)


def process(store: Store, embedder: Embedder, extractor: Extractor, turns: Sequence[Turn], contexts: list[list[Turn]],
            cfg: Config, judge: Callable[[Candidate, MemoryRecord], dict], model: UpdateModel | None = None, *,
            blocks: list[tuple[list[tuple[int, Turn]], list[str]]] | None = None, worker: bool = False,
            record: bool = False) -> list[WriteReport]:
    """Extract, reconcile and write turns already recorded, each with its context; return one report a turn.

    The second half of `remember_many`, and what `mnemo.recover` replays a recorded turn through.
    The memories, events, links and the turns' outcomes are written in one transaction (`record`:
    the turns themselves too, for turns not yet recorded).
    """
    blocks = blocks if blocks is not None else _blocks(turns, contexts, cfg, extractor.offline)
    later = worker
    reports: list[WriteReport] = []
    # Events and links are only written here, never read while turns are reconciled: held for one append each.
    held: tuple[list[Event], list[Link]] = ([], [])
    # Memories too: each turn's are held (`store.hold_memories`, where the engine batches) and written in as few
    # statements as reads allow.
    with store.transaction(), holding(store):
        if record:
            store.insert_turns(turns)
        ahead = None
        for i, (block, to_parse) in enumerate(blocks):
            if ahead is not None:
                ahead.wait()
            else:
                read_ahead(to_parse)
            ahead = parse_later(blocks[i + 1][1]) if later and i + 1 < len(blocks) else None
            found = [cap(extractor(t, contexts[k], cfg.write), cfg.write.max_candidates) for k, t in block]
            texts = [c.text for kept, _ in found for c in kept]
            vecs = embedder.embed(texts) if texts else np.zeros((0, store.dim), np.float32)
            stored_vecs = searched_vectors(embedder, [c for kept, _ in found for c in kept], vecs)
            # The words each turn writes (its candidates) and searches (their named subjects), analysed at once.
            analyse_ahead(store, [*texts, *(c.subject for kept, _ in found for c in kept if c.subject)])
            # One turn reads its subjects as it goes; a block reads them once for all its turns.
            reads = None if len(block) == 1 else SubjectReads(
                store, [(turn.user, c.subject) for (_, turn), (kept, _) in zip(block, found, strict=True) for c in kept])
            at = 0
            for (_, turn), (candidates, overflow) in zip(block, found, strict=True):
                mine, stored = vecs[at:at + len(candidates)], stored_vecs[at:at + len(candidates)]
                at += len(candidates)
                actions = plan(store, turn.user, candidates, mine, cfg, judge, embedder,
                               reads.active_for if reads else None, model)
                actions, candidates, stored = carry(store, embedder, actions, candidates, stored, held[1])
                report = apply_plan(store, actions, candidates, stored, turn=turn, cfg=cfg, held=held)
                if reads is not None:
                    reads.written([*report.added, *(s.new for s in report.superseded)])
                report.ignored.extend((c, f"over max_candidates={cfg.write.max_candidates} for one turn")
                                      for c in overflow)
                reports.append(report)
        store.insert_events(held[0])
        store.insert_links(held[1])
        # In the transaction that wrote them: a turn has an outcome exactly when its memories are stored.
        store.mark_turns(TurnOutcome.of(report, turn.at) for report, turn in zip(reports, turns, strict=True))
    return reports


class SubjectReads:
    """The active memories by subject that one block of `remember_many` reconciles against, read once.

    `store.active_for` scans the user's rows once per turn; here the ids of every active memory
    about a subject the block's candidates name are read in one statement per user, and each
    turn adds the memories it wrote (`written`). `active_for` then answers as the store would at
    that point: the records come from `store.get_many` (current, so a memory superseded or
    forgotten by an earlier turn of the block is left out), in the store's order.
    """

    def __init__(self, store: Store, named: Sequence[tuple[str, str | None]]):
        self.store = store
        self.ids: dict[tuple[str, str], list[str]] = {}
        wanted: dict[str, set[str]] = {}
        for user, subject in named:
            if subject:
                wanted.setdefault(user, set()).add(subject)
        for user, subjects in wanted.items():
            for m in store.active_for(user, sorted(subjects)):
                self.ids.setdefault((user, m.subject or ""), []).append(m.id)
            for subject in subjects:
                self.ids.setdefault((user, subject), [])

    def active_for(self, user: str, subjects: Iterable[str]) -> list[MemoryRecord]:
        """Return the user's active memories about any of `subjects`, as `store.active_for` would now."""
        subjects = {s for s in subjects if s}
        if not all((user, s) in self.ids for s in subjects):
            return self.store.active_for(user, subjects)  # a subject the block's read did not cover
        ids = [i for s in sorted(subjects) for i in self.ids[(user, s)]]
        found = self.store.get_many(ids) if ids else {}
        return sorted((m for m in found.values() if m.active and m.user == user and m.subject in subjects),
                      key=order_key)

    def written(self, records: Iterable[MemoryRecord]) -> None:
        """Count memories written since the read (each turn's new ones) in their subject's ids."""
        for m in records:
            key = (m.user, m.subject or "")
            if key in self.ids and m.id not in self.ids[key]:
                self.ids[key].append(m.id)


def _contexts(store: Store, turns: Sequence[Turn], n: int) -> list[list[Turn]]:
    """Return each turn's context as `remember` would see it had the turns before it been stored one by one.

    That is the session's last `n` turns by (time, order stored), the turn itself left out:
    the stored ones (read once per session, before the batch is recorded) and the batch's earlier turns.
    """
    # Per session, its last `n` turns so far as (time, batch position or -1 if stored, stored order, turn).
    last: dict[tuple[str, str | None], list[tuple[datetime, int, int, Turn]]] = {}
    out: list[list[Turn]] = []
    for k, turn in enumerate(turns):
        key = (turn.user, turn.session)
        if key not in last:
            last[key] = [(t.at, -1, i, t) for i, t in enumerate(store.recent_turns(turn.user, turn.session, n))]
        # The store's order: by time, then insertion (stored turns before the batch's). A turn outside the
        # last n now can never come back into them, so only those are kept.
        last[key] = sorted([*last[key], (turn.at, k, 0, turn)], key=lambda e: e[:3])[-n:]
        out.append([e[3] for e in last[key] if e[1] != k])
    return out


def _blocks(turns: Sequence[Turn], contexts: list[list[Turn]], cfg: Config, offline: bool
            ) -> list[tuple[list[tuple[int, Turn]], list[str]]]:
    """Return the turns, with their positions, in blocks whose texts to parse fit one read-ahead, each with
    those texts (none when a model, not the parser, extracts)."""
    blocks: list[tuple[list[tuple[int, Turn]], list[str]]] = [([], [])]
    for k, turn in enumerate(turns):
        texts = parsed_texts(turn.text, contexts[k], cfg.write, turn.user) if offline else []
        if blocks[-1][0] and (len(blocks[-1][1]) + len(texts) > AHEAD or len(blocks[-1][0]) >= AHEAD):
            blocks.append(([], []))
        blocks[-1][0].append((k, turn))
        blocks[-1][1].extend(texts)
    return [b for b in blocks if b[0]]


def cap(candidates: list[Candidate], limit: int) -> tuple[list[Candidate], list[Candidate]]:
    """Return (kept, dropped): the `limit` most important candidates in their original order, and the rest."""
    if len(candidates) <= limit:
        return candidates, []
    keep = set(sorted(range(len(candidates)), key=lambda i: -candidates[i].importance)[:limit])
    return ([c for i, c in enumerate(candidates) if i in keep],
            [c for i, c in enumerate(candidates) if i not in keep])


def materialise(candidate: Candidate, turn: Turn, cfg: Config) -> MemoryRecord:
    """Return the memory record a candidate becomes when written at `turn`."""
    # Pinned memories and the exempt categories (identity, preferences, lessons from failures) never expire.
    exempt = candidate.pinned or candidate.category in cfg.decay.exempt_categories
    ttl = None if exempt else ttl_for(candidate.importance, cfg.decay)
    return MemoryRecord(
        id=new_id("m"), user=turn.user, text=candidate.text, kind=candidate.kind, category=candidate.category,
        subject=candidate.subject, attribute=candidate.attribute, value=candidate.value,
        record_id=candidate.record_id, references=tuple(candidate.references),
        importance=float(min(1.0, max(0.0, candidate.importance))), pinned=candidate.pinned,
        single_valued=candidate.single_valued, agent=turn.agent, session=turn.session, turn_id=turn.id,
        source=candidate.source, created_at=turn.at, valid_from=turn.at, last_accessed=None,
        expires_at=(turn.at + ttl) if ttl else None, access_count=0, corroborations=0,
        meta=dict(candidate.meta),
    )


def new_event(memory_id: str, at: datetime, action: str, before: str | None, after: str | None, reason: str,
              evidence: dict[str, Any] | None = None, other: str | None = None) -> Event:
    return Event(new_id("e"), memory_id, at, action, before, after, reason, dict(evidence or {}), other)


def apply(store: Store, plan: list[Action], candidates: list[Candidate], vecs: np.ndarray, *, turn: Turn,
          cfg: Config) -> WriteReport:
    """Apply a write plan in one transaction and return what it did (see `apply_plan`); the turn's outcome with it."""
    with store.transaction():
        report = apply_plan(store, plan, candidates, vecs, turn=turn, cfg=cfg)
        store.mark_turns([TurnOutcome.of(report, turn.at)])
        return report


def apply_plan(store: Store, plan: list[Action], candidates: list[Candidate], vecs: np.ndarray, *, turn: Turn,
               cfg: Config, held: tuple[list[Event], list[Link]] | None = None) -> WriteReport:
    """Apply a write plan inside the caller's transaction and return what it did.

    New memories are inserted first so that supersessions and `because` links can
    name them; a candidate that caused a change in the same turn is referred to by
    its index (Action.evidence["because_candidate"]). With `held`, the events and links
    are added to its two lists for the caller to insert (in the same transaction).
    """
    report = WriteReport(turn_id=turn.id)
    at = turn.at
    row_of = {id(c): k for k, c in enumerate(candidates)}
    created: dict[int, MemoryRecord] = {}
    for action in plan:
        if action.op in ("add", "supersede") and action.candidate is not None:
            k = row_of[id(action.candidate)]
            created[k] = materialise(action.candidate, turn, cfg)
    if created:
        order = sorted(created)
        store.insert_memories([created[k] for k in order], vecs[order])
    events: list[Event] = []
    links: list[Link] = []
    born: set[str] = set()
    linked: set[tuple[str, str]] = set()
    for action in plan:
        new = created.get(row_of.get(id(action.candidate), -1)) if action.candidate is not None else None
        if action.op == "add" and new is not None:
            report.added.append(new)
            events.append(new_event(new.id, at, "created", None, "active", action.reason, action.evidence))
            if action.evidence.get("remainder_of"):
                # What a superseded memory said besides the corrected value: its history is that memory's.
                links.append(Link(new.id, action.evidence["remainder_of"], "supersedes", at))
        elif action.op == "supersede" and new is not None and action.target_id:
            old = store.get(action.target_id)
            reason = _with_cause(action.reason, action.candidate.cause)
            store.set_status(old.id, "superseded", reason=reason, at=at, successor=new.id)
            if new.id not in born:
                # A retraction may retire several memories; its successor is created once.
                born.add(new.id)
                events.append(new_event(new.id, at, "created", None, "active", reason, action.evidence))
            events.append(new_event(old.id, at, "superseded", old.status, "superseded", reason,
                                    action.evidence, new.id))
            links.append(Link(new.id, old.id, "supersedes", at))
            report.superseded.append(Supersession(old, new, reason, action.evidence))
        elif action.op == "corroborate" and action.target_id:
            store.corroborate(action.target_id, at)
            events.append(new_event(action.target_id, at, "corroborated", "active", "active", action.reason,
                                    action.evidence, turn.id))
            report.corroborated.append((store.get(action.target_id), action.evidence))
        elif action.op == "duplicate" and action.target_id:
            events.append(new_event(action.target_id, at, "duplicate", "active", "active", action.reason,
                                    action.evidence, turn.id))
            report.duplicates.append((store.get(action.target_id), action.evidence))
        elif action.op == "forget" and action.target_id:
            old = store.get(action.target_id)
            store.set_status(old.id, "forgotten", reason=action.reason, at=at)
            events.append(new_event(old.id, at, "forgotten", old.status, "forgotten", action.reason,
                                    action.evidence, turn.id))
            report.forgotten.append((replace(old, status="forgotten"), action.reason))
        else:
            report.ignored.append((action.candidate, action.reason))
        if new is not None and (new.id, action.op) not in linked:
            linked.add((new.id, action.op))
            links.extend(_because_links(action, new, created, at))
            links.extend(_depends_links(store, new, created, at))
    links.extend(said_in_order([created[k] for k in sorted(created)], at))
    if held is not None:
        held[0].extend(events)
        held[1].extend(links)
    else:
        store.insert_events(events)
        store.insert_links(links)
    return report


def said_in_order(memories: Sequence[MemoryRecord], at: datetime) -> list[Link]:
    """Return `follows` links joining the memories one turn wrote in the order said (each to the one before).

    A clause leans on its turn ("It stands for love, faith and strength." after "This necklace is
    super special to me."): recall lends a memory its neighbours' relevance (`ranking.in_context`),
    as it does a session's raw turns (`Memory.insert_many`).
    """
    return [Link(later.id, earlier.id, "follows", at) for earlier, later in itertools.pairwise(memories)]


def _with_cause(reason: str, cause: str | None) -> str:
    """Return the supersession reason with the cause the user stated, so history can say why."""
    if not cause or cause.lower() in reason.lower():
        return reason
    return f"{reason}, because {cause}"


def _because_links(action: Action, new: MemoryRecord, created: dict[int, MemoryRecord], at: datetime) -> list[Link]:
    cause = action.because_id
    if cause is None and "because_candidate" in action.evidence:
        cause_rec = created.get(int(action.evidence["because_candidate"]))
        cause = cause_rec.id if cause_rec else None
    return [Link(new.id, cause, "because", at)] if cause else []


def _depends_links(store: Store, new: MemoryRecord, created: dict[int, MemoryRecord], at: datetime) -> list[Link]:
    """Link a memory that holds only while a root fact does ("if the team lead changes, ...") to that fact.

    The root is the user's current memory of that attribute about the team or the user, newest
    first (one written in the same turn counts); with none yet, nothing is linked.
    """
    attribute = new.meta.get("depends_on")
    if not attribute:
        return []
    roots = [m for m in [*store.active_for(new.user, ["team", "user"]), *created.values()]
             if m.attribute == attribute and m.id != new.id and m.active]
    if not roots:
        return []
    root = max(roots, key=lambda m: (m.created_at is not None, m.created_at or at))
    return [Link(new.id, root.id, "depends_on", at)]
