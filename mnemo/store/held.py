"""Memories written inside `hold_memories()` wait in process and go to the table in one INSERT (DuckDB).

`remember_many` writes each turn's new memories before it reconciles the next turn. On DuckDB
one Arrow INSERT a turn cost ~4.6 ms at 100k memories, nearly all of it the statement's fixed
cost, not its rows (`benchmarks/bench_write.py --profile-many`). Inside `hold_memories()`,
which the caller opens inside its transaction, `insert_memories` does everything but the
INSERT at once (the vector and BM25 indexes, the pinned ids and the record cache follow the new
rows as before) and the rows wait here. They are inserted, all in one statement:

- when the hold ends (before the caller commits);
- before any statement that may read or write a waiting row: every statement of the store
  except reads by id of rows that are not waiting, and status changes or corroborations of a
  row that is not waiting (`_beside_held`).

Meanwhile reads by id (`get`, `get_many`) answer waiting rows from here, each as a read from
the table would return it (`record_of(record_values(r))`), and a status change of a waiting
row is made to the row itself, so it is inserted with the status it ends with. The outcome is
the same rows, in the same order, as with one INSERT per `insert_memories` call.

Only the thread that holds the rows sees them or flushes them: another thread reading through
its own cursor would not see rows of an uncommitted transaction either. A hold that ends with
an error drops its rows (the caller's transaction rolls back and the indexes are rebuilt).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import NotFound
from ..model import MemoryRecord
from .rows import aware, naive, record_of, record_values


class HeldMemories:
    """Mixin of `DuckDBStore`: hold inserted memories in process until a statement needs them in the table."""

    def _held_init(self) -> None:
        # id -> (record as the table would return it, token count, vector), in insertion order.
        self._held: dict[str, tuple[MemoryRecord, int, np.ndarray]] = {}
        self._holding = 0
        self._held_owner: int | None = None
        self._beside = False  # the statement about to run touches no waiting row (set by the holder only)

    def _insert_rows(self, records: Sequence[MemoryRecord], counts: list[int], vectors: np.ndarray) -> None:
        raise NotImplementedError

    @contextmanager
    def hold_memories(self) -> Iterator[None]:
        """Hold memories inserted in the block and insert them in one statement at its end (see the module)."""
        with self._lock:
            self._holding += 1
            self._held_owner = threading.get_ident()
            done = False
            try:
                yield
                done = True
            finally:
                self._holding -= 1
                if not self._holding:
                    try:
                        if done:
                            self._flush_held()
                    finally:
                        self._held.clear()
                        self._held_owner = None

    def _holds(self) -> bool:
        """True when this thread holds memories open (`insert_memories` then holds its rows)."""
        return bool(self._holding) and self._held_owner == threading.get_ident()

    def _hold(self, records: Sequence[MemoryRecord], counts: list[int], vectors: np.ndarray) -> None:
        for r, n, vec in zip(records, counts, vectors, strict=True):
            self._held[r.id] = (record_of(record_values(r)), n, vec)

    def _flush_held(self) -> None:
        """Insert the waiting rows in one statement (nothing unless this thread holds some)."""
        if not self._held or self._held_owner != threading.get_ident() or self._beside:
            return
        rows, self._held = list(self._held.values()), {}
        records = [r for r, _, _ in rows]
        self._insert_rows(records, [n for _, n, _ in rows], np.stack([v for _, _, v in rows]))
        # They are what the table now returns: the transaction's own cache serves their next reads (store.cache).
        self._keep_in_tx(records)

    def _waiting(self, ids: Sequence[str]) -> list[str]:
        """Return which of `ids` wait in this thread's hold."""
        if not self._held or self._held_owner != threading.get_ident():
            return []
        return [i for i in ids if i in self._held]

    @contextmanager
    def _beside_held(self) -> Iterator[None]:
        """Run the statements of the block without flushing: the caller knows they touch no waiting row."""
        mine = self._held_owner == threading.get_ident()
        before = self._beside
        if mine:
            self._beside = True
        try:
            yield
        finally:
            if mine:
                self._beside = before

    # ----------------------------------------------------------------- what reads and writes see
    def get(self, memory_id: str) -> MemoryRecord:
        """Return one memory, or raise NotFound (through `get_many`, so a kept or waiting row costs no query)."""
        found = self.get_many([memory_id])
        if memory_id not in found:
            raise NotFound(f"no memory with id {memory_id!r}")
        return found[memory_id]

    def _held_or(self, ids: list[str], fetch: Callable[[list[str]], dict[str, MemoryRecord]]
                 ) -> dict[str, MemoryRecord]:
        """Return {id: memory} of `ids`: waiting rows from the hold, the others by `fetch` (which then never flushes)."""
        waiting = set(self._waiting(ids))
        out = {i: self._held[i][0] for i in ids if i in waiting}
        rest = [i for i in ids if i not in waiting]
        if rest:
            with self._beside_held():
                out.update(fetch(rest))
        return out

    def set_status(self, memory_id: str, status: str, *, reason: str, at: datetime,
                   successor: str | None = None) -> str:
        if not self._waiting([memory_id]):
            with self._beside_held():
                return super().set_status(memory_id, status, reason=reason, at=at, successor=successor)
        self._writable()
        record, n, vec = self._held[memory_id]
        self._held[memory_id] = (replace(record, status=status, status_reason=reason, status_at=aware(naive(at)),
                                         successor_id=successor), n, vec)
        self._status_changed([memory_id], status == "active")
        return record.status

    def corroborate(self, memory_id: str, at: datetime) -> None:
        if self._waiting([memory_id]):
            self._flush_held()  # rare: the row goes to the table first, then the UPDATE runs as always
            super().corroborate(memory_id, at)
            return
        with self._beside_held():
            super().corroborate(memory_id, at)

    # The store's own (DuckDBStore, SQLStore): its lock, and what follows a status change in process.
    _lock: Any
    _keep_in_tx: Callable[[list[MemoryRecord]], None]
    _status_changed: Callable[[list[str], bool], None]
    _writable: Callable[[], None]
