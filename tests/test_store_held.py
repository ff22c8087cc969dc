"""Memories held by `hold_memories()` (store.held): the same rows and reads as inserting each at once.

Run on both backends: DuckDB holds the rows in process, PostgreSQL writes them at once.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from mnemo.errors import NotFound
from mnemo.model import MemoryRecord
from mnemo.store import new_id

DIM = 8
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def vecs(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rec(text: str, **kw) -> MemoryRecord:
    return MemoryRecord(id=kw.pop("id", None) or new_id(), user="alice", text=text, created_at=T0, valid_from=T0, subject="user",
                        meta={"slot_phrase": "home", "n": (1, 2)}, references=("S-1",), **kw)


def _writes(store, hold: bool) -> list[MemoryRecord]:
    """Insert, read, supersede and corroborate memories in one transaction, held or not; return what was read."""
    a, b, c = rec("I live in Lisbon", id="m-a"), rec("I live in Porto", id="m-b"), rec("I like tea", id="m-c", pinned=True)
    seen = []
    with store.transaction():
        with store.hold_memories() if hold else _nothing():
            store.insert_memories([a], vecs(1, 1))
            seen.append(store.get(a.id))
            store.insert_memories([b, c], vecs(2, 2))
            seen += store.get_many([a.id, b.id, c.id]).values()
            store.set_status(a.id, "superseded", reason="moved", at=T0 + timedelta(days=1), successor=b.id)
            seen.append(store.get(a.id))
            store.corroborate(c.id, T0 + timedelta(days=2))
            seen.append(store.get(c.id))
            seen += store.active_for("alice", ["user"])
            seen += [store.get(i) for i, _ in store.search_dense(vecs(1, 2)[0], 5, user="alice")]
    seen += store.memories("alice", include_inactive=True)
    return seen


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _plain(records: list[MemoryRecord]) -> list[tuple]:
    return [(r.text, r.status, r.status_reason, r.status_at, r.successor_id, r.corroborations, r.valid_from,
             r.meta, r.references, r.pinned) for r in records]


def test_held_memories_read_and_land_as_inserted_at_once(backend):
    held = _writes(backend.open("held", embedder="test", dim=DIM), hold=True)
    direct = _writes(backend.open("direct", embedder="test", dim=DIM), hold=False)
    assert _plain(held) == _plain(direct)


def test_a_failed_hold_writes_nothing(backend):
    store = backend.open("s", embedder="test", dim=DIM)
    r = rec("never stored")
    with pytest.raises(RuntimeError), store.transaction(), store.hold_memories():
        store.insert_memories([r], vecs(1))
        raise RuntimeError("boom")
    assert store.memories("alice") == []
    with pytest.raises(NotFound):
        store.get(r.id)
    assert store.search_dense(vecs(1)[0], 5, user="alice") == []


@pytest.mark.duckdb_only
@pytest.mark.duckdb_only  # PostgreSQL holds nothing, and its reader is the store itself, serialised by its lock
def test_held_rows_are_the_holding_threads_alone(tmp_path):
    from conftest import Backend

    store = Backend("duckdb", tmp_path).open("s", embedder="test", dim=DIM)
    r = rec("uncommitted")
    with store.transaction(), store.hold_memories():
        store.insert_memories([r], vecs(1))
        found: dict = {}
        reader = store.reader()
        t = threading.Thread(target=lambda: found.update(reader.get_many([r.id])))
        t.start()
        t.join(timeout=30)
        assert not t.is_alive(), "a reader on another thread waited on the holding transaction"
        reader.close()
        assert found == {}
        assert store.get(r.id).text == "uncommitted"
    assert store.get(r.id).text == "uncommitted"
