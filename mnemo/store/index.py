"""The in-process similarity index: a float32 matrix mirrored from the store.

DuckDB stays the store of record; exact cosine search is served from this matrix
because a numpy matrix-vector product is 10-25x faster than DuckDB's SQL brute
force. The store keeps it in sync on every write (append, status change).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import InvalidInput


class VectorIndex:
    """Rows of unit vectors with the id, user and active flag of each row."""

    def __init__(self, dim: int, capacity: int = 1024):
        self.dim = dim
        self._vecs = np.zeros((capacity, dim), dtype=np.float32)
        self._active = np.zeros(capacity, dtype=bool)
        self._user = np.zeros(capacity, dtype=np.int32)
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._users: dict[str, int] = {}
        self._by_user = UserRows()
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _grow(self, need: int) -> None:
        cap = len(self._vecs)
        if need <= cap:
            return
        new = max(need, cap * 2)
        # Doubling keeps appends amortised O(1) without reallocating on every write.
        for name in ("_vecs", "_active", "_user"):
            old = getattr(self, name)
            shape = (new, self.dim) if old.ndim == 2 else (new,)
            grown = np.zeros(shape, dtype=old.dtype)
            grown[: self.size] = old[: self.size]
            setattr(self, name, grown)

    def _user_code(self, user: str) -> int:
        return self._users.setdefault(user, len(self._users))

    def add(self, ids: list[str], users: list[str], vecs: np.ndarray, active: np.ndarray | None = None) -> None:
        """Append rows (vectors are normalised here, so callers may pass raw embeddings)."""
        vecs = np.asarray(vecs, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim or vecs.shape[0] != len(ids):
            raise InvalidInput(f"expected {len(ids)} vectors of dimension {self.dim}, got shape {vecs.shape}")
        n = len(ids)
        self._grow(self.size + n)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        sl = slice(self.size, self.size + n)
        # Divided straight into place: no temporary copy of a large batch.
        np.divide(vecs, norms, out=self._vecs[sl])
        self._active[sl] = True if active is None else active
        self._user[sl] = [self._user_code(u) for u in users]
        for offset, mid in enumerate(ids):
            self._row[mid] = self.size + offset
        self._ids.extend(ids)
        self.size += n

    def load(self, ids: list[str], users: list[str], active: np.ndarray,
             batches: Iterable[tuple[int, np.ndarray]], where: np.ndarray | None = None) -> None:
        """Fill this empty index with `ids` (their users and flags), each vector written once, straight to its row.

        `batches` yields (first row, vectors) in the order of `ids`; `where[i]` is the row that the
        i-th id takes (None: the same order). No second copy of the matrix is held: opening a large
        store needs the matrix once, not twice (benchmarks/probe_open_1m.py).
        """
        n = len(ids)
        self._grow(n)
        for start, vecs in batches:
            end = start + len(vecs)
            self._place(slice(start, end) if where is None else where[start:end], vecs)
        self._take_rows(ids, users, active, where)

    def adopt(self, ids: list[str], users: list[str], active: np.ndarray, matrix: np.ndarray,
              saved: dict[str, Any]) -> bool:
        """Make this empty index the one saved (`store.persist`) and return True (False: nothing was done).

        `matrix` is its rows as they were held (a map of the saved file), `saved["mat_pos"][i]` the
        row of the i-th id; flags and users are the table's.
        """
        n = len(ids)
        self._vecs = matrix
        self._active, self._user = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int32)
        self._take_rows(ids, users, active, np.asarray(saved["mat_pos"], dtype=np.int64))
        return True

    def matrix(self) -> np.ndarray:
        """Return the index's rows (unit vectors, in its own row order), to save."""
        return self._vecs[: self.size]

    def layout(self, ids: list[str]) -> dict[str, Any]:
        """Return where each of `ids` is in this index (`mat_pos`), to save beside `matrix()`."""
        return {"mat_pos": np.fromiter((self._row[i] for i in ids), dtype=np.int64, count=len(ids))}

    def _take_rows(self, ids: list[str], users: list[str], active: np.ndarray, where: np.ndarray | None) -> None:
        """Set the ids, users and flags of the first len(ids) rows: the i-th id at row `where[i]`."""
        n = len(ids)
        order = np.arange(n) if where is None else np.argsort(where, kind="stable")
        self._ids = list(ids) if where is None else [ids[i] for i in order.tolist()]
        # Users are few: each is coded once, then the rows' codes are one array.
        code = {u: self._user_code(u) for u in dict.fromkeys(users)}
        self._user[:n] = np.fromiter((code[u] for u in users), dtype=np.int32, count=n)[order]
        self._active[:n] = np.asarray(active, dtype=bool)[order]
        self._row = {mid: r for r, mid in enumerate(self._ids)}
        self._by_user.reset()
        self.size = n

    def _place(self, rows: slice | np.ndarray, vecs: np.ndarray) -> None:
        """Write unit vectors of `vecs` to `rows` of the matrix (normalised as `add` does)."""
        vecs = np.asarray(vecs, dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        if isinstance(rows, slice):
            np.divide(vecs, norms, out=self._vecs[rows])
        else:
            self._vecs[rows] = vecs / norms

    def set_active(self, ids: list[str], active: bool) -> None:
        """Mark rows active or inactive (a tombstone leaves the row, only the flag changes)."""
        rows = [self._row[i] for i in ids if i in self._row]
        self._active[rows] = active

    def vectors(self, ids: list[str]) -> np.ndarray:
        """Return the stored unit vectors of `ids` (rows of zeros for unknown ids)."""
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        for k, mid in enumerate(ids):
            row = self._row.get(mid)
            if row is not None:
                out[k] = self._vecs[row]
        return out

    def _mask(self, user: str | None, allowed: set[str] | None) -> np.ndarray | None:
        """Return the boolean mask of rows a search may return (active, of `user`, in `allowed`), or None."""
        # Read once: a concurrent append may grow the size while the mask is built.
        return row_mask(self.size, self._active, self._user, self._users, self._row, user, allowed, self._by_user)

    def search(
        self, query: np.ndarray, k: int, *, user: str | None = None, allowed: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """Return the top-k active (id, cosine) for `user`, optionally only among `allowed` ids."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise InvalidInput(f"query vector has dimension {q.shape[0]}, the store uses {self.dim}")
        if self.size == 0 or k <= 0:
            return []
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        q = q / norm
        mask = self._mask(user, allowed)
        rows = np.flatnonzero(mask) if mask is not None else np.zeros(0, dtype=np.int64)
        if rows.size == 0:
            return []
        # A dense product over all rows beats gathering a large subset first (no copy of the matrix).
        if rows.size > self.size // 4:
            scores = self._vecs[: self.size] @ q
            scores = scores[rows]
        else:
            scores = self._vecs[rows] @ q
        k = min(k, rows.size)
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self._ids[rows[t]], float(scores[t])) for t in top]


class UserRows:
    """Each user's rows among an index's first n, kept as rows are appended.

    A search for one user then marks that user's rows, not a pass over every row: at 1M rows of
    10 users, building a small user's mask took 0.35 ms a search, the most of a write's neighbour
    search (#20). Rows are appended with their user set before the index's size grows, and a row's
    user never changes except when an index rewrites its rows (loading, IVF regrouping): those
    call `reset`, and the next read starts again from row 0.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._upto = 0
        self._rows: dict[int, np.ndarray] = {}

    def reset(self) -> None:
        with self._lock:
            self._upto, self._rows = 0, {}

    def of(self, code: int, user_of: np.ndarray, n: int) -> np.ndarray:
        """Return the rows below `n` whose user code is `code`, ascending."""
        with self._lock:
            if n > self._upto:
                new = user_of[self._upto:n]
                for c in np.unique(new).tolist():
                    found = np.flatnonzero(new == c) + self._upto
                    old = self._rows.get(c)
                    self._rows[c] = found if old is None else np.concatenate([old, found])
                self._upto = n
            rows = self._rows.get(code)
        if rows is None:
            return np.zeros(0, dtype=np.int64)
        # A search that read the size before a concurrent append sees only the rows it counted.
        return rows[: np.searchsorted(rows, n)] if rows.size and rows[-1] >= n else rows


def row_mask(n: int, active: np.ndarray, user_of: np.ndarray, codes: dict[str, int], row_of: dict[str, int],
             user: str | None, allowed: set[str] | None, by_user: UserRows | None = None) -> np.ndarray | None:
    """Return the mask of the first `n` rows a search may return: active, of `user` (by its code in `codes`)
    and, with `allowed`, among those ids (`row_of` maps id -> row); None when `user` has no row at all.
    With `by_user` (the index's `UserRows`), the user's rows are marked instead of compared row by row.
    Shared by the vector indexes and `lexical.LexicalIndex`, which keep rows the same way."""
    if user is not None and by_user is not None:
        code = codes.get(user)
        if code is None:
            return None
        rows = by_user.of(code, user_of, n)
        mask = np.zeros(n, dtype=bool)  # untouched pages stay unallocated: a small user costs its rows
        mask[rows[active[rows]]] = True
    else:
        mask = active[:n].copy()
        if user is not None:
            code = codes.get(user)
            if code is None:
                return None
            mask &= user_of[:n] == code
    if allowed is not None:
        rows = np.fromiter((r for i in allowed if (r := row_of.get(i)) is not None and r < n), dtype=np.int64)
        keep = np.zeros(n, dtype=bool)
        keep[rows] = True
        mask &= keep
    return mask
