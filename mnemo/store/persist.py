"""What opening a store rebuilds, saved beside it: the BM25 postings and the IVF lists.

Opening a large DuckDB store used to redo work whose inputs had not changed: the first
lexical search analysed every memory's text again (18.7 s at 1M) and the IVF index ran its
k-means and assigned every row again. Both depend only on the rows' ids, texts and vectors,
which never change once written (a status change is an UPDATE of other columns), so the
store saves them beside its file (`<file>.index.npz`, written whole to a temporary name and
renamed into place) and, when it opens, takes them back only if they still describe its rows:

- the saved row ids must be exactly the first rows the store reads now, in the same order
  (rows appended since are analysed and assigned as new writes are);
- a checksum of every saved row's id and text, computed by the database at open, must match
  the one saved (a text changed behind mnemo's back, rows deleted or reordered: no match);
- the file must read back whole (the zip format checks each array's CRC-32).

Anything else is a mismatch: it is logged as a warning with its reason and the store builds
its indexes from the table as before. Active flags and users are never taken from the file;
they are read from the table at every open. The file holds arrays only (no pickles).

Beside it, when every row is in the index (exact, binary or IVF), the index's own float32 rows
are saved as they are held (`<file>.matrix-<token>.npy`, named in the manifest, written whole and
renamed before the manifest that names it): opening then maps that file (copy-on-write) instead
of reading every vector from DuckDB and normalising it again, and the reopened index is the one
that was closed, row for row. Pages are read from the file when a search first needs them.
"""

from __future__ import annotations

import json
import logging
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("mnemo.store")

FORMAT = 2  # bump when the saved arrays change meaning (2: postings of a memory's text and context)
SUFFIX = ".index.npz"
# A store this small rebuilds its postings at open in well under a second: closing it writes nothing.
SAVE_FROM = 20_000


def sidecar(path: str) -> Path:
    """Return where the saved indexes of the store file `path` live."""
    return Path(f"{path}{SUFFIX}")


def pack_strings(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Return strings as one UTF-8 byte array and the offsets that cut it (no pickled objects)."""
    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def unpack_strings(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    """Return the strings `pack_strings` packed."""
    raw = blob.tobytes()
    cuts = offsets.tolist()
    return [raw[a:b].decode() for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def save(path: Path, manifest: dict[str, Any], arrays: dict[str, Any]) -> None:
    """Write the manifest and arrays to `path` atomically (a reader sees the old file or the new one, whole)."""
    out: dict[str, np.ndarray] = {"manifest": np.frombuffer(json.dumps({**manifest, "format": FORMAT}).encode(),
                                                            dtype=np.uint8)}
    for name, value in arrays.items():
        if isinstance(value, list):
            out[f"{name}.blob"], out[f"{name}.offsets"] = pack_strings(value)
        else:
            out[name] = np.asarray(value)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **out)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load(path: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Return (manifest, arrays) saved at `path`; None when there is no file; raise ValueError when it is unreadable."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            raw = {name: z[name] for name in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"unreadable ({type(exc).__name__}: {exc})") from exc
    if "manifest" not in raw:
        raise ValueError("no manifest")
    manifest = json.loads(raw.pop("manifest").tobytes())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"format {manifest.get('format')} is not {FORMAT}")
    arrays: dict[str, Any] = {}
    for name, value in raw.items():
        if name.endswith(".blob"):
            base = name[:-len(".blob")]
            arrays[base] = unpack_strings(value, raw[f"{base}.offsets"])
        elif not name.endswith(".offsets") or f"{name[:-len('.offsets')]}.blob" not in raw:
            arrays[name] = value
    return manifest, arrays


def discard(path: Path, reason: str) -> None:
    """Say loudly that the saved indexes at `path` are not used, and why (they are rebuilt from the table)."""
    log.warning("mnemo: not using the saved indexes %s: %s; rebuilding them from the table", path, reason)


def complete(arrays: dict[str, Any], rows: int) -> bool:
    """Return True when the arrays hold postings (and IVF lists, if any) for exactly `rows` rows."""
    lex = ("ids", "lex_terms", "lex_offsets", "lex_rows", "lex_tf", "lex_len", "lex_total")
    if any(k not in arrays for k in lex) or len(arrays["ids"]) != rows or len(arrays["lex_len"]) != rows:
        return False
    offsets = arrays["lex_offsets"]
    if len(offsets) != len(arrays["lex_terms"]) + 1 or int(offsets[-1]) != len(arrays["lex_rows"]) != len(
            arrays["lex_tf"]) or (len(arrays["lex_rows"]) and int(arrays["lex_rows"].max()) >= rows):
        return False
    if "ivf_lists" in arrays:
        lists = arrays["ivf_lists"]
        return ("ivf_cent" in arrays and "ivf_trained_at" in arrays and len(lists) == rows
                and (not len(lists) or int(lists.max()) < len(arrays["ivf_cent"])))
    return True


def saved_for(store: Any, ids: list[str], engine: str) -> dict[str, Any] | None:
    """Return the saved indexes of `store` when they still describe the first rows of its table (`ids`, in
    the order it reads them), else None, having said why (see the module docstring)."""
    where = sidecar(store.path)
    try:
        found = load(where)
    except ValueError as exc:
        discard(where, str(exc))
        return None
    if found is None:
        return None
    manifest, arrays = found
    m = int(manifest.get("rows", -1))
    expect = {"embedder": store.embedder, "dim": store.dim, "engine": engine}
    wrong = [k for k, v in expect.items() if manifest.get(k) != v]
    if wrong:
        discard(where, f"saved for another {', '.join(wrong)}")
    elif not complete(arrays, m):
        discard(where, "its arrays do not match its row count")
    elif not 0 < m <= len(ids) or arrays["ids"] != ids[:m]:
        discard(where, f"its {m:,} row ids are not the first rows of the table ({len(ids):,} rows)")
    elif store._checksum() ^ store._checksum(ids[m:]) != int(manifest["checksum"]):
        discard(where, "the checksum of the saved rows' ids and texts does not match the table")
    else:
        if manifest.get("matrix"):
            arrays["matrix_file"] = str(where.parent / str(manifest["matrix"]))
            arrays["matrix_rows"] = int(manifest.get("matrix_rows", -1))
        return arrays
    return None


def matrix_files(path: str) -> list[Path]:
    """Return the saved index matrices beside the store file `path` (the current one and any left over)."""
    return sorted(Path(path).parent.glob(f"{Path(path).name}.matrix-*.npy"))


def saved_matrix(saved: dict[str, Any], rows: int, dim: int) -> np.ndarray | None:
    """Return the saved index matrix as a copy-on-write map when it holds `rows` rows of `dim`, else None (logged)."""
    name = saved.get("matrix_file")
    if not name or saved.get("matrix_rows") != rows or len(saved.get("mat_pos", ())) != rows:
        return None
    try:
        matrix = np.load(name, mmap_mode="c", allow_pickle=False)
    except (OSError, ValueError) as exc:
        discard(Path(name), f"unreadable ({type(exc).__name__}: {exc})")
        return None
    if matrix.shape != (rows, dim) or matrix.dtype != np.float32:
        discard(Path(name), f"shape {matrix.shape} {matrix.dtype} is not ({rows}, {dim}) float32")
        return None
    return matrix


def _save_matrix(store: Any, ids: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write the index's rows beside the store; return (manifest entries, arrays) that describe them."""
    index = store.index
    if getattr(index, "kind", "exact") not in ("exact", "binary", "ivf") or index.size != len(ids):
        return {}, {}
    target = Path(f"{store.path}.matrix-{os.urandom(6).hex()}.npy")
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            np.save(f, index.matrix(), allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return {"matrix": target.name, "matrix_rows": len(ids)}, index.layout(ids)


def save_store(store: Any, engine: str) -> int:
    """Save `store`'s postings (and IVF lists) beside its file; return how many rows they cover (0: nothing)."""
    lex = store.lexical.index
    m = len(lex)
    if m == 0:
        return 0
    ids = lex.ids(m)
    arrays: dict[str, Any] = {"ids": ids, **lex.state()}
    if hasattr(store.index, "lists_of"):
        arrays.update(store.index.lists_of(ids))
    saved, layout = _save_matrix(store, ids)
    arrays.update(layout)
    manifest = {"rows": m, "checksum": store._checksum(), "embedder": store.embedder, "dim": store.dim,
                "engine": engine, **saved}
    save(sidecar(store.path), manifest, arrays)
    for old in matrix_files(store.path):
        if old.name != saved.get("matrix"):
            old.unlink(missing_ok=True)
    return m


def worth_saving(store: Any) -> bool:
    """Return True when `store` holds postings for at least SAVE_FROM rows that its saved file does not cover."""
    pending = store.lexical.pending  # None: no postings held at all
    built = len(store.lexical.index)
    return pending is not None and built >= SAVE_FROM and built + len(pending) != store._saved_rows
