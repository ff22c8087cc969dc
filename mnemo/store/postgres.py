"""The PostgreSQL + pgvector store: the `Store` contract for many writers and a service; what differs from DuckDB.

Open it with a DSN: ``Memory.open("postgresql://user@host:5432/db")``. One store is one
schema (``mnemo`` unless the DSN says ``?schema=NAME``; mnemo strips that parameter
before libpq sees it), so several stores can share a database. The `vector` extension
must exist in the database or be creatable by the connecting role.

What is the same as DuckDB: the schema (plus a primary key on memory ids and a few
btree indexes, which PostgreSQL needs and DuckDB does not), statuses and tombstones
(an UPDATE plus an event row, never a DELETE), events, links, turns, the decay pass
(the same formula as `decay.salience`, in one statement), filters, and
`transaction()`, which commits on success and rolls back everything on any error.

What differs, on purpose:

- Dense search asks pgvector on every call (exact ``<=>`` cosine distance, ordered),
  instead of a mirrored in-process matrix. Other processes write to the same tables,
  so a mirror in this process would go stale; the store of record answers instead.
  There is no ``index`` attribute. Opening a store of at least `hnsw_min_rows`
  memories (or calling `build_hnsw`) builds an HNSW index, never a write; pgvector
  then answers approximately, scanning on until the user and filters have k rows
  (``hnsw.iterative_scan``). Below that size the exact scan is fast enough.
- Lexical search is not BM25: PostgreSQL has none. It is ``ts_rank_cd`` (cover
  density) over a generated ``tsvector`` column with a GIN index, with the query's
  terms OR-ed like BM25's. Which memories match (any stemmed query term, English
  stop words dropped), filtering, and "a memory with more of the query's terms ranks
  higher" hold on both backends and are tested on both; the scores themselves differ
  from DuckDB's BM25 (no IDF, no length normalisation, another scale), so compare
  rankings, never lexical scores, across backends. Tokens differ slightly too:
  PostgreSQL keeps "ic-mc-44" whole as well as its parts. The GIN index follows every
  insert, so there is no ``lexical`` part counting analysing statements.
- Many processes may write at once (row locks, READ COMMITTED); there is no
  single-writer `StoreLocked`. A read-only store uses read-only transactions.
- Memory ids are a primary key: inserting an id twice raises `InvalidInput`
  (DuckDB keeps no key, for bulk speed, and leaves clash checks to imports).
- Zero vectors have no cosine: pgvector ranks them after every other memory,
  where the in-process index gives them a score of 0.
- The cold archive (`store.archive`, `pg_archive.PgArchive`) writes the same Parquet files
  with pyarrow, with the same guarantees; its row digests are md5-based, not
  DuckDB's hash, so they are checked on restore into PostgreSQL only.
- The connection can be dropped by the server (a restart, a failover): it is checked
  before each use outside a transaction and reopened (`pg_connect.alive`), and while the
  database is away every call raises `StoreUnavailable` (HTTP 503 with Retry-After).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np

from ..config import DecayConfig
from ..errors import InvalidInput, StoreUnavailable
from ..model import CONTEXT_KEY, Event, Link, MemoryRecord, Turn, TurnOutcome
from .counts import counts_of
from .pg_archive import PgArchive
from .pg_connect import alive, answering, connect, redact, split_dsn, vector_schema
from .rows import (
    EVENTS,
    LINKS,
    MEMORIES,
    MIGRATED,
    OUTCOMES,
    PG_MEMORY_TYPES,
    SQL_COLS,
    TURNS,
    check_text,
    check_version,
    naive,
)
from .sql import REVIEW_ORDER, Dialect, SQLStore, decay_select, dump_queries

# `rows.searched_text` in SQL: the text, then a string context that is not the text itself.
_CONTEXT = f"(meta::jsonb ->> '{CONTEXT_KEY}')"
SEARCHED_PG = (f"CASE WHEN jsonb_typeof(meta::jsonb -> '{CONTEXT_KEY}') = 'string' AND {_CONTEXT} <> '' "
               f"AND {_CONTEXT} <> text THEN text || ' ' || {_CONTEXT} ELSE text END")
TEXT_CONFIG = "english"  # stemming and stop words closest to DuckDB fts's porter / english defaults
HNSW_MIN_ROWS = 100_000  # below this, an exact scan is fast enough and returns true neighbours


def _migrations(dim: int) -> list[tuple[int, list[str]]]:
    """Ordered schema migrations, numbered as DuckDB's (`rows.SCHEMA_VERSION`): the two backends move together.

    Text columns that are compared or ordered use the "C" collation, so orders match
    DuckDB's byte order whatever the database's locale. Turns and events carry `seq`,
    an identity that keeps insertion order within a timestamp, as DuckDB's rowid does.
    """
    c = 'text COLLATE "C"'
    return [
        (
            1,
            [
                f"""CREATE TABLE turns (id {c} PRIMARY KEY, user_id {c} NOT NULL, session {c}, agent {c},
                    role {c}, text text NOT NULL, ts timestamp NOT NULL, meta text,
                    seq bigint GENERATED ALWAYS AS IDENTITY)""",
                "CREATE INDEX turns_user_session ON turns (user_id, session, ts)",
                f"""CREATE TABLE memories (id {c} PRIMARY KEY, user_id {c} NOT NULL, text text NOT NULL,
                    kind {c}, category {c}, subject {c}, attribute {c}, value {c}, record_id {c},
                    refs text[], importance double precision, pinned boolean, single_valued boolean,
                    agent {c}, session {c}, turn_id {c}, source {c}, created_at timestamp,
                    valid_from timestamp, last_accessed timestamp, expires_at timestamp,
                    access_count integer, corroborations integer, status {c}, status_reason text,
                    status_at timestamp, successor_id {c}, meta text, embedding vector({dim}),
                    tsv tsvector GENERATED ALWAYS AS (to_tsvector('{TEXT_CONFIG}'::regconfig, text)) STORED)""",
                "CREATE INDEX memories_user_status ON memories (user_id, status)",
                "CREATE INDEX memories_tsv ON memories USING gin (tsv)",
                f"""CREATE TABLE events (id {c} NOT NULL, memory_id {c} NOT NULL, ts timestamp NOT NULL,
                    action {c} NOT NULL, status_from {c}, status_to {c}, reason text, evidence text,
                    other_id {c}, seq bigint GENERATED ALWAYS AS IDENTITY)""",
                "CREATE INDEX events_memory ON events (memory_id)",
                "CREATE INDEX events_other ON events (other_id)",
                f"CREATE TABLE links (src {c} NOT NULL, dst {c} NOT NULL, kind {c} NOT NULL, ts timestamp)",
                "CREATE INDEX links_src ON links (src)",
                "CREATE INDEX links_dst ON links (dst)",
            ],
        ),
        # DuckDB's version 2 indexes memories.id and drops its fts index: here id is the primary key
        # and the GIN index on tsv serves lexical search, so there is nothing to change.
        (2, []),
        # Each memory's token count (store.counts), filled for existing rows when the store opens.
        (3, ["ALTER TABLE memories ADD COLUMN tokens integer"]),
        # What became of each turn (mnemo.recover): a turn with no row was recorded and never processed.
        (4, [f"""CREATE TABLE turn_outcomes (turn_id {c} NOT NULL, ts timestamp NOT NULL, outcome {c} NOT NULL,
                 detail text, seq bigint GENERATED ALWAYS AS IDENTITY)""",
             "CREATE INDEX turn_outcomes_turn ON turn_outcomes (turn_id)",
             f"INSERT INTO turn_outcomes (turn_id, ts, outcome, detail) SELECT id, ts, 'migrated', '{MIGRATED}' "
             "FROM turns ORDER BY ts, seq"]),
        # Lexical search reads a memory's context beside its text (rows.searched_text): tsv is generated from both.
        (5, ["DROP INDEX memories_tsv", "ALTER TABLE memories DROP COLUMN tsv",
             f"ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('{TEXT_CONFIG}'::regconfig, "
             f"{SEARCHED_PG})) STORED",
             "CREATE INDEX memories_tsv ON memories USING gin (tsv)"]),
    ]


POSTGRES = Dialect(
    name="postgres", mark="%s", text_mark="%s::text", seq="seq", for_update=" FOR UPDATE",
    any_of=lambda column, values: (f"{column} = ANY(%s::text[])", [list(values)]),
    meta_eq=lambda key, value: ("(meta::jsonb ->> %s) = %s", [key, value]),
    number=lambda x: f"{x!r}::float8", log2=lambda x: f"(ln({x}) / ln(2::float8))",
    seconds=lambda a, b: f"extract(epoch FROM {b}::timestamp - {a})::float8",
)


class PgStore(SQLStore):
    """A memory store in one PostgreSQL schema, searched through pgvector and a tsvector index."""

    dialect = POSTGRES

    @property
    def archive(self) -> PgArchive:
        """The cold archive (`store.Archiving`): made on each access, it holds nothing but this store."""
        return PgArchive(self)

    def __init__(self, path: str, *, embedder: str, dim: int, read_only: bool = False,
                 hnsw_min_rows: int | None = HNSW_MIN_ROWS):
        self._dsn = str(path)
        _, self.schema = split_dsn(self._dsn)
        self.path = redact(self._dsn)
        self.read_only = read_only
        self.hnsw_min_rows = hnsw_min_rows
        self._lock = threading.RLock()
        # One `exclusive` holder per process at a time (its connection is one); reentrant, like the advisory
        # lock itself, so a server holding a user's lock can call Memory, which takes it again.
        self._lock_guard = threading.RLock()
        self._lock_con: Any = None
        self._lock_depth = 0  # `exclusive` blocks open on this thread's lock connection (it is not replaced meanwhile)
        self._depth = 0  # transactions open on the store's connection (it is not replaced meanwhile)
        self._con = self._open(create=not read_only)
        self.embedder, self.dim = self._check_embedder(embedder, dim)
        if not read_only:
            self._migrate()
        self._counts_open()
        self._hnsw = self._has_hnsw()
        if not read_only and not self._hnsw and hnsw_min_rows is not None and self._size() >= hnsw_min_rows:
            self.build_hnsw()

    def _open(self, *, create: bool) -> Any:
        """Connect, make sure the extension and schema exist, and point search_path at them."""
        from pgvector.psycopg import register_vector
        from psycopg import sql

        con = connect(self._dsn)
        try:
            with con.transaction():
                # One opener at a time creates the extension and schema: concurrent IF NOT EXISTS can still clash.
                con.execute("SELECT pg_advisory_xact_lock(hashtext('mnemo.store_pg.setup'))")
                ext = vector_schema(con, create=create)
                if create:
                    con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            con.execute(sql.SQL("SET search_path TO {}, {}").format(sql.Identifier(self.schema), sql.Identifier(ext)))
            register_vector(con)
            if self.read_only:
                con.execute("SET default_transaction_read_only = on")
        except BaseException:
            con.close()
            raise
        return con

    @staticmethod
    def recorded_embedder(path: str) -> str | None:
        """Return the embedder name a store was written with (None when the schema holds no store)."""
        _, schema = split_dsn(str(path))
        con = connect(str(path))
        try:
            if con.execute("SELECT to_regclass(%s)", [f"{schema}.store_meta"]).fetchone()[0] is None:
                return None
            row = con.execute(f'SELECT value FROM "{schema}".store_meta WHERE key = %s', ["embedder"]).fetchone()
        finally:
            con.close()
        return row[0] if row else None

    # ----------------------------------------------------------------- set-up
    @property
    def con(self) -> Any:
        """The store's connection, reopened first if the server dropped it (`pg_connect.alive`); never mid-transaction."""
        with self._lock:
            if self._depth == 0 and not alive(self._con):
                self._con.close()
                self._con = self._open(create=not self.read_only)
            return self._con

    def _meta(self) -> dict[str, str]:
        if self._run("SELECT to_regclass('store_meta')").fetchone()[0] is None:
            return {}
        return dict(self._run("SELECT key, value FROM store_meta").fetchall())

    def _check_embedder(self, embedder: str, dim: int) -> tuple[str, int]:
        with self.transaction():
            if not self.read_only:
                self.con.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"mnemo.store_pg:{self.schema}"])
            return self._adopt_meta(embedder, dim, 'CREATE TABLE store_meta (key text COLLATE "C" PRIMARY KEY, value text)',
                                    where=f" in schema {self.schema!r}")

    def _hold_schema(self) -> None:
        # Held to the end of the transaction: a second opener waits, then sees what this one did.
        self.con.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"mnemo.store_pg:{self.schema}"])

    def _migrate(self) -> None:
        with self.transaction():
            self._hold_schema()
            version = int(self._meta().get("schema_version", 0))
            for target, statements in _migrations(self.dim):
                if target <= version:
                    continue
                for statement in statements:
                    self.con.execute(statement)
                self.con.execute("UPDATE store_meta SET value = %s WHERE key = 'schema_version'", [str(target)])
        check_version(version, self.path)

    def close(self) -> None:
        self._con.close()
        if self._lock_con is not None:
            self._lock_con.close()

    def ping(self) -> None:
        """Ask the database for one row, replacing a connection the server dropped; raise StoreUnavailable if it fails.

        The service's readiness probe calls this; requests heal the connection the same way (`con`).
        """
        with self._lock:
            # Twice at most: a connection dropped without a word shows it is broken only when next used.
            for attempt in (1, 2):
                try:
                    with answering(self.path):
                        self.con.execute("SELECT 1").fetchone()
                    return
                except StoreUnavailable:
                    if attempt == 2 or self._depth or alive(self._con):
                        raise

    @contextmanager
    def exclusive(self, key: str) -> Iterator[None]:
        """Hold advisory lock (schema, `key`) on a connection of its own until the block ends.

        Replicas of the service take it around reconcile-and-write for one user, so two writes
        about the same facts are decided one after the other, each seeing what the last committed.
        Its own connection: waiting for another process never blocks this store's readers, and a
        process that dies releases the lock with its connection.
        """
        with self._lock_guard:
            # Replaced only when no lock is held on it: closing it would let the held lock go.
            if self._lock_depth == 0 and not alive(self._lock_con):
                if self._lock_con is not None:
                    self._lock_con.close()
                self._lock_con = connect(self._dsn)
            con = self._lock_con
            with answering(self.path):
                con.execute("SELECT pg_advisory_lock(hashtext(%s), hashtext(%s))", [self.schema, key])
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
                if not con.closed and not con.broken:
                    with answering(self.path):
                        con.execute("SELECT pg_advisory_unlock(hashtext(%s), hashtext(%s))", [self.schema, key])

    def save_indexes(self) -> bool:
        """Return False: pgvector's and PostgreSQL's indexes live in the database, nothing is rebuilt at open."""
        return False

    def reader(self) -> PgStore:
        """Return this store itself: its one connection serialises statements, so readers share it."""
        return self

    @contextmanager
    def transaction(self) -> Iterator[PgStore]:
        """Return a context manager that commits on success and rolls back on any error.

        A connection the server dropped is reopened before the transaction begins, never during it;
        a connection lost during it raises StoreUnavailable and nothing of it is committed.
        """
        with self._lock, answering(self.path):
            con = self.con
            self._depth += 1
            try:
                with con.transaction():
                    yield self
            finally:
                self._depth -= 1

    # ----------------------------------------------------------------- writes
    def _run(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        """Execute one statement under the store lock and return its cursor."""
        with self._lock, answering(self.path):
            return self.con.execute(sql, params)

    def _many(self, sql: str, rows: list[Sequence[Any]]) -> None:
        if rows:
            with self._lock, answering(self.path), _unique(), self.con.cursor() as cur:
                cur.executemany(sql, rows)

    def insert_turn(self, turn: Turn) -> None:
        """Record a raw turn in its own committed transaction, before anything is extracted from it."""
        self.insert_turns([turn])

    def insert_turns(self, turns: Sequence[Turn]) -> None:
        """Insert many turns (imports); callers hold a transaction."""
        self._writable()
        self._many(f"INSERT INTO turns ({TURNS.cols}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                   [TURNS.values(t) for t in turns])

    def insert_memories(self, records: Sequence[MemoryRecord], vectors: np.ndarray) -> None:
        """Insert memories and their vectors with one COPY (not one statement per row)."""
        vectors = self._insertable(records, vectors)
        if not len(records):
            return
        with self._lock, answering(self.path), _unique(), self.con.cursor() as cur:
            # Binary COPY: text would format every float in Python, which costs more than the whole insert.
            counts = counts_of([r.text for r in records])
            cols = f"{', '.join(SQL_COLS)}, tokens, embedding"
            with cur.copy(f"COPY memories ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types([*PG_MEMORY_TYPES[:-1], "int4", PG_MEMORY_TYPES[-1]])
                for r, n, vec in zip(records, counts, vectors, strict=True):
                    copy.write_row([*MEMORIES.values(r), n, vec])

    def _set_counts(self, ids: list[str], counts: list[int]) -> None:
        self._run("UPDATE memories m SET tokens = u.n FROM unnest(%s::text[], %s::int4[]) AS u(id, n) "
                  "WHERE m.id = u.id", [ids, counts])

    def insert_events(self, events: Iterable[Event]) -> None:
        self._many(f"INSERT INTO events ({EVENTS.cols}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                   [EVENTS.values(e) for e in events])

    def insert_links(self, links: Iterable[Link]) -> None:
        self._many(f"INSERT INTO links ({LINKS.cols}) VALUES (%s, %s, %s, %s)", [LINKS.values(lk) for lk in links])

    def mark_turns(self, outcomes: Iterable[TurnOutcome]) -> None:
        """Append turn outcomes (callers hold the transaction of the writes they describe)."""
        self._many(f"INSERT INTO turn_outcomes ({OUTCOMES.cols}) VALUES (%s, %s, %s, %s)",
                   [OUTCOMES.values(o) for o in outcomes])

    def _status_transaction(self) -> Any:
        # Its own transaction, with the row locked (Dialect.for_update): a concurrent writer changing the
        # same memory waits, so the old status returned is true.
        return self.transaction()

    def decay_pass(self, now: datetime, cfg: DecayConfig, *, dry_run: bool = False) -> list[tuple[str, float]]:
        """Tombstone, in one statement, active memories whose salience is under the threshold.

        The SQL is `decay.salience` (see its docstring) term for term, in float8; log2(x) is
        ln(x) / ln(2). Each decayed memory gets an event carrying the salience that decided it.
        """
        self._writable()
        select, params = decay_select(POSTGRES, now, cfg)
        if dry_run:
            rows = self._run(f"SELECT id, salience FROM ({select}) d ORDER BY salience, id", params).fetchall()
        else:
            rows = self._run(f"""WITH decayed AS ({select}),
                updated AS (
                  UPDATE memories m SET status = 'decayed', status_reason = 'decayed', status_at = %s
                  FROM decayed d WHERE m.id = d.id AND m.status = 'active' RETURNING m.id, d.salience),
                logged AS (
                  INSERT INTO events ({EVENTS.cols})
                  SELECT 'e-' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16), id, %s, 'decayed',
                         'active', 'decayed', 'decayed',
                         json_build_object('salience', salience, 'threshold', %s::float8)::text, NULL
                  FROM updated)
                SELECT id, salience FROM updated ORDER BY salience, id""",
                [*params, naive(now), naive(now), float(cfg.threshold)]).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    # ----------------------------------------------------------------- reads
    def pinned(self, user: str, filters: dict[str, Any] | None = None) -> list[MemoryRecord]:
        where, params = self._where(user, filters, active_only=True)
        return self._records(where + " AND pinned", params)

    def vectors(self, ids: list[str]) -> np.ndarray:
        """Return the unit vectors of `ids` (rows of zeros for unknown ids), as the in-process index does."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        if not ids:
            return out
        found = dict(self._run("SELECT id, embedding FROM memories WHERE id = ANY(%s)", [list(ids)]).fetchall())
        for k, mid in enumerate(ids):
            vec = found.get(mid)
            if vec is not None:
                vec = _array(vec)
                norm = float(np.linalg.norm(vec))
                out[k] = vec / norm if norm else vec
        return out

    # ----------------------------------------------------------------- search
    def search_dense(self, qvec: np.ndarray, k: int, *, user: str,
                     filters: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Return the top-k active memories of `user` by cosine, best first (exact unless HNSW is built)."""
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise InvalidInput(f"query vector has dimension {q.shape[0]}, the store uses {self.dim}")
        if k <= 0 or float(np.linalg.norm(q)) == 0.0:
            return []
        where, params = self._where(user, filters, active_only=True)
        # Ties break by id for exact search; the HNSW index serves only an ORDER BY of the bare distance.
        sql = (f"SELECT id, 1 - (embedding <=> %s) AS score FROM memories WHERE {where} "
               f"ORDER BY embedding <=> %s{'' if self._hnsw else ', id'} LIMIT %s")
        with self._lock, answering(self.path):
            if self._hnsw:
                with self.transaction():
                    con = self._con
                    con.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    # Measured on clustered 384-d vectors: recall@10 0.98 at pgvector's default 40, 0.99 at 100.
                    con.execute("SET LOCAL hnsw.ef_search = 100")
                    rows = con.execute(sql, [q, *params, q, k]).fetchall()
                # Relaxed order may swap near neighbours: sort what came back.
                rows.sort(key=lambda r: (-_score(r[1]), r[0]))
            else:
                rows = self.con.execute(sql, [q, *params, q, k]).fetchall()
        return [(r[0], _score(r[1])) for r in rows]

    def search_lexical(self, query: str, k: int, *, user: str,
                       filters: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Return the top-k active memories of `user` by ts_rank_cd over any of the query's terms, best first.

        The query is normalised by the same text configuration as the memories, and its
        lexemes are OR-ed (quoted, so no query text is read as tsquery syntax).
        """
        where, params = self._where(user, filters, active_only=True)
        rows = self._run(
            "WITH q AS (SELECT string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', "
            f"' | ')::tsquery AS q FROM unnest(tsvector_to_array(to_tsvector('{TEXT_CONFIG}'::regconfig, %s))) "
            "AS lexeme) "
            "SELECT m.id, ts_rank_cd(m.tsv, q.q) AS score FROM memories m, q "
            f"WHERE q.q IS NOT NULL AND m.tsv @@ q.q AND {where} ORDER BY score DESC, m.id LIMIT %s",
            [check_text(query, "query"), *params, k]).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    # The GIN index follows every write, so nothing waits to be analysed here (see Store.lexical_stale).
    lexical_stale = False

    def refresh_lexical(self) -> bool:
        """Return False: there is nothing to analyse (see `lexical_stale`)."""
        return False

    def _has_hnsw(self) -> bool:
        return bool(self._run("SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexname = "
                              "'memories_embedding_hnsw'", [self.schema]).fetchone()[0])

    def _size(self) -> float:
        # The planner's row estimate: free to read, and close enough to pick exact or approximate search.
        return float(self._run("SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'memories'::regclass"
                               ).fetchone()[0])

    def build_hnsw(self) -> None:
        """Build the HNSW index on the vectors, after which dense search is approximate (pgvector's HNSW).

        Opening a store of at least `hnsw_min_rows` memories builds it; writes never do,
        so no insert pays for it. Building takes a while on a large store and blocks writers meanwhile.
        """
        self._writable()
        self._run("CREATE INDEX IF NOT EXISTS memories_embedding_hnsw ON memories "
                  "USING hnsw (embedding vector_cosine_ops)")
        self._hnsw = True

    # ----------------------------------------------------------------- portability (mnemo.portable)
    @contextmanager
    def _snapshot(self) -> Iterator[Any]:
        """Yield a second connection inside one REPEATABLE READ, READ ONLY transaction: a consistent snapshot."""
        import psycopg
        from pgvector.psycopg import register_vector
        from psycopg import sql

        con = connect(self._dsn)
        try:
            ext = vector_schema(con, create=False)
            con.execute(sql.SQL("SET search_path TO {}, {}").format(sql.Identifier(self.schema), sql.Identifier(ext)))
            register_vector(con)
            # psycopg opens the transaction with these on the first statement.
            con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            con.read_only = True
            con.autocommit = False
            yield con
        finally:
            con.close()

    def dump(self, user: str | None = None, *, batch_size: int = 1000) -> Iterable[tuple[str, list]]:
        """Yield ("turns", [Turn]), ("memories", [(MemoryRecord, vector)]), ("events", ...), ("links", ...) batches.

        One REPEATABLE READ transaction on its own connection with server-side cursors: a
        consistent snapshot that neither waits for writers nor holds more than one batch.
        What and in which order: `sql.dump_queries`.
        """
        convert = {"turns": TURNS.of, "memories": lambda r: (MEMORIES.of(r[:-1]), _array(r[-1])), "events": EVENTS.of,
                   "links": LINKS.of}
        queries = [(section, sql, args, convert[section]) for section, sql, args in dump_queries(POSTGRES, user)]
        with self._snapshot() as con:
            for section, sql, args, convert in queries:
                with con.cursor(name=f"mnemo_dump_{section}") as cur:
                    cur.execute(sql, args)
                    while rows := cur.fetchmany(batch_size):
                        yield section, [convert(r) for r in rows]

    def review(self, user: str | None = None, *, batch_size: int = 500) -> Iterable[list[tuple[MemoryRecord, list[Event]]]]:
        """Yield batches of (memory, its events) ordered by user, status (active first), kind and age."""
        mine, params = ("user_id = %s", [user]) if user is not None else ("TRUE", [])
        sql = f"SELECT {', '.join(SQL_COLS)} FROM memories WHERE {mine} ORDER BY {REVIEW_ORDER}"
        with self._snapshot() as con, con.cursor(name="mnemo_review") as cur:
            cur.execute(sql, params)
            # The events of each batch come from the same snapshot, so they agree with the memories.
            while rows := cur.fetchmany(batch_size):
                records = [MEMORIES.of(r) for r in rows]
                events: dict[str, list[Event]] = {}
                for e in con.execute(f"SELECT {EVENTS.cols} FROM events WHERE memory_id = ANY(%s) ORDER BY ts, seq",
                                     [[r.id for r in records]]).fetchall():
                    events.setdefault(e[1], []).append(EVENTS.of(e))
                yield [(r, events.get(r.id, [])) for r in records]


@contextmanager
def _unique() -> Iterator[None]:
    """Turn a duplicate key into InvalidInput (the enclosing transaction, if any, rolls back)."""
    from psycopg.errors import UniqueViolation

    try:
        yield
    except UniqueViolation as exc:
        raise InvalidInput(f"{exc.diag.message_detail or exc}; ids must be new (imports can skip existing ones)"
                           ) from exc


def _array(vec: Any) -> np.ndarray:
    """Return a pgvector value as a float32 array (the adapter returns its own Vector type)."""
    return np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)


def _score(value: float | None) -> float:
    """Return a cosine score, 0.0 where pgvector has none (a zero vector)."""
    return 0.0 if value is None or value != value else float(value)
