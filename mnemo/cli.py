"""The `mnemo` command: a thin layer over `Memory`; library errors become one clean message here."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import typer
from rich.console import Console
from rich.table import Table

from .errors import MnemoError
from .eval import cli as eval_cli
from .server import cli as server_cli
from .verbs import Surface

app = typer.Typer(help="mnemo: long-term memory for LLM agents that forgets correctly and knows what it can trust.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
# The research wing's commands (`mnemo data download`, `mnemo eval`) live in mnemo/eval/cli.py.
app.add_typer(eval_cli.data_app, name="data")
# `mnemo serve mcp` and `mnemo serve http` live beside the servers (mnemo/server/cli.py).
app.add_typer(server_cli.serve_app, name="serve")
console = Console()
# One command per verb the table offers on the CLI (`mnemo.verbs`); a verb without one, or one without a verb, fails here.
COMMANDS = Surface("cli")

STORE = typer.Option("mnemo.duckdb", "--store", "-s", help="Store file (':memory:' for a throwaway store).")
EMBEDDER = typer.Option(None, "--embedder", help="hash | minilm | openai:MODEL (default: the store's own, else auto).")
LLM = typer.Option(None, "--llm", help="offline | live | record:PATH | replay:PATH (default: offline).")
USER = typer.Option(..., "--user", "-u", help="Whose memories.")
JSON_OUT = typer.Option(False, "--json", help="Print JSON instead of a table.")
SIGN_HELP = "Sign the JSON export with this key, HMAC-SHA256 (default: $MNEMO_EXPORT_KEY, safer than an argument)."
CHECK_HELP = "Require a valid signature under this key (default: $MNEMO_EXPORT_KEY); unsigned or edited files are refused."


def _open(store: str, embedder: str | None = None, llm: str | None = None, read_only: bool = False):
    from .memory import Memory

    return Memory.open(store, embedder=embedder, llm=llm, read_only=read_only)


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _dump(obj: Any) -> None:
    console.print_json(json.dumps(obj, default=_jsonable))


def _jsonable(obj: Any) -> Any:
    from dataclasses import asdict, is_dataclass

    if is_dataclass(obj):
        return asdict(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    return str(obj)


def _memories_table(title: str, records) -> Table:
    table = Table(title=title, show_lines=False)
    for col in ("id", "status", "kind", "category", "subject", "attribute", "value", "text"):
        table.add_column(col, overflow="fold")
    for r in records:
        table.add_row(r.id, r.status, r.kind, r.category, r.subject or "", r.attribute or "", r.value or "",
                      r.text[:120])
    return table


@COMMANDS.verb("add")
def add(text: str = typer.Argument(..., help="The memory as a sentence."), user: str = USER,
        kind: str = typer.Option("semantic", help="semantic | procedural | episodic"),
        category: str = typer.Option("fact", help="fact, preference, decision, ..."),
        subject: str = typer.Option(None, help="What it is about (a record id, 'user', ...)."),
        attribute: str = typer.Option(None, help="Which attribute of the subject."),
        value: str = typer.Option(None, help="The attribute's value."),
        importance: float = typer.Option(0.5, help="Importance in [0, 1]."),
        pinned: bool = typer.Option(False, help="Always packed, never decays."),
        store: str = STORE, embedder: str = EMBEDDER, as_json: bool = JSON_OUT) -> None:
    """Write one structured memory (reconciled against what is stored)."""
    with _open(store, embedder) as mem:
        rec = mem.add(text, user=user, kind=kind, category=category, subject=subject, attribute=attribute,
                      value=value, importance=importance, pinned=pinned)
        _dump(rec) if as_json else console.print(_memories_table("stored", [rec]))


@COMMANDS.verb("remember")
def remember(text: str = typer.Argument(..., help="A conversation turn in plain language."), user: str = USER,
             session: str = typer.Option(None, help="Session id."), at: str = typer.Option(None, help="ISO time."),
             store: str = STORE, embedder: str = EMBEDDER, llm: str = LLM, as_json: bool = JSON_OUT) -> None:
    """Record a turn, extract memories from it and reconcile them."""
    with _open(store, embedder, llm) as mem:
        rep = mem.remember(text, user=user, session=session, at=_when(at))
        if as_json:
            _dump(rep)
            return
        console.print(f"turn {rep.turn_id}: {len(rep.added)} added, {len(rep.superseded)} superseded, "
                      f"{len(rep.corroborated)} corroborated, {len(rep.duplicates)} duplicates, "
                      f"{len(rep.forgotten)} forgotten, {len(rep.ignored)} ignored")
        for s in rep.superseded:
            console.print(f"  superseded {s.old.id} ({s.old.text!r}) -> {s.new.id} ({s.new.text!r}): {s.reason}")
        for r in rep.added:
            console.print(f"  added {r.id}: {r.text!r}")


@COMMANDS.verb("recall")
def recall(query: str = typer.Argument(..., help="What the agent needs to know."), user: str = USER,
           budget_tokens: int = typer.Option(None, "--budget-tokens", "-b", help="Token budget (default from the recipe)."),
           trace: bool = typer.Option(False, help="Show every candidate and why it was or was not packed."),
           store: str = STORE, embedder: str = EMBEDDER, as_json: bool = JSON_OUT) -> None:
    """Pack the memories that matter for a query under a token budget."""
    with _open(store, embedder) as mem:
        r = mem.recall(query, user=user, budget_tokens=budget_tokens)
        if as_json:
            _dump(r)
            return
        console.print(f"confidence: [bold]{r.confidence}[/bold]  tokens: {r.tokens_used}/{r.budget_tokens}"
                      + (f"  ({r.message})" if r.message else ""))
        table = Table(title="packed")
        for col in ("id", "kind", "score", "text"):
            table.add_column(col, overflow="fold")
        for p in r.memories:
            table.add_row(p.id, p.kind, f"{p.score:.3f}", p.text)
        for p in r.history:
            table.add_row(p.id, p.kind, "history", f"{p.note}")
        console.print(table)
        if trace:
            t = Table(title="trace")
            for col in ("id", "included", "reason", "detail"):
                t.add_column(col, overflow="fold")
            for e in r.trace:
                t.add_row(e.memory_id, "yes" if e.included else "no", e.reason, e.detail)
            console.print(t)


@COMMANDS.verb("history")
def history(memory_id: str = typer.Argument(..., help="A memory id."), store: str = STORE,
            as_json: bool = JSON_OUT) -> None:
    """Tell the story of a memory: created, corroborated, superseded, forgotten, restored."""
    with _open(store, read_only=True) as mem:
        events = mem.history(memory_id)
        if as_json:
            _dump(events)
            return
        console.print(_memories_table("memory", [mem.get(memory_id)]))
        table = Table(title="history")
        for col in ("at", "memory", "action", "reason", "other", "evidence"):
            table.add_column(col, overflow="fold")
        for e in events:
            table.add_row(e.at.isoformat(), e.memory_id, e.action, e.reason or "", e.other_id or "",
                          json.dumps(e.evidence, default=str)[:200])
        console.print(table)


@COMMANDS.verb("get")
def get(memory_id: str = typer.Argument(..., help="A memory id."), store: str = STORE, as_json: bool = JSON_OUT) -> None:
    """Show one memory, active or tombstoned."""
    with _open(store, read_only=True) as mem:
        record = mem.get(memory_id)
        if as_json:
            _dump(record)
            return
        console.print(_memories_table("memory", [record]))


@COMMANDS.verb("forget")
def forget(memory_id: str = typer.Argument(None, help="A memory id (or use --query)."),
           query: str = typer.Option(None, help="Forget what this names, e.g. 'my old address'."),
           user: str = typer.Option(None, "--user", "-u", help="Whose memories (with --query)."),
           reason: str = typer.Option("user asked", help="Recorded on the tombstone."),
           dry_run: bool = typer.Option(False, "--dry-run", help="Show what would go; change nothing."),
           store: str = STORE, embedder: str = EMBEDDER) -> None:
    """Tombstone a memory, or exactly the memories a query names (nothing is hard-deleted)."""
    with _open(store, embedder) as mem:
        gone = mem.forget(memory_id, query=query, user=user, reason=reason, dry_run=dry_run)
        console.print(_memories_table("would forget" if dry_run else "forgotten", gone))
        for mid, why in getattr(gone, "why", {}).items():
            console.print(f"{mid}: matched by {why}")
        if getattr(gone, "message", ""):
            console.print(gone.message)
            for near in gone.nearest:
                console.print(f"  nearest: {near['memory_id']} ({near['sim']:.2f}) {near['text']}")


@COMMANDS.verb("restore")
def restore(memory_id: str = typer.Argument(..., help="A tombstoned memory's id."),
            reason: str = typer.Option("restored", help="Recorded on the event."), store: str = STORE,
            as_json: bool = JSON_OUT) -> None:
    """Reverse a tombstone: the memory is active again (its successor, if any, stays active)."""
    with _open(store) as mem:
        rec = mem.restore(memory_id, reason=reason)
        _dump(rec) if as_json else console.print(_memories_table("restored", [rec]))


@COMMANDS.verb("list")
def memories_cmd(user: str = typer.Option(None, "--user", "-u", help="Whose memories (default: every user's)."),
                 include_inactive: bool = typer.Option(False, "--all", help="Tombstones too."),
                 store: str = STORE, as_json: bool = JSON_OUT) -> None:
    """List memories, oldest first: active only unless --all."""
    with _open(store, read_only=True) as mem:
        found = mem.memories(user, include_inactive=include_inactive)
        _dump(found) if as_json else console.print(_memories_table(f"{len(found)} memories", found))


@COMMANDS.verb("answer")
def answer(question: str = typer.Argument(..., help="A question about what the user said."), user: str = USER,
           budget_tokens: int = typer.Option(None, "--budget-tokens", "-b", help="Token budget (default from the recipe)."),
           store: str = STORE, embedder: str = EMBEDDER, llm: str = LLM, as_json: bool = JSON_OUT) -> None:
    """Answer from the recalled memories, citing them; abstain when the record is silent."""
    with _open(store, embedder, llm) as mem:
        a = mem.answer(question, user=user, budget_tokens=budget_tokens)
        if as_json:
            _dump(a)
            return
        console.print(f"{a.text}\n[dim]confidence: {a.confidence}; cited: {', '.join(a.cited) or 'nothing'}; "
                      f"answered by {a.answered_by}[/dim]")


@COMMANDS.verb("audit")
def audit(user: str = USER, store: str = STORE, llm: str = LLM, as_json: bool = JSON_OUT) -> None:
    """Report contradictions and dangling references, each with a recommended resolution; change nothing."""
    with _open(store, llm=llm) as mem:
        report = mem.audit(user)
        if as_json:
            _dump(report)
            return
        if report.clean:
            console.print(f"{user}: clean")
        for c in report.contradictions:
            keep = c.recommendation.get("memory_id", "?")
            console.print(f"contradiction: {c.record} {c.attribute}: {' / '.join(c.values)}; keep {keep} "
                          f"({c.recommendation.get('rule', '')}) among {', '.join(m.id for m in c.memories)}")
        for a in report.absences:
            console.print(f"dangling reference: {a.memory_id} -> {a.reference}: {a.rationale}")
        for f in report.semantic:
            console.print(f"{f.verdict}: {f.a_id} / {f.b_id} ({f.subject}, cosine {f.cosine:.2f}): {f.rationale}")


@COMMANDS.verb("decay")
def decay(at: str = typer.Option(None, help="ISO time of the pass (default now)."), store: str = STORE) -> None:
    """Tombstone memories whose salience fell under the threshold, then review expired ones."""
    with _open(store) as mem:
        decayed = mem.decay(at=_when(at))
        reviewed = mem.review_expired(at=_when(at))
        console.print(f"{len(decayed)} decayed, {sum(not v['keep'] for v in reviewed)} of {len(reviewed)} "
                      "expired memories forgotten after review")


@COMMANDS.verb("stats")
def stats(user: str = typer.Option(None, "--user", "-u", help="One user's counts (default: the whole store)."),
          store: str = STORE) -> None:
    """Counts by status, the store's embedder and schema version."""
    with _open(store, read_only=True) as mem:
        _dump(mem.stats(user))


@COMMANDS.verb("repair")
def repair_cmd(store: str = STORE) -> None:
    """Process turns recorded but never processed (a writer killed mid-batch), once each, and say what became of them."""
    from .memory import Memory

    with Memory.open(store, recover=False) as mem:
        done = mem.repair()
    console.print(f"{store}: {done.summary()}")
    for name in ("skipped", "failed", "waiting"):
        for turn, why in getattr(done, name):
            console.print(f"  {name} {turn.id}: {why}")


@COMMANDS.verb("export")
def export_cmd(path: Path = typer.Argument(..., help="File to write."),
               user: str = typer.Option(None, "--user", "-u", help="Only this user's memories (default: all)."),
               fmt: str = typer.Option("json", "--format", "-f",
                                       help="json (JSON Lines with vectors, importable) | markdown (for people)."),
               sign_key: str = typer.Option(None, "--sign-key", help=SIGN_HELP),
               store: str = STORE) -> None:
    """Write the store, tombstones and vectors included, as a lossless JSON export or a Markdown rendering."""
    from .portable import export_key

    key = (sign_key or export_key()) if fmt == "json" else sign_key
    with _open(store, read_only=True) as mem:
        out = mem.export(path, user=user, fmt=fmt, key=key)
    console.print(f"wrote {out}" + (" (signed)" if key else ""))


@COMMANDS.verb("import")
def import_cmd(path: Path = typer.Argument(..., help="A JSON export written by `mnemo export`."),
               store: str = STORE,
               embedder: str = typer.Option(None, "--embedder",
                                            help="Embedder of a new store (default: the export's; must match)."),
               on_conflict: str = typer.Option("error", help="error: refuse ids already in the store | "
                                                             "skip: skip them and say which."),
               key: str = typer.Option(None, "--key", help=CHECK_HELP),
               as_json: bool = JSON_OUT) -> None:
    """Load a JSON export into a store (new or existing) without re-embedding; existing ids are refused or skipped."""
    from . import portable
    from .memory import Memory

    with Memory.open(store, embedder=portable.target_embedder(path, store, embedder)) as mem:
        rep = portable.load(mem.store, path, on_conflict=on_conflict, key=key or portable.export_key())
    if as_json:
        _dump(rep)
        return
    skipped = {k: len(v) for k, v in rep.skipped.items() if v}
    console.print(f"imported {rep.added} into {store}" + (f"; skipped existing {skipped}" if skipped else ""))


# The verbs' commands, from the verb table: its names in its order, with this module's functions.
for verb, command, options in COMMANDS.bound():
    app.command(name=verb.cli, **options)(command)


@app.command()
def demo(store: str = typer.Option(None, "--store", "-s", help="Keep the demo store here (default: a temp dir)."),
         embedder: str = EMBEDDER) -> None:
    """Run an end-to-end demo: remember, correct, recall with its trace, forget, history."""
    from .lab.demo import run_demo

    path = store or str(Path(tempfile.mkdtemp(prefix="mnemo-demo-")) / "demo.duckdb")
    run_demo(path, embedder=embedder, console=console)


@app.command("simulate")
def simulate_cmd(seed: int = typer.Option(0, help="Seed: fixes personas, schedules, trivia and queries."),
                 personas: int = typer.Option(3, help="Synthetic users sharing one store."),
                 days: int = typer.Option(365, help="Length of the simulated clock in days."),
                 session_every: float = typer.Option(7.0, help="Days between sessions."),
                 queries: int = typer.Option(2, help="Recalls per persona per session."),
                 trivia: int = typer.Option(2, help="Low-importance crumbs per persona per session."),
                 budget_tokens: int = typer.Option(256, help="Token budget of every recall."),
                 half_life: float = typer.Option(None, help="Episodic half-life in days (default from the recipe)."),
                 threshold: float = typer.Option(None, help="Decay threshold (default from the recipe)."),
                 recipe_name: str = typer.Option("default", "--recipe", help="Config recipe to start from."),
                 every: float = typer.Option(28.0, help="Show one timeline row per this many days."),
                 out: Path = typer.Option(None, help="Write the timeline as CSV (or the whole result as .json)."),
                 as_json: bool = JSON_OUT) -> None:
    """Play synthetic personas over a simulated year: stale recalls, critical losses, store size, precision."""
    from .config import Config
    from .eval.simulate import SimConfig, simulate

    params = {k: v for k, v in (("half_life_episodic_days", half_life), ("threshold", threshold)) if v is not None}
    sim = SimConfig(seed=seed, personas=personas, days=days, session_every_days=session_every,
                    queries_per_session=queries, trivia_per_session=trivia, budget_tokens=budget_tokens)
    res = simulate(sim, Config.from_params(recipe_name, **params))
    if out is not None:
        if out.suffix == ".json":
            out.write_text(json.dumps({"summary": res.summary, "timeline": res.timeline, "losses": res.losses,
                                       "config": res.config}, default=str, indent=1))
        else:
            res.to_frame().to_csv(out, index=False)
    if as_json:
        _dump({**res.summary, "runtime_s": res.runtime_s, "cpu_s": res.cpu_s})
        return
    table = Table(title=f"simulated {days} days, seed {seed} ({res.runtime_s:.1f} s, {res.cpu_s:.1f} s CPU)")
    # Short headings keep ten columns readable in an 80-column terminal.
    cols = {"day": "day", "queries": "asked", "hit_rate": "hit", "precision": "prec", "stale_recalls": "stale",
            "critical_lost": "crit", "active": "active", "decayed": "decay", "forgotten": "forgot",
            "trivia_active": "trivia"}
    for heading in cols.values():
        table.add_column(heading, justify="right")
    shown = [r for r in res.timeline if r["day"] % every < 1e-9 or r is res.timeline[-1]]
    for r in shown:
        table.add_row(*("" if r[c] is None else f"{r[c]:.2f}".rstrip("0").rstrip(".") if isinstance(r[c], float)
                        else str(r[c]) for c in cols))
    console.print(table)
    console.print(res.summary)


# `mnemo archive` itself archives; restore, list, push and pull hang off the same group.
archive_app = typer.Typer(help="Cold archive: move old tombstones to an object store, verified first; restore them; "
                               "push experiment runs.", invoke_without_command=True)
app.add_typer(archive_app, name="archive")
ARCHIVE_TO = typer.Option(None, "--to", envvar="MNEMO_ARCHIVE",
                          help="Object store: a path, file://PATH, oss://BUCKET/PREFIX or s3://BUCKET/PREFIX "
                               "(default $MNEMO_ARCHIVE; credentials from the environment).")
ARCHIVE_FROM = typer.Option(None, "--from", envvar="MNEMO_ARCHIVE",
                            help="Object store to read from (same forms as --to; default $MNEMO_ARCHIVE).")


def _objects(url: str | None):
    from .objectstore import open_store

    if not url:
        raise typer.BadParameter("name the object store with --to/--from or MNEMO_ARCHIVE")
    return open_store(url)


@archive_app.callback()
def archive_cmd(ctx: typer.Context, to: str = ARCHIVE_TO,
                retention_days: float = typer.Option(90.0, help="Archive tombstones older than this many days."),
                dry_run: bool = typer.Option(False, "--dry-run", help="Count what would be archived; change nothing."),
                keep_hot: bool = typer.Option(False, help="Write and verify the archive but delete nothing."),
                store: str = STORE, as_json: bool = JSON_OUT) -> None:
    """Archive old tombstones as Parquet with a manifest; rows leave the store only after the copy is verified."""
    if ctx.invoked_subcommand is not None:
        return
    from datetime import timedelta

    from .archive import archive

    with _open(store) as mem:
        rep = archive(mem.store, _objects(to), retention=timedelta(days=retention_days), now=mem.clock.now(),
                      dry_run=dry_run, keep_hot=keep_hot)
    if as_json:
        _dump(rep)
    elif rep.run_id is None:
        console.print(f"{sum(rep.months.values())} tombstones older than {rep.cutoff:%Y-%m-%d}"
                      + (f" would be archived: {rep.months}" if dry_run else ": nothing archived"))
    else:
        console.print(f"archived run {rep.run_id}: {rep.rows} -> {rep.manifest_key}; "
                      + (f"removed from the store: {rep.purged}" if rep.purged else "kept in the store (--keep-hot)"))


@archive_app.command("restore")
def archive_restore(run_id: str = typer.Argument(..., help="The archive run id (see `mnemo archive list`)."),
                    source: str = ARCHIVE_FROM, store: str = STORE, as_json: bool = JSON_OUT) -> None:
    """Bring an archive run's memories, vectors, events and links back; refuses ids already in the store."""
    from .archive import restore

    with _open(store) as mem:
        rep = restore(mem.store, _objects(source), run_id)
    _dump(rep) if as_json else console.print(f"restored {rep.rows} from {run_id}. {rep.note}".strip())


@archive_app.command("list")
def archive_list(source: str = ARCHIVE_FROM, as_json: bool = JSON_OUT) -> None:
    """List the archive runs in an object store, oldest first."""
    from .archive import list_runs

    runs = list_runs(_objects(source))
    if as_json:
        _dump(runs)
        return
    table = Table(title="archive runs")
    for col in ("run_id", "cutoff", "memories", "events", "links", "embedder"):
        table.add_column(col, overflow="fold")
    for r in runs:
        table.add_row(r["run_id"], r["cutoff"], *(str(r["rows"][t]) for t in ("memories", "events", "links")),
                      r["embedder"])
    console.print(table)


@archive_app.command("push")
def archive_push(folder: Path = typer.Argument(..., help="A folder, e.g. an experiment run."),
                 prefix: str = typer.Option(None, help="Key prefix (default experiments/FOLDER_NAME)."),
                 to: str = ARCHIVE_TO,
                 dry_run: bool = typer.Option(False, "--dry-run", help="List what would be uploaded; upload nothing.")
                 ) -> None:
    """Upload a folder, every file checksummed and read back, then its manifest (re-runs skip what is there)."""
    from .archive import push_dir

    listing = push_dir(_objects(to), folder, prefix or f"experiments/{folder.name}", dry_run=dry_run)
    console.print(f"{'would push' if dry_run else 'pushed'} {len(listing['files'])} files, {listing['bytes']:,} bytes")


@archive_app.command("pull")
def archive_pull(prefix: str = typer.Argument(..., help="What `push` wrote, e.g. experiments/r7."),
                 dest: Path = typer.Argument(..., help="Folder to download into."), source: str = ARCHIVE_FROM) -> None:
    """Download a pushed folder, checking every file against its manifest."""
    from .archive import pull_dir

    listing = pull_dir(_objects(source), prefix, dest)
    console.print(f"pulled {len(listing['files'])} files into {dest}")


app.command("eval")(eval_cli.eval_)


RUNS = typer.Option(Path("experiments/runs"), "--runs", help="Folder of the runs: one folder per grid, one per point.")
WORKERS = typer.Option(None, "--workers", "-w", help="Local processes running points in parallel (default: one per CPU).")
SCHEDULER = typer.Option(None, "--scheduler", help="Address of a running Dask scheduler (e.g. tcp://HOST:8786) to run "
                                                   "points on instead of local processes; workers must share the folders "
                                                   "unless --objects is given.")


def _sweep_line(report) -> str:
    return (f"{report.grid}: {report.count('done')} done, {report.count('skipped')} skipped (finished before), "
            f"{report.count('error')} failed in {report.runtime_s:.0f} s")


@app.command("sweep")
def sweep_cmd(grid: Path = typer.Argument(..., help="A grid YAML file (see experiments/*.yaml)."),
              runs: Path = RUNS, workers: int = WORKERS, scheduler: str = SCHEDULER,
              objects: str = typer.Option(None, "--objects", help="With --scheduler: an object store (a path, "
                                          "oss://BUCKET/PREFIX or s3://BUCKET/PREFIX) the workers push each point's "
                                          "folder to; it is pulled into --runs, every file checked."),
              out: Path = typer.Option(Path("experiments/results.parquet"), "--out", "-o",
                                       help="Table every finished point is collected into (.parquet or .duckdb)."),
              collect: bool = typer.Option(True, "--collect/--no-collect", help="Collect the results after the sweep.")
              ) -> None:
    """Run every point of a grid headless through papermill (parallel, resumable); failures are recorded, not fatal."""
    from .lab.sweeps import collect as collect_runs
    from .lab.sweeps import sweep

    report = sweep(grid, runs, workers=workers, scheduler=scheduler, objects=objects)
    console.print(_sweep_line(report))
    if report.note:
        console.print(f"{report.grid}: {report.note}", soft_wrap=True)
    for p in report.failed:
        console.print(f"  [red]failed[/red] {p['folder']}: {p.get('error', '')} (see error.txt)")
    if collect and report.count("done") + report.count("skipped"):
        path, rows = collect_runs(runs, out)
        console.print(f"collected {rows} rows into {path}")
    if report.failed:
        raise typer.Exit(1)


@app.command("collect")
def collect_cmd(runs: Path = typer.Argument(Path("experiments/runs"), help="Folder of the runs to read."),
                out: Path = typer.Option(Path("experiments/results.parquet"), "--out", "-o",
                                         help="Output table: a .parquet file, or a .duckdb file (table 'results')."),
                grid: str = typer.Option(None, "--grid", help="Only this grid's runs (default: every grid).")) -> None:
    """Read every finished point's results.json into one table (one read-only DuckDB query)."""
    from .lab.sweeps import collect, failures

    path, rows = collect(runs, out, grid=grid)
    console.print(f"collected {rows} rows into {path}")
    failed = failures(runs, grid)
    if failed:
        console.print(f"[yellow]{len(failed)} failed points are not in the table:[/yellow] "
                      + ", ".join(f"{f['grid']}/{f['point']}" for f in failed))


@app.command("run")
def run_cmd(experiments: Path = typer.Option(Path("experiments"), "--experiments",
                                             help="Folder of the grids; runs, results and figures go under it."),
            grids: list[str] = typer.Option(None, "--grid", "-g", help="Grid file to run, in order; repeat for "
                                            "several (default: quickstart, threshold_grid, decay_grid, calibration, "
                                            "report)."),
            workers: int = WORKERS, scheduler: str = SCHEDULER) -> None:
    """The main job: run the default sweeps and the benchmark report headless; its last line is the report page."""
    from .lab.sweeps import MAIN_GRIDS, run_main

    summary = run_main(experiments, grids or MAIN_GRIDS, workers=workers, scheduler=scheduler)
    table = Table(title=f"mnemo run: {summary['runtime_s'] / 60:.1f} min")
    for col in ("grid", "done", "skipped", "failed", "point-seconds"):
        table.add_column(col)
    for name, g in summary["grids"].items():
        table.add_row(name, str(g["done"]), str(g["skipped"]), str(g["error"]), f"{g['point_s']:.0f}")
    console.print(table)
    # Paths are printed whole (soft_wrap): a path broken over two lines cannot be copied or clicked.
    for name, g in summary["grids"].items():
        if g["note"]:
            console.print(f"{name}: {g['note']}", soft_wrap=True)
    console.print(f"results table: {summary['table']} ({summary['rows']} rows); executed notebooks and figures under "
                  f"{experiments / 'runs'}", soft_wrap=True)
    for p in summary["failed"]:
        console.print(f"  [red]failed[/red] {p['folder']}: {p.get('error', '')} (see error.txt)", soft_wrap=True)
    if summary["report"]:
        console.print(f"report: {summary['report']}", soft_wrap=True, highlight=False)
    if summary["failed"]:
        raise typer.Exit(1)


@app.command("lab")
def lab_cmd(notebooks: Path = typer.Option(Path("notebooks"), "--notebooks", help="Folder JupyterLab opens."),
            port: int = typer.Option(None, "--port", help="Port on 127.0.0.1 (default: the first free from 8888)."),
            token: str = typer.Option(None, "--token", help="Access token (default: a new one, shown in the URL)."),
            browser: bool = typer.Option(True, "--browser/--no-browser", help="Open a browser tab.")) -> None:
    """Open JupyterLab on the notebooks, whose kernel (python3) is this environment's interpreter."""
    from .lab.jupyter import lab_command

    cmd = lab_command(notebooks, port=port, token=token, open_browser=browser)
    console.print(f"JupyterLab on {notebooks}; the notebooks' python3 kernel runs {sys.executable}", soft_wrap=True,
                  highlight=False)
    # JupyterLab replaces this process: Ctrl-C and its shutdown prompt reach it directly.
    os.execv(cmd[0], cmd)


def main() -> None:
    """Entry point: run the app, turning library errors into one clean line and exit code 2."""
    try:
        app(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        sys.exit(1)
    except MnemoError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        sys.exit(2)


if __name__ == "__main__":
    main()
