"""Forgetting on request: exactly the memories a request names, and the words that said them.

    forget_targets(store, embedder, "my age", user="u", cfg=cfg, judge=judge, at=now)   # what it names, and why
    forget_ids(store, ids, reason="user asked", at=now, named=..., embedder=embedder, cfg=cfg)
    restore(store, memory_id, reason="restored", at=now)

A request is planned as a "forget ..." turn is (`write.plan`, `forget_requests`). The memories said in
the same words as one it names (the other claims of one sentence) go with it, since their words say what
was forgotten, and what they said besides it is kept as a derived memory (`corrections.unsaid`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from .config import Config
from .corrections import SAME_WORDS, forgotten_siblings
from .errors import InvalidInput
from .model import Candidate, Forgetting, Link, MemoryRecord, Turn
from .store import Store, new_id
from .updates import UpdateModel
from .write import materialise, new_event, plan

if TYPE_CHECKING:
    from .embed import Embedder

def forget_targets(store: Store, embedder: Embedder, query: str, *, user: str, cfg: Config,
                   judge: Callable[[Candidate, MemoryRecord], dict], at: datetime,
                   model: UpdateModel | None = None) -> Forgetting:
    """Return exactly the active memories a forget request names, by the same plan as "forget ..." turns.

    The result says why each matched; when nothing did, its message says so and `nearest` lists
    the closest memories, never taken.
    """
    from .extract import extract_offline

    phrase = query if query.lower().lstrip().startswith("forget") else f"Forget {query}"
    commands = [c for c in extract_offline(phrase, now=at, cfg=cfg.write, user=user) if c.command == "forget"]
    if not commands:
        commands = [Candidate(text=query, command="forget", kind="semantic", category="note")]
    vecs = embedder.embed([c.text for c in commands])
    actions = plan(store, user, commands, vecs, cfg, judge, embedder, model=model)
    why = {a.target_id: str(a.evidence.get("match", "")) for a in actions if a.op == "forget" and a.target_id}
    found = store.get_many(list(why))
    kept = []
    for m, rest in forgotten_siblings(store, list(found.values()), set(why)):
        # The other claims of a forgotten memory's sentence say it too: they go with it, what else they said kept.
        why[m.id], found[m.id] = SAME_WORDS, m
        kept += [(rest, m)] if rest is not None else []
    ignored = [a for a in actions if a.op == "ignore"]
    nearest = [n for a in ignored for n in a.evidence.get("nearest", [])]
    message = "" if why else "; ".join(dict.fromkeys(a.reason for a in ignored)) or "nothing matched"
    return Forgetting([found[i] for i in why if i in found], why=why, nearest=nearest, message=message, kept=kept)


def forget_ids(store: Store, ids: list[str], *, reason: str, at: datetime,
               kept: Sequence[tuple[Candidate, MemoryRecord]] = (), embedder: Embedder | None = None,
               cfg: Config | None = None) -> list[MemoryRecord]:
    """Tombstone the given active memories as forgotten, with one event each; return them.

    `kept` (`Forgetting.kept`): the derived memories that keep what a memory forgotten for its words said
    besides the forgotten value, each with the memory it comes from; written, embedded with `embedder`,
    in the same transaction.
    """
    gone: list[MemoryRecord] = []
    olds = store.get_many(ids)
    rests = [(r, m) for r, m in kept if m.id in olds] if embedder is not None and cfg is not None else []
    with store.transaction():
        for mid in ids:
            old = olds.get(mid) or store.get(mid)
            if not old.active:
                continue
            store.set_status(mid, "forgotten", reason=reason, at=at)
            store.insert_events([new_event(mid, at, "forgotten", old.status, "forgotten", reason)])
            gone.append(replace(old, status="forgotten", status_reason=reason, status_at=at))
        if rests:
            made = [materialise(r, Turn(m.turn_id or new_id("t"), m.user, "", at, m.session, m.agent), cfg)
                    for r, m in rests]
            store.insert_memories(made, np.asarray(embedder.embed([x.text for x in made]), np.float32))
            why = "what a forgotten memory's sentence said besides the value forgotten"
            store.insert_events([new_event(x.id, at, "created", None, "active", why, {"remainder_of": m.id})
                                 for x, (_, m) in zip(made, rests, strict=True)])
            store.insert_links([Link(x.id, m.id, "supersedes", at) for x, (_, m) in zip(made, rests, strict=True)])
    return gone


def restore(store: Store, memory_id: str, *, reason: str, at: datetime) -> MemoryRecord:
    """Make a tombstoned memory active again, recording who it came back from."""
    old = store.get(memory_id)
    if old.active:
        raise InvalidInput(f"memory {memory_id} is already active")
    with store.transaction():
        store.set_status(memory_id, "active", reason=reason, at=at)
        store.insert_events([new_event(memory_id, at, "restored", old.status, "active", reason,
                                       {"was": old.status_reason, "successor": old.successor_id})])
    return store.get(memory_id)
