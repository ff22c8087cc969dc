"""The one runner: a benchmark by name, its results written, its summary table (`mnemo eval`).

    res = run_benchmark("locomo", recipes=["dense", "bm25", "hybrid"], limit=2)
    aggregates, json_path, parquet_path = run_eval("beam", limit=2)   # runs, then writes results.json + Parquet
    header, rows = summary("beam", aggregates)

The benchmarks are the runners the modules of this package register (`common.register`); this
module looks them up by name and imports none of them. Results are written by
`mnemo.eval.harness.write_results`.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemo.config import recipe
from mnemo.errors import ConfigError
from mnemo.eval.bench.common import RUNNERS, TABLES, BenchResult, Progress

# Retrieval benchmarks compare the retrievers; the others run the default write + recall path.
DEFAULT_RECIPES = {"locomo": ("dense", "bm25", "hybrid"), "realtalk": ("dense", "bm25", "hybrid")}
# With --folds: the fixed recipes reported beside the fold-selected one (hybrid is the old default).
FOLD_RECIPES = ("dense", "bm25", "hybrid", "fusion", "default")


def run_benchmark(name: str, recipes: Sequence[str] | None = None, **kwargs: Any) -> BenchResult:
    """Return the result of benchmark `name` (one registered in `common.RUNNERS`) under `recipes` (its defaults when None).

    Keyword arguments go to the runner: limit, embedder, llm, progress, and the runner's own
    (budgets for locomo / realtalk; budget; write for mquake; form and inter_turns for prefeval; budget for
    meme, whose one episode is a development check, never a score: see `bench.meme`; split for
    writes, the write-path benchmark of `bench.writes`).
    """
    if name not in RUNNERS:
        raise ConfigError(f"unknown benchmark {name!r}; choose one of {', '.join(RUNNERS)} (or scenarios)")
    return RUNNERS[name](tuple(recipes or DEFAULT_RECIPES.get(name, ("default",))), **kwargs)


# One entry point for `mnemo eval` ------------------------------------------------------------

# The columns a summary table shows per benchmark (results.json keeps every metric).
SUMMARY_COLUMNS = {
    "scenarios": ["probes", "pass_rate", "context_recall", "stale", "forgetting_precision", "forgetting_recall",
                  "collateral", "abstention_correct", "tokens", "RR", "errors"],
    "dialog": ["n", "R@5", "R@10", "R@10_sd", "nDCG@10", "nDCG@10_sd", "S_R@5", "S_R@10", "S_nDCG@10",
               "cover@256", "cover@512", "cover@1024", "cover@2048", "tokens@512", "tokens@2048"],
    "beam": ["n", "current", "stale", "superseded_shown", "both_surfaced", "abstained", "evidence_recall", "tokens"],
    "mquake": ["n", "current_top1", "current_packed", "stale", "chain_recall", "stale_shown", "cascade_ok", "tokens"],
    "prefeval": ["n", "R@5", "R@10", "RR", "pref_packed", "abstained", "tokens"],
    "written": ["n", "kept", "answer@256", "bm25@256", "dense@256", "answer@512", "bm25@512", "dense@512",
                "abstained@512", "fragment_rate"],
    "pairs": ["n", "accuracy", "update_precision", "update_recall", "update_n", "same_precision", "same_recall",
              "same_n"],
    "answerable": ["n", "false_unknown", "unknown_on_unanswerable", "auc", "brier"],
    "meme": ["n", "passed", "real_pass", "context_recall", "leaked", "stale", "abstained", "items", "tokens"],
}


_SHORT_SYSTEMS = {"no_memory": "none", "full_history": "full", "recent_only": "recent", "naive_rag": "rag"}
_SHORT_METRICS = {"pass_rate": "pass rate", "context_recall": "ctx recall", "forgetting_precision": "forget prec",
                  "forgetting_recall": "forget rec", "abstention_correct": "abstain ok"}
_COUNTS = frozenset({"n", "probes", "errors"})  # columns that count things: shown whole, never "4.000"


def summary(benchmark: str, aggregates: dict[str, dict[str, float]]) -> tuple[list[str], list[list[str]]]:
    """Return (header, rows) of a summary table: one row per aggregate group, the benchmark's main columns."""
    if benchmark in TABLES:
        return TABLES[benchmark](aggregates)
    wanted = SUMMARY_COLUMNS["dialog" if benchmark in ("locomo", "realtalk") else benchmark]
    present = [c for c in wanted if any(c in a for a in aggregates.values())]

    def cell(column: str, v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        whole = isinstance(v, float) and v == int(v) and (abs(v) >= 10 or column in _COUNTS)
        return f"{v:.0f}" if whole else f"{v:.3f}"

    return ["group", *present], [[g, *(cell(c, a.get(c)) for c in present)] for g, a in aggregates.items()]


def narrow(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """Return a summary table turned for a terminal: metrics down, groups across, short names.

    Five systems and eleven scenario metrics read at 80 columns this way.
    """
    groups = [_SHORT_SYSTEMS.get(r[0], r[0]) for r in rows]
    return ["metric", *groups], [[_SHORT_METRICS.get(c, c), *(r[k + 1] for r in rows)]
                                 for k, c in enumerate(header[1:])]


def run_eval(benchmark: str, *, recipes: Sequence[str] | None = None, llm: str = "offline",
             embedder: str | None = None, out: str | Path | None = None, limit: int | None = None,
             scenario_dir: str | Path | None = None, baselines: bool = True, progress: Progress | None = None,
             **options: Any) -> tuple[dict[str, dict[str, float]], Path, Path]:
    """Run `benchmark` ("scenarios" or one of `common.RUNNERS`), write its results, return (aggregates, paths).

    Scenarios run through `run_scenarios` (the recipes plus, with `baselines`, the four baselines);
    the real benchmarks through `run_benchmark` with `options` (budgets, budget, write, form,
    inter_turns), or, for locomo / realtalk with `folds`, through `folds.run_folds` (out-of-fold
    selection). Results go to `out` (default experiments/runs/eval/<benchmark>).
    """
    from mnemo.eval.baselines import BASELINES
    from mnemo.eval.harness import run_scenarios, write_results
    from mnemo.eval.scenarios import load_scenarios

    started = time.time()
    folder = Path(out) if out else Path("experiments/runs/eval") / benchmark
    if benchmark == "scenarios":
        names = list(recipes or ["default"])
        scenarios = load_scenarios(scenario_dir)[:limit] if limit else load_scenarios(scenario_dir)
        rows, aggregates, provenance = run_scenarios(
            scenarios, names, BASELINES if baselines else (), embedder=embedder or "auto", llm=llm, progress=progress)
        checksums = {f"scenarios/{Path(s.path).name}": _sha256(Path(s.path)) for s in scenarios if s.path}
        paths = write_results(folder, benchmark="scenarios", rows=rows, aggregates=aggregates,
                              configs={n: recipe(n) for n in names}, provenance=provenance, checksums=checksums,
                              params={"llm": llm, "embedder": embedder or "auto", "limit": limit}, started=started)
        return aggregates, *paths
    if options.get("folds"):
        if benchmark not in ("locomo", "realtalk"):
            raise ConfigError(f"--folds applies to locomo and realtalk, not {benchmark}")
        from mnemo.eval.bench.folds import run_folds

        res = run_folds(benchmark, tuple(recipes or FOLD_RECIPES), folds=options["folds"], limit=limit,
                        embedder=embedder or "minilm", llm=llm, rerank=bool(options.get("rerank")),
                        save_reranker=options.get("save_reranker"), claim_keys=bool(options.get("claim_keys")),
                        write=bool(options.get("write")), progress=progress)
    else:
        options.pop("folds", None)
        options.pop("rerank", None)
        options.pop("save_reranker", None)
        options.pop("claim_keys", None)
        res = run_benchmark(benchmark, recipes, limit=limit, embedder=embedder or "minilm", llm=llm,
                            progress=progress, **options)
    paths = write_results(folder, benchmark=res.name, rows=res.rows, aggregates=res.aggregates, configs=res.configs,
                          provenance=res.provenance, checksums=res.checksums,
                          params={"llm": llm, **res.params}, started=started)
    return res.aggregates, *paths


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
