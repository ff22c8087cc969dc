"""The `Store` protocol: the one contract every caller of a memory store uses, and two optional capabilities.

    Store       the contract: lifecycle, writes, reads, search, export and import
    Batching    write-path hints (memories held to a block's end, words analysed ahead, lexical refresh)
    Archiving   the cold archive (`mnemo.archive`), a part the engine holds as `store.archive`

An engine keeps `Store`; where it lacks a capability the callers fall back (`holding`,
`analyse_ahead`, a server that does not refresh lexical rows) or refuse with a clear error (the
archive: `mnemo.archive.archiving` finds `store.archive` or says there is none). Two engines
keep all three: `DuckDBStore` (one file, in-process vector and BM25 indexes) and `PgStore`
(PostgreSQL + pgvector, many writers). Callers (`Memory`, the write and recall stages, export
and import, the archive, the servers) name `Store` and use only what is written here; what an
engine keeps besides (DuckDB's `index` and other parts, PostgreSQL's `build_hnsw`) is that
engine's own.

Rules every engine keeps:

- A memory's row is never deleted: a status change is `set_status` plus an event the
  caller inserts in the same `transaction()` (the cold archive's verified purge aside).
- Times go in aware or naive-UTC and come back aware UTC.
- Reads return model values (`MemoryRecord`, `Turn`, `Event`, `Link`), never rows.
- Dense scores are cosines; lexical scores rank within one engine only (BM25 on
  DuckDB, ts_rank_cd on PostgreSQL): compare rankings, not scores, across engines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..config import DecayConfig
from ..model import Event, Link, MemoryRecord, Turn, TurnOutcome


@runtime_checkable
class Store(Protocol):
    """A memory store: memories with vectors, the turns they came from, their events and links."""

    path: str  # where the store lives, fit for logs (a DSN's password is redacted)
    read_only: bool
    embedder: str  # the embedder name the store was written with
    dim: int  # its vector dimension

    # ----------------------------------------------------------------- lifecycle
    @staticmethod
    def recorded_embedder(path: str | Path) -> str | None:
        """Return the embedder name the store at `path` was written with (None for a new store)."""

    @property
    def schema_version(self) -> int:
        """The version of the store's schema."""

    def close(self) -> None:
        """Release the store (a file store lets other processes open it)."""

    def transaction(self) -> AbstractContextManager[Any]:
        """Return a context manager that commits on success and rolls back everything on any error."""

    def ping(self) -> None:
        """Check the store answers (reconnecting a dropped database connection); raise StoreError if not."""

    def exclusive(self, key: str) -> AbstractContextManager[Any]:
        """Hold `key` against every other process using this store until the block ends (reconcile-and-write).

        PostgreSQL: an advisory lock, released by the server if the process dies. DuckDB: nothing
        to do, one process writes a file.
        """

    def reader(self) -> Store:
        """Return a store for one reading thread or stream; its `close` releases only what `reader` opened."""

    def stats(self, user: str | None = None) -> dict[str, Any]:
        """Return the location, schema version, embedder, dimension and counts (memories by status, turns, ...);
        with `user`, that user's counts only and no location."""

    # ----------------------------------------------------------------- writes
    def insert_turn(self, turn: Turn) -> None:
        """Record a raw turn in its own committed transaction, before anything is extracted from it."""

    def insert_turns(self, turns: Sequence[Turn]) -> None:
        """Insert many turns (imports); callers hold a transaction."""

    def insert_memories(self, records: Sequence[MemoryRecord], vectors: np.ndarray) -> None:
        """Insert memories and their vectors (one row of `vectors` per record, of dimension `dim`)."""

    def insert_events(self, events: Iterable[Event]) -> None:
        """Append events."""

    def mark_turns(self, outcomes: Iterable[TurnOutcome]) -> None:
        """Record what became of turns, in the caller's transaction (the one that wrote what they say)."""

    def insert_links(self, links: Iterable[Link]) -> None:
        """Append links."""

    def set_status(self, memory_id: str, status: str, *, reason: str, at: datetime,
                   successor: str | None = None) -> str:
        """Change one memory's status and return the old one (callers write the event in the same transaction)."""

    def corroborate(self, memory_id: str, at: datetime) -> None:
        """Count one more corroboration of a memory, valid from `at` at the latest."""

    def touch(self, ids: list[str], at: datetime) -> None:
        """Reinforce recalled memories (one more access, last accessed at `at`)."""

    def set_importance(self, memory_id: str, importance: float) -> None:
        """Set one memory's importance, clipped to [0, 1]."""

    def set_expiry(self, memory_id: str, expires_at: datetime | None) -> None:
        """Set (or clear) when a memory's TTL runs out."""

    def decay_pass(self, now: datetime, cfg: DecayConfig, *, dry_run: bool = False) -> list[tuple[str, float]]:
        """Tombstone active memories whose `decay.salience` at `now` is under the threshold; return (id, salience)."""

    # ----------------------------------------------------------------- reads
    def get(self, memory_id: str) -> MemoryRecord:
        """Return one memory, or raise NotFound."""

    def get_many(self, ids: list[str]) -> dict[str, MemoryRecord]:
        """Return {id: memory} of the `ids` that exist."""

    def memories(self, user: str | None = None, *, include_inactive: bool = False,
                 filters: dict[str, Any] | None = None, limit: int | None = None) -> list[MemoryRecord]:
        """Return memories of `user` (all users when None), oldest first."""

    def active_for(self, user: str, subjects: Iterable[str] = ()) -> list[MemoryRecord]:
        """Return the user's active memories about any of `subjects`."""

    def self_names(self, user: str) -> list[str]:
        """Return the names the user goes by."""

    def pinned(self, user: str, filters: dict[str, Any] | None = None) -> list[MemoryRecord]:
        """Return the user's active pinned memories."""

    def expired(self, now: datetime, user: str | None = None) -> list[MemoryRecord]:
        """Return active, unpinned memories whose TTL has passed at `now`."""

    def vectors(self, ids: list[str]) -> np.ndarray:
        """Return the unit vectors of `ids` (zeros for unknown ids)."""

    def events(self, memory_id: str) -> list[Event]:
        """Return the events of a memory (and those naming it as the other), in the order they happened."""

    def links(self, ids: list[str], kinds: tuple[str, ...] = ("supersedes", "because", "refers_to")) -> list[Link]:
        """Return the links of those kinds from or to any of `ids`, oldest first."""

    def follows(self, ids: list[str]) -> list[Link]:
        """Return the `follows` links (a session's turns in order) from or to any of `ids`, oldest first."""

    def turn(self, turn_id: str) -> Turn:
        """Return one recorded turn, or raise NotFound."""

    def recent_turns(self, user: str, session: str | None, limit: int) -> list[Turn]:
        """Return the last `limit` turns of a user's session, oldest first."""

    def turns(self, user: str | None = None) -> list[Turn]:
        """Return the turns of `user` (all users when None), oldest first."""

    def turns_before(self, turn: Turn, limit: int) -> list[Turn]:
        """Return the last `limit` turns of `turn`'s session stored before it, oldest first (its context)."""

    def pending_turns(self, user: str | None = None) -> list[Turn]:
        """Return the turns recorded and never processed (no outcome), of `user` or all, in the order stored."""

    def turn_outcomes(self, turn_id: str) -> list[TurnOutcome]:
        """Return what became of a turn (none: never processed), oldest first."""

    # ----------------------------------------------------------------- search
    def search_dense(self, qvec: np.ndarray, k: int, *, user: str,
                     filters: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Return the top-k active memories of `user` by cosine, best first."""

    def search_lexical(self, query: str, k: int, *, user: str,
                       filters: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Return the top-k active memories of `user` by the engine's lexical score, best first.

        A memory is searched by its text and what it was said with (`rows.searched_text`: its
        `meta["context"]`, the sentences around it in its turn), and only its text is ever shown.
        """

    # ----------------------------------------------------------------- export, import, review
    def dump(self, user: str | None = None, *, batch_size: int = 1000) -> Iterable[tuple[str, list]]:
        """Yield ("turns" | "memories" | "events" | "links", batch) from one consistent snapshot."""

    def review(self, user: str | None = None, *,
               batch_size: int = 500) -> Iterable[list[tuple[MemoryRecord, list[Event]]]]:
        """Yield batches of (memory, its events) ordered by user, status (active first), kind and age."""

    def existing(self, table: str, ids: Sequence[str]) -> set[str]:
        """Return which of `ids` are already in `table` ("turns", "memories" or "events")."""

    def existing_links(self, links: Sequence[Link]) -> set[tuple[str, str, str, datetime | None]]:
        """Return the (src, dst, kind, at) of `links` already stored."""


# Optional capabilities. Both engines have them; an engine that lacks one still keeps the contract
# above, and the callers fall back (`holding`, `analyse_ahead`) or refuse with a clear error (the archive).


@runtime_checkable
class Batching(Protocol):
    """Write-path hints: memories held to the end of a block, words analysed ahead, lexical rows refreshed."""

    def hold_memories(self) -> AbstractContextManager[Any]:
        """Return a context, opened inside a `transaction()`, whose `insert_memories` may be written at its end.

        Every read and write of the store inside it sees the held memories as if inserted (the
        same rows, in the same order, as one insert per call). DuckDB holds them in process and
        inserts them in one statement (`store.held`); PostgreSQL writes each at once (one COPY).
        """

    def analyse_ahead(self, texts: Iterable[str]) -> None:
        """Prepare, in one go, the lexical analysis of texts about to be written or searched (a hint: may do nothing)."""

    @property
    def lexical_stale(self) -> bool:
        """True when written rows wait to be analysed for lexical search."""

    def refresh_lexical(self) -> bool:
        """Analyse waiting rows for lexical search now; return whether there were any."""


@runtime_checkable
class Archiving(Protocol):
    """The cold archive (`mnemo.archive`): tombstones exported to Parquet, purged once verified, restored.

    Not the store itself but its part, `store.archive` (`parquet.ParquetArchive` on DuckDB,
    `pg_archive.PgArchive` on PostgreSQL), running on the store's connection and transactions.
    """

    engine: str  # what archive row digests depend on ("duckdb 1.4.1", "postgres 18"): equal means comparable
    digest_method: str  # how a table digest is computed, for the manifest's reader

    def candidates(self, cutoff: datetime) -> dict[str, int]:
        """Return {"YYYY-MM": count} of tombstones whose status changed before `cutoff`."""

    def export(self, cutoff: datetime, out_dir: str | Path) -> list[dict[str, Any]]:
        """Write tombstones older than `cutoff`, with their events and links, as Parquet partitions by month."""

    def purge(self, memories_files: list[str], expected: dict[str, int]) -> dict[str, int]:
        """Hard-delete the archived rows named by verified files; roll back unless the counts equal `expected`."""

    def restore(self, files: dict[str, list[str]], expected: dict[str, tuple[int, str]] | None) -> dict[str, int]:
        """Insert archived memories, events and links back, refusing ids already present."""

    def table_digests(self) -> dict[str, tuple[int, str]]:
        """Return (rows, digest) of memories, events and links: equal digests mean equal contents."""


def holding(store: Store) -> AbstractContextManager[Any]:
    """Return `store.hold_memories()` where the engine batches writes (`Batching`), else a context that does nothing."""
    return store.hold_memories() if isinstance(store, Batching) else nullcontext()


def analyse_ahead(store: Store, texts: Iterable[str]) -> None:
    """Hint a `Batching` engine to analyse `texts` for lexical search in one go; nothing for another engine."""
    if isinstance(store, Batching):
        store.analyse_ahead(texts)
