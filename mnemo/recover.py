"""Turns recorded but never processed: found when a store opens (or by `mnemo repair`), processed once.

The turns of a `remember_many` batch are recorded in their own committed transaction before
anything is extracted from them (a single turn, in the transaction that writes its memories, or
alone when reading it raised), so a process killed in `remember_many` (or one whose extraction
raised) leaves turns with no memories. The write path records each turn's outcome in the transaction that writes its
memories (`Store.mark_turns`, table `turn_outcomes`), so "recorded, no outcome" means
exactly "never processed". `repair` processes those turns through the same write path,
user by user in the order they were stored, each with the context it would have had (the
session's turns stored before it), and records what became of each:

- a user's turn is extracted and written ("written" by the write path), then marked
  "recovered" with what it did;
- a turn of another role (an `add`'s "api" turn, an assessment's "tool" turn, a
  consolidation's "system" turn) stands for a structured write whose caller was never
  acknowledged; it cannot be replayed from its text, so it is marked "skipped";
- a turn the write path refuses (InvalidInput, a model answer it cannot use) is marked
  "failed" with the reason, so it is not retried at every open;
- when the model or the database is unavailable, the user's remaining turns are left
  pending for the next open or `mnemo repair` (nothing is marked).

Each user's turns are processed under the store's `exclusive` lock on that user, the lock
every writer holds while it records and processes a turn: on PostgreSQL a replica opening
while another writes never processes a turn that is being processed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import write
from .config import Config
from .errors import LLMUnavailable, MnemoError, StoreError
from .model import Candidate, MemoryRecord, Turn, TurnOutcome, WriteReport
from .store import Store

if TYPE_CHECKING:
    from .embed import Embedder
    from .extract import Extractor

# Why a turn of another role is not replayed from its text.
NOT_REPLAYED = ("a {role} turn records a structured write that did not finish; its caller was never acknowledged, "
                "and its text alone cannot replay it")


@dataclass
class Repair:
    """What `repair` did with each turn it found without an outcome."""

    recovered: list[tuple[Turn, WriteReport]] = field(default_factory=list)
    skipped: list[tuple[Turn, str]] = field(default_factory=list)
    failed: list[tuple[Turn, str]] = field(default_factory=list)
    waiting: list[tuple[Turn, str]] = field(default_factory=list)  # left pending: try again later

    def __bool__(self) -> bool:
        return bool(self.recovered or self.skipped or self.failed or self.waiting)

    def summary(self) -> str:
        """Return one line: how many turns were recovered, skipped, failed and left pending."""
        return (f"{len(self.recovered)} recovered, {len(self.skipped)} skipped, {len(self.failed)} failed, "
                f"{len(self.waiting)} left pending")


def by_user(turns: Iterable[Turn]) -> dict[str, list[Turn]]:
    """Return the turns grouped by user, users and turns in the order given."""
    grouped: dict[str, list[Turn]] = {}
    for turn in turns:
        grouped.setdefault(turn.user, []).append(turn)
    return grouped


def repair(store: Store, embedder: Embedder, extractor: Extractor, cfg: Config, judge: Callable[[Candidate, MemoryRecord], dict],
           *, now: datetime, hold: Callable[[list[str]], AbstractContextManager[Any]], model: Any = None) -> Repair:
    """Process every turn recorded without an outcome, once, and record what became of it (see the module).

    `hold([user])` holds the store's writer lock on a user (`Memory._reconciling`).
    """
    done = Repair()
    for user, turns in by_user(store.pending_turns()).items():
        with hold([user]):
            # Read again under the lock: a writer may have processed some of them meanwhile.
            still = {t.id for t in store.pending_turns(user)}
            todo = [t for t in turns if t.id in still]
            for k, turn in enumerate(todo):
                if turn.role != "user":
                    why = NOT_REPLAYED.format(role=turn.role)
                    store.mark_turns([TurnOutcome(turn.id, now, "skipped", why)])
                    done.skipped.append((turn, why))
                    continue
                try:
                    context = store.turns_before(turn, cfg.write.context_turns)
                    (report,) = write.process(store, embedder, extractor, [turn], [context], cfg, judge, model)
                except (LLMUnavailable, StoreError) as exc:
                    # Another time may succeed; the user's later turns wait too, so they are processed in order.
                    done.waiting.extend((t, f"{type(exc).__name__}: {exc}") for t in todo[k:])
                    break
                except MnemoError as exc:
                    store.mark_turns([TurnOutcome(turn.id, now, "failed", f"{type(exc).__name__}: {exc}")])
                    done.failed.append((turn, str(exc)))
                    continue
                store.mark_turns([TurnOutcome.of(report, now, "recovered")])
                done.recovered.append((turn, report))
    return done
