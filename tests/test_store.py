"""The DuckDB store: schema, durability, locking, bad input, search and index sync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from mnemo.errors import EmbedderMismatch, InvalidInput, NotFound, StoreLocked
from mnemo.model import Event, Link, MemoryRecord, Turn
from mnemo.store import SCHEMA_VERSION, Store, new_id

DIM = 8
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def vecs(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rec(text: str, user: str = "alice", **kw) -> MemoryRecord:
    return MemoryRecord(id=kw.pop("id", new_id()), user=user, text=text, created_at=T0, valid_from=T0, **kw)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "s.duckdb", embedder="test", dim=DIM)
    yield s
    s.close()


def test_new_store_records_schema_and_embedder(store):
    stats = store.stats()
    assert stats["schema_version"] == SCHEMA_VERSION
    assert (stats["embedder"], stats["dim"]) == ("test", DIM)
    assert stats["memories"] == 0


def test_records_round_trip_every_field(store):
    r = rec("INV-5521 amount is 1200 EUR", kind="semantic", category="fact", subject="INV-5521",
            attribute="amount", value="1200 EUR", record_id="INV-5521", references=("S-208",), importance=0.7,
            pinned=True, single_valued=True, agent="a1", session="s1", turn_id="t-1", source="structured",
            expires_at=T0 + timedelta(days=7), meta={"src": "erp", "n": 3})
    with store.transaction():
        store.insert_memories([r], vecs(1))
    assert store.get(r.id) == r


def test_unknown_id_is_not_found(store):
    with pytest.raises(NotFound):
        store.get("m-nope")


def test_store_written_in_one_process_is_read_whole_by_a_fresh_one(tmp_path):
    path = tmp_path / "a.duckdb"
    s = Store(path, embedder="test", dim=DIM)
    records = [rec(f"memory {i}") for i in range(50)]
    with s.transaction():
        s.insert_memories(records, vecs(50))
    s.close()
    code = textwrap.dedent(f"""
        from mnemo.store import Store
        s = Store({str(path)!r}, embedder="test", dim={DIM}, read_only=True)
        print(len(s.memories("alice")), len(s.index))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["50", "50"]


def test_killed_process_leaves_a_batch_all_or_nothing(tmp_path):
    path = tmp_path / "k.duckdb"
    Store(path, embedder="test", dim=DIM).close()
    # The child writes batches in transactions forever and is killed at a random point.
    code = textwrap.dedent(f"""
        import numpy as np, sys
        from mnemo.store import Store, new_id
        from mnemo.model import MemoryRecord
        s = Store({str(path)!r}, embedder="test", dim={DIM})
        b = 0
        while True:
            recs = [MemoryRecord(id=new_id(), user="u", text=f"b{{b}} r{{i}}", meta={{"batch": b}}) for i in range(500)]
            with s.transaction():
                s.insert_memories(recs[:250], np.ones((250, {DIM}), np.float32))
                s.insert_memories(recs[250:], np.ones((250, {DIM}), np.float32))
            b += 1
            print(b, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    s = Store(path, embedder="test", dim=DIM)
    counts = s.con.execute("SELECT json_extract_string(meta, '$.batch') b, count(*) FROM memories GROUP BY b").fetchall()
    assert counts, "at least one batch committed before the kill"
    assert all(n == 500 for _, n in counts), counts
    s.close()


def test_second_writer_process_gets_a_clear_error(tmp_path):
    path = tmp_path / "l.duckdb"
    s = Store(path, embedder="test", dim=DIM)
    code = f"from mnemo.store import Store\nStore({str(path)!r}, embedder='test', dim={DIM})"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode != 0
    assert "StoreLocked" in res.stderr and "one writer per file" in res.stderr
    s.close()


def test_many_reader_processes_are_fine(tmp_path):
    path = tmp_path / "r.duckdb"
    s = Store(path, embedder="test", dim=DIM)
    with s.transaction():
        s.insert_memories([rec("hello")], vecs(1))
    s.close()
    code = f"from mnemo.store import Store\nimport time\ns = Store({str(path)!r}, embedder='test', dim={DIM}, read_only=True)\ntime.sleep(1)\nprint(len(s.memories()))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    assert [p.communicate()[0].strip() for p in procs] == ["1", "1", "1"]


def test_in_process_lock_error_type(tmp_path):
    assert issubclass(StoreLocked, Exception)


def test_other_embedder_is_refused(tmp_path):
    path = tmp_path / "e.duckdb"
    Store(path, embedder="test", dim=DIM).close()
    with pytest.raises(EmbedderMismatch, match="written with embedder 'test'"):
        Store(path, embedder="other", dim=DIM)
    with pytest.raises(EmbedderMismatch):
        Store(path, embedder="test", dim=DIM + 1)
    assert Store.recorded_embedder(path) == "test"


@pytest.mark.parametrize("text", [
    "Robert'); DROP TABLE memories;--",
    "SELECT * FROM memories WHERE 1=1 OR ''=''",
    "ünïcödé ✓ 漢字 \U0001F600 \u200b tabs\tand\nnewlines",
    "x" * 1_000_000,
    "\x01\x02\x7f binary-ish \ufffd",
])
def test_odd_text_is_stored_verbatim(store, text):
    r = rec(text)
    with store.transaction():
        store.insert_memories([r], vecs(1))
    assert store.get(r.id).text == text
    assert store.stats()["memories"] == 1


@pytest.mark.parametrize("text, match", [("nul\x00byte", "NUL"), ("lone \ud800 surrogate", "Unicode")])
def test_unstorable_text_is_refused_and_nothing_is_written(store, text, match):
    with pytest.raises(InvalidInput, match=match):
        with store.transaction():
            store.insert_memories([rec("fine"), rec(text)], vecs(2))
    assert store.stats()["memories"] == 0
    assert len(store.index) == 0


def test_wrong_vector_dimension_is_refused(store):
    with pytest.raises(InvalidInput, match="dimension 8"):
        store.insert_memories([rec("a")], np.ones((1, DIM + 2), np.float32))
    with pytest.raises(InvalidInput):
        store.search_dense(np.ones(DIM + 2), 3, user="alice")


def test_rolled_back_transaction_leaves_index_and_table_in_step(store):
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.insert_memories([rec("will vanish")], vecs(1))
            raise RuntimeError("boom")
    assert store.stats()["memories"] == 0 and len(store.index) == 0


def test_dense_search_is_exact_and_scoped_to_user_and_active(store):
    v = vecs(30, seed=1)
    records = [rec(f"m{i}", user="alice" if i < 20 else "bob") for i in range(30)]
    with store.transaction():
        store.insert_memories(records, v)
    q = v[3] + 0.01 * v[4]
    hits = store.search_dense(q, 5, user="alice")
    brute = sorted(((records[i].id, float(v[i] @ (q / np.linalg.norm(q)))) for i in range(20)), key=lambda x: -x[1])[:5]
    assert [h[0] for h in hits] == [b[0] for b in brute]
    assert np.allclose([h[1] for h in hits], [b[1] for b in brute], atol=1e-5)
    with store.transaction():
        store.set_status(records[3].id, "forgotten", reason="test", at=T0)
    assert records[3].id not in [h[0] for h in store.search_dense(q, 5, user="alice")]
    assert all(h[0] in {r.id for r in records[20:]} for h in store.search_dense(q, 5, user="bob"))
    assert store.search_dense(q, 5, user="nobody") == []


def test_lexical_search_sees_rows_added_after_the_index_was_built(store):
    with store.transaction():
        store.insert_memories([rec("The lead time for IC-MC-44 is 21 days")], vecs(1))
    assert store.search_lexical("lead time IC-MC-44", 5, user="alice")
    r2 = rec("S-208 lead time is 35 days")
    with store.transaction():
        store.insert_memories([r2], vecs(1, seed=2))
    hits = store.search_lexical("S-208", 5, user="alice")
    assert [h[0] for h in hits] == [r2.id]
    assert store.fts_rebuilds == 2


def test_lexical_search_respects_filters(store):
    a = rec("deploy checklist for friday", kind="procedural", session="s1")
    b = rec("deploy went wrong on friday", kind="episodic", session="s2")
    with store.transaction():
        store.insert_memories([a, b], vecs(2))
    assert {h[0] for h in store.search_lexical("deploy friday", 5, user="alice")} == {a.id, b.id}
    assert [h[0] for h in store.search_lexical("deploy", 5, user="alice", filters={"kinds": ["procedural"]})] == [a.id]
    assert [h[0] for h in store.search_dense(vecs(2)[1], 5, user="alice", filters={"session": "s2"})] == [b.id]
    with pytest.raises(InvalidInput, match="unknown filter"):
        store.search_lexical("deploy", 5, user="alice", filters={"colour": "red"})


def test_meta_filter(store):
    a, b = rec("one", meta={"dia_id": "D1:3"}), rec("two", meta={"dia_id": "D2:1"})
    with store.transaction():
        store.insert_memories([a, b], vecs(2))
    assert [m.id for m in store.memories("alice", filters={"meta": {"dia_id": "D2:1"}})] == [b.id]


def test_turns_events_links_and_touch(store):
    t = Turn(id="t-1", user="alice", text="hi", at=T0, session="s1")
    store.insert_turn(t)
    assert store.turn("t-1") == t
    assert store.recent_turns("alice", "s1", 5) == [t]
    a, b = rec("old"), rec("new")
    with store.transaction():
        store.insert_memories([a, b], vecs(2))
        store.set_status(a.id, "superseded", reason="corrected", at=T0, successor=b.id)
        store.insert_events([Event("e-1", a.id, T0, "superseded", "active", "superseded", "corrected", {"s": 1}, b.id)])
        store.insert_links([Link(b.id, a.id, "supersedes", T0)])
    assert store.get(a.id).successor_id == b.id
    assert [e.action for e in store.events(a.id)] == ["superseded"]
    assert store.links([a.id], ("supersedes",)) == [Link(b.id, a.id, "supersedes", T0)]
    store.touch([b.id], T0 + timedelta(days=1))
    got = store.get(b.id)
    assert (got.access_count, got.last_accessed) == (1, T0 + timedelta(days=1))
