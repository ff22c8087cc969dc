"""The end-to-end demo behind `mnemo demo`: a short story told through the public API."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from rich.console import Console

from ..clock import SimulatedClock
from ..memory import Memory

STORY = [
    ("s1", 0, "Hi! My name is Alice and I live in Berlin."),
    ("s1", 0, "I prefer green tea over coffee."),
    ("s1", 0, "The lead time for IC-MC-44 is 21 days."),
    ("s1", 0, "The lead time for S-208 is 14 days."),
    ("s1", 0, "ok thanks"),
    ("s2", 9, "I moved to Lisbon last week."),
    ("s2", 9, "IC-MC-44's lead time moved from 21 to 35 days because the supplier changed."),
]


def run_demo(path: str, *, embedder: str | None = None, console: Console | None = None) -> dict[str, Any]:
    """Play the demo story on a store at `path` and return what happened (for tests and the CLI)."""
    out = console or Console()
    clock = SimulatedClock(datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc))
    summary: dict[str, Any] = {"store": path}
    with Memory.open(path, embedder=embedder, clock=clock) as mem:
        out.rule(f"mnemo demo - store {path}")
        out.print(f"embedder [bold]{mem.embedder.name}[/bold], model client [bold]{mem.llm.mode}[/bold]")
        day = 0
        for session, at_day, text in STORY:
            if at_day > day:
                clock.advance(timedelta(days=at_day - day))
                day = at_day
            rep = mem.remember(text, user="alice", session=session)
            out.print(f"[dim]{clock.now():%Y-%m-%d}[/dim] alice: {text}")
            for r in rep.added:
                out.print(f"    [green]+ added[/green] {r.text}")
            for s in rep.superseded:
                out.print(f"    [yellow]~ superseded[/yellow] {s.old.text!r} -> {s.new.text!r} ({s.reason})")
            if not rep.changed:
                out.print("    [dim](nothing stored)[/dim]")
        summary["memories"] = len(mem.memories("alice"))
        summary["tombstones"] = len(mem.memories("alice", include_inactive=True)) - summary["memories"]

        r = mem.recall("Where does Alice live?", user="alice", budget_tokens=128)
        out.rule("recall: Where does Alice live?")
        out.print(f"confidence [bold]{r.confidence}[/bold], {r.tokens_used}/{r.budget_tokens} tokens")
        for p in r.memories:
            out.print(f"  [{p.score:.2f}] {p.text}")
        for p in r.history:
            out.print(f"  [dim]history: {p.note}[/dim]")
        for e in r.trace[:8]:
            out.print(f"  trace {e.memory_id} {'in ' if e.included else 'out'} {e.reason} {e.detail}")
        summary["recall"] = {"confidence": r.confidence, "texts": [p.text for p in r.memories]}

        unknown = mem.recall("What is Alice's blood type?", user="alice")
        out.print(f"recall: What is Alice's blood type? -> [bold]{unknown.confidence}[/bold] {unknown.message}")
        summary["abstain"] = unknown.confidence

        out.rule("forget: my tea preference")
        planned = mem.forget(query="my tea preference", user="alice", dry_run=True)
        out.print(f"dry run would forget: {[m.text for m in planned]}")
        gone = mem.forget(query="my tea preference", user="alice", reason="user asked")
        summary["forgotten"] = [m.text for m in gone]

        stale = [m for m in mem.memories("alice", include_inactive=True) if m.status == "superseded"]
        out.rule("history of a superseded memory")
        for m in stale[:1]:
            for e in mem.history(m.id):
                out.print(f"  {e.at:%Y-%m-%d} {e.action} {e.reason or ''} -> {e.other_id or ''}")
        summary["superseded"] = [m.text for m in stale]

        clock.advance(timedelta(days=120))
        decayed = mem.decay()
        out.print(f"after 120 simulated days: {len(decayed)} memories decayed")
        summary["decayed"] = len(decayed)
        summary["stats"] = mem.stats()["by_status"]
        out.print(f"store: {summary['stats']}")
    return summary
