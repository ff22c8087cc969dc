"""Where a run's inputs come from: the code's git commit and the folder of benchmark data.

    git_commit()             # "4742fed...+dirty", or "unknown" outside a git checkout
    dataset_root("locomo")   # $MNEMO_DATA_DIR/locomo, or a DatasetError that says what to do

Results, reports and sweeps record both; the benchmark loaders (`mnemo.eval.datasets`) read
their files below `dataset_root`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mnemo.errors import ConfigError, DatasetError

DATA_ENV = "MNEMO_DATA_DIR"


def git_commit(path: str | Path | None = None) -> str:
    """Return the git commit of the checkout holding `path` (default: this package), or "unknown"."""
    where = Path(path) if path else Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = out.stdout.strip()
    if out.returncode != 0 or not commit:
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                           capture_output=True, text=True, timeout=10).stdout.strip()
    return commit + ("+dirty" if dirty else "")


def data_dir() -> Path:
    """Return the folder holding the benchmark copies, read from $MNEMO_DATA_DIR (the one place it is read)."""
    raw = os.environ.get(DATA_ENV, "").strip()
    hint = (
        f"set {DATA_ENV} to the folder holding locomo/, beam/, mquake_hard/, meme/, prefeval/, realtalk/ "
        "or run `mnemo data download NAME`"
    )
    if not raw:
        raise ConfigError(f"{DATA_ENV} is not set; {hint}")
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{DATA_ENV}={raw!r} is not a folder; {hint}")
    return path


def dataset_root(name: str, path: str | Path | None = None) -> Path:
    """Return the folder of dataset `name`: `path` when given, else `$MNEMO_DATA_DIR/<name>`."""
    root = Path(path).expanduser() if path is not None else data_dir() / name
    if not root.exists():
        raise DatasetError(
            f"{name}: {root} does not exist; run `mnemo data download {name}` or fix {DATA_ENV}"
        )
    return root
