"""Reinforcement on recall off the query's critical path: touches journalled, served in process, applied in batches.

A recall reinforces the memories it used (access_count + 1, last_accessed = now). As one
autocommitted UPDATE per recall that was ~10% of a recall at 10k memories, more under disk
load (`bench_store.py --profile`). On a DuckDB store, outside a transaction, a touch instead:

- is appended to a journal beside the file (`<file>.touches`, one JSON line, written before
  recall returns), so a killed process loses no reinforcement a recall acknowledged: the next
  open applies it, as DuckDB replays its own log (the line is not fsynced: like any file write
  it survives the process, not the machine losing power before the OS writes it back);
- updates the records kept in process (`store.cache`) where they are, and is added to every
  record read from the table while it waits (`_records`), so every read sees it at once;
- is applied, all waiting touches in one UPDATE with the journal's sequence number written to
  `store_meta` in the same transaction, when PENDING_MAX ids wait, at close, and before any
  statement that reads access counts in SQL (decay, export, archive, review). The journal is
  emptied after that commit; an open applies only lines past the recorded sequence number, so
  a crash between the commit and the emptying never counts a touch twice.

Inside a transaction a touch is the UPDATE it always was: it commits or rolls back with it.

`Pending` is the waiting touches and their journal: a `DuckDBStore` holds it as its `touches`
part (shared with any other store of this process on the same file), runs `touch` through it
and hands it the connection to apply them on (`flush`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ..model import MemoryRecord
from .rows import aware, naive

PENDING_MAX = 2048  # ids (or journal lines) waiting before they are applied on the next touch
SEQ_KEY = "touch_seq"  # store_meta key: the last journal line applied to the table
# One Pending per file in a process: two stores opened on one file share it (DuckDB shares the database),
# so neither applies the other's journal a second time. Values are [pending, stores holding it].
_SHARED: dict[str, list] = {}
_SHARED_LOCK = threading.Lock()


def journal_path(path: str) -> Path:
    """Return the touch journal beside a store file."""
    return Path(os.path.abspath(f"{path}.touches"))


class Pending:
    """Touches not yet in the table: per id, how many and the time of the last one; and the journal file."""

    def __init__(self, path: str | None, applied: int):
        self.path = None if path is None else journal_path(path)
        self.seq = applied
        self.by_id: dict[str, tuple[int, datetime]] = {}
        self.lines = 0  # journal lines since the table was last written: bounds the journal when few ids recur
        self._fd: int | None = None
        self.key: str | None = None  # the file's real path while shared (`opened`)
        # Held to add or apply touches; readers take no lock but read again when `flushes` moved.
        self.lock = threading.Lock()
        self.flushing, self.flushes = False, 0
        if self.path is not None and self.path.exists():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                    seq, at, ids = int(entry["seq"]), datetime.fromisoformat(entry["at"]), list(entry["ids"])
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by a crash was never acknowledged
                if seq > applied:
                    self._count(ids, at)
                    self.seq = max(self.seq, seq)
                    self.lines += 1

    def __len__(self) -> int:
        return len(self.by_id)

    @property
    def full(self) -> bool:
        """True when PENDING_MAX ids (or journal lines) wait: time to apply them."""
        return len(self.by_id) >= PENDING_MAX or self.lines >= PENDING_MAX

    def _count(self, ids: list[str], at: datetime) -> None:
        stored = aware(naive(at))
        for i in ids:
            n = self.by_id.get(i, (0, stored))[0]
            self.by_id[i] = (n + 1, stored)

    def add(self, ids: list[str], at: datetime) -> None:
        """Journal one touch of `ids` at `at`, then count it."""
        self.seq += 1
        if self.path is not None:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            line = json.dumps({"seq": self.seq, "at": naive(at).isoformat(), "ids": ids}) + "\n"
            os.write(self._fd, line.encode("utf-8"))
        self.lines += 1
        self._count(ids, at)

    @staticmethod
    def once(at: datetime) -> Any:
        """Return a function adding one touch at `at` to a record (for records that already hold the others)."""
        stored = aware(naive(at))
        return lambda r: replace(r, access_count=r.access_count + 1, last_accessed=stored)

    def apply(self, record: MemoryRecord) -> MemoryRecord:
        """Return `record` with its waiting touches added."""
        got = self.by_id.get(record.id)
        if got is None:
            return record
        return replace(record, access_count=record.access_count + got[0], last_accessed=got[1])

    def table(self) -> pa.Table:
        """Return the waiting touches as an Arrow table (id, n, at) for one UPDATE."""
        ids = list(self.by_id)
        return pa.table({"id": pa.array(ids, pa.string()),
                         "n": pa.array([self.by_id[i][0] for i in ids], pa.int32()),
                         "at": pa.array([naive(self.by_id[i][1]) for i in ids], pa.timestamp("us"))})

    def clear(self) -> None:
        """Forget the waiting touches (they are in the table) and empty the journal."""
        self.by_id.clear()
        self.lines = 0
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        elif self.path is not None:
            self.path.unlink(missing_ok=True)

    def read(self, fetch: Callable[[], list[MemoryRecord]]) -> list[MemoryRecord]:
        """Return `fetch()`'s records read from the table with their waiting touches added.

        Rows read and touches added must straddle no flush (it would count them twice, or not at all):
        readers take no lock, they read again if a flush ran meanwhile (a flush is rare).
        """
        while True:
            flushes = self.flushes
            if self.flushing:
                with self.lock:
                    continue
            found = fetch()
            out = [self.apply(r) for r in found] if self.by_id else found
            if not self.flushing and self.flushes == flushes:
                return out

    def flush(self, con: duckdb.DuckDBPyConnection) -> int:
        """Apply the waiting touches to the table on `con` in one transaction; return how many ids were updated.

        The caller holds its store's lock and no transaction of its own.
        """
        with self.lock:
            if not self.by_id:
                return 0
            self.flushing = True
            try:
                return self._apply(con)
            finally:
                self.flushes += 1
                self.flushing = False

    def _apply(self, con: duckdb.DuckDBPyConnection) -> int:
        todo = self.table()  # noqa: F841 - read by DuckDB's replacement scan below
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("UPDATE memories SET access_count = access_count + todo.n, last_accessed = todo.at "
                        "FROM todo WHERE memories.id = todo.id")
            con.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", [SEQ_KEY, str(self.seq)])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        n = len(self.by_id)
        self.clear()
        return n

    @classmethod
    def opened(cls, path: str, applied: int) -> Pending:
        """Return the Pending of the store file at `path`, shared with any store of this process open on it."""
        if path == ":memory:":
            return cls(None, applied)
        key = os.path.realpath(path)
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = [cls(path, applied), 0]
                _SHARED[key][0].key = key
            _SHARED[key][1] += 1
            return _SHARED[key][0]

    def release(self) -> None:
        """Let go of this Pending for one store; the journal file is closed when no store holds it."""
        with _SHARED_LOCK:
            held = _SHARED.get(self.key) if self.key else None
            if held is not None and held[0] is self:
                held[1] -= 1
                if held[1] > 0:
                    return
                del _SHARED[self.key]
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                if not self.by_id:
                    self.path.unlink(missing_ok=True)  # all applied: no empty journal is left beside the file
