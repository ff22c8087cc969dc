"""Sweeps: a YAML grid -> one headless papermill run per point (parallel, resumable) -> one results table.

    grid = load_grid("experiments/decay_grid.yaml")
    report = sweep(grid)                          # local processes; sweep(grid, scheduler="tcp://...") on Dask
    collect("experiments/runs", "experiments/results.parquet")

A grid file names a notebook, the values to cross (`grid`) and the values every point shares
(`fixed`). Every name must be a parameter of the notebook's `parameters` cell (checked with
`papermill.inspect_notebook`, before anything runs). A grid that reads benchmark copies names
them (`data: [locomo]`); when one is absent its points run with `without_data` instead (values
that leave it out, such as `locomo_conversations: 0`) and their results say so in `data_note`,
or, with no `without_data`, the grid is reported as not run, with the reason.

Each point runs in its own folder, `<runs>/<grid name>/<point id>/`: params.json, the executed
notebook, results.json (what the notebook `record`s, plus the point's parameters as
`param_<name>`), store.duckdb (passed as `store_path` when the notebook declares it), and last
a `done` marker, or `error.txt` with the traceback when the run failed. A point with `done` is skipped by the next sweep; a failed one
is run again. `collect` is one read-only DuckDB query over the finished points' results.json.
`run_main` (`mnemo run`) runs the default grids, then renders the report as experiments/report.html.

This is the only module that imports papermill (lazily, so `mnemo.lab.record` stays light).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import itertools
import json
import os
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

KERNEL = "python3"  # the kernelspec ipykernel installs into the environment: the venv's own python
GRID_KEYS = {"notebook", "about", "grid", "fixed", "timeout_s", "cost_s", "data", "without_data"}
RUNNER_PARAMS = ("out_dir", "store_path")  # set by the runner for every point, never by a grid
DONE, ERROR, PARAMS = "done", "error.txt", "params.json"
# What `mnemo run` sweeps, in order: the report comes last and reads the other grids' runs.
MAIN_GRIDS = ("quickstart.yaml", "threshold_grid.yaml", "decay_grid.yaml", "calibration.yaml", "report.yaml")
REPORT_GRID = "report"  # the grid whose executed notebook `mnemo run` renders as experiments/report.html


class SweepError(ConfigError):
    """A grid or a sweep is unusable: an unknown parameter, a missing notebook, no finished runs."""


@dataclass(frozen=True)
class Grid:
    """A parsed grid file: the notebook, the crossed values and the shared ones."""

    name: str  # the grid file's stem: the folder of its runs
    notebook: Path
    grid: dict[str, list[Any]]
    fixed: dict[str, Any] = field(default_factory=dict)
    about: str = ""
    timeout_s: float | None = None  # a cell running longer fails the point
    cost_s: float = 60.0  # rough seconds per point: longer points start first when grids share workers
    data: tuple[str, ...] = ()  # benchmark copies ($MNEMO_DATA_DIR/<name>) the points read
    without_data: dict[str, Any] | None = None  # parameters that replace those reads when one is absent


@dataclass
class SweepReport:
    """What a sweep did: every point's status (done, skipped, error) and where its folder is."""

    grid: str
    points: list[dict[str, Any]]
    runtime_s: float = 0.0
    note: str = ""  # what ran instead of the grid as written (benchmark data absent), or why nothing ran

    def count(self, status: str) -> int:
        """Return how many points ended with `status`."""
        return sum(p["status"] == status for p in self.points)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [p for p in self.points if p["status"] == "error"]


def load_grid(path: str | Path) -> Grid:
    """Return the grid in a YAML file; unknown keys, a missing notebook or non-list grid values raise SweepError."""
    file = Path(path)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SweepError(f"{file}: cannot read the grid: {exc}") from exc
    if not isinstance(raw, dict):
        raise SweepError(f"{file}: expected a mapping with notebook, grid and fixed")
    for key in raw:
        if key not in GRID_KEYS:
            close = difflib.get_close_matches(str(key), GRID_KEYS, n=1)
            raise SweepError(f"{file}: unknown key '{key}'" + (f"; did you mean '{close[0]}'?" if close else
                                                                f"; known keys: {', '.join(sorted(GRID_KEYS))}"))
    if not raw.get("notebook"):
        raise SweepError(f"{file}: 'notebook' is missing")
    grid, fixed = raw.get("grid") or {}, raw.get("fixed") or {}
    if not isinstance(grid, dict) or not isinstance(fixed, dict):
        raise SweepError(f"{file}: 'grid' and 'fixed' must be mappings of parameter names")
    for name, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"{file}: grid value of '{name}' must be a non-empty list, got {values!r}")
    both = sorted(set(grid) & set(fixed))
    if both:
        raise SweepError(f"{file}: {both} are both in grid and fixed; keep each name in one place")
    data, without = raw.get("data") or [], raw.get("without_data")
    if not isinstance(data, list) or not all(isinstance(d, str) for d in data):
        raise SweepError(f"{file}: 'data' must be a list of dataset names, got {data!r}")
    if without is not None and (not isinstance(without, dict) or not data):
        raise SweepError(f"{file}: 'without_data' must be a mapping of parameter names, beside a 'data' list")
    return Grid(file.stem, _find_notebook(str(raw["notebook"]), file), grid, fixed, str(raw.get("about", "")),
                raw.get("timeout_s"), float(raw.get("cost_s", 60.0)), tuple(data), without)


def _find_notebook(name: str, grid_file: Path) -> Path:
    """Return the notebook path: as given, else beside the grid file, else under the grid folder's parent."""
    path = Path(name)
    if path.is_absolute():
        tried = [path]
    else:
        tried = [grid_file.parent / path, grid_file.parent.parent / path, Path.cwd() / path]
    for candidate in tried:
        if candidate.exists():
            return candidate.resolve()
    raise SweepError(f"{grid_file}: notebook '{name}' not found (looked in {', '.join(str(t) for t in tried)})")


def expand(grid: Grid) -> list[dict[str, Any]]:
    """Return every point of the grid: the cross product of `grid` values (in file order), each with `fixed`."""
    names = list(grid.grid)
    return [{**grid.fixed, **dict(zip(names, combo, strict=True))}
            for combo in itertools.product(*(grid.grid[n] for n in names))]


def point_id(notebook: str | Path, params: dict[str, Any]) -> str:
    """Return a point's stable id: a hash of the notebook's name and its parameters (order-free)."""
    blob = json.dumps({"notebook": Path(notebook).name, "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def notebook_parameters(notebook: str | Path) -> dict[str, dict[str, Any]]:
    """Return the notebook's declared parameters ({name: {default, help, inferred_type_name}}), via papermill."""
    import papermill as pm

    return {name: dict(spec) for name, spec in pm.inspect_notebook(str(notebook)).items()}


def check_params(notebook: str | Path, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Return the notebook's parameters after checking `names` against them; unknown names raise SweepError."""
    declared = notebook_parameters(notebook)
    if "out_dir" not in declared:
        raise SweepError(f"{notebook}: its parameters cell has no 'out_dir'; add `out_dir = \".\"  # where "
                         "results go` so the runner can place each point's results")
    for name in names:
        if name in RUNNER_PARAMS:
            raise SweepError(f"'{name}' is set by the runner for every point; remove it from the grid")
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; it declares {', '.join(sorted(declared))}"
            raise SweepError(f"unknown parameter '{name}' for {Path(notebook).name}{hint}")
    return declared


def missing_data(names: Sequence[str]) -> dict[str, str]:
    """Return {dataset: why it cannot be read} for each of `names` absent from the benchmark data folder."""
    from ..provenance import dataset_root

    missing = {}
    for name in names:
        try:
            dataset_root(name)
        except ConfigError as exc:
            missing[name] = str(exc)
    return missing


def _clear(folder: Path) -> None:
    """Remove what an earlier, unfinished attempt left, so a re-run starts clean."""
    for name in (DONE, ERROR, "results.json", "store.duckdb", "store.duckdb.wal"):
        (folder / name).unlink(missing_ok=True)
    for png in folder.glob("*.png"):
        png.unlink()


def _in_fresh_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Return fn(*args, **kwargs) computed in a new thread, raising what it raised.

    Jupyter's clients keep their event loop in a context variable: a host thread that carries
    a copied context (a Dask worker thread) can hand two concurrent points the same loop. A new
    thread starts with an empty context, so each point gets its own loop.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the calling thread as is
            box["error"] = exc

    worker = threading.Thread(target=target, name="mnemo-sweep-point", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


@functools.cache
def _point_kernel_manager() -> type:
    """Return the kernel manager of headless points: jupyter_client's, minus the SIGINT before shutdown.

    jupyter_client interrupts every kernel before asking it to shut down, to stop code still
    running. papermill asks only once every cell has finished, and then the signal can land in
    the kernel's last reply, which it logs as "KeyboardInterrupt caught in kernel". The shutdown
    request alone stops an idle kernel (and one that does not stop is still killed after
    `shutdown_wait_time`). Built on first use: jupyter_client comes with the notebooks extra.
    """
    from jupyter_client import AsyncKernelManager

    class PointKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return PointKernelManager


def _kernel_options() -> dict[str, Any]:
    """Return papermill's options for a point's kernel: its manager, and Unix sockets instead of TCP.

    Over TCP every kernel warns that its traffic is unencrypted; the kernel of a headless point
    talks only to this process, so it uses IPC sockets at a short, unique path in the temp folder
    (a socket path may not pass ~100 bytes, and two kernels must not share one).
    """
    from traitlets.config import Config

    ip = os.path.join(tempfile.gettempdir(), f"mnemo-kernel-{uuid.uuid4().hex[:12]}")
    return {"kernel_manager_class": _point_kernel_manager(),
            "config": Config({"KernelManager": {"transport": "ipc", "ip": ip}})}


def run_point(notebook: str, folder: str, params: dict[str, Any], context: dict[str, Any] | None = None,
              kernel: str = KERNEL, timeout_s: float | None = None, grid: str = "",
              note: str = "") -> dict[str, Any]:
    """Execute one point headless and return its status; never raises (a failure is written to error.txt).

    `params` are the point's own parameters (recorded); `context` holds injected values that
    are not part of its identity (out_dir, store_path, paths the notebook reads); `note`, when
    given, is recorded as `data_note` (what the point ran on instead of the grid as written).
    papermill runs the kernel from `folder` by changing the process's working directory: run
    points in separate processes (as `sweep` does), never in threads of one process.
    """
    import papermill as pm

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    _clear(out)
    (out / PARAMS).write_text(json.dumps(params, indent=1, sort_keys=True, default=str), encoding="utf-8")
    started = time.perf_counter()
    status = {"grid": grid, "point": out.name, "folder": str(out), "params": params}
    try:
        _in_fresh_thread(pm.execute_notebook, notebook, str(out / Path(notebook).name),
                         parameters={**params, **(context or {})}, kernel_name=kernel, cwd=str(out),
                         progress_bar=False, execution_timeout=timeout_s, **_kernel_options())
        results = out / "results.json"
        recorded = json.loads(results.read_text(encoding="utf-8")) if results.exists() else {}
        runtime = round(time.perf_counter() - started, 2)
        meta = {"grid": grid, "point": out.name, "notebook": Path(notebook).name, "runtime_s": runtime,
                **{f"param_{k}": v for k, v in params.items()}, **({"data_note": note} if note else {})}
        results.write_text(json.dumps({**meta, **recorded}, indent=1, default=str), encoding="utf-8")
    # The runner is a boundary: whatever breaks a point is recorded with its traceback, the sweep goes on.
    except Exception:  # noqa: BLE001
        (out / ERROR).write_text(traceback.format_exc(), encoding="utf-8")
        return {**status, "status": "error", "runtime_s": round(time.perf_counter() - started, 2),
                "error": traceback.format_exc(limit=1).strip().splitlines()[-1]}
    # The marker is written last: its presence is what makes a point finished.
    (out / DONE).write_text(json.dumps({"finished": datetime.now().astimezone().isoformat(timespec="seconds"),
                                        "runtime_s": runtime}), encoding="utf-8")
    return {**status, "status": "done", "runtime_s": runtime}


def run_point_shipped(objects: str, key: str, notebook_text: str, notebook_name: str, folder: str,
                      params: dict[str, Any], context: dict[str, Any] | None = None, kernel: str = KERNEL,
                      timeout_s: float | None = None, grid: str = "", note: str = "") -> dict[str, Any]:
    """Run one point where the client's folders are not (a Dask worker on another machine); return its status.

    The notebook travels as text; the point runs in a temporary folder, and what it wrote
    (results, executed notebook, `done` or error.txt) is pushed to the object store
    `objects` under `key`, each file verified (`archive.push_dir`). The client pulls it into
    `folder`. Paths the runner set inside `folder` (out_dir, store_path) point at the copy.
    Like `run_point`, one point per process at a time: run Dask workers with one thread
    each (`dask worker ADDRESS --nthreads 1 --nworkers N`).
    """
    from ..archive import push_dir
    from ..objectstore import open_store

    with tempfile.TemporaryDirectory(prefix="mnemo-point-") as tmp:
        local = Path(tmp) / Path(folder).name
        notebook = Path(tmp) / notebook_name
        notebook.write_text(notebook_text, encoding="utf-8")
        moved = {k: str(local / Path(v).relative_to(folder)) if isinstance(v, str) and Path(v).is_relative_to(folder)
                 else v for k, v in (context or {}).items()}
        status = run_point(str(notebook), str(local), params, moved, kernel, timeout_s, grid, note)
        push_dir(open_store(objects), local, key)
    return {**status, "folder": folder, "key": key}


def plan(grid: Grid, runs_dir: str | Path = "experiments/runs",
         context: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """Return (points, what to inject, a note) after checking every grid name against the notebook's parameters.

    Only names the notebook declares are injected: store_path, and the `context` values
    (a notebook need not read every path `mnemo run` offers). When benchmark data the grid
    names is absent, its points take the `without_data` values and the note says why; with no
    `without_data` there are no points and the note says why the grid is not run.
    """
    declared = check_params(grid.notebook, [*grid.grid, *grid.fixed, *(grid.without_data or {})])
    absent = missing_data(grid.data)
    note, overrides = "", {}
    if absent:
        reason = next(iter(absent.values()))
        if grid.without_data is None:
            return [], {}, f"not run: it needs {', '.join(absent)}, which cannot be read ({reason})"
        overrides = dict(grid.without_data)
        shown = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
        note = f"{', '.join(absent)} absent, so run on the data the project ships ({shown}): {reason}"
    root = Path(runs_dir).resolve() / grid.name
    points, seen = [], set()
    for params in expand(grid):
        params = {**params, **overrides}
        folder = root / point_id(grid.notebook, params)
        # Replacing a crossed value can make two points one: run it once.
        if folder not in seen:
            seen.add(folder)
            points.append({"params": params, "folder": folder, "finished": (folder / DONE).exists()})
    wanted = {k: v for k, v in (context or {}).items() if k in declared}
    wanted["store_path"] = "store_path" in declared
    return points, wanted, note


def sweep(grid: Grid | str | Path, runs_dir: str | Path = "experiments/runs", *, workers: int | None = None,
          scheduler: str | None = None, context: dict[str, Any] | None = None, progress: bool = True,
          kernel: str = KERNEL, on_point: Callable[[dict[str, Any]], None] | None = None,
          objects: str | None = None) -> SweepReport:
    """Run every unfinished point of `grid` and return the report; finished points are skipped.

    Points run in parallel on `workers` local processes (default: one per CPU), or on the Dask
    cluster at `scheduler` (an address such as "tcp://127.0.0.1:8786"; its workers have mnemo
    installed and either see the same filesystem or, with `objects` (an object-store URL they
    and this process can reach, see `objectstore.open_store`), send each point's folder back
    through it: `run_point_shipped`). A failing point is recorded, never raised.
    """
    return sweep_many([grid], runs_dir, workers=workers, scheduler=scheduler, context=context, progress=progress,
                      kernel=kernel, on_point=on_point, objects=objects)[0]


def sweep_many(grids: Sequence[Grid | str | Path], runs_dir: str | Path = "experiments/runs", *,
               workers: int | None = None, scheduler: str | None = None, context: dict[str, Any] | None = None,
               progress: bool = True, kernel: str = KERNEL,
               on_point: Callable[[dict[str, Any]], None] | None = None,
               objects: str | None = None) -> list[SweepReport]:
    """Run several grids' unfinished points on one pool of workers; return one report per grid.

    Every grid is checked before anything runs. Points start longest first (by each grid's
    `cost_s`), so a single long point does not leave the other workers idle at the end.
    """
    if objects and not scheduler:
        raise SweepError("objects ships points back from Dask workers that do not share this folder; give "
                         "scheduler too, or leave objects out to run on local processes")
    loaded = [g if isinstance(g, Grid) else load_grid(g) for g in grids]
    if len({g.name for g in loaded}) != len(loaded):
        raise SweepError(f"grid names must be unique in one sweep, got {[g.name for g in loaded]}")
    began = time.perf_counter()
    reports, jobs, total = {}, [], 0
    for grid, (points, injected, note) in [(g, plan(g, runs_dir, context)) for g in loaded]:
        total += len(points)
        reports[grid.name] = SweepReport(grid.name, [{"grid": grid.name, "point": p["folder"].name,
                                                      "folder": str(p["folder"]), "params": p["params"],
                                                      "status": "skipped"} for p in points if p["finished"]],
                                         note=note)
        with_store = injected.pop("store_path", False)
        jobs += [(grid.cost_s, (str(grid.notebook), str(p["folder"]), p["params"],
                                {**injected, "out_dir": str(p["folder"])}
                                | ({"store_path": str(p["folder"] / "store.duckdb")} if with_store else {}),
                                kernel, grid.timeout_s, grid.name, note)) for p in points if not p["finished"]]
    jobs.sort(key=lambda job: -job[0])
    from tqdm import tqdm

    with tqdm(total=total, initial=total - len(jobs), desc=", ".join(reports), unit="point",
              disable=not progress) as bar:
        for status in _execute([job for _, job in jobs], workers, scheduler, objects):
            reports[status["grid"]].points.append(status)
            bar.update(1)
            bar.set_postfix(failed=sum(r.count("error") for r in reports.values()))
            if on_point:
                on_point(status)
    for report in reports.values():
        report.runtime_s = round(time.perf_counter() - began, 2)
    return list(reports.values())


def _execute(jobs: list[tuple], workers: int | None, scheduler: str | None, objects: str | None = None):
    """Yield each job's status as it finishes: on a Dask cluster, in local processes, or inline for one worker."""
    if not jobs:
        return
    if scheduler:
        from distributed import Client
        from distributed import as_completed as dask_completed

        try:
            client = Client(scheduler, timeout=30)
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"cannot reach the Dask scheduler at {scheduler}: {exc}; start one "
                             "(`dask scheduler`, `dask worker ADDRESS`) or leave --scheduler out") from exc
        with client:
            futures = [client.submit(*_dask_job(job, objects), pure=False, key=f"mnemo-{job[6]}-{Path(job[1]).name}")
                       for job in jobs]
            for fut in dask_completed(futures):
                status = fut.result()
                if objects:
                    _fetch_point(objects, status)
                yield status
        return
    n = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    if n == 1:
        for job in jobs:
            yield run_point(*job)
        return
    # Spawned workers: a fork of a process holding threads (the progress bar, DuckDB) is unsafe.
    with ProcessPoolExecutor(max_workers=n, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_point, *job) for job in jobs]
        for fut in as_completed(futures):
            yield fut.result()


def _dask_job(job: tuple, objects: str | None) -> tuple:
    """Return (function, *arguments) a Dask worker runs for `job`: in place, or shipped through `objects`."""
    if not objects:
        return (run_point, *job)
    notebook, folder = Path(job[0]), job[1]
    key = f"sweeps/{job[6]}/{Path(folder).name}"
    return (run_point_shipped, objects, key, notebook.read_text(encoding="utf-8"), notebook.name, *job[1:])


def _fetch_point(objects: str, status: dict[str, Any]) -> None:
    """Pull a shipped point into its folder here, every file checked, after clearing what an earlier try left."""
    from ..archive import pull_dir
    from ..objectstore import open_store

    folder = Path(status["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    _clear(folder)
    pull_dir(open_store(objects), status["key"], folder)


# ----------------------------------------------------------------- results
def _query(runs_dir: str | Path, grid: str | None) -> str:
    """Return the one read-only query over the finished points' results.json files."""
    root = Path(runs_dir).resolve()
    pattern = f"{root}/{grid or '*'}/*/"
    if not list(root.glob(f"{grid or '*'}/*/{DONE}")):
        raise SweepError(f"no finished runs under {root}" + (f" for grid '{grid}'" if grid else "")
                         + "; run `mnemo sweep GRID.yaml` first")
    # A point counts only once its `done` marker exists: results of failed or running points are left out.
    # The paths are ours, quoted as literals: COPY and views take no bound parameters.
    return (f"SELECT r.* EXCLUDE (filename) FROM read_json_auto({_literal(pattern + 'results.json')}, "
            "union_by_name = true, filename = true, sample_size = -1, maximum_object_size = 268435456) r "
            "WHERE regexp_replace(r.filename, '[^/]*$', '') IN "
            f"(SELECT regexp_replace(file, '[^/]*$', '') FROM glob({_literal(pattern + DONE)})) "
            "ORDER BY r.grid, r.point")


def collect_frame(runs_dir: str | Path = "experiments/runs", grid: str | None = None, missing_ok: bool = False):
    """Return every finished point's results as a pandas DataFrame (one row per point).

    With `missing_ok`, no finished run gives an empty frame instead of SweepError.
    """
    import duckdb

    if missing_ok and not (runs_dir and list(Path(runs_dir).glob(f"{grid or '*'}/*/{DONE}"))):
        import pandas as pd

        return pd.DataFrame(columns=["grid", "point", "notebook", "runtime_s"])
    with duckdb.connect() as con:
        return con.execute(_query(runs_dir, grid)).df()


def collect(runs_dir: str | Path = "experiments/runs", out: str | Path = "experiments/results.parquet",
            grid: str | None = None) -> tuple[Path, int]:
    """Write every finished point's results into one table: Parquet, or table `results` of a .duckdb file.

    Returns (the output path, the number of rows).
    """
    import duckdb

    sql = _query(runs_dir, grid)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as con:
        con.execute(f"CREATE TEMP VIEW collected AS {sql}")
        rows = con.execute("SELECT count(*) FROM collected").fetchone()[0]
        if target.suffix == ".duckdb":
            con.execute(f"ATTACH {_literal(str(target))} AS out_db")
            con.execute("CREATE OR REPLACE TABLE out_db.results AS SELECT * FROM collected")
            con.execute("DETACH out_db")
        else:
            # Written beside the target and renamed, so a reader never sees half a file.
            tmp = target.with_name(target.name + ".tmp")
            con.execute(f"COPY collected TO {_literal(str(tmp))} (FORMAT parquet)")
            os.replace(tmp, target)
    return target, int(rows)


def _literal(text: str) -> str:
    """Return `text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def failures(runs_dir: str | Path = "experiments/runs", grid: str | None = None) -> list[dict[str, str]]:
    """Return the failed points (a folder with error.txt and no done marker) with the traceback's last line."""
    out = []
    for err in sorted(Path(runs_dir).glob(f"{grid or '*'}/*/{ERROR}")):
        if not (err.parent / DONE).exists():
            lines = err.read_text(encoding="utf-8").strip().splitlines()
            out.append({"grid": err.parent.parent.name, "point": err.parent.name, "folder": str(err.parent),
                        "error": lines[-1] if lines else ""})
    return out


# ----------------------------------------------------------------- the main job
def run_main(experiments: str | Path = "experiments", grids: Sequence[str] = MAIN_GRIDS, *,
             workers: int | None = None, scheduler: str | None = None, progress: bool = True,
             out: str | Path | None = None, report: str = REPORT_GRID) -> dict[str, Any]:
    """Run the default grids, collect everything into experiments/results.parquet, render the report; return a summary.

    Each grid is a file under `experiments` (or a path); runs go to experiments/runs. Grids whose
    notebook declares `runs_dir` (the report) read the others' results: they get the runs folder
    and run after the others, which share one pool of workers. The executed notebook of the
    `report` grid's one point becomes experiments/report.html (`mnemo.lab.report.render`).
    """
    root = Path(experiments)
    runs = root / "runs"
    began = time.perf_counter()
    loaded = [load_grid(Path(name) if Path(name).exists() else root / name) for name in grids]
    readers = [g for g in loaded if "runs_dir" in notebook_parameters(g.notebook)]
    context = {"runs_dir": str(runs.resolve())}
    reports = []
    for phase in ([g for g in loaded if g not in readers], readers):
        if phase:
            reports += sweep_many(phase, runs, workers=workers, scheduler=scheduler, progress=progress,
                                  context=context)
    table, rows = collect(runs, out or root / "results.parquet")
    page = _render_report(next((r for r in reports if r.grid == report), None), root / "report.html")
    return {"runtime_s": round(time.perf_counter() - began, 2), "table": str(table), "rows": rows,
            "grids": {r.grid: {s: r.count(s) for s in ("done", "skipped", "error")}
                      | {"runtime_s": r.runtime_s, "point_s": round(sum(p.get("runtime_s", 0.0) for p in r.points), 1),
                         "note": r.note}
                      for r in reports},
            "failed": [p for r in reports for p in r.failed], "report": str(page.resolve()) if page else None}


def _render_report(report: SweepReport | None, out: Path) -> Path | None:
    """Render the report grid's one finished point as `out`; return it, or None when there is none to render."""
    from ..provenance import git_commit
    from .report import render

    if report is None:
        return None
    finished = [p for p in report.points if p["status"] in ("done", "skipped")]
    if len(finished) != 1:
        # A page from an earlier run would now describe results this run did not produce.
        out.unlink(missing_ok=True)
        return None
    executed = sorted(Path(finished[0]["folder"]).glob("*.ipynb"))
    return render(executed[0], out, commit=git_commit()) if executed else None
