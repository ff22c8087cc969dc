"""The verb table: each verb on each surface (library, CLI, HTTP, MCP), as README.md shows it, checked against the code.

A surface that does not offer a verb says why in the table. Every CLI command, HTTP data route and
MCP tool is a verb of the table or named below as not one, so a verb added to one surface alone
shows up here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi.routing import APIRoute
from typer.main import get_command

from mnemo import Memory
from mnemo.cli import app as cli_app
from mnemo.server.http import create_app
from mnemo.server.mcp import SERVER_TOOLS

ROOT = Path(__file__).resolve().parents[1]

# verb: (library, CLI, HTTP, MCP); a cell that starts with "-" is a verb the surface does not offer, with why.
VERBS = {
    "remember": ("Memory.remember", "remember", "POST /v1/remember", "remember"),
    "add": ("Memory.add", "add", "POST /v1/memories", "add"),
    "recall": ("Memory.recall", "recall", "POST /v1/recall", "recall"),
    "answer": ("Memory.answer", "answer", "POST /v1/answer", "answer"),
    "forget": ("Memory.forget", "forget", "POST /v1/forget", "forget"),
    "restore": ("Memory.restore", "restore", "POST /v1/memories/{memory_id}/restore", "restore"),
    "history": ("Memory.history", "history", "GET /v1/memories/{memory_id}/history", "history"),
    "list": ("Memory.memories", "memories", "GET /v1/memories", "list_memories"),
    "get": ("Memory.get", "get", "GET /v1/memories/{memory_id}", "get"),
    "audit": ("Memory.audit", "audit", "POST /v1/audit", "audit"),
    "assess": ("Memory.assess", "- (tools are Python objects)", "POST /v1/assess", "assess"),
    "decay": ("Memory.decay", "decay", "POST /v1/decay", "decay"),
    "export": ("Memory.export", "export", "GET /v1/export", "export"),
    "import": ("Memory.import_", "import", "POST /v1/import", "import"),
    "stats": ("Memory.stats", "stats", "GET /v1/stats", "stats"),
    "repair": ("Memory.repair", "repair", "- (runs at open)", "- (runs at open)"),
}
# What the surfaces offer that is not a verb on memories: research, operations and serving.
NOT_VERBS = {"cli": {"data", "eval", "serve", "simulate", "archive", "sweep", "collect", "run", "lab", "demo"},
             "http": {"GET /v1/experiments", "GET /v1/experiments/file"}}


def _offered(cell: str) -> bool:
    return not cell.startswith("-")


def _cli() -> set[str]:
    return set(get_command(cli_app).commands)


def _http() -> set[str]:
    app = create_app({"k" * 24: "t"})
    return {f"{m} {r.path}" for r in app.routes if isinstance(r, APIRoute) and r.path.startswith("/v1/")
            for m in r.methods}


def test_every_verb_offered_exists_on_its_surface():
    cli, http, mcp = _cli(), _http(), {s.name for s in SERVER_TOOLS}
    for verb, (lib, cmd, route, tool) in VERBS.items():
        assert callable(getattr(Memory, lib.split(".")[1])), (verb, lib)
        assert not _offered(cmd) or cmd in cli, (verb, cmd)
        assert not _offered(route) or route in http, (verb, route)
        assert not _offered(tool) or tool in mcp, (verb, tool)


def test_nothing_is_offered_outside_the_table():
    listed = {i: {row[i] for row in VERBS.values() if _offered(row[i])} for i in (1, 2, 3)}
    assert _cli() - listed[1] == NOT_VERBS["cli"]
    assert _http() - listed[2] == NOT_VERBS["http"]
    assert {s.name for s in SERVER_TOOLS} == listed[3]


def test_the_readme_shows_the_table():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- verbs -->\n", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip().strip("`") for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]
    shown = {r[0]: tuple(r[1:]) for r in rows}
    assert shown == VERBS, "README.md's verb table differs from tests/test_verbs.py's VERBS"
    assert re.search(r"\| verb \| library \| CLI \| HTTP \| MCP \|", block)


def test_the_cli_verbs_added_for_the_table_work_on_a_store(tmp_path):
    """memories, answer, audit and restore from the shell, on a file store, as a user would type them."""
    from typer.testing import CliRunner

    runner = CliRunner()
    store = str(tmp_path / "m.duckdb")

    def run(*args: str) -> str:
        res = runner.invoke(cli_app, [*args, "--store", store])
        assert res.exit_code == 0, (args, res.output, res.exception)
        return res.output

    run("add", "The Wi-Fi password is tulip42.", "-u", "dana", "--subject", "wifi", "--attribute", "password",
        "--value", "tulip42", "--embedder", "hash")
    run("add", "The Wi-Fi password is orchid77.", "-u", "dana", "--subject", "wifi", "--attribute", "password",
        "--value", "orchid77")
    rows = json.loads(run("memories", "--all", "--json"))
    old = next(m for m in rows if "tulip42" in m["text"])
    assert old["status"] == "superseded" and sum(m["status"] == "active" for m in rows) == 1
    assert "orchid77" in run("answer", "What is the Wi-Fi password?", "-u", "dana")
    assert "dana: clean" in run("audit", "-u", "dana")
    assert "restored" in run("restore", old["id"])
    # Both values active again: the audit now reports the contradiction and recommends one.
    assert "contradiction" in run("audit", "-u", "dana")
    assert len(json.loads(run("memories", "-u", "dana", "--json"))) == 2
