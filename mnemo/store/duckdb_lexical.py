"""BM25 on DuckDB: fts's analysis run by DuckDB, postings served in process (`lexical.LexicalIndex`).

`DuckDBLexical` is a `DuckDBStore`'s `lexical` part: it holds the postings (`index`), the ids
written since the last lexical search (`pending`), the words it has stemmed and the count of
analysing statements (`syncs`). It runs its statements on the connection the store hands it
(a reader's own cursor, for one), under the store's lock. Rows written since the last lexical
search are analysed in one statement at the next (all rows the first time), and a query's
words are stemmed by DuckDB once. Rows this process wrote since then, when their texts are
ASCII, are analysed here instead, as queries are (fts's tokens of ASCII text are lowercase
runs of [a-z0-9], stems asked once): a write then a search (`remember_many`, turn after turn)
costs no statement for known words.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ..model import CONTEXT_KEY, MemoryRecord
from .lexical import LexicalIndex
from .rows import check_text, searched_text

_LEXICAL_BATCH = 100_000  # rows analysed per statement when BM25 postings are built (bounds DuckDB's memory)
# fts's analysis (see mnemo.store.lexical): its tokenizer with digits kept, its stopwords, then porter stems.
# Its ignore pattern (\.|[^a-z0-9])+ split on whitespace leaves exactly the runs of [a-z0-9], found here in one pass.
_TOKENS = "regexp_extract_all(lower(strip_accents({})), '[a-z0-9]+')"
_STOPWORDS = pa.table({"sw": (Path(__file__).parent.parent / "assets" / "stopwords_english.txt").read_text().split()})
_STOPWORD_SET = frozenset(_STOPWORDS.column("sw").to_pylist())
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")  # fts's tokens of lowercased ASCII text
# `rows.searched_text` in SQL: the text, then a string context that is not the text itself.
_CONTEXT = f"json_extract_string(meta, '$.{CONTEXT_KEY}')"
SEARCHED_SQL = (f"CASE WHEN json_type(meta, '$.{CONTEXT_KEY}') = 'VARCHAR' AND {_CONTEXT} <> '' AND {_CONTEXT} <> text "
                f"THEN text || ' ' || {_CONTEXT} ELSE text END")
_STEMS_KEPT = 200_000  # words whose porter stem a store keeps (the cache is cleared past this)


class DuckDBLexical:
    """The BM25 postings of one DuckDB store and the rows waiting to be analysed into them."""

    def __init__(self, lock: threading.RLock):
        self._lock = lock  # the store's: one statement at a time on its connection, one writer of the postings
        self.syncs = 0  # statements that analysed waiting rows (what a test or benchmark counts)
        self._stems: dict[str, str] = {}  # word -> porter stem, as DuckDB's fts stems it
        self.reset()

    def reset(self) -> None:
        """Hold no postings: the next search builds them from the whole table (a store opening or reloading)."""
        self.index = LexicalIndex()
        self.pending: list[str] | None = None  # ids written since the last sync; None while nothing is built
        self._docs: dict[str, list[Any]] = {}  # id -> [user, searched text, active] of rows this process wrote

    def restore(self, ids: list[str], users: list[str], active: Any, saved: dict[str, Any]) -> int:
        """Take the postings saved beside the file (store.persist) for the first rows; return how many they cover.

        The rows after them wait for the next search, as new writes do.
        """
        m = len(saved["lex_len"])
        self.index = LexicalIndex.restore(ids[:m], users[:m], active[:m], saved)
        self.pending = ids[m:]
        return m

    def wrote(self, records: Sequence[MemoryRecord]) -> None:
        """Follow rows just written: they wait for the next sync, which analyses them here when it can."""
        if self.pending is None:
            return  # the first search reads every row from the table
        self.pending.extend(r.id for r in records)
        for r in records:
            self._docs[r.id] = [r.user, searched_text(r), r.status == "active"]

    def set_active(self, ids: Sequence[str], active: bool) -> None:
        """Follow a status change: only active memories are searched."""
        self.index.set_active(ids, active)
        for i in ids:
            doc = self._docs.get(i)
            if doc is not None:
                doc[2] = active

    @property
    def stale(self) -> bool:
        """True when rows written since the last lexical search wait to be analysed into the postings."""
        return self.pending is None or bool(self.pending)

    def stats(self) -> dict[str, Any]:
        """Rows in the postings (None: built at the next search) and rows waiting to be analysed."""
        return {"lexical_rows": None if self.pending is None else len(self.index),
                "lexical_waiting": len(self.pending or [])}

    def refresh(self, con: duckdb.DuckDBPyConnection, flush: Callable[[], None]) -> bool:
        """Analyse waiting rows into the postings now (see `sync`); return whether there were any."""
        with self._lock:
            if not self.stale:
                return False
            self.sync(con, flush)
            return True

    def sync(self, con: duckdb.DuckDBPyConnection, flush: Callable[[], None]) -> None:
        """Analyse the rows written since the last lexical search (all rows, the first time) into the postings.

        `flush` puts the store's held rows in the table first (store.held), when the rows are read from it.
        """
        with self._lock:
            pending = self.pending
            if pending is not None and not pending:
                return
            docs_of = self._docs
            if pending and all(i in docs_of and docs_of[i][1].isascii() for i in pending):
                self._add_ascii(con, pending, [docs_of[i] for i in pending])
                self.pending = []
                docs_of.clear()
                self.syncs += 1
                return
            docs_of.clear()
            flush()
            # Rows come back with their position, so postings need no id lookups.
            where = "" if pending is None else "WHERE id IN (SELECT id FROM todo)"
            todo = pa.table({"id": pa.array(pending or [], pa.string())})  # noqa: F841 - read by DuckDB
            docs = con.execute(
                f"SELECT id, user_id, status = 'active' AS active, {SEARCHED_SQL} AS text FROM memories {where}"
            ).to_arrow_table()
            for start in range(0, docs.num_rows, _LEXICAL_BATCH):
                self._add_postings(con, docs.slice(start, _LEXICAL_BATCH))
            self.pending = []
            self.syncs += 1
            del docs
            pa.default_memory_pool().release_unused()

    def _add_postings(self, con: duckdb.DuckDBPyConnection, docs: pa.Table) -> None:
        """Analyse one batch of (id, user_id, active, text) rows and append them and their postings."""
        part = docs.append_column("pos", pa.array(np.arange(docs.num_rows)))  # noqa: F841 - read by DuckDB
        stopwords = _STOPWORDS  # noqa: F841 - read by DuckDB
        # Each distinct token is stemmed once; create_fts_index drops stopwords before stemming.
        post = con.execute(
            f"""WITH toks AS (SELECT pos, unnest({_TOKENS.format('text')}) AS tok FROM part),
                kept AS (SELECT pos, tok FROM toks WHERE tok NOT IN (SELECT sw FROM stopwords)),
                stems AS (SELECT tok, stem(tok, 'porter') AS term FROM (SELECT DISTINCT tok FROM kept))
            SELECT pos, term, count(*) AS tf FROM kept JOIN stems USING (tok) GROUP BY pos, term"""
        ).to_arrow_table()
        terms = post.column("term").combine_chunks().dictionary_encode()
        self.index.add(docs.column("id").to_pylist(), docs.column("user_id").to_pylist(),
                       docs.column("active").to_numpy(zero_copy_only=False).astype(bool),
                       post.column("pos").to_numpy(), terms.dictionary.to_pylist(), terms.indices.to_numpy(),
                       post.column("tf").to_numpy())

    def _add_ascii(self, con: duckdb.DuckDBPyConnection, ids: list[str], docs: list[list[Any]]) -> None:
        """Analyse rows of ASCII text as fts does (tokens, stopwords out, porter stems) and append their postings."""
        toks = [[t for t in _ASCII_TOKEN.findall(text.lower()) if t not in _STOPWORD_SET] for _, text, _ in docs]
        self._stem_words(con, {t for words in toks for t in words})
        terms: dict[str, int] = {}
        pos, term_of, tf = [], [], []
        for k, words in enumerate(toks):
            for term, count in Counter(self._stems[t] for t in words).items():
                pos.append(k)
                term_of.append(terms.setdefault(term, len(terms)))
                tf.append(count)
        self.index.add(ids, [d[0] for d in docs], np.array([d[2] for d in docs], dtype=bool),
                       np.array(pos, dtype=np.int64), list(terms), np.array(term_of, dtype=np.int64),
                       np.array(tf, dtype=np.int64))

    def _stem_words(self, con: duckdb.DuckDBPyConnection, words: set[str]) -> None:
        """Ask DuckDB the porter stems of the ASCII words not seen before, and keep them."""
        todo = sorted(words - self._stems.keys())
        if todo:
            if len(self._stems) + len(todo) > _STEMS_KEPT:
                self._stems.clear()
                todo = sorted(words)
            self._stems.update(con.execute("SELECT tok, stem(tok, 'porter') FROM (SELECT unnest(?::VARCHAR[]) "
                                           "AS tok)", [todo]).fetchall())

    def analyse_ahead(self, con: duckdb.DuckDBPyConnection, texts: Iterable[str]) -> None:
        """Ask the porter stems of the ASCII words of `texts` (about to be written or searched) in one statement.

        `remember_many` names a block's candidates and subjects here: each turn's write and search
        then finds its words' stems kept, instead of asking DuckDB once a turn (~0.8 ms a statement).
        """
        words = {t for text in texts if text.isascii() for t in _ASCII_TOKEN.findall(text.lower())
                 if t not in _STOPWORD_SET}
        with self._lock:
            self._stem_words(con, words)

    def terms(self, con: duckdb.DuckDBPyConnection, text: str) -> list[str]:
        """Return the distinct BM25 terms of `text` (fts's analysis: tokens, stopwords out, porter stems)."""
        check_text(text, "query")
        if not text.isascii():
            # strip_accents and lower beyond ASCII are DuckDB's own: the whole analysis runs there.
            rows = con.execute(f"SELECT DISTINCT tok, stem(tok, 'porter') FROM (SELECT unnest("
                               f"{_TOKENS.format('?::VARCHAR')}) AS tok)", [text]).fetchall()
            return sorted({stem for tok, stem in rows if tok not in _STOPWORD_SET})
        # On ASCII, fts's tokenizer is exactly lowercase + runs of [a-z0-9]; each word's stem is asked of
        # DuckDB once and kept, so a query costs no statement once its words have been seen.
        toks = {t for t in _ASCII_TOKEN.findall(text.lower()) if t not in _STOPWORD_SET}
        self._stem_words(con, toks)
        return sorted({self._stems[t] for t in toks})
