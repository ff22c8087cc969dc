"""The write path's cost: extraction throughput and the cost of `remember` per turn, before and after.

    .venv/bin/python benchmarks/bench_write.py --out benchmarks/results/write.json
    .venv/bin/python benchmarks/bench_write.py --before ../wt-before --out ...   # the same, side by side with a checkout
    .venv/bin/python benchmarks/bench_write.py --table benchmarks/results/write.json
    .venv/bin/python benchmarks/bench_write.py --locomo remember_many,remember   # all of LoCoMo, both ways
    .venv/bin/python benchmarks/bench_write.py --profile-many 100000 --turns 300  # cProfile of remember_many
    .venv/bin/python benchmarks/bench_write.py --store /dev/shm/m1.duckdb --turns 300 --before ../wt-before

Turns: the user turns of the shared LoCoMo conversations when MNEMO_DATA_DIR holds them, else
the project's own scenarios. Each side (this checkout, and with `--before` another checkout of
mnemo) runs in its own subprocess with the same turns, the same embedder and the same machine:

* extract: turns / s and sentences / s of the offline extractor alone (`extract_offline`), after
  one warm-up turn (the parser's load is reported separately as `load_s`);
* remember: the median and p95 milliseconds of `Memory.remember` per turn on an in-memory store
  already holding N memories of other users (N = 0, 1k, 10k; bulk-added, so the store size is
  what varies, not the user's own history), and turns / s over the run;
* remember_many: the same turns in one `Memory.remember_many` call on a fresh store of the same
  size, right after `remember` in the same subprocess (turns / s, and the ratio to `remember`'s);
* `--locomo`: every shared LoCoMo conversation ingested (wall time, memories stored);
* `--store FILE`: `remember_many` on a copy of an existing store (the 1M store), sides alternating.

Ratios in the table are after / before, measured in the same invocation, one side after the
other (not interleaved: each side loads its own parser).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def locomo_turns() -> list[str]:
    """Return every turn of LoCoMo's shared conversations in order, or [] when MNEMO_DATA_DIR does not hold them."""
    data = os.environ.get("MNEMO_DATA_DIR")
    path = Path(data) / "locomo" / "locomo10_shared_8conv.json" if data else None
    out: list[str] = []
    if path is not None and path.exists():
        for conv in json.loads(path.read_text()):
            c = conv["conversation"]
            for key in sorted((k for k in c if k.startswith("session_") and k.split("_")[-1].isdigit()),
                              key=lambda k: int(k.split("_")[-1])):
                out += [t["text"] for t in c[key] if t.get("text")]
    return out


def turns(limit: int) -> list[str]:
    """Return up to `limit` user turns: LoCoMo's shared conversations if present, else the project's scenarios."""
    out = locomo_turns()
    if not out:
        import yaml

        for f in sorted((ROOT / "data" / "scenarios").glob("*.yaml")):
            for s in yaml.safe_load(f.read_text())["sessions"]:
                out += [t for t in s["turns"] if isinstance(t, str)]
    return out[:limit]


def side(root: str, embedder: str, n_turns: int, sizes: list[int]) -> dict:
    """Run one side in a subprocess with `root` first on sys.path; return its measurements."""
    code = f"""
import json, statistics, sys, time
from datetime import datetime, timedelta, timezone
# Every turn at a fixed time, a minute apart, on both paths: the stores are comparable memory for memory.
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import mnemo
from mnemo.extract import extract_offline
extract_offline("I live in Lisbon.")
load = time.perf_counter() - t0
texts = json.loads(sys.stdin.read())
t = time.perf_counter()
claims = sum(len(extract_offline(x)) for x in texts)
ex = time.perf_counter() - t
from mnemo.normalise import sentences
n_sent = sum(len(sentences(x)) for x in texts)
out = {{"root": {root!r}, "mnemo": mnemo.__file__, "load_s": load, "turns": len(texts), "sentences": n_sent,
        "claims": claims, "extract_turns_per_s": len(texts) / ex, "extract_sentences_per_s": n_sent / ex,
        "remember": {{}}}}
for size in {sizes!r}:
    mem = mnemo.Memory.open(":memory:", embedder={embedder!r})
    if size:
        filler = [f"Filler memory number {{i}} about topic {{i % 97}}." for i in range(size)]
        for k in range(0, size, 5000):
            mem.insert_many(filler[k:k + 5000], user="others")
        # The fillers' BM25 postings are built by the first lexical search, as opening a saved store loads
        # them: made here, not inside the first timed turn (since round 5 of #20; before, that turn paid it).
        mem.recall("Where does Lisbon come in?", user="others")
    mem.remember("I live in Lisbon.", user="u", session="s", at=T0)
    times = []
    t = time.perf_counter()
    for i, x in enumerate(texts):
        s = time.perf_counter()
        mem.remember(x, user="u", session="s", at=T0 + timedelta(minutes=i + 1))
        times.append((time.perf_counter() - s) * 1000)
    total = time.perf_counter() - t
    times.sort()
    out["remember"][str(size)] = {{"p50_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))],
                                  "turns_per_s": len(texts) / total, "memories": len(mem.memories("u"))}}
    mem.close()
    if not hasattr(mnemo.Memory, "remember_many"):
        continue
    # The same turns through one remember_many call, on a store of the same size, right after.
    mem = mnemo.Memory.open(":memory:", embedder={embedder!r})
    if size:
        for k in range(0, size, 5000):
            mem.insert_many(filler[k:k + 5000], user="others")
        mem.recall("Where does Lisbon come in?", user="others")
    mem.remember("I live in Lisbon.", user="u", session="s", at=T0)
    t = time.perf_counter()
    mem.remember_many([{{"text": x, "at": T0 + timedelta(minutes=i + 1)}} for i, x in enumerate(texts)],
                      user="u", session="s")
    total = time.perf_counter() - t
    out["remember"][str(size)].update(many_turns_per_s=len(texts) / total, many_memories=len(mem.memories("u")))
    try:  # texts parsed by the parse worker (a second process) and here, so far in this process
        from mnemo.extract.parse_worker import PARSED
        out["remember"][str(size)]["many_parsed"] = dict(PARSED)
    except ImportError:  # a checkout from before the parse worker
        pass
    mem.close()
print(json.dumps(out))
"""
    texts = turns(n_turns)
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(report: dict) -> str:
    """Return the report as a Markdown table: after, before and after / before per measure."""
    after, before = report["after"], report.get("before")
    rows = [("extract turns/s", "extract_turns_per_s"), ("extract sentences/s", "extract_sentences_per_s"),
            ("parser load s", "load_s")]
    lines = ["| measure | after | before | after / before |", "|---|---|---|---|"]
    for label, key in rows:
        b = before[key] if before else None
        lines.append(f"| {label} | {after[key]:.1f} | {b:.1f} | {after[key] / b:.2f}x |" if b else
                     f"| {label} | {after[key]:.1f} | - | - |")
    for size, a in after["remember"].items():
        b = before["remember"].get(size) if before else None
        for label, key in (("p50 ms", "p50_ms"), ("p95 ms", "p95_ms"), ("turns/s", "turns_per_s")):
            cell = f"| remember at {int(size):,} others, {label} | {a[key]:.1f} |"
            lines.append(cell + (f" {b[key]:.1f} | {a[key] / b[key]:.2f}x |" if b else " - | - |"))
        if "many_turns_per_s" in a:
            lines.append(f"| remember_many at {int(size):,} others, turns/s (vs remember, same run) | "
                         f"{a['many_turns_per_s']:.1f} | {a['turns_per_s']:.1f} | "
                         f"{a['many_turns_per_s'] / a['turns_per_s']:.2f}x |")
            lines.append(f"| memories stored (remember_many / remember) | {a['many_memories']} | {a['memories']} | - |")
            if b and "many_turns_per_s" in b:
                lines.append(f"| remember_many at {int(size):,} others, turns/s (after vs before) | "
                             f"{a['many_turns_per_s']:.1f} | {b['many_turns_per_s']:.1f} | "
                             f"{a['many_turns_per_s'] / b['many_turns_per_s']:.2f}x |")
            if "many_parsed" in a:
                lines.append(f"| texts parsed so far by the parse worker / here (after) | {a['many_parsed']['worker']} | "
                             f"{a['many_parsed']['here']} | - |")
    return "\n".join(lines)


def ingest_locomo(through: str) -> dict:
    """Ingest every shared LoCoMo conversation through `remember_many` (one call a conversation) or `remember`.

    Each conversation is its own user; a session's turns are a minute apart from the session's time.
    Returns wall time, turns, memories stored (active and all) and turns / s.
    """
    from datetime import timedelta

    import mnemo
    from mnemo.eval import datasets
    from mnemo.eval.bench.common import session_times
    from mnemo.extract import extract_offline

    extract_offline("I live in Lisbon.")  # the parser's load is not ingest time
    ds = datasets.load("locomo")
    mem = mnemo.Memory.open(":memory:", embedder="hash")
    n = 0
    started = time.perf_counter()
    for conv in ds.conversations:
        turns = [{"text": t.text, "session": s.id, "at": when + timedelta(minutes=i)}
                 for s, when in zip(conv.sessions, session_times(conv), strict=True)
                 for i, t in enumerate(s.turns)]
        n += len(turns)
        if through == "remember_many":
            mem.remember_many(turns, user=conv.id)
        else:
            for t in turns:
                mem.remember(t["text"], user=conv.id, session=t["session"], at=t["at"])
    wall = time.perf_counter() - started
    out = {"through": through, "conversations": len(ds.conversations), "turns": n, "wall_s": wall,
           "turns_per_s": n / wall, "memories_active": len(mem.memories()),
           "memories_all": len(mem.memories(include_inactive=True))}
    mem.close()
    return out


def profile_many(size: int, n_turns: int, top: int = 40, embedder: str = "hash") -> str:
    """Return cProfile's top functions over one `remember_many` of `n_turns` turns beside `size` others' memories.

    The store is built as `side` builds it (fillers of another user, one turn of the user's own);
    the first lexical search after the bulk add, which analyses the fillers, is made before the
    profile (a recall), so the profile is the turns' own cost.
    """
    import cProfile
    from datetime import datetime, timedelta, timezone

    import mnemo

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from profiling import report

    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    texts = turns(n_turns)
    mem = mnemo.Memory.open(":memory:", embedder=embedder)
    filler = [f"Filler memory number {i} about topic {i % 97}." for i in range(size)]
    for k in range(0, size, 5000):
        mem.insert_many(filler[k:k + 5000], user="others")
    mem.remember("I live in Lisbon.", user="u", session="s", at=t0)
    mem.recall("Where does Lisbon come in?", user="others")
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    mem.remember_many([{"text": x, "at": t0 + timedelta(minutes=i + 1)} for i, x in enumerate(texts)],
                      user="u", session="s")
    prof.disable()
    wall = time.perf_counter() - started
    stored = len(mem.memories("u"))
    mem.close()
    return (f"remember_many of {len(texts)} turns beside {size:,} others: {len(texts) / wall:.1f} turns/s under "
            f"cProfile, {stored} memories\n" + report(prof, top))


def on_store(root: str, store: Path, n_turns: int, warm: bool = False) -> dict:
    """Run `remember_many` of `n_turns` turns for a new user on a copy of the `store` file, in a subprocess of `root`.

    The copy (the DuckDB file and everything saved beside it: postings, index matrix, journal) is
    made in the store's own folder before each run and removed after, so every run opens the same
    store with its saved indexes. Each run: open, one `remember` (the user's first turn), then the
    turns in one call, a minute apart. Returns the run's open seconds, turns / s and memories.
    With `warm`, a checkout with a parse worker starts it and waits until it is ready before the clock
    starts (a process that has written before); otherwise the worker starts inside the timed call.
    """
    import shutil

    code = f"""
import json, sys, time
from datetime import datetime, timedelta, timezone
sys.path.insert(0, {root!r})
import mnemo
from mnemo.extract import extract_offline
extract_offline("I live in Lisbon.")  # the parser's load is not the write's cost
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
texts = json.loads(sys.stdin.read())
t = time.perf_counter()
mem = mnemo.Memory.open(sys.argv[1])
open_s = time.perf_counter() - t
mem.remember("I live in Lisbon.", user="writer", session="s", at=T0)
if {warm!r}:
    try:
        from mnemo.extract.parse_worker import start_parse_worker
        w = start_parse_worker()
        while w is not None and not w.ready and w.failed is None:
            time.sleep(0.05)
    except ImportError:  # a checkout from before the parse worker
        pass
t = time.perf_counter()
mem.remember_many([{{"text": x, "at": T0 + timedelta(minutes=i + 1)}} for i, x in enumerate(texts)],
                  user="writer", session="s")
wall = time.perf_counter() - t
out = {{"root": {root!r}, "warm": {warm!r}, "open_s": open_s, "turns": len(texts), "many_turns_per_s": len(texts) / wall,
        "memories": len(mem.memories("writer")), "store_size": mem.store.stats().get("memories")}}
try:
    from mnemo.extract.parse_worker import PARSED
    out["many_parsed"] = dict(PARSED)
except ImportError:  # a checkout from before the parse worker
    pass
mem.close()
print(json.dumps(out))
"""
    copy = store.with_name(f"copy-{os.getpid()}-{store.name}")
    for f in store.parent.glob(store.name + "*"):
        shutil.copyfile(f, copy.parent / (copy.name + f.name[len(store.name):]))
    try:
        done = subprocess.run([sys.executable, "-c", code, str(copy)], input=json.dumps(turns(n_turns)),
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root}, check=True)
        return {**json.loads(done.stdout.strip().splitlines()[-1]), "load": os.getloadavg()}
    finally:
        for f in copy.parent.glob(copy.name + "*"):
            f.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="another mnemo checkout to measure side by side")
    ap.add_argument("--embedder", default="hash", help="hash | minilm")
    ap.add_argument("--turns", type=int, default=400)
    ap.add_argument("--sizes", default="0,1000,10000")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path, help="print the table of a saved report and exit")
    ap.add_argument("--locomo", default="", help="ingest all of LoCoMo through remember_many, remember, or both "
                                                 "(comma-separated, in this process) and exit")
    ap.add_argument("--profile-many", type=int, metavar="N",
                    help="print cProfile of one remember_many of --turns turns beside N others' memories and exit")
    ap.add_argument("--store", type=Path, help="remember_many of --turns turns on a copy of this store file "
                                               "(e.g. the 1M store of probe_open_1m.py build), both sides "
                                               "alternating --rounds times, and exit")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warm-worker", action="store_true", help="with --store: the parse worker is started and "
                                                               "ready before the timed call")
    args = ap.parse_args()
    if args.store:
        report = {"store": str(args.store), "turns": args.turns, "load_before": os.getloadavg(), "runs": []}
        for _ in range(args.rounds):
            for root in [str(ROOT), *([str(Path(args.before).resolve())] if args.before else [])]:
                report["runs"].append(on_store(root, args.store, args.turns, args.warm_worker))
        if args.out:
            args.out.write_text(json.dumps(report, indent=2))
        for r in report["runs"]:
            print(f"{r['root']}{' (worker warm)' if r.get('warm') else ''}: open {r['open_s']:.1f} s, remember_many {r['many_turns_per_s']:.1f} turns/s, "
                  f"{r['memories']} memories, parsed {r.get('many_parsed', '-')}, load {r['load'][0]:.1f}")
        return
    if args.profile_many is not None:
        print(profile_many(args.profile_many, args.turns, embedder=args.embedder))
        return
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    if args.locomo:
        sys.path.insert(0, str(ROOT))
        runs = [ingest_locomo(w.strip()) for w in args.locomo.split(",") if w.strip()]
        report = {"locomo_ingest": runs, "load": os.getloadavg()}
        if args.out:
            args.out.write_text(json.dumps(report, indent=2))
        for r in runs:
            print(f"{r['through']}: {r['turns']} turns of {r['conversations']} conversations in {r['wall_s']:.1f} s "
                  f"({r['turns_per_s']:.1f} turns/s), {r['memories_active']} active memories "
                  f"({r['memories_all']} with tombstones)")
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    started = time.time()
    report = {"embedder": args.embedder, "turns": args.turns, "sizes": sizes,
              "load_before": os.getloadavg(), "after": side(str(ROOT), args.embedder, args.turns, sizes)}
    if args.before:
        report["before"] = side(str(Path(args.before).resolve()), args.embedder, args.turns, sizes)
    report["load_after"], report["wall_s"] = os.getloadavg(), time.time() - started
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    print(table(report))
    print(f"median of per-turn times; load average {report['load_before'][0]:.1f} -> {report['load_after'][0]:.1f}")


if __name__ == "__main__":
    main()
