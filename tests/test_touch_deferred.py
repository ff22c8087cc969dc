"""Reinforcement written off recall's path (store.touches) lands in the table, once, even after a kill."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from mnemo.memory import Memory
from mnemo.model import MemoryRecord
from mnemo.store import DuckDBStore
from mnemo.store import touches as touches_mod
from mnemo.store.sql import SQLStore

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
DIM = 8


def make(path, n=10) -> list[str]:
    s = DuckDBStore(path, embedder="test", dim=DIM)
    recs = [MemoryRecord(id=f"m-{i:03d}", user="u", text=f"memory {i}", created_at=T0) for i in range(n)]
    with s.transaction():
        s.insert_memories(recs, np.random.default_rng(0).normal(size=(n, DIM)).astype(np.float32))
    s.close()
    return [r.id for r in recs]


def table(store, ids) -> dict:
    """The rows as the table holds them (no waiting touch added)."""
    rows = store.con.execute("SELECT id, access_count, last_accessed FROM memories WHERE id IN "
                             f"({', '.join('?' * len(ids))}) ORDER BY id", ids).fetchall()
    return {r[0]: (r[1], r[2] and r[2].replace(tzinfo=timezone.utc)) for r in rows}


def test_touches_are_read_at_once_and_written_once_at_close(tmp_path):
    path = tmp_path / "t.duckdb"
    ids = make(path)
    s = DuckDBStore(path, embedder="test", dim=DIM)
    s.get_many(ids)  # kept in process: a touch updates kept records where they are
    s.touch(ids[:3], T0 + timedelta(days=1))
    s.touch(ids[1:2], T0 + timedelta(days=2))
    want = {ids[0]: (1, T0 + timedelta(days=1)), ids[1]: (2, T0 + timedelta(days=2)), ids[2]: (1, T0 + timedelta(days=1))}
    for read in (s.get_many(ids), SQLStore.get_many(s, ids), {i: s.get(i) for i in ids[:3]}):
        assert {i: (read[i].access_count, read[i].last_accessed) for i in ids[:3]} == want
    assert s.stats()["memories"] == len(ids)
    s.close()
    again = DuckDBStore(path, embedder="test", dim=DIM)
    assert {i: v for i, v in table(again, ids).items() if i in want} == want
    assert not touches_mod.journal_path(str(path)).exists()
    again.close()


def test_flush_writes_the_table_and_a_touch_in_a_transaction_rolls_back_with_it(tmp_path):
    path = tmp_path / "t.duckdb"
    ids = make(path)
    s = DuckDBStore(path, embedder="test", dim=DIM)
    s.touch(ids[:2], T0)
    assert table(s, ids[:2]) == {ids[0]: (0, None), ids[1]: (0, None)}  # waiting, not yet in the table
    assert s.flush_touches() == 2
    assert table(s, ids[:2]) == {ids[0]: (1, T0), ids[1]: (1, T0)}
    with pytest.raises(RuntimeError), s.transaction():
        s.touch(ids[:1], T0 + timedelta(days=1))
        assert s.get(ids[0]).access_count == 2
        raise RuntimeError("roll back")
    assert s.get(ids[0]).access_count == 1 and table(s, ids[:1]) == {ids[0]: (1, T0)}
    s.close()


def test_many_waiting_touches_are_written_without_waiting_for_close(tmp_path, monkeypatch):
    monkeypatch.setattr(touches_mod, "PENDING_MAX", 4)
    path = tmp_path / "t.duckdb"
    ids = make(path)
    s = DuckDBStore(path, embedder="test", dim=DIM)
    s.touch(ids[:3], T0)
    assert table(s, ids[:1])[ids[0]][0] == 0
    s.touch(ids[3:5], T0)
    assert table(s, ids[:5]) == {i: (1, T0) for i in ids[:5]}
    s.close()


def test_reinforcement_survives_a_killed_process_and_counts_once(tmp_path):
    path = tmp_path / "m.duckdb"
    with Memory.open(path, embedder="hash:32") as mem:
        mem.insert_many(["The zebra lives in the garden shed", "Cats sleep on the sofa"], user="u")
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from mnemo.memory import Memory\n"
            f"mem = Memory.open({str(path)!r})\n"
            "r = mem.recall('Where does the zebra live?', user='u')\n"
            "print(' '.join(m.id for m in r.memories if m.text.startswith('The zebra')))\n"
            "os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out, "the recall packed the zebra memory"
    assert touches_mod.journal_path(str(path)).exists()
    for _ in range(2):  # opening applies the journal once; a second open finds nothing more to apply
        with Memory.open(path) as mem:
            assert mem.get(out[0]).access_count == 1
            assert table(mem.store, out) == {out[0]: (1, mem.get(out[0]).last_accessed)}


def test_journal_lines_already_applied_or_torn_are_not_applied(tmp_path):
    path = tmp_path / "t.duckdb"
    ids = make(path)
    s = DuckDBStore(path, embedder="test", dim=DIM)
    s.touch(ids[:1], T0)
    s.flush_touches()  # the table records sequence 1
    s.close()
    # As if the process died after the commit and before emptying the journal, mid-way through a next line.
    touches_mod.journal_path(str(path)).write_text(
        f'{{"seq": 1, "at": "2024-01-01T00:00:00", "ids": ["{ids[0]}"]}}\n'
        f'{{"seq": 2, "at": "2024-01-02T00:00:00", "ids": ["{ids[1]}"]}}\n{{"seq": 3, "at": "2024-01')
    s = DuckDBStore(path, embedder="test", dim=DIM)
    assert table(s, ids[:3]) == {ids[0]: (1, T0), ids[1]: (1, T0 + timedelta(days=1)), ids[2]: (0, None)}
    s.close()


def test_two_stores_on_one_file_share_waiting_touches(tmp_path):
    path = tmp_path / "t.duckdb"
    ids = make(path)
    a = DuckDBStore(path, embedder="test", dim=DIM)
    a.touch(ids[:1], T0)
    b = DuckDBStore(path, embedder="test", dim=DIM)
    assert b.get(ids[0]).access_count == 1
    b.close()
    a.close()
    c = DuckDBStore(path, embedder="test", dim=DIM)
    assert c.get(ids[0]).access_count == 1
    c.close()


def test_the_journal_stays_bounded_when_the_same_memories_are_touched_again_and_again(tmp_path, monkeypatch):
    monkeypatch.setattr(touches_mod, "PENDING_MAX", 5)
    path = tmp_path / "t.duckdb"
    ids = make(path)
    s = DuckDBStore(path, embedder="test", dim=DIM)
    for day in range(12):
        s.touch(ids[:1], T0 + timedelta(days=day))
        assert len(touches_mod.journal_path(str(path)).read_text().splitlines()) < 5
    assert table(s, ids[:1])[ids[0]][0] == 10 and s.get(ids[0]).access_count == 12
    s.close()
