"""Turn retrieval by store size: R@1, MRR and R@10 of the default recipe beside dense-only and BM25-only.

    MNEMO_DATA_DIR=../shared/data .venv/bin/python benchmarks/recall_by_size.py --out benchmarks/results/by_size.json

LoCoMo and REALTALK, every turn stored verbatim (`run_dialog`), once per session (stores of 10-30
turns, asked the questions whose evidence lies in that session) and once per conversation
(hundreds of turns, every question). Main categories only (LoCoMo 1-4, REALTALK 1-3). The default
recipe's reranker was fitted on the 8 shared LoCoMo conversations (its provenance lists them), so
its LoCoMo figures are in-sample and its REALTALK figures held-out; the out-of-fold LoCoMo figure is
`mnemo eval locomo --folds 4` (docs/benchmarks.md). Dense and BM25 fit nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from mnemo.eval.bench.dialog import run_dialog

RECIPES = ("dense", "bm25", "default")
MAIN = {"locomo": {1, 2, 3, 4}, "realtalk": {1, 2, 3}}
MEASURES = ("R@1", "RR", "R@10")


def table(name: str, scope: str, limit: int | None) -> dict[str, dict[str, float]]:
    """Return {recipe: {measure: mean, "n", "turns"}} over the main categories of one dataset and scope."""
    res = run_dialog(name, RECIPES, limit=limit, budgets=(), scope=scope)
    out = {}
    for recipe in RECIPES:
        rows = [r for r in res.rows if r["recipe"] == recipe and r["category"] in MAIN[name]]
        out[recipe] = {m: statistics.fmean(r[m] for r in rows) for m in MEASURES}
        out[recipe].update(n=len(rows), turns=statistics.median(r["store_turns"] for r in rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="locomo,realtalk")
    ap.add_argument("--limit", type=int, default=None, help="the first N conversations of each dataset")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = ap.parse_args()
    figures = {f"{name} / {scope}": table(name, scope, args.limit)
               for name in args.datasets.split(",") for scope in ("session", "conversation")}
    print("| store | questions | median turns | recipe | R@1 | MRR | R@10 |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for store, by_recipe in figures.items():
        for recipe, f in by_recipe.items():
            print(f"| {store} | {f['n']} | {f['turns']:.0f} | {recipe} | {f['R@1']:.3f} | {f['RR']:.3f} | {f['R@10']:.3f} |")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
