"""`mnemo serve mcp` and `mnemo serve http`: the servers' commands; mnemo.cli adds them to the `mnemo` app.

They live beside what they run, as the research wing's live in mnemo/eval/cli.py; each imports its
server lazily, so `mnemo --help` stays fast and one surface never needs the other's packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

serve_app = typer.Typer(help="Serve the memory over a protocol: MCP (stdio or streamable HTTP) or HTTP.",
                        no_args_is_help=True)
EMBEDDER = typer.Option(None, "--embedder", help="hash | minilm | openai:MODEL (default: the store's own, else auto).")
LLM = typer.Option(None, "--llm", help="offline | live | record:PATH | replay:PATH (default: offline).")

STORE_DIR = typer.Option(None, help="One <tenant>.duckdb per tenant in this folder, or one schema per tenant of this "
                                    "postgresql:// DSN (default: a throwaway in-memory store per tenant).")
KEYS = typer.Option(None, help="File of API keys, KEY:TENANT a line or a JSON object "
                               "(default: $MNEMO_API_KEYS='KEY:TENANT,...').")
QUOTA_CALLS = typer.Option(120, help="Model-calling requests per tenant per window (else 429); counted in the "
                                     "database on PostgreSQL, so it holds across replicas.")
QUOTA_WINDOW = typer.Option(60.0, help="Quota window in seconds.")


@serve_app.command("mcp")
def serve_mcp(store: str = typer.Option(None, "--store", "-s", help="stdio: the store file (default mnemo.duckdb; "
                                        "':memory:' for a throwaway store). Not with --transport http."),
              embedder: str = EMBEDDER, llm: str = LLM,
              transport: str = typer.Option("stdio", help="stdio (for a desktop client) | http (streamable HTTP, "
                                            "API keys required, one store per tenant)."),
              host: str = typer.Option("127.0.0.1", help="Interface to listen on with --transport http."),
              port: int = typer.Option(8765, help="Port to listen on with --transport http."),
              path: str = typer.Option("/mcp", help="URL path of the MCP endpoint with --transport http."),
              store_dir: str = STORE_DIR, keys: Path = KEYS, quota_calls: int = QUOTA_CALLS,
              quota_window: float = QUOTA_WINDOW) -> None:
    """Serve the memory tools over MCP: every verb of the table (mnemo.verbs) that MCP offers."""
    from ..portable import export_key
    from .mcp import serve
    from .tenants import ServerConfig, load_keys

    if transport != "http":
        serve(store, transport=transport, embedder=embedder, llm=llm)
        return
    cfg = ServerConfig(store_dir=_store_dir(store_dir), embedder=embedder, llm=llm, quota_calls=quota_calls,
                       quota_window_s=quota_window, export_key=export_key())
    serve(store, transport=transport, host=host, port=port, path=path, keys=load_keys(keys), cfg=cfg)


def _store_dir(store_dir: str | None) -> str | None:
    """Return `store_dir`, creating a folder (not a DSN); warn that without one nothing outlives the process."""
    from ..store import is_dsn

    if store_dir and not is_dsn(store_dir):
        Path(store_dir).mkdir(parents=True, exist_ok=True)
    elif not store_dir:
        Console(stderr=True).print("[yellow]no --store-dir: every tenant's memories are lost when the server stops"
                                   "[/yellow]")
    return store_dir


def _load_object(spec: str) -> Any:
    """Return the object named 'package.module:NAME' (the assessor's tools for `serve http --tools`)."""
    import importlib

    module, _, name = spec.partition(":")
    if not module or not name:
        raise typer.BadParameter(f"--tools takes 'package.module:NAME', got {spec!r}")
    return getattr(importlib.import_module(module), name)


@serve_app.command("http")
def serve_http(store_dir: str = STORE_DIR, keys: Path = KEYS,
               host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
               port: int = typer.Option(8080, help="Port to listen on."),
               embedder: str = EMBEDDER, llm: str = LLM,
               recipe_name: str = typer.Option(None, "--recipe", help="Config recipe for every tenant's memory."),
               max_body_bytes: int = typer.Option(1_048_576, help="Larger request bodies get 413."),
               quota_calls: int = QUOTA_CALLS, quota_window: float = QUOTA_WINDOW,
               tools: str = typer.Option(None, help="Systems of record for assess, as 'package.module:NAME' "
                                                    "(default: none, trust from provenance only)."),
               experiments: Path = typer.Option(None, help="Folder of sweep results (results.json, *.png) the "
                                                          "explorer shows, read-only, to every API key."),
               log_level: str = typer.Option("info", help="uvicorn log level.")) -> None:
    """Serve the library over HTTP (FastAPI): API keys map to tenants, one store per tenant, quotas, /readyz."""
    from ..portable import export_key
    from .http import serve
    from .tenants import ServerConfig, load_keys

    cfg = ServerConfig(store_dir=_store_dir(store_dir), embedder=embedder, llm=llm, recipe=recipe_name,
                       max_body_bytes=max_body_bytes, quota_calls=quota_calls, quota_window_s=quota_window,
                       export_key=export_key())
    Console(stderr=True).print(f"explorer: http://{host}:{port}/explorer")
    serve(load_keys(keys), cfg, host=host, port=port, tools=_load_object(tools) if tools else None,
          log_level=log_level, experiments=experiments)
