"""Real-benchmark runners: LoCoMo and REALTALK retrieval, BEAM, MQuAKE-hard, PrefEval and MEME through mnemo.

    res = run_benchmark("locomo", recipes=["dense", "bm25", "hybrid"], limit=2)
    res.rows, res.aggregates              # one row per question and recipe; means by group
    write_results(out, benchmark=res.name, rows=res.rows, ...)   # see mnemo.eval.harness

Data comes from the loaders of `mnemo.eval.datasets` ($MNEMO_DATA_DIR). Every runner builds its
stores from the data alone, asks every question, and keeps a row for each (a question the runner
fails on is a row with its error, scored 0). Metric definitions are in `mnemo.eval.metrics`;
what each runner feeds them is in its docstring.

Questions are independent, as in the benchmarks' own protocols: the stores here do not record
accesses (`BenchStore.touch` does nothing), so one question's recall cannot reinforce, and so
reorder, the memories the next question sees. Recipes that share write and decay settings share
one store (they differ only in how they recall), so the data is written once per conversation.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from mnemo import recall as recall_stage
from mnemo.clock import SimulatedClock, utc
from mnemo.config import Config, RecallConfig, recipe
from mnemo.errors import ConfigError
from mnemo.eval import datasets, metrics
from mnemo.extract.questions import ask
from mnemo.memory import Memory
from mnemo.model import MemoryRecord
from mnemo.recall import ranking as ranking_stage
from mnemo.store import DuckDBStore as Store

Progress = Callable[[int, int, str], None]
BUDGETS = (256, 512, 1024, 2048)
EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)


class BenchStore(Store):
    """A store that does not record accesses, so that benchmark questions stay independent."""

    def touch(self, ids: list[str], at: datetime) -> None:
        """Do nothing: reinforcement by one question's recall must not reorder the next question's."""


@dataclass
class BenchResult:
    """What a runner returns: rows, aggregates by group, and everything results.json records."""

    name: str
    rows: list[dict[str, Any]]
    aggregates: dict[str, dict[str, float]]
    configs: dict[str, Config]
    provenance: dict[str, Any]
    checksums: dict[str, str]
    params: dict[str, Any] = field(default_factory=dict)


class CachedEmbedder:
    """An embedder that remembers the vectors of texts it has embedded (queries repeat across recipes and budgets)."""

    def __init__(self, inner: Any):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._cache: dict[str, Any] = {}

    def embed(self, texts: list[str]) -> Any:
        """Return the vectors of `texts`, embedding only the ones not seen before (in one batch)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            self._cache.update(zip(todo, self.inner.embed(todo), strict=True))
        return np.stack([self._cache[t] for t in texts]) if texts else self.inner.embed([])


class Bench:
    """The shared machinery of a run: one embedder and model client, stores by write config, dataset ids."""

    def __init__(self, recipes: Sequence[str], embedder: Any, llm: Any):
        from mnemo.embed import make_embedder
        from mnemo.llm import connect

        self.configs = {c.recipe: c for c in (recipe(r) for r in recipes)}
        if not self.configs:
            raise ConfigError("give at least one recipe")
        self.emb, self.llm = CachedEmbedder(make_embedder(embedder)), connect(llm)
        self.dia_of_turn: dict[str, str] = {}
        self.provenance: dict[str, Any] = {}

    def open(self, now: datetime) -> dict[str, Memory]:
        """Return one Memory per recipe whose clock reads `now`; recipes with equal write/decay share a store."""
        stores: dict[str, BenchStore] = {}
        out = {}
        for name, cfg in self.configs.items():
            key = json.dumps([asdict(cfg.write), asdict(cfg.decay)], sort_keys=True, default=str)
            if key not in stores:
                stores[key] = BenchStore(":memory:", embedder=self.emb.name, dim=self.emb.dim)
            out[name] = Memory(stores[key], self.emb, self.llm, SimulatedClock(now), cfg)
            self.provenance.setdefault(name, out[name].provenance())
        return out

    @staticmethod
    def writers(mems: dict[str, Memory]) -> list[Memory]:
        """Return one Memory per distinct store (the ones to write through)."""
        return list({id(m.store): m for m in mems.values()}.values())

    @staticmethod
    def close(mems: dict[str, Memory]) -> None:
        for m in Bench.writers(mems):
            m.close()

    def remember(self, mem: Memory, text: str, dia_id: str, *, user: str, session: str, at: datetime) -> None:
        """Remember one turn through the write path, noting which dataset turn its memories come from."""
        self.dia_of_turn[mem.remember(text, user=user, session=session, at=at).turn_id] = dia_id

    def remember_many(self, mem: Memory, turns: Sequence[tuple[str, str, str, datetime]], *, user: str) -> None:
        """Remember (text, dia_id, session, at) turns in one `Memory.remember_many` call, noting their dataset ids."""
        reports = mem.remember_many([{"text": text, "session": session, "at": at} for text, _, session, at in turns],
                                    user=user)
        for report, (_, dia_id, _, _) in zip(reports, turns, strict=True):
            self.dia_of_turn[report.turn_id] = dia_id

    def dia(self, memory: MemoryRecord) -> str | None:
        """Return the dataset turn id a memory came from (bulk meta, else the turn it was extracted from)."""
        return memory.meta.get("dia_id") or self.dia_of_turn.get(memory.turn_id or "")

    def result(self, name: str, rows: list[dict[str, Any]], aggregates: dict[str, dict[str, float]],
               ds: datasets.Dataset, **params: Any) -> BenchResult:
        params.update(embedder=self.emb.name, dropped=len(ds.dropped), heldout_excluded=len(ds.heldout_excluded))
        return BenchResult(name, rows, aggregates, self.configs, self.provenance, ds.checksums, params)


def ranking(mem: Memory, query: str, *, user: str, qvec: Any = None, cfg: RecallConfig | None = None
            ) -> list[tuple[str, float]]:
    """Return recall's fused candidate ranking for `query` (memory id, fused relevance), best first, before packing.

    The same steps as `mnemo.recall.recall` up to fusion: `hits` (the query vector, dense and
    lexical search), then `order` (`ranking.fuse` and the candidates recall considers).
    `qvec`, a precomputed embedding of `query`, is used only when name resolution leaves the query as is.
    """
    cfg = cfg or mem.config.recall
    dense, lexical = hits(mem, query, user=user, qvec=qvec, k=cfg.candidates, lexical=cfg.lexical_weight > 0)
    then = hits_then(mem, query, user=user, qvec=qvec, k=cfg.candidates) if cfg.time_scope else None
    return order(dense, lexical, cfg, then)


def hits(mem: Memory, query: str, *, user: str, qvec: Any = None, k: int = 50, lexical: bool = True
         ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Return the top `k` dense and lexical hits of `query` for `user`, as recall retrieves them.

    The query vector is `recall.query_vector` (the query embedded with the user's own names
    resolved); `qvec` is used only when name resolution leaves the query as is. With `lexical`
    False the lexical list is empty (recall skips BM25 when its weight is 0).
    """
    qvec = _query_vector(mem, query, user, qvec)
    dense = mem.store.search_dense(qvec, k, user=user)
    return dense, (mem.store.search_lexical(query, k, user=user) if lexical else [])


def hits_then(mem: Memory, query: str, *, user: str, qvec: Any = None, k: int = 50
              ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]] | None:
    """Return `hits` among the memories said in the time `query` names, as recall's time scope retrieves them.

    None when the question names no time (`ranking.time_scope`).
    """
    names = [user, *mem.store.self_names(user)]
    scope = ranking_stage.time_scope(ask(recall_stage.resolve_self(query, names)), mem.clock.now(), None)
    if scope is None:
        return None
    qvec = _query_vector(mem, query, user, qvec)
    return (mem.store.search_dense(qvec, k, user=user, filters=scope),
            mem.store.search_lexical(query, k, user=user, filters=scope))


def _query_vector(mem: Memory, query: str, user: str, qvec: Any) -> Any:
    """Return recall's query vector (`recall.query_vector`); `qvec` is used when name resolution leaves `query` as is."""
    names = [user, *mem.store.self_names(user)]
    if qvec is None or recall_stage.resolve_self(query, names) != query:
        qvec = recall_stage.query_vector(mem.embedder, query, names)
    return qvec


def order(dense: list[tuple[str, float]], lexical: list[tuple[str, float]], cfg: RecallConfig,
          then: tuple[list[tuple[str, float]], list[tuple[str, float]]] | None = None) -> list[tuple[str, float]]:
    """Return the candidates recall considers under `cfg`, by fused relevance, best first.

    Each hit list is cut to `cfg.candidates` (lists are best first, as the store returns them)
    and fused by `ranking.fuse`; the candidates are the dense hits when the dense weight is above
    0, plus the lexical hits when the lexical weight is. With `cfg.time_scope` and `then` (the
    hits said in the time the question names, `hits_then`), `ranking.fuse_scoped` ranks those
    first. Ties in fused relevance keep the order dense-then-lexical hits arrive in
    (deterministic for one store; the store breaks its own score ties by memory id, which
    differs between runs).
    """
    w = cfg.lexical_weight
    dense = dense[:cfg.candidates] if w < 1 else []
    lexical = lexical[:cfg.candidates] if w > 0 else []
    fused = ranking_stage.fuse(dense, lexical, cfg)
    if cfg.time_scope and then is not None:
        dense_in = then[0][:cfg.candidates] if w < 1 else []
        lexical_in = then[1][:cfg.candidates] if w > 0 else []
        fused = ranking_stage.fuse_scoped(fused, ranking_stage.fuse(dense_in, lexical_in, cfg), cfg)
        dense, lexical = dense + dense_in, lexical + lexical_in
    wanted = list(dict.fromkeys([m for m, _ in dense] + [m for m, _ in lexical]))
    ranked = sorted(range(len(wanted)), key=lambda i: (-fused[wanted[i]]["fused"], i))
    return [(wanted[i], fused[wanted[i]]["fused"]) for i in ranked]


def run_of(dias: Sequence[str | None]) -> dict[str, float]:
    """Return an ir-measures run from ranked dataset ids: first occurrence counts, scores strictly decreasing."""
    run: dict[str, float] = {}
    for d in dias:
        if d is not None and d not in run:
            run[d] = float(len(dias) - len(run))
    return run


def _means(rows: list[dict[str, Any]], keys: Sequence[str]) -> dict[str, float]:
    """Return the mean of each key over the rows where it is a number (not NaN); 'n' is the row count."""
    out: dict[str, float] = {"n": float(len(rows))}
    for k in keys:
        vals = [r[k] for r in rows if isinstance(r.get(k), (int, float)) and not math.isnan(r[k])]
        out[k] = statistics.fmean(vals) if vals else math.nan
    return out


def _group(rows: list[dict[str, Any]], keys: Sequence[str], by: Callable[[dict[str, Any]], list[str]]
           ) -> dict[str, dict[str, float]]:
    """Return means of `keys` per group; `by(row)` names every group a row belongs to."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for g in by(r):
            groups.setdefault(g, []).append(r)
    return {g: _means(rs, keys) for g, rs in groups.items()}


def _session_time(session: datasets.Session, previous: datetime) -> datetime:
    """Return a session's time (UTC), or a day after the previous one when the dataset gives none."""
    return utc(session.date_time) if session.date_time else previous + timedelta(days=1)


def session_times(conv: datasets.Conversation) -> list[datetime]:
    """Return the time of each session of `conv`, in order (`_session_time` from EPOCH on)."""
    times, at = [], EPOCH
    for s in conv.sessions:
        at = _session_time(s, at)
        times.append(at)
    return times


def turn_meta(turn: datasets.DialogTurn, conv: datasets.Conversation) -> dict[str, Any]:
    """Return {"speaker", "addressees"} of a turn: recall reads "I" as the speaker and "you" as the others."""
    return {"speaker": turn.speaker, "addressees": [p for p in conv.speakers if p != turn.speaker]}


def add_turns(writer: Any, conv: datasets.Conversation, times: Sequence[datetime], vecs: Any) -> dict[str, str]:
    """Store every turn of `conv` verbatim as an episodic memory at its session's time; return {memory id: dia_id}.

    `vecs` holds the turns' vectors in conversation order (one embedding pass for every writer).
    Each turn's meta holds its dia_id and `turn_meta` (who speaks, to whom).
    """
    dia_of: dict[str, str] = {}
    pos = 0
    for s, when in zip(conv.sessions, times, strict=True):
        n = len(s.turns)
        ids = writer.add_many([t.document for t in s.turns], user=conv.id, kind="episodic", category="event",
                              metas=[{"dia_id": t.dia_id, **turn_meta(t, conv)} for t in s.turns], at=when,
                              vectors=vecs[pos:pos + n])
        dia_of.update(zip(ids, (t.dia_id for t in s.turns), strict=True))
        pos += n
    return dia_of


# LoCoMo and REALTALK: turn- and session-level retrieval, budgeted recall ----------------------

DIALOG_KEYS = ("R@5", "R@10", "nDCG@10", "RR", "S_R@5", "S_R@10", "S_nDCG@10", "recall_any@10", "recall_all@10")


def run_dialog(name: str, recipes: Sequence[str] = ("dense", "bm25", "hybrid"), *, limit: int | None = None,
               embedder: Any = "minilm", llm: Any = "offline", budgets: Sequence[int] = BUDGETS,
               progress: Progress | None = None) -> BenchResult:
    """Return turn- and session-level retrieval and budgeted recall on LoCoMo or REALTALK, by category.

    Every turn of both speakers is stored as an episodic memory with meta {"dia_id"} (bulk
    `add_many`, one store per conversation, the session's date as its time). Per question and
    recipe, the ranking is `ranking` (recall's fused candidates); ir-measures gives R@5, R@10,
    nDCG@10 and RR against the cleaned evidence turns, and again over sessions (S_*, the turn
    ranking collapsed to sessions in order of first appearance, gold = the evidence's sessions).
    recall_any/all@10 are LongMemEval's (`metrics.retrieval_scores`). Budgeted recall: for each
    budget B, `Memory.recall` with budget B; cover@B = the share of evidence turns among the packed
    memories, tokens@B = tokens used (0 when recall abstains). Aggregates: "main" (categories 1-4),
    and each category (LoCoMo 5 = adversarial, reported apart). Questions without usable evidence
    are dropped by the loader and counted in params["dropped"].
    """
    ds = datasets.load(name)
    convs = ds.conversations[:limit] if limit else ds.conversations
    bench = Bench(recipes, embedder, llm)
    rows, runs, qrels, sruns, sqrels, corpora = [], {}, {}, {}, {}, {}
    for ci, conv in enumerate(convs):
        qs = [q for q in ds.questions if q.conversation_id == conv.id]
        turns = conv.turns
        corpus = [t.dia_id for t in turns]
        vecs = bench.emb.embed([t.document for t in turns])
        times = session_times(conv)
        mems = bench.open(max(times) + timedelta(days=1))
        dia_of: dict[str, str] = {}
        for w in bench.writers(mems):
            dia_of.update(add_turns(w, conv, times, vecs))
        qvecs = bench.emb.embed([q.question for q in qs]) if qs else []
        for rname, mem in mems.items():
            for q, qv in zip(qs, qvecs, strict=True):
                key = f"{q.id}@{rname}"
                row = {"qid": key, "question_id": q.id, "conversation": conv.id, "recipe": rname,
                       "category": q.category, "category_name": q.category_name, "n_gold": len(q.evidence),
                       "error": None}
                ranked = [dia_of.get(m) for m, _ in ranking(mem, q.question, user=conv.id, qvec=qv)]
                runs[key], qrels[key] = run_of(ranked), dict.fromkeys(q.evidence, 1)
                sessions = [metrics.locomo_session(d) for d in ranked if d]
                sruns[key] = run_of(sessions)
                sqrels[key] = dict.fromkeys((metrics.locomo_session(e) for e in q.evidence), 1)
                corpora[key] = corpus
                for b in budgets:
                    r = mem.recall(q.question, user=conv.id, budget_tokens=b)
                    got = {bench.dia(p.memory) for p in r.memories}
                    row[f"cover@{b}"] = len(got & set(q.evidence)) / len(q.evidence)
                    row[f"tokens@{b}"] = float(r.tokens_used)
                    row[f"abstained@{b}"] = float(r.confidence == "unknown")
                rows.append(row)
        Bench.close(mems)
        if progress:
            progress(ci + 1, len(convs), conv.id)
    _score_dialog(rows, runs, qrels, sruns, sqrels, corpora)
    budget_keys = [f"{k}@{b}" for b in budgets for k in ("cover", "tokens", "abstained")]
    keys = list(DIALOG_KEYS) + budget_keys
    main = {1, 2, 3, 4} if name == "locomo" else {1, 2, 3}
    aggregates = _group(rows, keys, lambda r: [f"{r['recipe']} | main"] * (r["category"] in main)
                        + [f"{r['recipe']} | cat {r['category']} {r['category_name']}"])
    return bench.result(name, rows, aggregates, ds, limit=limit, budgets=list(budgets),
                        main_categories=sorted(main))


def _score_dialog(rows: list[dict[str, Any]], runs: dict, qrels: dict, sruns: dict, sqrels: dict,
                  corpora: dict) -> None:
    """Fill each row's ranking metrics: ir-measures at turn and session level, LongMemEval recall_any/all."""
    if not rows:
        return
    by_key = {r["qid"]: r for r in rows}
    turn_rows, _ = metrics.ranking_metrics(runs, qrels, ks=(5, 10))
    sess_rows, _ = metrics.ranking_metrics(sruns, sqrels, ks=(5, 10))
    for tr in turn_rows:
        by_key[tr["qid"]].update({k: tr[k] for k in ("R@5", "R@10", "nDCG@10", "RR")})
        by_key[tr["qid"]]["error"] = tr["error"]
    for sr in sess_rows:
        by_key[sr["qid"]].update({f"S_{k}": sr[k] for k in ("R@5", "R@10", "nDCG@10")})
    ranked = {k: list(v) for k, v in runs.items()}
    lme_rows, _ = metrics.retrieval_scores(ranked, {k: list(v) for k, v in qrels.items()}, ks=(10,),
                                           corpora=corpora)
    for lr in lme_rows:
        by_key[lr["qid"]].update({"recall_any@10": lr["recall_any@10"], "recall_all@10": lr["recall_all@10"]})


def run_locomo(recipes: Sequence[str] = ("dense", "bm25", "hybrid"), **kw: Any) -> BenchResult:
    """Return LoCoMo retrieval (see `run_dialog`); `limit` counts conversations."""
    return run_dialog("locomo", recipes, **kw)


def run_realtalk(recipes: Sequence[str] = ("dense", "bm25", "hybrid"), **kw: Any) -> BenchResult:
    """Return REALTALK retrieval of evidence turns (see `run_dialog`); `limit` counts chats."""
    return run_dialog("realtalk", recipes, **kw)


BENCHMARKS = ("locomo", "realtalk", "beam", "mquake", "prefeval", "meme", "writes")
# Retrieval benchmarks compare the retrievers; the others run the default write + recall path.
DEFAULT_RECIPES = {"locomo": ("dense", "bm25", "hybrid"), "realtalk": ("dense", "bm25", "hybrid")}
# With --folds: the fixed recipes reported beside the fold-selected one (hybrid is the old default).
FOLD_RECIPES = ("dense", "bm25", "hybrid", "default")


def run_benchmark(name: str, recipes: Sequence[str] | None = None, **kwargs: Any) -> BenchResult:
    """Return the result of benchmark `name` (one of BENCHMARKS) under `recipes` (its defaults when None).

    Keyword arguments go to the runner: limit, embedder, llm, progress, and the runner's own
    (budgets for locomo / realtalk; budget; write for mquake; form and inter_turns for prefeval; budget for
    meme, whose one episode is a development check, never a score: see `bench_meme`; split for
    writes, the write-path benchmark of `bench_writes`).
    """
    from mnemo.eval import bench_meme, bench_updates, bench_writes

    runners: dict[str, Callable[..., BenchResult]] = {
        "locomo": run_locomo, "realtalk": run_realtalk, "beam": bench_updates.run_beam,
        "mquake": bench_updates.run_mquake, "prefeval": bench_updates.run_prefeval, "meme": bench_meme.run_meme,
        "writes": bench_writes.run_writes,
    }
    if name not in runners:
        raise ConfigError(f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)} (or scenarios)")
    return runners[name](tuple(recipes or DEFAULT_RECIPES.get(name, ("default",))), **kwargs)


# One entry point for `mnemo eval` ------------------------------------------------------------

# The columns a summary table shows per benchmark (results.json keeps every metric).
SUMMARY_COLUMNS = {
    "scenarios": ["probes", "pass_rate", "context_recall", "stale", "forgetting_precision", "forgetting_recall",
                  "collateral", "abstention_correct", "tokens", "RR", "errors"],
    "dialog": ["n", "R@5", "R@10", "R@10_sd", "nDCG@10", "nDCG@10_sd", "S_R@5", "S_R@10", "S_nDCG@10",
               "cover@256", "cover@512", "cover@1024", "cover@2048", "tokens@512", "tokens@2048"],
    "beam": ["n", "current", "stale", "superseded_shown", "both_surfaced", "abstained", "evidence_recall", "tokens"],
    "mquake": ["n", "current_top1", "current_packed", "stale", "chain_recall", "stale_shown", "cascade_ok", "tokens"],
    "prefeval": ["n", "R@5", "R@10", "RR", "pref_packed", "abstained", "tokens"],
    "meme": ["n", "passed", "real_pass", "context_recall", "leaked", "stale", "abstained", "items", "tokens"],
}


_SHORT_SYSTEMS = {"no_memory": "none", "full_history": "full", "recent_only": "recent", "naive_rag": "rag"}
_SHORT_METRICS = {"pass_rate": "pass rate", "context_recall": "ctx recall", "forgetting_precision": "forget prec",
                  "forgetting_recall": "forget rec", "abstention_correct": "abstain ok"}
_COUNTS = frozenset({"n", "probes", "errors"})  # columns that count things: shown whole, never "4.000"


def summary(benchmark: str, aggregates: dict[str, dict[str, float]]) -> tuple[list[str], list[list[str]]]:
    """Return (header, rows) of a summary table: one row per aggregate group, the benchmark's main columns."""
    if benchmark == "writes":
        from mnemo.eval.bench_writes import summary as writes_summary

        return writes_summary(aggregates)
    wanted = SUMMARY_COLUMNS["dialog" if benchmark in ("locomo", "realtalk") else benchmark]
    present = [c for c in wanted if any(c in a for a in aggregates.values())]

    def cell(column: str, v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        whole = isinstance(v, float) and v == int(v) and (abs(v) >= 10 or column in _COUNTS)
        return f"{v:.0f}" if whole else f"{v:.3f}"

    return ["group", *present], [[g, *(cell(c, a.get(c)) for c in present)] for g, a in aggregates.items()]


def narrow(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """Return a summary table turned for a terminal: metrics down, groups across, short names.

    Five systems and eleven scenario metrics read at 80 columns this way.
    """
    groups = [_SHORT_SYSTEMS.get(r[0], r[0]) for r in rows]
    return ["metric", *groups], [[_SHORT_METRICS.get(c, c), *(r[k + 1] for r in rows)]
                                 for k, c in enumerate(header[1:])]


def run_eval(benchmark: str, *, recipes: Sequence[str] | None = None, llm: str = "offline",
             embedder: str | None = None, out: str | Path | None = None, limit: int | None = None,
             scenario_dir: str | Path | None = None, baselines: bool = True, progress: Progress | None = None,
             **options: Any) -> tuple[dict[str, dict[str, float]], Path, Path]:
    """Run `benchmark` ("scenarios" or one of BENCHMARKS), write its results, return (aggregates, paths).

    Scenarios run through `run_scenarios` (the recipes plus, with `baselines`, the four baselines);
    the real benchmarks through `run_benchmark` with `options` (budgets, budget, write, form,
    inter_turns), or, for locomo / realtalk with `folds`, through `folds.run_folds` (out-of-fold
    selection). Results go to `out` (default experiments/runs/eval/<benchmark>).
    """
    from mnemo.eval.baselines import BASELINES
    from mnemo.eval.harness import run_scenarios, write_results
    from mnemo.eval.scenarios import load_scenarios

    started = time.time()
    folder = Path(out) if out else Path("experiments/runs/eval") / benchmark
    if benchmark == "scenarios":
        names = list(recipes or ["default"])
        scenarios = load_scenarios(scenario_dir)[:limit] if limit else load_scenarios(scenario_dir)
        rows, aggregates, provenance = run_scenarios(
            scenarios, names, BASELINES if baselines else (), embedder=embedder or "auto", llm=llm, progress=progress)
        checksums = {f"scenarios/{Path(s.path).name}": _sha256(Path(s.path)) for s in scenarios if s.path}
        paths = write_results(folder, benchmark="scenarios", rows=rows, aggregates=aggregates,
                              configs={n: recipe(n) for n in names}, provenance=provenance, checksums=checksums,
                              params={"llm": llm, "embedder": embedder or "auto", "limit": limit}, started=started)
        return aggregates, *paths
    if options.get("folds"):
        if benchmark not in ("locomo", "realtalk"):
            raise ConfigError(f"--folds applies to locomo and realtalk, not {benchmark}")
        from mnemo.eval.folds import run_folds

        res = run_folds(benchmark, tuple(recipes or FOLD_RECIPES), folds=options["folds"], limit=limit,
                        embedder=embedder or "minilm", llm=llm, rerank=bool(options.get("rerank")),
                        progress=progress)
    else:
        options.pop("folds", None)
        options.pop("rerank", None)
        res = run_benchmark(benchmark, recipes, limit=limit, embedder=embedder or "minilm", llm=llm,
                            progress=progress, **options)
    paths = write_results(folder, benchmark=res.name, rows=res.rows, aggregates=res.aggregates, configs=res.configs,
                          provenance=res.provenance, checksums=res.checksums,
                          params={"llm": llm, **res.params}, started=started)
    return res.aggregates, *paths


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
