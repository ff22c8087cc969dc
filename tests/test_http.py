"""The HTTP service on a real uvicorn server on loopback: round trip, tenant isolation on every route, limits."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import httpx
import pytest
import schemathesis
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, settings

from mnemo import Memory
from mnemo.errors import LLMUnavailable, StoreError
from mnemo.llm import LLM
from mnemo.server.http import PUBLIC, create_app, current_tenant, running
from mnemo.server.tenants import ServerConfig, load_keys, parse_keys

KEY_A, KEY_B, KEY_FUZZ = "key-acme-0123456789abcdef", "key-globex-0123456789abcdef", "key-fuzz-0123456789abcdef"
KEYS = {KEY_A: "acme", KEY_B: "globex", KEY_FUZZ: "fuzz"}
ROOT = Path(__file__).resolve().parents[1]


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def app():
    return create_app(KEYS, ServerConfig(embedder="hash", max_body_bytes=64_000, quota_calls=10_000))


@pytest.fixture(scope="module")
def base_url(app):
    with running(app) as url:
        yield url


@pytest.fixture(scope="module")
def a(base_url):
    with httpx.Client(base_url=base_url, headers=_auth(KEY_A), timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def b(base_url):
    with httpx.Client(base_url=base_url, headers=_auth(KEY_B), timeout=30) as client:
        yield client


def _data_routes(app) -> list[APIRoute]:
    return [r for r in app.routes if isinstance(r, APIRoute) and r.path not in PUBLIC]


def _calls(dependant):
    yield dependant.call
    for dep in dependant.dependencies:
        yield from _calls(dep)


def test_remember_then_recall_round_trip(a):
    rep = a.post("/v1/remember", json={"text": "I moved from Berlin to Lisbon last week.", "user": "alice",
                                       "session": "s2"})
    assert rep.status_code == 200, rep.text
    added = rep.json()["added"]
    assert added and "Lisbon" in added[0]["text"]
    r = a.post("/v1/recall", json={"query": "Where do I live now?", "user": "alice", "budget_tokens": 256})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["confidence"] in ("certain", "vague")
    assert added[0]["id"] in [p["memory"]["id"] for p in body["memories"]]
    assert body["citations"] and body["trace"]
    ans = a.post("/v1/answer", json={"question": "Where do I live now?", "user": "alice"})
    assert ans.status_code == 200, ans.text
    assert "Lisbon" in ans.json()["text"] and added[0]["id"] in ans.json()["cited"]


def test_every_data_route_requires_a_key(app, base_url):
    routes = _data_routes(app)
    assert len(routes) >= 10
    with httpx.Client(base_url=base_url, timeout=30) as anon:
        for route in routes:
            # The dependency is there (structure) and it refuses (behaviour), for every route, present and future.
            assert current_tenant in set(_calls(route.dependant)), f"{route.path} does not check the API key"
            path = route.path.replace("{memory_id}", "m-0000000000000000")
            for method in route.methods:
                for headers in ({}, _auth("not-a-key-" + "x" * 20), {"Authorization": "Basic eDp5"}):
                    res = anon.request(method, path, headers=headers, json={})
                    assert res.status_code == 401, (method, path, headers, res.text)


def test_tenants_cannot_read_or_write_each_other_on_any_route(app, a, b):
    fact = a.post("/v1/memories", json={"text": "Lead time for AX-7 is 14 days", "user": "ops", "subject": "AX-7",
                                        "attribute": "lead_time", "value": "14 days", "meta": {"secret": "acme"}})
    assert fact.status_code == 200, fact.text
    a.post("/v1/remember", json={"text": "My favourite colour is teal.", "user": "alice"})
    mine = {m["id"]: m for m in a.get("/v1/memories", params={"include_inactive": True}).json()["memories"]}
    fid = fact.json()["id"]
    secrets = ["Lead time for AX-7 is 14 days", "teal", "acme", *mine]

    def blind(res: httpx.Response) -> None:
        """B learns nothing of A: a 404 may echo the id B sent, nothing else of A's may appear."""
        assert res.status_code in (200, 404), res.text
        shown = res.text.replace(fid, "") if res.status_code == 404 else res.text
        assert not any(s in shown for s in secrets), res.text

    probes = {
        ("POST", "/v1/remember"): lambda: blind(b.post("/v1/remember", json={"text": "My favourite colour is red.",
                                                                             "user": "alice"})),
        ("POST", "/v1/memories"): lambda: blind(b.post("/v1/memories", json={
            "text": "Lead time for AX-7 is 30 days", "user": "ops", "subject": "AX-7", "attribute": "lead_time",
            "value": "30 days"})),
        ("POST", "/v1/recall"): lambda: [blind(b.post("/v1/recall", json={"query": q, "user": u}))
                                         for q, u in (("AX-7 lead time", "ops"), ("favourite colour", "alice"))],
        ("POST", "/v1/forget"): lambda: [
            blind(b.post("/v1/forget", json={"memory_id": fid})),
            blind(b.post("/v1/forget", json={"query": "the AX-7 lead time", "user": "ops"}))],
        ("GET", "/v1/memories"): lambda: [blind(b.get("/v1/memories", params=p))
                                          for p in ({}, {"user": "ops", "include_inactive": True})],
        ("GET", "/v1/memories/{memory_id}"): lambda: blind(b.get(f"/v1/memories/{fid}")),
        ("GET", "/v1/memories/{memory_id}/history"): lambda: blind(b.get(f"/v1/memories/{fid}/history")),
        ("POST", "/v1/audit"): lambda: blind(b.post("/v1/audit", json={"user": "ops"})),
        ("POST", "/v1/memories/{memory_id}/restore"): lambda: blind(b.post(f"/v1/memories/{fid}/restore", json={})),
        ("GET", "/v1/stats"): lambda: [blind(b.get("/v1/stats", params=p)) for p in ({}, {"user": "ops"})],
        ("POST", "/v1/decay"): lambda: blind(b.post("/v1/decay", json={"at": "2031-01-01T00:00:00+00:00"})),
        # B imports its own export again: it lands in B's store only, and A's is unchanged (checked below).
        ("POST", "/v1/import"): lambda: blind(b.post("/v1/import", params={"on_conflict": "skip"},
                                                     content=b.get("/v1/export").content,
                                                     headers={"Content-Type": "application/x-ndjson"})),
        ("POST", "/v1/assess"): lambda: blind(b.post("/v1/assess", json={"query": "AX-7 lead time", "user": "ops"})),
        ("GET", "/v1/export"): lambda: [blind(b.get("/v1/export", params=p))
                                        for p in ({}, {"fmt": "markdown"}, {"user": "ops"})],
        ("POST", "/v1/answer"): lambda: blind(b.post("/v1/answer", json={"question": "AX-7 lead time?",
                                                                          "user": "ops"})),
        # The experiments folder is the server's, not a tenant's: nothing of A's may show through it either.
        ("GET", "/v1/experiments"): lambda: blind(b.get("/v1/experiments")),
        ("GET", "/v1/experiments/file"): lambda: blind(b.get("/v1/experiments/file",
                                                              params={"path": "acme.duckdb"})),
    }
    routes = {(m, r.path) for r in _data_routes(app) for m in r.methods}
    missing = routes - set(probes)
    assert not missing, f"routes without an isolation probe: {sorted(missing)}"
    for key in sorted(routes):
        probes[key]()
    # What B did landed in B's store only: A's memories are exactly as they were, and B's are not in A's.
    after = {m["id"]: m for m in a.get("/v1/memories", params={"include_inactive": True}).json()["memories"]}
    assert after == mine
    assert b.get(f"/v1/memories/{fid}").status_code == 404
    assert a.get(f"/v1/memories/{fid}").json()["status"] == "active"
    # A's counts are A's, and no tenant learns where its store lives on the server.
    mine_now, ops = a.get("/v1/stats").json(), a.get("/v1/stats", params={"user": "ops"}).json()
    assert mine_now["memories"] == len(mine) and ops["memories"] == 1 and ops["user"] == "ops"
    assert ".duckdb" not in json.dumps([mine_now, ops]) and "path" not in mine_now


def test_restore_decay_and_import_round_trip(tmp_path):
    """The operator's verbs over HTTP: a tombstone reversed, a decay pass years on, an export moved to another tenant."""
    app = create_app(KEYS, ServerConfig(embedder="hash", store_dir=str(tmp_path), quota_calls=10_000))
    with running(app) as url, httpx.Client(base_url=url, headers=_auth(KEY_A), timeout=60) as a, \
            httpx.Client(base_url=url, headers=_auth(KEY_B), timeout=60) as b:
        kept = a.post("/v1/memories", json={"text": "My passport number is X1234567.", "user": "alice",
                                            "pinned": True}).json()
        chat = a.post("/v1/remember", json={"text": "I had a tuna sandwich for lunch today.", "user": "alice",
                                            "at": "2025-01-01T12:00:00+00:00"}).json()["added"]
        gone = a.post("/v1/forget", json={"memory_id": kept["id"]}).json()["forgotten"]
        assert [m["status"] for m in gone] == ["forgotten"]
        back = a.post(f"/v1/memories/{kept['id']}/restore", json={"reason": "asked back"})
        assert back.status_code == 200 and back.json()["status"] == "active", back.text
        assert a.post("/v1/memories/m-nope/restore", json={}).status_code == 404
        # Years later the lunch has decayed, the passport (pinned) has not.
        pass_ = a.post("/v1/decay", json={"at": "2030-01-01T00:00:00+00:00"})
        assert pass_.status_code == 200, pass_.text
        decayed = {d["memory_id"] for d in pass_.json()["decayed"]}
        assert {m["id"] for m in chat} <= decayed and kept["id"] not in decayed
        # A's export imported by B: B holds the same memories, with their statuses; A is unchanged.
        export = a.get("/v1/export").content
        moved = b.post("/v1/import", content=export, headers={"Content-Type": "application/x-ndjson"})
        assert moved.status_code == 200, moved.text
        assert moved.json()["added"]["memory"] == len(a.get("/v1/memories", params={"include_inactive": True}
                                                               ).json()["memories"])
        again = b.post("/v1/import", content=export, headers={"Content-Type": "application/x-ndjson"})
        assert again.status_code == 422 and "already" in again.text, again.text
        skip = b.post("/v1/import", params={"on_conflict": "skip"}, content=export,
                      headers={"Content-Type": "application/x-ndjson"})
        assert skip.status_code == 200 and skip.json()["added"]["memory"] == 0, skip.text
        assert b.get(f"/v1/memories/{kept['id']}").json()["status"] == "active"
        for bad in (b"", b"not json\n", export[: len(export) // 2]):
            res = b.post("/v1/import", content=bad, headers={"Content-Type": "application/x-ndjson"})
            assert 400 <= res.status_code < 500 and "mnemo-import" not in res.text, (bad[:40], res.text)


def test_request_size_limit_is_413_with_a_clear_message(a):
    big = {"text": "x" * 70_000, "user": "alice"}
    res = a.post("/v1/remember", json=big)
    assert res.status_code == 413 and "larger than the server's limit of 64,000 bytes" in res.json()["detail"]
    # A chunked body declares no length; it is counted as it arrives.
    chunks = (json.dumps(big).encode()[k:k + 8192] for k in range(0, 80_000, 8192))
    res = a.post("/v1/remember", content=chunks, headers={"Content-Type": "application/json"})
    assert res.status_code == 413, res.text


def test_bad_input_is_4xx_never_500(a):
    assert a.get("/v1/memories/m-nope").status_code == 404
    assert a.get("/v1/memories/m-nope/history").json()["error"] == "NotFound"
    for body in ({"text": "", "user": "u"}, {"text": "a\x00b", "user": "u"}, {"text": "hi"},
                 {"text": "hi", "user": "u", "at": "0001-01-01T00:00:00+14:00"}, {"text": "hi", "user": "u", "x": 1}):
        assert a.post("/v1/remember", json=body).status_code == 422, body
    raw = b'{"query": "x\\ud800", "user": "u"}'
    assert a.post("/v1/recall", content=raw, headers={"Content-Type": "application/json"}).status_code == 422
    assert a.post("/v1/forget", json={"reason": "no target"}).status_code == 422
    assert a.post("/v1/forget", json={"query": "x"}).json()["error"] == "InvalidInput"
    deep = {"text": "t", "user": "u", "meta": {"a": json.loads("[" * 40 + "]" * 40)}}
    assert a.post("/v1/memories", json=deep).status_code == 422
    assert a.post("/v1/recall", content=b"[" * 50_000, headers={"Content-Type": "application/json"}).status_code < 500


def test_quota_on_model_calling_routes_is_429_per_tenant():
    app = create_app(KEYS, ServerConfig(embedder="hash", quota_calls=3, quota_window_s=3600))
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as c:
        for k in range(2):
            assert c.post("/v1/remember", headers=_auth(KEY_A), json={"text": f"Note {k}", "user": "u"}).status_code \
                == 200
        # The audit may ask the model to judge pairs (live mode), so it is charged too.
        assert c.post("/v1/audit", headers=_auth(KEY_A), json={"user": "u"}).status_code == 200
        res = c.post("/v1/assess", headers=_auth(KEY_A), json={"query": "note", "user": "u"})
        assert res.status_code == 429 and int(res.headers["Retry-After"]) > 0 and "quota" in res.json()["detail"]
        assert c.post("/v1/audit", headers=_auth(KEY_A), json={"user": "u"}).status_code == 429
        # Reads are not metered, and another tenant has its own quota.
        assert c.post("/v1/recall", headers=_auth(KEY_A), json={"query": "note", "user": "u"}).status_code == 200
        assert c.post("/v1/remember", headers=_auth(KEY_B), json={"text": "Note", "user": "u"}).status_code == 200


def test_health_ready_and_openapi(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        ready = c.get("/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True
        paths = c.get("/openapi.json").json()["paths"]
        assert {"/v1/remember", "/v1/recall", "/v1/forget", "/v1/export", "/healthz"} <= set(paths)


class _Completions:
    def __init__(self, fail: bool):
        self.fail = fail

    def create(self, **kwargs):
        if self.fail:
            raise LLMUnavailable("endpoint down")
        message = type("M", (), {"content": "ok"})()
        return type("R", (), {"choices": [type("C", (), {"message": message})()], "model": kwargs["model"],
                              "usage": None})()


@pytest.mark.parametrize("case", ["store_fails", "model_fails", "model_answers"])
def test_readyz_needs_the_stores_and_a_live_model(case):
    def opener(name):
        if case == "store_fails" and name == "globex":
            raise StoreError("cannot open globex.duckdb")
        client = type("Client", (), {"chat": type("Chat", (), {"completions": _Completions(case == "model_fails")})})
        return Memory.open(":memory:", embedder="hash", llm=LLM("live", client=client, attempts=1, backoff=0))

    app = create_app(KEYS, ServerConfig(), opener=opener)
    with running(app) as url:
        res = httpx.get(f"{url}/readyz", timeout=30)
        assert res.status_code == (200 if case == "model_answers" else 503), res.text
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        if case == "model_answers":
            assert res.json()["llm"] == "live"


def test_each_tenant_has_its_own_store_file_that_survives_a_restart(tmp_path):
    cfg = ServerConfig(store_dir=str(tmp_path), embedder="hash")
    with running(create_app(KEYS, cfg)) as url:
        rec = httpx.post(f"{url}/v1/memories", headers=_auth(KEY_A), json={"text": "Kept across restarts", "user": "u"})
        assert rec.status_code == 200
        with httpx.stream("GET", f"{url}/v1/export", headers=_auth(KEY_A)) as res:
            assert next(res.iter_lines()).startswith('{"format":"mnemo-export"')
    assert sorted(p.name for p in tmp_path.glob("*.duckdb")) == ["acme.duckdb"]
    with running(create_app(KEYS, cfg)) as url:
        assert httpx.get(f"{url}/v1/memories/{rec.json()['id']}", headers=_auth(KEY_A)).json()["text"] == \
            "Kept across restarts"


def test_keys_come_from_env_or_file(tmp_path):
    assert load_keys(env={"MNEMO_API_KEYS": f"{KEY_A}:acme, {KEY_B}:globex"}) == {KEY_A: "acme", KEY_B: "globex"}
    (tmp_path / "keys.txt").write_text(f"# ops keys\n{KEY_A}:acme\n")
    assert load_keys(tmp_path / "keys.txt") == {KEY_A: "acme"}
    assert parse_keys("a:b:c") == {"a:b": "c"}
    for bad in ("", "short:acme", f"{KEY_A}:../etc"):
        with pytest.raises(Exception, match="API key|tenant"):
            load_keys(env={"MNEMO_API_KEYS": bad})


# The fuzzed app's schema is read at import (no server needed for that); the test then calls the real server.
FUZZ_APP = create_app(KEYS, ServerConfig(embedder="hash", quota_calls=100_000))
# POST /v1/import takes an export's bytes (JSON Lines): fuzzed as raw bytes.
schemathesis.serializer.alias("application/x-ndjson", "application/octet-stream")
schema = schemathesis.openapi.from_dict(FUZZ_APP.openapi())


@pytest.fixture(scope="module")
def fuzz_url():
    with running(FUZZ_APP) as url:
        yield url


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_fuzz_the_openapi_schema_finds_no_5xx(case, fuzz_url):
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

    case.call_and_validate(base_url=fuzz_url, headers=_auth(KEY_FUZZ), timeout=30,
                           checks=[not_a_server_error, response_schema_conformance, content_type_conformance])


def test_load_run_loses_no_writes(app, base_url):
    spec = importlib.util.spec_from_file_location("load_http", ROOT / "benchmarks" / "load_http.py")
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    result = load.run(base_url, KEY_FUZZ, seconds=3.0, threads=4)
    assert result["errors"] == 0, result
    assert result["writes"] > 0 and result["recalls"] > 0
    assert result["lost_writes"] == 0, result


def test_tenants_on_postgres_get_a_schema_each_survive_a_restart_and_lose_no_concurrent_writes():
    import uuid

    import psycopg
    from conftest import require_postgres

    from mnemo.server.tenants import service_location, tenant_location
    from mnemo.store import split_dsn

    dsn = require_postgres()
    store_dir = f"{dsn}{'&' if '?' in dsn else '?'}schema=h{uuid.uuid4().hex[:8]}"
    schemas = {t: split_dsn(tenant_location(store_dir, t))[1] for t in ("acme", "globex", "fuzz")}
    assert len(set(schemas.values())) == 3
    cfg = ServerConfig(store_dir=store_dir, embedder="hash", quota_calls=100_000)
    try:
        with running(create_app(KEYS, cfg)) as url:
            a = httpx.post(f"{url}/v1/remember", headers=_auth(KEY_A), timeout=30,
                           json={"text": "I moved from Berlin to Lisbon last week.", "user": "alice"})
            assert a.status_code == 200, a.text
            mid = a.json()["added"][0]["id"]
            r = httpx.post(f"{url}/v1/recall", headers=_auth(KEY_A), timeout=30,
                           json={"query": "Where do I live now?", "user": "alice"}).json()
            assert mid in [p["memory"]["id"] for p in r["memories"]]
            assert httpx.get(f"{url}/v1/memories/{mid}", headers=_auth(KEY_B)).status_code == 404
            spec = importlib.util.spec_from_file_location("load_http", ROOT / "benchmarks" / "load_http.py")
            load = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(load)
            result = load.run(url, KEY_FUZZ, seconds=3.0, threads=4)
            assert result["errors"] == 0 and result["lost_writes"] == 0, result
            assert result["writes"] > 0 and result["recalls"] > 0
        with running(create_app(KEYS, cfg)) as url:  # a restart finds each tenant's schema as it was left
            got = httpx.get(f"{url}/v1/memories/{mid}", headers=_auth(KEY_A))
            assert got.status_code == 200 and "Lisbon" in got.json()["text"]
            assert httpx.get(f"{url}/v1/memories", headers=_auth(KEY_B)).json()["memories"] == []
        with psycopg.connect(split_dsn(dsn)[0], autocommit=True) as con:
            found = {r[0] for r in con.execute("SELECT nspname FROM pg_namespace").fetchall()}
        assert {schemas["acme"], schemas["fuzz"]} <= found
    finally:
        with psycopg.connect(split_dsn(dsn)[0], autocommit=True) as con:
            for schema in [*schemas.values(), split_dsn(service_location(store_dir, "quota"))[1]]:
                con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
