"""The PostgreSQL store's cold archive (`mnemo.archive`): tombstones out to Parquet by month, and back, by digest.

The same contract and the same files as DuckDB's (`parquet.ParquetArchive`): one folder a
month with memories (vectors included), events and links, the same column names, so an
archive from either engine restores into the other (without a digest check). Parquet is
written and read with pyarrow; rows travel by server-side cursor out and binary COPY in,
a batch at a time.

The guarantees are DuckDB's: the export reads one REPEATABLE READ snapshot, so files and
digests agree; the purge deletes, in one transaction, only rows named by the verified
files and only tombstones, and rolls back unless it deleted exactly what was archived (a
replica that wrote to an archived memory meanwhile makes the counts differ); the restore
refuses ids already present and checks counts and digests before it commits. A digest
is the xor of the first 64 bits of md5(row as text) over the archived columns, so it is
order-free (months combine) and equal for equal rows on this server's text formats.
`PgArchive` is the `PgStore`'s `archive` part (`store.Archiving`) and runs on its connection,
lock and transactions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidInput, StoreError
from .rows import EVENT_COLS, LINK_COLS, PG_MEMORY_TYPES, SQL_COLS, TIMES, naive

BATCH = 5000
# Each archived table's columns (the Parquet columns, as DuckDB writes them) and their PostgreSQL types.
COLUMNS = {
    "memories": (SQL_COLS + ["embedding"], PG_MEMORY_TYPES),
    "events": (EVENT_COLS.split(", "), ["text", "text", "timestamp"] + ["text"] * 6),
    "links": (LINK_COLS.split(", "), ["text", "text", "text", "timestamp"]),
}
ARROW = {"text": pa.string(), "timestamp": pa.timestamp("us"), "text[]": pa.list_(pa.string()),
         "float8": pa.float64(), "bool": pa.bool_(), "int4": pa.int32(), "vector": pa.list_(pa.float32())}
# The archived rows of one month (%s), each table's columns qualified by its alias.
ARCHIVED = {
    "memories": "FROM memories m JOIN archive_ids a ON m.id = a.id WHERE a.month = %s ORDER BY m.id",
    "events": "FROM events m JOIN archive_ids a ON m.memory_id = a.id WHERE a.month = %s ORDER BY m.ts, m.seq",
    "links": "FROM archive_links m WHERE m.month = %s ORDER BY m.src, m.dst, m.kind",
}


def _cols(table: str, alias: str = "m") -> str:
    return ", ".join(f"{alias}.{c}" for c in COLUMNS[table][0])


def digest_sql(table: str, source: str) -> str:
    """Return SQL for (rows, digest) of `table`'s archived columns over `source` (FROM ... with alias m)."""
    return (f"SELECT count(*), coalesce(bit_xor(('x' || left(md5(ROW({_cols(table)})::text), 16))::bit(64)::bigint),"
            f" 0) {source.split(' ORDER BY ')[0]}")


def _hex(row: tuple[Any, Any]) -> tuple[int, str]:
    return int(row[0]), f"{int(row[1]) & (2**64 - 1):016x}"


def _schema(table: str) -> pa.Schema:
    cols, types = COLUMNS[table]
    return pa.schema([(c, ARROW[t]) for c, t in zip(cols, types, strict=True)])


def _arrow_value(col: str, value: Any) -> Any:
    if col == "embedding" and value is not None:
        return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)
    return value


def _pg_value(col: str, value: Any) -> Any:
    # Parquet from another writer may hold zone-aware times or a plain float list for the vector.
    if col in TIMES or col == "ts":
        return naive(value)
    if col == "embedding" and value is not None:
        return np.asarray(value, dtype=np.float32)
    return value


class PgArchive:
    """candidates, export, purge, restore and table_digests over PostgreSQL, for one `PgStore`."""

    digest_method = "xor of the first 64 bits of md5(row::text), per table"

    def __init__(self, store: Any):
        # The store this archive is part of (made on access: `PgStore.archive`, so no cycle keeps it alive).
        self.store = store

    @property
    def engine(self) -> str:
        """What the digests depend on: this engine and its major version (manifests record it)."""
        return f"postgres {self.store.con.info.server_version // 10000}"

    @contextmanager
    def _transaction(self, *, snapshot: bool = False) -> Iterator[Any]:
        with self.store.transaction():
            con = self.store.con  # the transaction's own connection: never replaced while one is open
            if snapshot:
                # Files and digests must come from one state of the tables, whatever other replicas write.
                con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield con

    def candidates(self, cutoff: datetime) -> dict[str, int]:
        """Return {"YYYY-MM": count} of tombstones whose status changed before `cutoff`."""
        with self.store._lock:
            return dict(self.store.con.execute(
                "SELECT to_char(status_at, 'YYYY-MM') AS month, count(*) FROM memories WHERE status <> 'active' "
                "AND status_at < %s GROUP BY month ORDER BY month", [naive(cutoff)]).fetchall())

    def export(self, cutoff: datetime, out_dir: str | Path) -> list[dict[str, Any]]:
        """Write tombstones older than `cutoff`, with their events and links, as Parquet partitions by month.

        Returns [{"month", "files": {table: {"path", "rows", "digest"}}}]. A link goes to the earlier
        month of its archived ends, so none is written twice. Nothing is deleted here.
        """
        out = Path(out_dir)
        parts: list[dict[str, Any]] = []
        with self._transaction(snapshot=True) as con:
            con.execute('CREATE TEMP TABLE archive_ids ON COMMIT DROP AS SELECT id, to_char(status_at, \'YYYY-MM\') '
                        "AS month FROM memories WHERE status <> 'active' AND status_at < %s", [naive(cutoff)])
            con.execute("CREATE TEMP TABLE archive_links ON COMMIT DROP AS SELECT l.src, l.dst, l.kind, l.ts, "
                        "least(s.month, d.month) AS month FROM links l LEFT JOIN archive_ids s ON l.src = s.id "
                        "LEFT JOIN archive_ids d ON l.dst = d.id WHERE s.id IS NOT NULL OR d.id IS NOT NULL")
            months = [r[0] for r in con.execute("SELECT DISTINCT month FROM archive_ids ORDER BY 1").fetchall()]
            for month in months:
                folder = out / f"month={month}"
                folder.mkdir(parents=True, exist_ok=True)
                files = {}
                for table, source in ARCHIVED.items():
                    path = folder / f"{table}.parquet"
                    written = self._write_parquet(con, table, f"SELECT {_cols(table)} {source}", [month], path)
                    rows, digest = _hex(con.execute(digest_sql(table, source), [month]).fetchone())
                    if rows != written:
                        raise StoreError(f"archive export wrote {written} {table} rows for {month}, counted {rows}")
                    files[table] = {"path": str(path), "rows": rows, "digest": digest}
                parts.append({"month": month, "files": files})
        return parts

    @staticmethod
    def _write_parquet(con: Any, table: str, select: str, params: list[Any], path: Path) -> int:
        """Stream `select` into a Parquet file, a batch at a time; return the rows written."""
        schema, cols = _schema(table), COLUMNS[table][0]
        written = 0
        with pq.ParquetWriter(path, schema, compression="zstd") as writer, \
                con.cursor(name=f"mnemo_archive_{table}") as cur:
            cur.execute(select, params)
            while rows := cur.fetchmany(BATCH):
                data = {c: [_arrow_value(c, r[k]) for r in rows] for k, c in enumerate(cols)}
                writer.write_table(pa.table(data, schema=schema))
                written += len(rows)
            if not written:
                writer.write_table(schema.empty_table())
        return written

    def purge(self, memories_files: list[str], expected: dict[str, int]) -> dict[str, int]:
        """Hard-delete the archived rows named by verified Parquet files; roll back unless counts equal `expected`."""
        self.store._writable()
        with self._transaction() as con:
            con.execute('CREATE TEMP TABLE purge_ids (id text COLLATE "C" PRIMARY KEY) ON COMMIT DROP')
            with con.cursor() as cur, cur.copy("COPY purge_ids (id) FROM STDIN") as copy:
                for f in memories_files:
                    for batch in pq.ParquetFile(f).iter_batches(BATCH, columns=["id"]):
                        for mid in batch.column(0).to_pylist():
                            copy.write_row((mid,))
            deleted = {
                "links": con.execute("DELETE FROM links WHERE src IN (SELECT id FROM purge_ids) "
                                     "OR dst IN (SELECT id FROM purge_ids)").rowcount,
                "events": con.execute("DELETE FROM events WHERE memory_id IN (SELECT id FROM purge_ids)").rowcount,
                # Never an active memory: one restored since the export makes the counts differ and undoes it all.
                "memories": con.execute("DELETE FROM memories WHERE status <> 'active' "
                                        "AND id IN (SELECT id FROM purge_ids)").rowcount,
            }
            if deleted != expected:
                raise StoreError(f"archive purge would delete {deleted}, not the archived {expected}: the store "
                                 "changed since the export; nothing was deleted, run the archive again")
        return deleted

    def restore(self, files: dict[str, list[str]], expected: dict[str, tuple[int, str]] | None) -> dict[str, int]:
        """Insert archived memories (with vectors), events and links from Parquet, refusing ids already present.

        `files` maps each table to its Parquet files; `expected` maps it to (rows, digest) as
        exported, checked inside the transaction (None skips the digest, e.g. across engines).
        """
        self.store._writable()
        counts: dict[str, int] = {}
        with self._transaction() as con:
            for table, (cols, types) in COLUMNS.items():
                staged = f"restore_{table}"
                con.execute(f"CREATE TEMP TABLE {staged} ON COMMIT DROP AS SELECT {', '.join(cols)} FROM {table} "
                            "WITH NO DATA")
                with con.cursor() as cur, cur.copy(f"COPY {staged} ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)"
                                                   ) as copy:
                    copy.set_types(types)
                    for f in files[table]:
                        for batch in pq.ParquetFile(f).iter_batches(BATCH, columns=cols):
                            values = [batch.column(c).to_pylist() for c in cols]
                            for row in zip(*values, strict=True):
                                copy.write_row([_pg_value(c, v) for c, v in zip(cols, row, strict=True)])
                if table == "memories":
                    clash = [r[0] for r in con.execute(
                        "SELECT id FROM restore_memories WHERE id IN (SELECT id FROM memories) ORDER BY id LIMIT 6"
                    ).fetchall()]
                    if clash:
                        raise InvalidInput(f"the archive holds memories already in the store ({', '.join(clash[:5])}"
                                           f"{', ...' if len(clash) > 5 else ''}); nothing was restored")
                rows, digest = _hex(con.execute(digest_sql(table, f"FROM {staged} m")).fetchone())
                if expected is not None and (rows, digest) != tuple(expected[table]):
                    raise StoreError(f"archived {table} read back as {rows} rows / digest {digest}, manifest says "
                                     f"{tuple(expected[table])}; nothing was restored")
                order = " ORDER BY ts" if table == "events" else ""
                con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM {staged}{order}")
                counts[table] = rows
        return counts

    def table_digests(self) -> dict[str, tuple[int, str]]:
        """Return (rows, digest) of memories, events and links: equal digests mean equal contents."""
        with self.store._lock:
            return {t: _hex(self.store.con.execute(digest_sql(t, f"FROM {t} m")).fetchone()) for t in COLUMNS}
