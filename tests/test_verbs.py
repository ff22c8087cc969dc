"""The verb table (`mnemo.verbs`) against the code: each surface offers exactly the table's verbs, and they work.

A surface that does not offer a verb says why in the table. Every CLI command, HTTP data route and
MCP tool is a verb of the table or named below as not one, so a verb added to one surface alone
shows up here. README.md's copy of the table is generated (docs/generate.py) and checked by
tests/test_docs.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import start_blocking_portal
from fastapi.routing import APIRoute
from mcp import Client
from typer.main import get_command
from typer.testing import CliRunner

from mnemo import Memory, cli
from mnemo.cli import app as cli_app
from mnemo.errors import ConfigError
from mnemo.server import http
from mnemo.server.http import create_app, running
from mnemo.server.mcp import SERVER_TOOLS, build_server
from mnemo.server.tenants import ServerConfig
from mnemo.verbs import TABLE, VERBS, offered

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
    assert _cli() == {v.cli for v in offered("cli")} | NOT_VERBS["cli"]
    assert _http() == {str(v.http) for v in offered("http")} | NOT_VERBS["http"]
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


def _shell(store: Path) -> Callable[..., str]:
    """Return run(*args): `mnemo ARGS --store STORE` through typer's runner; its output, or a failed test."""
    runner = CliRunner()

    def run(*args: str) -> str:
        res = runner.invoke(cli_app, [*args, "--store", str(store)])
        assert res.exit_code == 0, (args, res.output, res.exception)
        return res.output

    return run


def test_the_cli_verbs_added_for_the_table_work_on_a_store(tmp_path):
    """memories, answer, audit and restore from the shell, on a file store, as a user would type them."""
    run = _shell(tmp_path / "m.duckdb")
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


# ----------------------------------------------------------------- each verb works on each surface
MEMORY_ID = re.compile(r"\bm-[0-9a-f]{16}-[0-9a-f]{8}\b")
LATER = "2040-01-01T00:00:00+00:00"  # years on: a lunch has decayed


def _statuses(listed: str) -> dict[str, str]:
    """Return {memory id: status} from what list answered: a JSON list, or an object holding one."""
    value = json.loads(listed)
    return {m["id"]: m["status"] for m in (value["memories"] if isinstance(value, dict) else value)}


def _exercise(call: Callable[..., str]) -> None:
    """Run remember, recall, list, history, audit, export, import, forget and decay through `call(verb, **args)`.

    `call` returns the surface's answer as text; each verb's effect is checked in it, or in what list answers next.
    """
    lunch = MEMORY_ID.findall(call("remember", text="I had a tuna sandwich for lunch today.", user="alice"))[0]
    home = MEMORY_ID.findall(call("remember", text="I live in Lisbon.", user="alice"))[0]
    assert home in call("recall", query="Where do I live?", user="alice")
    assert _statuses(call("list", user="alice")) == {lunch: "active", home: "active"}
    assert '"created"' in call("history", memory_id=home)
    assert '"alice"' in call("audit", user="alice")
    exported = call("export", user="alice")
    assert home in exported and lunch in exported
    assert home in call("import", content=exported, on_conflict="skip"), "an id already stored is skipped"
    call("forget", memory_id=home)
    call("decay", at=LATER)
    assert _statuses(call("list", user="alice", include_inactive=True)) == {lunch: "decayed", home: "forgotten"}


# The CLI's arguments for each verb's call: the shell spells them as options and arguments.
ARGV = {
    "remember": lambda a: [a["text"], "-u", a["user"], "--embedder", "hash", "--json"],
    "recall": lambda a: [a["query"], "-u", a["user"], "--json"],
    "list": lambda a: ["-u", a["user"], "--json", *(["--all"] if a.get("include_inactive") else [])],
    "history": lambda a: [a["memory_id"], "--json"],
    "audit": lambda a: ["-u", a["user"], "--json"],
    "export": lambda a: [a["path"], "-u", a["user"]],
    "import": lambda a: [a["path"], "--on-conflict", a["on_conflict"], "--json"],
    "forget": lambda a: [a["memory_id"]],
    "decay": lambda a: ["--at", a["at"]],
}


@contextmanager
def _over_cli(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Each verb as `mnemo COMMAND` on a DuckDB file; an export is written to a file and read back."""
    run, exported = _shell(tmp_path / "m.duckdb"), tmp_path / "export.jsonl"

    def call(verb: str, **args: Any) -> str:
        if verb == "import":
            exported.write_text(args["content"], encoding="utf-8")
        out = run(VERBS[verb].cli, *ARGV[verb]({**args, "path": str(exported)}))
        return exported.read_text(encoding="utf-8") if verb == "export" else out

    yield call


@contextmanager
def _over_http(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Each verb as its route on a real server on loopback: GET with query parameters, POST with a JSON body."""
    key = "key-verbs-0123456789abcdef"
    app = create_app({key: "acme"}, ServerConfig(embedder="hash", store_dir=str(tmp_path), quota_calls=10_000))
    with running(app) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                                           timeout=60) as client:
        def call(verb: str, **args: Any) -> str:
            route = VERBS[verb].http
            rest = {k: v for k, v in args.items() if f"{{{k}}}" not in route.path}
            if verb == "import":
                res = client.post(route.path, content=rest.pop("content").encode(), params=rest,
                                  headers={"Content-Type": "application/x-ndjson"})
            else:
                res = client.request(route.method, route.path.format(**args),
                                     **{"params" if route.method == "GET" else "json": rest})
            assert res.status_code == 200, (verb, res.text)
            return res.text

        yield call


@contextmanager
def _over_mcp(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Each verb as its tool, called by the MCP SDK's client; an export is imported as the records it returned."""
    with (Memory.open(str(tmp_path / "m.duckdb"), embedder="hash", llm="offline") as mem,
          start_blocking_portal() as portal,
          portal.wrap_async_context_manager(Client(build_server(mem))) as client):
        def call(verb: str, **args: Any) -> str:
            if verb == "import":
                args["content"] = json.loads(args["content"])["content"]
            result = portal.call(client.call_tool, VERBS[verb].mcp.name, args)
            assert not result.is_error, (verb, result.content)
            return json.dumps(result.structured_content)

        yield call


@pytest.mark.parametrize("surface", [_over_cli, _over_http, _over_mcp], ids=["cli", "http", "mcp"])
def test_each_verb_works_on_each_surface(surface, tmp_path):
    with surface(tmp_path) as call:
        _exercise(call)
