"""Real benchmarks through mnemo: one module a benchmark, one runner they register with.

    from mnemo.eval import bench
    res = bench.run_benchmark("locomo", recipes=["dense", "bm25", "hybrid"], limit=2)
    res.rows, res.aggregates              # one row per question and recipe; means by group
    bench.run_eval("beam", limit=2)       # run, then write results.json + Parquet (`mnemo eval`)

`common` holds what every benchmark shares (`Bench`, `BenchStore`, recall's `ranking`,
`group_means`, `guard`) and the registry; `dialog` (LoCoMo, REALTALK), `updates` (BEAM,
MQuAKE-hard, PrefEval), `meme` (the one MEME episode) and `writes` (the write path) register
their runners with `common.register`; `runner` runs one by name and imports none of them;
`folds` selects LoCoMo / REALTALK recipes out of fold. Importing this package registers every
benchmark, in the order below (the order `mnemo eval` lists them).
"""

from __future__ import annotations

# Importing a benchmark module registers its runners; this order is the order `mnemo eval` lists them.
from mnemo.eval.bench import dialog, updates, meme, writes, written, pairs, answerable  # noqa: F401  # isort: skip
from mnemo.eval.bench.common import (
    BUDGETS,
    EPOCH,
    RUNNERS,
    Bench,
    BenchResult,
    BenchStore,
    CachedEmbedder,
    Progress,
    add_turns,
    group_means,
    guard,
    hits,
    hits_then,
    order,
    ranking,
    register,
    run_of,
    session_times,
    turn_meta,
)
from mnemo.eval.bench.dialog import DIALOG_KEYS, SCOPES, run_dialog, run_locomo, run_realtalk, stores_of
from mnemo.eval.bench.runner import (
    DEFAULT_RECIPES,
    FOLD_RECIPES,
    SUMMARY_COLUMNS,
    narrow,
    run_benchmark,
    run_eval,
    summary,
)

# The registered benchmarks, by name (what `run_benchmark` accepts besides "scenarios").
BENCHMARKS = tuple(RUNNERS)

__all__ = [
    "BENCHMARKS", "BUDGETS", "DEFAULT_RECIPES", "DIALOG_KEYS", "EPOCH", "FOLD_RECIPES", "RUNNERS", "SCOPES",
    "SUMMARY_COLUMNS", "Bench", "BenchResult", "BenchStore", "CachedEmbedder", "Progress", "add_turns",
    "group_means", "guard", "hits", "hits_then", "narrow", "order", "ranking", "register", "run_benchmark",
    "run_dialog", "run_eval", "run_locomo", "run_of", "run_realtalk", "session_times", "stores_of", "summary",
    "turn_meta",
]
