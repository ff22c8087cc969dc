"""Store benchmark: bulk insert, open/load, top-10 similarity, against numpy and DuckDB SQL side by side.

Each size runs in its own subprocess so peak memory (ru_maxrss) belongs to that size alone.
Usage: python benchmarks/bench_store.py --sizes 10000,100000,1000000 --out benchmarks/results/store.json
       python benchmarks/bench_store.py --profile 10000     # where a recall's time goes (cProfile)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 384
QUERIES = 50


def _percentiles(xs: list[float]) -> dict[str, float]:
    arr = np.asarray(xs) * 1000
    return {"p50_ms": float(np.percentile(arr, 50)), "p95_ms": float(np.percentile(arr, 95))}


def run_size(n: int) -> dict:
    """Measure one store size; return the figures (times in ms or rows/s)."""
    from mnemo.model import MemoryRecord
    from mnemo.store import DuckDBStore, new_id

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = rng.normal(size=(QUERIES, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    path = Path(tempfile.mkdtemp()) / "bench.duckdb"
    store = DuckDBStore(path, embedder="bench", dim=DIM)
    t0 = time.perf_counter()
    batch = 50_000
    for start in range(0, n, batch):
        recs = [MemoryRecord(id=new_id(), user="u", text=f"memory number {i}", kind="episodic")
                for i in range(start, min(n, start + batch))]
        with store.transaction():
            store.insert_memories(recs, vecs[start:start + len(recs)])
    insert_s = time.perf_counter() - t0
    store.close()

    t0 = time.perf_counter()
    store = DuckDBStore(path, embedder="bench", dim=DIM, read_only=True)
    open_s = time.perf_counter() - t0

    mnemo_t, numpy_t, sql_t = [], [], []
    agree = 0
    for q in queries:
        t0 = time.perf_counter()
        hits = store.search_dense(q, 10, user="u")
        mnemo_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scores = vecs @ q
        top = np.argpartition(-scores, 9)[:10]
        top = top[np.argsort(-scores[top])]
        numpy_t.append(time.perf_counter() - t0)
        agree += int(np.allclose([h[1] for h in hits], scores[top], atol=1e-4))
    # DuckDB's own brute force, what a naive DuckDB user gets (fewer queries: it is slow).
    for q in queries[:5]:
        t0 = time.perf_counter()
        store.con.execute(
            f"SELECT id FROM memories WHERE user_id = 'u' AND status = 'active' "
            f"ORDER BY array_cosine_similarity(embedding, ?::FLOAT[{DIM}]) DESC LIMIT 10", [q.tolist()]
        ).fetchall()
        sql_t.append(time.perf_counter() - t0)
    store.close()
    mn, npy, sql = _percentiles(mnemo_t), _percentiles(numpy_t), _percentiles(sql_t)
    return {
        "n": n,
        "insert_rows_per_s": n / insert_s,
        "open_load_s": open_s,
        "mnemo_top10": mn,
        "numpy_top10": npy,
        "duckdb_sql_top10": sql,
        "ratio_mnemo_vs_numpy_p50": mn["p50_ms"] / npy["p50_ms"],
        "ratio_sql_vs_numpy_p50": sql["p50_ms"] / npy["p50_ms"],
        "same_top10_as_numpy": agree / QUERIES,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "file_mib": path.stat().st_size / 2**20,
    }


def profile_recall(n: int, queries: int = 50, top: int = 30) -> dict:
    """Profile `Memory.recall` on a file store of `n` memories (real LoCoMo texts when MNEMO_DATA_DIR has
    them, hash vectors): print cProfile's top functions and return the p50 against the numpy floor."""
    import cProfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_open import QUESTIONS, texts
    from profiling import report

    import mnemo

    path = Path(tempfile.mkdtemp()) / "profile.duckdb"
    with mnemo.Memory.open(path, embedder="hash") as mem:
        mem.insert_many(texts(n), user="u")
    mem = mnemo.Memory.open(path)
    asked = [QUESTIONS[i % len(QUESTIONS)] for i in range(queries)]
    qvecs = mem.embedder.embed(asked)
    vecs = mem.store.index._vecs[: mem.store.index.size]
    mem.recall(asked[0], user="u")  # loads the question parser and tokenizer, builds the postings
    times, floor = [], []
    prof = cProfile.Profile()
    for q, v in zip(asked, qvecs, strict=True):
        t0 = time.perf_counter()
        prof.enable()
        mem.recall(q, user="u")
        prof.disable()
        times.append(time.perf_counter() - t0)
        # The floor, timed query by query beside it: brute-force top-10 over the same matrix.
        t0 = time.perf_counter()
        scores = vecs @ v
        np.argpartition(-scores, 9)[:10]
        floor.append(time.perf_counter() - t0)
    mem.close()
    print(report(prof, top))
    rec, flo = _percentiles(times), _percentiles(floor)
    return {"n": n, "queries": queries, "recall": rec, "floor": flo, "ratio_p50": rec["p50_ms"] / flo["p50_ms"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--out", default="benchmarks/results/store.json")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--profile", type=int, metavar="N",
                    help="profile Memory.recall on a store of N memories (cProfile, profiled p50 vs numpy floor)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_size(args.one)))
        return
    if args.profile:
        row = profile_recall(args.profile)
        print(f"n={row['n']:,}: recall p50 {row['recall']['p50_ms']:.2f} ms (under cProfile), numpy floor "
              f"{row['floor']['p50_ms']:.2f} ms, ratio {row['ratio_p50']:.1f}x")
        return
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        res = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, check=True)
        row = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"n={n:>9,}  insert {row['insert_rows_per_s']:>9,.0f} rows/s  open {row['open_load_s']:.2f}s  "
              f"top10 p50 mnemo {row['mnemo_top10']['p50_ms']:.2f}ms numpy {row['numpy_top10']['p50_ms']:.2f}ms "
              f"sql {row['duckdb_sql_top10']['p50_ms']:.1f}ms  ratio {row['ratio_mnemo_vs_numpy_p50']:.2f}x  "
              f"peak {row['peak_rss_mib']:.0f} MiB", flush=True)
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
