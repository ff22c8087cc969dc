"""Opening a large store and its first hybrid recall: rebuilt from the table, against taken from the saved indexes.

    .venv/bin/python benchmarks/bench_open.py --sizes 100000 --out benchmarks/results/open.json
    .venv/bin/python benchmarks/bench_open.py --sizes 1000000 --rounds 1

A file store of N memories is written once (texts: two LoCoMo turns joined, drawn at random,
when MNEMO_DATA_DIR holds LoCoMo, else words drawn from a fixed list; vectors: random unit
vectors; 10 users), closed with no BM25 postings built. Then, alternating, in fresh subprocesses:

* rebuilt: the saved indexes file is removed first, so opening and the first lexical search
  build everything from the table (what every open did before store.persist); closing saves them;
* saved: the store opens with the file that close wrote.

Each side reports the open time, the first hybrid recall (`Memory.recall`, default recipe),
the p50 of 10 recalls after it, close time and the process's peak RSS (what any first recall
loads whatever the store, the question parser and tokenizer, is loaded before the clock starts);
both sides must return the same BM25 and similarity hits for the same questions (packs differ
run to run: each recall reinforces what it packed). Ratios are saved / rebuilt, within the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIM = 384
USERS = 10
QUESTIONS = ["Where did Caroline go hiking last summer?", "What did Melanie paint for the art show?",
             "When is the adoption meeting?", "Which instrument does Joanna play?", "What book did Nate recommend?",
             "Who went to the LGBTQ support group?", "What pottery did they make together?",
             "How long has John been running?", "What is the name of the dog?", "Where is the new job?",
             "What did they cook for dinner on Friday?"]


def texts(n: int, seed: int = 0) -> list[str]:
    """Return `n` memory texts: two real LoCoMo turns joined when the data is present, else random words."""
    from bench_write import locomo_turns  # the LoCoMo turns the write benchmark plays

    rng = np.random.default_rng(seed)
    pool = locomo_turns() or [" ".join(rng.choice(QUESTIONS[i % len(QUESTIONS)].split(), 6)) for i in range(5000)]
    a, b = rng.integers(0, len(pool), n), rng.integers(0, len(pool), n)
    return [f"{pool[i]} {pool[j]}" for i, j in zip(a.tolist(), b.tolist(), strict=True)]


def build(path: Path, n: int) -> float:
    """Write a store of `n` memories at `path`; return the seconds it took."""
    sys.path.insert(0, str(ROOT))
    import mnemo

    rng = np.random.default_rng(1)
    all_texts = texts(n)
    t0 = time.perf_counter()
    with mnemo.Memory.open(path, embedder="hash") as mem:
        for start in range(0, n, 50_000):
            chunk = all_texts[start:start + 50_000]
            vecs = rng.normal(size=(len(chunk), DIM)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            for u in range(USERS):
                mem.insert_many(chunk[u::USERS], user=f"u{u}", vectors=vecs[u::USERS])
    return time.perf_counter() - t0


def side(path: Path, saved: bool) -> dict:
    """Open the store (with or without its saved indexes), recall, close; return the timings."""
    sys.path.insert(0, str(ROOT))
    import mnemo
    from mnemo.store import persist

    if not saved:
        persist.sidecar(str(path)).unlink(missing_ok=True)
    # What any first recall loads whatever the store (the question parser, the tokenizer) is loaded first.
    with mnemo.Memory.open(":memory:", embedder="hash") as warm_up:
        warm_up.insert_many(["warm up"], user="u0")
        warm_up.recall(QUESTIONS[0], user="u0")
    t0 = time.perf_counter()
    mem = mnemo.Memory.open(path)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mem.recall(QUESTIONS[0], user="u0")
    first_s = time.perf_counter() - t0
    warm = []
    for q in QUESTIONS[1:]:
        t0 = time.perf_counter()
        mem.recall(q, user="u1")
        warm.append(time.perf_counter() - t0)
    stats = mem.store.stats()
    # What both sides must agree on: the BM25 and similarity hits (packs also follow each recall's reinforcement).
    qvecs = mem.embedder.embed(QUESTIONS)
    hits = [[mem.store.search_lexical(q, 50, user=u), mem.store.search_dense(v, 50, user=u)]
            for q, v in zip(QUESTIONS, qvecs, strict=True) for u in ("u0", "u3")]
    t0 = time.perf_counter()
    mem.close()
    close_s = time.perf_counter() - t0
    return {"saved": saved, "open_s": open_s, "first_recall_s": first_s, "recall_p50_ms": statistics.median(warm) * 1e3,
            "close_s": close_s, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "index": stats["index"], "saved_rows": stats["saved_rows"], "hits": json.loads(json.dumps(hits)),
            "sidecar_mib": persist.sidecar(str(path)).stat().st_size / 2**20
            if persist.sidecar(str(path)).exists() else 0.0}


def run(n: int, rounds: int, folder: Path) -> dict:
    """Build a store of `n` memories and time `rounds` alternating rebuilt / saved opens, each in a subprocess."""
    path = folder / f"open_{n}.duckdb"
    build_s = float(_sub(["--build", str(n), str(path)]))
    runs = []
    for _ in range(rounds):
        for saved in (False, True):
            runs.append(json.loads(_sub(["--side", "saved" if saved else "rebuilt", str(path)])))
    out = {"n": n, "build_s": build_s, "runs": runs, "load": os.getloadavg()}
    for key in ("open_s", "first_recall_s", "recall_p50_ms", "close_s", "peak_rss_mib"):
        a = statistics.median(r[key] for r in runs if not r["saved"])
        b = statistics.median(r[key] for r in runs if r["saved"])
        out[key] = {"rebuilt": a, "saved": b, "saved_over_rebuilt": b / a if a else None}
    out["same_hits"] = all(r["hits"] == runs[0]["hits"] for r in runs)
    for r in runs:
        r.pop("hits")
    for f in folder.glob(f"open_{n}.duckdb*"):
        f.unlink()
    return out


def _sub(args: list[str]) -> str:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rebuilt / saved pairs per size")
    ap.add_argument("--dir", type=Path, help="where the stores are written (default: a temporary folder)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--build", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--side", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        print(build(Path(args.build[1]), int(args.build[0])))
        return
    if args.side:
        print(json.dumps(side(Path(args.side[1]), args.side[0] == "saved")))
        return
    folder = args.dir or Path(tempfile.mkdtemp(prefix="mnemo-open-"))
    rows = []
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        row = run(n, args.rounds, folder)
        rows.append(row)
        print(f"n={n:,}: open {row['open_s']['rebuilt']:.2f}s -> {row['open_s']['saved']:.2f}s "
              f"({row['open_s']['saved_over_rebuilt']:.2f}x), first hybrid recall {row['first_recall_s']['rebuilt']:.2f}s"
              f" -> {row['first_recall_s']['saved']:.2f}s ({row['first_recall_s']['saved_over_rebuilt']:.2f}x), "
              f"peak {row['peak_rss_mib']['rebuilt']:.0f} -> {row['peak_rss_mib']['saved']:.0f} MiB, "
              f"close {row['close_s']['rebuilt']:.2f}s / {row['close_s']['saved']:.2f}s, "
              f"same hits: {row['same_hits']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"rows": rows}, indent=2))


if __name__ == "__main__":
    main()
