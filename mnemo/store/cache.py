"""Memory records kept in process between reads, so a recall's candidates cost no query once seen.

A recall reads its ~100 candidates by id (`get_many`); on DuckDB that is one statement of
id probes plus building the records, most of a recall's fixed cost at 10k memories
(benchmarks/README.md, `bench_store.py --profile`). Records are frozen values, so the ones
read are kept and served again until something changes them. Coherence rules, all here:

- every write of a memory row through the store (status, corroboration, access, expiry,
  importance, a new row with a known id) drops those ids before and after it runs;
- a set-based change (decay pass, purge, restore, rollback, reload) drops everything;
- nothing is kept while a transaction is open (its reads may be uncommitted), and ids written
  in a transaction are dropped again when it ends, committed or not;
- a read keeps what it found only if no write happened while it ran (a generation counter),
  so a reader on another cursor cannot keep a row a writer just changed.

Records come back in the order `get_many` has always returned them (created_at, then id).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from ..model import MemoryRecord

KEPT = 50_000  # records kept at most; past this the cache starts again empty


def order_key(record: MemoryRecord) -> tuple:
    """Return SQL's `ORDER BY created_at, id` for a record (NULL times last)."""
    at = record.created_at
    return (at is None, at.timestamp() if at is not None else 0.0, record.id)


class RecordCache:
    """Mixin for a store whose `_fetch_many(ids)` reads records by id; keeps them while they cannot have changed."""

    def _cache_init(self) -> None:
        self._kept: dict[str, MemoryRecord] = {}
        self._generation = 0
        self._open_tx = 0
        self._written: set[str] = set()

    def get_many(self, ids: list[str]) -> dict[str, MemoryRecord]:
        """Return {id: memory} of the `ids` that exist, oldest first."""
        if not ids:
            return {}
        kept = self._kept
        found = {i: kept[i] for i in ids if i in kept}
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            generation = self._generation
            fresh = self._fetch_many(missing)
            if generation == self._generation and not self._open_tx:
                if len(kept) + len(fresh) > KEPT:
                    kept.clear()
                kept.update(fresh)
            found.update(fresh)
        return {r.id: r for r in sorted(found.values(), key=order_key)}

    def _drop(self, ids: Iterable[str]) -> None:
        self._generation += 1
        ids = list(ids)
        for i in ids:
            self._kept.pop(i, None)
        if self._open_tx:
            self._written.update(ids)

    def _drop_all(self) -> None:
        self._generation += 1
        self._kept.clear()

    def _tx_began(self) -> None:
        self._open_tx += 1

    def _tx_ended(self) -> None:
        self._open_tx -= 1
        self._generation += 1
        written, self._written = self._written, set()
        for i in written:
            self._kept.pop(i, None)

    @contextmanager
    def _writing(self, ids: list[str]) -> Iterator[None]:
        """Drop `ids` before and after a statement that writes their rows (a read in between cannot keep them)."""
        self._drop(ids)
        try:
            yield
        finally:
            self._drop(ids)

    # Every write of a memory row drops its id before and after the statement.
    def set_status(self, memory_id: str, status: str, *, reason: str, at: datetime,
                   successor: str | None = None) -> str:
        with self._writing([memory_id]):
            return super().set_status(memory_id, status, reason=reason, at=at, successor=successor)

    def corroborate(self, memory_id: str, at: datetime) -> None:
        with self._writing([memory_id]):
            super().corroborate(memory_id, at)

    def touch(self, ids: list[str], at: datetime) -> None:
        with self._writing(ids):
            super().touch(ids, at)

    def set_expiry(self, memory_id: str, expires_at: datetime | None) -> None:
        with self._writing([memory_id]):
            super().set_expiry(memory_id, expires_at)

    def set_importance(self, memory_id: str, importance: float) -> None:
        with self._writing([memory_id]):
            super().set_importance(memory_id, importance)

    def _fetch_many(self, ids: list[str]) -> dict[str, MemoryRecord]:
        raise NotImplementedError

    def _cache_stats(self) -> dict[str, Any]:
        return {"records_kept": len(self._kept)}
