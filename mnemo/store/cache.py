"""Memory records kept in process between reads, so a recall's candidates cost no query once seen.

A recall reads its ~100 candidates by id (`get_many`); on DuckDB that is one statement of
id probes plus building the records, most of a recall's fixed cost at 10k memories
(benchmarks/README.md, `bench_store.py --profile`). Records are frozen values, so the ones
read are kept and served again until something changes them. Coherence rules, all here:

- every write of a memory row through the store (status, corroboration, access, expiry,
  importance, a new row with a known id) drops those ids before and after it runs;
- a set-based change (decay pass, purge, restore, rollback, reload) drops everything;
- nothing is kept while a transaction is open (its reads may be uncommitted), and ids written
  in a transaction are dropped again when it ends, committed or not; the thread that holds the
  transaction keeps what it reads in a separate set, seen by no other thread (`remember_many`
  reads the same neighbours turn after turn); when the transaction commits, what it read and
  did not write is the committed state and is kept like any read (`remember`, one transaction a
  turn, then finds its neighbours kept); when it rolls back, the set is dropped;
- a read keeps what it found only if no write happened while it ran (a generation counter),
  so a reader on another cursor cannot keep a row a writer just changed.

A small store (WARM_MAX rows or fewer when opened) reads every row at its first miss: one
statement of ~100 id probes costs about what reading 10k whole rows costs once, and after it
a recall's candidates cost no query at all.

Records come back in the order `get_many` has always returned them (created_at, then id).

Two smaller reads a recall makes are kept by the same rules: the names a user goes by
(`self_names`, dropped with any write of a memory row), and which ids appear in any link
(`links` asks SQL only for ids in that set: most memories have none). The linked set is a
superset: links are only ever added, or removed together with a reload of the indexes. The
`follows` links themselves (a session's turns in order, which recall reads for every question:
a scan of the links table, ~5 ms at 100k) are kept as an adjacency dict by the same rules: built
at the first `follows` call, grown by every insert, dropped by a reload. A link whose transaction
rolls back stays until the reload the rollback causes; it joins ids that were never written, so
no recall meets it.

`RecordCache` is a `DuckDBStore`'s `cache` part: it keeps what was read and is told of every
write and transaction; the store hands it, per call, how to read what it lacks (on the store's
own connection, a reader's cursor for one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from ..model import Link, MemoryRecord

KEPT = 50_000  # records kept at most; past this the cache starts again empty
WARM_MAX = 20_000  # a store of at most this many rows reads them all at its first miss, in one statement


def order_key(record: MemoryRecord) -> tuple:
    """Return SQL's `ORDER BY created_at, id` for a record (NULL times last)."""
    at = record.created_at
    return (at is None, at.timestamp() if at is not None else 0.0, record.id)


class RecordCache:
    """Records, names and linked ids a store read, kept while they cannot have changed."""

    def __init__(self) -> None:
        self._kept: dict[str, MemoryRecord] = {}
        self._generation = 0
        self.open_tx = 0  # transactions open on the store (store.touches waits for none to be open)
        self._written: set[str] = set()
        self._names: dict[str, list[str]] = {}
        self._warm = False
        self._tx_kept: dict[str, MemoryRecord] = {}
        self._tx_owner: int | None = None
        self._linked: set[str] = set()
        self._near: dict[str, list[Link]] | None = None  # id -> its `follows` links; built at the first question

    def __len__(self) -> int:
        return len(self._kept)

    def get_many(self, ids: list[str], fetch_many: Callable[[list[str]], dict[str, MemoryRecord]],
                 fetch_all: Callable[[], dict[str, MemoryRecord]]) -> dict[str, MemoryRecord]:
        """Return {id: memory} of the `ids` that exist, oldest first; what is not kept is read by `fetch_many`
        (or every row by `fetch_all`, at a small store's first miss)."""
        if not ids:
            return {}
        mine = self.open_tx and self._tx_owner == threading.get_ident()
        kept = self._tx_kept if mine else self._kept
        found = {i: kept[i] for i in ids if i in kept}
        if mine:
            # Committed records the transaction has not written (its writes dropped theirs) are current in it too.
            found.update((i, self._kept[i]) for i in ids if i not in found and i in self._kept)
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            generation = self._generation
            warm, self._warm = self._warm and not self.open_tx, False
            fresh = fetch_all() if warm else fetch_many(missing)
            if generation == self._generation and (mine or not self.open_tx):
                if len(kept) + len(fresh) > KEPT:
                    kept.clear()
                kept.update(fresh)
            found.update((i, fresh[i]) for i in missing if i in fresh)
        return {r.id: r for r in sorted(found.values(), key=order_key)}

    def self_names(self, user: str, read: Callable[[str], list[str]]) -> list[str]:
        """Return the names the user goes by, read by `read(user)` and kept while no row changes."""
        kept = self._names.get(user)
        if kept is not None:
            return list(kept)
        generation = self._generation
        names = read(user)
        if generation == self._generation and not self.open_tx:
            self._names[user] = names
        return list(names)

    def linked(self, ids: list[str]) -> list[str]:
        """Return those of `ids` that may have a link (most memories have none: their links cost no query)."""
        return [i for i in ids if i in self._linked]

    def follows(self, ids: list[str], read_all: Callable[[], list[Link]]) -> list[Link]:
        """Return the `follows` links from or to any of `ids`, each once, oldest first (`read_all` at the first call)."""
        if self._near is None:
            self._near = {}
            self._near_add(read_all())
        found: dict[tuple[str, str], Link] = {}
        for i in ids:
            for link in self._near.get(i, ()):
                found.setdefault((link.src, link.dst), link)
        return sorted(found.values(), key=lambda x: (x.at is None, x.at.timestamp() if x.at else 0.0))

    def _near_add(self, links: Iterable[Link]) -> None:
        if self._near is not None:
            for link in links:
                if link.kind == "follows":
                    self._near.setdefault(link.src, []).append(link)
                    self._near.setdefault(link.dst, []).append(link)

    def links_added(self, links: list[Link]) -> None:
        """Follow links just written."""
        self._linked.update(i for lk in links for i in (lk.src, lk.dst))
        self._near_add(links)

    def links_reset(self, ids: Iterable[str]) -> None:
        """Start again from the ids that appear in any link (the store reloads)."""
        self._linked = set(ids)
        self._near = None

    def replace(self, ids: Iterable[str], change: Callable[[MemoryRecord], MemoryRecord]) -> None:
        """Replace the kept records of `ids` by `change(record)` (a write whose effect is known without reading)."""
        # A read running meanwhile must not keep what it found: it may predate the change.
        self._generation += 1
        kept = self._kept
        for i in ids:
            record = kept.get(i)
            if record is not None:
                kept[i] = change(record)

    def drop(self, ids: Iterable[str]) -> None:
        """Forget the records of `ids` (their rows are being written) and every user's names."""
        self._generation += 1
        self._names.clear()
        ids = list(ids)
        for i in ids:
            self._kept.pop(i, None)
            self._tx_kept.pop(i, None)
        if self.open_tx:
            self._written.update(ids)

    def drop_all(self) -> None:
        """Forget every record and name (a set-based change: decay, purge, restore, rollback, reload)."""
        self._generation += 1
        self._kept.clear()
        self._tx_kept.clear()
        self._names.clear()

    def keep_in_tx(self, records: list[MemoryRecord]) -> None:
        """Keep records the transaction's thread knows are current (rows it just wrote) for its next reads."""
        if self.open_tx and self._tx_owner == threading.get_ident():
            if len(self._tx_kept) + len(records) > KEPT:
                self._tx_kept.clear()
            self._tx_kept.update((r.id, r) for r in records)

    def began(self) -> None:
        """Follow a transaction the store began on this thread."""
        self.open_tx += 1
        self._tx_owner = threading.get_ident()
        self._tx_kept.clear()

    def ended(self, committed: bool) -> None:
        """Follow the end of that transaction: what it wrote is dropped; what it read is kept if it committed."""
        self.open_tx -= 1
        self._generation += 1
        read, self._tx_kept = self._tx_kept, {}
        self._names.clear()
        written, self._written = self._written, set()
        for i in written:
            self._kept.pop(i, None)
        if committed and not self.open_tx:
            # Read in the transaction and not written by it: what is now committed (a write by another
            # thread meanwhile would have dropped it from the transaction's set).
            fresh = {i: r for i, r in read.items() if i not in written}
            if len(self._kept) + len(fresh) > KEPT:
                self._kept.clear()
            self._kept.update(fresh)

    @contextmanager
    def writing(self, ids: list[str]) -> Iterator[None]:
        """Drop `ids` before and after a statement that writes their rows (a read in between cannot keep them)."""
        self.drop(ids)
        try:
            yield
        finally:
            self.drop(ids)

    def warm_at_first_miss(self, rows: int) -> None:
        """Read every record at the next miss when the store holds at most WARM_MAX rows."""
        self._warm = rows <= WARM_MAX
