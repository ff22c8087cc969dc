"""BM25 served in process (mnemo.store.lexical) against DuckDB fts's own match_bm25 on the same rows."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import duckdb
import numpy as np
import pytest

from mnemo.model import MemoryRecord
from mnemo.store import SCHEMA_VERSION
from mnemo.store import DuckDBStore as Store
from mnemo.store import extension_path as _extension_path
from mnemo.store.lexical import LexicalIndex

ROOT_ASSETS = Path(__file__).resolve().parents[1] / "mnemo" / "assets"

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

TEXTS = [
    "The lead time for IC-MC-44 is 21 days, and the supplier is Acme",
    "S-208 lead time is 35 days since the supplier changed",
    "Caroline went to the LGBTQ support group yesterday and felt accepted",
    "Melanie painted a sunrise over the lake last year",
    "I'm running a charity race for mental health on Saturday",
    "The café on Rue Cler serves the best croissants; Zoë goes there daily",
    "Running, runner, runs: stems of run, and the runners' club meets weekly",
    "",
    "!!! ??? ...",
    "the the the and of a",  # stopwords only: a document of length 0
    "Deploy checklist: run migrations, then restart the workers, then check the workers' health",
    "Zoë's dog is called Biscuit and Biscuit loves the lake",
]
QUERIES = ["lead time IC-MC-44", "supplier", "Caroline support group", "run running runner", "cafe Zoe croissants",
           "lake", "the", "workers health check", "biscuit", "nothing matches xyzzy", "", "Zoë's lake dog"]


def _rec(text: str, user: str = "alice", i: int = 0) -> MemoryRecord:
    return MemoryRecord(id=f"m-{i:04d}", user=user, text=text, kind="semantic", category="fact",
                        created_at=T0, valid_from=T0)


def _vecs(n: int, dim: int = 8) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)


def _fts_reference(texts: list[str], query: str, k: int) -> list[tuple[str, float]]:
    """Rank with the fts extension itself: create_fts_index + match_bm25 over the same ids and texts."""
    con = duckdb.connect()
    con.execute(f"LOAD '{_extension_path('fts')}'")
    con.execute("CREATE TABLE docs (id VARCHAR, text VARCHAR)")
    con.executemany("INSERT INTO docs VALUES (?, ?)", [(f"m-{i:04d}", t) for i, t in enumerate(texts)])
    con.execute("PRAGMA create_fts_index('docs', 'id', 'text', ignore='(\\.|[^a-z0-9])+')")
    rows = con.execute("SELECT id, score FROM (SELECT id, fts_main_docs.match_bm25(id, ?) AS score FROM docs) "
                       "WHERE score IS NOT NULL ORDER BY score DESC, id LIMIT ?", [query, k]).fetchall()
    return [(r[0], float(r[1])) for r in rows]


@pytest.fixture
def store():
    s = Store(":memory:", embedder="test", dim=8)
    with s.transaction():
        s.insert_memories([_rec(t, i=i) for i, t in enumerate(TEXTS)], _vecs(len(TEXTS)))
    yield s
    s.close()


@pytest.mark.parametrize("query", QUERIES)
def test_scores_equal_the_fts_extensions_match_bm25(store, query):
    got = store.search_lexical(query, 20, user="alice")
    want = _fts_reference(TEXTS, query, 20)
    assert [g[0] for g in got] == [w[0] for w in want]
    assert np.allclose([g[1] for g in got], [w[1] for w in want], rtol=1e-9)


def test_rows_written_after_a_search_are_found_and_counted_in_the_statistics(store):
    assert store.search_lexical("biscuit", 5, user="alice")
    more = ["Biscuit the dog learned a new trick", "A note about lead time and suppliers"]
    with store.transaction():
        store.insert_memories([_rec(t, i=len(TEXTS) + j) for j, t in enumerate(more)], _vecs(2))
    assert store.lexical_stale
    for query in ("biscuit", "lead time", "supplier"):
        got = store.search_lexical(query, 20, user="alice")
        want = _fts_reference(TEXTS + more, query, 20)
        assert [g[0] for g in got] == [w[0] for w in want]
        assert np.allclose([g[1] for g in got], [w[1] for w in want], rtol=1e-9)
    assert store.lexical.syncs == 2 and not store.lexical_stale


def test_tombstones_leave_results_but_stay_in_the_statistics(store):
    hits = store.search_lexical("lead time", 5, user="alice")
    assert {h[0] for h in hits} == {"m-0000", "m-0001"}
    with store.transaction():
        store.set_status("m-0001", "superseded", reason="test", at=T0, successor="m-0000")
    after = store.search_lexical("lead time", 5, user="alice")
    assert [h[0] for h in after] == ["m-0000"]
    # N and df still count the tombstone, as create_fts_index over the whole table does.
    assert after[0][1] == pytest.approx(dict(hits)["m-0000"])


def test_users_and_filters_narrow_what_is_ranked():
    s = Store(":memory:", embedder="test", dim=8)
    with s.transaction():
        s.insert_memories([_rec("alpha beta", "alice", 0), _rec("alpha gamma", "bob", 1),
                           MemoryRecord(id="m-0002", user="alice", text="alpha delta", kind="procedural",
                                        category="fact", created_at=T0, valid_from=T0)], _vecs(3))
    assert {h[0] for h in s.search_lexical("alpha", 5, user="alice")} == {"m-0000", "m-0002"}
    assert [h[0] for h in s.search_lexical("alpha", 5, user="bob")] == ["m-0001"]
    assert s.search_lexical("alpha", 5, user="nobody") == []
    assert [h[0] for h in s.search_lexical("alpha", 5, user="alice", filters={"kinds": ["procedural"]})] == ["m-0002"]


def test_a_rolled_back_write_leaves_no_postings(store):
    store.search_lexical("lake", 5, user="alice")
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.insert_memories([_rec("zeppelin over the lake", i=99)], _vecs(1))
            assert store.search_lexical("zeppelin", 5, user="alice")  # seen inside the transaction
            raise RuntimeError("boom")
    assert store.search_lexical("zeppelin", 5, user="alice") == []
    assert store.search_lexical("lake", 20, user="alice") == _fts_reference(TEXTS, "lake", 20)


def test_ties_break_by_id_and_k_cuts_after_the_tie_break():
    idx = LexicalIndex()
    ids = [f"m-{c}" for c in "dcba"]
    # Four one-term documents of equal length: equal scores.
    idx.add(ids, ["u"] * 4, np.ones(4, bool), np.arange(4), ["x"], np.zeros(4, np.int64), np.ones(4))
    assert [h[0] for h in idx.search(["x"], 2, user="u")] == ["m-a", "m-b"]
    assert idx.search(["x"], 0, user="u") == [] and idx.search(["y"], 3, user="u") == []


def test_a_read_only_store_serves_bm25_with_no_index_built_before(tmp_path):
    path = tmp_path / "s.duckdb"
    s = Store(path, embedder="test", dim=8)
    with s.transaction():
        s.insert_memories([_rec(t, i=i) for i, t in enumerate(TEXTS)], _vecs(len(TEXTS)))
    s.close()
    ro = Store(path, embedder="test", dim=8, read_only=True)
    assert ro.search_lexical("supplier", 5, user="alice") == _fts_reference(TEXTS, "supplier", 5)
    ro.close()


def test_a_version_1_store_migrates_dropping_its_fts_index_and_indexing_ids(tmp_path):
    path = tmp_path / "v1.duckdb"
    s = Store(path, embedder="test", dim=8)
    with s.transaction():
        s.insert_memories([_rec(t, i=i) for i, t in enumerate(TEXTS)], _vecs(len(TEXTS)))
    # Put the file back to what version 1 left: no id index, an fts index built by the extension.
    s.con.execute("DROP INDEX memories_id")
    s.con.execute("ALTER TABLE memories DROP COLUMN tokens")  # version 3's
    s.con.execute("DROP TABLE turn_outcomes")  # version 4's
    s.con.execute("PRAGMA create_fts_index('memories', 'id', 'text', ignore='(\\.|[^a-z0-9])+')")
    s.con.execute("UPDATE store_meta SET value = '1' WHERE key = 'schema_version'")
    s.close()
    s = Store(path, embedder="test", dim=8)
    assert s.schema_version == SCHEMA_VERSION
    assert s.con.execute("SELECT count(*) FROM information_schema.schemata "
                         "WHERE schema_name = 'fts_main_memories'").fetchone()[0] == 0
    assert [r[0] for r in s.con.execute("SELECT index_name FROM duckdb_indexes()").fetchall()] == ["memories_id"]
    assert s.stats()["memories"] == len(TEXTS)
    assert s.search_lexical("supplier", 5, user="alice") == _fts_reference(TEXTS, "supplier", 5)
    s.close()


def test_query_analysis_equals_fts_analysis_run_by_duckdb(store):
    # ASCII queries are tokenised in Python with stems kept per word; the terms must be fts's, word for word.
    rng = np.random.default_rng(7)
    alphabet = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:'-_/!?()\t\n")
    words = ["running", "Runs", "the", "AND", "KT-40's", "generously", "caresses", "ponies", "don't", "i.e.",
             "e-mail", "héllo", "Straße", "naïve", "x" * 60]
    queries = ["".join(rng.choice(alphabet, int(rng.integers(1, 60)))) for _ in range(150)]
    queries += [" ".join(rng.choice(words, int(rng.integers(1, 6)))) for _ in range(150)]
    sql = ("SELECT DISTINCT tok, stem(tok, 'porter') FROM (SELECT unnest(regexp_extract_all(lower(strip_accents("
           "?::VARCHAR)), '[a-z0-9]+')) AS tok)")
    stop = set((ROOT_ASSETS / "stopwords_english.txt").read_text().split())
    for q in queries:
        want = sorted({stem for tok, stem in store.con.execute(sql, [q]).fetchall() if tok not in stop})
        assert store.lexical.terms(store.con, q) == want, q


def test_rows_written_one_by_one_between_searches_score_as_the_fts_extension():
    # Rows this process wrote are analysed in Python when ASCII (as queries are), by DuckDB when not.
    s = Store(":memory:", embedder="test", dim=8)
    more = ["Biscuit the dog learned a new trick", "A note about lead time and suppliers; runs, runner", "Zoë ran"]
    texts = TEXTS + more
    here = []
    analyse = s.lexical._add_ascii
    s.lexical._add_ascii = lambda con, ids, docs: (here.extend(ids), analyse(con, ids, docs))
    for i, text in enumerate(texts):
        with s.transaction():
            s.insert_memories([_rec(text, i=i)], _vecs(1))
        if i == 4:
            with s.transaction():  # a tombstone written before its row was analysed keeps its flag
                s.set_status("m-0004", "forgotten", reason="test", at=T0)
        s.search_lexical("lake", 3, user="alice")
    assert "m-0004" in here and "m-0005" not in here  # "café" is analysed by DuckDB
    for query in QUERIES + ["biscuit trick", "suppliers runs", "zoe ran"]:
        got = s.search_lexical(query, 30, user="alice")
        want = [w for w in _fts_reference(texts, query, 30) if w[0] != "m-0004"]
        assert [g[0] for g in got] == [w[0] for w in want]
        assert np.allclose([g[1] for g in got], [w[1] for w in want], rtol=1e-9)
    s.close()
