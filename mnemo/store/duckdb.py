"""The DuckDB store: what DuckDB does differently from the shared SQL of `store.sql`.

One file per store (or ":memory:"). Memories keep their rows forever: a status
change is an UPDATE plus an event row, never a DELETE. Vectors live in a
fixed-size FLOAT[dim] column and are mirrored into an in-process matrix
(`store.index.VectorIndex`, or an approximate index by size, `store.ann`). Lexical
search is BM25 with the analysis of the `fts` extension (loaded from its pinned
PyPI package with no network): DuckDB tokenises and stems here, and the postings
are served in process by `lexical.LexicalIndex`, which follows every write; rows
written since the last lexical search are analysed in one statement at the next
(the store's `lexical` part, `duckdb_lexical.DuckDBLexical`, counts those statements in `syncs`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ..config import DecayConfig
from ..errors import StoreError
from ..model import Event, Link, MemoryRecord, Turn, TurnOutcome
from . import ann, persist
from .blas import one_thread
from .cache import RecordCache
from .counts import counts_of
from .duckdb_lexical import DuckDBLexical
from .duckdb_load import IndexLoad
from .duckdb_open import connect, extension_path, recorded_embedder
from .duckdb_schema import DUCKDB, in_list, migrations
from .held import HeldMemories
from .index import VectorIndex
from .parquet import ParquetArchive
from .rows import (
    EVENTS,
    LINKS,
    MEM_COLS,
    MEMORIES,
    OUTCOMES,
    SQL_COLS,
    TIMES,
    TURNS,
    check_version,
    naive,
)
from .sql import REVIEW_ORDER, SQLStore, decay_select, dump_queries
from .touches import SEQ_KEY, Pending

ENGINE_VERSION = duckdb.__version__  # the DuckDB running here (archive manifests record it: digests are per version)
# DuckDB caches table blocks up to its memory limit, 80% of RAM by default: at 1M memories that held
# 2.2 GB of vector blocks already copied into the in-process index. A file store caps it (blocks are
# read again from the file when needed; large operators spill to <file>.tmp); ":memory:" stores cannot.
MEMORY_LIMIT_ENV = "MNEMO_DUCKDB_MEMORY_LIMIT"
MEMORY_LIMIT = "1GB"


class DuckDBStore(SQLStore):
    """A DuckDB memory store with an in-process vector index kept in sync.

    Besides the shared SQL it inherits, it is made of parts, each with its own state: `index` (the
    vectors: store.index, store.ann), `lexical` (BM25: store.duckdb_lexical), `cache` (records read:
    store.cache), `held` (rows held to a block's end: store.held), `touches` (reinforcement waiting:
    store.touches) and `archive` (made on access: store.parquet). A part that runs SQL is handed the
    connection to run it on, so a reader's view (`reader`) runs it on its own cursor.
    """

    dialect = DUCKDB
    keeps_records = True  # a second read of the same ids costs no query (store.cache)

    @property
    def archive(self) -> ParquetArchive:
        """The cold archive (`store.Archiving`): made on each access, it holds nothing but this store."""
        return ParquetArchive(self)

    def ping(self) -> None:
        """Do nothing: an embedded database has no connection to lose (and the writer's is not this thread's)."""

    @staticmethod
    def exclusive(key: str) -> AbstractContextManager[None]:
        """Return a no-op: one process writes a DuckDB file, so no other process can interleave a write."""
        return nullcontext()

    def __init__(self, path: str | Path, *, embedder: str, dim: int, read_only: bool = False, index: str = "auto"):
        self.path = str(path)
        # "auto" picks exact or an approximate index by size (store.ann.choose); any other kind is kept.
        self.index_kind = ann.check_kind(index)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._cursor_lock = threading.Lock()
        self.lexical = DuckDBLexical(self._lock)
        self.cache = RecordCache()
        self.held = HeldMemories(self._lock)
        self.con = connect(self.path, read_only=read_only)
        self._memory_limit: str | None = None
        if self.path != ":memory:":
            limit = os.environ.get(MEMORY_LIMIT_ENV, MEMORY_LIMIT)
            self._memory_limit = limit.replace(chr(39), "")
            try:
                self.con.execute(f"SET memory_limit = '{self._memory_limit}'")
            except duckdb.Error as exc:
                raise StoreError(f"{MEMORY_LIMIT_ENV}={limit!r} is not a DuckDB memory limit (e.g. 1GB, 512MB): "
                                 f"{exc}") from exc
        self.con.execute(f"LOAD '{extension_path('fts')}'")
        self.embedder, self.dim = self._check_embedder(embedder, dim)
        if not read_only:
            self._migrate()
        self._counts_open()
        self.index = VectorIndex(self.dim)
        self._load_index()
        # Touches journalled past the sequence number the table records (store.touches) are taken up, and
        # applied now when the store is writable.
        self.touches = Pending.opened(self.path, int(self._meta().get(SEQ_KEY, 0)))
        if len(self.touches) and not read_only:
            self.flush_touches()

    recorded_embedder = staticmethod(recorded_embedder)

    # ----------------------------------------------------------------- set-up
    def _meta(self) -> dict[str, str]:
        exists = self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'store_meta'"
        ).fetchone()[0]
        if not exists:
            return {}
        return dict(self.con.execute("SELECT key, value FROM store_meta").fetchall())

    def _check_embedder(self, embedder: str, dim: int) -> tuple[str, int]:
        return self._adopt_meta(embedder, dim, "CREATE TABLE store_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")

    def _migrate(self) -> None:
        version = int(self._meta().get("schema_version", 0))
        for target, statements in migrations(self.dim):
            if target <= version:
                continue
            with self.transaction():
                for sql in statements:
                    self.con.execute(sql)
                self.con.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", [str(target)])
        check_version(version, self.path)

    def _load_index(self, use_saved: bool = True) -> None:
        # The lexical index is taken from the saved postings (store.persist) when they still describe the
        # table, else rebuilt lazily, from the whole table, at the next lexical search.
        self.lexical.reset()
        self._saved_rows = 0
        self.cache.drop_all()
        # Pinning is set when a memory is written and never changed: the ids are kept here, so a recall's
        # pinned read probes them by index instead of scanning the table.
        self._pinned_ids = {r[0] for r in self.con.execute("SELECT id FROM memories WHERE pinned").fetchall()}
        self.cache.links_reset(r[0] for r in self.con.execute("SELECT src FROM links UNION SELECT dst FROM links").fetchall())
        n = self.con.execute("SELECT count(*) FROM memories").fetchone()[0]
        self.cache.warm_at_first_miss(n)
        # The index kind is the one the size policy asks for at the size the store has now.
        self.index = ann.empty(ann.choose(n, self.index_kind), self.dim)
        if n == 0:
            return
        # Ids, users and flags first (the saved indexes are checked against the ids), then the vectors,
        # streamed batch by batch straight into the index's own rows: the matrix is held once, never copied.
        load = IndexLoad(self.con, self.path, self.dim, self._memory_limit)
        rowids, ids, users, active = load.rows(n)
        saved = persist.saved_for(self, ids, ENGINE_VERSION) if use_saved and self.path != ":memory:" else None
        # The index as it was closed, mapped from its saved rows; else the vectors are streamed in.
        matrix = persist.saved_matrix(saved, n, self.dim) if saved is not None else None
        if matrix is None or not self.index.adopt(ids, users, active, matrix, saved):
            load.stream(self.index, rowids, ids, users, active, saved)
        if saved is not None:
            self._saved_rows = self.lexical.restore(ids, users, active, saved)
        pa.default_memory_pool().release_unused()

    def _checksum(self, ids: Sequence[str] | None = None) -> int:
        """Return the XOR of hash(id, text) over every row, or over the rows `ids` (order-free, so prefix =
        whole XOR tail)."""
        todo = pa.table({"id": pa.array(list(ids or []), pa.string())})  # noqa: F841 - read by DuckDB
        where = "" if ids is None else "WHERE id IN (SELECT id FROM todo)"
        row = self.con.execute(f"SELECT bit_xor(hash(id, text)) FROM memories {where}").fetchone()
        return int(row[0] or 0)

    def save_indexes(self) -> bool:
        """Save the BM25 postings (built now if they are not) and IVF lists beside the file; return whether saved.

        Nothing is saved for ":memory:" or a read-only store. `close()` saves when a store of at
        least persist.SAVE_FROM rows holds postings its saved file does not.
        """
        if self.path == ":memory:" or self.read_only:
            return False
        with self._lock:
            self.lexical.sync(self.con, self._flush_held)
            self._saved_rows = persist.save_store(self, ENGINE_VERSION)
            return self._saved_rows > 0

    def close(self) -> None:
        """Apply waiting touches, save the indexes when worth it (see `save_indexes`), close the connection."""
        self.flush_touches()
        self.touches.release()
        if not self.read_only and self.path != ":memory:" and persist.worth_saving(self):
            try:
                self.save_indexes()
            except OSError as exc:
                # The saved indexes are a cache: failing to write them costs the next open time, never data.
                persist.log.warning("mnemo: could not save the indexes beside %s: %s", self.path, exc)
        self.con.close()

    def reader(self) -> DuckDBStore:
        """Return this store seen through a fresh cursor of its connection, for one reading thread or stream.

        DuckDB's connection must not be used by two threads at once; a cursor may. The view's
        queries run on its cursor while the vector index, the BM25 postings and the lock stay
        the store's own. Close it when done: that closes only the cursor.
        """
        # cursor() reads the shared connection object, so two threads must not call it at once.
        with self._cursor_lock:
            return _CursorView(self, self.con.cursor())

    def transaction(self) -> _Transaction:
        """Return a context manager that commits on success and rolls back on any error."""
        return _Transaction(self)

    # ----------------------------------------------------------------- writes
    def _run(self, sql: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        self._flush_held()  # held memories go to the table before a statement that may read them (store.held)
        return self.con.execute(sql, list(params))

    def hold_memories(self) -> AbstractContextManager[None]:
        """Hold memories inserted in the block and insert them in one statement at its end (store.held)."""
        return self.held.hold(self._flush_held)

    def _flush_held(self) -> None:
        """Insert the memories waiting in this thread's hold in one statement (nothing if none wait)."""
        rows = self.held.take()
        if rows is not None:
            self._insert_rows(*rows)
            # They are what the table now returns: the transaction's own cache serves their next reads (store.cache).
            self.cache.keep_in_tx(rows[0])

    def _set_counts(self, ids: list[str], counts: list[int]) -> None:
        todo = pa.table({"id": pa.array(ids, pa.string()), "n": pa.array(counts, pa.int32())})  # noqa: F841
        self.con.execute("UPDATE memories SET tokens = todo.n FROM todo WHERE memories.id = todo.id")

    def insert_turn(self, turn: Turn) -> None:
        """Record a raw turn in its own committed transaction, before anything is extracted from it."""
        self._writable()
        with self._lock:
            self.con.execute(f"INSERT INTO turns ({TURNS.cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", TURNS.values(turn))

    def insert_memories(self, records: Sequence[MemoryRecord], vectors: np.ndarray) -> None:
        """Insert memories and their vectors through Arrow (one statement, not one per row).

        Inside `hold_memories()` the rows wait in process for one INSERT (store.held); the
        indexes, pinned ids and record cache follow them at once either way.
        """
        vectors = self._insertable(records, vectors)
        if not len(records):
            return
        counts = counts_of([r.text for r in records])
        self.cache.drop(r.id for r in records)
        with self._lock:
            if self.held.holds():
                self.held.add(records, counts, vectors)
            else:
                self._insert_rows(records, counts, vectors)
            self.lexical.wrote(records)
            self._pinned_ids.update(r.id for r in records if r.pinned)
        self.index.add([r.id for r in records], [r.user for r in records], vectors,
                       active=np.array([r.status == "active" for r in records]))
        # Crossing the size policy's threshold moves the rows into the index kind it asks for.
        self.index = ann.fit(self.index, self.index_kind)

    def _insert_rows(self, records: Sequence[MemoryRecord], counts: list[int], vectors: np.ndarray) -> None:
        """Insert memory rows, their token counts and vectors in one Arrow statement."""
        cols: dict[str, Any] = {}
        for name, col, values in zip(MEM_COLS, SQL_COLS, zip(*map(MEMORIES.values, records), strict=True), strict=True):
            arrow = (pa.timestamp("us") if name in TIMES else pa.list_(pa.string()) if name == "references"
                     else pa.string() if name == "meta" else None)
            cols[col] = pa.array(values, type=arrow) if arrow else list(values)
        cols["tokens"] = pa.array(counts, pa.int32())
        cols["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), self.dim)
        batch = pa.table(cols)  # noqa: F841 - read by DuckDB's replacement scan below
        with self._lock:
            self.con.execute(f"INSERT INTO memories ({', '.join(SQL_COLS)}, tokens, embedding) SELECT * FROM batch")

    def insert_events(self, events: Iterable[Event]) -> None:
        """Append events in one Arrow statement."""
        self._append("events", list(events))

    def mark_turns(self, outcomes: Iterable[TurnOutcome]) -> None:
        """Append turn outcomes in one Arrow statement (callers hold the transaction of the writes they describe)."""
        self._append("turn_outcomes", list(outcomes))

    def _follows_rows(self) -> list[Link]:
        rows = self.con.execute(f"SELECT {LINKS.cols} FROM links WHERE kind = 'follows' ORDER BY ts").fetchall()
        return [LINKS.of(r) for r in rows]

    def insert_links(self, links: Iterable[Link]) -> None:
        """Append links in one Arrow statement."""
        links = list(links)
        self.cache.links_added(links)
        self._append("links", links)

    def set_status(self, memory_id: str, status: str, *, reason: str, at: datetime,
                   successor: str | None = None) -> str:
        """Change one memory's status and return the old one; a row waiting in the hold is changed there."""
        if not self.held.waiting([memory_id]):
            with self.held.beside():
                return super().set_status(memory_id, status, reason=reason, at=at, successor=successor)
        self._writable()
        with self.cache.writing([memory_id]):
            old = self.held.set_status(memory_id, status, reason=reason, at=at, successor=successor)
        self._status_changed([memory_id], status == "active")
        return old

    def corroborate(self, memory_id: str, at: datetime) -> None:
        """Count one more corroboration of a memory (a row waiting in the hold goes to the table first)."""
        with self.held.beside([memory_id]):
            super().corroborate(memory_id, at)

    def touch(self, ids: list[str], at: datetime) -> None:
        """Reinforce recalled memories: journalled and served at once, written to the table in batches (store.touches).

        Inside a transaction a touch is the UPDATE it always was, committed or rolled back with it.
        """
        if not ids or self.read_only:
            return
        if self.cache.open_tx:
            super().touch(ids, at)
            return
        with self.touches.lock:
            self.touches.add(list(ids), at)
            self.cache.replace(ids, Pending.once(at))
        if self.touches.full:
            self.flush_touches()

    def flush_touches(self) -> int:
        """Write the waiting touches to the table in one transaction; return how many ids were updated."""
        if self.read_only or self.cache.open_tx:
            return 0
        with self._lock:
            return self.touches.flush(self.con)

    def _status_changed(self, ids: list[str], active: bool) -> None:
        # The in-process indexes search active memories only.
        self.index.set_active(ids, active)
        self.lexical.set_active(ids, active)

    def decay_pass(self, now: datetime, cfg: DecayConfig, *, dry_run: bool = False) -> list[tuple[str, float]]:
        """Tombstone, in one set-based pass, active memories whose salience is under the threshold.

        The SQL is `decay.salience` (see its docstring), evaluated over the whole table;
        each decayed memory gets an event carrying the salience that decided it.
        """
        self._writable()
        self.flush_touches()  # salience is computed in SQL from access counts
        select, params = decay_select(DUCKDB, now, cfg)
        with self.transaction():
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE decayed AS {select}", params)
            rows = self.con.execute("SELECT id, salience FROM decayed ORDER BY salience, id").fetchall()
            if rows and not dry_run:
                self.con.execute(
                    "UPDATE memories SET status = 'decayed', status_reason = 'decayed', status_at = ? "
                    "FROM decayed WHERE memories.id = decayed.id", [naive(now)])
                self.con.execute(
                    "INSERT INTO events SELECT 'e-' || substr(replace(uuid()::VARCHAR, '-', ''), 1, 16), id, ?, "
                    "'decayed', 'active', 'decayed', 'decayed', "
                    "json_object('salience', salience, 'threshold', ?)::VARCHAR, NULL FROM decayed",
                    [naive(now), cfg.threshold])
            self.con.execute("DROP TABLE decayed")
        if rows and not dry_run:
            self.cache.drop_all()
            self._status_changed([r[0] for r in rows], False)
        return [(r[0], float(r[1])) for r in rows]

    # ----------------------------------------------------------------- reads
    def pinned(self, user: str, filters: dict[str, Any] | None = None) -> list[MemoryRecord]:
        if not self._pinned_ids:
            return []
        where, params = self._where(user, filters, active_only=True)
        sql, ids = in_list("id", sorted(self._pinned_ids))
        return self._records(f"{where} AND pinned AND {sql}", [*params, *ids])

    def get_many(self, ids: list[str]) -> dict[str, MemoryRecord]:
        """Return {id: memory} of the `ids` that exist, oldest first (kept records cost no query: store.cache)."""
        return self.cache.get_many(ids, self._fetch_many, self._fetch_all)

    def _records(self, where: str, params: Any, order: str = "created_at, id") -> list[MemoryRecord]:
        # Every record read from the table carries the touches still waiting (store.touches).
        return self.touches.read(partial(super()._records, where, params, order))

    def _fetch_many(self, ids: list[str]) -> dict[str, MemoryRecord]:
        # Rows waiting in the hold are answered from it; the others are read without flushing it (store.held).
        found, rest = self.held.records(ids)
        if rest:
            with self.held.beside():
                found.update(SQLStore.get_many(self, rest))
        return found

    def _fetch_all(self) -> dict[str, MemoryRecord]:
        return {r.id: r for r in self._records("TRUE", [], "id")}

    def self_names(self, user: str) -> list[str]:
        """Return the names the user goes by, from their active name memories (kept while no row changes)."""
        return self.cache.self_names(user, super().self_names)

    def links(self, ids: list[str], kinds: tuple[str, ...] = ("supersedes", "because", "refers_to")) -> list[Link]:
        """Return the links of those kinds from or to any of `ids`, oldest first (no query when none has a link)."""
        linked = self.cache.linked(ids)
        return super().links(linked, kinds) if linked else []

    def follows(self, ids: list[str]) -> list[Link]:
        """Return the `follows` links from or to any of `ids`, each once, oldest first (no query after the first)."""
        return self.cache.follows(ids, self._follows_rows)

    def _writing(self, ids: list[str]) -> AbstractContextManager[None]:
        return self.cache.writing(ids)

    def vectors(self, ids: list[str]) -> np.ndarray:
        return self.index.vectors(ids)

    def _index_stats(self) -> dict[str, Any]:
        # saved_rows: rows the indexes saved beside the file cover (store.persist), 0 when none were taken back
        # or saved.
        return {"index": ann.kind_of(self.index), "saved_rows": self._saved_rows, "records_kept": len(self.cache),
                **self.lexical.stats()}

    # ----------------------------------------------------------------- Batching: lexical analysis
    def analyse_ahead(self, texts: Iterable[str]) -> None:
        """Have the words of `texts`, about to be written or searched, stemmed in one statement (see the part)."""
        self.lexical.analyse_ahead(self.con, texts)

    @property
    def lexical_stale(self) -> bool:
        """True when rows written since the last lexical search wait to be analysed into the BM25 postings."""
        return self.lexical.stale

    def refresh_lexical(self) -> bool:
        """Analyse waiting rows into the BM25 postings now; return whether there were any."""
        return self.lexical.refresh(self.con, self._flush_held)

    # ----------------------------------------------------------------- search
    def search_dense(self, qvec: np.ndarray, k: int, *, user: str,
                     filters: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Return the top-k active memories of `user` by cosine, best first."""
        allowed = self._allowed(user, filters)
        with one_thread():  # the product is memory-bound: BLAS helper threads only cost (store.blas)
            return self.index.search(qvec, k, user=user, allowed=allowed)

    def search_lexical(self, query: str, k: int, *, user: str,
                       filters: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Return the top-k active memories of `user` by BM25 over their text and context, best first (ties by id)."""
        terms = self.lexical.terms(self.con, query)
        self.lexical.sync(self.con, self._flush_held)
        return self.lexical.index.search(terms, k, user=user, allowed=self._allowed(user, filters))

    def _allowed(self, user: str, filters: dict[str, Any] | None) -> set[str] | None:
        if not filters or not any(v is not None for v in filters.values()):
            return None
        self._flush_held()
        where, params = self._where(user, filters, active_only=True)
        return {r[0] for r in self.con.execute(f"SELECT id FROM memories WHERE {where}", params).fetchall()}

    def _reload_index(self) -> None:
        # The in-process index has no delete; after a purge or restore it is rebuilt from the file, and the
        # saved indexes, which described the rows before, are dropped.
        if self.path != ":memory:":
            persist.sidecar(self.path).unlink(missing_ok=True)
            for matrix in persist.matrix_files(self.path):
                matrix.unlink(missing_ok=True)
        self.index = VectorIndex(self.dim)
        self._load_index(use_saved=False)

    # ----------------------------------------------------------------- portability (mnemo.portable)
    def dump(self, user: str | None = None, *, batch_size: int = 1000) -> Iterable[tuple[str, list]]:
        """Yield ("turns", [Turn]), ("memories", [(MemoryRecord, vector)]), ("events", ...), ("links", ...) batches.

        One read transaction on its own cursor: a consistent snapshot that neither waits
        for writers nor holds more than one batch (what and in which order: `sql.dump_queries`).
        """
        convert = {"turns": TURNS.of, "events": EVENTS.of, "links": LINKS.of}
        self.flush_touches()  # rows are read as the table holds them
        cur = self.con.cursor()
        try:
            cur.execute("BEGIN TRANSACTION")
            for section, sql, params in dump_queries(DUCKDB, user):
                if section == "memories":
                    for batch in cur.execute(sql, params).to_arrow_reader(batch_size):
                        cols = [batch.column(k).to_pylist() for k in range(len(SQL_COLS))]
                        vecs = batch.column(len(SQL_COLS)).flatten().to_numpy().reshape(-1, self.dim)
                        yield section, [(MEMORIES.of(row), vecs[k]) for k, row in enumerate(zip(*cols, strict=True))]
                    continue
                cur.execute(sql, params)
                while rows := cur.fetchmany(batch_size):
                    yield section, [convert[section](r) for r in rows]
        finally:
            cur.close()

    def review(self, user: str | None = None, *, batch_size: int = 500) -> Iterable[list[tuple[MemoryRecord, list[Event]]]]:
        """Yield batches of (memory, its events) ordered by user, status (active first), kind and age."""
        mine, params = ("user_id = ?", [user]) if user is not None else ("TRUE", [])
        self.flush_touches()  # rows are read as the table holds them
        cols = ", ".join(f"m.{c}" for c in SQL_COLS)
        # One query with the events aggregated per memory: a second query would need a second cursor,
        # which is a second snapshot.
        sql = (f"SELECT {cols}, (SELECT list((e.id, e.memory_id, e.ts, e.action, e.status_from, e.status_to, "
               "e.reason, e.evidence, e.other_id) ORDER BY e.ts, e.rowid) FROM events e WHERE e.memory_id = m.id) "
               f"FROM memories m WHERE {mine} ORDER BY {REVIEW_ORDER}")
        cur = self.con.cursor()
        try:
            cur.execute(sql, params)
            while rows := cur.fetchmany(batch_size):
                yield [(MEMORIES.of(r[:-1]), [EVENTS.of(e) for e in r[-1] or ()]) for r in rows]
        finally:
            cur.close()

    def insert_turns(self, turns: Sequence[Turn]) -> None:
        """Insert many turns in one statement (imports); callers hold a transaction."""
        self._append("turns", turns)

    def _append(self, table: str, rows: Sequence[Turn] | Sequence[Event] | Sequence[Link]) -> None:
        """Append turns, events or links in one Arrow statement: executemany manages ~1k rows/s."""
        self._writable()
        if not rows:
            return
        spec = _APPENDED[table]
        if len(rows) <= FEW_ROWS:  # an Arrow batch costs ~2.8 ms however small; a bound INSERT ~0.7 ms a row
            marks = ", ".join("?" * len(spec.cols.split(", ")))
            with self._lock:
                self.con.executemany(f"INSERT INTO {table} ({spec.cols}) VALUES ({marks})",
                                     [spec.values(r) for r in rows])
            return
        values = list(zip(*map(spec.values, rows), strict=True))
        batch = pa.table({n: pa.array(v, type=pa.timestamp("us") if n == "ts" else pa.string())  # noqa: F841
                          for n, v in zip(spec.cols.split(", "), values, strict=True)})
        with self._lock:
            self.con.execute(f"INSERT INTO {table} ({spec.cols}) SELECT * FROM batch")


FEW_ROWS = 2  # up to this many rows `_append` binds parameters rather than building an Arrow batch
_APPENDED = {"turns": TURNS, "events": EVENTS, "links": LINKS, "turn_outcomes": OUTCOMES}  # what `_append` writes


class _CursorView(DuckDBStore):
    """A store's queries on one cursor: attribute reads and writes other than `con` go to the base store."""

    def __init__(self, base: DuckDBStore, con: duckdb.DuckDBPyConnection):  # noqa: D107 - nothing is opened here
        object.__setattr__(self, "_base", base)
        object.__setattr__(self, "con", con)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_base"), name)

    def close(self) -> None:
        """Close only this view's cursor (the store saves its indexes when it closes)."""
        self.con.close()

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_base"), name, value)


class _Transaction:
    def __init__(self, store: DuckDBStore):
        self.store = store

    def __enter__(self) -> DuckDBStore:
        self.store._lock.acquire()
        self.store.con.execute("BEGIN TRANSACTION")
        self.store.cache.began()
        return self.store

    def __exit__(self, exc_type, exc, tb) -> None:
        committed = False
        try:
            if exc_type is None:
                self.store.con.execute("COMMIT")
                committed = True
            else:
                self.store.con.execute("ROLLBACK")
                # The in-process index may have moved ahead of the rolled-back rows: rebuild it from the file.
                if hasattr(self.store, "index"):
                    self.store.index = VectorIndex(self.store.dim)
                    self.store._load_index()
        finally:
            self.store.cache.ended(committed)
            self.store._lock.release()
