"""The shape of the house (docs: DESIGN.md, "Layout"), held by reading every module's imports with `ast`.

- Only the store package (mnemo/store/) imports duckdb, psycopg or pgvector.
- The core (everything but mnemo/eval/, mnemo/lab/, mnemo/server/ and mnemo/cli.py) never imports eval,
  the lab or server; the lab (mnemo/lab/: sweeps, calibrate, fitting, report, record, jupyter, demo)
  is a room of its own that the core does not lean on.
- No two mnemo modules import each other in a loop.
- No module passes MAX_LINES.
- No mnemo module imports another module's private (underscore) names.
- The stages take values (a store, a config, records): none imports mnemo.memory or takes the
  `Memory` facade (a parameter named `mem` or annotated `Memory`); `Memory` only wires them.

The engine rule lists today's exceptions by name with the reason each stands (the other rules
have none left). An exception that no longer holds fails too, so a list only shrinks: remove the
entry when its reason goes.
Imports inside functions count (a lazy import still ties two modules); imports under
`if TYPE_CHECKING:` do not (they never run).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mnemo"
MAX_LINES = 600
ENGINES = ("duckdb", "psycopg", "pgvector")
# The stages (DESIGN.md, "Layout"): functions over values that `Memory` wires; a folder holds a staged package.
STAGES = ("mnemo/assess.py", "mnemo/audit.py", "mnemo/answer.py", "mnemo/portable.py", "mnemo/write.py",
          "mnemo/decay.py", "mnemo/recall/")

# Modules outside the store package that import a database engine, and why.
ENGINE_EXCEPTIONS = {
    "mnemo/assess.py": "SQLTool queries the caller's system of record (a DuckDB table, or one SQLTool.from_rows "
                       "builds in memory), never mnemo's store",
    "mnemo/lab/sweeps.py": "collects finished sweep points' JSON into one Parquet / DuckDB table: DuckDB as a query "
                       "engine over result files, not the memory store",
}


def _modules() -> dict[str, Path]:
    return {p.relative_to(ROOT).as_posix(): p for p in sorted(PACKAGE.rglob("*.py"))}


@cache
def _tree(rel: str) -> ast.Module:
    return ast.parse((ROOT / rel).read_text(), filename=rel)


def _dotted(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_of(dotted: str) -> str | None:
    """Return the mnemo file that `import dotted` runs last (a module, or a package's __init__.py)."""
    base = dotted.replace(".", "/")
    for rel in (f"{base}.py", f"{base}/__init__.py"):
        if (ROOT / rel).is_file():
            return rel
    return None


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Return the ids of import nodes under `if TYPE_CHECKING:` (never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


@cache
def imports(rel: str, *, type_checking: bool = False) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Return (absolute module, names taken from it) for every import in file `rel` that runs.

    With `type_checking`, imports under `if TYPE_CHECKING:` are returned too.
    """
    tree = _tree(rel)
    skipped = set() if type_checking else _type_checking_only(tree)
    package = _dotted(rel) if rel.endswith("__init__.py") else _dotted(rel).rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, tuple(alias.name for alias in node.names)))
    return tuple(out)


@cache
def edges(rel: str) -> frozenset[str]:
    """Return the mnemo files that file `rel` imports (`from pkg import mod` counts as importing mod)."""
    found = set()
    for module, names in imports(rel):
        if not module.startswith("mnemo"):
            continue
        targets = [f for n in names if (f := _file_of(f"{module}.{n}")) is not None]
        plain = [n for n in names if _file_of(f"{module}.{n}") is None]
        if plain or not names:
            target = _file_of(module)
            if target is not None:
                targets.append(target)
        found.update(t for t in targets if t != rel)
    return frozenset(found)


def _cycles() -> list[frozenset[str]]:
    """Return the strongly connected groups of more than one module (Tarjan)."""
    graph = {rel: edges(rel) for rel in _modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(frozenset(group))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _core(rel: str) -> bool:
    return not (rel.startswith(("mnemo/eval/", "mnemo/lab/", "mnemo/server/")) or rel == "mnemo/cli.py")


def test_only_the_store_package_imports_a_database_engine():
    found = {rel for rel in _modules() if not rel.startswith("mnemo/store/")
             and any(module.split(".")[0] in ENGINES for module, _ in imports(rel))}
    assert sorted(found - set(ENGINE_EXCEPTIONS)) == [], "run SQL through the Store protocol (mnemo/store/)"
    assert sorted(set(ENGINE_EXCEPTIONS) - found) == [], "these no longer import an engine: drop their exception"


def test_the_core_never_imports_eval_the_lab_or_server():
    found = {rel for rel in _modules() if _core(rel)
             and any(target.startswith(("mnemo/eval/", "mnemo/lab/", "mnemo/server/")) for target in edges(rel))}
    assert sorted(found) == [], "the core must not depend on the research wing, the lab or the servers"


def test_the_lab_is_its_own_package():
    lab = {rel for rel in _modules() if rel.startswith("mnemo/lab/")}
    names = {rel.rsplit("/", 1)[1] for rel in lab}
    assert {"sweeps.py", "calibrate.py", "fitting.py", "report.py", "record.py", "jupyter.py", "demo.py"} <= names
    assert not any(rel in _modules() for rel in ("mnemo/sweeps.py", "mnemo/calibrate.py", "mnemo/lab.py"))


def test_no_two_modules_import_each_other_in_a_loop():
    assert [sorted(c) for c in _cycles()] == [], "break these import cycles (move what both need into a third module)"


def test_no_module_passes_the_size_limit():
    found = {rel for rel, path in _modules().items() if len(path.read_text().splitlines()) > MAX_LINES}
    assert sorted(found) == [], f"split these by responsibility (over {MAX_LINES} lines)"


def test_no_module_imports_another_modules_private_names():
    found = {rel for rel in _modules() for module, names in imports(rel) if module.startswith("mnemo")
             for name in names if name.startswith("_") and not name.endswith("__")}
    assert sorted(found) == [], "make the name public (and documented) where it lives"


def _takes_the_facade(arg: ast.arg) -> bool:
    """Return True for a parameter named `mem` or annotated with the `Memory` facade (type[Memory] too)."""
    hint = ast.unparse(arg.annotation) if arg.annotation is not None else ""
    return arg.arg == "mem" or re.search(r"\bMemory\b", hint) is not None


def test_stages_take_values_not_the_memory_facade():
    stages = [rel for rel in _modules() if rel.startswith(STAGES)]
    assert len(stages) >= len(STAGES), "a stage named in STAGES is missing: update the list"
    found = set()
    for rel in stages:
        # Every import counts here, `if TYPE_CHECKING:` too: a stage has no use for the facade's type.
        if any(module == "mnemo.memory" or (module == "mnemo" and "memory" in names)
               for module, names in imports(rel, type_checking=True)):
            found.add(f"{rel} imports mnemo.memory")
        for node in ast.walk(_tree(rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]:
                    if _takes_the_facade(arg):
                        found.add(f"{rel}:{node.lineno} {getattr(node, 'name', 'lambda')}({arg.arg})")
    assert sorted(found) == [], "pass the store, config, model and time a stage needs; Memory wires them"


def test_every_mnemo_import_names_a_module_that_exists():
    # Lazy imports run only on their path: a moved module must not leave one pointing nowhere.
    missing = sorted((rel, module) for rel in _modules() for module, _ in imports(rel)
                     if module.split(".")[0] == "mnemo" and _file_of(module) is None)
    assert missing == []


@pytest.mark.parametrize("contract", ["Store", "Batching", "Archiving"])
def test_both_store_engines_keep_the_store_protocol_and_its_capabilities(contract):
    import mnemo.store
    from mnemo.store import DuckDBStore, PgStore
    from mnemo.store.parquet import ParquetArchive
    from mnemo.store.pg_archive import PgArchive

    proto = getattr(mnemo.store, contract)
    members = {n for n in dir(proto) if not n.startswith("_")} | set(proto.__annotations__)
    # The archive is not the store but its part, `store.archive`: the parts' classes keep it.
    keepers = (ParquetArchive, PgArchive) if contract == "Archiving" else (DuckDBStore, PgStore)
    for engine in keepers:
        class_level = set(dir(engine))
        # Data members (path, dim, ...) are set per instance; they are declared on the shared base.
        declared = {n for c in engine.__mro__ for n in getattr(c, "__annotations__", {})}
        assert sorted(members - class_level - declared) == [], f"{engine.__name__} lacks these {contract} members"


def test_the_capabilities_are_apart_from_the_contract():
    from mnemo.store import Archiving, Batching, Store

    contract = {n for n in dir(Store) if not n.startswith("_")}
    for capability in (Batching, Archiving):
        assert not {n for n in dir(capability) if not n.startswith("_")} & contract


def test_the_duckdb_store_is_a_store():
    from mnemo.store import Archiving, Batching, DuckDBStore, Store

    store = DuckDBStore(":memory:", embedder="test", dim=4)
    try:
        for contract in (Store, Batching):
            assert isinstance(store, contract) and isinstance(store.reader(), contract)
        assert isinstance(store.archive, Archiving) and isinstance(store.reader().archive, Archiving)
    finally:
        store.close()
