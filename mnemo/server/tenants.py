"""Tenants of the HTTP service: API keys, one store per tenant, its locks, quotas and the request size limit.

Tenant model: the server maps each API key to a tenant (`load_keys`, the one place
that reads MNEMO_API_KEYS), and every tenant gets its own store (`tenant_location`):
the DuckDB file `<store_dir>/<tenant>.duckdb`, its own ":memory:" database, or, when
`store_dir` is a postgresql:// DSN, its own schema of that database. Memory ids,
users, turns and exports of one tenant live in another file (or schema) than any
other tenant's, so no route can reach across, whatever id or user a client sends.
Inside a tenant, `user` is the library's free-form namespace, as in
`Memory.remember(user=...)`.

Concurrency: DuckDB has one writer per database, and one connection must not be
used by two threads at once. Each tenant has one `Memory` whose connection only
writers use, and a readers-writer lock: writes (remember, add, forget, assess with
tools) take it exclusively and so run one at a time; reads (recall, list, history,
audit, export) share it, each through its thread's own `Store.reader()` (on DuckDB a
view on its own cursor that shares the vector index and locks of the tenant's store;
on PostgreSQL the store itself, whose one connection serialises statements, with many
writer processes allowed). Readers never see a half-applied write (the writer holds
the lock until it commits). The lock lets callers in by order of arrival (`RWLock`), so
readers keep being served while writers never stop, and writers are not starved either.

Replicas: on PostgreSQL several processes serve the same tenants. A write that
reconciles against a user's memories (remember, add, forget by query, assess with
tools) also holds the store's `exclusive` lock on that user, an advisory lock in the
database, so two replicas decide such writes in turn; quotas are counted in the
database (`Quota`, `store.meter.PgCounter`), not per process.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import HTTPException
from fastapi.responses import JSONResponse

from ..errors import ConfigError, MnemoError
from ..store import Batching, is_dsn, split_dsn, store_class

TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MIN_KEY_CHARS = 16


class QuotaExceeded(MnemoError):
    """A tenant used up its model-calling quota for the current window."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class ServerConfig:
    # One <tenant>.duckdb per tenant in this folder, or one schema per tenant of this postgresql:// DSN;
    # None = a ":memory:" store per tenant.
    store_dir: str | None = None
    embedder: str | None = None  # embedder spec for new stores (existing stores keep theirs); None = auto
    llm: str | None = None  # offline | live | record:PATH | replay:PATH (None: MNEMO_LLM, else offline)
    recipe: str | None = None  # named config recipe for every tenant's Memory
    max_body_bytes: int = 1_048_576  # larger request bodies get 413
    quota_calls: int = 120  # model-calling requests per tenant per window (remember, add, answer, assess, audit,
    # forget by query); counted in the database on PostgreSQL, in this process otherwise (`Quota`)
    quota_window_s: float = 60.0  # length of the sliding quota window, in seconds
    ready_cache_s: float = 30.0  # how long a successful live-model readiness probe is trusted
    # Signs every JSON export the service returns (HMAC-SHA256, `portable`); the CLI passes MNEMO_EXPORT_KEY.
    export_key: str | None = field(default=None, repr=False)


def parse_keys(text: str) -> dict[str, str]:
    """Return {key: tenant} from "key1:tenantA,key2:tenantB" (commas or newlines; '#' starts a comment)."""
    keys: dict[str, str] = {}
    for raw in re.split(r"[,\n]", text):
        item = raw.split("#", 1)[0].strip()
        if not item:
            continue
        key, sep, tenant = item.rpartition(":")
        if not sep or not key.strip():
            raise ConfigError(f"API key entry {item[:4]}... has no tenant; write it as KEY:TENANT")
        keys[key.strip()] = tenant.strip()
    return keys


def load_keys(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the server's {API key: tenant}: from a file (JSON object or KEY:TENANT lines), else MNEMO_API_KEYS.

    This is the only place the service reads its keys; each tenant name must be a
    plain file name and each key at least MIN_KEY_CHARS characters.
    """
    if path is not None:
        text = Path(path).read_text()
        keys = json.loads(text) if text.lstrip().startswith("{") else parse_keys(text)
    else:
        keys = parse_keys((os.environ if env is None else env).get("MNEMO_API_KEYS", ""))
    if not keys:
        raise ConfigError("no API keys configured; set MNEMO_API_KEYS='KEY:TENANT,...' or pass --keys FILE")
    for key, tenant in keys.items():
        if not isinstance(tenant, str) or not TENANT_NAME.match(tenant):
            raise ConfigError(f"tenant name {tenant!r} must be 1-64 letters, digits, '_', '.' or '-'")
        if len(key) < MIN_KEY_CHARS or any(c.isspace() for c in key):
            raise ConfigError(f"API key for tenant {tenant!r} is shorter than {MIN_KEY_CHARS} characters "
                              "or contains spaces; use a long random key (python -c 'import secrets; "
                              "print(secrets.token_urlsafe(24))')")
    return dict(keys)


class _Waiter:
    """One caller waiting for the lock; equal only to itself, so it leaves the line exactly where it stood."""

    __slots__ = ("write",)

    def __init__(self, write: bool):
        self.write = write


class RWLock:
    """Many readers or one writer, let in by order of arrival: neither readers nor writers starve.

    A reader enters when no writer holds the lock and none arrived before it; a writer when
    no one holds it and it is first in line. So readers that came before a writer run before
    it (together), and readers that came after it wait for it: under writers that never stop,
    a reader waits for the writes already queued when it arrived, never for all of them.
    (The lock this replaces let any waiting writer hold back new readers; with three writers
    one was always waiting, and readers ran only once the writers stopped: issue #33.)
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._line: deque[_Waiter] = deque()  # waiting callers in arrival order

    def _may_enter(self, me: _Waiter) -> bool:
        if self._writer:
            return False
        if me.write:
            return self._readers == 0 and self._line[0] is me
        # A reader follows the readers ahead of it in line, never a writer that came first.
        for ahead in self._line:
            if ahead is me:
                return True
            if ahead.write:
                return False
        return True

    @contextmanager
    def _hold(self, write: bool) -> Iterator[None]:
        me = _Waiter(write)
        with self._cond:
            self._line.append(me)
            try:
                self._cond.wait_for(lambda: self._may_enter(me))
            finally:
                self._line.remove(me)
            if write:
                self._writer = True
            else:
                self._readers += 1
            # The next in line may be a reader who can come in alongside this one.
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                if write:
                    self._writer = False
                else:
                    self._readers -= 1
                self._cond.notify_all()

    def read(self) -> AbstractContextManager[None]:
        """Hold the lock shared (with other readers) for the block."""
        return self._hold(False)

    def write(self) -> AbstractContextManager[None]:
        """Hold the lock alone for the block."""
        return self._hold(True)


class Tenant:
    """One tenant's Memory with its readers-writer lock and per-thread reader views."""

    def __init__(self, name: str, mem: Any):
        self.name = name
        self.mem = mem
        self.lock = RWLock()
        self._local = threading.local()
        self._readers: weakref.WeakSet[Any] = weakref.WeakSet()

    def view(self) -> Any:
        """Return a Memory whose store is a `Store.reader()` of the tenant's (for one thread or one stream)."""
        reader = self.mem.store.reader()
        if reader is self.mem.store:
            return self.mem  # the store serves every thread itself
        # Per-thread readers live as long as the tenant; an export's goes when its stream ends (`release`).
        self._readers.add(reader)
        view = copy.copy(self.mem)
        view.store = reader
        return view

    def release(self, view: Any) -> None:
        """Close what `view` opened (its reader), never the tenant's own store."""
        if view.store is not self.mem.store:
            view.store.close()

    @contextmanager
    def reading(self) -> Iterator[Any]:
        """Yield this thread's reader Memory while holding the shared lock."""
        store = self.mem.store
        if isinstance(store, Batching) and store.lexical_stale:
            # Analyse new rows into BM25 once, between writes and reads, not in every reader that notices
            # (readers that queued for it together find it done).
            with self.lock.write():
                if store.lexical_stale:
                    store.refresh_lexical()
        with self.lock.read():
            reader = getattr(self._local, "mem", None)
            if reader is None:
                reader = self._local.mem = self.view()
            yield reader

    @contextmanager
    def writing(self, user: str | None = None) -> Iterator[Any]:
        """Yield the tenant's Memory while holding the exclusive lock: writes run one at a time.

        With `user` (a write that reconciles against that user's memories), the store's
        `exclusive` lock on the user is held too, so replicas over one PostgreSQL database
        decide such writes one after the other: a correction on one and the same fact on
        another end as one current memory, not two.
        """
        with self.lock.write(), self.mem.store.exclusive(f"user:{user}") if user is not None else nullcontext():
            yield self.mem

    def close(self) -> None:
        """Close every reader, then the store (a file store is released for other processes)."""
        with self.lock.write():
            for reader in list(self._readers):
                reader.close()
            self.mem.close()


class LocalCounter:
    """A sliding window of calls per key in this process: enough where one process serves the stores (DuckDB)."""

    path = "this process"
    scope = "process"  # where the count lives, as /readyz says it (never the database's address)

    def __init__(self, clock: Any = time.monotonic):
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def admit(self, key: str, calls: int, window_s: float) -> float | None:
        """Count one call for `key` and return None, or return the seconds until the window has room."""
        now = self._clock()
        with self._lock:
            seen = self._seen.setdefault(key, deque())
            while seen and seen[0] <= now - window_s:
                seen.popleft()
            if len(seen) >= calls:
                return max(0.0, seen[0] + window_s - now) if seen else window_s
            seen.append(now)
        return None

    def ping(self) -> None:
        """Nothing to ask: the count lives in this process."""

    def close(self) -> None:
        """Nothing to release."""


class Quota:
    """Model-calling requests per tenant in a sliding window, counted where every replica of the service sees them.

    The one seam both counters sit behind: `LocalCounter` in this process for DuckDB
    and in-memory stores, `store.meter.PgCounter` in the database for a postgresql://
    store_dir, where several replicas serve the same tenants (`quota_counter`).
    """

    def __init__(self, calls: int, window_s: float, counter: Any = None):
        self.calls, self.window_s = calls, window_s
        self.counter = counter if counter is not None else LocalCounter()

    def charge(self, tenant: str) -> None:
        """Count one call for `tenant`, or raise QuotaExceeded with when to retry."""
        wait = self.counter.admit(tenant, self.calls, self.window_s)
        if wait is not None:
            raise QuotaExceeded(f"quota of {self.calls} model-calling requests per {self.window_s:g}s used up "
                                f"for this tenant; retry in {wait:.0f}s", retry_after=wait)


def quota_counter(store_dir: str | None) -> Any:
    """Return where quotas are counted: in the database of a postgresql:// store_dir, else in this process."""
    if store_dir is None or not is_dsn(store_dir):
        return LocalCounter()
    from ..store.meter import PgCounter

    # Named in pg_stat_activity, so an operator can tell the quota connection from the stores'.
    location = service_location(store_dir, "quota")
    return PgCounter(f"{location}&application_name=mnemo-quota")


class BodyLimit:
    """ASGI middleware: 413 for request bodies over `max_bytes`, declared or streamed."""

    def __init__(self, app: Any, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    def _refusal(self) -> HTTPException:
        return HTTPException(413, f"request body is larger than the server's limit of {self.max_bytes:,} bytes; "
                                  "send less text per request (split long input into several turns)")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            exc = self._refusal()
            await JSONResponse({"detail": exc.detail}, status_code=413)(scope, receive, send)
            return
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            # A chunked body has no length up front: count it as it arrives. FastAPI turns this into the 413.
            if seen > self.max_bytes:
                raise self._refusal()
            return message

        await self.app(scope, limited, send)


class Tenants:
    """The API keys, the tenants they map to, and each tenant's store, opened on first use."""

    def __init__(self, keys: Mapping[str, str], cfg: ServerConfig, opener: Any = None):
        # Keys are kept only as sha256 digests, so a dump of the process does not hold them in clear.
        self._by_digest = {_digest(k): t for k, t in keys.items()}
        self.names = sorted(set(keys.values()))
        self.cfg = cfg
        self.quota = Quota(cfg.quota_calls, cfg.quota_window_s, quota_counter(cfg.store_dir))
        self._open: dict[str, Tenant] = {}
        self._lock = threading.Lock()
        self._opener = opener

    def name_for(self, key: str) -> str | None:
        """Return the tenant name an API key maps to (None for an unknown key), opening nothing."""
        digest = _digest(key)
        return next((t for d, t in self._by_digest.items() if hmac.compare_digest(d, digest)), None)

    def for_key(self, key: str) -> Tenant | None:
        """Return the tenant of an API key (None for an unknown key)."""
        name = self.name_for(key)
        return None if name is None else self.get(name)

    def get(self, name: str) -> Tenant:
        """Return the open tenant `name`, opening its store the first time."""
        with self._lock:
            if name not in self._open:
                self._open[name] = Tenant(name, self._open_memory(name))
            return self._open[name]

    def _open_memory(self, name: str) -> Any:
        from ..memory import Memory
        from ..portable import embedder_spec

        if self._opener is not None:
            return self._opener(name)
        path = tenant_location(self.cfg.store_dir, name)
        recorded = store_class(path).recorded_embedder(path)
        # An existing store is opened with the embedder it was written with.
        embedder = embedder_spec(recorded) if recorded else self.cfg.embedder
        return Memory.open(path, embedder=embedder, llm=self.cfg.llm, config=self.cfg.recipe)

    def close(self) -> None:
        with self._lock:
            for tenant in self._open.values():
                tenant.close()
            self._open.clear()
            self.quota.counter.close()


def tenant_location(store_dir: str | None, name: str) -> str:
    """Return where tenant `name`'s store lives: ":memory:", <store_dir>/<name>.duckdb, or a schema of a DSN.

    On PostgreSQL the schema is <prefix>_<name as an identifier>_<8 hex of its sha256>, the prefix being the
    DSN's own ?schema= (default "mnemo"): two tenant names that read alike as identifiers ("a-b", "a_b")
    still get two schemas.
    """
    if store_dir is None:
        return ":memory:"
    if not is_dsn(store_dir):
        return str(Path(store_dir) / f"{name}.duckdb")
    base, prefix = split_dsn(store_dir)
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")[:24] or "t"
    schema = f"{prefix[:24]}_{slug}_{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def service_location(store_dir: str, name: str) -> str:
    """Return the DSN of the service's own schema `name` beside the tenants' (<prefix>_<name>, e.g. mnemo_quota).

    A tenant's schema always ends in _<8 hex digits>, so this one never names a tenant's.
    """
    base, prefix = split_dsn(store_dir)
    return f"{base}{'&' if '?' in base else '?'}schema={prefix[:24]}_{name}"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
