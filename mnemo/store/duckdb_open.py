"""Opening a DuckDB file: its pinned extensions, what another process's lock on the file means, and what embedder
wrote it (read before the store opens it)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from ..errors import ExtensionUnavailable, StoreError, StoreLocked

DUCKDB_VERSION = "1.5.5"  # the pinned release the extension packages must match


def extension_path(name: str) -> str:
    """Return the path of a pinned extension package's binary, or raise with how to fix it."""
    module = f"duckdb_extension_{name}"
    try:
        pkg = __import__(module)
    except ImportError as exc:
        raise ExtensionUnavailable(
            f"the DuckDB '{name}' extension is not installed; run: pip install 'duckdb-extension-{name}=={DUCKDB_VERSION}'"
        ) from exc
    path = Path(pkg.__file__).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.exists():
        raise ExtensionUnavailable(
            f"duckdb-extension-{name} does not match duckdb {duckdb.__version__} (no {path}); "
            f"install matching versions: pip install 'duckdb=={DUCKDB_VERSION}' 'duckdb-extension-{name}=={DUCKDB_VERSION}'"
        )
    return str(path)


def connect(path: str, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB connection, turning a lock held by another process into StoreLocked that says which."""
    try:
        return duckdb.connect(path, read_only=read_only)
    except (duckdb.IOException, duckdb.ConnectionException) as exc:
        if "lock" not in str(exc).lower():
            raise StoreError(f"cannot open {path}: {exc}") from exc
        raise StoreLocked(_lock_message(path, str(exc), read_only=read_only)) from exc


def _lock_message(path: str, error: str, *, read_only: bool) -> str:
    """Return why another process keeps us out of `path` and what to do, from DuckDB's lock error.

    A writer is kept out by any other process, a reader only by a writer: when a read-write open
    fails, a read-only one tells the two apart (it succeeds only if the holder merely reads).
    """
    found = re.search(r"\(PID (\d+)\)", error)
    who = f"another process (pid {found.group(1)})" if found else "another process"
    holder_reads = False
    if not read_only:
        try:
            duckdb.connect(path, read_only=True).close()
            holder_reads = True
        except duckdb.Error:
            holder_reads = False
    if holder_reads:
        return (f"{path} is open read-only in {who}; DuckDB lets no process write a file that another process "
                "has open, even only for reading. Close that reader, or open this store with read_only=True.")
    return (f"{path} is open for writing in {who}; DuckDB allows one writer per file and no readers beside it. "
            "Close the other process, or serve the store to many clients with `mnemo serve http`.")


def recorded_embedder(path: str | Path) -> str | None:
    """Return the embedder name an existing store file was written with (None for a new store)."""
    if str(path) == ":memory:" or not Path(path).exists():
        return None
    # Read-only: a read-write connection that replays a killed writer's log and closes having read only
    # store_meta checkpoints the id index without that log's rows (DuckDB 1.5.5): get() then misses them.
    # A file this process already has open read-write is read through that configuration (nothing to replay).
    try:
        store_con = duckdb.connect(str(path), read_only=True)
    except duckdb.ConnectionException as exc:
        if "different configuration" not in str(exc):
            raise StoreError(f"cannot open {path}: {exc}") from exc
        store_con = connect(str(path), read_only=False)
    except duckdb.IOException:
        store_con = connect(str(path), read_only=False)  # raises StoreLocked when another process writes
    try:
        row = store_con.execute(
            "SELECT value FROM store_meta WHERE key = 'embedder'"
        ).fetchone() if store_con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'store_meta'"
        ).fetchone()[0] else None
    finally:
        store_con.close()
    return row[0] if row else None
