"""BM25 over DuckDB fts's analysis, served from in-process postings that follow every write.

DuckDB's `fts` extension has two costs that grow with the store (measured at 1M
memories, benchmarks/README.md): `match_bm25` is a macro evaluated against every
row of the table (~300 ms a query), and its index does not follow writes, so the
first search after any insert rebuilds it (~20 s). This index keeps everything of
fts that decides a score and changes only where the postings live:

- analysis is fts's own, run by DuckDB (`mnemo.store.duckdb` holds the SQL): its tokenizer
  (lowercase, accents stripped, split on `(\\.|[^a-z0-9])+`, digits kept so record ids
  match), its English stopword list dropped before its porter `stem`;
- scoring is `match_bm25`'s: per query term (distinct) present in a document,
  log10((N - df + 0.5) / (df + 0.5) + 1) * tf (k1 + 1) / (tf + k1 (1 - b + b len / avgdl)),
  k1 = 1.2, b = 0.75, with N, df and avgdl over every row of the table whatever its
  status, as `create_fts_index` counts them; ties are broken by id;
- the postings (term -> rows and term frequencies) are numpy arrays; a query reads
  only its own terms' postings, and rows written since the last search are analysed
  in one statement at the next one and appended (`DuckDBLexical.sync`).

Rows carry a user code and an active flag, like `index.VectorIndex`, so a search
ranks only the rows it may return. `tests/test_lexical.py` checks the scores
against the extension's `match_bm25` on the same table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .index import UserRows, row_mask

K1 = 1.2
B = 0.75


class LexicalIndex:
    """Postings of analysed terms over rows that carry an id, a user and an active flag."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._users: dict[str, int] = {}
        self._user = np.zeros(0, dtype=np.int32)
        self._by_user = UserRows()
        self._active = np.zeros(0, dtype=bool)
        self._len = np.zeros(0, dtype=np.float64)
        self._vocab: dict[str, int] = {}
        # Per term: a list of (rows, tf) chunks, concatenated the first time a query reads them.
        self._post: list[list[tuple[np.ndarray, np.ndarray]]] = []
        self.size = 0
        self._total_len = 0.0

    def __len__(self) -> int:
        return self.size

    def _grow(self, need: int) -> None:
        if need <= len(self._active):
            return
        new = max(need, 2 * len(self._active), 1024)
        for name in ("_user", "_active", "_len"):
            old = getattr(self, name)
            grown = np.zeros(new, dtype=old.dtype)
            grown[: self.size] = old[: self.size]
            setattr(self, name, grown)

    def add(self, ids: list[str], users: list[str], active: np.ndarray, doc: np.ndarray,
            terms: list[str], term_of: np.ndarray, tf: np.ndarray) -> None:
        """Append documents `ids` (their rows follow in order) and their postings.

        `doc[j]` is the position in `ids` of posting j, `terms[term_of[j]]` its term and
        `tf[j]` how often the term occurs there; documents without postings have length 0.
        """
        n = len(ids)
        self._grow(self.size + n)
        base = self.size
        sl = slice(base, base + n)
        self._user[sl] = [self._users.setdefault(u, len(self._users)) for u in users]
        self._active[sl] = active
        doc = np.asarray(doc, dtype=np.int64)
        tf = np.asarray(tf, dtype=np.float64)
        self._len[sl] = np.bincount(doc, weights=tf, minlength=n) if n else 0.0
        self._total_len += float(tf.sum())
        for offset, mid in enumerate(ids):
            self._row[mid] = base + offset
        self._ids.extend(ids)
        self.size += n
        if not len(doc):
            return
        # Map this batch's term strings to global term ids, then cut the postings by term.
        gid = np.fromiter((self._term_id(t) for t in terms), dtype=np.int64, count=len(terms))
        tid = gid[np.asarray(term_of, dtype=np.int64)]
        order = np.argsort(tid, kind="stable")
        tid, rows, tf = tid[order], (doc[order] + base).astype(np.int32), tf[order].astype(np.float32)
        cuts = np.flatnonzero(np.diff(tid)) + 1
        for t, r, f in zip(tid[np.r_[0, cuts]], np.split(rows, cuts), np.split(tf, cuts), strict=True):
            self._post[int(t)].append((r, f))

    def _term_id(self, term: str) -> int:
        tid = self._vocab.get(term)
        if tid is None:
            tid = self._vocab[term] = len(self._post)
            self._post.append([])
        return tid

    def set_active(self, ids: list[str], active: bool) -> None:
        """Mark rows active or inactive (a tombstone keeps its postings; it still counts in N and df)."""
        rows = [self._row[i] for i in ids if i in self._row]
        self._active[rows] = active

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        tid = self._vocab.get(term)
        if tid is None:
            return None
        chunks = self._post[tid]
        if len(chunks) > 1:
            chunks[:] = [(np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks]))]
        return chunks[0]

    def search(self, terms: list[str], k: int, *, user: str | None = None,
               allowed: set[str] | None = None) -> list[tuple[str, float]]:
        """Return the top-k active (id, BM25) for `user` over the analysed query `terms`, best first."""
        n = self.size  # read once: rows appended during the search are not ranked by it
        if k <= 0 or n == 0:
            return []
        mask = row_mask(n, self._active, self._user, self._users, self._row, user, allowed, self._by_user)
        if mask is None:
            return []
        avgdl = self._total_len / n if self._total_len else 1.0
        rows_parts, score_parts = [], []
        for term in dict.fromkeys(terms):  # distinct, in order
            found = self._postings(term)
            if found is None:
                continue
            rows, tf = found
            rows, tf = rows[rows < n], tf[rows < n]
            idf = np.log10((n - len(rows) + 0.5) / (len(rows) + 0.5) + 1.0)  # DuckDB log() is base 10
            ok = mask[rows]
            rows, tf = rows[ok], tf[ok].astype(np.float64)
            norm = K1 * (1.0 - B + B * self._len[rows] / avgdl)
            rows_parts.append(rows)
            score_parts.append(idf * tf * (K1 + 1.0) / (tf + norm))
        if not rows_parts:
            return []
        rows = np.concatenate(rows_parts)
        if not len(rows):
            return []
        hit, inverse = np.unique(rows, return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(score_parts))
        return self._best(hit, scores, k)

    def _best(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Return the k best (id, score), score descending then id ascending (fts's SQL order)."""
        if len(scores) > k:
            # Everything tied with the k-th score stays in, so the id tie-break below sees all of them.
            cut = np.partition(scores, len(scores) - k)[len(scores) - k]
            keep = scores >= cut
            rows, scores = rows[keep], scores[keep]
        ids = [self._ids[r] for r in rows.tolist()]
        ranked = sorted(zip(scores.tolist(), ids, strict=True), key=lambda p: (-p[0], p[1]))
        return [(mid, score) for score, mid in ranked[:k]]

    # ----------------------------------------------------------------- persistence (store.persist)
    def ids(self, n: int | None = None) -> list[str]:
        """Return the ids of the first `n` rows (all rows when None), in row order."""
        return self._ids[: self.size if n is None else n]

    def state(self) -> dict[str, Any]:
        """Return the postings as flat arrays (what `restore` needs besides ids, users and active flags)."""
        terms = list(self._vocab)
        post = [self._postings(t) for t in terms]
        sizes = np.fromiter((len(p[0]) for p in post), dtype=np.int64, count=len(post))
        empty_rows, empty_tf = np.zeros(0, np.int32), np.zeros(0, np.float32)
        return {"lex_terms": terms, "lex_offsets": np.r_[0, np.cumsum(sizes)],
                "lex_rows": np.concatenate([p[0] for p in post]) if post else empty_rows,
                "lex_tf": np.concatenate([p[1] for p in post]) if post else empty_tf,
                "lex_len": self._len[:self.size].copy(), "lex_total": np.array([self._total_len])}

    @classmethod
    def restore(cls, ids: list[str], users: list[str], active: np.ndarray, state: dict[str, Any]) -> LexicalIndex:
        """Return an index over rows `ids` (with their users and flags) holding the saved postings of `state`."""
        index = cls()
        n = len(ids)
        index._grow(n)
        # Users are few: each is coded once, then the rows' codes are one array.
        code = {u: index._users.setdefault(u, len(index._users)) for u in dict.fromkeys(users)}
        index._user[:n] = np.fromiter((code[u] for u in users), dtype=np.int32, count=n)
        index._active[:n] = active
        index._len[:n] = state["lex_len"]
        index._total_len = float(state["lex_total"][0])
        index._ids = list(ids)
        index._row = {mid: r for r, mid in enumerate(ids)}
        index.size = n
        rows, tf, offsets = state["lex_rows"], state["lex_tf"], state["lex_offsets"]
        for k, term in enumerate(state["lex_terms"]):
            index._vocab[term] = k
            index._post.append([(rows[offsets[k]:offsets[k + 1]], tf[offsets[k]:offsets[k + 1]])])
        return index
