"""Cold archive: old tombstones to Parquet in an object store, verified before they leave the hot store.

    report = archive(store, open_store("oss://bucket/mnemo"), retention=timedelta(days=90), now=clock.now())
    restore(store, objects, report.run_id)              # brings every archived row back
    push_dir(objects, "experiments/runs/r7", "experiments/r7")   # experiment runs, the same way

An archive run writes, under `archive/RUN_ID/`, one folder per month of tombstoning
(`month=2025-01/`) holding `memories.parquet` (with vectors), `events.parquet` and
`links.parquet`, then `manifest.json`. The order is the guarantee: every file is
uploaded, read back in full and matched against its sha256 and row count, the
manifest is written and read back, and only then are the rows deleted from the hot
store, in one transaction that rolls back unless it deletes exactly what was archived.
This is the one place mnemo hard-deletes anything.

Both store engines hold a part that keeps the archive contract, `store.archive` (DuckDB:
`store.parquet`, PostgreSQL: `store.pg_archive`), and write the same files, so a run restores
into either; row digests are checked when the engine that restores is the one that archived.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from .errors import EmbedderMismatch, InvalidInput, NotFound, StoreError
from .objectstore import ChecksumMismatch, ObjectStore, check_key, file_sha256
from .store import ENGINE_VERSION, Archiving, Store

FORMAT = "mnemo-archive/1"
RUNS_FORMAT = "mnemo-files/1"
TABLES = ("memories", "events", "links")


@dataclass
class ArchiveReport:
    """What one archive run did (or, with dry_run, would do)."""

    run_id: str | None
    cutoff: datetime
    months: dict[str, int]  # tombstones per month of their status change
    manifest_key: str | None = None
    rows: dict[str, int] = field(default_factory=dict)  # memories, events, links written
    purged: dict[str, int] = field(default_factory=dict)  # rows deleted from the hot store (empty if kept)
    dry_run: bool = False


@dataclass
class RestoreReport:
    """What one restore put back, and whether row digests could be checked."""

    run_id: str
    rows: dict[str, int]
    digests_checked: bool
    note: str = ""


def _run_prefix(run_id: str) -> str:
    return f"archive/{check_key(run_id)}"


def _fetch_checked(objects: ObjectStore, key: str, sha256: str, dest: Path, rows: int | None = None) -> Path:
    """Download `key` to `dest`, insisting on `sha256` and (for Parquet) on the row count."""
    info = objects.get(key, dest)
    actual = file_sha256(dest)
    if actual != sha256 or info.sha256 != sha256:
        raise ChecksumMismatch(f"{objects.url}/{key}: sha256 {actual}, manifest says {sha256}")
    if rows is not None and pq.read_metadata(dest).num_rows != rows:
        raise ChecksumMismatch(f"{objects.url}/{key}: {pq.read_metadata(dest).num_rows} rows, manifest says {rows}")
    return dest


def archiving(store: Store) -> Archiving:
    """Return the store's cold archive, the part its engine holds as `store.archive`; raise StoreError if none."""
    cold = getattr(store, "archive", None)
    if not isinstance(cold, Archiving):
        raise StoreError(f"the store at {store.path} ({type(store).__name__}) has no cold archive: its engine holds "
                         "no mnemo.store.Archiving as `archive` (DuckDBStore and PgStore do)")
    return cold


def archive(store: Store, objects: ObjectStore, *, retention: timedelta, now: datetime, dry_run: bool = False,
            keep_hot: bool = False) -> ArchiveReport:
    """Archive tombstones whose status changed more than `retention` before `now`; return the report.

    With `dry_run`, only counts. With `keep_hot`, the archive is written and verified but
    nothing is deleted (a rehearsal, or a copy kept off-site).
    """
    if retention < timedelta(0):
        raise InvalidInput(f"retention must not be negative, got {retention}")
    cold = archiving(store)
    cutoff = now - retention
    months = cold.candidates(cutoff)
    if dry_run or not months:
        return ArchiveReport(None, cutoff, months, dry_run=dry_run)
    run_id = f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    prefix = _run_prefix(run_id)
    tmp = Path(tempfile.mkdtemp(prefix="mnemo-archive-"))
    try:
        parts = cold.export(cutoff, tmp / "out")
        partitions = []
        for n, part in enumerate(parts):
            entry: dict[str, Any] = {"month": part["month"], "files": {}}
            for table, f in part["files"].items():
                key = f"{prefix}/month={part['month']}/{table}.parquet"
                sha = file_sha256(f["path"])
                objects.put(key, f["path"])
                # Read the copy back in full: only bytes that came back intact count as archived.
                _fetch_checked(objects, key, sha, tmp / f"check-{n}-{table}.parquet", f["rows"]).unlink()
                entry["files"][table] = {"key": key, "rows": f["rows"], "sha256": sha, "digest": f["digest"],
                                         "bytes": Path(f["path"]).stat().st_size}
            partitions.append(entry)
        rows = {t: sum(p["files"][t]["rows"] for p in partitions) for t in TABLES}
        manifest = {
            "format": FORMAT, "run_id": run_id, "created_at": now.isoformat(), "cutoff": cutoff.isoformat(),
            "retention_days": retention.total_seconds() / 86400, "embedder": store.embedder, "dim": store.dim,
            "schema_version": store.schema_version, "duckdb": ENGINE_VERSION, "engine": cold.engine,
            "store": store.path, "digest": cold.digest_method, "rows": rows, "partitions": partitions,
        }
        body = json.dumps(manifest, indent=2, sort_keys=True).encode()
        (tmp / "manifest.json").write_bytes(body)
        manifest_key = f"{prefix}/manifest.json"
        objects.put(manifest_key, tmp / "manifest.json")
        objects.verify(manifest_key, file_sha256(tmp / "manifest.json"))
        purged: dict[str, int] = {}
        if not keep_hot:
            purged = cold.purge([p["files"]["memories"]["path"] for p in parts], rows)
        return ArchiveReport(run_id, cutoff, months, manifest_key, rows, purged)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def manifest(objects: ObjectStore, run_id: str) -> dict[str, Any]:
    """Return the verified manifest of an archive run."""
    key = f"{_run_prefix(run_id)}/manifest.json"
    if objects.head(key) is None:
        raise NotFound(f"no archive run {run_id!r} in {objects.url} (see `mnemo archive list`)")
    data = json.loads(objects.get_bytes(key))
    if data.get("format") != FORMAT:
        raise StoreError(f"{objects.url}/{key} is not a {FORMAT} manifest (format {data.get('format')!r})")
    return data


def list_runs(objects: ObjectStore) -> list[dict[str, Any]]:
    """Return a summary (run id, cutoff, rows, embedder) of every archive run in `objects`, oldest first."""
    runs = []
    for key in objects.list("archive/"):
        if key.endswith("/manifest.json") and key.count("/") == 2:
            m = manifest(objects, key.split("/")[1])
            runs.append({k: m[k] for k in ("run_id", "created_at", "cutoff", "retention_days", "rows", "embedder")})
    return runs


def restore(store: Store, objects: ObjectStore, run_id: str) -> RestoreReport:
    """Re-insert an archive run's memories (with vectors), events and links; refuse ids already present."""
    cold = archiving(store)
    m = manifest(objects, run_id)
    if (m["embedder"], int(m["dim"])) != (store.embedder, store.dim):
        raise EmbedderMismatch(f"archive {run_id} was written with embedder {m['embedder']!r} ({m['dim']} dims); "
                               f"this store uses {store.embedder!r} ({store.dim}); restore into a store of that embedder")
    if int(m["schema_version"]) > store.schema_version:
        raise StoreError(f"archive {run_id} has schema version {m['schema_version']}, newer than this store's "
                         f"{store.schema_version}; upgrade mnemo")
    # Row digests hash an engine's own row encoding: comparable only under the same engine and schema.
    # Manifests from before the PostgreSQL archive name only their DuckDB version.
    engine = m.get("engine") or f"duckdb {m['duckdb']}"
    same = engine == cold.engine and int(m["schema_version"]) == store.schema_version
    tmp = Path(tempfile.mkdtemp(prefix="mnemo-restore-"))
    try:
        files: dict[str, list[str]] = {t: [] for t in TABLES}
        expected: dict[str, tuple[int, str]] = {t: (0, "0" * 16) for t in TABLES}
        for n, part in enumerate(m["partitions"]):
            for table in TABLES:
                f = part["files"][table]
                files[table].append(str(_fetch_checked(objects, f["key"], f["sha256"],
                                                       tmp / f"{n}-{table}.parquet", f["rows"])))
                rows, digest = expected[table]
                expected[table] = (rows + f["rows"], f"{int(digest, 16) ^ int(f['digest'], 16):016x}")
        counts = cold.restore(files, expected if same else None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    note = "" if same else (f"row digests not checked: archived under {engine} / schema {m['schema_version']}, "
                            f"restored into {cold.engine}; file sha256 and row counts were checked")
    return RestoreReport(run_id, counts, same, note)


def push_dir(objects: ObjectStore, local: str | Path, prefix: str, *, dry_run: bool = False) -> dict[str, Any]:
    """Upload every file under `local` to `prefix/`, each verified, then `prefix/manifest.json`; return it.

    Files already in place with the same sha256 are not sent again, so a push can be re-run
    after an interruption. With `dry_run`, returns the manifest and uploads nothing.
    """
    root = Path(local)
    if not root.is_dir():
        raise NotFound(f"{root} is not a directory")
    prefix = check_key(prefix.strip("/"))
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        files.append({"path": rel, "key": f"{prefix}/{rel}", "sha256": file_sha256(path), "bytes": path.stat().st_size})
    listing = {"format": RUNS_FORMAT, "source": root.name, "files": files,
               "bytes": sum(f["bytes"] for f in files)}
    if dry_run:
        return listing
    for f in files:
        have = objects.head(f["key"])
        if have is None or have.sha256 != f["sha256"]:
            objects.put(f["key"], root / f["path"])
        objects.verify(f["key"], f["sha256"])
    objects.put_bytes(f"{prefix}/manifest.json", json.dumps(listing, indent=2, sort_keys=True).encode())
    return listing


def pull_dir(objects: ObjectStore, prefix: str, dest: str | Path) -> dict[str, Any]:
    """Download what `push_dir` put under `prefix` into `dest`, checking every file; return the manifest."""
    prefix = check_key(prefix.strip("/"))
    listing = json.loads(objects.get_bytes(f"{prefix}/manifest.json"))
    if listing.get("format") != RUNS_FORMAT:
        raise StoreError(f"{objects.url}/{prefix}/manifest.json is not a {RUNS_FORMAT} manifest")
    for f in listing["files"]:
        _fetch_checked(objects, f["key"], f["sha256"], Path(dest) / check_key(f["path"]))
    return listing
