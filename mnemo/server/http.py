"""The HTTP service: mnemo's library operations over FastAPI, one store per tenant, keys checked by the server.

    MNEMO_API_KEYS='k1...:acme,k2...:globex' mnemo serve http --store-dir /var/lib/mnemo --port 8080
    curl -H 'Authorization: Bearer k1...' -d '{"text": "I moved to Lisbon", "user": "alice"}' \\
         http://127.0.0.1:8080/v1/remember

Routes (all under /v1 need `Authorization: Bearer KEY`): one for each verb the verb table
(`mnemo.verbs`) offers over HTTP, its path, method and summary from the table and its handler
from this module (`ROUTES`; `create_app` refuses a verb without a handler or a handler without a
verb): POST remember, POST memories (add), POST recall, POST answer, POST forget (by id or query,
dry_run), POST memories/{id}/restore, GET memories/{id}/history, GET memories (list, with
include_inactive and filters), GET memories/{id}, POST audit, POST assess (recall + trust
verdict; tools are server-side config, and without tools the verdict rests on provenance only),
POST decay (the decay pass, then the review of expired memories), GET export (JSON Lines or
Markdown, streamed), POST import (a JSON export as the body, signed under the server's key when
it has one), GET stats (counts, one user's or the store's). GET /healthz says the process is
alive; GET /readyz says the stores open, that the quota counter answers (on PostgreSQL: the
database) and, with a live model, that the model answers. The OpenAPI schema is at
/openapi.json. Remember, add, answer, assess, audit, decay and forget-by-query may call the
model and count against the tenant's quota; on PostgreSQL the count is kept in the database, so
it holds across replicas (`tenants.Quota`).

The explorer (GET /explorer, files under /explorer/static) is a page that is only a
client of these routes: it sends the key the user types in, and shows memories,
their stories, recall traces, the audit and, with `experiments=DIR`, the results
of sweeps (GET /v1/experiments and /v1/experiments/file, read-only; see `experiments`).

Tenants (see `tenants`): each API key maps to a tenant and each tenant has its own
store, so a tenant cannot name another's memories at all. Concurrency: one Memory
per store; writes are serialised by the tenant's readers-writer lock, reads run
concurrently on per-thread DuckDB cursors. Handlers are plain `def`s, so they run
in the server's thread pool and never block the event loop.

Errors: a MnemoError becomes a 4xx with its message (NotFound 404, InvalidInput and
ConfigError 422, quota 429 with Retry-After, a missing model 503, a database that does
not answer 503 with Retry-After: the next request reconnects); request bodies over the
size limit get 413, and malformed input (fields `inputs` refuses, a body that is not
UTF-8 JSON or is nested past the parser's limit) is refused with 422, never a 500.
Bodies are the request models of `inputs`, which the MCP tools share.

One server per store folder: `serve` holds a lock file in it (`lockfile`), so a second
server on the same --store-dir refuses to start instead of taking tenants from this one.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request, Security
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import errors, portable
from ..answer import Answer
from ..assess import Assessment
from ..audit import AuditReport
from ..decay import salience
from ..errors import InvalidInput, MnemoError
from ..model import CATEGORIES, KINDS, Event, Link, MemoryRecord, Recall, WriteReport
from ..verbs import Surface
from . import experiments as exp
from .inputs import (
    AddIn,
    AnswerIn,
    AuditIn,
    DecayIn,
    ForgetIn,
    Name,
    RecallIn,
    RememberIn,
    RestoreIn,
    Storable,
    unlocated,
)
from .lockfile import serving
from .tenants import BodyLimit, QuotaExceeded, ServerConfig, Tenant, Tenants

log = logging.getLogger(__name__)
# Most specific first: the first class an error is an instance of decides its status.
STATUS = ((errors.NotFound, 404), (QuotaExceeded, 429), (InvalidInput, 422), (errors.ConfigError, 422),
          (errors.EmbedderMismatch, 409), (errors.StoreError, 503), (errors.LLMUnavailable, 503),
          (errors.LLMResponseError, 502), (MnemoError, 500))
PUBLIC = ("/healthz", "/readyz", "/explorer")
EXPLORER = Path(__file__).with_name("explorer")
# The explorer may run only its own script and style and talk only to this origin, so stored text that
# ever reached the markup could still not run or send anything elsewhere.
EXPLORER_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
                "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class Problem(BaseModel):
    """Every error: a message (or, for invalid fields, where and why) and the error's class."""

    detail: str | list[dict[str, Any]]
    error: str | None = None


# Documented on every route, so clients (and the schema fuzzer) know the shape of each refusal.
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "description": text} for code, text in (
        (401, "missing or unknown API key"), (404, "no such memory"), (413, "request body too large"),
        (422, "invalid input"), (429, "quota used up (see Retry-After)"), (503, "store or model unavailable"))}


class Forgotten(BaseModel):
    dry_run: bool
    forgotten: list[MemoryRecord]


class MemoryList(BaseModel):
    memories: list[MemoryRecord]
    salience: dict[str, float] = Field(default_factory=dict, description="each memory's salience at salience_at "
                                       "(mnemo.decay.salience), by memory id")
    salience_at: datetime | None = None


class EventList(BaseModel):
    memory_id: str
    events: list[Event]
    links: list[Link] = Field(default_factory=list, description="supersedes / because / refers_to links to or "
                              "from the memory")


class Assessed(BaseModel):
    recall: Recall
    assessment: Assessment


class Decayed(BaseModel):
    memory_id: str
    salience: float


class DecayReport(BaseModel):
    decayed: list[Decayed] = Field(description="memories tombstoned by the pass, with the salience that decided it")
    reviewed: list[dict[str, Any]] = Field(description="each memory past its TTL: keep or forget, and why")


class Imported(BaseModel):
    added: dict[str, int] = Field(description="records added, by type (memory, event, link, turn)")
    skipped: dict[str, list[str]] = Field(description="ids already present, skipped (on_conflict=skip), by type")


# ----------------------------------------------------------------- plumbing
bearer = HTTPBearer(auto_error=False, description="an API key the server maps to a tenant")


def current_tenant(request: Request,
                   creds: HTTPAuthorizationCredentials | None = Security(bearer)) -> Tenant:
    """Return the caller's tenant from its API key, or refuse with 401."""
    if creds is None or not creds.credentials:
        raise HTTPException(401, "missing API key: send 'Authorization: Bearer KEY'",
                            headers={"WWW-Authenticate": "Bearer"})
    tenant = request.app.state.tenants.for_key(creds.credentials)
    if tenant is None:
        raise HTTPException(401, "unknown API key", headers={"WWW-Authenticate": "Bearer"})
    return tenant


Caller = Annotated[Tenant, Depends(current_tenant)]


def _charge(request: Request, tenant: Tenant) -> None:
    """Count one model-calling request against the tenant's quota (429 when used up)."""
    request.app.state.tenants.quota.charge(tenant.name)


def _error(_: Request, exc: MnemoError) -> JSONResponse:
    status = next(code for cls, code in STATUS if isinstance(exc, cls))
    # A used-up quota and a database that does not answer for now both say when to try again.
    wait = getattr(exc, "retry_after", None)
    headers = {"Retry-After": str(max(1, round(wait)))} if wait is not None else None
    if status >= 500:
        log.error("%s: %s", type(exc).__name__, exc)
    return JSONResponse({"detail": str(exc), "error": type(exc).__name__}, status_code=status, headers=headers)


def _safe(text: Any) -> Any:
    # Echoed input may hold lone surrogates, which cannot be encoded in a response: escape them.
    return text if isinstance(text, int) else str(text).encode("utf-8", "backslashreplace").decode("utf-8")


def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    """Return 422 with where and why, without echoing the input (it may be large or unencodable)."""
    problems = [{"loc": [_safe(x) for x in e.get("loc", ())], "msg": _safe(e.get("msg", "")),
                 "type": _safe(e.get("type", ""))} for e in exc.errors()]
    return JSONResponse({"detail": problems, "error": "InvalidInput"}, status_code=422)


async def _unreadable(request: Request, exc: StarletteHTTPException) -> Any:
    """Return 422 for a body JSON cannot read at all (not UTF-8, nested past the parser's limit); else FastAPI's answer.

    FastAPI answers such a body with 400 ("There was an error parsing the body"); the error
    it wraps (its cause) says which it was.
    """
    if exc.status_code == 400 and isinstance(exc.__cause__, (ValueError, RecursionError)):
        why = ("is not valid UTF-8" if isinstance(exc.__cause__, UnicodeDecodeError) else
               "is nested too deeply to parse" if isinstance(exc.__cause__, RecursionError) else "is not valid JSON")
        problem = {"loc": ["body"], "msg": f"the request body {why}; send UTF-8 JSON", "type": "json_invalid"}
        return JSONResponse({"detail": [problem], "error": "InvalidInput"}, status_code=422)
    return await http_exception_handler(request, exc)


# ----------------------------------------------------------------- the verbs
# One handler per verb the table offers over HTTP (`mnemo.verbs`); `create_app` gives each its route.
ROUTES = Surface("http")



@ROUTES.verb("remember", response_model=WriteReport, tags=["write"])
def remember(body: RememberIn, tenant: Caller, request: Request) -> Any:
    """Record a turn, extract memories from it and reconcile them (counts against the quota)."""
    _charge(request, tenant)
    with tenant.writing(body.user) as mem:
        return mem.remember(body.text, user=body.user, session=body.session, agent=body.agent, at=body.at)


@ROUTES.verb("add", response_model=MemoryRecord, tags=["write"])
def add(body: AddIn, tenant: Caller, request: Request) -> Any:
    """Write one structured memory, reconciled like any other write (counts against the quota)."""
    _charge(request, tenant)
    with tenant.writing(body.user) as mem:
        return mem.add(**body.model_dump(exclude={"references"}), references=tuple(body.references))


@ROUTES.verb("recall", response_model=Recall, tags=["read"])
def recall(body: RecallIn, tenant: Caller) -> Any:
    """Pack the memories that matter for a query under a token budget, with confidence and trace."""
    with tenant.reading() as mem:
        return mem.recall(body.query, **body.kwargs())


@ROUTES.verb("answer", response_model=Answer, tags=["read"])
def answer(body: AnswerIn, tenant: Caller, request: Request) -> Any:
    """Answer a question from the recalled memories, citing them; abstain when the record is silent (quota)."""
    _charge(request, tenant)
    filters = body.filters.given() if body.filters else None
    with tenant.reading() as mem:
        return mem.answer(body.question, user=body.user, budget_tokens=body.budget_tokens, filters=filters)


@ROUTES.verb("forget", response_model=Forgotten, tags=["write"])
def forget(body: ForgetIn, tenant: Caller, request: Request) -> Any:
    """Tombstone one memory by id, or exactly the memories a query names (by query: counts against the quota)."""
    if (body.memory_id is None) == (body.query is None) or (body.query is not None and body.user is None):
        raise InvalidInput("forget needs either memory_id, or query and user")
    if body.query is not None:
        _charge(request, tenant)
    args = {"query": body.query, "user": body.user, "reason": body.reason, "dry_run": body.dry_run}
    with tenant.reading() if body.dry_run else tenant.writing(body.user) as mem:
        return Forgotten(dry_run=body.dry_run, forgotten=mem.forget(body.memory_id, **args))


@ROUTES.verb("list", response_model=MemoryList, tags=["read"])
def memories(tenant: Caller, user: Annotated[Name | None, Query()] = None, include_inactive: bool = False,
             kind: Annotated[Literal[KINDS] | None, Query()] = None,
             category: Annotated[Literal[CATEGORIES] | None, Query()] = None,
             session: Annotated[Name | None, Query()] = None, agent: Annotated[Name | None, Query()] = None,
             subject: Annotated[Name | None, Query()] = None,
             limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> Any:
    """List memories, oldest first: one user's or all, active only unless include_inactive."""
    filters = {"kinds": [kind] if kind else None, "categories": [category] if category else None,
               "session": session, "agent": agent, "subject": subject}
    with tenant.reading() as mem:
        found = mem.store.memories(user, include_inactive=include_inactive, filters=filters, limit=limit)
        now = mem.clock.now()
        return MemoryList(memories=found, salience_at=now,
                          salience={m.id: round(salience(m, now, mem.config.decay), 4) for m in found})


@ROUTES.verb("get", response_model=MemoryRecord, tags=["read"])
def get(memory_id: Name, tenant: Caller) -> Any:
    """Return one memory, active or tombstoned."""
    with tenant.reading() as mem:
        return mem.get(memory_id)


@ROUTES.verb("stats", tags=["read"])
def stats(tenant: Caller, user: Annotated[Name | None, Query()] = None) -> dict[str, Any]:
    """Counts of memories (by status, active by kind) and turns: one user's, or the store's."""
    with tenant.reading() as mem:
        return unlocated(mem.stats(user))


@ROUTES.verb("history", response_model=EventList, tags=["read"])
def history(memory_id: Name, tenant: Caller) -> Any:
    """Tell the story of a memory: created, corroborated, superseded, forgotten, restored."""
    with tenant.reading() as mem:
        events = mem.history(memory_id)
        return EventList(memory_id=memory_id, events=events, links=mem.store.links([memory_id]))


@ROUTES.verb("restore", response_model=MemoryRecord, tags=["write"])
def restore(memory_id: Name, body: RestoreIn, tenant: Caller) -> Any:
    """Reverse a tombstone: the memory is active again (its successor, if any, stays active)."""
    with tenant.writing() as mem:
        return mem.restore(memory_id, reason=body.reason)


@ROUTES.verb("decay", response_model=DecayReport, tags=["write"])
def decay(body: DecayIn, tenant: Caller, request: Request) -> Any:
    """Tombstone memories whose salience fell under the threshold, then review those past their TTL (quota)."""
    _charge(request, tenant)
    with tenant.writing() as mem:
        decayed = mem.decay(at=body.at)
        reviewed = mem.review_expired(at=body.at)
    return DecayReport(decayed=[Decayed(memory_id=i, salience=s) for i, s in decayed], reviewed=reviewed)


@ROUTES.verb("import", response_model=Imported, tags=["write"])
def import_(data: Annotated[bytes, Body(media_type="application/x-ndjson",
                                        description="a JSON export, as GET /v1/export streams it")],
            tenant: Caller, request: Request, on_conflict: Literal["error", "skip"] = "error") -> Any:
    """Load a JSON export into the tenant's store in one transaction (signed under the server's key when it has one)."""
    key = request.app.state.tenants.cfg.export_key
    with tempfile.TemporaryDirectory(prefix="mnemo-import-") as tmp:
        path = Path(tmp) / "import.jsonl"
        path.write_bytes(data)
        with tenant.writing() as mem:
            report = portable.load(mem.store, path, on_conflict=on_conflict, key=key, name="the request body")
    return Imported(added=report.added, skipped=report.skipped)


@ROUTES.verb("audit", response_model=AuditReport, tags=["trust"])
def audit(body: AuditIn, tenant: Caller, request: Request) -> Any:
    """Report contradictions and dangling references with recommended resolutions; changes nothing (quota)."""
    _charge(request, tenant)
    with tenant.reading() as mem:
        return mem.audit(body.user)


@ROUTES.verb("assess", response_model=Assessed, tags=["trust"])
def assess(body: RecallIn, tenant: Caller, request: Request) -> Any:
    """Recall, then re-ground verifiable claims with the server's tools and decide act or escalate."""
    _charge(request, tenant)
    tools = request.app.state.tools
    # With tools, a stale claim is superseded by its re-grounded value: that is a write.
    with tenant.writing(body.user) if tools else tenant.reading() as mem:
        pack = mem.recall(body.query, **body.kwargs())
        return Assessed(recall=pack, assessment=mem.assess(pack, tools=tools))


@ROUTES.verb("export", tags=["read"], response_class=StreamingResponse, responses={200: {"content": {
    "application/x-ndjson": {}, "text/markdown": {}}, "description": "the export, streamed"}})
def export(tenant: Caller, request: Request, user: Annotated[Name | None, Query()] = None,
           fmt: Literal["json", "markdown"] = "json") -> StreamingResponse:
    """Stream the tenant's memories (or one user's) as the JSON Lines export or as Markdown."""
    with tenant.lock.read():
        view = tenant.view()
    key = request.app.state.tenants.cfg.export_key
    chunks = (portable.json_lines(view.store, user, key=key) if fmt == "json"
              else portable.markdown_lines(view.store, user))
    media = "application/x-ndjson" if fmt == "json" else "text/markdown; charset=utf-8"
    name = f"mnemo-{tenant.name}.{'jsonl' if fmt == 'json' else 'md'}"
    return StreamingResponse(_closing(chunks, tenant, view), media_type=media,
                             headers={"Content-Disposition": f'attachment; filename="{name}"'})


# ----------------------------------------------------------------- the app
def create_app(keys: dict[str, str], cfg: ServerConfig | None = None, *, tools: Any = None,
               opener: Any = None, experiments: str | Path | None = None) -> FastAPI:
    """Return the service for `keys` ({API key: tenant}); `tools` are the assessor's systems of record.

    `experiments` is a folder of sweep results the explorer may read (every tenant sees it).
    """
    cfg = cfg or ServerConfig()
    results_dir = exp.root(experiments) if experiments is not None else None
    tenants = Tenants(keys, cfg, opener=opener)
    app = FastAPI(title="mnemo", version="1", description=__doc__.split("\n\n")[0],
                  lifespan=_lifespan(tenants), responses=ERRORS)
    app.state.tenants, app.state.tools, app.state.ready_at = tenants, tools, 0.0
    app.add_exception_handler(MnemoError, _error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _unreadable)
    app.add_middleware(BodyLimit, max_bytes=cfg.max_body_bytes)
    app.mount("/explorer/static", StaticFiles(directory=EXPLORER), name="explorer")

    @app.get("/explorer", include_in_schema=False)
    def explorer() -> FileResponse:
        """The explorer page: a client of the /v1 routes, with the key the user gives it."""
        return FileResponse(EXPLORER / "index.html", media_type="text/html; charset=utf-8", headers={
            "Content-Security-Policy": EXPLORER_CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"})

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """The process is alive."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], responses={503: {"description": "not ready"}})
    def readyz() -> JSONResponse:
        """Ready when every tenant's store opens and, with a live model, the model answers."""
        failed = []
        for name in tenants.names:
            try:
                # Opened once, then asked each time: a replica whose database restarted reconnects here.
                tenants.get(name).mem.store.ping()
            except MnemoError as exc:
                log.error("tenant %s cannot open its store: %s", name, exc)
                failed.append(name)
        if failed:
            return JSONResponse({"ready": False, "detail": f"{len(failed)} of {len(tenants.names)} tenant stores "
                                 "cannot be opened (see the server log)"}, status_code=503)
        try:
            # On PostgreSQL the quotas live in the shared database: a replica that cannot reach it is not ready.
            tenants.quota.counter.ping()
        except MnemoError as exc:
            log.error("readiness probe: the quota counter did not answer: %s", exc)
            return JSONResponse({"ready": False, "detail": f"the database does not answer ({type(exc).__name__})"},
                                status_code=503)
        llm = tenants.get(tenants.names[0]).mem.llm
        if llm.mode == "live" and time.monotonic() - app.state.ready_at > cfg.ready_cache_s:
            try:
                llm.complete_text("answer", {"question": "Reply with: ok", "memories": []})
            except MnemoError as exc:
                log.error("readiness probe: the model did not answer: %s", exc)
                return JSONResponse({"ready": False, "detail": f"the model did not answer ({type(exc).__name__})"},
                                    status_code=503)
            app.state.ready_at = time.monotonic()
        return JSONResponse({"ready": True, "tenants": len(tenants.names), "llm": llm.mode,
                             "quota": tenants.quota.counter.scope})

    # The verbs' routes, from the verb table: its path, method and summary, this module's handler and options.
    for verb, handler, options in ROUTES.bound():
        app.add_api_route(verb.http.path, handler, methods=[verb.http.method], summary=verb.summary, **options)

    @app.get("/v1/experiments", response_model=exp.Listing, tags=["experiments"])
    def experiments_listing(tenant: Caller) -> Any:
        """List the experiments folder's results files (newest first) with their scalar values and figures."""
        return exp.listing(_experiments(results_dir))

    @app.get("/v1/experiments/file", tags=["experiments"], response_class=FileResponse, responses={200: {
        "content": {"application/json": {}, "image/png": {}}, "description": "the file, read-only"}})
    def experiments_file(tenant: Caller, path: Annotated[Storable, Query(
            min_length=1, max_length=1024, description="relative to the experiments folder")]) -> FileResponse:
        """Return one results.json or .png file of the experiments folder (nothing outside it, nothing else)."""
        found = exp.resolve(_experiments(results_dir), path)
        return FileResponse(found, media_type=exp.media_type(found), headers={
            "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'",
            "Cache-Control": "private, no-cache"})

    return app


def _experiments(folder: Path | None) -> Path:
    if folder is None:
        raise errors.NotFound("this server has no experiments folder; start it with "
                              "`mnemo serve http --experiments DIR`")
    return folder


def _closing(chunks: Iterator[bytes], tenant: Any, view: Any) -> Iterator[bytes]:
    # The export reads its own snapshot on the view's reader; release it when the stream ends or is dropped.
    try:
        yield from chunks
    finally:
        tenant.release(view)


def _lifespan(tenants: Tenants) -> Any:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        yield
        tenants.close()

    return lifespan


@contextmanager
def running(app: FastAPI, host: str = "127.0.0.1", timeout_s: float = 20.0) -> Iterator[str]:
    """Run `app` on a real uvicorn server in a thread on a free port; yield its base URL (tests, benchmarks)."""
    import socket

    import uvicorn

    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on such sockets, and without it Nagle's
    # algorithm and delayed ACKs add ~40 ms to every response.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="mnemo-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on {host} within {timeout_s:g}s")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
        sock.close()


def serve(keys: dict[str, str], cfg: ServerConfig, *, host: str = "127.0.0.1", port: int = 8080,
          tools: Any = None, log_level: str = "info", experiments: str | Path | None = None) -> None:
    """Run the service with uvicorn until interrupted (one process: DuckDB has one writer per file).

    The store folder is held for this process while it runs (`lockfile.serving`): a second server
    on it refuses to start.
    """
    import uvicorn

    with serving(cfg.store_dir):
        app = create_app(keys, cfg, tools=tools, experiments=experiments)
        uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1)
