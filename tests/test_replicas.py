"""Several `mnemo serve http` processes over one PostgreSQL on loopback, as replicas behind a load balancer.

Each replica is a real server process started from the CLI; the tests talk to them over
HTTP only. What must hold: a write through one is read through the other, tenants stay
apart through either, quotas are counted once for both, replicas starting together on
fresh schemas migrate them safely, and a replica killed with SIGKILL in the middle of
writes loses none that it acknowledged.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest
from conftest import require_postgres, stop_process

import mnemo
from mnemo.server.http import create_app, running
from mnemo.server.tenants import ServerConfig, service_location, tenant_location
from mnemo.store import SCHEMA_VERSION, split_dsn

ROOT = Path(__file__).resolve().parents[1]
KEY_A, KEY_B, KEY_Q = "rep-key-acme-0123456789", "rep-key-globex-0123456789", "rep-key-metered-0123456789"
KEYS = {KEY_A: "acme", KEY_B: "globex", KEY_Q: "metered"}
QUOTA = 30


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """One `mnemo serve http` process on a free loopback port over `store_dir` (a postgresql:// DSN)."""

    def __init__(self, store_dir: str, *, quota_calls: int = 10**6, quota_window: float = 3600.0):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        keys = ",".join(f"{k}:{t}" for k, t in KEYS.items())
        cmd = [sys.executable, "-m", "mnemo.cli", "serve", "http", "--store-dir", store_dir, "--embedder", "hash",
               "--llm", "offline", "--port", str(self.port), "--quota-calls", str(quota_calls),
               "--quota-window", str(quota_window), "--log-level", "warning"]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "MNEMO_API_KEYS": keys})

    def wait_ready(self, timeout_s: float = 90.0) -> dict:
        """Wait until /readyz says ready (which opens every tenant's schema); return its body."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica exited {self.proc.returncode}: {self.proc.stderr.read()}")
            try:
                res = httpx.get(f"{self.url}/readyz", timeout=30)
                if res.status_code == 200:
                    return res.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"replica on {self.url} not ready in {timeout_s:g} s")

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=_auth(key), timeout=60)

    def stop(self) -> None:
        stop_process(self.proc)


def _drop_schemas(dsn: str, prefix: str) -> None:
    with psycopg.connect(split_dsn(dsn)[0], autocommit=True) as con:
        for (schema,) in con.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                                     [f"{prefix}\\_%"]).fetchall():
            con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _fresh_store_dir() -> Iterator[str]:
    dsn = require_postgres()
    prefix = f"r{uuid.uuid4().hex[:10]}"
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}schema={prefix}"
    finally:
        _drop_schemas(dsn, prefix)


@pytest.fixture
def store_dir() -> Iterator[str]:
    """A postgresql:// store_dir whose schemas (tenants' and the quota's) are all new and dropped afterwards."""
    yield from _fresh_store_dir()


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Replica, Replica, str]]:
    """Two replicas with a quota of QUOTA, started at the same moment on fresh schemas."""
    for store_dir in _fresh_store_dir():
        replicas = [Replica(store_dir, quota_calls=QUOTA), Replica(store_dir, quota_calls=QUOTA)]
        try:
            # Both open (create and migrate) every tenant's schema at once: the advisory locks serialise them.
            with ThreadPoolExecutor(2) as pool:
                ready = list(pool.map(Replica.wait_ready, replicas))
            assert all(r["ready"] and r["tenants"] == 3 for r in ready), ready
            yield replicas[0], replicas[1], store_dir
        finally:
            for r in replicas:
                r.stop()


def test_replicas_started_together_migrate_each_tenant_schema_once(pair):
    _, _, store_dir = pair
    with psycopg.connect(split_dsn(store_dir)[0], autocommit=True) as con:
        for tenant in KEYS.values():
            schema = split_dsn(tenant_location(store_dir, tenant))[1]
            meta = dict(con.execute(f'SELECT key, value FROM "{schema}".store_meta').fetchall())
            assert int(meta["schema_version"]) == SCHEMA_VERSION and meta["embedder"].startswith("hash"), meta
            tables = {r[0] for r in con.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", [schema])}
            assert {"memories", "events", "links", "turns", "store_meta"} <= tables
        quota = split_dsn(service_location(store_dir, "quota"))[1]
        assert con.execute("SELECT to_regclass(%s)", [f"{quota}.quota_calls"]).fetchone()[0] is not None


def test_a_write_through_one_replica_is_read_through_the_other(pair):
    one, two, _ = pair
    with one.client(KEY_A) as a1, two.client(KEY_A) as a2:
        rep = a1.post("/v1/remember", json={"text": "I moved from Berlin to Lisbon last week.", "user": "alice"})
        assert rep.status_code == 200, rep.text
        mid = rep.json()["added"][0]["id"]
        got = a2.get(f"/v1/memories/{mid}")
        assert got.status_code == 200 and "Lisbon" in got.json()["text"]
        pack = a2.post("/v1/recall", json={"query": "Where does alice live now?", "user": "alice"}).json()
        assert mid in [p["memory"]["id"] for p in pack["memories"]]
        # And the other way: a structured fact added through two, then a correction of it through one.
        fact = a2.post("/v1/memories", json={"text": "Lead time for AX-7 is 14 days", "user": "ops",
                                             "subject": "AX-7", "attribute": "lead_time", "value": "14 days"})
        assert fact.status_code == 200, fact.text
        fix = a1.post("/v1/memories", json={"text": "Lead time for AX-7 is 21 days", "user": "ops",
                                            "subject": "AX-7", "attribute": "lead_time", "value": "21 days"})
        assert fix.status_code == 200, fix.text
        old = a2.get(f"/v1/memories/{fact.json()['id']}").json()
        assert old["status"] == "superseded" and old["successor_id"] == fix.json()["id"]
        story = a1.get(f"/v1/memories/{fact.json()['id']}/history").json()
        assert [e["action"] for e in story["events"]][-1] == "superseded"


def test_tenants_stay_apart_through_either_replica(pair):
    one, two, _ = pair
    with one.client(KEY_A) as a1:
        rec = a1.post("/v1/memories", json={"text": "The vault code is 9931", "user": "ops"})
        assert rec.status_code == 200, rec.text
    mid = rec.json()["id"]
    for replica in (one, two):
        with replica.client(KEY_B) as b:
            assert b.get(f"/v1/memories/{mid}").status_code == 404
            assert b.get(f"/v1/memories/{mid}/history").status_code == 404
            assert b.post("/v1/forget", json={"memory_id": mid}).status_code == 404
            listed = b.get("/v1/memories", params={"include_inactive": True}).text
            found = b.post("/v1/recall", json={"query": "vault code", "user": "ops"}).text
            exported = b.get("/v1/export").text
            assert not any("9931" in text or mid in text for text in (listed, found, exported))
    with two.client(KEY_A) as a2:
        assert a2.get(f"/v1/memories/{mid}").json()["status"] == "active", "B's attempts changed nothing"


def test_the_quota_holds_across_replicas(pair):
    one, two, store_dir = pair

    def call(k: int) -> int:
        replica = (one, two)[k % 2]
        with replica.client(KEY_Q) as c:
            res = c.post("/v1/memories", json={"text": f"Metered note {k}", "user": "q"})
        assert res.status_code in (200, 429), res.text
        if res.status_code == 429:
            assert int(res.headers["Retry-After"]) > 0
        return res.status_code

    # 40 calls at once, alternating between the replicas: exactly QUOTA get through, whichever replica took them.
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(call, range(40)))
    assert codes.count(200) == QUOTA and codes.count(429) == 40 - QUOTA, codes
    for replica in (one, two):
        with replica.client(KEY_Q) as c:
            # Every model-calling route is charged, the audit included; reads are not.
            assert c.post("/v1/audit", json={"user": "q"}).status_code == 429
            assert c.post("/v1/answer", json={"question": "note?", "user": "q"}).status_code == 429
            assert c.post("/v1/recall", json={"query": "note", "user": "q"}).status_code == 200
            assert len(c.get("/v1/memories", params={"user": "q"}).json()["memories"]) == QUOTA
    with two.client(KEY_B) as b:
        assert b.post("/v1/audit", json={"user": "u"}).status_code == 200, "another tenant has its own quota"
    quota = split_dsn(service_location(store_dir, "quota"))[1]
    with psycopg.connect(split_dsn(store_dir)[0], autocommit=True) as con:
        counted = con.execute(f'SELECT count(*) FROM "{quota}".quota_calls WHERE key = %s', ["metered"]).fetchone()
    assert counted[0] == QUOTA, "the database holds the count, not either process"


@pytest.mark.slow
def test_killing_a_replica_mid_write_loses_no_acknowledged_write(store_dir):
    one, two = Replica(store_dir), Replica(store_dir)
    try:
        one.wait_ready()
        two.wait_ready()
        acked: list[tuple[str, str]] = []
        failures: list[str] = []
        stop = threading.Event()

        def writer(t: int) -> None:
            with one.client(KEY_A) as c:
                for k in range(10**6):
                    if stop.is_set():
                        return
                    text = f"Crate {t}-{k} holds amber and basalt"
                    try:
                        res = c.post("/v1/memories", json={"text": text, "user": f"w{t}", "subject": f"crate-{t}-{k}",
                                                           "attribute": "contents", "value": "amber and basalt"})
                    except httpx.HTTPError as exc:
                        failures.append(type(exc).__name__)
                        return
                    if res.status_code == 200:
                        acked.append((res.json()["id"], text))

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 30
        while len(acked) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        # Killed with writes in flight: no handler, no shutdown, no commit of anything still open.
        one.proc.send_signal(signal.SIGKILL)
        one.proc.wait(10)
        stop.set()
        for th in threads:
            th.join(60)
        assert len(acked) >= 40 and failures, (len(acked), failures)
        assert two.wait_ready()["ready"]
        with two.client(KEY_A) as c:
            for mid, text in acked:
                got = c.get(f"/v1/memories/{mid}")
                assert got.status_code == 200 and got.json()["text"] == text, (mid, got.text)
            # Nothing half-applied either: every memory that exists has its creation event.
            stored = c.get("/v1/memories", params={"include_inactive": True, "limit": 10_000}).json()["memories"]
            assert len(stored) >= len(acked)
            for m in stored:
                events = c.get(f"/v1/memories/{m['id']}/history").json()["events"]
                assert events and events[0]["action"] == "created", m["id"]
            # The surviving replica goes on taking writes.
            assert c.post("/v1/memories", json={"text": "After the crash", "user": "w0"}).status_code == 200
    finally:
        one.stop()
        two.stop()


def test_readyz_reflects_the_database(store_dir):
    cfg = ServerConfig(store_dir=store_dir, embedder="hash", quota_calls=5, quota_window_s=3600)
    app = create_app({KEY_A: "acme"}, cfg)
    with running(app) as url:
        ready = httpx.get(f"{url}/readyz", timeout=30)
        assert ready.status_code == 200 and ready.json()["quota"] == "database", ready.text
        assert "127.0.0.1" not in ready.text, "a public route names no database address"
        assert httpx.post(f"{url}/v1/memories", headers=_auth(KEY_A), timeout=30,
                          json={"text": "Counted once", "user": "u"}).status_code == 200
        # The database drops the quota connection (a restart, a failover): the next probe reconnects,
        # and the count, kept in the database, is still there.
        with psycopg.connect(split_dsn(store_dir)[0], autocommit=True) as con:
            killed = con.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                 "WHERE application_name = 'mnemo-quota'").fetchone()[0]
        assert killed >= 1
        assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200
        assert app.state.tenants.quota.counter.used("acme", 3600) == 1
        # The same for the tenant's store connection: the probe reconnects it, and requests work again.
        store = app.state.tenants.get("acme").mem.store
        with psycopg.connect(split_dsn(store_dir)[0], autocommit=True) as con:
            assert con.execute("SELECT pg_terminate_backend(%s)", [store.con.info.backend_pid]).fetchone()[0]
        assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200
        again = httpx.get(f"{url}/v1/memories", headers=_auth(KEY_A), timeout=30)
        assert again.status_code == 200 and [m["text"] for m in again.json()["memories"]] == ["Counted once"]
    # A database nobody listens on: the process is alive, but not ready.
    dead = f"postgresql://mnemo@127.0.0.1:{_free_port()}/nowhere?schema=r_dead"
    with running(create_app({KEY_A: "acme"}, ServerConfig(store_dir=dead, embedder="hash"))) as url:
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        res = httpx.get(f"{url}/readyz", timeout=30)
        assert res.status_code == 503 and res.json()["ready"] is False, res.text


def test_the_database_counter_is_exact_under_contention_and_slides(store_dir):
    from mnemo.store.meter import PgCounter

    location = service_location(store_dir, "quota")
    # Eight counters, eight connections, as eight replicas would have: 50 of 100 simultaneous calls get in.
    counters = [PgCounter(location) for _ in range(8)]
    try:
        with ThreadPoolExecutor(8) as pool:
            waits = list(pool.map(lambda k: counters[k % 8].admit("t", 50, 3600), range(100)))
        assert waits.count(None) == 50 and all(0 < w <= 3600 for w in waits if w is not None)
        assert counters[0].used("t", 3600) == 50 and counters[1].used("other", 3600) == 0
        # A short window: full, then free again once the oldest call has left it.
        assert [counters[2].admit("s", 2, 1.0) for _ in range(3)][:2] == [None, None]
        wait = counters[3].admit("s", 2, 1.0)
        assert wait is not None and 0 < wait <= 1.0
        time.sleep(wait + 0.05)
        assert counters[4].admit("s", 2, 1.0) is None
    finally:
        for c in counters:
            c.close()


@pytest.fixture(scope="module")
def busy_pair() -> Iterator[tuple[Replica, Replica]]:
    """Two replicas without a practical quota, for races."""
    for store_dir in _fresh_store_dir():
        replicas = [Replica(store_dir), Replica(store_dir)]
        try:
            for r in replicas:
                r.wait_ready()
            yield replicas[0], replicas[1]
        finally:
            for r in replicas:
                r.stop()


def _fact(subject: str, value: str) -> dict:
    return {"text": f"Lead time for {subject} is {value}", "user": "ops", "subject": subject,
            "attribute": "lead_time", "value": value}


@pytest.mark.parametrize("second", ["the same correction", "another correction"])
def test_racing_writes_on_two_replicas_leave_one_current_memory(busy_pair, second):
    """A correction through one replica and, at the same moment, the same (or another) through the other."""
    one, two = busy_pair
    rounds = 12
    tag = uuid.uuid4().hex[:6]
    with one.client(KEY_A) as a1, two.client(KEY_A) as a2:
        for k in range(rounds):
            assert a1.post("/v1/memories", json=_fact(f"P-{tag}-{k}", "14 days")).status_code == 200
        barrier = threading.Barrier(2)

        def send(client: httpx.Client, value: str) -> list[int]:
            codes = []
            for k in range(rounds):
                barrier.wait(30)
                codes.append(client.post("/v1/memories", json=_fact(f"P-{tag}-{k}", value)).status_code)
            return codes

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(send, a1, "21 days")
            other = pool.submit(send, a2, "21 days" if second == "the same correction" else "30 days")
            assert first.result() == other.result() == [200] * rounds
        for k in range(rounds):
            listed = a2.get("/v1/memories", params={"subject": f"P-{tag}-{k}", "include_inactive": True}).json()
            active = [m for m in listed["memories"] if m["status"] == "active"]
            assert len(active) == 1, (k, [(m["value"], m["status"]) for m in listed["memories"]])
            assert active[0]["value"] in ("21 days", "30 days")
            # The 14 days it replaced is superseded, by the memory now current or by the one it replaced.
            old = [m for m in listed["memories"] if m["value"] == "14 days"]
            assert len(old) == 1 and old[0]["status"] == "superseded"


def test_a_load_run_across_two_replicas_loses_no_writes(busy_pair):
    import importlib.util

    spec = importlib.util.spec_from_file_location("load_http", ROOT / "benchmarks" / "load_http.py")
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    one, two = busy_pair
    # Threads alternate between the replicas; every acknowledged write is read back through the other one.
    result = load.run([one.url, two.url], KEY_A, seconds=3.0, threads=4)
    assert result["replicas"] == 2 and result["errors"] == 0, result
    assert result["writes"] > 0 and result["recalls"] > 0 and result["lost_writes"] == 0, result


def test_the_reconcile_lock_excludes_other_connections_and_dies_with_its_process(store_dir):
    from mnemo.store import PgStore

    location = split_dsn(tenant_location(store_dir, "acme"))[1]
    dsn = f"{split_dsn(store_dir)[0]}{'&' if '?' in split_dsn(store_dir)[0] else '?'}schema={location}"
    a, b = PgStore(dsn, embedder="hash-x", dim=4), PgStore(dsn, embedder="hash-x", dim=4)
    try:
        order: list[str] = []
        held = threading.Event()

        def first() -> None:
            with a.exclusive("user:alice"):
                held.set()
                time.sleep(0.5)
                order.append("a done")

        th = threading.Thread(target=first)
        th.start()
        held.wait(10)
        with b.exclusive("user:bob"):
            order.append("b on bob")  # another user's key does not wait
        with b.exclusive("user:alice"):
            order.append("b on alice")  # the same key waits for a to finish
        th.join()
        assert order == ["b on bob", "a done", "b on alice"]
        # A process killed while holding the lock releases it with its connection.
        code = ("import sys, time; from mnemo.store import PgStore; s = PgStore(sys.argv[1], embedder='hash-x', dim=4)\n"
                "with s.exclusive('user:alice'):\n    print('held', flush=True); time.sleep(60)")
        proc = subprocess.Popen([sys.executable, "-c", code, dsn], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "held"
        got = threading.Event()

        def waiter() -> None:
            with b.exclusive("user:alice"):
                got.set()

        th = threading.Thread(target=waiter)
        th.start()
        assert not got.wait(1.0), "the other process holds the lock"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert got.wait(10), "its death released it"
        th.join()
        proc.stdout.close()
    finally:
        a.close()
        b.close()


def test_the_library_reconciles_a_user_under_the_stores_lock(store_dir):
    # Memory.remember, not only the server, waits for another process's write to the same user.
    from mnemo.store import PgStore

    location = split_dsn(tenant_location(store_dir, "lib"))[1]
    dsn = f"{split_dsn(store_dir)[0]}{'&' if '?' in split_dsn(store_dir)[0] else '?'}schema={location}"
    mem = mnemo.Memory.open(dsn, embedder="hash")
    other = PgStore(dsn, embedder=mem.embedder.name, dim=mem.embedder.dim)
    try:
        done = threading.Event()

        def write() -> None:
            mem.remember("I live in Lisbon.", user="alice")
            done.set()

        with other.exclusive("user:alice"):
            th = threading.Thread(target=write)
            th.start()
            assert not done.wait(1.0), "remember must wait for the other holder of alice's lock"
        assert done.wait(30)
        th.join()
        with mem.store.exclusive("user:alice"), mem.store.exclusive("user:alice"):
            pass  # reentrant: a server holding the lock may call Memory, which takes it again
    finally:
        other.close()
        mem.close()
