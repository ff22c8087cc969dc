"""Bounded load run of the HTTP service on loopback: sustained recalls and writes, then no lost writes.

    python benchmarks/load_http.py --seconds 10 --threads 8            # starts its own server on 127.0.0.1
    python benchmarks/load_http.py --url http://127.0.0.1:8080 --key KEY --seconds 10
    python benchmarks/load_http.py --store-dir postgresql://mnemo@127.0.0.1:5432/db --replicas 2
    python benchmarks/load_http.py --store-dir postgresql://mnemo@127.0.0.1:5432/db --compare 2   # 1 vs 2 replicas

K client threads each loop for N seconds, choosing a write (POST /v1/memories with
a distinct fact) or a recall (POST /v1/recall) at random; every request is timed.
Each server first gets one untimed write and recall (its first requests load what it
caches). Afterwards every write the server acknowledged (200 with a memory id) is read
back with GET /v1/memories/{id}: a missing one, or one with other text, is a lost write.
Prints throughput, p50/p95/p99 latency per operation and the lost-write count as
JSON. Without --url the script starts `mnemo serve http` in a child process (its
own GIL, tenant store in a temporary directory); the test suite calls `run()`
against a server in its own process instead. Traffic goes to the loopback address
only, and the run stops by itself after N seconds.

Replicas: with a postgresql:// --store-dir, --replicas N starts N server processes over
the same database and the client threads are spread over them round-robin; every
acknowledged write is read back through another replica than the one that took it.
--compare N runs the same load against one replica and then against N, each on fresh
schemas (dropped afterwards), in this one process, and prints both and the ratios.

Mixed readers and writers (issue #33): --mix runs W writer threads (POST /v1/memories) and R
reader threads (POST /v1/recall) twice, first all on one tenant, then across tenants (tenant
i has writer i and reader i, each with its own key), on a fresh server each time, on DuckDB
(a temporary folder) and, with --pg DSN, on PostgreSQL (fresh schemas, dropped afterwards).
Each run reports throughput, read and write p50/p95, 5xx answers, other errors and writes lost
(every acknowledged write read back with its tenant's key); --out FILE saves the JSON.

    python benchmarks/load_http.py --mix --seconds 20 --writers 3 --readers 3 --pg postgresql://.../db \
        --out benchmarks/results/load_mixed.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext

import httpx
import numpy as np

WORDS = ("amber basalt cedar delta ember fjord garnet harbor indigo juniper kelp lumen mortar nickel onyx "
         "pewter quartz russet sienna topaz umber velvet walnut xenon yarrow zinc").split()


def _fact(rng: random.Random, thread: int, k: int) -> dict:
    """Return a distinct structured fact, so reconciliation adds it rather than merging it with another."""
    words = " ".join(rng.sample(WORDS, 4))
    return {"text": f"Crate {thread}-{k} holds {words}", "user": f"load-{thread % 2}", "subject": f"crate-{thread}-{k}",
            "attribute": "contents", "value": words, "kind": "semantic", "category": "fact"}


def _client(base_url: str, key: str, thread: int, deadline: float, write_share: float, out: dict) -> None:
    rng = random.Random(thread)
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        k = 0
        while time.monotonic() < deadline:
            write = rng.random() < write_share
            start = time.perf_counter()
            try:
                if write:
                    res = c.post("/v1/memories", json=_fact(rng, thread, k))
                    k += 1
                else:
                    res = c.post("/v1/recall", json={"query": f"what does crate {thread}-{rng.randrange(k + 1)} hold",
                                                     "user": f"load-{thread % 2}", "budget_tokens": 128})
            except httpx.HTTPError as exc:
                out["errors"].append(f"{type(exc).__name__}: {exc}")
                continue
            elapsed = time.perf_counter() - start
            if res.status_code != 200:
                out["errors"].append(f"{res.status_code}: {res.text[:200]}")
                continue
            out["write_s" if write else "recall_s"].append(elapsed)
            if write:
                body = res.json()
                out["acked"].append((body["id"], body["text"], thread))


def _warm_up(urls: list[str], key: str) -> None:
    """Send each replica a write and a recall first: a process's first requests load what it caches, untimed."""
    for url in urls:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
            c.post("/v1/memories", json={"text": "Warm-up note", "user": "warm-up"}).raise_for_status()
            c.post("/v1/recall", json={"query": "warm-up note", "user": "warm-up"}).raise_for_status()


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0}
    p50, p95, p99 = np.percentile(np.asarray(values) * 1000, [50, 95, 99])
    return {"p50_ms": round(float(p50), 1), "p95_ms": round(float(p95), 1), "p99_ms": round(float(p99), 1)}


def run(base_url: str | Sequence[str], key: str, *, seconds: float = 10.0, threads: int = 8,
        write_share: float = 0.3) -> dict:
    """Run the load for `seconds` with `threads` clients, then read back every acknowledged write; return figures.

    `base_url` may be several replicas of one service: thread t talks to replica t mod N, and
    each acknowledged write is read back through the next replica.
    """
    urls = [base_url] if isinstance(base_url, str) else list(base_url)
    out: dict = {"errors": [], "write_s": [], "recall_s": [], "acked": []}
    _warm_up(urls, key)
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    # list.append is atomic under the GIL, so the threads share `out` without a lock.
    workers = [threading.Thread(target=_client, args=(urls[t % len(urls)], key, t, deadline, write_share, out))
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.monotonic() - started
    lost = []
    readers = [httpx.Client(base_url=u, headers={"Authorization": f"Bearer {key}"}, timeout=60) for u in urls]
    try:
        for mid, text, thread in out["acked"]:
            res = readers[(thread + 1) % len(urls)].get(f"/v1/memories/{mid}")
            if res.status_code != 200 or res.json()["text"] != text:
                lost.append(mid)
    finally:
        for c in readers:
            c.close()
    done = len(out["write_s"]) + len(out["recall_s"])
    return {
        "replicas": len(urls), "seconds": round(wall, 2), "threads": threads, "requests": done,
        "throughput_rps": round(done / wall, 1), "writes": len(out["write_s"]), "recalls": len(out["recall_s"]),
        "write": _percentiles(out["write_s"]), "recall": _percentiles(out["recall_s"]),
        "all": _percentiles(out["write_s"] + out["recall_s"]),
        "errors": len(out["errors"]), "error_samples": out["errors"][:5],
        "acknowledged_writes": len(out["acked"]), "lost_writes": len(lost),
    }


@contextmanager
def _servers(key: str | dict[str, str], store_dir: str, replicas: int = 1) -> Iterator[list[str]]:
    """Run `replicas` `mnemo serve http` processes over `store_dir` on free loopback ports; yield their URLs.

    `key` is one API key (tenant "load") or {key: tenant}.
    """
    keys = {key: "load"} if isinstance(key, str) else key
    procs, urls = [], []
    try:
        for _ in range(replicas):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            cmd = [sys.executable, "-c", "from mnemo.cli import main; main()", "serve", "http", "--store-dir",
                   store_dir, "--embedder", "hash", "--port", str(port), "--quota-calls", str(10**9), "--log-level",
                   "warning"]
            api_keys = ",".join(f"{k}:{t}" for k, t in keys.items())
            procs.append(subprocess.Popen(cmd, env={**os.environ, "MNEMO_API_KEYS": api_keys}))
            urls.append(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 90
        for url, proc in zip(urls, procs, strict=True):
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=30).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server on {url} did not become ready")
                time.sleep(0.2)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


@contextmanager
def _fresh_schemas(dsn: str) -> Iterator[str]:
    """Yield `dsn` with a new schema prefix; drop every schema under it afterwards (tenants' and quotas')."""
    import psycopg

    if "schema=" in dsn:
        raise SystemExit("--compare makes its own schemas: give the DSN without ?schema=")
    prefix = f"load{secrets.token_hex(4)}"
    try:
        yield f"{dsn}{'&' if '?' in dsn else '?'}schema={prefix}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as con:
            for (schema,) in con.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                                         [f"{prefix}\\_%"]).fetchall():
                con.execute(f'DROP SCHEMA "{schema}" CASCADE')


def compare(dsn: str, replicas: int, **load: float) -> dict:
    """Run the same load against one replica, then against `replicas`, each on fresh schemas; return both and ratios."""
    key = secrets.token_urlsafe(24)
    runs = []
    for n in (1, replicas):
        with _fresh_schemas(dsn) as store_dir, _servers(key, store_dir, n) as urls:
            runs.append(run(urls, key, **load))
    one, many = runs
    ratio = {"throughput": round(many["throughput_rps"] / max(one["throughput_rps"], 1e-9), 2),
             "write_p50": round(many["write"]["p50_ms"] / max(one["write"]["p50_ms"], 1e-9), 2),
             "recall_p50": round(many["recall"]["p50_ms"] / max(one["recall"]["p50_ms"], 1e-9), 2)}
    return {"one": one, "many": many, f"ratio_{replicas}_over_1": ratio, "cpus": os.cpu_count(),
            "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def _mixed_client(url: str, key: str, name: str, write: bool, deadline: float, out: dict) -> None:
    """Loop writes (distinct facts) or recalls on one tenant until `deadline`, timing each."""
    rng = random.Random(name)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        k = 0
        while time.monotonic() < deadline:
            start = time.perf_counter()
            try:
                if write:
                    words = " ".join(rng.sample(WORDS, 3))
                    res = c.post("/v1/memories", json={"text": f"Crate {name}-{k} holds {words}", "user": "mix",
                                                       "subject": f"crate-{name}-{k}", "attribute": "contents",
                                                       "value": words})
                else:
                    res = c.post("/v1/recall", json={"query": f"what does crate {rng.randrange(k + 1)} hold",
                                                     "user": "mix", "budget_tokens": 128})
            except httpx.HTTPError as exc:
                out["errors"].append(f"{type(exc).__name__}: {exc}")
                continue
            k += 1
            elapsed = time.perf_counter() - start
            if res.status_code >= 500:
                out["5xx"].append(f"{res.status_code}: {res.text[:200]}")
            elif res.status_code != 200:
                out["errors"].append(f"{res.status_code}: {res.text[:200]}")
            else:
                out["write_s" if write else "read_s"].append(elapsed)
                if write:
                    out["acked"].append((key, res.json()["id"], res.json()["text"]))


def mixed(url: str, keys: list[str], *, writers: int, readers: int, seconds: float) -> dict:
    """Run `writers` and `readers` threads, thread i on tenant keys[i % len(keys)]; return the figures of the run."""
    out: dict = {"errors": [], "5xx": [], "write_s": [], "read_s": [], "acked": []}
    for key in keys:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
            c.post("/v1/memories", json={"text": "Warm-up note", "user": "warm-up"}).raise_for_status()
            c.post("/v1/recall", json={"query": "warm-up note", "user": "warm-up"}).raise_for_status()
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    threads = [threading.Thread(target=_mixed_client, args=(url, keys[i % len(keys)], f"w{i}", True, deadline, out))
               for i in range(writers)]
    threads += [threading.Thread(target=_mixed_client, args=(url, keys[i % len(keys)], f"r{i}", False, deadline,
                                                             out)) for i in range(readers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - started
    lost = 0
    clients = {k: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {k}"}, timeout=60) for k in keys}
    try:
        for key, mid, text in out["acked"]:
            res = clients[key].get(f"/v1/memories/{mid}")
            lost += res.status_code != 200 or res.json()["text"] != text
    finally:
        for c in clients.values():
            c.close()
    done = len(out["write_s"]) + len(out["read_s"])
    return {"tenants": len(keys), "writers": writers, "readers": readers, "seconds": round(wall, 2),
            "throughput_rps": round(done / wall, 1), "writes": len(out["write_s"]), "reads": len(out["read_s"]),
            "write": _percentiles(out["write_s"]), "read": _percentiles(out["read_s"]),
            "5xx": len(out["5xx"]), "errors": len(out["errors"]),
            "error_samples": (out["5xx"] + out["errors"])[:5], "acknowledged_writes": len(out["acked"]),
            "lost_writes": lost}


def mixed_matrix(*, writers: int, readers: int, seconds: float, pg: str | None = None) -> list[dict]:
    """Run `mixed` on one tenant and across tenants, on DuckDB and (with `pg`) PostgreSQL, each on a fresh server."""
    runs = []
    engines = [("duckdb", None)] + ([("postgres", pg)] if pg else [])
    for engine, dsn in engines:
        for layout in ("one tenant", "across tenants"):
            n = 1 if layout == "one tenant" else max(writers, readers)
            keys = {secrets.token_urlsafe(24): f"mix{i}" for i in range(n)}
            place = _fresh_schemas(dsn) if dsn else nullcontext(tempfile.mkdtemp(prefix="mnemo-mix-"))
            with place as store_dir, _servers(keys, store_dir) as urls:
                result = mixed(urls[0], list(keys), writers=writers, readers=readers, seconds=seconds)
            runs.append({"engine": engine, "layout": layout, **result})
    return runs


def table(runs: list[dict]) -> str:
    """Return the runs of `mixed_matrix` as a Markdown table."""
    head = ("| engine | layout | req/s | writes | reads | write p50 / p95 ms | read p50 / p95 ms | 5xx | errors "
            "| acked | lost |\n|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [f"| {r['engine']} | {r['layout']} | {r['throughput_rps']} | {r['writes']} | {r['reads']} | "
            f"{r['write']['p50_ms']} / {r['write']['p95_ms']} | {r['read']['p50_ms']} / {r['read']['p95_ms']} | "
            f"{r['5xx']} | {r['errors']} | {r['acknowledged_writes']} | {r['lost_writes']} |" for r in runs]
    return "\n".join([head, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an already running service (default: start one in this process)")
    parser.add_argument("--key", help="API key for --url")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the load runs")
    parser.add_argument("--threads", type=int, default=8, help="concurrent client threads")
    parser.add_argument("--write-share", type=float, default=0.3, help="share of requests that are writes")
    parser.add_argument("--store-dir", help="tenant stores here: a folder or a postgresql:// DSN "
                                            "(default: a temporary directory)")
    parser.add_argument("--replicas", type=int, default=1, help="server processes over one postgresql:// --store-dir")
    parser.add_argument("--compare", type=int, metavar="N", help="run against 1 replica, then N, on fresh schemas of "
                                                                 "the postgresql:// --store-dir; print both and ratios")
    parser.add_argument("--mix", action="store_true", help="mixed writers and readers, on one tenant and across "
                                                          "tenants, on DuckDB and (with --pg) PostgreSQL")
    parser.add_argument("--writers", type=int, default=3, help="--mix: writer threads")
    parser.add_argument("--readers", type=int, default=3, help="--mix: reader threads")
    parser.add_argument("--pg", help="--mix: a postgresql:// DSN (without ?schema=) to run on PostgreSQL too")
    parser.add_argument("--out", help="--mix: also write the JSON here")
    args = parser.parse_args(argv)
    if args.mix:
        runs = mixed_matrix(writers=args.writers, readers=args.readers, seconds=args.seconds, pg=args.pg)
        report = {"runs": runs, "cpus": os.cpu_count(), "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
        if args.out:
            with open(args.out, "w") as f:
                json.dump(report, f, indent=2)
        print(json.dumps(report, indent=2))
        print(table(runs))
        return 1 if any(r["5xx"] or r["errors"] or r["lost_writes"] for r in runs) else 0
    if args.url and not args.key:
        parser.error("--url needs --key")
    postgres = (args.store_dir or "").startswith(("postgresql://", "postgres://"))
    if (args.replicas > 1 or args.compare) and not postgres:
        parser.error("--replicas and --compare need a postgresql:// --store-dir (replicas share one database)")
    load = {"seconds": args.seconds, "threads": args.threads, "write_share": args.write_share}
    if args.compare:
        result = compare(args.store_dir, args.compare, **load)
        print(json.dumps(result, indent=2))
        failed = any(result[k]["errors"] or result[k]["lost_writes"] for k in ("one", "many"))
        return 1 if failed else 0
    if args.url:
        key, ctx = args.key, nullcontext([args.url])
    else:
        key = secrets.token_urlsafe(24)
        ctx = _servers(key, args.store_dir or tempfile.mkdtemp(prefix="mnemo-load-"), args.replicas)
    with ctx as urls:
        result = run(urls, key, **load)
    print(json.dumps(result, indent=2))
    return 1 if result["errors"] or result["lost_writes"] else 0


if __name__ == "__main__":
    sys.exit(main())
