"""Record a notebook's results next to it: `record(name, value, out_dir)` and `save_figure(fig, name, out_dir)`.

A notebook run by `mnemo sweep` gets its `out_dir` parameter from the runner; run by hand it
defaults to ".". Every value is stored under its name in `out_dir/results.json` (recording a
name twice keeps the last value, so re-running a cell interactively does not duplicate it),
and `mnemo collect` reads every run's results.json into one table.

Values are made JSON-able here: numpy scalars and arrays, pandas frames (a list of row
objects) and series, dataclasses, datetimes and paths; NaN and infinities become null.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, is_dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

RESULTS = "results.json"


def jsonable(value: Any) -> Any:
    """Return `value` as plain JSON values (dict, list, str, number, bool, None)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    # numpy and pandas are optional here: recognise them by their conversion methods.
    if hasattr(value, "to_dict") and hasattr(value, "columns"):
        return jsonable(value.to_dict(orient="records"))
    if hasattr(value, "to_dict") and hasattr(value, "index"):
        return jsonable(value.to_dict())
    if hasattr(value, "tolist"):
        return jsonable(value.tolist())
    if hasattr(value, "item"):
        return jsonable(value.item())
    raise InvalidInput(f"record(): cannot store a {type(value).__name__} as JSON; pass numbers, text, "
                       "lists, dicts, dataclasses or pandas frames")


def results_path(out_dir: str | Path = ".") -> Path:
    """Return the results.json path of `out_dir` (created if missing)."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / RESULTS


def read_results(out_dir: str | Path = ".") -> dict[str, Any]:
    """Return everything recorded in `out_dir` so far ({} when nothing is)."""
    path = Path(out_dir) / RESULTS
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    # Write then rename, so a reader (or a killed kernel) never sees half a file.
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False), encoding="utf-8")
    os.replace(tmp, path)


def record(name: str, value: Any, out_dir: str | Path = ".") -> Any:
    """Store `value` under `name` in out_dir/results.json and return it unchanged (for display)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("record() needs a non-empty name")
    path = results_path(out_dir)
    data = read_results(out_dir)
    data[name] = jsonable(value)
    _write(path, data)
    return value


def record_many(values: dict[str, Any], out_dir: str | Path = ".", prefix: str = "") -> dict[str, Any]:
    """Store every item of `values` under `prefix + name` (one write) and return `values`.

    Flat scalars recorded this way become one column each in `mnemo collect`'s table.
    """
    path = results_path(out_dir)
    data = read_results(out_dir)
    data.update({f"{prefix}{k}": jsonable(v) for k, v in values.items()})
    _write(path, data)
    return values


def save_figure(fig: Any, name: str, out_dir: str | Path = ".", dpi: int = 110) -> Path:
    """Save a matplotlib figure as out_dir/<name>.png, list it under "figures" in results.json; return the path."""
    path = results_path(out_dir).parent / f"{name}.png"
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    figures = read_results(out_dir).get("figures") or []
    if path.name not in figures:
        record("figures", [*figures, path.name], out_dir)
    return path
