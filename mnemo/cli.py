"""The `mnemo` command: a thin layer over `Memory`; library errors become one clean message here."""

from __future__ import annotations

import json
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

app = typer.Typer(help="mnemo: long-term memory for LLM agents that forgets correctly and knows what it can trust.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
data_app = typer.Typer(help="Benchmark data: download the public originals.", no_args_is_help=True)
app.add_typer(data_app, name="data")
console = Console()

STORE = typer.Option("mnemo.duckdb", "--store", "-s", help="Store file (':memory:' for a throwaway store).")
EMBEDDER = typer.Option(None, "--embedder", help="hash | minilm | openai:MODEL (default: the store's own, else auto).")
LLM = typer.Option(None, "--llm", help="offline | live | record:PATH | replay:PATH (default: offline).")
USER = typer.Option(..., "--user", "-u", help="Whose memories.")
JSON_OUT = typer.Option(False, "--json", help="Print JSON instead of a table.")


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


@app.command()
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


@app.command()
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


@app.command()
def recall(query: str = typer.Argument(..., help="What the agent needs to know."), user: str = USER,
           budget: int = typer.Option(None, "--budget", "-b", help="Token budget (default from the recipe)."),
           trace: bool = typer.Option(False, help="Show every candidate and why it was or was not packed."),
           store: str = STORE, embedder: str = EMBEDDER, as_json: bool = JSON_OUT) -> None:
    """Pack the memories that matter for a query under a token budget."""
    with _open(store, embedder) as mem:
        r = mem.recall(query, user=user, budget_tokens=budget)
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


@app.command()
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


@app.command()
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


@app.command()
def decay(at: str = typer.Option(None, help="ISO time of the pass (default now)."), store: str = STORE) -> None:
    """Tombstone memories whose salience fell under the threshold, then review expired ones."""
    with _open(store) as mem:
        decayed = mem.decay(at=_when(at))
        reviewed = mem.review_expired(at=_when(at))
        console.print(f"{len(decayed)} decayed, {sum(not v['keep'] for v in reviewed)} of {len(reviewed)} "
                      "expired memories forgotten after review")


@app.command()
def stats(store: str = STORE) -> None:
    """Counts by status, the store's embedder and schema version."""
    with _open(store, read_only=True) as mem:
        _dump(mem.stats())


@app.command()
def demo(store: str = typer.Option(None, "--store", "-s", help="Keep the demo store here (default: a temp dir)."),
         embedder: str = EMBEDDER) -> None:
    """Run an end-to-end demo: remember, correct, recall with its trace, forget, history."""
    from .demo import run_demo

    path = store or str(Path(tempfile.mkdtemp(prefix="mnemo-demo-")) / "demo.duckdb")
    run_demo(path, embedder=embedder, console=console)


@data_app.command("download")
def data_download(name: str = typer.Argument(..., help="locomo | realtalk | beam | mquake_hard | meme | prefeval | longmemeval"),
                  dest: Path = typer.Option(Path("data/external"), help="Folder to write into (then set MNEMO_DATA_DIR).")) -> None:
    """Download a benchmark's original files from upstream at pinned commits, checking sha256."""
    from .eval.download import download

    for path in download(name, dest):
        console.print(str(path))


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
