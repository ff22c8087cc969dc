"""Loading a DuckDB store's vectors into its in-process index when it opens or reloads (`IndexLoad`).

Ids, users and active flags are read first (the saved indexes are checked against the ids), then
the vectors, batch by batch, each written straight to its row of the index: the matrix is held
once, never copied, and DuckDB keeps at most SCAN_MEMORY_LIMIT of the blocks it reads for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ..errors import StoreError
from . import ann

_LOAD_BATCH = 50_000  # rows per Arrow batch when the vectors are streamed into the index at open
# While the vectors are streamed into the index at open, DuckDB may keep no more than this of the blocks
# it reads: each is read once, and at 1M rows keeping them held ~1 GB beside the matrix they were copied to.
SCAN_MEMORY_LIMIT = "128MB"


class IndexLoad:
    """One load of a store's table into its index: the connection it reads and what it reads for.

    `memory_limit` is the store's own DuckDB memory limit (None for ":memory:"), lowered while the
    vectors stream in and set back after.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, dim: int, memory_limit: str | None):
        self.con, self.path, self.dim, self.memory_limit = con, path, dim, memory_limit

    def stream(self, index: Any, rowids: np.ndarray, ids: list[str], users: list[str], active: np.ndarray,
               saved: dict[str, Any] | None) -> None:
        """Load `index` from the table, every vector read once and written straight to its row."""
        grouping: dict[str, Any] = {}
        if saved is not None and saved.get("ivf_lists") is not None and isinstance(index, ann.IvfIndex):
            # Rows the saved lists do not place (written since, or in the tail then) are assigned first.
            lists = np.full(len(ids), -1, dtype=np.int32)
            lists[:len(saved["ivf_lists"])] = saved["ivf_lists"][:len(ids)]
            todo = np.flatnonzero(lists < 0)
            if len(todo):
                lists[todo] = ann.IvfIndex.assign(self._vectors_of(rowids[todo]), saved["ivf_cent"])
            grouping = {"cent": saved["ivf_cent"], "lists": lists, "trained_at": int(saved["ivf_trained_at"][0])}
        try:
            if self.memory_limit:
                self.con.execute(f"SET memory_limit = '{SCAN_MEMORY_LIMIT}'")
            index.load(ids, users, active, self._vector_batches(rowids), **grouping)
        finally:
            if self.memory_limit:
                self.con.execute(f"SET memory_limit = '{self.memory_limit}'")

    def rows(self, n: int) -> tuple[np.ndarray, list[str], list[str], np.ndarray]:
        """Return (rowid, id, user, active) of every row, in table order."""
        rowids, active = np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)
        ids: list[str] = []
        users: list[str] = []
        for batch in self.con.execute("SELECT rowid, id, user_id, status = 'active' FROM memories"
                                      ).to_arrow_reader(_LOAD_BATCH):
            at, m = len(ids), batch.num_rows
            if at + m > n:
                raise StoreError(f"{self.path} changed while its vectors were being loaded; open it again")
            rowids[at:at + m] = batch.column(0).to_numpy()
            active[at:at + m] = batch.column(3).to_numpy(zero_copy_only=False)
            ids.extend(batch.column(1).to_pylist())
            users.extend(batch.column(2).to_pylist())
        return rowids[:len(ids)], ids, users, active[:len(ids)]

    def _vector_batches(self, rowids: np.ndarray) -> Iterable[tuple[int, np.ndarray]]:
        """Yield (first row, vectors) of every row in table order, checked against `rowids` read before."""
        at = 0
        for batch in self.con.execute("SELECT rowid, embedding FROM memories").to_arrow_reader(_LOAD_BATCH):
            m = batch.num_rows
            if not np.array_equal(batch.column(0).to_numpy(), rowids[at:at + m]):
                raise StoreError(f"{self.path} changed while its vectors were being loaded; open it again")
            yield at, np.asarray(batch.column(1).values, dtype=np.float32).reshape(m, self.dim)
            at += m
        if at != len(rowids):
            raise StoreError(f"{self.path} changed while its vectors were being loaded; open it again")

    def _vectors_of(self, rowids: np.ndarray) -> np.ndarray:
        """Return the vectors of rows `rowids`, in that order."""
        todo = pa.table({"r": pa.array(rowids, pa.int64())})  # noqa: F841 - read by DuckDB
        got = self.con.execute("SELECT rowid, embedding FROM memories WHERE rowid IN (SELECT r FROM todo)"
                               ).to_arrow_table()
        at = {int(r): k for k, r in enumerate(got.column(0).to_numpy())}
        vecs = np.asarray(got.column(1).combine_chunks().flatten(), dtype=np.float32).reshape(-1, self.dim)
        return vecs[[at[int(r)] for r in rowids]]

