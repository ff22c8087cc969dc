"""Every notebook: a clean parameters cell, no logic inside, and a headless run with tiny parameters whose
recorded results exist and are sane. The five runs share two kernels' worth of CPU (a thread pool)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import nbformat
import pytest

from mnemo.config import Config
from mnemo.eval import trust_eval
from mnemo.lab import calibrate, sweeps

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NAMES = ["00_quickstart", "10_threshold_sweep", "20_decay_simulation", "30_calibration", "40_benchmark_report"]
SQL = re.compile(r"\b(select\s.+\sfrom|insert\s+into|create\s+table)\b", re.I | re.S)
PROMPT = re.compile(r"\b(you are an?|system prompt|respond with json)\b", re.I)


def cells(name: str) -> list:
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells


def test_every_notebook_is_here():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_cell_has_an_id(name):
    # nbformat 4.5 requires cell ids; a cell without one makes every headless run print a MissingIDFieldWarning.
    raw = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    assert [i for i, c in enumerate(raw["cells"]) if "id" not in c] == []


@pytest.mark.parametrize("name", NAMES)
def test_one_parameters_cell_of_plain_literals_with_help(name):
    code = [c for c in cells(name) if c.cell_type == "code"]
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0] is code[0], "the first code cell, and only it, is tagged parameters"
    lines = [line for line in tagged[0].source.splitlines() if line.strip()]
    names = []
    for line in lines:
        stmt = ast.parse(line).body[0]
        assert isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name), line
        ast.literal_eval(stmt.value)  # a plain literal, nothing computed
        assert re.search(r"#\s*\S", line), f"no help comment: {line}"
        names.append(stmt.targets[0].id)
    declared = sweeps.notebook_parameters(NOTEBOOKS / f"{name}.ipynb")
    # papermill skips a line it cannot parse (an "=" in the help): every parameter must survive inspection.
    assert list(declared) == names and all(spec["help"] for spec in declared.values())
    assert "out_dir" in declared


@pytest.mark.parametrize("name", NAMES)
def test_no_logic_sql_or_prompts_in_notebooks(name):
    for cell in cells(name):
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            assert not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)), \
                f"{name}: define functions in the library, not in the notebook"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not SQL.search(node.value) and not PROMPT.search(node.value), node.value
        assert "import duckdb" not in cell.source and "import papermill" not in cell.source


def small_sets(folder: Path) -> tuple[Path, Path]:
    """Write a few pairs of each label and a few quick trust cases (no slow tools) for the calibration run."""
    pairs = []
    for label in ("duplicate", "corroborate", "supersede", "novel"):
        mine = [p for p in calibrate.load_pairs() if p["label"] == label]
        pairs += [p for p in mine if p["split"] == "train"][:4] + [p for p in mine if p["split"] == "heldout"][:2]
    cases = [c for c in trust_eval.load(trust_eval.TRUST_CASES) if (c.get("tool") or {}).get("fail") != "timeout"]
    chosen = [c for c in cases if not c.get("ladder")][::4] + [c for c in cases if c.get("ladder")][::6]
    pair_file, trust_file = folder / "pairs.jsonl", folder / "trust.jsonl"
    pair_file.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    trust_file.write_text("".join(json.dumps(c) + "\n" for c in chosen))
    return pair_file, trust_file


def tiny_params(folder: Path) -> dict[str, dict]:
    pair_file, trust_file = small_sets(folder)
    locomo = 1 if os.environ.get("MNEMO_DATA_DIR") and (Path(os.environ["MNEMO_DATA_DIR"]) / "locomo").exists() else 0
    return {
        "00_quickstart": {"embedder": "hash"},
        "10_threshold_sweep": {"embedder": "hash", "pairs_split": "heldout", "scenarios": 2,
                               "duplicate_threshold": 0.9},
        "20_decay_simulation": {"days": 56, "personas": 1, "trivia_per_session": 1, "queries_per_session": 1},
        "30_calibration": {"embedder": "hash", "recipe_dir": ".", "recipe_name": "smoke", "scenarios": 3,
                           "locomo_conversations": locomo, "locomo_questions": 12, "foreign_questions": 6,
                           "pairs_path": str(pair_file), "trust_path": str(trust_file),
                           "write_examples_per_family": 1 if locomo else 0},
        "40_benchmark_report": {"embedder": "hash", "recipes": "default,dense", "scenarios": 2, "baselines": True,
                                "trust_recipes": "", "locomo_conversations": 0, "runs_dir": ""},
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    """Run the five notebooks headless, two at a time; return each one's results.json by name."""
    root = tmp_path_factory.mktemp("notebooks")
    params = tiny_params(root)
    # Processes, as `sweep` uses: papermill changes the process's working directory for each point, so two
    # points in threads of one process race for it (a relative recipe_dir then lands in the wrong folder).
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        futures = {name: pool.submit(sweeps.run_point, str(NOTEBOOKS / f"{name}.ipynb"), str(root / name),
                                     params[name], {"out_dir": str(root / name)}, grid="smoke")
                   for name in NAMES}
    out = {}
    for name, fut in futures.items():
        status = fut.result()
        error = (root / name / "error.txt")
        assert status["status"] == "done", error.read_text() if error.exists() else status
        out[name] = {**json.loads((root / name / "results.json").read_text()), "_folder": root / name}
    return out


def figures_exist(res: dict) -> None:
    assert res["figures"] and all((res["_folder"] / f).exists() for f in res["figures"])
    assert (res["_folder"] / f"{res['notebook']}").exists()


def test_quickstart(runs):
    res = runs["00_quickstart"]
    figures_exist(res)
    assert res["recall_confidence"] in ("certain", "vague") and res["unknown_confidence"] == "unknown"
    assert any("Lisbon" in t for t in res["recall_texts"]) and not any("Berlin" in t for t in res["recall_texts"])
    assert res["superseded"] >= 1 and res["statuses"]["superseded"] >= 1
    assert res["forgotten"] and "tea" in res["forgotten"][0] and res["dry_run_matches_forget"]


def test_threshold_sweep(runs):
    res = runs["10_threshold_sweep"]
    figures_exist(res)
    assert res["pairs_pairs"] == 32 and res["write_config"]["duplicate_threshold"] == 0.9
    for key in ("pairs_forgetting_precision", "pairs_forgetting_recall", "pairs_collateral", "pairs_accuracy",
                "scen_pass_rate", "scen_context_recall"):
        assert 0.0 <= res[key] <= 1.0, key
    assert res["scen_probes"] > 0 and res["scen_errors"] == 0


def test_decay_simulation(runs):
    res = runs["20_decay_simulation"]
    figures_exist(res)
    assert res["days"] == 56 and res["personas"] == 1 and res["queries"] > 0
    assert len(res["timeline"]) == 8 and res["timeline"][-1]["day"] == 56
    assert res["critical_lost"] >= 0 and res["stale_recalls"] >= 0


def test_calibration_writes_a_loadable_recipe(runs):
    res = runs["30_calibration"]
    figures_exist(res)
    path = Path(res["recipe"]["path"])
    assert path.parent == res["_folder"] and path.name == "smoke.json"
    data = json.loads(path.read_text())
    cfg = Config.from_params(data["base"], **data["params"])
    assert cfg.write.arbitration_low < cfg.write.duplicate_threshold
    assert 0.0 <= cfg.recall.vague_at <= cfg.recall.certain_at <= 1.0 and 0.0 <= cfg.trust.act_threshold <= 1.0
    prov = data["provenance"]
    assert prov["embedder"] == "hash-bow-384" and prov["git_commit"]
    assert set(prov["heldout"]) >= {"pairs", "bands", "trust"} and prov["heldout"]["pairs"]["pairs"] == 8


def test_benchmark_report(runs):
    res = runs["40_benchmark_report"]
    figures_exist(res)
    assert {"mnemo:default", "mnemo:dense", "naive_rag", "no_memory"} <= set(res["scenarios"])
    assert all(0.0 <= a["pass_rate"] <= 1.0 for a in res["scenarios"].values())
    assert (res["_folder"] / "scenarios.csv").exists()
    # Where the numbers came from: the code, the shipped sets with their checksums, every recipe compared.
    parts = {row["part"]: row for row in res["sources"]}
    assert parts["code"]["source"].startswith("mnemo at commit ")
    assert {"shipped set scenarios", "shipped set pairs", "shipped set trust", "recipe default", "recipe dense"} <= set(parts)
    assert "hash-bow-384" in parts["scenario and trust tables"]["source"]
    # The committed calibrated recipe, with what it was fitted on; no sweep ran here, so no fresh fit beside it.
    assert "mnemo/recipes/calibrated.json" in res["calibration"]["note"] and "fitted" in res["calibration"]["note"]
    assert "no finished calibration point" in res["calibration"]["note"]


def test_the_report_renders_as_one_offline_page(runs, tmp_path):
    from mnemo.lab.report import render

    res = runs["40_benchmark_report"]
    page = render(res["_folder"] / "40_benchmark_report.ipynb", tmp_path / "report.html", commit="abc123")
    html = page.read_text()
    assert "Benchmark report" in html and "at commit <code>abc123</code>" in html
    assert "Where the numbers came from" in html and "The calibrated recipe" in html
    # The figures are inside the page; the code stays in the notebook; nothing is loaded from the network.
    assert html.count("data:image/png;base64,") >= 3
    assert "run_scenarios(" not in html and not re.search(r"<script[^>]*src=\"https?:", html)


def test_papermill_runs_a_notebook_on_the_default_kernel(tmp_path):
    """`papermill NOTEBOOK OUT` as papermill's own docs show it, right after `pip install -e .`: no `-k`,
    no kernel registered by mnemo, and Jupyter's user folders empty (as on a fresh machine)."""
    jupyter = {var: str(tmp_path / "jupyter" / sub) for var, sub in (
        ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"))}
    # The kernel imports mnemo from the checkout under test, whatever checkout the environment was installed from.
    env = {**os.environ, **jupyter, "PYTHONPATH": str(ROOT)}
    script = Path(sys.executable).parent / "papermill"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "papermill"]
    out = tmp_path / "out.ipynb"
    res = subprocess.run([*cmd, str(NOTEBOOKS / "00_quickstart.ipynb"), str(out), "-p", "embedder", "hash",
                          "--no-progress-bar"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    executed = nbformat.read(out, as_version=4)
    assert executed.metadata.kernelspec.name == "python3"
    assert executed.metadata.papermill.parameters == {"embedder": "hash"}
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    # The quickstart records its results beside where it ran (out_dir "."): the kernel ran in tmp_path.
    assert json.loads((tmp_path / "results.json").read_text())["superseded"] >= 1
