"""The profile printout the benchmarks share: cProfile's top functions by cumulative and by own time."""

from __future__ import annotations

import io
import pstats
from typing import Any


def report(prof: Any, top: int) -> str:
    """Return `prof` (a cProfile.Profile) as text: the `top` functions by cumulative time, then by own time."""
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()
