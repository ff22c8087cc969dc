"""The DuckDB store's cold archive (`mnemo.archive`): tombstones out to Parquet by month, and back, by digest.

Archiving is the one place mnemo hard-deletes rows, and only rows it wrote out and
verified first. `ParquetArchive` is the `DuckDBStore`'s `archive` part (`store.Archiving`): it
runs on its store's connection and transactions, applies the store's waiting touches first
(archived rows carry their access counts as the table holds them) and has the store rebuild
its in-process index after a purge or restore.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from ..errors import InvalidInput, StoreError
from .rows import naive


class ParquetArchive:
    """candidates, export, purge, restore and table_digests over DuckDB and Parquet, for one `DuckDBStore`."""

    engine = f"duckdb {duckdb.__version__}"  # row digests hash DuckDB's row encoding: comparable per version
    digest_method = "xor of DuckDB hash(row), per table"

    def __init__(self, store: Any):
        # The store this archive is part of (made on access: `DuckDBStore.archive`, so no cycle keeps it alive).
        self.store = store
        self.con = store.con

    # Archiving is the one place mnemo hard-deletes rows, and only rows it wrote out and verified first.
    _ARCHIVED = {
        "memories": "SELECT m.* FROM memories m JOIN archive_ids a USING (id) WHERE a.month = ?",
        "events": "SELECT e.* FROM events e JOIN archive_ids a ON e.memory_id = a.id WHERE a.month = ?",
        "links": "SELECT * EXCLUDE (month) FROM archive_links WHERE month = ?",
    }

    def candidates(self, cutoff: datetime) -> dict[str, int]:
        """Return {"YYYY-MM": count} of tombstones whose status changed before `cutoff`."""
        return dict(self.con.execute(
            "SELECT strftime(status_at, '%Y-%m') AS month, count(*) FROM memories WHERE status <> 'active' "
            "AND status_at < ? GROUP BY month ORDER BY month", [naive(cutoff)]).fetchall())

    def _digest(self, select: str, params: list[Any]) -> tuple[int, str]:
        # xor of row hashes: order-free, so partitions combine; DuckDB's hash is stable within its version.
        rows, digest = self.con.execute(f"SELECT count(*), bit_xor(hash(t)) FROM ({select}) t", params).fetchone()
        return int(rows), f"{int(digest or 0):016x}"

    def export(self, cutoff: datetime, out_dir: str | Path) -> list[dict[str, Any]]:
        """Write tombstones older than `cutoff`, with their events and links, as Parquet partitions by month.

        Returns [{"month", "files": {table: {"path", "rows", "digest"}}}]. A link goes to the earlier
        month of its archived ends, so none is written twice. Nothing is deleted here.
        """
        self.store.flush_touches()
        out = Path(out_dir)
        parts: list[dict[str, Any]] = []
        with self.store.transaction():
            self.con.execute("CREATE OR REPLACE TEMP TABLE archive_ids AS SELECT id, strftime(status_at, '%Y-%m') "
                             "AS month FROM memories WHERE status <> 'active' AND status_at < ?", [naive(cutoff)])
            self.con.execute("CREATE OR REPLACE TEMP TABLE archive_links AS SELECT l.*, least(s.month, d.month) "
                             "AS month FROM links l LEFT JOIN archive_ids s ON l.src = s.id LEFT JOIN archive_ids d "
                             "ON l.dst = d.id WHERE s.id IS NOT NULL OR d.id IS NOT NULL")
            months = [r[0] for r in self.con.execute("SELECT DISTINCT month FROM archive_ids ORDER BY 1").fetchall()]
            for month in months:
                folder = out / f"month={month}"
                folder.mkdir(parents=True, exist_ok=True)
                files = {}
                for table, select in self._ARCHIVED.items():
                    path = folder / f"{table}.parquet"
                    literal = str(path).replace("'", "''")
                    self.con.execute(f"COPY ({select}) TO '{literal}' (FORMAT parquet, COMPRESSION zstd)", [month])
                    rows, digest = self._digest(select, [month])
                    files[table] = {"path": str(path), "rows": rows, "digest": digest}
                parts.append({"month": month, "files": files})
            self.con.execute("DROP TABLE archive_ids")
            self.con.execute("DROP TABLE archive_links")
        return parts

    def purge(self, memories_files: list[str], expected: dict[str, int]) -> dict[str, int]:
        """Hard-delete the archived rows named by verified Parquet files; roll back unless counts equal `expected`."""
        self.store.flush_touches()
        self.store._writable()
        with self.store.transaction():
            self.con.execute("CREATE OR REPLACE TEMP TABLE purge_ids AS SELECT id FROM read_parquet(?)",
                             [list(memories_files)])
            deleted = {
                "links": self.con.execute("DELETE FROM links WHERE src IN (SELECT id FROM purge_ids) "
                                          "OR dst IN (SELECT id FROM purge_ids)").fetchone()[0],
                "events": self.con.execute("DELETE FROM events WHERE memory_id IN (SELECT id FROM purge_ids)"
                                           ).fetchone()[0],
                # Never an active memory: one restored since the export makes the counts differ and undoes it all.
                "memories": self.con.execute("DELETE FROM memories WHERE status <> 'active' "
                                             "AND id IN (SELECT id FROM purge_ids)").fetchone()[0],
            }
            self.con.execute("DROP TABLE purge_ids")
            if deleted != expected:
                raise StoreError(f"archive purge would delete {deleted}, not the archived {expected}: the store "
                                 "changed since the export; nothing was deleted, run the archive again")
        self.store._reload_index()
        return deleted

    def restore(self, files: dict[str, list[str]], expected: dict[str, tuple[int, str]] | None) -> dict[str, int]:
        """Insert archived memories (with vectors), events and links from Parquet, refusing ids already present.

        `files` maps each table to its Parquet files; `expected` maps it to (rows, digest) as
        exported, checked inside the transaction (None skips the digest, e.g. across DuckDB versions).
        """
        self.store.flush_touches()
        self.store._writable()
        counts: dict[str, int] = {}
        with self.store.transaction():
            clash = [r[0] for r in self.con.execute(
                "SELECT id FROM read_parquet(?) WHERE id IN (SELECT id FROM memories) ORDER BY id LIMIT 6",
                [list(files["memories"])]).fetchall()]
            if clash:
                raise InvalidInput(f"the archive holds memories already in the store ({', '.join(clash[:5])}"
                                   f"{', ...' if len(clash) > 5 else ''}); nothing was restored")
            for table in self._ARCHIVED:
                self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM read_parquet(?)", [list(files[table])])
                # Memories are hashed as stored: Parquet keeps FLOAT[dim] as a plain list, which hashes differently.
                select = ("SELECT m.* FROM memories m WHERE m.id IN (SELECT id FROM read_parquet(?))"
                          if table == "memories" else "SELECT * FROM read_parquet(?)")
                rows, digest = self._digest(select, [list(files[table])])
                if expected is not None and (rows, digest) != tuple(expected[table]):
                    raise StoreError(f"archived {table} read back as {rows} rows / digest {digest}, manifest says "
                                     f"{tuple(expected[table])}; nothing was restored")
                counts[table] = rows
        self.store._reload_index()
        return counts

    def table_digests(self) -> dict[str, tuple[int, str]]:
        """Return (rows, digest) of memories, events and links: equal digests mean equal contents."""
        self.store.flush_touches()
        return {t: self._digest(f"SELECT * FROM {t}", []) for t in self._ARCHIVED}
