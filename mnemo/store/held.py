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
  row that is not waiting (`HeldMemories.beside`).

Meanwhile reads by id (`get`, `get_many`) answer waiting rows from here, each as a read from
the table would return it (`record_of(record_values(r))`), and a status change of a waiting
row is made to the row itself, so it is inserted with the status it ends with. The outcome is
the same rows, in the same order, as with one INSERT per `insert_memories` call.

Only the thread that holds the rows sees them or flushes them: another thread reading through
its own cursor would not see rows of an uncommitted transaction either. A hold that ends with
an error drops its rows (the caller's transaction rolls back and the indexes are rebuilt).

`HeldMemories` is a `DuckDBStore`'s `held` part: it keeps the waiting rows and says which ids
wait; the store inserts what `take` hands it, in its own statement, on its own connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

import numpy as np

from ..model import MemoryRecord
from .rows import aware, naive, record_of, record_values


class HeldMemories:
    """The memories one thread holds back from the table until a statement needs them there."""

    def __init__(self, lock: threading.RLock):
        self._lock = lock  # the store's: a hold is opened and ended under it
        # id -> (record as the table would return it, token count, vector), in insertion order.
        self._rows: dict[str, tuple[MemoryRecord, int, np.ndarray]] = {}
        self._depth = 0
        self._owner: int | None = None
        self._beside = False  # the statement about to run touches no waiting row (set by the holder only)

    @contextmanager
    def hold(self, flush: Callable[[], None]) -> Iterator[None]:
        """Hold memories inserted in the block; at its end (the outermost one) `flush` inserts them, then none wait."""
        with self._lock:
            self._depth += 1
            self._owner = threading.get_ident()
            done = False
            try:
                yield
                done = True
            finally:
                self._depth -= 1
                if not self._depth:
                    try:
                        if done:
                            flush()
                    finally:
                        self._rows.clear()
                        self._owner = None

    def holds(self) -> bool:
        """True when this thread holds memories open (`insert_memories` then holds its rows here)."""
        return bool(self._depth) and self._owner == threading.get_ident()

    def add(self, records: Sequence[MemoryRecord], counts: list[int], vectors: np.ndarray) -> None:
        """Hold rows, each as a read from the table would return it."""
        for r, n, vec in zip(records, counts, vectors, strict=True):
            self._rows[r.id] = (record_of(record_values(r)), n, vec)

    def take(self) -> tuple[list[MemoryRecord], list[int], np.ndarray] | None:
        """Return the waiting (records, token counts, vectors) and let them go, for the store to insert now.

        None unless this thread holds rows and no statement beside them is running (`beside`).
        """
        if not self._rows or self._owner != threading.get_ident() or self._beside:
            return None
        rows, self._rows = list(self._rows.values()), {}
        return [r for r, _, _ in rows], [n for _, n, _ in rows], np.stack([v for _, _, v in rows])

    def waiting(self, ids: Sequence[str]) -> list[str]:
        """Return which of `ids` wait in this thread's hold."""
        if not self._rows or self._owner != threading.get_ident():
            return []
        return [i for i in ids if i in self._rows]

    def records(self, ids: Sequence[str]) -> tuple[dict[str, MemoryRecord], list[str]]:
        """Return ({id: memory} of the `ids` waiting here, the other ids)."""
        waiting = set(self.waiting(ids))
        return {i: self._rows[i][0] for i in ids if i in waiting}, [i for i in ids if i not in waiting]

    @contextmanager
    def beside(self, ids: Sequence[str] = ()) -> Iterator[None]:
        """Run the block's statements without flushing, as they touch no waiting row; unless one of `ids` waits."""
        mine = self._owner == threading.get_ident() and not self.waiting(ids)
        before = self._beside
        if mine:
            self._beside = True
        try:
            yield
        finally:
            if mine:
                self._beside = before

    def set_status(self, memory_id: str, status: str, *, reason: str, at: datetime, successor: str | None) -> str:
        """Change the status of a waiting row, which is then inserted with it; return the old status."""
        record, n, vec = self._rows[memory_id]
        self._rows[memory_id] = (replace(record, status=status, status_reason=reason, status_at=aware(naive(at)),
                                         successor_id=successor), n, vec)
        return record.status
