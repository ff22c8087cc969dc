"""Each memory's token count, stored with it: the `tokens` column (schema version 3, both engines).

Recall packs memories under a token budget, so it needs the count of every candidate's text.
The count is made once, when the memory is written (`counts_of`), and kept in its row; reading
a memory hands its stored count to the tokenizer's per-text cache (`tokens.learn`), so recall's
`count_many` finds it there instead of running the tokenizer on a memory it has not seen in this
process. A memory's text never changes once written (a correction supersedes it with a new
memory, which gets its own count), so a stored count never goes stale.

`store_meta` names the counter that made the stored counts (`token_counter`). Opening a store
for writing fills the rows without a count (a store of schema version 2, migrated; rows restored
from an archive written before version 3) and, when the counter has changed (the WordPiece asset
became loadable, or could no longer be loaded), counts every row again. A read-only store whose
counts another counter made, or that has none, hands nothing to the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tokens import count_many, learn, tokenizer_name

COUNTER_KEY = "token_counter"  # store_meta: the counter (tokens.tokenizer_name) that made the stored counts
FILL_BATCH = 50_000  # rows counted and updated per statement when filling
CACHED_WRITE = 1_000  # a write of more texts than this counts them without filling the per-text cache


def counts_of(texts: Sequence[str]) -> list[int]:
    """Return the token counts to store with `texts` (a bulk write leaves the per-text cache alone)."""
    return count_many(list(texts), cache=len(texts) <= CACHED_WRITE)


class StoredCounts:
    """The stored token counts of a SQL store: filled at open, handed to the tokenizer's cache on read.

    A backend supplies `_set_counts(ids, counts)` (one UPDATE of many rows) and calls
    `_counts_open()` once its schema is migrated.
    """

    tokens_col = "NULL"  # what a read selects as the count: the column once the schema has it
    _counts_ok = False  # whether stored counts are this process's counter's (and may be handed over)
    read_only: bool
    dialect: Any
    _run: Any  # the backend's: execute one statement (store.sql.SQLStore)
    _meta: Any  # the backend's: store_meta as a dict
    transaction: Any  # the backend's: one committed transaction

    def _set_counts(self, ids: list[str], counts: list[int]) -> None:
        raise NotImplementedError

    def _hold_schema(self) -> None:
        """Keep other openers of the same store out until this transaction ends (a server's engine needs to)."""

    def _counts_open(self) -> None:
        """Fill missing counts (all of them when the counter changed) and decide whether reads hand them over."""
        meta = self._meta()
        if int(meta.get("schema_version", 0)) < 3:
            return  # a read-only store of an older schema: no column, nothing stored
        self.tokens_col = "tokens"
        name = tokenizer_name()
        if self.read_only:
            self._counts_ok = meta.get(COUNTER_KEY) == name
            return
        q = self.dialect.mark
        with self.transaction():
            self._hold_schema()
            meta = self._meta()  # again, now that no other opener can change it
            if meta.get(COUNTER_KEY) != name:
                if COUNTER_KEY in meta:
                    self._run("UPDATE memories SET tokens = NULL WHERE tokens IS NOT NULL")
                self._run(f"DELETE FROM store_meta WHERE key = {q}", [COUNTER_KEY])
                self._run(f"INSERT INTO store_meta VALUES ({q}, {q})", [COUNTER_KEY, name])
            self.fill_counts()
        self._counts_ok = True

    def fill_counts(self) -> int:
        """Count and store the rows that have no count yet; return how many were filled."""
        filled = 0
        while rows := self._run(f"SELECT id, text FROM memories WHERE tokens IS NULL LIMIT {FILL_BATCH}").fetchall():
            self._set_counts([r[0] for r in rows], count_many([r[1] for r in rows], cache=False))
            filled += len(rows)
        return filled

    def _learn_counts(self, texts: Sequence[str], counts: Sequence[int | None]) -> None:
        """Hand the stored counts of memories just read to the tokenizer's cache (when they are its counter's)."""
        if self._counts_ok:
            learn((t, n) for t, n in zip(texts, counts, strict=True) if n is not None)
