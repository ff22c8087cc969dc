"""The page a person opens after `mnemo run`: the executed benchmark report as one HTML file.

    render("experiments/runs/report/<point>/40_benchmark_report.ipynb", "experiments/report.html")

The report notebook also takes from here where its numbers came from (`sources`) and the
calibrated recipe it used beside the one this run fitted (`calibration`).

nbconvert renders the notebook papermill executed: its text, tables and figures, without the
code (the notebook beside it has the code). A header says when it ran, from which commit and
with which parameters, read from what papermill recorded in the notebook. The page is one
self-contained file: figures are embedded, and it loads nothing from the network.

This is the only module that imports nbconvert (lazily: it comes with the notebooks extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from ..config import RECIPE_DIR, RECIPES
from ..errors import ConfigError

DATA = Path(__file__).resolve().parents[2] / "data"  # the sets the project ships: scenarios, pairs, trust, audit

# nbconvert's page loads MathJax and require.js from a CDN; the report has no maths and no widgets,
# and an offline page must not reach out, so those script tags are not written.
_CDN_SCRIPT = re.compile(r"<script[^>]*\ssrc=\"https?://[^\"]*\"[^>]*>\s*</script>\s*", re.I)


def header(nb: Any, commit: str = "") -> str:
    """Return the report's opening note (markdown): when the notebook ran, how long, its parameters."""
    meta = nb.metadata.get("papermill", {})
    params = meta.get("parameters") or {}
    lines = ["**How this page was made.** `mnemo run` executed `notebooks/"
             f"{Path(meta.get('input_path') or 'the report notebook').name}` headless with papermill"
             + (f" from {meta['start_time'][:19].replace('T', ' ')} UTC" if meta.get("start_time") else "")
             + (f" ({meta['duration']:.0f} s)" if isinstance(meta.get("duration"), (int, float)) else "")
             + (f", at commit `{commit}`" if commit else "")
             + "; nbconvert rendered it without the code. Parameters:", ""]
    lines += [f"- `{name}` = `{value!r}`" for name, value in params.items()]
    return "\n".join(lines)


def render(notebook: str | Path, out: str | Path, commit: str = "") -> Path:
    """Write the executed `notebook` as a self-contained HTML page at `out` (code hidden); return its path."""
    import nbformat
    from nbconvert import HTMLExporter

    source = Path(notebook)
    if not source.exists():
        raise ConfigError(f"{source}: no executed report notebook to render; run `mnemo run` first")
    nb = nbformat.read(source, as_version=4)
    # The header goes after the title cell, so the page still opens with the notebook's own title.
    title_at = next((i + 1 for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), 0)
    nb.cells.insert(title_at, nbformat.v4.new_markdown_cell(header(nb, commit)))
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    title = nb.cells[0].source.lstrip("# ").splitlines()[0] if nb.cells and nb.cells[0].cell_type == "markdown" else ""
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title or source.stem}})
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed, so a reader never opens half a page.
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(_CDN_SCRIPT.sub("", body), encoding="utf-8")
    os.replace(tmp, target)
    return target


def _digest(files: list[Path]) -> str:
    """Return a short sha256 over the files' names and bytes, in order."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def recipe_file(name: str, path: str | Path | None = None) -> dict[str, Any] | None:
    """Return a calibrated recipe's file (base, params, provenance), or None for a built-in recipe."""
    file = Path(path) if path else RECIPE_DIR / f"{name}.json"
    if (name in RECIPES and path is None) or not file.exists():
        return None
    return json.loads(file.read_text(encoding="utf-8"))


def _fitted_on(recipe: dict[str, Any]) -> str:
    """Return one line saying what a calibrated recipe was fitted on, from its provenance."""
    prov = recipe.get("provenance", {})
    ex = prov.get("examples", {})
    return (f"fitted {prov.get('created', '?')[:10]} at commit {str(prov.get('git_commit', '?'))[:12]} with "
            f"{prov.get('embedder', '?')}, on {ex.get('pairs', '?')} labelled pairs, {ex.get('trust', '?')} trust "
            f"cases and {ex.get('recall', '?')} recall questions ({ex.get('scenarios', 0)} scenarios, "
            f"{ex.get('locomo_conversations', 0)} LoCoMo conversations)")


def calibration(runs: Any, name: str = "calibrated") -> tuple[Any, str]:
    """Return (a table of the recipe's thresholds, a note) comparing the committed recipe with this run's fit.

    `runs` is `collect_frame`'s table. Columns: the default recipe, the committed `name` recipe
    (the one the report's tables use) and the recipe the calibration grid fitted in this run
    (written in its point folder, never over the committed one), with the rule each obeys.
    """
    import pandas as pd

    committed = recipe_file(name)
    if committed is None:
        raise ConfigError(f"recipe '{name}' has no file in {RECIPE_DIR}; run notebooks/30_calibration.ipynb")
    default = RECIPES[committed.get("base", "default")].params()
    columns = {"default": {k: default.get(k) for k in committed["params"]},
               f"{name} (committed, used above)": committed["params"]}
    lines = [f"The committed `{name}` recipe (`mnemo/recipes/{name}.json`) was {_fitted_on(committed)}."]
    fits = runs[runs.grid == "calibration"] if len(runs) and "grid" in runs else runs.iloc[0:0]
    fresh = None
    if len(fits) and "recipe" in fits:
        fresh = recipe_file(name, fits.iloc[-1].recipe["path"])
    if fresh is not None:
        columns[f"{name} (this run)"] = fresh["params"]
        lines.append(f"This run's calibration ({fits.iloc[-1].point}) was {_fitted_on(fresh)}.")
        note = fits.iloc[-1].get("data_note") if "data_note" in fits else None
        if isinstance(note, str) and note:
            lines.append(f"It ran without the benchmark data: {note}.")
    else:
        lines.append("This run has no finished calibration point, so only the committed recipe is shown.")
    table = pd.DataFrame(columns)
    table["rule (committed)"] = pd.Series(committed.get("provenance", {}).get("rules", {}))
    return table, " ".join(lines)


def sources(runs: Any, systems: dict[str, Any], recipes: list[str], runs_dir: str | Path = "") -> list[dict[str, str]]:
    """Return where every number of the report came from: one row per source (part, source, detail).

    `runs` is `collect_frame`'s table, `systems` the provenance `run_scenarios` returned for
    each system, `recipes` the recipes compared.
    """
    from ..provenance import git_commit

    rows = [{"part": "code", "source": f"mnemo at commit {git_commit()}", "detail": "every number is computed by the "
             "library; the notebooks only call it"}]
    embedders = sorted({str(p.get("embedder")) for p in systems.values() if p.get("embedder")})
    modes = sorted({str((p.get("llm") or {}).get("mode")) for p in systems.values() if p.get("llm")})
    if systems:
        rows.append({"part": "scenario and trust tables", "source": f"embedder {', '.join(embedders)}; model "
                     f"client {', '.join(modes) or 'none'}", "detail": f"systems: {', '.join(systems)}"})
    for folder in sorted(p for p in DATA.iterdir() if p.is_dir()) if DATA.is_dir() else []:
        files = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix != ".md")
        rows.append({"part": f"shipped set {folder.name}", "source": f"data/{folder.name}/ ({len(files)} files)",
                     "detail": f"sha256 {_digest(files)} (names and bytes)"})
    for name in recipes:
        found = recipe_file(name)
        rows.append({"part": f"recipe {name}", "source": f"mnemo/recipes/{name}.json" if found else "built in "
                     "(mnemo.config.RECIPES)", "detail": _fitted_on(found) if found else "hand-set defaults"})
    grids = runs.groupby("grid") if len(runs) and "grid" in runs else []
    for grid, points in grids:
        notes = sorted({n for n in points.get("data_note", []) if isinstance(n, str) and n})
        rows.append({"part": f"sweep {grid}", "source": f"{Path(runs_dir) / grid if runs_dir else grid}/ "
                     f"({len(points)} points of {points.notebook.iloc[0]})",
                     "detail": "; ".join(notes) or "as written in experiments/" + f"{grid}.yaml"})
    return rows
