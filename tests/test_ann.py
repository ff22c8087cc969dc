"""Approximate and quantised indexes (mnemo.store.ann): exactness where promised, recall bounds, size policy, sync."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from mnemo.errors import ConfigError
from mnemo.model import MemoryRecord
from mnemo.store import DuckDBStore as Store
from mnemo.store import ann, new_id
from mnemo.store.index import VectorIndex

APPROX = ("ivf", "binary", "int8", "float16")
DIM = 64
# recall@10 against exact search on the clustered set below; each option's default parameters.
RECALL_BOUND = 0.9


def clustered(n: int, dim: int = DIM, clusters: int = 40, seed: int = 0) -> np.ndarray:
    """Return n unit vectors in `clusters` tight-ish groups: like sentence embeddings, unlike uniform noise."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    spread = rng.uniform(0.3, 0.8, clusters)[:, None]
    which = rng.integers(0, clusters, n)
    x = centres[which] + spread[which] * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def build(kind: str, vecs: np.ndarray, users: list[str] | None = None) -> VectorIndex:
    index = ann.empty(kind, vecs.shape[1])
    index.exact_under = 0  # force the approximate path even on a small set
    if kind == "ivf":
        index.TAIL_MIN = 500
    index.add([f"m{i}" for i in range(len(vecs))], users or ["u"] * len(vecs), vecs)
    return index


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    vecs = clustered(4000)
    rng = np.random.default_rng(1)
    # Queries near stored rows (paraphrases), never equal to one.
    base = vecs[rng.choice(len(vecs), 60, replace=False)]
    queries = base + 0.35 * rng.normal(size=base.shape).astype(np.float32) / np.sqrt(DIM)
    return vecs, queries / np.linalg.norm(queries, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", APPROX)
def test_approximate_options_return_the_exact_top1(kind, data):
    vecs, queries = data
    exact, approx = build("exact", vecs), build(kind, vecs)
    for q in queries[:30]:
        want = exact.search(q, 1, user="u")[0]
        got = approx.search(q, 1, user="u")[0]
        assert got[0] == want[0]
        # Scores are re-computed cosines, not quantised estimates (float16 stores rows in float16).
        assert got[1] == pytest.approx(want[1], abs=2e-3 if kind == "float16" else 1e-5)


@pytest.mark.parametrize("kind", APPROX)
def test_recall_at_10_on_clustered_vectors_meets_the_bound(kind, data):
    vecs, queries = data
    exact, approx = build("exact", vecs), build(kind, vecs)
    recall = np.mean([len({m for m, _ in approx.search(q, 10, user="u")} & {m for m, _ in exact.search(q, 10, user="u")})
                      / 10 for q in queries])
    assert recall >= RECALL_BOUND


def test_size_policy_is_exact_when_small_and_approximate_when_large():
    assert ann.choose(0) == "exact"
    assert ann.choose(ann.AUTO_APPROX_FROM - 1) == "exact"
    assert ann.choose(ann.AUTO_APPROX_FROM) == ann.AUTO_KIND == "binary"
    assert ann.choose(ann.AUTO_IVF_FROM - 1) == "binary"
    assert ann.choose(ann.AUTO_IVF_FROM) == "ivf"
    for kind in ("exact", *APPROX):
        assert ann.choose(10, kind) == kind
        assert ann.choose(10 * ann.AUTO_APPROX_FROM, kind) == kind
    with pytest.raises(ConfigError, match="unknown index 'hnsw2'"):
        ann.choose(10, "hnsw2")


def _records(n: int, user: str = "u") -> list[MemoryRecord]:
    now = datetime(2024, 1, 1, tzinfo=timezone.utc)
    return [MemoryRecord(id=new_id(), user=user, text=f"memory {i}", kind="episodic", created_at=now,
                         valid_from=now) for i in range(n)]


def test_store_switches_to_the_approximate_index_when_it_grows(monkeypatch):
    monkeypatch.setattr(ann, "AUTO_APPROX_FROM", 1500)
    store = Store(":memory:", embedder="test", dim=DIM)
    vecs = clustered(2000, seed=3)
    recs = _records(2000)
    with store.transaction():
        store.insert_memories(recs[:1000], vecs[:1000])
    assert ann.kind_of(store.index) == "exact"
    with store.transaction():
        store.insert_memories(recs[1000:], vecs[1000:])
    assert ann.kind_of(store.index) == "binary" and store.stats()["index"] == "binary"
    # Every row came along, with the same vector.
    assert np.allclose(store.vectors([recs[5].id, recs[1999].id]), vecs[[5, 1999]], atol=1e-6)
    assert store.search_dense(vecs[1234], 1, user="u")[0][0] == recs[1234].id


@pytest.mark.parametrize("kind", ["exact", *APPROX])
def test_override_is_kept_whatever_the_size(kind, tmp_path):
    path = tmp_path / "s.duckdb"
    store = Store(path, embedder="test", dim=DIM, index=kind)
    assert ann.kind_of(store.index) == kind
    with store.transaction():
        store.insert_memories(_records(50), clustered(50))
    store.close()
    store = Store(path, embedder="test", dim=DIM, index=kind, read_only=True)
    assert ann.kind_of(store.index) == kind and len(store.index) == 50
    store.close()
    with pytest.raises(ConfigError):
        Store(":memory:", embedder="test", dim=DIM, index="annoy")


@pytest.mark.parametrize("kind", APPROX)
def test_index_follows_writes_and_status_changes(kind, monkeypatch):
    monkeypatch.setattr(ann, "EXACT_UNDER", 0)
    monkeypatch.setattr(ann._Approximate, "exact_under", 0)
    monkeypatch.setattr(ann.IvfIndex, "TAIL_MIN", 300)
    store = Store(":memory:", embedder="test", dim=DIM, index=kind)
    vecs = clustered(1600, seed=5)
    alice, bob = _records(800, "alice"), _records(800, "bob")
    with store.transaction():
        store.insert_memories(alice[:600] + bob[:600], np.concatenate([vecs[:600], vecs[800:1400]]))
    # Writes after the first build land in the IVF tail, then are folded in; both are searched.
    for i in range(600, 800, 50):
        with store.transaction():
            store.insert_memories(alice[i:i + 50] + bob[i:i + 50],
                                  np.concatenate([vecs[i:i + 50], vecs[800 + i:850 + i]]))
    for i in (0, 333, 799):
        assert store.search_dense(vecs[i], 1, user="alice")[0][0] == alice[i].id
        assert store.search_dense(vecs[800 + i], 1, user="bob")[0][0] == bob[i].id
    # A tombstone leaves the results at once; a restore brings it back.
    at = datetime(2024, 2, 1, tzinfo=timezone.utc)
    with store.transaction():
        store.set_status(alice[333].id, "forgotten", reason="test", at=at)
    assert alice[333].id not in {m for m, _ in store.search_dense(vecs[333], 10, user="alice")}
    with store.transaction():
        store.set_status(alice[333].id, "active", reason="restored", at=at)
    assert store.search_dense(vecs[333], 1, user="alice")[0][0] == alice[333].id
    # Users never see each other's rows, and filters narrow to exactly the allowed rows.
    assert all(m.startswith("m-") and m in {r.id for r in alice} for m, _ in store.search_dense(vecs[5], 10, user="alice"))
    # A rolled-back insert leaves no row behind.
    extra = _records(1, "alice")
    with pytest.raises(RuntimeError), store.transaction():
        store.insert_memories(extra, vecs[:1] * -1)
        raise RuntimeError("roll back")
    assert extra[0].id not in {m for m, _ in store.search_dense(-vecs[0], 5, user="alice")}
    assert ann.kind_of(store.index) == kind


def test_ivf_finds_k_rows_for_a_small_user_in_a_large_store(data):
    vecs, queries = data
    users = ["big"] * len(vecs)
    for i in range(0, len(vecs), 40):
        users[i] = "small"
    index = build("ivf", vecs, users)
    exact = build("exact", vecs, users)
    index.nprobe_fixed = 1
    # One list holds about 1 row of the small user: the search probes on until it has k.
    hits = index.search(queries[0], 10, user="small")
    assert len(hits) == 10 and all(int(m[1:]) % 40 == 0 for m, _ in hits)
    assert hits[0][0] == exact.search(queries[0], 1, user="small")[0][0]


def test_memory_open_passes_the_index_choice_to_the_store():
    import mnemo

    with mnemo.Memory.open(":memory:", embedder="hash:64", llm="offline", index="binary") as mem:
        rec = mem.add("Lead time for AX-7 is 14 days", user="ops")
        assert mem.stats()["index"] == "binary"
        assert mem.recall("AX-7 lead time", user="ops").memories[0].id == rec.id
    with pytest.raises(ConfigError):
        mnemo.Memory.open(":memory:", embedder="hash:64", llm="offline", index="annoy")


@pytest.mark.parametrize("kind", ["binary", "ivf"])
def test_searches_running_during_appends_never_fail(kind, data):
    import threading

    vecs, queries = data
    index = build(kind, vecs[:2000])
    errors: list[BaseException] = []

    def search() -> None:
        # A thread's exception would be lost: it is handed to the test's own thread instead.
        try:
            for q in queries[:40]:
                assert index.search(q, 10, user="u")
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=search)
    reader.start()
    for start in range(2000, 4000, 100):
        index.add([f"m{i}" for i in range(start, start + 100)], ["u"] * 100, vecs[start:start + 100])
    reader.join()
    assert not errors and len(index) == 4000


def test_ivf_folds_a_tail_into_its_lists_without_reassigning_the_grouped_rows():
    vecs = clustered(6000, seed=3)
    index = ann.IvfIndex(DIM)
    index.TAIL_MIN = 200
    index.add([f"m{i}" for i in range(3000)], ["u"] * 3000, vecs[:3000])  # bulk: trained and grouped
    cent, builds = index._cent.copy(), index.builds
    for start in range(3000, 6000, 250):  # appends: each fold groups the tail with the same centroids
        index.add([f"m{i}" for i in range(start, start + 250)], ["u"] * 250, vecs[start:start + 250])
    assert index.builds > builds + 5 and np.array_equal(index._cent, cent)
    n = index._built
    lists = np.repeat(np.arange(len(index._offsets) - 1), np.diff(index._offsets))
    # Every grouped row sits in the list of its nearest centroid, and every id still finds its own vector.
    assert np.array_equal(lists, ann.assign_rows(index._vecs[:n], index._cent))
    rows = [index._row[f"m{i}"] for i in range(6000)]
    assert np.allclose(index._vecs[rows], vecs, atol=1e-6)


def test_a_search_reads_the_row_count_once_while_an_append_grows_it():
    """The race CI once hit: an append moved `size` between two reads inside one search's mask."""

    class Racy(VectorIndex):
        """Reports one more row at every read of `size`, as if appends kept landing during the search."""

        @property
        def size(self) -> int:
            self.reads = getattr(self, "reads", 0) + 1
            return self._n + (self.reads if self.racing else 0)

        @size.setter
        def size(self, value: int) -> None:
            self._n, self.racing = value, False

    vecs = clustered(50, seed=5)
    index = Racy(DIM)
    index.add([f"m{i}" for i in range(50)], ["u"] * 50, vecs)
    index.racing, index.reads = True, 0
    hits = index.search(vecs[3], 5, user="u", allowed={f"m{i}" for i in range(20)})
    assert hits[0][0] == "m3" and all(int(h[0][1:]) < 20 for h in hits)


def _state(index) -> tuple:
    n = index.size
    users = {c: u for u, c in index._users.items()}
    extra = [np.asarray(getattr(index, name))[:n].tobytes() for name in ("_codes",) if hasattr(index, name)]
    if isinstance(index, ann.BinaryIndex):  # its codes are kept word-major: row r is [:, r]
        extra = [np.ascontiguousarray(index._codes[:, :n]).tobytes()]
    if isinstance(index, ann.IvfIndex):
        extra += [index._offsets.tobytes(), index._cent.tobytes(), index._built]
    return (list(index._ids), [users[int(c)] for c in index._user[:n]], index._active[:n].tobytes(),
            np.asarray(index._vecs[:n]).tobytes(), *extra)


@pytest.mark.parametrize("kind", ["exact", "binary", "int8", "float16", "ivf"])
def test_loading_in_batches_builds_the_index_that_adding_builds(kind, monkeypatch):
    # Opening a store streams its vectors into the index (`load`); the index must be the one `add` builds.
    monkeypatch.setattr(ann.IvfIndex, "TAIL_MIN", 100)
    rng = np.random.default_rng(3)
    n = 700
    vecs = rng.normal(size=(n, 16)).astype(np.float32) * 3
    ids, users = [f"m{i}" for i in range(n)], [f"u{i % 3}" for i in range(n)]
    active = rng.random(n) > 0.2
    batches = [(s, vecs[s:s + 64]) for s in range(0, n, 64)]
    added, loaded = ann.empty(kind, 16), ann.empty(kind, 16)
    added.add(ids, users, vecs, active=active)
    loaded.load(ids, users, active, iter(batches))
    assert _state(loaded) == _state(added)
    if kind == "ivf":
        # With saved centroids and lists (some rows unplaced, as rows written since the save): add_grouped's index.
        saved = added.lists_of(ids)
        lists = saved["ivf_lists"].copy()
        lists[[5, 600, 699]] = -1
        grouped, streamed = ann.empty(kind, 16), ann.empty(kind, 16)
        grouped.add_grouped(ids, users, vecs, active, saved["ivf_cent"], lists[:650], 700)
        lists[lists < 0] = ann.IvfIndex.assign(vecs[lists < 0], saved["ivf_cent"])
        streamed.load(ids, users, active, iter(batches), cent=saved["ivf_cent"], lists=lists, trained_at=700)
        assert _state(streamed) == _state(grouped)


def test_hamming_sums_every_words_popcount():
    from mnemo.store.ann import hamming

    rng = np.random.default_rng(5)
    for words in (1, 2, 6):
        codes = rng.integers(0, 2**63, size=(1000, words), dtype=np.uint64)
        qc = codes[7] ^ np.uint64(0b1011)
        words = np.ascontiguousarray(codes.T)  # word-major, as the index keeps them
        assert np.array_equal(hamming(words, qc), np.bitwise_count(codes ^ qc).sum(axis=1, dtype=np.int32))
        assert hamming(words, qc).dtype == np.int32


@pytest.mark.parametrize("kind", ["exact", "ivf", "binary"])
def test_a_users_kept_rows_mark_what_a_pass_over_every_row_marks(kind):
    """`UserRows` against `row_mask` without it, through appends of mixed users, tombstones and IVF regrouping."""
    from mnemo.store.index import row_mask

    rng = np.random.default_rng(5)
    vecs = clustered(5000, seed=5)
    index = ann.empty(kind, DIM)
    if kind == "ivf":
        index.TAIL_MIN = 300  # appends fold into the lists: every fold permutes the rows
    users = [f"u{k}" for k in rng.choice(7, len(vecs), p=[0.55, 0.2, 0.1, 0.08, 0.05, 0.019, 0.001])]
    builds = getattr(index, "builds", 0)
    for start in range(0, len(vecs), 400):
        stop = min(start + 400, len(vecs))
        index.add([f"m{i}" for i in range(start, stop)], users[start:stop], vecs[start:stop])
        index.set_active([f"m{i}" for i in rng.choice(stop, 40, replace=False)], False)
        index.set_active([f"m{i}" for i in rng.choice(stop, 20, replace=False)], True)
        for user in ("u0", "u5", "u6", "nobody"):
            for allowed in (None, {f"m{i}" for i in rng.choice(stop, 300, replace=False)}):
                args = (index.size, index._active, index._user, index._users, index._row, user, allowed)
                kept, passed = row_mask(*args, index._by_user), row_mask(*args)
                assert (kept is None) == (passed is None)
                if kept is not None:
                    assert np.array_equal(kept, passed), (start, user)
        q = vecs[rng.integers(stop)]
        exact = VectorIndex(DIM)
        exact.add(index._ids[:index.size], [users[int(m[1:])] for m in index._ids[:index.size]],
                  index._vecs[:index.size], index._active[:index.size])
        assert index.search(q, 5, user="u6") == exact.search(q, 5, user="u6")  # few rows: searched exactly
    if kind == "ivf":
        assert index.builds > builds + 3  # the rows were regrouped along the way


def test_the_lexical_index_keeps_each_users_rows_too():
    from mnemo.store.lexical import LexicalIndex

    index = LexicalIndex()
    for start, user in ((0, "a"), (3, "b"), (6, "a")):
        ids = [f"d{i}" for i in range(start, start + 3)]
        index.add(ids, [user] * 3, np.ones(3, bool), np.arange(3), ["word"], np.zeros(3, np.int64), np.ones(3))
    assert {m for m, _ in index.search(["word"], 10, user="a")} == {"d0", "d1", "d2", "d6", "d7", "d8"}
    index.set_active(["d7"], False)
    assert {m for m, _ in index.search(["word"], 10, user="a")} == {"d0", "d1", "d2", "d6", "d8"}
    assert {m for m, _ in index.search(["word"], 10, user="b")} == {"d3", "d4", "d5"}
    assert index.search(["word"], 10, user="nobody") == []
