"""Baselines for the scenario harness: what an agent does without mnemo, under the same token budget.

Every system the harness plays (these four and mnemo's recipes, see `harness.MnemoSystem`) has the
`System` shape: it ingests turns, may honour forget calls and decay passes, and answers a question
with a packed `Context` of at most `budget` tokens counted by the same tokenizer
(`mnemo.tokens.count_many`). The baselines keep the raw turns, one item per turn: they never run
mnemo's extraction or reconciliation.

* `NoMemory`: the context is always empty (the agent remembers nothing between sessions).
* `FullHistory`: the whole transcript in chronological order, truncated to the budget by cutting
  the tail (the turns are kept from the first one on; what a prompt that prepends the transcript
  keeps when it overflows). With a budget large enough for everything it is the full history.
* `RecentOnly`: the most recent turns that fit the budget, shown in chronological order (a
  sliding window; no long-term memory).
* `NaiveRAG`: the top-k turns by cosine similarity to the question (the same embedder as mnemo),
  packed in rank order, skipping a turn that does not fit.

What a baseline cannot do, and how it scores (the harness applies this):
* It has no forget call and no decay: `forget` and `decay` do nothing, every turn stays "active",
  so forgetting precision is 1 (vacuously: it tombstoned nothing wrongly), forgetting recall is 0
  whenever something should have been forgotten, and collateral is 0.
* It has no confidence: it abstains exactly when its context is empty (so `NoMemory` always
  abstains and the others never do once anything was said).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import numpy as np

from mnemo.errors import ConfigError
from mnemo.tokens import count_many, tokenizer_name


class Record(NamedTuple):
    """What the harness knows of one stored record when it scores forgetting."""

    text: str
    active: bool
    retracted: bool = False  # the record withdraws a value ("I no longer smoke"): a negated memory


@dataclass(frozen=True)
class Item:
    """One entry of a packed context: a memory or a raw turn, in the order it is shown."""

    id: str
    text: str
    tokens: int
    retracted: bool = False  # the item withdraws a value ("no longer likes blue"); it does not assert it


@dataclass
class Context:
    """What a system packs for one question: items best first (or in time order), and its verdict."""

    items: list[Item]
    tokens: int  # tokens of every item shown, history included
    abstained: bool  # the system says the record is silent
    history: list[Item] = field(default_factory=list)  # superseded context marked "not current"
    confidence: str | None = None  # mnemo's certain / vague / unknown; None for a baseline


class System(Protocol):
    """The shape the harness drives: ingest, forget, decay, then answer with a packed context."""

    name: str

    def ingest(self, text: str, *, user: str, session: str, at: datetime) -> None: ...

    def forget(self, query: str, *, user: str, at: datetime) -> None: ...

    def decay(self, at: datetime) -> None: ...

    def context(self, question: str, *, user: str, budget: int, at: datetime) -> Context: ...

    def records(self, user: str) -> dict[str, Record]: ...

    def provenance(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RawTurn:
    """A turn as a baseline keeps it."""

    id: str
    user: str
    session: str
    at: datetime
    text: str


def fit(turns: list[RawTurn], budget: int, *, stop_at_first_miss: bool) -> list[Item]:
    """Return the turns, in the given order, packed greedily under `budget` tokens.

    With `stop_at_first_miss` the packing is a truncation (nothing after the first turn that does
    not fit); without it a turn that does not fit is skipped and packing goes on.
    """
    counts = count_many([t.text for t in turns]) if turns else []
    left, out = budget, []
    for turn, n in zip(turns, counts, strict=True):
        if n > left:
            if stop_at_first_miss:
                break
            continue
        left -= n
        out.append(Item(turn.id, turn.text, n))
    return out


class RawTurns:
    """Common ground of the baselines: keep every raw turn; forget and decay do nothing."""

    name = "raw"
    # Records are the turns as said: whatever was said survives, so a survivor phrase never goes missing.
    verbatim = True

    def __init__(self) -> None:
        self.turns: list[RawTurn] = []

    def ingest(self, text: str, *, user: str, session: str, at: datetime) -> None:
        """Keep the turn verbatim."""
        self.turns.append(RawTurn(f"t{len(self.turns) + 1}", user, session, at, text))

    def forget(self, query: str, *, user: str, at: datetime) -> None:
        """Do nothing: a transcript has no forget call (see the module docstring for how this scores)."""

    def decay(self, at: datetime) -> None:
        """Do nothing: a transcript does not decay."""

    def of(self, user: str) -> list[RawTurn]:
        """Return the turns of `user`, oldest first."""
        return [t for t in self.turns if t.user == user]

    def records(self, user: str) -> dict[str, Record]:
        """Return {turn id: Record(text, active)}: every turn stays active."""
        return {t.id: Record(t.text, True) for t in self.of(user)}

    def select(self, question: str, turns: list[RawTurn], budget: int) -> list[Item]:
        raise NotImplementedError

    def context(self, question: str, *, user: str, budget: int, at: datetime) -> Context:
        """Return the baseline's packed context; it abstains only when the context is empty."""
        items = self.select(question, [t for t in self.of(user) if t.at <= at], budget)
        return Context(items, sum(i.tokens for i in items), abstained=not items)

    def provenance(self) -> dict[str, Any]:
        """Return what produced this baseline's contexts."""
        return {"system": self.name, "tokenizer": tokenizer_name(), "llm": None}

    def close(self) -> None:
        """Nothing to release."""


class NoMemory(RawTurns):
    """Remembers nothing: every context is empty."""

    name = "no_memory"

    def select(self, question: str, turns: list[RawTurn], budget: int) -> list[Item]:
        return []


class FullHistory(RawTurns):
    """The whole transcript, chronological, with the tail cut at the budget."""

    name = "full_history"

    def select(self, question: str, turns: list[RawTurn], budget: int) -> list[Item]:
        return fit(turns, budget, stop_at_first_miss=True)


class RecentOnly(RawTurns):
    """The most recent turns that fit the budget, in chronological order."""

    name = "recent_only"

    def select(self, question: str, turns: list[RawTurn], budget: int) -> list[Item]:
        return list(reversed(fit(list(reversed(turns)), budget, stop_at_first_miss=True)))


class NaiveRAG(RawTurns):
    """Top-k raw turns by cosine similarity to the question, packed in rank order."""

    name = "naive_rag"

    def __init__(self, embedder: Any, k: int = 5) -> None:
        super().__init__()
        self.embedder = embedder
        self.k = k
        self._vectors: dict[str, np.ndarray] = {}

    def _embed(self, turns: list[RawTurn]) -> None:
        # Turns are embedded lazily in one batch at the first question after they arrive.
        todo = [t for t in turns if t.id not in self._vectors]
        if todo:
            for turn, vec in zip(todo, self.embedder.embed([t.text for t in todo]), strict=True):
                self._vectors[turn.id] = np.asarray(vec, dtype=np.float32)

    def select(self, question: str, turns: list[RawTurn], budget: int) -> list[Item]:
        if not turns:
            return []
        self._embed(turns)
        q = np.asarray(self.embedder.embed([question])[0], dtype=np.float32)
        sims = np.stack([self._vectors[t.id] for t in turns]) @ q
        # A stable sort on the negated similarity: equal scores keep transcript order.
        order = np.argsort(-sims, kind="stable")[: self.k]
        return fit([turns[i] for i in order], budget, stop_at_first_miss=False)

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "embedder": getattr(self.embedder, "name", repr(self.embedder)), "k": self.k}


BASELINES = ("no_memory", "full_history", "recent_only", "naive_rag")


def make_baseline(name: str, embedder: Any = None, k: int = 5) -> RawTurns:
    """Return a fresh baseline by name (one of BASELINES); naive_rag needs the embedder."""
    if name == "naive_rag":
        if embedder is None:
            raise ConfigError("naive_rag needs an embedder (use the same one as mnemo)")
        return NaiveRAG(embedder, k)
    classes = {"no_memory": NoMemory, "full_history": FullHistory, "recent_only": RecentOnly}
    if name not in classes:
        raise ConfigError(f"unknown baseline {name!r}; choose one of {', '.join(BASELINES)}")
    return classes[name]()
