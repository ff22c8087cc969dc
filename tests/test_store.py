"""The store contract on both backends: schema, durability, bad input, search and index sync.

Tests taking `backend` run against DuckDB and PostgreSQL + pgvector (see conftest.py).
Tests marked `duckdb_only` are about DuckDB itself (its file lock, its in-process index,
its lazily rebuilt fts index); `postgres_only` ones are their PostgreSQL counterparts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from mnemo.errors import EmbedderMismatch, InvalidInput, NotFound, StoreError, StoreLocked
from mnemo.model import Event, Link, MemoryRecord, Turn
from mnemo.store import SCHEMA_VERSION, new_id, store_class
from mnemo.store import DuckDBStore as Store

DIM = 8
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def vecs(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rec(text: str, user: str = "alice", **kw) -> MemoryRecord:
    return MemoryRecord(id=kw.pop("id", new_id()), user=user, text=text, created_at=T0, valid_from=T0, **kw)


@pytest.fixture
def store(backend):
    return backend.open("s", embedder="test", dim=DIM)


def _opener(loc: str) -> str:
    """Return Python source that opens the store at `loc` in a child process, whichever the backend."""
    return f"from mnemo.store import store_class\nLOC = {loc!r}\nStoreClass = store_class(LOC)\n"


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


def test_rows_written_at_one_instant_read_back_in_the_order_they_were_written(store):
    # A batch under a simulated clock shares one created_at: the id breaks the tie, so it must follow the
    # writing order, or runs of the same code read the same store in different orders.
    records = [rec(f"memory {i}") for i in range(300)]
    with store.transaction():
        store.insert_memories(records, vecs(300))
    assert [m.text for m in store.memories("alice")] == [f"memory {i}" for i in range(300)]


def test_ids_are_unique_and_sort_in_the_order_they_were_made_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        batches = list(pool.map(lambda _: [new_id() for _ in range(20_000)], range(4)))
    made = [i for b in batches for i in b]
    assert len(set(made)) == len(made)
    assert all(b == sorted(b) for b in batches)


def test_a_memory_is_searched_by_what_it_was_said_with_and_shows_only_its_words(backend):
    # meta["context"] (the sentences around it in its turn) is indexed beside the text, never returned as it;
    # a context that is not a string is not read. The same on a fresh open, which indexes from the table.
    said = rec("It stands for love, faith and strength.",
               meta={"context": "This necklace is from my grandma. It stands for love, faith and strength."})
    odd = rec("It is blue and gold.", meta={"context": 7, "note": "necklace"})
    plain = rec("The garden gate is green.")
    s = backend.open("ctx", embedder="test", dim=DIM)
    with s.transaction():
        s.insert_memories([said, odd, plain], vecs(3))
    assert [i for i, _ in s.search_lexical("necklace grandma", 10, user="alice")] == [said.id]
    assert [i for i, _ in s.search_lexical("blue", 10, user="alice")] == [odd.id]
    assert s.get(said.id).text == "It stands for love, faith and strength."
    s.close()
    again = backend.open("ctx", embedder="test", dim=DIM)
    assert [i for i, _ in again.search_lexical("necklace grandma", 10, user="alice")] == [said.id]


def test_unknown_id_is_not_found(store):
    with pytest.raises(NotFound):
        store.get("m-nope")


def test_store_written_in_one_process_is_read_whole_by_a_fresh_one(backend):
    path = backend.location("a")
    s = backend.open("a", embedder="test", dim=DIM)
    records = [rec(f"memory {i}") for i in range(50)]
    with s.transaction():
        s.insert_memories(records, vecs(50))
    s.close()
    # The second number is what dense search can reach: the in-process index on DuckDB, pgvector on PostgreSQL.
    code = _opener(path) + textwrap.dedent(f"""
        import numpy as np
        s = StoreClass(LOC, embedder="test", dim={DIM}, read_only=True)
        reach = len(s.index) if hasattr(s, "index") else len(s.search_dense(np.ones({DIM}), 100, user="alice"))
        print(len(s.memories("alice")), reach)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["50", "50"]


def test_killed_process_leaves_a_batch_all_or_nothing(backend):
    path = backend.location("k")
    backend.open("k", embedder="test", dim=DIM).close()
    # The child writes batches in transactions forever and is killed at a random point.
    code = _opener(path) + textwrap.dedent(f"""
        import numpy as np, sys
        from mnemo.store import new_id
        from mnemo.model import MemoryRecord
        s = StoreClass(LOC, embedder="test", dim={DIM})
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
    s = backend.open("k", embedder="test", dim=DIM)
    counts = sorted(Counter(m.meta["batch"] for m in s.memories("u")).items())
    assert counts, "at least one batch committed before the kill"
    assert all(n == 500 for _, n in counts), counts


@pytest.mark.duckdb_only
def test_second_writer_process_gets_a_clear_error(tmp_path):
    # DuckDB allows one writer process per file; PostgreSQL's counterpart is
    # test_many_writer_processes_at_once_on_postgres below.
    path = tmp_path / "l.duckdb"
    s = Store(path, embedder="test", dim=DIM)
    code = f"from mnemo.store import DuckDBStore as Store\nStore({str(path)!r}, embedder='test', dim={DIM})"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode != 0
    assert "StoreLocked" in res.stderr and "one writer per file" in res.stderr
    s.close()


def test_many_reader_processes_are_fine(backend):
    path = backend.location("r")
    s = backend.open("r", embedder="test", dim=DIM)
    with s.transaction():
        s.insert_memories([rec("hello")], vecs(1))
    s.close()
    code = _opener(path) + f"import time\ns = StoreClass(LOC, embedder='test', dim={DIM}, read_only=True)\ntime.sleep(1)\nprint(len(s.memories()))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    assert [p.communicate()[0].strip() for p in procs] == ["1", "1", "1"]


def test_in_process_lock_error_type(tmp_path):
    assert issubclass(StoreLocked, Exception)


def test_other_embedder_is_refused(backend):
    path = backend.location("e")
    backend.open("e", embedder="test", dim=DIM).close()
    with pytest.raises(EmbedderMismatch, match="written with embedder 'test'"):
        backend.open("e", embedder="other", dim=DIM)
    with pytest.raises(EmbedderMismatch):
        backend.open("e", embedder="test", dim=DIM + 1)
    assert store_class(path).recorded_embedder(path) == "test"


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
def test_unstorable_text_is_refused_and_nothing_is_written(backend, store, text, match):
    with pytest.raises(InvalidInput, match=match):
        with store.transaction():
            store.insert_memories([rec("fine"), rec(text)], vecs(2))
    assert store.stats()["memories"] == 0
    assert store.search_dense(vecs(1)[0], 5, user="alice") == []
    if backend.name == "duckdb":
        assert len(store.index) == 0


def test_wrong_vector_dimension_is_refused(store):
    with pytest.raises(InvalidInput, match="dimension 8"):
        store.insert_memories([rec("a")], np.ones((1, DIM + 2), np.float32))
    with pytest.raises(InvalidInput):
        store.search_dense(np.ones(DIM + 2), 3, user="alice")


def test_rolled_back_transaction_leaves_index_and_table_in_step(backend, store):
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.insert_memories([rec("will vanish")], vecs(1))
            raise RuntimeError("boom")
    assert store.stats()["memories"] == 0 and store.search_dense(vecs(1)[0], 5, user="alice") == []
    if backend.name == "duckdb":
        assert len(store.index) == 0


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


def test_lexical_search_sees_rows_added_after_the_index_was_built(backend, store):
    with store.transaction():
        store.insert_memories([rec("The lead time for IC-MC-44 is 21 days")], vecs(1))
    assert store.search_lexical("lead time IC-MC-44", 5, user="alice")
    r2 = rec("S-208 lead time is 35 days")
    with store.transaction():
        store.insert_memories([r2], vecs(1, seed=2))
    hits = store.search_lexical("S-208", 5, user="alice")
    assert [h[0] for h in hits] == [r2.id]
    if backend.name == "duckdb":
        # The BM25 postings analyse new rows at the next search: the whole table once, then only what is new.
        assert store.lexical.syncs == 2


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


def test_memory_open_picks_the_backend_from_the_path(backend):
    from mnemo.memory import Memory

    path = backend.location("mem")
    with Memory.open(path, embedder="hash", llm="offline") as mem:
        kept = mem.add("The lead time for IC-MC-44 is 21 days", user="ops", subject="IC-MC-44",
                       attribute="lead_time", value="21 days")
        assert type(mem.store).__name__ == ("PgStore" if backend.name == "postgres" else "DuckDBStore")
        assert mem.recall("lead time of IC-MC-44", user="ops").ids == [kept.id]
    # Reopened with no embedder named, the store's own one is used.
    with Memory.open(path, llm="offline") as mem:
        assert store_class(path).recorded_embedder(path) == mem.embedder.name
        assert mem.get(kept.id).text.startswith("The lead time")
    with pytest.raises(InvalidInput, match="does not match"):
        Memory.open(path, backend="duckdb" if backend.name == "postgres" else "postgres")


def test_stats_of_one_user_count_that_user_only_and_say_nothing_of_where_the_store_is(backend):
    from mnemo.memory import Memory

    path = backend.location("stats")
    with Memory.open(path, embedder="hash", llm="offline") as mem:
        mem.remember("I live in Glasgow.", user="ana")
        mem.remember("I moved to Leeds in May.", user="ana")
        mem.remember("My sister lives in Cork.", user="ben")
        whole, ana = mem.stats(), mem.stats("ana")
    assert whole["memories"] == 3 and whole["users"] == 2 and whole["path"]
    assert (ana["user"], ana["memories"], ana["by_status"], ana["turns"]) == \
        ("ana", 2, {"active": 1, "superseded": 1}, 2)
    assert ana["active_by_kind"] == {"semantic": 1}
    assert "path" not in ana and "store" not in ana["provenance"]


@pytest.mark.postgres_only
def test_many_writer_processes_at_once_on_postgres(pg_backend):
    path = pg_backend.location("w")
    pg_backend.open("w", embedder="test", dim=DIM).close()
    # Four processes start writing at the same instant: turns, memory batches with a tombstone and its event.
    start = time.time() + 3
    code = _opener(path) + textwrap.dedent(f"""
        import sys, time
        import numpy as np
        from datetime import datetime, timezone
        from mnemo.config import DecayConfig
        from mnemo.model import Event, MemoryRecord, Turn
        from mnemo.store import new_id
        who = sys.argv[1]
        s = StoreClass(LOC, embedder="test", dim={DIM})
        now = datetime.now(timezone.utc)
        time.sleep(max(0.0, {start} - time.time()))
        for b in range(10):
            recs = [MemoryRecord(id=new_id(), user=who, text=f"{{who}} batch {{b}} row {{i}}", meta={{"batch": b}})
                    for i in range(50)]
            s.insert_turn(Turn(id=new_id("t"), user=who, text=f"turn {{b}}", at=now))
            with s.transaction():
                s.insert_memories(recs, np.random.default_rng(b).normal(size=(50, {DIM})).astype(np.float32))
                s.set_status(recs[0].id, "forgotten", reason="test", at=now)
                s.insert_events([Event(new_id("e"), recs[0].id, now, "forgotten", "active", "forgotten", "test")])
        s.decay_pass(now, DecayConfig())
        print("done")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, f"w{k}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-2000:] for _, err in outs]
    s = pg_backend.open("w", embedder="test", dim=DIM)
    stats = s.stats()
    assert (stats["memories"], stats["users"], stats["turns"], stats["events"]) == (2000, 4, 40, 40)
    assert stats["by_status"] == {"active": 1960, "forgotten": 40}
    for k in range(4):
        assert sorted(Counter(m.meta["batch"] for m in s.memories(f"w{k}")).values()) == [49] * 10
        assert len(s.search_dense(vecs(1)[0], 1000, user=f"w{k}")) == 490


@pytest.mark.postgres_only
def test_a_second_store_sees_another_writers_rows_at_once_on_postgres(pg_backend):
    # No in-process mirror: a write through one store is searchable through another straight away.
    a = pg_backend.open("x", embedder="test", dim=DIM)
    b = pg_backend.open("x", embedder="test", dim=DIM)
    r = rec("deploy checklist for friday")
    with a.transaction():
        a.insert_memories([r], vecs(1))
    assert [h[0] for h in b.search_dense(vecs(1)[0], 3, user="alice")] == [r.id]
    assert [h[0] for h in b.search_lexical("friday deploy", 3, user="alice")] == [r.id]
    a.set_status(r.id, "forgotten", reason="test", at=T0)
    assert b.search_dense(vecs(1)[0], 3, user="alice") == []


@pytest.mark.postgres_only
def test_hnsw_index_serves_filtered_search_on_postgres(pg_backend):
    v = vecs(300, seed=3)
    records = [rec(f"m{i}", user="alice" if i % 10 == 0 else "bob") for i in range(300)]
    s = pg_backend.open("h", embedder="test", dim=DIM)
    with s.transaction():
        s.insert_memories(records, v)
    s.close()
    # Opening a store of at least hnsw_min_rows memories builds the index; filtered search still fills k.
    s = pg_backend.open("h", embedder="test", dim=DIM, hnsw_min_rows=0)
    assert s._hnsw
    hits = s.search_dense(v[0], 10, user="alice")
    alice = [i for i in range(300) if i % 10 == 0]
    brute = sorted(alice, key=lambda i: -float(v[i] @ v[0]))[:10]
    assert len(hits) == 10 and hits[0][0] == records[0].id
    assert len({h[0] for h in hits} & {records[i].id for i in brute}) >= 8


def test_export_round_trips_between_backends(backend, tmp_path):
    from mnemo.memory import Memory

    t1 = T0 + timedelta(days=1)
    turns = [Turn("t-1", "ålice", "I moved to Lisbon 🏖\u2028 from Berlin", T0, session="s\n1", meta={"k": [1, 2.5]}),
             Turn("t-2", "bob", "no session", t1)]
    old = MemoryRecord("m-old", "ålice", "Lives in Berlin", subject="user", attribute="city", value="Berlin",
                       created_at=T0, status="superseded", status_reason="moved", status_at=t1,
                       successor_id="m-new", meta={"src": "chat", "n": {"deep": [None, True]}})
    new = MemoryRecord("m-new", "ålice", "Lives in Lisbon", subject="user", attribute="city", value="Lisbon",
                       references=("m-old",), created_at=t1, turn_id="t-1")
    undated = MemoryRecord("m-undated", "bob", "Likes tea", kind="episodic", category="preference")
    events = [Event("e-1", "m-old", t1, "superseded", "active", "superseded", "moved", {"score": 0.93}, "m-new")]
    links = [Link("m-new", "m-old", "supersedes", t1), Link("m-new", "m-old", "because", None)]
    with Memory.open(":memory:", embedder="hash:16", llm="offline") as duck:
        with duck.store.transaction():
            duck.store.insert_turns(turns)
            duck.store.insert_memories([old, new, undated], np.random.default_rng(0).normal(size=(3, 16)))
            duck.store.insert_events(events)
            duck.store.insert_links(links)
        duck.export(tmp_path / "duck.json")
        duck.export(tmp_path / "duck.md", fmt="markdown")
    # Into this backend's store and out again: the same bytes, so dump and review agree with DuckDB's.
    with Memory.import_(tmp_path / "duck.json", backend.location("port"), embedder="hash:16", llm="offline") as mem:
        assert mem.get("m-old") == old and mem.get("m-undated") == undated
        assert mem.history("m-old") == events and mem.store.links(["m-new"]) == links
        assert mem.store.recent_turns("bob", None, 5) == [turns[1]]
        assert mem.store.existing("memories", ["m-new", "m-nope"]) == {"m-new"}
        assert mem.store.existing_links(links) == {(lk.src, lk.dst, lk.kind, lk.at) for lk in links}
        mem.export(tmp_path / "back.json")
        mem.export(tmp_path / "back.md", fmt="markdown")
        mem.store.set_importance("m-new", 1.7)
        assert mem.get("m-new").importance == 1.0
        with pytest.raises(NotFound):
            mem.store.set_importance("m-nope", 0.5)
    assert (tmp_path / "back.json").read_bytes() == (tmp_path / "duck.json").read_bytes()
    assert (tmp_path / "back.md").read_bytes() == (tmp_path / "duck.md").read_bytes()


def test_lexical_search_ranks_memories_with_more_query_terms_first(store):
    # What both backends promise about lexical ranking (DuckDB's BM25, PostgreSQL's ts_rank_cd): order, not scores.
    one = rec("the supplier changed on monday")
    three = rec("supplier lead time for valves grew")
    none = rec("lunch was pasta")
    with store.transaction():
        store.insert_memories([one, three, none], vecs(3))
    hits = store.search_lexical("valves supplier lead time", 5, user="alice")
    assert [h[0] for h in hits] == [three.id, one.id]
    assert hits[0][1] > hits[1][1] > 0
    assert store.search_lexical("the and of", 5, user="alice") == []  # stop words alone match nothing


@pytest.mark.postgres_only
def test_a_duplicate_memory_id_is_refused_on_postgres(pg_backend):
    # Memory ids are a primary key on PostgreSQL; DuckDB keeps no key (bulk speed) and imports check clashes first.
    store = pg_backend.open("dup", embedder="test", dim=DIM)
    r = rec("once")
    store.insert_memories([r], vecs(1))
    with pytest.raises(InvalidInput, match="already exists"):
        with store.transaction():
            store.insert_memories([rec("fine"), r], vecs(2))
    assert store.stats()["memories"] == 1


def test_history_keeps_insertion_order_within_a_timestamp(store):
    # A simulated clock stamps a whole write with one instant: order then comes from insertion, not from ids.
    a = rec("dog named Rex")
    with store.transaction():
        store.insert_memories([a], vecs(1))
        store.insert_events([Event("e-z", a.id, T0, "created", None, "active")])
    store.insert_events([Event("e-m", a.id, T0, "forgotten", "active", "forgotten")])
    store.insert_events([Event("e-a", a.id, T0, "restored", "forgotten", "active")])
    assert [e.action for e in store.events(a.id)] == ["created", "forgotten", "restored"]
    for tid in ("t-z", "t-a"):
        store.insert_turn(Turn(id=tid, user="alice", text=tid, at=T0, session="s"))
    assert [t.id for t in store.recent_turns("alice", "s", 5)] == ["t-z", "t-a"]


def test_postgres_store_offers_every_public_method_of_the_duckdb_store():
    # The store contract is Store's public surface: a method added there needs its PostgreSQL twin in mnemo/store/postgres.py.
    from mnemo.store import PgStore

    public = {n for n in dir(Store) if not n.startswith("_")}
    assert sorted(public - set(dir(PgStore))) == [], "add these to mnemo/store/postgres.py"


def test_vectors_stream_into_the_index_batch_by_batch_at_open(tmp_path, monkeypatch):
    import mnemo.store.duckdb_load as store_mod

    path = tmp_path / "s.duckdb"
    s = Store(path, embedder="test", dim=DIM)
    records, v = [rec(f"memory {i}", user="alice" if i % 3 else "bob") for i in range(23)], vecs(23)
    with s.transaction():
        s.insert_memories(records, v)
        s.set_status(records[5].id, "forgotten", reason="test", at=T0)
    s.close()
    monkeypatch.setattr(store_mod, "_LOAD_BATCH", 4)  # 23 rows arrive in 6 batches
    s = Store(path, embedder="test", dim=DIM)
    assert len(s.index) == 23
    assert np.allclose(s.vectors([r.id for r in records]), v, atol=1e-6)
    hits = s.search_dense(v[7], 30, user="alice")
    assert hits[0][0] == records[7].id
    assert {h[0] for h in hits} == {r.id for i, r in enumerate(records) if i % 3 and i != 5}
    s.close()


def test_file_stores_cap_duckdbs_memory_and_a_bad_cap_is_refused(tmp_path, monkeypatch):
    from mnemo.store import MEMORY_LIMIT_ENV

    s = Store(tmp_path / "a.duckdb", embedder="test", dim=DIM)
    assert s.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "953.6 MiB"  # 1GB
    s.close()
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "512MB")
    s = Store(tmp_path / "a.duckdb", embedder="test", dim=DIM)
    assert s.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == "488.2 MiB"
    s.close()
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(StoreError, match=MEMORY_LIMIT_ENV):
        Store(tmp_path / "a.duckdb", embedder="test", dim=DIM)


class ContractOnly:
    """An engine that keeps exactly the `Store` contract, none of the optional capabilities (Batching, Archiving)."""

    def __init__(self, inner):
        from mnemo.store import Store as Contract

        self._inner = inner
        self._names = {n for n in dir(Contract) if not n.startswith("_")} | set(Contract.__annotations__)

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_an_engine_with_only_the_contract_remembers_recalls_exports_and_refuses_the_archive(tmp_path):
    """The capabilities are optional: the write path and recall fall back; the archive says what is missing."""
    from mnemo.archive import archive
    from mnemo.clock import SimulatedClock
    from mnemo.embed import make_embedder
    from mnemo.llm import connect
    from mnemo.memory import Memory
    from mnemo.objectstore import LocalStore
    from mnemo.store import Batching
    from mnemo.store import Store as Contract

    emb = make_embedder("hash")
    store = ContractOnly(Store(":memory:", embedder=emb.name, dim=emb.dim))
    assert isinstance(store, Contract) and not isinstance(store, Batching) and not hasattr(store, "archive")
    t0 = datetime(2025, 3, 1, tzinfo=timezone.utc)
    from mnemo.config import recipe

    mem = Memory(store, emb, connect("offline"), SimulatedClock(t0), recipe())
    reports = mem.remember_many(["I live in Glasgow.", "My sister Ana is a nurse.", "I moved to Leeds."], user="u")
    assert [m.text for r in reports for m in r.added]
    assert any("Leeds" in p.text for p in mem.recall("Where do I live?", user="u").memories)
    mem.export(tmp_path / "out.json", user="u")
    assert (tmp_path / "out.json").stat().st_size > 0
    with pytest.raises(StoreError, match="no cold archive"):
        archive(store, LocalStore(tmp_path / "objects"), retention=timedelta(0), now=t0)
    store._inner.close()
