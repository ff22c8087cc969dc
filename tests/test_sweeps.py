"""The sweep runner: grids, parameter checks, parallel and resumable runs, failures, Dask, collect, record."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mnemo.cli import app
from mnemo.errors import InvalidInput
from mnemo.lab import sweeps
from mnemo.lab.record import jsonable, read_results, record, record_many

pytestmark = pytest.mark.slow

PARAMS = '''out_dir = "."  # where results go
x = 1  # the value doubled
fail = False  # raise in the second cell'''
BODY = '''from mnemo.lab.record import record
if fail:
    raise RuntimeError(f"asked to fail at x={x}")
record("y", x * 2, out_dir)
record("series", [x, x + 1], out_dir)'''


@pytest.fixture(scope="module")
def notebook(tmp_path_factory) -> Path:
    """A tiny parameterised notebook: doubles x, or fails when told to."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    params = nbformat.v4.new_code_cell(PARAMS)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(BODY)]
    path = tmp_path_factory.mktemp("nb") / "double.ipynb"
    nbformat.write(nb, path)
    return path


def grid_file(folder: Path, notebook: Path, grid: dict, fixed: dict | None = None, name: str = "g") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"notebook": str(notebook), "grid": grid, "fixed": fixed or {}}))
    return path


def test_the_kernel_runs_this_interpreter():
    from jupyter_client.kernelspec import get_kernel_spec

    argv = get_kernel_spec(sweeps.KERNEL).argv
    # jupyter_client swaps a bare "python" for sys.executable: the kernel runs the venv's interpreter.
    assert argv[0] in ("python", "python3", sys.executable), f"kernel {sweeps.KERNEL} runs {argv[0]}; " \
        "pip install ipykernel in this environment"


def test_expand_and_point_ids(tmp_path, notebook):
    grid = sweeps.load_grid(grid_file(tmp_path, notebook, {"x": [1, 2], "fail": [False, True]}))
    points = sweeps.expand(grid)
    assert points == [{"x": 1, "fail": False}, {"x": 1, "fail": True}, {"x": 2, "fail": False}, {"x": 2, "fail": True}]
    assert sweeps.point_id(notebook, {"a": 1, "b": 2}) == sweeps.point_id(notebook, {"b": 2, "a": 1})
    assert len({sweeps.point_id(notebook, p) for p in points}) == 4


@pytest.mark.parametrize("raw, message", [
    ({"notebok": "x.ipynb"}, "did you mean 'notebook'"),
    ({"notebook": "missing.ipynb"}, "not found"),
    ({"notebook": "NB", "grid": {"x": 3}}, "non-empty list"),
    ({"notebook": "NB", "grid": {"x": [1]}, "fixed": {"x": 2}}, "both in grid and fixed"),
])
def test_load_grid_is_strict(tmp_path, notebook, raw, message):
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps({k: (str(notebook) if v == "NB" else v) for k, v in raw.items()}))
    with pytest.raises(sweeps.SweepError, match=message):
        sweeps.load_grid(path)


def test_unknown_parameter_is_refused_before_anything_runs(tmp_path, notebook):
    path = grid_file(tmp_path, notebook, {"x": [1, 2]}, {"fial": True})
    with pytest.raises(sweeps.SweepError, match="unknown parameter 'fial'.*did you mean 'fail'"):
        sweeps.sweep(path, tmp_path / "runs", progress=False)
    assert not (tmp_path / "runs").exists()
    with pytest.raises(sweeps.SweepError, match="set by the runner"):
        sweeps.sweep(grid_file(tmp_path, notebook, {"out_dir": ["a"]}, name="h"), tmp_path / "runs", progress=False)


def test_four_points_run_in_parallel_then_resume(tmp_path, notebook):
    path = grid_file(tmp_path, notebook, {"x": [1, 2, 3, 4]})
    runs = tmp_path / "runs"
    first = sweeps.sweep(path, runs, workers=2, progress=False)
    assert first.count("done") == 4 and first.count("error") == 0
    for p in first.points:
        folder = Path(p["folder"])
        assert {f.name for f in folder.iterdir()} >= {"params.json", "double.ipynb", "results.json", "done"}
        assert json.loads((folder / "params.json").read_text()) == p["params"]
    began = time.perf_counter()
    second = sweeps.sweep(path, runs, workers=2, progress=False)
    assert second.count("skipped") == 4 and second.count("done") == 0
    assert time.perf_counter() - began < 5  # nothing was executed
    table, n = sweeps.collect(runs, tmp_path / "results.parquet")
    frame = pd.read_parquet(table)
    assert n == 4 and sorted(frame["y"]) == [2, 4, 6, 8]
    assert (frame["y"] == 2 * frame["param_x"]).all() and set(frame["grid"]) == {"g"}
    db, rows = sweeps.collect(runs, tmp_path / "results.duckdb")
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT sum(y) FROM results").fetchone()[0] == 20 and rows == 4


def test_a_failure_is_recorded_and_the_sweep_goes_on(tmp_path, notebook):
    path = grid_file(tmp_path, notebook, {"fail": [False, True]}, {"x": 5}, name="f")
    runs = tmp_path / "runs"
    report = sweeps.sweep(path, runs, workers=1, progress=False)
    assert report.count("done") == 1 and report.count("error") == 1
    bad = Path(report.failed[0]["folder"])
    assert "asked to fail at x=5" in (bad / "error.txt").read_text() and not (bad / "done").exists()
    assert (bad / "double.ipynb").exists()  # the executed notebook is kept, with the failing cell's output
    assert [f["point"] for f in sweeps.failures(runs)] == [bad.name]
    assert len(sweeps.collect_frame(runs)) == 1  # only finished points are collected
    again = sweeps.sweep(path, runs, workers=1, progress=False)
    assert again.count("skipped") == 1 and again.count("error") == 1  # the failed point is tried again


def test_sweep_on_a_local_dask_cluster(tmp_path, notebook):
    from distributed import LocalCluster

    path = grid_file(tmp_path, notebook, {"x": [7, 8]}, name="dask")
    # An in-process worker behind a real TCP scheduler on loopback (the inproc transport ignores host=).
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address=None) as cluster:
        report = sweeps.sweep(path, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False)
    assert report.count("done") == 2, report.failed
    assert sorted(sweeps.collect_frame(tmp_path / "runs")["y"]) == [14, 16]


def test_dask_workers_ship_points_back_through_an_object_store(tmp_path, notebook):
    """Workers that do not share the runs folder: each point is pushed to the object store, then pulled here."""
    from distributed import LocalCluster

    from mnemo.objectstore import LocalStore

    path = grid_file(tmp_path, notebook, {"x": [7, 8], "fail": [False, True]}, name="ship")
    cold = tmp_path / "cold"
    # One thread a worker: papermill changes the process's working directory, and a shipped point's folder
    # is removed once pushed, so two points in threads of one process could start a kernel in a removed folder.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address=None) as cluster:
        report = sweeps.sweep(path, tmp_path / "runs", scheduler=cluster.scheduler_address, progress=False,
                              objects=str(cold))
    assert report.count("done") == 2 and report.count("error") == 2, report.points
    assert sorted(sweeps.collect_frame(tmp_path / "runs")["y"]) == [14, 16]
    objects = LocalStore(cold)
    for point in report.points:
        folder, key = Path(point["folder"]), point["key"]
        assert folder.parent == tmp_path / "runs" / "ship" and key == f"sweeps/ship/{folder.name}"
        listed = json.loads(objects.get_bytes(f"{key}/manifest.json"))["files"]
        # What is here is exactly what the worker pushed, byte for byte: a failure ships its traceback too.
        assert sorted(p.name for p in folder.iterdir()) == sorted(f["path"] for f in listed)
        for f in listed:
            assert (folder / f["path"]).read_bytes() == objects.get_bytes(f["key"])
        assert (folder / ("done" if point["status"] == "done" else "error.txt")).exists()
    with pytest.raises(sweeps.SweepError, match="give scheduler too"):
        sweeps.sweep(path, tmp_path / "runs", objects=str(cold), progress=False)


def test_cli_sweep_and_collect(tmp_path, notebook):
    path = grid_file(tmp_path, notebook, {"x": [3]}, name="cli")
    runs, out = tmp_path / "runs", tmp_path / "table.parquet"
    res = CliRunner().invoke(app, ["sweep", str(path), "--runs", str(runs), "--workers", "1", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "1 done" in res.output and pd.read_parquet(out)["y"].tolist() == [6]
    res = CliRunner().invoke(app, ["collect", str(runs), "--out", str(tmp_path / "again.parquet")])
    assert res.exit_code == 0 and "1 rows" in res.output
    res = CliRunner().invoke(app, ["collect", str(tmp_path / "nothing")])
    assert res.exit_code != 0


def test_record_keeps_the_last_value_and_makes_values_jsonable(tmp_path):
    record("a", 1, tmp_path)
    record("a", np.float32(2.5), tmp_path)
    record_many({"nan": math.nan, "arr": np.arange(3), "frame": pd.DataFrame({"k": [1, 2]})}, tmp_path, prefix="p_")
    assert read_results(tmp_path) == {"a": 2.5, "p_nan": None, "p_arr": [0, 1, 2], "p_frame": [{"k": 1}, {"k": 2}]}
    assert jsonable({"when": pd.Timestamp("2025-01-01")})["when"].startswith("2025-01-01")
    with pytest.raises(InvalidInput):
        record("x", object(), tmp_path)


def test_run_main_runs_readers_after_the_others(tmp_path, notebook):
    reader = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                               "language": "python"}})
    params = nbformat.v4.new_code_cell('out_dir = "."  # where results go\nruns_dir = ""  # the runs to read')
    params.metadata["tags"] = ["parameters"]
    reader.cells = [params, nbformat.v4.new_code_cell(
        "from mnemo.lab.record import record\nfrom mnemo.lab.sweeps import collect_frame\n"
        "record('seen', int(len(collect_frame(runs_dir, missing_ok=True))), out_dir)")]
    nbformat.write(reader, tmp_path / "reader.ipynb")
    grid_file(tmp_path, tmp_path / "reader.ipynb", {}, name="reader")
    grid_file(tmp_path, notebook, {"x": [1, 2]}, name="main")
    summary = sweeps.run_main(tmp_path, ["reader.yaml", "main.yaml"], workers=2, progress=False)
    assert summary["rows"] == 3 and not summary["failed"]
    assert summary["grids"]["reader"]["done"] == 1 and summary["grids"]["main"]["done"] == 2
    table = pd.read_parquet(summary["table"])
    assert table.loc[table.grid == "reader", "seen"].item() == 2  # it ran after both points of main


def data_grid(folder: Path, notebook: Path, without: dict | None) -> Path:
    """A grid that reads LoCoMo from $MNEMO_DATA_DIR; `without` is what its points run with when it is absent."""
    raw = {"notebook": str(notebook), "grid": {"x": [1, 2]}, "data": ["locomo"]}
    if without is not None:
        raw["without_data"] = without
    path = folder / f"needs_{'with' if without is not None else 'no'}_fallback.yaml"
    path.write_text(json.dumps(raw))
    return path


def test_a_grid_whose_data_is_absent_runs_on_what_ships_and_says_so(tmp_path, notebook, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("MNEMO_DATA_DIR", str(shared))
    runs = tmp_path / "runs"
    report = sweeps.sweep(data_grid(tmp_path, notebook, {"x": 0}), runs, workers=1, progress=False)
    # Both points become one (x=0): the value the grid names for the sets the project ships.
    assert report.count("done") == 1 and report.points[0]["params"] == {"x": 0} and not report.failed
    assert "locomo absent" in report.note and "x=0" in report.note
    row = sweeps.collect_frame(runs).iloc[0]
    assert row.y == 0 and row.data_note == report.note
    # No `without_data`: the grid is not run, and says why, rather than failing point by point.
    report = sweeps.sweep(data_grid(tmp_path, notebook, None), runs, workers=1, progress=False)
    assert report.points == [] and report.note.startswith("not run: it needs locomo")
    assert "MNEMO_DATA_DIR" in report.note
    # With the data there, the grid runs as written, and no note is recorded.
    (shared / "locomo").mkdir()
    report = sweeps.sweep(data_grid(tmp_path, notebook, {"x": 0}), runs, workers=1, progress=False)
    assert report.count("done") == 2 and report.note == ""
    assert {p["params"]["x"] for p in report.points} == {1, 2}


def test_without_data_is_checked_like_the_grid(tmp_path, notebook):
    with pytest.raises(sweeps.SweepError, match="unknown parameter 'y'"):
        sweeps.plan(sweeps.load_grid(data_grid(tmp_path, notebook, {"y": 0})), tmp_path / "runs")
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps({"notebook": str(notebook), "without_data": {"x": 0}}))
    with pytest.raises(sweeps.SweepError, match="beside a 'data' list"):
        sweeps.load_grid(bad)


def test_points_run_quietly_over_ipc(tmp_path):
    """The main job's terminal shows no kernel log: no TCP-encryption warning, no KeyboardInterrupt at shutdown."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    params = nbformat.v4.new_code_cell('out_dir = "."  # where results go\nx = 1  # a point')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import json\nimport pandas as pd\nfrom ipykernel.connect import get_connection_info\n"
        "from mnemo.lab.record import record\n"
        "record('transport', json.loads(get_connection_info())['transport'], out_dir)\n"
        "record('x', x, out_dir)\npd.DataFrame({'x': [x]})")]
    nbformat.write(nb, tmp_path / "quiet.ipynb")
    path = grid_file(tmp_path, tmp_path / "quiet.ipynb", {"x": list(range(6))}, name="quiet")
    res = subprocess.run([sys.executable, "-m", "mnemo.cli", "sweep", str(path), "--runs", str(tmp_path / "runs"),
                          "--workers", "2", "--no-collect"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "6 done" in res.stdout
    kernel_lines = [line for line in (res.stdout + res.stderr).splitlines() if "IPKernelApp" in line]
    assert kernel_lines == [], kernel_lines
    assert set(sweeps.collect_frame(tmp_path / "runs")["transport"]) == {"ipc"}


def test_mnemo_run_ends_with_the_report_page(tmp_path, notebook):
    report = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                               "language": "python"}})
    params = nbformat.v4.new_code_cell('out_dir = "."  # where results go\nruns_dir = ""  # the runs to read')
    params.metadata["tags"] = ["parameters"]
    report.cells = [nbformat.v4.new_markdown_cell("# Tiny report\n\nWhat the main grid found."), params,
                    nbformat.v4.new_code_cell("from mnemo.lab.sweeps import collect_frame\n"
                                              "seen = collect_frame(runs_dir, missing_ok=True)\n"
                                              "print(f'points seen: {len(seen)}')")]
    nbformat.write(report, tmp_path / "tiny_report.ipynb")
    grid_file(tmp_path, tmp_path / "tiny_report.ipynb", {}, name="report")
    grid_file(tmp_path, notebook, {"x": [1, 2]}, name="main")
    res = CliRunner().invoke(app, ["run", "--experiments", str(tmp_path), "--grid", "main.yaml", "--grid",
                                   "report.yaml", "--workers", "2"])
    assert res.exit_code == 0, res.output
    page = tmp_path / "report.html"
    assert res.output.strip().splitlines()[-1] == f"report: {page.resolve()}"
    html = page.read_text()
    assert "Tiny report" in html and "points seen: 2" in html and "How this page was made" in html
    # The code stays in the notebook; the page loads nothing from the network.
    assert "collect_frame(runs_dir" not in html and not re.search(r"<script[^>]*src=\"https?:", html)
    # A failed report leaves no page from an earlier run behind.
    (tmp_path / "tiny_report.ipynb").write_text((tmp_path / "tiny_report.ipynb").read_text().replace(
        "print(f'points seen", "raise RuntimeError(f'points seen"))
    shutil.rmtree(tmp_path / "runs" / "report")
    res = CliRunner().invoke(app, ["run", "--experiments", str(tmp_path), "--grid", "main.yaml", "--grid",
                                   "report.yaml", "--workers", "1"])
    assert res.exit_code == 1 and not page.exists()
