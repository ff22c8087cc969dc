"""Approximate index options on real MiniLM embeddings: recall@10 against exact search, latency, memory, build time.

    python benchmarks/bench_ann.py --sizes 100000,1000000 --out benchmarks/results/ann.json

Vectors and queries come from benchmarks/corpus.py (real LoCoMo / REALTALK / BEAM turns,
grown to 1M by recombining pairs of real embeddings; the queries are the datasets' real
questions, never stored). Ground truth is exact float32 top-10 by numpy. Each size runs in
its own subprocess; the in-process options run there side by side, in rotation, `--runs`
times, and DuckDB's vss HNSW runs in a further subprocess of its own so that its peak
memory (ru_maxrss) is its own. Latency is per query, one query at a time (as recall asks),
reported as the median over runs of each run's p50 / p95, with the run-to-run range.
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

sys.path.insert(0, str(Path(__file__).parent))
import corpus  # noqa: E402

K = 10


def _truth(vecs: np.ndarray, queries: np.ndarray, k: int = K) -> np.ndarray:
    """Return the exact top-k row numbers of every query (blocked numpy brute force)."""
    out = np.zeros((len(queries), k), dtype=np.int64)
    for s in range(0, len(queries), 64):
        sims = queries[s:s + 64] @ vecs.T
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1)
        out[s:s + 64] = np.take_along_axis(top, order, axis=1)
    return out


def _recall(found: list[list[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t.tolist())) / K for f, t in zip(found, truth, strict=True)]))


def _summary(runs: list[list[float]]) -> dict[str, float]:
    """Return median-over-runs p50 / p95 (ms) and the range of the per-run p50s."""
    p50 = [float(np.percentile(r, 50)) * 1000 for r in runs]
    p95 = [float(np.percentile(r, 95)) * 1000 for r in runs]
    return {"p50_ms": float(np.median(p50)), "p95_ms": float(np.median(p95)),
            "p50_min_ms": min(p50), "p50_max_ms": max(p50), "runs": len(runs)}


def options(n: int) -> list[tuple[str, str, dict]]:
    """Return the in-process options measured at size n: (name, index kind, search parameters)."""
    from mnemo.store import ann

    nl = ann.nlist_for(n)
    opts = [("exact", "exact", {})]
    opts += [(f"ivf nlist={nl} nprobe={p}", "ivf", {"nprobe_fixed": p}) for p in (nl // 16, nl // 8, nl // 4)]
    opts += [(f"binary rerank={d}", "binary", {"rerank": d}) for d in (200, 1000, 4000)]
    opts += [("int8 rerank=200", "int8", {"rerank": 200}), ("float16", "float16", {})]
    return opts


# Options that scan every row in numpy loops are slow at scale: they are timed on fewer queries.
SLOW = {"int8", "float16"}


def _nbytes(index) -> int:
    total = index._vecs[: index.size].nbytes + index.size * 5
    codes = getattr(index, "_codes", None)
    return total + (codes[: index.size].nbytes if codes is not None else 0)


def run_size(n: int, nq: int, runs: int, timed: int) -> dict:
    """Measure every in-process option at size n; return their rows.

    Recall@10 is over `nq` queries; latency over the first `timed` (fewer for slow options at
    large n), `runs` times, options in rotation so that a burst of load hits them alike.
    """
    from mnemo.store import ann
    from mnemo.store.index import VectorIndex

    vecs, _ = corpus.vectors(n)
    qv, _ = corpus.queries()
    qv = qv[:nq]
    t0 = time.perf_counter()
    truth = _truth(vecs, qv)
    truth_s = time.perf_counter() - t0
    ids = [str(i) for i in range(n)]
    users = ["u"] * n
    classes = {"exact": VectorIndex, "ivf": ann.IvfIndex, "binary": ann.BinaryIndex, "int8": ann.Int8Index,
               "float16": ann.Float16Index}
    built, build_s = {}, {}
    for kind in dict.fromkeys(kind for _, kind, _ in options(n)):
        index = classes[kind](vecs.shape[1])
        t0 = time.perf_counter()
        index.add(ids, users, vecs)
        if kind == "ivf" and not index.builds:
            index.build()
        build_s[kind] = time.perf_counter() - t0
        built[kind] = index
    rows = {}
    for name, kind, params in options(n):
        index = built[kind]
        for attr, value in params.items():
            setattr(index, attr, value)
        count = nq if kind not in SLOW or n <= 100_000 else min(nq, 10)
        found = [[int(h[0]) for h in index.search(q, K, user="u")] for q in qv[:count]]
        rows[name] = {"option": name, "kind": kind, "params": params, "build_s": build_s[kind],
                      "index_mib": _nbytes(index) / 2**20, "recall_at_10": _recall(found, truth[:count]),
                      "recall_queries": count, "times": []}
    for _ in range(runs):
        for name, kind, params in options(n):
            index = built[kind]
            for attr, value in params.items():
                setattr(index, attr, value)
            count = timed if kind not in SLOW or n <= 100_000 else min(timed, 5)
            times = []
            for q in qv[:count]:
                t0 = time.perf_counter()
                index.search(q, K, user="u")
                times.append(time.perf_counter() - t0)
            rows[name]["times"].append(times)
    out = []
    for row in rows.values():
        row["timed_queries"] = len(row["times"][0])
        row.update(_summary(row.pop("times")))
        out.append(row)
    ivf = built["ivf"]
    return {"n": n, "queries": nq, "truth_seconds": truth_s, "options": out, "ivf": ivf.stats(),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_hnsw(n: int, nq: int, runs: int, ef_search: tuple[int, ...] = (64, 200)) -> dict:
    """Measure DuckDB vss HNSW at size n: build time, recall@10, latency, peak memory (own process)."""
    import duckdb

    from mnemo.store import extension_path as _extension_path

    vecs, _ = corpus.vectors(n)
    qv, _ = corpus.queries()
    qv = qv[:nq]
    truth = _truth(vecs, qv)
    dim = vecs.shape[1]
    path = Path(tempfile.mkdtemp()) / "hnsw.duckdb"
    con = duckdb.connect(str(path))
    con.execute(f"LOAD '{_extension_path('vss')}'")
    con.execute("SET hnsw_enable_experimental_persistence = true")
    con.execute(f"CREATE TABLE v (row BIGINT, user_id VARCHAR, embedding FLOAT[{dim}])")
    import pyarrow as pa

    for s in range(0, n, 100_000):
        part = vecs[s:s + 100_000]
        batch = pa.table({"row": pa.array(np.arange(s, s + len(part))),  # noqa: F841 - read by DuckDB
                          # Every 10th row belongs to a second user, to see what a filter does to HNSW.
                          "user_id": pa.array(["v" if i % 10 == 0 else "u" for i in range(s, s + len(part))]),
                          "embedding": pa.FixedSizeListArray.from_arrays(pa.array(part.ravel()), dim)})
        con.execute("INSERT INTO v SELECT * FROM batch")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    con.execute("CREATE INDEX v_hnsw ON v USING HNSW (embedding) WITH (metric = 'cosine')")
    build_s = time.perf_counter() - t0
    sql = f"SELECT row FROM v ORDER BY array_cosine_distance(embedding, ?::FLOAT[{dim}]) LIMIT {K}"
    plan = "\n".join(r[1] for r in con.execute("EXPLAIN " + sql, [qv[0].tolist()]).fetchall())
    # The filtered form mnemo needs (user and status): vss applies WHERE after the index scan.
    sql_user = (f"SELECT row FROM v WHERE user_id = 'v' ORDER BY array_cosine_distance(embedding, "
                f"?::FLOAT[{dim}]) LIMIT {K}")
    plan_user = "\n".join(r[1] for r in con.execute("EXPLAIN " + sql_user, [qv[0].tolist()]).fetchall())
    out = []
    con.execute(f"SET hnsw_ef_search = {ef_search[0]}")
    # vss applies WHERE after the index scan: a user with a tenth of the rows gets fewer than k back.
    small_user_rows = float(np.mean([len(con.execute(sql_user, [q.tolist()]).fetchall()) for q in qv[:50]]))
    for ef in ef_search:
        con.execute(f"SET hnsw_ef_search = {ef}")
        all_times, found = [], []
        for _ in range(runs):
            times, found = [], []
            for q in qv:
                t0 = time.perf_counter()
                got = con.execute(sql, [q.tolist()]).fetchall()
                times.append(time.perf_counter() - t0)
                found.append([r[0] for r in got])
            all_times.append(times)
        out.append({"option": f"duckdb vss hnsw ef_search={ef}", "build_s": build_s,
                    "recall_at_10": _recall(found, truth), **_summary(all_times)})
    con.close()
    return {"n": n, "queries": nq, "options": out, "uses_hnsw_scan": "HNSW_INDEX_SCAN" in plan,
            "filtered_query_uses_hnsw_scan": "HNSW_INDEX_SCAN" in plan_user,
            "rows_returned_for_a_user_with_10pct_of_rows": small_user_rows,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_before_build_mib": rss_before, "file_mib": path.stat().st_size / 2**20}


def machine() -> dict:
    """Return what the numbers were measured on, with the load at the time."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"platform": platform.platform(), "cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "load_average": list(os.getloadavg()),
            "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}


def _child(args: list[str]) -> dict:
    res = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if res.returncode:
        return {"error": res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit {res.returncode}"}
    return json.loads(res.stdout.strip().splitlines()[-1])


def table(res: dict) -> str:
    """Return the Markdown table of a results document, one row per size and option."""
    lines = ["| memories | option | recall@10 | p50 ms (range of runs) | p95 ms | build s | index MiB |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in res["sizes"]:
        hnsw = row.get("hnsw", {})
        for opt in row.get("options", []) + hnsw.get("options", []):
            mib = opt.get("index_mib")
            if mib is None and hnsw.get("peak_rss_mib"):
                mib = hnsw["peak_rss_mib"] - hnsw["rss_before_build_mib"]
            lines.append(f"| {row['n']:,} | {opt['option']} | {opt['recall_at_10']:.3f} | {opt['p50_ms']:.2f} "
                         f"({opt['p50_min_ms']:.2f}-{opt['p50_max_ms']:.2f}) | {opt['p95_ms']:.2f} | "
                         f"{opt['build_s']:.1f} | {mib:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,50000,100000,1000000")
    # vss builds HNSW at ~400 rows/s here (250 s for 100k): 1M would take most of an hour.
    ap.add_argument("--hnsw-sizes", default="10000,100000", help="sizes at which to build vss HNSW ('' for none)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timed", type=int, default=50, help="queries timed per run (recall uses all --queries)")
    ap.add_argument("--out", default="benchmarks/results/ann.json")
    ap.add_argument("--table", help="print the README table of a results file and exit")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--hnsw", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    if args.one:
        print(json.dumps(run_size(args.one, args.queries, args.runs, args.timed)))
        return
    if args.hnsw:
        print(json.dumps(run_hnsw(args.hnsw, args.queries, args.runs)))
        return
    results = {"machine_before": machine(), "k": K, "sizes": []}
    hnsw_sizes = {int(s) for s in args.hnsw_sizes.split(",") if s}
    for n in [int(s) for s in args.sizes.split(",")]:
        row = _child(["--one", str(n), "--queries", str(args.queries), "--runs", str(args.runs),
                      "--timed", str(args.timed)])
        if n in hnsw_sizes:
            row["hnsw"] = _child(["--hnsw", str(n), "--queries", str(args.queries), "--runs", str(args.runs)])
        row["load_average_after"] = list(os.getloadavg())
        results["sizes"].append(row)
        for opt in row.get("options", []) + row.get("hnsw", {}).get("options", []):
            print(f"n={n:>9,} {opt['option']:<34} recall@10 {opt['recall_at_10']:.3f}  p50 {opt['p50_ms']:8.2f} ms "
                  f"[{opt['p50_min_ms']:.2f}-{opt['p50_max_ms']:.2f}]  p95 {opt['p95_ms']:8.2f}  "
                  f"build {opt['build_s']:.1f}s", flush=True)
        if "error" in row.get("hnsw", {}):
            print(f"n={n:>9,} hnsw failed: {row['hnsw']['error']}", flush=True)
    results["machine_after"] = machine()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("MNEMO_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    main()
