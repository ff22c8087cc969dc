"""The research wing's commands: `mnemo data download` and `mnemo eval`; mnemo.cli adds them to the `mnemo` app.

They live beside what they run (the loaders and the benchmark runner), so the main command stays
a thin layer over `Memory`. Each imports its library lazily, so `mnemo --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

data_app = typer.Typer(help="Benchmark data: download the public originals.", no_args_is_help=True)
console = Console()


@data_app.command("download")
def data_download(name: str = typer.Argument(..., help="locomo | realtalk | beam | mquake_hard | meme | prefeval | longmemeval"),
                  dest: Path = typer.Option(Path("data/external"), help="Folder to write into (then set MNEMO_DATA_DIR).")) -> None:
    """Download a benchmark's original files from upstream at pinned commits, checking sha256."""
    from mnemo.eval.datasets.download import download

    for path in download(name, dest):
        console.print(str(path))


def eval_(benchmark: str = typer.Argument(..., help="scenarios | locomo | realtalk | beam | mquake | prefeval | meme "
                                         "| writes | pairs | answerable"),
          recipes: list[str] = typer.Option(None, "--recipe", "-r", help="Recipe to run; repeat for several "
                                            "(default: dense, bm25, hybrid for locomo / realtalk, else default)."),
          llm: str = typer.Option("offline", "--llm", help="Model mode: offline | live | record:PATH | replay:PATH."),
          embedder: str = typer.Option(None, "--embedder", help="Embedder: hash | minilm | default (= minilm) "
                                       "(default: minilm; auto for scenarios)."),
          limit: int = typer.Option(None, "--limit", help="Only the first N scenarios / conversations / chats / "
                                    "cases / topics; writes: the first N examples of each family."),
          split: str = typer.Option("test", help="writes: the examples' split: dev | test | all."),
          budgets: str = typer.Option("256,512,1024,2048", help="locomo / realtalk: comma-separated budgets "
                                      "for budgeted recall ('' to skip it)."),
          scope: str = typer.Option("conversation", help="locomo / realtalk: one store per conversation, or one "
                                    "per session ('session': stores of 10-30 turns, asked what each session holds)."),
          folds: int = typer.Option(None, "--folds", help="locomo / realtalk: split conversations into N folds; "
                                    "choose the recipe on the other folds, score each held-out fold (no budgets)."),
          feature_rerank: bool = typer.Option(False, "--feature-rerank", help="with --folds: also fit a scikit-learn "
                                              "feature reranker per fold on the other folds."),
          save_reranker: Path = typer.Option(None, "--save-reranker", help="with --folds: write the reranker fitted "
                                             "on every conversation to this JSON file (mnemo/recipes/rerankers/)."),
          claim_keys: bool = typer.Option(False, "--claim-keys", help="with --folds: also index each turn's parsed "
                                          "claims as keys pointing at the turn (mnemo/eval/bench/keys.py)."),
          budget: int = typer.Option(None, "--budget-tokens", help="beam / mquake / prefeval / meme: recall budget in tokens "
                                     "(default 512, 64, 512, 512)."),
          write: str = typer.Option(None, help="mquake: how edits are written: structured (default) | text. "
                                    "locomo / realtalk / beam: 'remember' runs the conversations through the write "
                                    "path and measures what is kept and packed (mnemo/eval/bench/written.py); "
                                    "with --folds, each question is also ranked over that written store."),
          inter_turns: int = typer.Option(100, help="prefeval: distractor pairs between preference and question."),
          form: str = typer.Option("explicit", help="prefeval: explicit | choice | persona."),
          scenarios: Path = typer.Option(None, help="scenarios: the folder of YAML files (default data/scenarios)."),
          baselines: bool = typer.Option(True, "--baselines/--no-baselines", help="scenarios: also run the "
                                         "four baselines."),
          save: Path = typer.Option(None, "--save", help="pairs: write the update model fitted on the dev pairs to "
                                    "this JSON file (mnemo/recipes/updates.json is the packaged one); answerable: "
                                    "the answerability model fitted on every fold (mnemo/recipes/answerable.json)."),
          rows: Path = typer.Option(None, "--rows", help="answerable: refit from an earlier run's rows.parquet "
                                    "(its features), without asking the questions again."),
          out: Path = typer.Option(None, "--out", "-o", help="Folder for results.json and rows.parquet "
                                   "(default experiments/runs/eval/BENCHMARK).")) -> None:
    """Run scenarios or a real benchmark with a recipe and a model mode; print a table, write results.json + Parquet."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mnemo.eval.bench.runner import narrow, run_eval, summary

    options: dict[str, Any] = {}
    if folds:
        options.update(folds=folds, rerank=feature_rerank, save_reranker=save_reranker, claim_keys=claim_keys)
    elif benchmark in ("locomo", "realtalk"):
        options["budgets"] = tuple(int(b) for b in budgets.split(",") if b.strip())
        options["scope"] = scope
    elif budget is not None:
        options["budget"] = budget
    if benchmark == "mquake":
        options["write"] = write or "structured"
    elif write == "remember" and folds and benchmark in ("locomo", "realtalk"):
        options["write"] = True
    elif write == "remember" and benchmark in ("locomo", "realtalk", "beam"):
        options = {"data": benchmark}
        benchmark = "written"
    elif write is not None:
        raise typer.BadParameter(f"--write {write!r} does not apply to {benchmark}; see --help")
    if benchmark == "prefeval":
        options.update(inter_turns=inter_turns, form=form)
    if benchmark == "writes":
        options["split"] = split
    if benchmark == "pairs":
        options["save"] = str(save) if save else None
    if benchmark == "answerable":
        options = {"save": str(save) if save else None, "n_folds": folds or 4, "rows_from": str(rows) if rows else None}
    if embedder == "default":
        embedder = "minilm"
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task(benchmark, total=None)
        aggregates, json_path, parquet_path = run_eval(
            benchmark, recipes=recipes or None, llm=llm, embedder=embedder, out=out, limit=limit,
            scenario_dir=scenarios, baselines=baselines,
            progress=lambda done, total, label: bar.update(task, completed=done, total=total,
                                                           description=f"{benchmark}: {label}"),
            **options)
    if folds and benchmark in ("locomo", "realtalk"):
        # Out-of-fold means only: per-fold and per-category figures are in results.json.
        aggregates = {g: a for g, a in aggregates.items() if g.endswith(" | main")}
    header, rows = summary(benchmark, aggregates)
    if benchmark == "scenarios":
        header, rows = narrow(header, rows)
    table = Table(title=f"mnemo eval {benchmark}")
    for col in header:
        table.add_column(col, overflow="fold", no_wrap=col in ("group", "metric"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(f"wrote {json_path} and {parquet_path}")
