"""The indexes a DuckDB store saves beside its file (store.persist): taken back only while they describe the table.

What must hold: a reopened store answers BM25 and similarity searches exactly as one that
rebuilt everything; rows written after the save (even by a process that was killed before it
closed) are found; a corrupt, foreign or outdated file is not used, and says so in the log.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from mnemo.memory import Memory
from mnemo.store import ann, persist

ROOT = Path(__file__).resolve().parents[1]
WORDS = "cats dogs lisbon berlin nurse acme invoice warranty sister garden piano rain coffee".split()
QUERIES = ["cats in lisbon", "invoice warranty", "sister piano", "coffee rain garden", "zebra"]


@pytest.fixture(autouse=True)
def small_stores_save(monkeypatch):
    monkeypatch.setattr(persist, "SAVE_FROM", 10)


def texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"memory {i}: " + " ".join(rng.choice(WORDS, 5)) for i in range(n)]


def stats(mem: Memory) -> tuple:
    """Return (rows the saved indexes cover, rows in the BM25 postings, rows waiting to be analysed)."""
    s = mem.store.stats()
    return s["saved_rows"], s["lexical_rows"], s["lexical_waiting"]


def searches(mem: Memory) -> list:
    qv = mem.embedder.embed(QUERIES)
    return ([mem.store.search_lexical(q, 10, user=u) for q in QUERIES for u in ("u", "v")]
            + [mem.store.search_dense(v, 10, user="u") for v in qv])


def build(path: Path, n: int = 300, **kw) -> list:
    """Write a store, search it (so postings exist), close it (so they are saved); return its search results."""
    with Memory.open(path, embedder="hash:32", **kw) as mem:
        mem.insert_many(texts(n), user="u")
        mem.insert_many(texts(n // 3, seed=1), user="v")
        found = searches(mem)
    assert persist.sidecar(str(path)).exists()
    return found


def test_a_reopened_store_serves_the_saved_postings_with_the_same_results(tmp_path):
    path = tmp_path / "m.duckdb"
    before = build(path)
    with Memory.open(path) as mem:
        assert stats(mem) == (400, 400, 0)
        assert searches(mem) == before
        assert mem.store.lexical.syncs == 0  # nothing was analysed again
    persist.sidecar(str(path)).unlink()
    with Memory.open(path) as mem:
        assert stats(mem)[0] == 0 and searches(mem) == before  # the same, rebuilt from the table


def test_rows_written_after_the_save_are_found_after_reopening(tmp_path):
    path = tmp_path / "m.duckdb"
    build(path)
    with Memory.open(path) as mem:
        mem.add("The zebra lives in the garden shed", user="u")
        mem.forget(mem.store.search_lexical("memory 7", 1, user="u")[0][0])
    with Memory.open(path) as mem:
        # The saved file covers the first 400 rows only if close() did not save again; either way the new row is found.
        hit = mem.store.search_lexical("zebra", 5, user="u")
        assert [mem.get(i).text for i, _ in hit] == ["The zebra lives in the garden shed"]
        assert all(mem.get(i).active for q in QUERIES for i, _ in mem.store.search_lexical(q, 10, user="u"))


def test_a_write_acknowledged_by_a_killed_process_is_found_and_no_stale_posting_served(tmp_path):
    path = tmp_path / "m.duckdb"
    build(path)
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from mnemo.memory import Memory\n"
            f"mem = Memory.open({str(path)!r})\n"
            "mem.add('The zebra lives in the garden shed', user='u')\n"
            "mid = mem.store.search_lexical('cats', 1, user='u')[0][0]\n"
            "mem.forget(mid)\n"
            "print(mid)\n"
            "os._exit(0)\n")  # killed: no close, so nothing is saved again
    gone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    with Memory.open(path) as mem:
        assert stats(mem) == (400, 400, 1)
        assert [mem.get(i).text for i, _ in mem.store.search_lexical("zebra", 5, user="u")] == [
            "The zebra lives in the garden shed"]
        assert gone not in {i for i, _ in mem.store.search_lexical("cats", 400, user="u")}


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "text changed", "row deleted", "other engine"])
def test_a_file_that_does_not_describe_the_table_is_rebuilt_and_said_so(tmp_path, caplog, damage):
    path = tmp_path / "m.duckdb"
    build(path)
    side = persist.sidecar(str(path))
    if damage == "corrupt":
        raw = bytearray(side.read_bytes())
        raw[len(raw) // 2:len(raw) // 2 + 16] = b"\xff" * 16
        side.write_bytes(bytes(raw))
    elif damage == "truncated":
        side.write_bytes(side.read_bytes()[:500])
    elif damage == "other engine":
        manifest, arrays = persist.load(side)
        persist.save(side, {**manifest, "engine": "0.0.1"}, arrays)
    else:
        con = duckdb.connect(str(path))
        first = con.execute("SELECT id FROM memories LIMIT 1").fetchone()[0]
        con.execute("UPDATE memories SET text = 'a zebra now' WHERE id = ?" if damage == "text changed"
                    else "DELETE FROM memories WHERE id = ?", [first])
        con.close()
    with caplog.at_level(logging.WARNING, logger="mnemo.store"), Memory.open(path) as mem:
        assert stats(mem) == (0, None, 0)
        rebuilt = searches(mem)
    assert "not using the saved indexes" in caplog.text
    with Memory.open(path) as mem:  # the file written at that close describes the table again
        assert stats(mem)[0] > 0 and searches(mem) == rebuilt


def test_a_changed_text_is_searched_by_its_new_words(tmp_path):
    path = tmp_path / "m.duckdb"
    build(path)
    con = duckdb.connect(str(path))
    first = con.execute("SELECT id FROM memories LIMIT 1").fetchone()[0]
    con.execute("UPDATE memories SET text = 'a zebra now' WHERE id = ?", [first])
    con.close()
    with Memory.open(path) as mem:
        assert [i for i, _ in mem.store.search_lexical("zebra", 5, user="u")] == [first]


def test_the_ivf_lists_are_taken_back_without_k_means(tmp_path, monkeypatch):
    monkeypatch.setattr(ann.IvfIndex, "TAIL_MIN", 50)
    monkeypatch.setattr(ann, "EXACT_UNDER", 0)
    monkeypatch.setattr(ann._Approximate, "exact_under", 0)
    path = tmp_path / "m.duckdb"
    before = build(path, n=600, index="ivf")

    def no_kmeans(*a, **kw):
        raise AssertionError("k-means ran although the lists were saved")

    monkeypatch.setattr(ann, "kmeans", no_kmeans)
    with Memory.open(path, index="ivf") as mem:
        assert ann.kind_of(mem.store.index) == "ivf" and mem.store.index.stats()["tail"] == 0
        assert searches(mem) == before


def test_memory_and_read_only_stores_save_nothing(tmp_path):
    with Memory.open(":memory:", embedder="hash:32") as mem:
        mem.insert_many(texts(50), user="u")
        mem.store.search_lexical("cats", 3, user="u")
        assert mem.store.save_indexes() is False
    path = tmp_path / "m.duckdb"
    build(path)
    persist.sidecar(str(path)).unlink()
    with Memory.open(path, read_only=True) as mem:
        mem.store.search_lexical("cats", 3, user="u")
    assert not persist.sidecar(str(path)).exists()



def _index_state(index) -> tuple:
    n = index.size
    users = {c: u for u, c in index._users.items()}
    extra = [index._offsets.tobytes(), index._built] if isinstance(index, ann.IvfIndex) else []
    if isinstance(index, ann.BinaryIndex):  # its codes are kept word-major: row r is [:, r]
        extra.append(np.ascontiguousarray(index._codes[:, :n]).tobytes())
    elif hasattr(index, "_codes"):
        extra.append(np.asarray(index._codes[:n]).tobytes())
    return (list(index._ids), [users[int(c)] for c in index._user[:n]], index._active[:n].tobytes(),
            np.asarray(index._vecs[:n]).tobytes(), *extra)


@pytest.mark.parametrize("kind", ["exact", "binary", "ivf"])
def test_the_index_is_mapped_back_as_it_was_closed_and_rebuilt_when_its_file_is_damaged(tmp_path, monkeypatch,
                                                                                      kind, caplog):
    monkeypatch.setattr(ann.IvfIndex, "TAIL_MIN", 50)
    path = tmp_path / "m.duckdb"
    with Memory.open(path, embedder="hash:32", index=kind) as mem:
        mem.insert_many(texts(400), user="u")
        mem.insert_many(texts(30, seed=1), user="v")  # IVF: a tail, kept as it was
        found, state = searches(mem), _index_state(mem.store.index)
    (matrix,) = persist.matrix_files(str(path))
    with Memory.open(path, index=kind) as mem:
        assert isinstance(mem.store.index._vecs, np.memmap)
        assert _index_state(mem.store.index) == state and searches(mem) == found
        mem.insert_many(texts(5, seed=2), user="u")  # appends leave the mapped file alone
        grown = searches(mem)
    assert persist.matrix_files(str(path)) != [matrix] and not matrix.exists()  # the new save replaced it
    (matrix,) = persist.matrix_files(str(path))
    matrix.write_bytes(matrix.read_bytes()[:200])
    with caplog.at_level(logging.WARNING, logger="mnemo.store"), Memory.open(path, index=kind) as mem:
        assert not isinstance(mem.store.index._vecs, np.memmap)
        assert searches(mem) == grown
    assert "not using the saved indexes" in caplog.text
