"""Recall latency, before and after a change: `Memory.recall` p50 / p95 at N memories, side by side.

    .venv/bin/python benchmarks/bench_recall.py --sizes 10000,100000 --out benchmarks/results/recall.json
    .venv/bin/python benchmarks/bench_recall.py --before ../wt-before --out ...   # and another checkout
    .venv/bin/python benchmarks/bench_recall.py --table benchmarks/results/recall.json
    .venv/bin/python benchmarks/bench_recall.py --profile 10000   # cProfile of this checkout's recalls

The store: one user's N memories in an in-memory DuckDB store, bulk-added (`insert_many`) with the
hash embedder. Texts are the shared LoCoMo turns when MNEMO_DATA_DIR holds them (else the
project's scenario turns); past the number of real turns, each further memory joins two of them
("a b"), so BM25 and the vectors see real words. Queries: the first `--queries` LoCoMo questions
(their mix of questions naming a date, which recall's time scope retrieves twice, is recorded).
Each side (this checkout, and with `--before` another) runs in its own subprocess on the same
texts and queries, one after the other; every query is timed once after one warm-up query. The
query embedding is inside the timing, as a caller pays it. Beside each recall, in the same
process, the numpy floor is timed: the same query embedded, then brute-force top-10 over one
float32 matrix of the store's vectors (`vs floor` is recall p50 / floor p50, per side). Figures
are milliseconds; the table's ratio is after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def texts_and_queries(n_queries: int) -> tuple[list[str], list[str]]:
    """Return (turn texts, questions): LoCoMo's shared conversations if present, else the project's scenarios."""
    from bench_write import turns  # the same turns the write benchmark plays

    data = os.environ.get("MNEMO_DATA_DIR")
    path = Path(data) / "locomo" / "locomo10_shared_8conv.json" if data else None
    if path is not None and path.exists():
        questions = [q["question"] for conv in json.loads(path.read_text()) for q in conv["qa"]]
    else:
        import yaml

        questions = [p["question"] for f in sorted((ROOT / "data" / "scenarios").glob("*.yaml"))
                     for p in yaml.safe_load(f.read_text()).get("probes", []) if p.get("question")]
    return turns(10**9), questions[:n_queries]


def run_side(n: int, n_queries: int, session_size: int = 0, separate: bool = False) -> dict:
    """Time recall on a store of `n` memories in this process (the checkout on sys.path).

    With `separate`, every recall is timed first and the floors after, so neither runs while the
    other's BLAS helper threads still spin (numpy's OpenBLAS keeps them busy a while after a product).

    With `session_size`, the memories are added as sessions of that many turns between two
    speakers (`insert_many(session=, metas=)`: chained by `follows` links, as transcripts are), when
    the checkout's bulk insert takes a session; otherwise in one call. (A checkout from before
    `insert_many` has `add_many`, the same call returning ids.)
    """
    import inspect
    import random
    import uuid
    from types import SimpleNamespace

    import numpy as np

    import mnemo
    import mnemo.model
    from mnemo.clock import SimulatedClock
    from mnemo.extract.questions import ask

    try:
        from mnemo.recall.evidence import spans
    except ImportError:  # a checkout from before the time scope
        spans = None

    try:  # the floor is timed twice: as numpy runs by default, and with its BLAS held to one thread
        from threadpoolctl import ThreadpoolController
        one_thread = ThreadpoolController()
    except ImportError:
        one_thread = None
    turns, questions = texts_and_queries(n_queries)
    texts = [turns[i] if i < len(turns) else f"{turns[i % len(turns)]} {turns[(i * 7 + 3) % len(turns)]}"
             for i in range(n)]
    # Deterministic ids and time, so both sides (and two runs) pack the same memories when recall ranks alike.
    rng = random.Random(0)
    mnemo.model.uuid = SimpleNamespace(uuid4=lambda: uuid.UUID(int=rng.getrandbits(128)))
    mem = mnemo.Memory.open(":memory:", embedder="hash", clock=SimulatedClock("2025-06-01"))
    insert = getattr(mem, "insert_many", None) or mem.add_many
    chained = bool(session_size) and "session" in inspect.signature(insert).parameters
    t0 = time.perf_counter()
    if chained:
        for k in range(0, n, session_size):
            metas = [{"speaker": "Ann" if j % 2 else "Bo", "addressees": ["Bo" if j % 2 else "Ann"]}
                     for j in range(len(texts[k:k + session_size]))]
            insert(texts[k:k + session_size], user="u", session=f"s{k // session_size}", metas=metas)
    else:
        insert(texts, user="u")
    build_s = time.perf_counter() - t0
    mem.recall(questions[0], user="u")
    stored = mem.store.con.execute("SELECT embedding FROM memories").to_arrow_table().column(0).combine_chunks()
    matrix = np.array(stored.flatten(), dtype=np.float32).reshape(n, -1)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    times, floor, floor1, packed = [], [], [], []

    def time_floor(q: str) -> None:
        t0 = time.perf_counter()
        scores = matrix @ mem.embedder.embed([q])[0]
        np.argpartition(-scores, 9)[:10]
        floor.append(time.perf_counter() - t0)
        if one_thread is not None:  # the same floor with numpy's BLAS held to one thread
            t0 = time.perf_counter()
            with one_thread.limit(limits=1, user_api="blas"):
                scores = matrix @ mem.embedder.embed([q])[0]
                np.argpartition(-scores, 9)[:10]
            floor1.append(time.perf_counter() - t0)

    for q in questions:
        t0 = time.perf_counter()
        out = mem.recall(q, user="u")
        times.append(time.perf_counter() - t0)
        packed.append(_digest([out.confidence, *(p.memory.text for p in out.memories)]))
        if not separate:
            time_floor(q)
    for q in questions if separate else ():
        time_floor(q)
    now = mem.clock.now()
    dated = sum(bool(spans(ask(q), now)) for q in questions) if spans else None
    mem.close()
    ms, fl = np.asarray(times) * 1000, np.asarray(floor) * 1000
    out = {"n": n, "queries": len(questions), "queries_naming_a_time": dated, "sessions_chained": chained,
           "floor_timed": "after all recalls" if separate else "beside each recall",
           "build_s": round(build_s, 2),
           "p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2),
           "floor_p50_ms": round(float(np.percentile(fl, 50)), 3),
           "vs_floor": round(float(np.percentile(ms, 50) / np.percentile(fl, 50)), 2), "packed": packed}
    if floor1:
        fl1 = np.asarray(floor1) * 1000
        out["floor_1thread_p50_ms"] = round(float(np.percentile(fl1, 50)), 3)
        out["vs_floor_1thread"] = round(float(np.percentile(ms, 50) / np.percentile(fl1, 50)), 2)
    return out


def profile_side(n: int, n_queries: int, top: int = 35) -> str:
    """Return cProfile's top functions over the `n_queries` recalls of `run_side`'s store of `n` memories.

    The question is read on a worker thread (`recall.candidates.ask_soon`), which cProfile does
    not see: the wait for it shows where the main thread blocks (the dense search or `result`).
    """
    import cProfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from profiling import report

    import mnemo

    turns, questions = texts_and_queries(n_queries)
    texts = [turns[i] if i < len(turns) else f"{turns[i % len(turns)]} {turns[(i * 7 + 3) % len(turns)]}"
             for i in range(n)]
    mem = mnemo.Memory.open(":memory:", embedder="hash")
    mem.insert_many(texts, user="u")
    mem.recall(questions[0], user="u")
    prof, times = cProfile.Profile(), []
    for q in questions:
        t0 = time.perf_counter()
        prof.enable()
        mem.recall(q, user="u")
        prof.disable()
        times.append(time.perf_counter() - t0)
    mem.close()
    times.sort()
    return f"n={n:,}: {len(questions)} recalls, p50 {times[len(times) // 2] * 1000:.2f} ms under cProfile\n" + report(prof, top)


def _digest(parts: list[str]) -> str:
    """Return a short digest of one recall's confidence and packed texts in order.

    Texts, not ids: each side's store mints its own random ids for the same texts. Equal digests
    on both sides mean the same memories in the same order with the same confidence."""
    import hashlib

    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def side(checkout: Path, sizes: list[int], n_queries: int, session_size: int = 0,
         separate: bool = False) -> list[dict]:
    """Run every size in a subprocess importing mnemo from `checkout`."""
    out = []
    for n in sizes:
        env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
        code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import bench_recall as b; "
                f"print(json.dumps(b.run_side({n}, {n_queries}, {session_size}, {separate})))")
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=checkout)
        if res.returncode != 0:
            raise SystemExit(f"{checkout} at {n}: {res.stderr[-2000:]}")
        # The result is the last `{"n": ...}` printed: DuckDB's progress bar (a 1M build) may share its line.
        out.append(json.loads(res.stdout[res.stdout.rindex('{"n": '):].splitlines()[0]))
        shown = {k: v for k, v in out[-1].items() if k != "packed"}
        print(f"{checkout.name or checkout} n={n}: {shown}", file=sys.stderr)
    return out


def commit(checkout: Path) -> str:
    res = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    return res.stdout.strip() or "?"


def table(report: dict) -> str:
    rows = ["| memories | before p50 | now p50 | ratio | before p95 | now p95 | before vs floor | now vs floor "
            "| before / now vs 1-thread floor | same packs |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    before = {r["n"]: r for r in report.get("before", [])}
    for r in report["now"]:
        b = before.get(r["n"])
        ratio = f"{r['p50_ms'] / b['p50_ms']:.2f}x" if b else "-"
        same = "-"
        if b and "packed" in b and "packed" in r:
            same = f"{sum(x == y for x, y in zip(b['packed'], r['packed'], strict=True))}/{len(r['packed'])}"
        one = f"{b.get('vs_floor_1thread', '-') if b else '-'}x / {r.get('vs_floor_1thread', '-')}x"
        rows.append(f"| {r['n']:,} | {b['p50_ms'] if b else '-'} ms | {r['p50_ms']} ms | {ratio} | "
                    f"{b['p95_ms'] if b else '-'} ms | {r['p95_ms']} ms | {b.get('vs_floor', '-') if b else '-'}x | "
                    f"{r.get('vs_floor', '-')}x | {one} | {same} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="another mnemo checkout to measure side by side")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--session-size", type=int, default=0,
                    help="add memories as chained two-speaker sessions of this many turns (0: one bulk add)")
    ap.add_argument("--separate", action="store_true",
                    help="time every recall first and the floors after (not interleaved, see run_side)")
    ap.add_argument("--profile", type=int, metavar="N", help="print cProfile of the recalls at N memories and exit")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print the table of a saved report and exit")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    if args.profile:
        print(profile_side(args.profile, args.queries))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    report = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "load_before": os.getloadavg()[0]},
              "now_commit": commit(ROOT), "now": side(ROOT, sizes, args.queries, args.session_size, args.separate)}
    if args.before:
        report["before_commit"] = commit(args.before)
        report["before"] = side(args.before.resolve(), sizes, args.queries, args.session_size, args.separate)
    report["machine"]["load_after"] = os.getloadavg()[0]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))
    print(table(report))


if __name__ == "__main__":
    main()
