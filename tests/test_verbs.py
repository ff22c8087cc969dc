"""The verb table (`mnemo.verbs`) against the code: each surface offers exactly the table's verbs, and they work.

A surface that does not offer a verb says why in the table. Every CLI command, HTTP data route and
MCP tool is a verb of the table or named below as not one, so a verb added to one surface alone
shows up here. README.md's copy of the table is generated (docs/generate.py) and checked by
tests/test_docs.py.
"""

from __future__ import annotations

import json

import pytest
from fastapi.routing import APIRoute
from typer.main import get_command

from mnemo import Memory, cli
from mnemo.cli import app as cli_app
from mnemo.errors import ConfigError
from mnemo.server import http
from mnemo.server.http import create_app
from mnemo.server.mcp import SERVER_TOOLS
from mnemo.verbs import TABLE, offered

# What the surfaces offer that is not a verb on memories: research, operations and serving.
NOT_VERBS = {"cli": {"data", "eval", "serve", "simulate", "archive", "sweep", "collect", "run", "lab", "demo"},
             "http": {"GET /v1/experiments", "GET /v1/experiments/file"}}


def _cli() -> set[str]:
    return set(get_command(cli_app).commands)


def _http() -> set[str]:
    app = create_app({"k" * 24: "t"})
    return {f"{m} {r.path}" for r in app.routes if isinstance(r, APIRoute) and r.path.startswith("/v1/")
            for m in r.methods}


def _mcp() -> set[str]:
    return {s.name for s in SERVER_TOOLS}


def test_every_verb_is_a_memory_method():
    for verb in TABLE:
        assert callable(getattr(Memory, verb.method)), verb.name


def test_each_surface_offers_exactly_the_tables_verbs():
    assert _cli() - NOT_VERBS["cli"] == {v.cli for v in offered("cli")}
    assert _http() - NOT_VERBS["http"] == {str(v.http) for v in offered("http")}
    assert _mcp() == {v.mcp.name for v in offered("mcp")}


# How each surface is built from the table, and a verb it does not offer.
BUILD = {"cli": (lambda: cli.COMMANDS.bound(), cli.COMMANDS, "assess"),
         "http": (lambda: create_app({"k" * 24: "t"}), http.ROUTES, "repair")}


@pytest.mark.parametrize("surface", BUILD)
def test_a_surface_whose_functions_and_the_table_disagree_is_refused(surface, monkeypatch):
    build, functions, absent = BUILD[surface]
    monkeypatch.delitem(functions.handlers, "forget")
    with pytest.raises(ConfigError, match="no function for forget"):
        build()
    monkeypatch.undo()
    monkeypatch.setitem(functions.handlers, absent, (lambda: None, {}))
    with pytest.raises(ConfigError, match=f"no verb offered here for {absent}"):
        build()


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
