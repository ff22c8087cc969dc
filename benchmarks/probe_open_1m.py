"""Where an open with saved indexes spends its time and memory: RSS after each phase, the big structures' sizes.

    MNEMO_DATA_DIR=../shared/data .venv/bin/python benchmarks/probe_open_1m.py build /dev/shm/probe/s.duckdb 1000000
    MNEMO_DATA_DIR=../shared/data .venv/bin/python benchmarks/probe_open_1m.py measure /dev/shm/probe/s.duckdb

`build` writes a store as `bench_open.py` does, runs one recall (postings built) and closes (saved
indexes written). `measure` opens it under cProfile and prints RSS (VmRSS) after a warm-up, after
open and after the first hybrid recall, the peak (ru_maxrss), the sizes of the index matrix, id
lists and row maps (sys.getsizeof; the id strings themselves are shared) and the BM25 postings, and
the profile's top functions. One run, no baseline: a probe, not a benchmark.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]


def rss_mib() -> float:
    """Return the process's resident set size now, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    import mnemo

    what, path = sys.argv[1], Path(sys.argv[2])
    if what == "build":
        import bench_open

        path.parent.mkdir(parents=True, exist_ok=True)
        print("build s", bench_open.build(path, int(sys.argv[3])))
        with mnemo.Memory.open(path) as mem:
            mem.recall("hello there", user="u0")
        return
    out = {"rss_start": rss_mib()}
    with mnemo.Memory.open(":memory:", embedder="hash") as warm:
        warm.insert_many(["warm"], user="u0")
        warm.recall("warm up", user="u0")
    out["rss_after_warmup"] = rss_mib()
    prof = cProfile.Profile()
    prof.enable()
    t0 = time.perf_counter()
    mem = mnemo.Memory.open(path)
    out["open_s"] = time.perf_counter() - t0
    prof.disable()
    out["rss_after_open"] = rss_mib()
    index, lexical = mem.store.index, mem.store.lexical.index
    out["index_matrix_mib"] = index._vecs.nbytes / 2**20
    out["index_ids_mib"] = (sys.getsizeof(index._ids) + sum(map(sys.getsizeof, index._ids))) / 2**20
    out["index_row_map_mib"] = sys.getsizeof(index._row) / 2**20
    out["lexical_row_map_mib"] = sys.getsizeof(lexical._row) / 2**20
    out["lexical_postings_mib"] = sum(r.nbytes + f.nbytes for chunks in lexical._post for r, f in chunks) / 2**20
    t0 = time.perf_counter()
    mem.recall("Where did Caroline go hiking?", user="u0")
    out["first_recall_s"] = time.perf_counter() - t0
    out["rss_after_first_recall"] = rss_mib()
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    mem.close()
    print(json.dumps(out, indent=1))
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(22)
    print(text.getvalue())


if __name__ == "__main__":
    main()
