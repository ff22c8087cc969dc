"""PostgreSQL faults (issue #33): a dropped connection, an outage, a kill -9 of the postmaster with fsync on.

Each test runs its own PostgreSQL (tests/pg_cluster.py), never the shared test server, because
it terminates connections, stops the server and kills it. What must hold:

- a connection the server dropped is found on use and reopened: the next request succeeds;
- while the database is down every request gets 503 with Retry-After, never a 500, and the
  first request once it is back succeeds (no readiness probe needed to reconnect);
- with durability on (fsync, synchronous_commit), a kill -9 of the postmaster and its
  backends in the middle of writes loses no write that was acknowledged.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from conftest import unavailable
from pg_cluster import Cluster, binaries_present

from mnemo import Memory
from mnemo.errors import StoreUnavailable
from mnemo.server.http import create_app, running
from mnemo.server.tenants import ServerConfig

pytestmark = [pytest.mark.faults, pytest.mark.slow]

KEY = "faults-pg-key-acme-0123456789"


def _cluster(durable: bool) -> Iterator[Cluster]:
    if not binaries_present():
        unavailable("PostgreSQL fault tests: the PostgreSQL binaries are not installed",
                    "source .ci/services.sh && pg_start (installs them)")
    cluster = Cluster(durable=durable)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A private PostgreSQL with fsync off, as the shared test server runs."""
    yield from _cluster(durable=False)


@pytest.fixture
def durable_cluster() -> Iterator[Cluster]:
    """A private PostgreSQL with PostgreSQL's durability defaults: fsync, synchronous_commit, full_page_writes on."""
    yield from _cluster(durable=True)


def _terminate_others(dsn: str) -> int:
    """pg_terminate_backend every client connection but this one (what a failover or an operator does)."""
    with psycopg.connect(dsn, autocommit=True) as con:
        return con.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").fetchone()[0]


def _calls(c: httpx.Client, k: int) -> list[httpx.Response]:
    """One of each kind of request a tenant makes: a write, a recall, a listing, a read by id."""
    added = c.post("/v1/memories", json={"text": f"Crate {k} holds amber", "user": "ops", "subject": f"crate-{k}",
                                         "attribute": "contents", "value": "amber"})
    out = [added,
           c.post("/v1/recall", json={"query": f"what does crate {k} hold", "user": "ops"}),
           c.get("/v1/memories", params={"user": "ops"})]
    if added.status_code == 200:
        out.append(c.get(f"/v1/memories/{added.json()['id']}"))
    return out


def test_a_dropped_connection_heals_and_an_outage_is_503_then_the_first_request_after_succeeds(cluster):
    app = create_app({KEY: "acme"}, ServerConfig(store_dir=f"{cluster.dsn}?schema=faults", embedder="hash"))
    with running(app) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"},
                                           timeout=60) as c:
        assert [r.status_code for r in _calls(c, 0)] == [200] * 4
        # The server drops every connection (the store's, its lock's, the quota counter's): found on use, reopened.
        assert _terminate_others(cluster.dsn) >= 2
        after_drop = _calls(c, 1)
        assert [r.status_code for r in after_drop] == [200] * 4, [r.text for r in after_drop]
        # The database goes away: 503 with Retry-After on every route, never a 500.
        cluster.stop()
        during = [r for k in range(2, 5) for r in _calls(c, k)]
        assert {r.status_code for r in during} == {503}, [(r.status_code, r.text) for r in during]
        assert all(int(r.headers["Retry-After"]) >= 1 for r in during)
        assert c.get("/readyz").status_code == 503
        # It is back: the very first request succeeds, with no readiness probe to reconnect first.
        cluster.start()
        first = c.post("/v1/memories", json={"text": "Crate 9 holds basalt", "user": "ops"})
        assert first.status_code == 200, first.text
        assert [r.status_code for r in _calls(c, 10)] == [200] * 4
        listed = c.get("/v1/memories", params={"user": "ops"}).json()["memories"]
        assert {m["text"] for m in listed} >= {"Crate 0 holds amber", "Crate 1 holds amber", "Crate 9 holds basalt"}


def test_under_load_an_outage_gives_only_503_and_no_request_fails_once_the_database_is_back(cluster):
    """Four clients keep writing and recalling while the connections are dropped, the server stops and starts."""
    app = create_app({KEY: "acme"}, ServerConfig(store_dir=f"{cluster.dsn}?schema=faults", embedder="hash",
                                                 quota_calls=10**9))
    seen: list[tuple[float, float, int, bool]] = []  # (sent, answered, status, Retry-After given)
    stop = threading.Event()

    def client(t: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
            k = 0
            while not stop.is_set():
                sent = time.monotonic()
                if k % 2:
                    res = c.post("/v1/recall", json={"query": f"crate {t}", "user": f"u{t}"})
                else:
                    res = c.post("/v1/memories", json={"text": f"Crate {t}-{k} holds amber", "user": f"u{t}"})
                seen.append((sent, time.monotonic(), res.status_code, "Retry-After" in res.headers))
                k += 1
                if res.status_code == 503:
                    time.sleep(0.05)

    with running(app) as url:
        threads = [threading.Thread(target=client, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        time.sleep(2)
        _terminate_others(cluster.dsn)
        time.sleep(1)
        cluster.stop()
        time.sleep(2)
        cluster.start()
        back = time.monotonic()
        time.sleep(3)
        stop.set()
        for th in threads:
            th.join(60)
    codes = Counter(code for _, _, code, _ in seen)
    after = Counter(code for sent, _, code, _ in seen if sent > back)
    print(f"\nstatuses over the run: {dict(codes)}; sent after the database was back: {dict(after)}")
    assert set(codes) <= {200, 503}, codes
    assert all(retry for _, _, code, retry in seen if code == 503), "every 503 says when to retry"
    assert codes[503] > 0, "the outage was seen"
    assert after[200] > 0 and set(after) == {200}, after


def test_a_kill_9_of_the_postmaster_mid_write_loses_no_acknowledged_write_with_fsync_on(durable_cluster):
    cluster = durable_cluster
    location = f"{cluster.dsn}?schema=crash"
    Memory.open(location, embedder="hash:32").close()  # create and migrate the schema once
    acked: list[tuple[str, str]] = []
    refused: Counter[str] = Counter()
    stop = threading.Event()

    def writer(t: int) -> None:
        with Memory.open(location, embedder="hash:32") as mem:
            k = 0
            while not stop.is_set():
                text = f"Crate {t}-{k} holds amber"
                k += 1
                try:
                    acked.append((mem.add(text, user=f"w{t}", subject=f"crate-{t}-{k}", attribute="contents",
                                          value="amber").id, text))
                except StoreUnavailable:
                    refused["StoreUnavailable"] += 1
                    time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 60
    while len(acked) < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    at_kill = len(acked)
    cluster.kill9()  # writes in flight: no shutdown, no checkpoint
    time.sleep(1)
    cluster.start()  # crash recovery replays the WAL
    back = len(acked)
    time.sleep(2)  # the writers reconnect by themselves and go on
    stop.set()
    for th in threads:
        th.join(60)
    assert at_kill >= 60 and refused, (at_kill, refused)
    assert len(acked) > back, "writes go on after the restart, through the writers' own reconnected stores"
    assert "database system was interrupted" in cluster.log() or "not properly shut down" in cluster.log()
    with Memory.open(location, embedder="hash:32") as mem:
        found = mem.store.get_many([mid for mid, _ in acked])
        lost = [mid for mid, text in acked if mid not in found or found[mid].text != text]
        print(f"\nacknowledged {len(acked)} writes ({at_kill} before the kill -9), lost {len(lost)}")
        assert lost == []
