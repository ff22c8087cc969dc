"""Opening a DuckDB file: its pinned extensions, and what another process's lock on the file means."""

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
