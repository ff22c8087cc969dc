"""The records a DuckDB store keeps between reads (store.cache) are never older than the table.

Each test compares `get_many` (served from the kept records where it can) with the same read
straight from SQL, after every kind of write, rolled back or committed, and from a second cursor.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from mnemo.config import DecayConfig
from mnemo.model import MemoryRecord
from mnemo.store import DuckDBStore
from mnemo.store.sql import SQLStore

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
DIM = 8


@pytest.fixture
def store(tmp_path):
    s = DuckDBStore(tmp_path / "c.duckdb", embedder="test", dim=DIM)
    rng = np.random.default_rng(0)
    recs = [MemoryRecord(id=f"m-{i:04d}", user="u", text=f"memory {i}", created_at=T0 + timedelta(minutes=i % 7),
                         importance=0.5, last_accessed=None, access_count=0) for i in range(60)]
    with s.transaction():
        s.insert_memories(recs, rng.normal(size=(60, DIM)).astype(np.float32))
    yield s
    s.close()


def sql(store: DuckDBStore, ids: list[str]) -> dict:
    return SQLStore.get_many(store, ids)


def same(store: DuckDBStore, ids: list[str]) -> None:
    got = store.get_many(ids)
    want = sql(store, ids)
    assert list(got) == list(want)  # the same records in the same order (created_at, then id)
    assert got == want


def test_a_kept_record_follows_every_kind_of_write(store):
    rng = np.random.default_rng(1)
    ids = [f"m-{i:04d}" for i in range(60)]
    at = T0
    for step in range(200):
        some = sorted(rng.choice(ids, int(rng.integers(1, 12)), replace=False).tolist())
        same(store, some)
        at += timedelta(hours=1)
        op = step % 7
        one = some[0]
        if op == 0:
            store.touch(some, at)
        elif op == 1:
            status = "forgotten" if store.get(one).active else "active"
            with store.transaction():
                store.set_status(one, status, reason="test", at=at)
        elif op == 2:
            store.corroborate(one, at)
        elif op == 3:
            store.set_expiry(one, at + timedelta(days=1))
        elif op == 4:
            store.set_importance(one, float(rng.random()))
        elif op == 5:
            with pytest.raises(RuntimeError), store.transaction():
                store.touch(some, at)
                store.set_status(one, "forgotten", reason="rolled back", at=at)
                same(store, some)  # inside the transaction: its own uncommitted writes
                raise RuntimeError("roll back")
        else:
            store.decay_pass(at + timedelta(days=400), DecayConfig())
        same(store, some)
    same(store, ids)


def test_a_reader_cursor_never_keeps_a_row_a_writer_is_changing(store):
    reader = store.reader()
    one = "m-0001"
    store.get_many([one])
    with store.transaction():
        store.set_status(one, "forgotten", reason="test", at=T0)
        # Another thread reads the committed row while the writer's transaction is open.
        seen = {}
        t = threading.Thread(target=lambda: seen.update(reader.get_many([one])))
        t.start()
        t.join()
        assert seen[one].status == "active"
    assert store.get_many([one])[one].status == "forgotten"
    assert reader.get_many([one])[one].status == "forgotten"
    reader.close()


def test_unknown_ids_and_repeats(store):
    assert store.get_many([]) == {}
    assert list(store.get_many(["m-0003", "nope", "m-0003"])) == ["m-0003"]
    assert store.stats()["records_kept"] >= 1


def test_reads_kept_inside_a_transaction_stay_with_it(store):
    reader = store.reader()
    one, two = "m-0001", "m-0002"
    with pytest.raises(RuntimeError), store.transaction():
        store.set_status(one, "forgotten", reason="test", at=T0)
        for _ in range(2):  # the second read is served from what the transaction's thread kept
            same(store, [one, two])
            assert store.get_many([one])[one].status == "forgotten"
        seen = {}
        t = threading.Thread(target=lambda: seen.update(reader.get_many([one])))
        t.start()
        t.join()
        assert seen[one].status == "active"
        raise RuntimeError("roll back")
    assert store.get_many([one])[one].status == "active"
    same(store, [one, two])
    reader.close()


def test_what_a_committed_transaction_read_and_did_not_write_is_kept_for_the_next_one(store, monkeypatch):
    """`remember` is one transaction a turn: its neighbours, read in one, cost no query in the next."""
    fetched: list[list[str]] = []
    real = store._fetch_many
    monkeypatch.setattr(store, "_fetch_many", lambda ids: fetched.append(list(ids)) or real(ids))
    everything = store._fetch_all
    monkeypatch.setattr(store, "_fetch_all", lambda: fetched.append(["*"]) or everything())
    store.cache.drop_all()
    store.cache._warm = False
    read, written = ["m-0010", "m-0011", "m-0012"], "m-0011"
    with store.transaction():
        store.get_many(read)
        store.set_status(written, "forgotten", reason="test", at=T0)
    assert fetched == [read]
    with store.transaction():
        same(store, read)  # the row the first wrote is read again, the other two are kept
    assert fetched == [read, [written]]
    # A rolled-back transaction keeps nothing it read (the rollback reloads the store: it reads all at its next miss).
    with pytest.raises(RuntimeError), store.transaction():
        store.get_many(["m-0020"])
        raise RuntimeError("roll back")
    store.get_many(["m-0020"])
    assert fetched[2:] == [["m-0020"], ["*"]]
