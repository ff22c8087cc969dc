"""The verb table: every operation on memories, the `Memory` method behind it and how each surface offers it.

    from mnemo.verbs import VERBS, offered
    VERBS["forget"].http                  # Route("POST", "/v1/forget")
    [v.mcp.name for v in offered("mcp")]  # the MCP server's tools, in the table's order

The surfaces are built from this table. The MCP server's tools are its `mcp` specs; the
HTTP service and the CLI each keep one function per verb they offer (what a verb does
there differs: quota charges, a streamed export, an export read from a file) and
`Surface.bound` pairs those functions with the table, refusing a verb without a
function or a function without a verb. So a verb reaches every surface, or the table
says why a surface does not offer it (`Absent`). README.md's table of verbs is
generated from this one (docs/generate.py) and tests/test_verbs.py checks each surface
against it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import ConfigError

SURFACES = ("cli", "http", "mcp")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolSpec:
    """A tool over one `Memory` method: its schema comes from the method, not from this spec."""

    name: str  # the tool name the model (or MCP client) sees
    method: str  # the Memory method whose signature defines the arguments
    hidden: tuple[str, ...] = ()  # parameters the caller never sets: bound by the session, or not JSON-able
    doc: str | None = None  # the Memory method whose docstring describes the tool (default: `method`)
    note: str = ""  # a sentence appended to the description, for what the wrapper adds
    result_key: str = "result"  # key under which a list result is returned as an object
    given: tuple[str, ...] = ()  # arguments the wrapper takes in place of hidden ones (a file's content, not its path)


@dataclass(frozen=True)
class Route:
    """An HTTP route: a method and a path."""

    method: str  # GET or POST
    path: str  # under /v1; {memory_id} where the route names one memory

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Absent:
    """A surface that does not offer a verb, and why."""

    why: str  # one phrase, shown in README.md's table as "- (why)"

    def __str__(self) -> str:
        return f"- ({self.why})"


@dataclass(frozen=True)
class Verb:
    """One verb on memories: the library method that does it, and its name on each surface."""

    name: str  # the verb, as README.md's table names it
    method: str  # the Memory method that does it
    summary: str  # what it does, in one line (the HTTP route's summary)
    cli: str | Absent  # the `mnemo` command
    http: Route | Absent  # the route of the HTTP service
    mcp: ToolSpec | Absent  # the MCP server's tool

    def on(self, surface: str) -> Any:
        """Return the verb's name on `surface` (a command, a Route, a ToolSpec), or None where it is not offered."""
        if surface not in SURFACES:
            raise ConfigError(f"unknown surface {surface!r}; use one of {', '.join(SURFACES)}")
        value = getattr(self, surface)
        return None if isinstance(value, Absent) else value


RUNS_AT_OPEN = Absent("runs at open")

TABLE = (
    Verb("remember", "remember", "Record a turn, extract memories from it and reconcile them.",
         cli="remember", http=Route("POST", "/v1/remember"), mcp=ToolSpec("remember", "remember", hidden=("at",))),
    Verb("add", "add", "Write one structured memory, reconciled like any other write.",
         cli="add", http=Route("POST", "/v1/memories"), mcp=ToolSpec("add", "add", hidden=("at",))),
    Verb("recall", "recall", "Pack the memories that matter for a query under a token budget, with confidence and trace.",
         cli="recall", http=Route("POST", "/v1/recall"), mcp=ToolSpec("recall", "recall", hidden=("at",))),
    Verb("answer", "answer", "Answer a question from the recalled memories, citing them; abstain when the record is silent.",
         cli="answer", http=Route("POST", "/v1/answer"), mcp=ToolSpec("answer", "answer")),
    Verb("forget", "forget", "Tombstone one memory by id, or exactly the memories a query names.",
         cli="forget", http=Route("POST", "/v1/forget"), mcp=ToolSpec("forget", "forget", result_key="forgotten")),
    Verb("restore", "restore", "Reverse a tombstone: the memory is active again.",
         cli="restore", http=Route("POST", "/v1/memories/{memory_id}/restore"), mcp=ToolSpec("restore", "restore")),
    Verb("history", "history", "Tell the story of a memory: created, corroborated, superseded, forgotten, restored.",
         cli="history", http=Route("GET", "/v1/memories/{memory_id}/history"),
         mcp=ToolSpec("history", "history", result_key="events")),
    # Memory.memories has no docstring yet; the note describes the tool until it does.
    Verb("list", "memories", "List memories, oldest first: one user's or all, active only unless tombstones are asked for.",
         cli="memories", http=Route("GET", "/v1/memories"),
         mcp=ToolSpec("list_memories", "memories", result_key="memories",
                      note="List memories (of one user, or all), active only unless include_inactive is set.")),
    Verb("get", "get", "Return one memory, active or tombstoned.",
         cli="get", http=Route("GET", "/v1/memories/{memory_id}"), mcp=ToolSpec("get", "get")),
    Verb("audit", "audit", "Report contradictions and dangling references with recommended resolutions; change nothing.",
         cli="audit", http=Route("POST", "/v1/audit"), mcp=ToolSpec("audit", "audit")),
    Verb("assess", "assess", "Recall, then re-ground verifiable claims with the caller's tools and decide act or escalate.",
         cli=Absent("tools are Python objects"), http=Route("POST", "/v1/assess"),
         mcp=ToolSpec("assess", "recall", hidden=("at",), doc="assess", note="It recalls for the query first; the "
                      "result holds the verdict, trust, claims and the assessed pack.")),
    Verb("decay", "decay", "Tombstone memories whose salience fell under the threshold, then review those past their TTL.",
         cli="decay", http=Route("POST", "/v1/decay"),
         mcp=ToolSpec("decay", "decay", note="Then each memory past its TTL is reviewed: kept or forgotten, with why.")),
    Verb("export", "export", "Write the memories (all, or one user's) as the lossless JSON export or as Markdown.",
         cli="export", http=Route("GET", "/v1/export"),
         mcp=ToolSpec("export", "export", hidden=("path", "key"),
                      note="The export is returned in the result, not written on the server.")),
    Verb("import", "import_", "Load a JSON export into a store in one transaction, without re-embedding.",
         cli="import", http=Route("POST", "/v1/import"),
         mcp=ToolSpec("import", "load", hidden=("path", "key"), given=("content",), note="The export is given as the "
                      "export tool returns it (its records), checked under the server's key.")),
    Verb("stats", "stats", "Count memories (by status, active by kind) and turns: one user's, or the store's.",
         cli="stats", http=Route("GET", "/v1/stats"),
         mcp=ToolSpec("stats", "stats", note="Where the store lives on the server is not said.")),
    Verb("repair", "repair", "Process the turns recorded but never processed, once each.",
         cli="repair", http=RUNS_AT_OPEN, mcp=RUNS_AT_OPEN),
)
VERBS = {verb.name: verb for verb in TABLE}


def offered(surface: str) -> list[Verb]:
    """Return the verbs `surface` offers, in the table's order."""
    return [verb for verb in TABLE if verb.on(surface) is not None]


class Surface:
    """One surface's function for each verb it offers, kept as they are defined: `@surface.verb("forget")`."""

    def __init__(self, name: str):
        if name not in SURFACES:
            raise ConfigError(f"unknown surface {name!r}; use one of {', '.join(SURFACES)}")
        self.name = name
        self.handlers: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}

    def verb(self, name: str, **options: Any) -> Callable[[F], F]:
        """Keep the decorated function as this surface's `name`, with the options the surface registers it with."""
        def keep(fn: F) -> F:
            if name in self.handlers:
                raise ConfigError(f"two {self.name} functions for the verb {name!r}")
            self.handlers[name] = (fn, options)
            return fn

        return keep

    def bound(self) -> list[tuple[Verb, Callable[..., Any], dict[str, Any]]]:
        """Return (verb, function, options) for each verb this surface offers, in the table's order.

        A verb the table offers here without a function, or a function for a verb the table
        does not offer here, raises ConfigError: the surface and the table must agree.
        """
        verbs = offered(self.name)
        missing = [v.name for v in verbs if v.name not in self.handlers]
        extra = sorted(set(self.handlers) - {v.name for v in verbs})
        if missing or extra:
            raise ConfigError(f"the {self.name} surface and the verb table (mnemo/verbs.py) disagree: "
                              + "; ".join(part for part in (
                                  f"no function for {', '.join(missing)}" if missing else "",
                                  f"no verb offered here for {', '.join(extra)}" if extra else "") if part))
        return [(v, *self.handlers[v.name]) for v in verbs]
