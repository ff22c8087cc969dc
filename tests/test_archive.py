"""Cold archive contract: the same tests on both store engines, against a local directory and a real S3 server (SeaweedFS)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from objectstore_servers import ACCESS, SECRET

from mnemo.archive import archive, list_runs, manifest, pull_dir, push_dir, restore
from mnemo.embed import HashEmbedder
from mnemo.errors import EmbedderMismatch, InvalidInput, StoreError
from mnemo.model import Event, Link, MemoryRecord
from mnemo.objectstore import ChecksumMismatch, LocalStore, ObjectStoreError, S3Store, file_sha256
from mnemo.store import SCHEMA_VERSION, Store, new_id

EMB = HashEmbedder(64)
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=365)
RETENTION = timedelta(days=90)
BUCKET = "mnemo-archive"


def s3_store(endpoint, tmp_path, secret=SECRET):
    return S3Store(BUCKET, f"t-{uuid.uuid4().hex[:8]}", endpoint=endpoint, region="us-east-1", access_key=ACCESS,
                   secret_key=secret, checkpoint_dir=tmp_path / "ckpt")


@pytest.fixture(params=["local", "s3"])
def objects(request, tmp_path):
    if request.param == "local":
        return LocalStore(tmp_path / "cold")
    return s3_store(request.getfixturevalue("s3_endpoint"), tmp_path)


@pytest.fixture
def store(backend):
    """The hot store, on each engine (conftest's `backend`: DuckDB, and PostgreSQL when one is reachable)."""
    return backend.open("hot", embedder=EMB.name, dim=EMB.dim)


def mem(text, *, status="active", at=None, successor=None, **kw):
    return MemoryRecord(id=kw.pop("id", new_id()), user=kw.pop("user", "alice"), text=text, created_at=T0,
                        valid_from=T0, status=status, status_reason=None if status == "active" else f"{status} (test)",
                        status_at=at, successor_id=successor, meta={"src": "test"}, references=("S-1",), **kw)


def populate(store: Store) -> dict[str, MemoryRecord]:
    """A small history: supersession chains across two months, a forget, a recent tombstone, links both ways."""
    m = {}
    m["lisbon"] = mem("alice lives in Lisbon", subject="alice", attribute="city", value="Lisbon")
    m["berlin"] = mem("alice lives in Berlin", status="superseded", at=T0 + timedelta(days=10),
                      successor=m["lisbon"].id, subject="alice", attribute="city", value="Berlin")
    m["old_pet"] = mem("alice has a cat", status="superseded", at=T0 + timedelta(days=20))
    m["new_pet"] = mem("alice has a cat and a dog", status="forgotten", at=T0 + timedelta(days=50))
    m["gone"] = mem("alice's old phone number", status="forgotten", at=T0 + timedelta(days=40), user="bob")
    m["recent"] = mem("alice liked jazz", status="decayed", at=NOW - timedelta(days=10))
    m["because"] = mem("the phone was replaced after it broke", user="bob")
    records = list(m.values())
    with store.transaction():
        store.insert_memories(records, EMB.embed([r.text for r in records]))
        store.insert_events([Event(new_id("e"), r.id, T0, "created", None, "active") for r in records]
                            + [Event(new_id("e"), r.id, r.status_at, r.status, "active", r.status, r.status_reason,
                                     {"why": "test"}, r.successor_id) for r in records if r.status != "active"])
        store.insert_links([Link(m["lisbon"].id, m["berlin"].id, "supersedes", m["berlin"].status_at),
                            Link(m["new_pet"].id, m["old_pet"].id, "supersedes", m["old_pet"].status_at),
                            Link(m["because"].id, m["gone"].id, "because", T0)])
    return m


ARCHIVED = ("berlin", "old_pet", "new_pet", "gone")


def test_dry_run_counts_and_changes_nothing(store, objects):
    populate(store)
    before = store.archive.table_digests()
    report = archive(store, objects, retention=RETENTION, now=NOW, dry_run=True)
    assert report.dry_run and report.run_id is None
    assert report.months == {"2025-01": 2, "2025-02": 2}
    assert store.archive.table_digests() == before and objects.list() == []


def test_nothing_old_enough_writes_nothing(store, objects):
    populate(store)
    report = archive(store, objects, retention=timedelta(days=400), now=NOW)
    assert report.run_id is None and report.months == {} and objects.list() == []


def test_archive_then_restore_round_trip(store, objects, tmp_path):
    m = populate(store)
    before = store.archive.table_digests()
    vectors = {k: store.vectors([m[k].id])[0].copy() for k in ARCHIVED}
    report = archive(store, objects, retention=RETENTION, now=NOW)

    assert report.rows == {"memories": 4, "events": 8, "links": 3} and report.purged == report.rows
    left = {r.id for r in store.memories(include_inactive=True)}
    assert left == {m[k].id for k in ("lisbon", "recent", "because")}
    assert store.links([m["lisbon"].id, m["because"].id]) == []
    assert [e.action for e in store.events(m["lisbon"].id)] == ["created"]

    man = manifest(objects, report.run_id)
    assert (man["embedder"], man["dim"], man["schema_version"]) == (EMB.name, EMB.dim, SCHEMA_VERSION)
    assert man["retention_days"] == 90 and man["rows"] == report.rows
    assert [p["month"] for p in man["partitions"]] == ["2025-01", "2025-02"]
    for part in man["partitions"]:
        for table, f in part["files"].items():
            assert f["key"] == f"archive/{report.run_id}/month={part['month']}/{table}.parquet"
            objects.get(f["key"], tmp_path / "f.parquet")
            assert file_sha256(tmp_path / "f.parquet") == f["sha256"]
    # The link between two archived memories of different months is written once, with the earlier month.
    assert sum(p["files"]["links"]["rows"] for p in man["partitions"]) == 3
    assert list_runs(objects)[0]["run_id"] == report.run_id

    back = restore(store, objects, report.run_id)
    assert back.rows == report.rows and back.digests_checked
    assert store.archive.table_digests() == before
    for k in ARCHIVED:
        assert store.get(m[k].id) == m[k]
        np.testing.assert_array_equal(store.vectors([m[k].id])[0], vectors[k])
    assert {lk.kind for lk in store.links([m["gone"].id])} == {"because"}
    assert store.search_dense(EMB.embed(["alice lives in Berlin"])[0], 3, user="alice")[0][0] == m["lisbon"].id


def test_restore_refuses_ids_already_present(store, objects):
    populate(store)
    report = archive(store, objects, retention=RETENTION, now=NOW, keep_hot=True)
    assert report.purged == {}
    before = store.archive.table_digests()
    with pytest.raises(InvalidInput, match="already in the store"):
        restore(store, objects, report.run_id)
    assert store.archive.table_digests() == before


def test_restore_refuses_another_embedder(store, objects, backend):
    populate(store)
    report = archive(store, objects, retention=RETENTION, now=NOW)
    other = backend.open("other", embedder="hash-bow-32", dim=32)
    with pytest.raises(EmbedderMismatch):
        restore(other, objects, report.run_id)


def test_an_archive_restores_into_the_other_engine(tmp_path):
    """PostgreSQL's archive restores into DuckDB and back: same files, rows intact; digests are per engine."""
    from conftest import Backend

    pg, duck = Backend("postgres", tmp_path), Backend("duckdb", tmp_path)
    try:
        source = pg.open("source", embedder=EMB.name, dim=EMB.dim)
        m = populate(source)
        cold = LocalStore(tmp_path / "cold")
        report = archive(source, cold, retention=RETENTION, now=NOW)
        assert manifest(cold, report.run_id)["engine"].startswith("postgres ")
        into = duck.open("into", embedder=EMB.name, dim=EMB.dim)
        back = restore(into, cold, report.run_id)
        assert back.rows == report.rows and not back.digests_checked and "restored into duckdb" in back.note
        for k in ARCHIVED:
            assert into.get(m[k].id) == m[k]
            np.testing.assert_allclose(into.vectors([m[k].id])[0], EMB.embed([m[k].text])[0], rtol=1e-6)
        assert len(into.events(m["berlin"].id)) == 2 and into.links([m["gone"].id])[0].kind == "because"
        # And back the other way: DuckDB archives what it restored, PostgreSQL takes it in again.
        again = archive(into, cold, retention=RETENTION, now=NOW)
        assert again.purged == report.rows
        home = restore(source, cold, again.run_id)
        assert home.rows == report.rows and not home.digests_checked
        assert {k: source.get(m[k].id) for k in ARCHIVED} == {k: m[k] for k in ARCHIVED}
    finally:
        duck.cleanup()
        pg.cleanup()


class CorruptingStore(LocalStore):
    """Damages what it stored before reading it back, as a bad disk or a broken gateway would."""

    def get(self, key, dest):
        (self.root / key).write_bytes(b"damaged")
        return super().get(key, dest)


def test_nothing_is_deleted_when_the_copy_does_not_verify(store, tmp_path):
    populate(store)
    before = store.archive.table_digests()
    cold = CorruptingStore(tmp_path / "cold")
    with pytest.raises(ChecksumMismatch):
        archive(store, cold, retention=RETENTION, now=NOW)
    assert store.archive.table_digests() == before
    assert not [k for k in cold.list() if k.endswith("manifest.json")]


def test_a_wrong_secret_deletes_nothing(store, request, tmp_path):
    populate(store)
    before = store.archive.table_digests()
    with pytest.raises(ObjectStoreError, match="refused"):
        archive(store, s3_store(request.getfixturevalue("s3_endpoint"), tmp_path, secret="wrong"),
                retention=RETENTION, now=NOW)
    assert store.archive.table_digests() == before


class MeddlingStore(LocalStore):
    """Writes a new event for an archived memory while the manifest is uploaded (a concurrent writer)."""

    def __init__(self, root, hot: Store, memory_id: str):
        super().__init__(root)
        self.hot, self.memory_id = hot, memory_id

    def put(self, key, path):
        if key.endswith("manifest.json"):
            self.hot.insert_events([Event(new_id("e"), self.memory_id, NOW, "reviewed", "forgotten", "forgotten")])
        return super().put(key, path)


def test_purge_rolls_back_if_the_store_changed_after_export(store, tmp_path):
    m = populate(store)
    with pytest.raises(StoreError, match="nothing was deleted"):
        archive(store, MeddlingStore(tmp_path / "cold", store, m["gone"].id), retention=RETENTION, now=NOW)
    digests = store.archive.table_digests()
    assert digests["memories"][0] == len(m) and digests["links"][0] == 3
    assert store.get(m["gone"].id) == m["gone"]


def test_restore_refuses_a_damaged_partition(store, tmp_path):
    populate(store)
    cold = LocalStore(tmp_path / "cold")
    report = archive(store, cold, retention=RETENTION, now=NOW)
    before = store.archive.table_digests()
    key = manifest(cold, report.run_id)["partitions"][0]["files"]["memories"]["key"]
    (cold.root / key).write_bytes(b"PAR1 damaged")
    with pytest.raises(ChecksumMismatch):
        restore(store, cold, report.run_id)
    assert store.archive.table_digests() == before


@pytest.mark.slow
def test_100k_tombstones_round_trip_without_loss(store, backend, tmp_path):
    """100k tombstones over a year of months, with events and links: counts and row digests survive."""
    n = 100_000
    texts = [f"note {i} about item {i % 997} in warehouse {i % 13}" for i in range(n)]
    # Hash vectors of 1,000 template texts, tiled: embedding 100k texts would dominate the test's time.
    vectors = np.tile(EMB.embed([f"item {k} in warehouse {k % 13}" for k in range(1000)]), (n // 1000, 1))
    records = [MemoryRecord(id=f"m-{i:016x}", user=f"u{i % 7}", text=texts[i], created_at=T0, valid_from=T0,
                            status=("superseded", "forgotten", "decayed")[i % 3], status_reason="bulk",
                            status_at=T0 + timedelta(hours=i % 8000), meta={"i": i}) for i in range(n)]
    with store.transaction():
        store.insert_memories(records, vectors)
        store.insert_events([Event(f"e-{i:016x}", records[i].id, records[i].status_at, records[i].status,
                                   "active", records[i].status, "bulk") for i in range(0, n, 200)])
        store.insert_links([Link(records[i].id, records[i + 1].id, "supersedes", T0) for i in range(0, n - 1, 400)])
    before = store.archive.table_digests()
    cold = LocalStore(tmp_path / "cold")
    report = archive(store, cold, retention=timedelta(days=1), now=NOW)
    assert report.rows == {"memories": n, "events": n // 200, "links": n // 400}
    assert store.archive.table_digests()["memories"][0] == 0
    man = manifest(cold, report.run_id)
    assert sum(p["files"]["memories"]["rows"] for p in man["partitions"]) == n
    assert len(man["partitions"]) == 11
    back = restore(store, cold, report.run_id)
    assert store.archive.table_digests() == before and back.digests_checked
    if backend.name == "duckdb":
        assert len(store.index) == n, "the in-process index follows the restore"
    np.testing.assert_allclose(store.vectors([records[5].id, records[-1].id]), vectors[[5, -1]], rtol=1e-6)


def test_push_and_pull_experiment_runs(objects, tmp_path, monkeypatch):
    run = tmp_path / "runs" / "r7"
    (run / "plots").mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"recall@5": 0.81}))
    (run / "plots" / "curve.png").write_bytes(bytes(range(256)) * 10)
    plan = push_dir(objects, run, "experiments/r7", dry_run=True)
    assert [f["key"] for f in plan["files"]] == ["experiments/r7/plots/curve.png", "experiments/r7/results.json"]
    assert objects.list() == []
    pushed = push_dir(objects, run, "experiments/r7")
    assert objects.list() == ["experiments/r7/manifest.json", "experiments/r7/plots/curve.png",
                              "experiments/r7/results.json"]
    pulled = pull_dir(objects, "experiments/r7", tmp_path / "back")
    assert pulled == pushed
    assert (tmp_path / "back" / "plots" / "curve.png").read_bytes() == (run / "plots" / "curve.png").read_bytes()
    sent = []
    original = type(objects).put
    monkeypatch.setattr(type(objects), "put", lambda self, key, path: sent.append(key) or original(self, key, path))
    push_dir(objects, run, "experiments/r7")  # a re-push sends only the manifest
    assert sent == ["experiments/r7/manifest.json"]


def test_cli_archive_list_restore(tmp_path):
    from typer.testing import CliRunner

    from mnemo.cli import app
    from mnemo.memory import Memory

    path, cold = str(tmp_path / "cli.duckdb"), str(tmp_path / "cold")
    with Memory.open(path, embedder="hash") as m:
        gone = m.add("alice's old phone number is 555-0100", user="alice")
        m.add("alice likes green tea", user="alice")
        m.forget(gone.id, reason="user asked")
        before = m.store.archive.table_digests()
    run = CliRunner()
    dry = run.invoke(app, ["archive", "--to", cold, "--retention-days", "0", "--dry-run", "--store", path])
    assert dry.exit_code == 0 and "would be archived" in dry.output
    done = run.invoke(app, ["archive", "--to", cold, "--retention-days", "0", "--store", path, "--json"])
    assert done.exit_code == 0, done.output
    run_id = json.loads(done.output)["run_id"]
    listed = run.invoke(app, ["archive", "list", "--from", cold, "--json"])
    assert [r["run_id"] for r in json.loads(listed.output)] == [run_id]
    with Memory.open(path) as m:
        assert [r.id for r in m.memories("alice", include_inactive=True)] != [] and m.store.archive.table_digests() != before
    back = run.invoke(app, ["archive", "restore", run_id, "--from", cold, "--store", path])
    assert back.exit_code == 0, back.output
    with Memory.open(path) as m:
        assert m.store.archive.table_digests() == before and m.get(gone.id).status == "forgotten"
    missing = run.invoke(app, ["archive", "--store", path], env={"MNEMO_ARCHIVE": ""})
    assert missing.exit_code != 0 and "MNEMO_ARCHIVE" in missing.output


def test_purge_rolls_back_when_another_replica_writes_meanwhile(pg_backend, tmp_path):
    """On PostgreSQL the meddler is another connection to the same schema, as a second replica would be."""
    store = pg_backend.open("hot", embedder=EMB.name, dim=EMB.dim)
    replica = pg_backend.open("hot", embedder=EMB.name, dim=EMB.dim)
    m = populate(store)
    before = store.archive.table_digests()
    with pytest.raises(StoreError, match="nothing was deleted"):
        archive(store, MeddlingStore(tmp_path / "cold", replica, m["gone"].id), retention=RETENTION, now=NOW)
    after = store.archive.table_digests()
    assert after["memories"] == before["memories"] and after["links"] == before["links"]
    assert after["events"][0] == before["events"][0] + 1, "only the replica's event was added"
    # Once the replica is done, a new run archives everything, its new event included.
    report = archive(store, LocalStore(tmp_path / "cold2"), retention=RETENTION, now=NOW)
    assert report.purged == {"memories": 4, "events": 9, "links": 3}
