"""The performance report: mnemo against the numpy floor and Mem0, at 10k / 100k / 1M memories.

    python benchmarks/perf_report.py --sizes 10000,100000,1000000 --out benchmarks/results/perf.json
    python benchmarks/perf_report.py --table benchmarks/results/perf.json     # print the README table

Per size, in one invocation, each side in its own subprocesses (so peak memory, ru_maxrss,
is that side's alone):

- mnemo (this venv): `Memory.insert_many` bulk insert with the precomputed vectors; the store is
  reopened and `Memory.recall` timed (recipes "dense" and the default hybrid), interleaved
  query by query with the numpy floor; `Memory.remember` on real plain sentences (offline
  extraction) with live MiniLM, and with the hash embedder in a hash store of the same size;
  then a `Memory.decay` pass that tombstones the oldest tenth.
- numpy floor: the same vectors in one float32 matrix: brute-force top-10 by `@` and
  argpartition; bulk add = copying rows into a preallocated matrix; decay = the salience
  formula of `mnemo.decay` over column arrays; remember = embedding the sentence (MiniLM).
- Mem0 (`mem0ai`, in its own venv .venv-mem0 because its protobuf pin would downgrade the
  project's): `Memory.from_config` with its default local vector store (Qdrant local mode
  on disk), the same MiniLM vectors through an `EmbeddingBase` subclass, `add(infer=False)`
  (no LLM), `search`. Mem0 stores one memory per SQLite commit pair; past `--mem0-add-max`
  rows its store is filled through its own `vector_store.insert` in batches with the
  payload `add` writes (stated in the results), and only `add` is timed for throughput.

Vectors come from benchmarks/corpus.py (real MiniLM embeddings of LoCoMo/REALTALK/BEAM
turns, recombined in pairs past ~15.7k). Queries are the datasets' real questions, embedded
once by MiniLM; recall timings exclude the query embedding on every side (one MiniLM
query embedding, timed separately, adds the same to each). Latencies are the median over
`--runs` passes of each pass's p50 / p95, with the range of the per-pass p50s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus  # noqa: E402

K = 10
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
CHUNKS = 10  # memories are added in 10 chunks, 5 days apart ...
DECAY_AT = T0 + timedelta(days=40)  # ... so a decay pass at day 40 tombstones the oldest chunk (salience < 0.08)
MEM0_VENV = HERE.parent / ".venv-mem0" / "bin" / "python"


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _summary(runs: list[list[float]]) -> dict[str, float]:
    p50 = [float(np.percentile(r, 50)) * 1000 for r in runs]
    p95 = [float(np.percentile(r, 95)) * 1000 for r in runs]
    return {"p50_ms": float(np.median(p50)), "p95_ms": float(np.median(p95)),
            "p50_min_ms": min(p50), "p50_max_ms": max(p50), "runs": len(runs), "queries": len(runs[0])}


def _floor_top(vecs: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores = vecs @ q
    top = np.argpartition(-scores, K - 1)[:K]
    return top[np.argsort(-scores[top])]


def _sentences(count: int, seed: int = 7) -> list[str]:
    """Return real plain first-person sentences for remember (held-in PrefEval turns; none is in the store)."""
    from mnemo.eval.datasets import load_prefeval

    texts = sorted({t.text for c in load_prefeval().conversations for t in c.turns if 20 <= len(t.text) <= 300})
    rng = np.random.default_rng(seed)
    return [texts[i] for i in rng.choice(len(texts), min(count, len(texts)), replace=False)]


class _Lookup:
    """The MiniLM embedder with the benchmark's precomputed query vectors filled in (same model, same vectors)."""

    def __init__(self, live, known: dict[str, np.ndarray]):
        self.inner, self.name, self.dim, self.known = live, live.name, live.dim, known

    def embed(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in texts if t not in self.known]
        if todo:
            self.known.update(zip(todo, self.inner.embed(todo), strict=True))
        return np.stack([self.known[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def _hash_vectors(n: int) -> np.ndarray:
    """Return hash-embedder vectors for the same n texts, recombined from the real turns' hash vectors alike."""
    from mnemo.embed import HashEmbedder

    base = corpus.real()
    hv = HashEmbedder().embed([str(t) for t in base["texts"]])
    r = len(hv)
    perm, anchors, partners, weights = corpus.recipe(max(n, 1_000_000))
    out = np.empty((n, hv.shape[1]), dtype=np.float32)
    out[:min(n, r)] = hv[perm[:n]]
    if n > r:
        w = weights[:n - r, None]
        mix = w * hv[anchors[:n - r]] + (1 - w) * hv[partners[:n - r]]
        out[r:] = mix / np.maximum(np.linalg.norm(mix, axis=1, keepdims=True), 1e-12)
    return out


# ---------------------------------------------------------------------------------------------- mnemo side
def mnemo_build(n: int, path: str, embedder: str) -> dict:
    """Bulk-add n memories (in CHUNKS, 5 days apart) into a new store at `path`; return throughput."""
    import mnemo

    vecs, texts = corpus.vectors(n)
    if embedder == "hash":
        vecs = _hash_vectors(n)
    mem = mnemo.Memory.open(path, embedder=embedder, llm="offline")
    t0 = time.perf_counter()
    step = -(-n // CHUNKS)
    for c in range(CHUNKS):
        sl = slice(c * step, min(n, (c + 1) * step))
        mem.insert_many(texts[sl], user="u", vectors=vecs[sl], at=T0 + timedelta(days=5 * c))
    took = time.perf_counter() - t0
    mem.close()
    return {"bulk_add_rows_per_s": n / took, "bulk_add_s": took, "peak_rss_build_mib": _rss()}


def mnemo_serve(n: int, path: str, hash_path: str | None, runs: int, timed: int) -> dict:
    """Reopen the store; time recall (interleaved with the numpy floor), remember, then a decay pass."""
    import mnemo
    from mnemo.clock import SimulatedClock
    from mnemo.embed import MiniLMEmbedder

    qv, qtexts = corpus.queries()
    live = MiniLMEmbedder()
    emb = _Lookup(live, dict(zip(qtexts, qv, strict=True)))
    t0 = time.perf_counter()
    mem = mnemo.Memory.open(path, embedder=emb, llm="offline", clock=SimulatedClock(DECAY_AT - timedelta(days=1)))
    open_s = time.perf_counter() - t0
    out: dict = {"open_s": open_s, "index": mem.store.stats()["index"]}
    if hasattr(mem.store.index, "stats"):
        out["index_stats"] = mem.store.index.stats()
    dense = mnemo.Config.from_params("dense")
    hybrid = mnemo.Config.from_params("default")
    t0 = time.perf_counter()
    mem.store.refresh_lexical()
    out["lexical_build_s"] = time.perf_counter() - t0
    floor = np.load(corpus.CACHE / "vectors_1000000.npy", mmap_mode="r")[:n]
    floor = np.ascontiguousarray(floor)
    times: dict[str, list[list[float]]] = {"dense": [], "hybrid": [], "floor": []}
    agree: list[float] = []
    for _ in range(runs):
        run = {k: [] for k in times}
        for q, qt in zip(qv[:timed], qtexts[:timed], strict=True):
            mem.config = dense
            t0 = time.perf_counter()
            mem.recall(qt, user="u")
            run["dense"].append(time.perf_counter() - t0)
            mem.config = hybrid
            t0 = time.perf_counter()
            mem.recall(qt, user="u")
            run["hybrid"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            top = _floor_top(floor, q)
            run["floor"].append(time.perf_counter() - t0)
            if len(agree) < timed:
                # Recall@10 of the store's index against the floor, matched by cosine (ids differ by side).
                got = np.array([s for _, s in mem.store.search_dense(q, K, user="u")])
                want = floor[top] @ q
                agree.append(float(np.mean([np.any(np.abs(got - w) < 1e-5) for w in want])))
        for k in times:
            times[k].append(run[k])
    out["recall_dense"], out["recall_hybrid"], out["floor_top10"] = (_summary(times[k]) for k in ("dense", "hybrid", "floor"))
    out["index_recall_at_10"] = float(np.mean(agree))
    # One MiniLM query embedding: what every side adds to each recall when the query is not precomputed.
    q_embed = []
    for qt in qtexts[:20]:
        t0 = time.perf_counter()
        live.embed([qt])
        q_embed.append(time.perf_counter() - t0)
    out["query_embed_minilm_ms"] = float(np.median(q_embed)) * 1000
    out.update(_remember(mem, _sentences(40), "minilm", live))
    mem.close()
    if hash_path:
        hmem = mnemo.Memory.open(hash_path, embedder="hash", llm="offline",
                                 clock=SimulatedClock(DECAY_AT - timedelta(days=1)))
        out.update(_remember(hmem, _sentences(40), "hash", None))
        hmem.close()
    # Decay last: it tombstones the oldest tenth of the store.
    mem = mnemo.Memory.open(path, embedder=emb, llm="offline")
    t0 = time.perf_counter()
    decayed = mem.decay(at=DECAY_AT)
    out["decay_s"] = time.perf_counter() - t0
    out["decayed"] = len(decayed)
    mem.close()
    return out


def _remember(mem, sentences: list[str], label: str, live) -> dict:
    """Time remember on plain sentences; with `live`, also the floor's share (embedding each sentence)."""
    t0 = time.perf_counter()
    added = 0
    for i, s in enumerate(sentences):
        added += len(mem.remember(s, user="u", session=f"bench-{i // 10}").added)
    took = time.perf_counter() - t0
    out = {f"remember_{label}_per_s": len(sentences) / took, f"remember_{label}_added": added}
    if live is not None:
        t0 = time.perf_counter()
        for s in sentences:
            live.embed([s])
        out["floor_remember_per_s"] = len(sentences) / (time.perf_counter() - t0)
    return out


def mnemo_memory(n: int, path: str) -> dict:
    """Peak RSS of a process that opens the store, recalls 20 questions and runs a decay dry run."""
    import mnemo
    from mnemo.embed import MiniLMEmbedder

    qv, qtexts = corpus.queries()
    emb = _Lookup(MiniLMEmbedder(), dict(zip(qtexts, qv, strict=True)))
    mem = mnemo.Memory.open(path, embedder=emb, llm="offline")
    for qt in qtexts[:20]:
        mem.recall(qt, user="u")
    mem.store.decay_pass(DECAY_AT, mem.config.decay, dry_run=True)
    mem.close()
    return {"peak_rss_mib": _rss()}


# ---------------------------------------------------------------------------------------------- numpy floor
def floor_side(n: int, timed: int) -> dict:
    """The floor's own process: matrix copy (bulk add), brute-force top-10, salience over arrays; peak RSS."""
    from mnemo.config import DecayConfig

    vecs, _ = corpus.vectors(n)
    qv, _ = corpus.queries()
    t0 = time.perf_counter()
    matrix = np.empty_like(vecs)
    step = -(-n // CHUNKS)
    for c in range(CHUNKS):
        matrix[c * step:(c + 1) * step] = vecs[c * step:(c + 1) * step]
    add_s = time.perf_counter() - t0
    del vecs
    times = []
    for q in qv[:timed]:
        t0 = time.perf_counter()
        _floor_top(matrix, q)
        times.append(time.perf_counter() - t0)
    # The decay formula of mnemo.decay.salience over columns (all episodic, importance 0.5, no use yet).
    cfg = DecayConfig()
    created = np.repeat(np.arange(CHUNKS) * 5.0, step)[:n]
    importance = np.full(n, 0.5)
    access = np.zeros(n)
    corr = np.zeros(n)
    t0 = time.perf_counter()
    base = np.minimum(1.0, np.clip(importance, 0, 1) * (1 + cfg.reinforcement_weight * np.log2(1 + access))
                      * (1 + cfg.corroboration_weight * np.log2(1 + corr)))
    sal = base * 0.5 ** (np.maximum(0.0, 40.0 - created) / cfg.half_life_episodic_days)
    gone = np.flatnonzero(sal < cfg.threshold)
    decay_s = time.perf_counter() - t0
    return {"bulk_add_rows_per_s": n / add_s, "top10": _summary([times]), "decay_s": decay_s,
            "decayed": int(gone.size), "peak_rss_mib": _rss()}


# ---------------------------------------------------------------------------------------------- Mem0 side
def _mem0(folder: str, vectors: dict[str, np.ndarray]):
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = folder
    from mem0 import Memory as Mem0
    from mem0.embeddings.base import EmbeddingBase

    from mnemo.embed import MiniLMEmbedder

    class MiniLM(EmbeddingBase):
        """mnemo's MiniLM (same model, same vectors) behind Mem0's embedder interface."""

        def __init__(self):
            super().__init__()
            self.live = MiniLMEmbedder()

        def embed(self, text, memory_action=None):
            vec = vectors.get(text)
            return (vec if vec is not None else self.live.embed([text])[0]).tolist()

    cfg = {"vector_store": {"provider": "qdrant", "config": {"embedding_model_dims": 384, "collection_name": "bench",
                                                             "path": os.path.join(folder, "qdrant")}},
           # Never called with infer=False; configured only because Mem0 builds its clients up front.
           "llm": {"provider": "openai", "config": {"api_key": "unused-offline"}},
           "embedder": {"provider": "openai", "config": {"api_key": "unused-offline", "embedding_dims": 384}},
           "history_db_path": os.path.join(folder, "history.db")}
    m = Mem0.from_config(cfg)
    m.embedding_model = MiniLM()
    return m


def mem0_build(n: int, folder: str, add_max: int) -> dict:
    """Fill a Mem0 store with n memories: add(infer=False) for the first add_max, batch inserts after."""
    import hashlib
    import uuid

    vecs, texts = corpus.vectors(n)
    known = dict(zip(texts, vecs, strict=True))
    m = _mem0(folder, known)
    first = min(n, add_max)
    t0 = time.perf_counter()
    for s in range(0, first, 500):
        m.add([{"role": "user", "content": t} for t in texts[s:min(first, s + 500)]], user_id="u", infer=False)
    add_s = time.perf_counter() - t0
    out = {"add_rows_per_s": first / add_s, "add_rows_timed": first}
    if n > first:
        t0 = time.perf_counter()
        now = datetime.now(timezone.utc).isoformat()
        for s in range(first, n, 1000):
            part = range(s, min(n, s + 1000))
            m.vector_store.insert(
                vectors=[vecs[i].tolist() for i in part], ids=[str(uuid.uuid4()) for _ in part],
                payloads=[{"user_id": "u", "role": "user", "data": texts[i], "hash": hashlib.md5(texts[i].encode()).hexdigest(),
                           "created_at": now, "updated_at": now, "text_lemmatized": texts[i]} for i in part])
        out["batch_insert_rows_per_s"] = (n - first) / (time.perf_counter() - t0)
    out["peak_rss_build_mib"] = _rss()
    return out


def mem0_serve(n: int, folder: str, runs: int, timed: int) -> dict:
    """Reopen the Mem0 store; time search (interleaved with the numpy floor) and remember-like adds."""
    qv, qtexts = corpus.queries()
    known = dict(zip(qtexts, qv, strict=True))
    t0 = time.perf_counter()
    m = _mem0(folder, known)
    open_s = time.perf_counter() - t0
    m.search(qtexts[0], filters={"user_id": "u"}, top_k=K)
    rss_open = _rss()
    floor = np.ascontiguousarray(np.load(corpus.CACHE / "vectors_1000000.npy", mmap_mode="r")[:n])
    times: dict[str, list[list[float]]] = {"search": [], "floor": []}
    for _ in range(runs):
        run: dict[str, list[float]] = {"search": [], "floor": []}
        for q, qt in zip(qv[:timed], qtexts[:timed], strict=True):
            t0 = time.perf_counter()
            m.search(qt, filters={"user_id": "u"}, top_k=K)
            run["search"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _floor_top(floor, q)
            run["floor"].append(time.perf_counter() - t0)
        for k in times:
            times[k].append(run[k])
    sentences = _sentences(40)
    t0 = time.perf_counter()
    for s in sentences:
        m.add(s, user_id="u", infer=False)
    remember = len(sentences) / (time.perf_counter() - t0)
    return {"open_s": open_s, "search": _summary(times["search"]), "floor_top10": _summary(times["floor"]),
            "remember_minilm_per_s": remember, "peak_rss_after_open_and_search_mib": rss_open}


def mem0_memory(n: int, folder: str) -> dict:
    """Peak RSS of a process that opens the Mem0 store and searches 20 questions."""
    qv, qtexts = corpus.queries()
    m = _mem0(folder, dict(zip(qtexts, qv, strict=True)))
    for qt in qtexts[:20]:
        m.search(qt, filters={"user_id": "u"}, top_k=K)
    return {"peak_rss_mib": _rss()}


# ---------------------------------------------------------------------------------------------- driver
def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"platform": platform.platform(), "cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "load_average": list(os.getloadavg()), "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _child(python: str | Path, *args: str) -> dict:
    t0 = time.perf_counter()
    res = subprocess.run([str(python), __file__, *args], capture_output=True, text=True)
    if res.returncode:
        tail = res.stderr.strip().splitlines()[-3:] if res.stderr.strip() else [f"exit {res.returncode}"]
        return {"error": " | ".join(tail), "wall_s": time.perf_counter() - t0}
    return {**json.loads(res.stdout.strip().splitlines()[-1]), "wall_s": time.perf_counter() - t0}


def run(sizes: list[int], mem0_sizes: set[int], runs: int, timed: int, add_max: int, hash_sizes: set[int]) -> dict:
    """Run every side at every size; return the results document."""
    py = sys.executable
    out = {"machine_before": machine(), "k": K, "runs": runs, "timed_queries": timed, "sizes": []}
    for n in sizes:
        # Both sides' stores on tmpfs when there is one: Mem0's local Qdrant commits to SQLite once a
        # point, which this machine's disk turns into ~30 points/s; DuckDB's checkpoints are slowed alike.
        work = Path(tempfile.mkdtemp(prefix=f"perf{n}-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
        store, hstore = str(work / "mnemo.duckdb"), str(work / "hash.duckdb")
        row: dict = {"n": n, "load_average_start": list(os.getloadavg())}
        row["mnemo_build"] = _child(py, "--side", "mnemo-build", "--n", str(n), "--path", store)
        if n in hash_sizes:
            row["mnemo_hash_build"] = _child(py, "--side", "mnemo-build", "--n", str(n), "--path", hstore,
                                             "--embedder", "hash")
        row["mnemo"] = _child(py, "--side", "mnemo-serve", "--n", str(n), "--path", store, "--runs", str(runs),
                              "--timed", str(timed), *(["--hash-path", hstore] if n in hash_sizes else []))
        row["mnemo_memory"] = _child(py, "--side", "mnemo-memory", "--n", str(n), "--path", store)
        row["floor"] = _child(py, "--side", "floor", "--n", str(n), "--timed", str(timed))
        if n in mem0_sizes and MEM0_VENV.exists():
            folder = str(work / "mem0")
            row["mem0_build"] = _child(MEM0_VENV, "--side", "mem0-build", "--n", str(n), "--path", folder,
                                       "--mem0-add-max", str(add_max))
            row["mem0"] = _child(MEM0_VENV, "--side", "mem0-serve", "--n", str(n), "--path", folder,
                                 "--runs", str(runs), "--timed", str(timed))
            row["mem0_memory"] = _child(MEM0_VENV, "--side", "mem0-memory", "--n", str(n), "--path", folder)
        row["load_average_end"] = list(os.getloadavg())
        shutil.rmtree(work, ignore_errors=True)
        out["sizes"].append(row)
        print(json.dumps({"n": n, **{k: v for k, v in row.items() if k != "n"}})[:2000], flush=True)
    out["machine_after"] = machine()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--mem0-sizes", default="10000,100000", help="sizes at which Mem0 runs")
    ap.add_argument("--hash-sizes", default="10000,100000,1000000", help="sizes with a hash store for remember")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timed", type=int, default=50, help="queries per timing pass")
    ap.add_argument("--mem0-add-max", type=int, default=2000, help="Mem0 rows added through add(); the rest batch-inserted")
    ap.add_argument("--out", default="benchmarks/results/perf.json")
    ap.add_argument("--table", help="print the README table of a results file and exit")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--hash-path", help=argparse.SUPPRESS)
    ap.add_argument("--embedder", default="minilm", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    if args.side:
        sides = {
            "mnemo-build": lambda: mnemo_build(args.n, args.path, args.embedder),
            "mnemo-serve": lambda: mnemo_serve(args.n, args.path, args.hash_path, args.runs, args.timed),
            "mnemo-memory": lambda: mnemo_memory(args.n, args.path),
            "floor": lambda: floor_side(args.n, args.timed),
            "mem0-build": lambda: mem0_build(args.n, args.path, args.mem0_add_max),
            "mem0-serve": lambda: mem0_serve(args.n, args.path, args.runs, args.timed),
            "mem0-memory": lambda: mem0_memory(args.n, args.path),
        }
        print(json.dumps(sides[args.side]()))
        return
    res = run([int(s) for s in args.sizes.split(",")], {int(s) for s in args.mem0_sizes.split(",") if s},
              args.runs, args.timed, args.mem0_add_max, {int(s) for s in args.hash_sizes.split(",") if s})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    print(table(res))


def _get(d: dict, *path: str):
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _fmt(x, unit: str = "") -> str:
    if x is None:
        return "n/a"
    if unit == "ms":
        return f"{x:.2f} ms" if x < 10 else f"{x:.0f} ms"
    if unit == "s":
        return f"{x:.3f} s" if x < 1 else f"{x:.1f} s"
    if unit == "MiB":
        return f"{x:,.0f} MiB"
    return f"{x:,.0f}/s" if x >= 10 else f"{x:.1f}/s"


def _ratio(a, b) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def _spread(d: dict | None) -> str:
    return "" if not d else f" ({d['p50_min_ms']:.1f}-{d['p50_max_ms']:.1f})"


def table(res: dict) -> str:
    """Return the Markdown table of a results document: figures, and ratios to the floor and to Mem0.

    Ratios are mnemo / other: for a time (ms, s, MiB) under 1 means mnemo is lower; for a
    throughput (/s) over 1 means mnemo is faster. The floor and Mem0 recall figures are each
    timed interleaved with their own numpy floor; ratios use the same-process floor.
    """
    lines = ["| memories | measure | mnemo | numpy floor | mnemo / floor | Mem0 | mnemo / Mem0 |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in res["sizes"]:
        n = f"{row['n']:,}"
        m, fl, m0 = row.get("mnemo", {}), row.get("floor", {}), row.get("mem0", {})
        recall = [("recall p50, dense", "recall_dense", "p50_ms"), ("recall p95, dense", "recall_dense", "p95_ms"),
                  ("recall p50, hybrid (default)", "recall_hybrid", "p50_ms"),
                  ("recall p95, hybrid (default)", "recall_hybrid", "p95_ms")]
        measures = [
            ("bulk add", _get(row, "mnemo_build", "bulk_add_rows_per_s"), _get(fl, "bulk_add_rows_per_s"),
             _get(row, "mem0_build", "add_rows_per_s"), "", None),
            ("remember, MiniLM", _get(m, "remember_minilm_per_s"), _get(m, "floor_remember_per_s"),
             _get(m0, "remember_minilm_per_s"), "", None),
            ("remember, hash", _get(m, "remember_hash_per_s"), None, None, "", None),
        ]
        for label, key, stat in recall:
            measures.append((label, _get(m, key, stat), _get(m, "floor_top10", stat),
                             _get(m0, "search", stat), "ms",
                             (_get(m, key), _get(m0, "search"), _get(m0, "floor_top10", stat))))
        measures += [
            ("decay pass", _get(m, "decay_s"), _get(fl, "decay_s"), None, "s", None),
            ("BM25 postings, first search after open", _get(m, "lexical_build_s"), None, None, "s", None),
            ("open (vectors, index)", _get(m, "open_s"), None, _get(m0, "open_s"), "s", None),
            ("peak memory (open + recall + decay)", _get(row, "mnemo_memory", "peak_rss_mib"),
             _get(fl, "peak_rss_mib"), _get(row, "mem0_memory", "peak_rss_mib"), "MiB", None),
        ]
        for label, mine, floor, theirs, unit, extra in measures:
            mine_s, theirs_s = _fmt(mine, unit), _fmt(theirs, unit)
            vs_mem0 = _ratio(mine, theirs)
            if extra and "p50" in label:
                mine_s += _spread(extra[0])
                theirs_s += _spread(extra[1]) if theirs is not None else ""
            if extra and theirs is not None and extra[2]:
                theirs_s += f" [floor {extra[2]:.1f}]"
            lines.append(f"| {n} | {label} | {mine_s} | {_fmt(floor, unit)} | {_ratio(mine, floor)} | {theirs_s} "
                         f"| {vs_mem0} |")
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("MNEMO_DATA_DIR", str(HERE.parents[1] / "shared" / "data"))
    main()
