"""Faults a service must survive (issue #33): a bad byte, busy writers on one tenant, a forged export,
an interrupted batch, a second server on the same folder.

Each test reproduces one fault as an operator met it; each failed on the code before its fix
(the commit that added it says how). The database faults (a dropped connection, an outage,
a kill -9 of the postmaster with fsync on) are in test_faults_pg.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import anyio
import httpx
import numpy as np
import pytest
from conftest import stop_process
from mcp import Client
from typer.testing import CliRunner

from mnemo import Memory
from mnemo.cli import app as cli
from mnemo.errors import InvalidInput, StoreLocked
from mnemo.model import Turn
from mnemo.server.http import create_app, running
from mnemo.server.mcp import build_server
from mnemo.server.tenants import RWLock, ServerConfig
from mnemo.store import SCHEMA_VERSION

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[1]
KEY = "faults-key-acme-0123456789"
BAD = "\udc80"  # a lone surrogate: JSON carries it ("\udc80"), UTF-8 cannot


def _auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ----------------------------------------------------------------- 1. one bad character
@pytest.mark.parametrize("case", ["meta value", "meta key", "nested meta value", "meta NaN", "user", "session",
                                  "NUL in user", "subject", "kind"])
def test_the_library_refuses_a_text_it_cannot_store_before_committing_anything(tmp_path, case):
    kwargs = {"meta value": {"meta": {"k": BAD}}, "meta key": {"meta": {BAD: "v"}},
              "nested meta value": {"meta": {"k": [{"deep": f"x{BAD}"}]}}, "meta NaN": {"meta": {"k": math.nan}},
              "user": {"user": f"al{BAD}ice"}, "session": {"session": f"s{BAD}"}, "NUL in user": {"user": "a\x00b"},
              "subject": {"subject": f"AX{BAD}"}, "kind": {"kind": "bogus-kind"}}[case]
    with Memory.open(tmp_path / "m.duckdb", embedder="hash") as mem:
        mem.add("Lead time for AX-7 is 14 days", user="ops")
        with pytest.raises(InvalidInput):
            mem.add("The vault code is 9931", **{"user": "ops", **kwargs})
        if "meta" not in case and case not in ("subject", "kind"):
            with pytest.raises(InvalidInput):
                mem.remember("I moved to Lisbon.", **{"user": "ops", **kwargs})
        # Nothing of the refused write was committed, and the store still exports whole.
        assert [t.text for t in mem.store.turns()] == ["Lead time for AX-7 is 14 days"]
        assert [m.text for m in mem.memories(include_inactive=True)] == ["Lead time for AX-7 is 14 days"]
        out = mem.export(tmp_path / "all.jsonl")
        assert json.loads(out.read_text().splitlines()[-1])["counts"]["memory"] == 1


def test_http_refuses_a_bad_character_in_meta_with_422_and_the_tenant_keeps_working(tmp_path):
    app = create_app({KEY: "acme"}, ServerConfig(store_dir=str(tmp_path), embedder="hash"))
    with running(app) as url, httpx.Client(base_url=url, headers=_auth(), timeout=30) as c:
        assert c.post("/v1/memories", json={"text": "Lead time for AX-7 is 14 days", "user": "ops"}).status_code == 200
        raw = b'{"text": "The vault code is 9931", "user": "ops", "meta": {"k": "\\udc80"}}'
        bad = c.post("/v1/memories", content=raw, headers={"Content-Type": "application/json"})
        assert bad.status_code == 422 and bad.json()["error"] == "InvalidInput", bad.text
        nested = {"text": "The vault code is 9931", "user": "ops", "meta": {"k": [1, {"v": "x\x00"}]}}
        assert c.post("/v1/memories", json=nested).status_code == 422
        # The tenant is whole: listing, recall and the export answer, with the one good memory only.
        listed = c.get("/v1/memories", params={"user": "ops", "include_inactive": True})
        assert listed.status_code == 200 and [m["text"] for m in listed.json()["memories"]] == \
            ["Lead time for AX-7 is 14 days"]
        assert c.post("/v1/recall", json={"query": "vault code", "user": "ops"}).status_code == 200
        lines = c.get("/v1/export").text.splitlines()
        assert json.loads(lines[-1])["type"] == "end" and json.loads(lines[-1])["counts"]["memory"] == 1


@pytest.mark.parametrize("body", [b'{"query": "caf\xe9", "user": "u"}', b"[" * 100_000,
                                  b'{"query": ' + b"[" * 100_000 + b"]" * 100_000 + b', "user": "u"}'],
                         ids=["invalid UTF-8", "100k-deep array", "100k-deep field"])
def test_an_unreadable_body_is_422_as_documented(body):
    app = create_app({KEY: "acme"}, ServerConfig(embedder="hash"))
    with running(app) as url:
        res = httpx.post(f"{url}/v1/recall", content=body, headers={**_auth(), "Content-Type": "application/json"},
                         timeout=30)
    assert res.status_code == 422 and res.json()["error"] == "InvalidInput", res.text


# What an MCP client and an HTTP client send alike, and both must refuse (the route, the tool, the arguments).
REFUSED = [
    ("/v1/remember", "remember", {"text": "I live in Lisbon.", "user": "a\x00b"}),
    ("/v1/recall", "recall", {"query": "where", "user": "alice", "budget_tokens": 10**12}),
    ("/v1/remember", "remember", {"text": "I live in Lisbon.", "user": "alice", "tenant": "globex"}),
    ("/v1/recall", "recall", {"query": "where", "user": "alice", "filters": {"kinds": "semantic"}}),
    ("/v1/recall", "recall", {"query": "where", "user": f"al{BAD}ice"}),
]


async def _mcp_refusals(mem: Memory) -> list[tuple[bool, str]]:
    async with Client(build_server(mem)) as client:
        return [((res := await client.call_tool(tool, args)).is_error, res.content[0].text)
                for _, tool, args in REFUSED]


def test_mcp_and_http_refuse_the_same_arguments():
    with Memory.open(":memory:", embedder="hash", llm="offline") as mem:
        refused = anyio.run(_mcp_refusals, mem)
        assert mem.memories() == [] and mem.store.turns() == [], "nothing refused reached the store"
    assert all(error for error, _ in refused), refused
    app = create_app({KEY: "acme"}, ServerConfig(embedder="hash"))
    with running(app) as url, httpx.Client(base_url=url, headers=_auth(), timeout=30) as c:
        for route, _, args in REFUSED:
            res = c.post(route, content=json.dumps(args).encode(), headers={"Content-Type": "application/json"})
            assert res.status_code == 422, (route, args, res.text)


# ----------------------------------------------------------------- 3. readers behind busy writers
def _mixed_load(url: str, seconds: float, writers: int = 3, readers: int = 3) -> dict[str, list]:
    """Run `writers` adding and `readers` recalling on one tenant for `seconds`; return their latencies and codes."""

    out: dict[str, list] = {"read_s": [], "write_s": [], "codes": []}
    deadline = time.monotonic() + seconds

    def loop(t: int, write: bool) -> None:
        with httpx.Client(base_url=url, headers=_auth(), timeout=120) as c:
            k = 0
            while time.monotonic() < deadline:
                start = time.perf_counter()
                if write:
                    res = c.post("/v1/memories", json={"text": f"Crate {t}-{k} holds amber", "user": "ops",
                                                       "subject": f"crate-{t}-{k}", "attribute": "contents",
                                                       "value": "amber"})
                else:
                    res = c.post("/v1/recall", json={"query": f"what does crate {t}-{k} hold", "user": "ops"})
                out["write_s" if write else "read_s"].append(time.perf_counter() - start)
                out["codes"].append(res.status_code)
                k += 1

    threads = [threading.Thread(target=loop, args=(t, t < writers)) for t in range(writers + readers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return out


def test_readers_make_progress_under_three_sustained_writers_on_one_tenant(tmp_path):
    """Three writers and three readers on one tenant: before the fix the readers ran only when the writers stopped."""

    seconds = 8.0
    app = create_app({KEY: "acme"}, ServerConfig(store_dir=str(tmp_path), embedder="hash", quota_calls=10**9))
    with running(app) as url:
        with httpx.Client(base_url=url, headers=_auth(), timeout=60) as c:
            assert c.post("/v1/memories", json={"text": "Warm-up note", "user": "ops"}).status_code == 200
            assert c.post("/v1/recall", json={"query": "warm-up", "user": "ops"}).status_code == 200
        out = _mixed_load(url, seconds)
    assert set(out["codes"]) == {200}, sorted(set(out["codes"]))
    reads, writes = np.asarray(out["read_s"]), np.asarray(out["write_s"])
    p95 = float(np.percentile(reads, 95))
    print(f"\nreader p95 under 3 writers: {p95 * 1000:.0f} ms over {len(reads)} recalls "
          f"(writes: {len(writes)}, p95 {np.percentile(writes, 95) * 1000:.0f} ms)")
    # Generous bounds (a shared 2-core CI box): the point is that readers are served while writers keep writing.
    assert len(reads) >= 20, f"readers completed {len(reads)} recalls in {seconds:g} s"
    assert p95 < 2.0 and reads.max() < seconds / 2, (p95, reads.max())


def test_the_tenant_lock_lets_callers_in_by_order_of_arrival():
    """Behind a writer: reader r1, writer w2, reader r3 arrive in that order; r1 runs before w2, r3 after it."""


    lock, order = RWLock(), []

    def caller(name: str, write: bool) -> None:
        with lock.write() if write else lock.read():
            order.append(f"{name} in")
            time.sleep(0.05)
            order.append(f"{name} out")

    with lock.write():
        threads = []
        for name, write in (("r1", False), ("w2", True), ("r3", False)):
            threads.append(threading.Thread(target=caller, args=(name, write)))
            threads[-1].start()
            time.sleep(0.05)  # each is in line before the next arrives
    for th in threads:
        th.join(10)
    assert order == ["r1 in", "r1 out", "w2 in", "w2 out", "r3 in", "r3 out"], order


# ----------------------------------------------------------------- 4. a forged export
SIGNING_KEY = "operator-export-key-0123456789abcdef"


def _exported(tmp_path: Path, key: str | None = None) -> Path:
    """Export a small store (a supersession, an event, a link) to a file, signed with `key` if given."""
    with Memory.open(tmp_path / "src.duckdb", embedder="hash:16") as mem:
        mem.add("Lead time for AX-7 is 14 days", user="ops", subject="AX-7", attribute="lead_time", value="14 days")
        mem.add("Lead time for AX-7 is 21 days", user="ops", subject="AX-7", attribute="lead_time", value="21 days")
        mem.add("The vault code is 9931", user="ops", meta={"src": "erp"})
        return mem.export(tmp_path / ("signed.jsonl" if key else "plain.jsonl"), key=key)


def _forge(path: Path, out: Path, change) -> Path:
    """Apply `change` to the first memory line, then recompute the trailer's counts and sha256 as a forger would."""

    lines = path.read_bytes().splitlines(keepends=True)
    body, trailer = lines[:-1], json.loads(lines[-1])
    for k, raw in enumerate(body):
        obj = json.loads(raw)
        if obj.get("type") == "memory":
            change(obj, base64)
            body[k] = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            break
    trailer["sha256"] = hashlib.sha256(b"".join(body)).hexdigest()
    out.write_bytes(b"".join(body) + (json.dumps(trailer, separators=(",", ":")) + "\n").encode())
    return out


FORGERIES = {
    "text": lambda o, b64: o.update(text="The vault code is 0000"),
    "user": lambda o, b64: o.update(user="mallory"),
    "status": lambda o, b64: o.update(status="weird-status"),
    "kind": lambda o, b64: o.update(kind="bogus-kind"),
    "importance": lambda o, b64: o.update(importance=1e308),
    "NaN vector": lambda o, b64: o.update(embedding=b64.b64encode(
        np.full(16, float("nan"), "<f4").tobytes()).decode()),
    "user name": lambda o, b64: o.update(user="a\x00b"),
    "meta": lambda o, b64: o.update(meta={"k": float("inf")}),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_export_is_refused_when_signed_and_a_bad_value_always(tmp_path, forgery):
    signed = _forge(_exported(tmp_path, SIGNING_KEY), tmp_path / "forged-signed.jsonl", FORGERIES[forgery])
    with pytest.raises(InvalidInput):
        Memory.import_(signed, tmp_path / "a.duckdb", key=SIGNING_KEY)
    if forgery not in ("text", "user"):
        # A value no store could hold is refused whether or not the file is signed, with or without a key.
        plain = _forge(_exported(tmp_path), tmp_path / "forged-plain.jsonl", FORGERIES[forgery])
        with pytest.raises(InvalidInput):
            Memory.import_(plain, tmp_path / "b.duckdb")
    for name in ("a.duckdb", "b.duckdb"):
        if (tmp_path / name).exists():
            with Memory.open(tmp_path / name) as mem:
                assert mem.memories(include_inactive=True) == [], "nothing of a refused file was imported"


def test_a_signed_export_imports_with_its_key_only_and_a_required_signature_is_required(tmp_path):
    signed, plain = _exported(tmp_path, SIGNING_KEY), _exported(tmp_path)
    assert "hmac_sha256" in json.loads(signed.read_text().splitlines()[-1])
    with Memory.import_(signed, tmp_path / "ok.duckdb", key=SIGNING_KEY) as mem:
        assert len(mem.memories(include_inactive=True)) == 3
    with pytest.raises(InvalidInput, match="signature"):
        Memory.import_(signed, ":memory:", key="another-key-0123456789abcdef")
    with pytest.raises(InvalidInput, match="not signed"):
        Memory.import_(plain, ":memory:", key=SIGNING_KEY)
    # One changed byte anywhere (here inside a vector's base64) and the signature no longer matches.
    raw = bytearray(signed.read_bytes())
    at = raw.index(b'"embedding":"') + 20
    raw[at] = ord("A") if raw[at] != ord("A") else ord("B")
    (tmp_path / "flipped.jsonl").write_bytes(bytes(raw))
    with pytest.raises(InvalidInput):
        Memory.import_(tmp_path / "flipped.jsonl", ":memory:", key=SIGNING_KEY)


def test_the_cli_signs_with_the_operators_key_and_refuses_an_unsigned_file_when_the_key_is_set(tmp_path, monkeypatch):

    store = str(tmp_path / "src.duckdb")
    with Memory.open(store, embedder="hash:16") as mem:
        mem.add("The vault code is 9931", user="ops")
    run = CliRunner()
    assert run.invoke(cli, ["export", str(tmp_path / "plain.jsonl"), "--store", store]).exit_code == 0
    monkeypatch.setenv("MNEMO_EXPORT_KEY", SIGNING_KEY)
    res = run.invoke(cli, ["export", str(tmp_path / "signed.jsonl"), "--store", store])
    assert res.exit_code == 0 and "signed" in res.output, res.output
    ok = run.invoke(cli, ["import", str(tmp_path / "signed.jsonl"), "--store", str(tmp_path / "a.duckdb")])
    assert ok.exit_code == 0, ok.output
    refused = run.invoke(cli, ["import", str(tmp_path / "plain.jsonl"), "--store", str(tmp_path / "b.duckdb")])
    assert refused.exit_code != 0 and isinstance(refused.exception, InvalidInput), refused.output


# ----------------------------------------------------------------- 6. one server per store folder
def _serve(store_dir: Path, port: int) -> subprocess.Popen:

    cmd = [sys.executable, "-m", "mnemo.cli", "serve", "http", "--store-dir", str(store_dir), "--embedder", "hash",
           "--port", str(port), "--log-level", "warning"]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MNEMO_API_KEYS": f"{KEY}:acme"})


def _free_port() -> int:

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str, proc, timeout_s: float = 90.0) -> None:

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited {proc.returncode}: {proc.stderr.read()}"
        try:
            if httpx.get(f"{url}/readyz", timeout=10).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(url)


@pytest.mark.slow
def test_a_second_server_on_the_same_store_folder_refuses_to_start_and_a_dead_ones_lock_is_stale(tmp_path):


    port = _free_port()
    first = _serve(tmp_path, port)
    try:
        _ready(f"http://127.0.0.1:{port}", first)
        second = _serve(tmp_path, _free_port())
        try:
            code = second.wait(60)
            err = " ".join(second.stderr.read().split())
        finally:
            stop_process(second)
        assert code == 2 and f"pid {first.pid}" in err and "another mnemo server" in err, (code, err)
        # The first still owns its tenants: nothing was opened behind its back.
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=_auth(), timeout=30) as c:
            assert c.post("/v1/memories", json={"text": "Still mine", "user": "u"}).status_code == 200
            assert c.get("/v1/memories").status_code == 200
        # Killed without a chance to clean up: the lock it held is released with it, and a new server starts.
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        port = _free_port()
        third = _serve(tmp_path, port)
        try:
            _ready(f"http://127.0.0.1:{port}", third)
            listed = httpx.get(f"http://127.0.0.1:{port}/v1/memories", headers=_auth(), timeout=30).json()
            assert [m["text"] for m in listed["memories"]] == ["Still mine"]
        finally:
            stop_process(third)
    finally:
        stop_process(first)


def test_a_writer_refused_because_another_process_reads_the_file_is_told_so(tmp_path):


    path = tmp_path / "m.duckdb"
    with Memory.open(path, embedder="hash:16") as mem:
        mem.add("Lead time for AX-7 is 14 days", user="ops")
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r})\n"
            "from mnemo import Memory\n"
            f"mem = Memory.open({str(path)!r}, read_only=True)\n"
            "print('open', flush=True); time.sleep(60)\n")
    reader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "open"
        with pytest.raises(StoreLocked) as refused:
            Memory.open(path)
        message = str(refused.value)
        assert "read-only" in message and f"pid {reader.pid}" in message.lower(), message
        assert "open for writing" not in message, message
        # Readers share the file: another read-only open is fine.
        with Memory.open(path, read_only=True) as again:
            assert len(again.memories()) == 1
    finally:
        reader.kill()
        reader.wait()


# ----------------------------------------------------------------- 5. an interrupted batch
CONVERSATION = ["I live in Berlin.", "My sister is called Anna.", "I work as a nurse at the city hospital.",
                "She lives in Hamburg.", "Actually I moved to Lisbon last month.", "My favourite food is ramen.",
                "I have a dog named Rex.", "He is three years old."]


def _kill_mid_batch(location: str, kill_at: int) -> int:
    """Run remember_many of CONVERSATION in a child process that SIGKILLs itself at its `kill_at`-th extraction."""

    code = f"""
import os, signal, sys
from datetime import datetime, timedelta, timezone
sys.path.insert(0, {str(ROOT)!r})
from mnemo import Memory
t0 = datetime(2025, 3, 1, 9, tzinfo=timezone.utc)
mem = Memory.open({location!r}, embedder="hash:64")
real, calls = mem.extractor, []
class Dying:  # the memory's extractor, killed at its kill_at-th turn
    offline = real.offline
    def __call__(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == {kill_at}:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
mem.extractor = Dying()
mem.remember_many([{{"text": t, "at": t0 + timedelta(minutes=k)}} for k, t in enumerate({CONVERSATION!r})],
                  user="alice", session="s1")
print("not killed")
"""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300).returncode


def _memories(mem: Memory) -> list[tuple[str, str]]:
    return sorted((m.text, m.status) for m in mem.memories(include_inactive=True))


def test_turns_of_a_batch_killed_mid_write_are_processed_once_at_the_next_open(backend):

    reference = backend.location("reference")
    t0 = datetime(2025, 3, 1, 9, tzinfo=timezone.utc)
    with Memory.open(reference, embedder="hash:64") as mem:
        mem.remember_many([{"text": t, "at": t0 + timedelta(minutes=k)} for k, t in enumerate(CONVERSATION)],
                          user="alice", session="s1")
        expected = _memories(mem)
    assert len(expected) >= 6
    killed = backend.location("killed")
    assert _kill_mid_batch(killed, kill_at=5) == -9
    with Memory.open(killed, recover=False) as mem:
        assert len(mem.store.turns()) == len(CONVERSATION) and mem.memories(include_inactive=True) == []
        assert len(mem.store.pending_turns()) == len(CONVERSATION)
    # The next open processes them, as the uninterrupted batch did, and records the outcome of each.
    with Memory.open(killed) as mem:
        assert _memories(mem) == expected
        assert mem.store.pending_turns() == []
        outcomes = [[o.outcome for o in mem.store.turn_outcomes(t.id)] for t in mem.store.turns()]
        assert outcomes == [["written", "recovered"]] * len(CONVERSATION), outcomes
    # Once: a second open finds nothing to do and changes nothing.
    with Memory.open(killed) as mem:
        assert mem.repair().summary() == "0 recovered, 0 skipped, 0 failed, 0 left pending"
        assert _memories(mem) == expected


def test_every_write_records_its_turns_outcome_and_an_unfinished_add_is_skipped_not_replayed(backend):

    location = backend.location("m")
    with Memory.open(location, embedder="hash:64") as mem:
        mem.remember("I live in Berlin.", user="alice")
        mem.add("Lead time for AX-7 is 14 days", user="ops")
        mem.remember_many(["My sister is called Anna.", "She lives in Hamburg."], user="alice")
        assert mem.store.pending_turns() == []
        # An add() whose process died after its turn was recorded: its caller never heard back.
        mem.store.insert_turn(Turn("t-unfinished", "ops", "Lead time for AX-9 is 30 days", mem.clock.now(), role="api"))
    with Memory.open(location) as mem:
        [outcome] = mem.store.turn_outcomes("t-unfinished")
        assert outcome.outcome == "skipped" and "never acknowledged" in outcome.detail
        assert not any("AX-9" in m.text for m in mem.memories())


def test_a_single_turn_whose_reading_raises_is_still_recorded_and_processed_at_the_next_open(backend, monkeypatch):
    """`remember` records its turn in the transaction of its memories; when reading it raises, alone."""
    class Dead:  # an extractor whose parser dies
        offline = True

        def __call__(self, *a, **k):
            raise RuntimeError("parser died")

    location = backend.location("raises")
    with Memory.open(location, embedder="hash:64") as mem:
        real = mem.extractor
        mem.extractor = Dead()
        with pytest.raises(RuntimeError, match="parser died"):
            mem.remember("I live in Berlin.", user="alice")
        mem.extractor = real
        [turn] = mem.store.turns()
        assert turn.text == "I live in Berlin." and mem.store.pending_turns() == [turn]
        assert mem.memories(include_inactive=True) == []
    with Memory.open(location) as mem:
        assert ["Berlin" in m.text for m in mem.memories()] == [True]
        assert [o.outcome for o in mem.store.turn_outcomes(turn.id)] == ["written", "recovered"]


def test_a_store_from_before_turn_outcomes_is_migrated_without_replaying_its_turns(backend):
    location = backend.location("old")
    with Memory.open(location, embedder="hash:64") as mem:
        mem.remember("I live in Berlin.", user="alice")
        before = _memories(mem)
        # As a schema-3 store was: no outcomes table.
        with mem.store.transaction():
            mem.store._run("DROP TABLE turn_outcomes")
            mem.store._run("UPDATE store_meta SET value = '3' WHERE key = 'schema_version'")
    with Memory.open(location) as mem:
        assert mem.store.schema_version == SCHEMA_VERSION and mem.store.pending_turns() == []
        [turn] = mem.store.turns()
        assert [o.outcome for o in mem.store.turn_outcomes(turn.id)] == ["migrated"]
        assert _memories(mem) == before


def test_a_store_from_before_searched_context_is_migrated_and_searches_it(backend):
    location = backend.location("old4")
    line = "Caroline: This necklace is from my grandma. It stands for love, faith and strength."
    with Memory.open(location, embedder="hash:64") as mem:
        mem.remember_many([line], user="c")
        # As a schema-4 store was: PostgreSQL's tsv generated from the text alone.
        with mem.store.transaction():
            if backend.name == "postgres":
                for sql in ("DROP INDEX memories_tsv", "ALTER TABLE memories DROP COLUMN tsv",
                            "ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
                            "(to_tsvector('english'::regconfig, text)) STORED",
                            "CREATE INDEX memories_tsv ON memories USING gin (tsv)"):
                    mem.store._run(sql)
            mem.store._run("UPDATE store_meta SET value = '4' WHERE key = 'schema_version'")
    with Memory.open(location) as mem:
        assert mem.store.schema_version == SCHEMA_VERSION
        found = [mem.get(i).text for i, _ in mem.store.search_lexical("necklace", 10, user="c")]
        assert "Caroline: It stands for love, faith and strength." in found


def test_the_mixed_load_benchmark_runs_on_one_tenant_and_across_tenants_and_loses_nothing():
    import importlib.util

    spec = importlib.util.spec_from_file_location("load_http", ROOT / "benchmarks" / "load_http.py")
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    keys = {KEY: "acme", "faults-key-globex-0123456789": "globex"}
    with running(create_app(keys, ServerConfig(embedder="hash", quota_calls=10**9))) as url:
        for tenants in ([KEY], list(keys)):
            result = load.mixed(url, tenants, writers=2, readers=2, seconds=2.0)
            assert result["5xx"] == result["errors"] == result["lost_writes"] == 0, result
            assert result["writes"] > 0 and result["reads"] > 0 and result["tenants"] == len(tenants)
    assert "| engine | layout |" in load.table([{"engine": "duckdb", "layout": "one tenant", **result}])
