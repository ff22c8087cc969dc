"""Read-only access to an experiments folder for the HTTP service: the results listing and safe file lookup.

    mnemo serve http --experiments experiments
    GET /v1/experiments                                   -> every results.json, newest first, with its figures
    GET /v1/experiments/file?path=runs/decay_grid/p1/decay.png

Only files named results.json and *.png under the folder are ever read, and a path
is served only when it resolves (symbolic links followed) to a file inside the
folder: no `..`, no absolute paths, no hidden files or folders. Every refusal is
the same NotFound, so a client cannot probe what exists outside the folder.

The folder is the server's, not a tenant's: every API key can read it.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

from ..errors import ConfigError, NotFound

RESULTS = "results.json"
MEDIA = {".json": "application/json", ".png": "image/png"}
MAX_RUNS = 500  # newest results files listed; older ones are still served by path
MAX_PARSE_BYTES = 5_000_000  # larger results files are listed but not parsed (fetch them whole)
MISSING = "no such results file in the experiments folder (only results.json and .png files are served)"


class Run(BaseModel):
    """One results.json: its scalar values become a table row, its figures are shown beside it."""

    path: str = Field(description="the results file, relative to the experiments folder")
    folder: str = Field(description="its folder (a sweep point), relative to the experiments folder")
    modified: datetime
    values: dict[str, str | int | float | bool | None] = Field(description="its scalar results, by name")
    tables: list[str] = Field(description="names of its list or object results (in the file itself)")
    figures: list[str] = Field(description="the PNG files in its folder, relative to the experiments folder")
    error: str | None = Field(None, description="why its values could not be listed")


class Listing(BaseModel):
    """The experiments folder: its results files, newest first, and the figures beside none of them."""

    root: str
    runs: list[Run]
    figures: list[str]


def root(folder: str | Path) -> Path:
    """Return the experiments folder, resolved, or raise ConfigError when it is not a directory."""
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"--experiments {folder}: not a directory; give the folder the sweeps write into")
    return path


def resolve(base: Path, rel: str) -> Path:
    """Return the file `rel` names inside `base` (results.json or a .png), or raise NotFound."""
    # Only canonical relative paths: no empty, "." or ".." segment, no hidden name, no backslash or drive.
    parts = rel.split("/")
    if "\\" in rel or ":" in parts[0] or any(not p or p.startswith(".") for p in parts):
        raise NotFound(MISSING)
    try:
        # resolve() follows links: a link that points out of the folder lands outside `base` and is refused.
        path = (base / PurePosixPath(*parts)).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise NotFound(MISSING) from exc
    if not path.is_relative_to(base) or not path.is_file() or not _served(path):
        raise NotFound(MISSING)
    return path


def _served(path: Path) -> bool:
    return path.name == RESULTS or path.suffix.lower() == ".png"


def media_type(path: Path) -> str:
    """Return the content type a served file is sent with."""
    return MEDIA[".json" if path.name == RESULTS else path.suffix.lower()]


def listing(base: Path) -> dict[str, Any]:
    """Return {"runs": [...], "figures": [...]}: every results.json (newest first) and the PNGs beside none.

    A run is {path, folder, modified, values (its scalar results), tables (names of
    its list or object results), figures (the PNGs in its folder), error}.
    """
    results, pngs = [], []
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if not _served(path):
            continue
        try:
            found = resolve(base, rel)
        except NotFound:
            continue
        (results if found.name == RESULTS else pngs).append((rel, found))
    results.sort(key=lambda item: item[1].stat().st_mtime, reverse=True)
    runs = [_run(base, rel, path) for rel, path in results[:MAX_RUNS]]
    beside = {str(PurePosixPath(r["path"]).parent) for r in runs}
    by_folder: dict[str, list[str]] = {}
    for rel, _ in pngs:
        by_folder.setdefault(str(PurePosixPath(rel).parent), []).append(rel)
    for run in runs:
        run["figures"] = by_folder.get(run["folder"], [])
    loose = [rel for folder, rels in sorted(by_folder.items()) if folder not in beside for rel in rels]
    return {"root": base.name, "runs": runs, "figures": loose}


def _run(base: Path, rel: str, path: Path) -> dict[str, Any]:
    stat = path.stat()
    folder = str(PurePosixPath(rel).parent)
    run: dict[str, Any] = {"path": rel, "folder": folder, "modified": datetime.fromtimestamp(stat.st_mtime, timezone.utc),
                           "values": {}, "tables": [], "figures": [], "error": None}
    if stat.st_size > MAX_PARSE_BYTES:
        run["error"] = f"{stat.st_size:,} bytes: too large to list; open the file itself"
        return run
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        run["error"] = f"unreadable: {type(exc).__name__}"
        return run
    if not isinstance(data, dict):
        run["error"] = "not a JSON object"
        return run
    for name, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            # JSON responses cannot carry NaN or infinities; a missing number is shown as empty.
            run["values"][name] = None
        elif value is None or isinstance(value, (str, int, float, bool)):
            run["values"][name] = value
        elif name != "figures":
            run["tables"].append(name)
    return run
