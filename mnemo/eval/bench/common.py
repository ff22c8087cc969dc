"""What every benchmark runner shares: the `Bench` machinery, recall's ranking, grouping, and the registry.

    @register("locomo")                      # a benchmark module lists its runner by name
    def run_locomo(recipes, **kw) -> BenchResult: ...
    RUNNERS["locomo"](("dense",), limit=2)   # what `runner.run_benchmark` looks up

Data comes from the loaders of `mnemo.eval.datasets` ($MNEMO_DATA_DIR). Every runner builds its
stores from the data alone, asks every question, and keeps a row for each (a question the runner
fails on is a row with its error, scored 0: `guard`). Metric definitions are in `mnemo.eval.metrics`;
what each runner feeds them is in its docstring.

Questions are independent, as in the benchmarks' own protocols: the stores here do not record
accesses (`BenchStore.touch` does nothing), so one question's recall cannot reinforce, and so
reorder, the memories the next question sees. Recipes that share write and decay settings share
one store (they differ only in how they recall), so the data is written once per conversation.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import numpy as np

from mnemo import recall as recall_stage
from mnemo.clock import SimulatedClock, utc
from mnemo.config import Config, RecallConfig, recipe
from mnemo.errors import ConfigError
from mnemo.eval import datasets
from mnemo.extract.questions import ask
from mnemo.memory import Memory
from mnemo.model import Link, MemoryRecord
from mnemo.recall import ranking as ranking_stage
from mnemo.recall import rerank as rerank_stage
from mnemo.store import DuckDBStore
from mnemo.tokens import count_many

Progress = Callable[[int, int, str], None]
BUDGETS = (256, 512, 1024, 2048)
EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
Runner = TypeVar("Runner", bound=Callable[..., Any])
Table = Callable[[dict[str, dict[str, float]]], tuple[list[str], list[list[str]]]]

# The benchmarks by name, in the order their modules register (the order `mnemo eval` lists them).
RUNNERS: dict[str, Callable[..., BenchResult]] = {}
# Benchmarks whose summary table is their own (the others show `runner.SUMMARY_COLUMNS`).
TABLES: dict[str, Table] = {}


def register(name: str, registry: dict[str, Any] = RUNNERS) -> Callable[[Runner], Runner]:
    """Return a decorator that lists a function under `name` in `registry` (RUNNERS, or TABLES for a summary)."""
    def add(fn: Runner) -> Runner:
        if name in registry:
            raise ConfigError(f"benchmark {name!r} is registered twice")
        registry[name] = fn
        return fn
    return add


class BenchStore(DuckDBStore):
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
    """Return recall's ranking for `query` (memory id, score), best first: `recall.rank`, what recall packs from.

    The same function recall calls (retrieval, fusion, the time scope, namesakes, the reranker,
    `ranking.score` and the veto), so a benchmark measures the order recall really packs in.
    `qvec`, a precomputed embedding of `query`, is used when name resolution leaves the query as is.
    Inactive memories are left out, as recall never packs them.
    """
    ranked = recall_stage.rank(mem.store, mem.embedder, query, user=user, cfg=cfg or mem.config.recall,
                               decay_cfg=mem.config.decay, now=mem.clock.now(), count_many=count_many, qvec=qvec)
    return [(s.memory.id, s.score) for s in ranked.scored if s.memory.active]


def hits(mem: Memory, query: str, *, user: str, qvec: Any = None, k: int = 50, lexical: bool = True
         ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Return the top `k` dense and lexical hits of `query` for `user`, as recall retrieves them.

    With `order`, the out-of-fold grid's fast path (`bench.folds`): one retrieval a question, ranked
    under every candidate config; recall and every other benchmark rank with `recall.rank`.

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


def neighbours(mem: Memory, dense: list[tuple[str, float]], lexical: list[tuple[str, float]],
               then: tuple[list[tuple[str, float]], list[tuple[str, float]]] | None = None) -> list[Link]:
    """Return the `follows` links of every hit (`hits`, and `hits_then` when given), as recall reads them."""
    ids = {m for hit_list in (dense, lexical, *(then or ())) for m, _ in hit_list}
    return mem.store.follows(sorted(ids))


def _query_vector(mem: Memory, query: str, user: str, qvec: Any) -> Any:
    """Return recall's query vector (`recall.query_vector`); `qvec` is used when name resolution leaves `query` as is."""
    names = [user, *mem.store.self_names(user)]
    if qvec is None or recall_stage.resolve_self(query, names) != query:
        qvec = recall_stage.query_vector(mem.embedder, query, names)
    return qvec


def order(dense: list[tuple[str, float]], lexical: list[tuple[str, float]], cfg: RecallConfig,
          then: tuple[list[tuple[str, float]], list[tuple[str, float]]] | None = None,
          links: Sequence[Link] = (), *, question: str = "", people: Mapping[str, tuple[str, str, int]] | None = None
          ) -> list[tuple[str, float]]:
    """Return the candidates recall considers under `cfg`, by fused relevance, best first.

    Each hit list is cut to `cfg.candidates` (lists are best first, as the store returns them)
    and ranked by `ranking.relevance` (with the hits' `follows` links, `links`, when
    `cfg.context_weight` is above 0); the candidates are the dense hits when the dense weight
    is above 0, plus the lexical hits when the lexical weight is. With `cfg.time_scope` and
    `then` (the hits said in the time the question names, `hits_then`), the time scope ranks
    those first. With `cfg.rerank`, the fitted reranker orders them (`recall.rerank`: it reads
    `question` and `people`, `recall.people_of` the hits). Ties in fused relevance keep the
    order dense-then-lexical hits arrive in (deterministic for one store; the store breaks its
    own score ties by memory id, which differs between runs).
    """
    w = cfg.lexical_weight

    def cut(d: list[tuple[str, float]], x: list[tuple[str, float]]) -> tuple[list, list]:
        return (d[:cfg.candidates] if w < 1 else []), (x[:cfg.candidates] if w > 0 else [])

    dense, lexical = cut(dense, lexical)
    then = cut(*then) if cfg.time_scope and then is not None else None
    fused = ranking_stage.relevance(dense, lexical, cfg, then, links)
    if cfg.rerank:
        if not question or people is None:
            raise ConfigError("a recipe with a reranker ranks by the question and the hits' speakers: pass both")
        fused = rerank_stage.apply(fused, cfg.rerank, question, dense, lexical, then, links, people)
    if then is not None:
        dense, lexical = dense + then[0], lexical + then[1]
    # The hits, and the neighbours `ranking.in_context` joined to the best of them (`cfg.context_joins`), as recall ranks.
    wanted = list(dict.fromkeys([m for m, _ in dense] + [m for m, _ in lexical]
                                + [m for m, e in fused.items() if e.get("joined")]))
    ranked = sorted(range(len(wanted)), key=lambda i: (-fused[wanted[i]]["fused"], i))
    return [(wanted[i], fused[wanted[i]]["fused"]) for i in ranked]


def run_of(dias: Sequence[str | None]) -> dict[str, float]:
    """Return an ir-measures run from ranked dataset ids: first occurrence counts, scores strictly decreasing."""
    run: dict[str, float] = {}
    for d in dias:
        if d is not None and d not in run:
            run[d] = float(len(dias) - len(run))
    return run


def means(rows: list[dict[str, Any]], keys: Sequence[str]) -> dict[str, float]:
    """Return the mean of each key over the rows where it is a number (not NaN); 'n' is the row count."""
    out: dict[str, float] = {"n": float(len(rows))}
    for k in keys:
        vals = [r[k] for r in rows if isinstance(r.get(k), (int, float)) and not math.isnan(r[k])]
        out[k] = statistics.fmean(vals) if vals else math.nan
    return out


def group_means(rows: list[dict[str, Any]], keys: Sequence[str], by: Callable[[dict[str, Any]], list[str]]
           ) -> dict[str, dict[str, float]]:
    """Return means of `keys` per group; `by(row)` names every group a row belongs to."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for g in by(r):
            groups.setdefault(g, []).append(r)
    return {g: means(rs, keys) for g, rs in groups.items()}


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
        made = writer.insert_many([t.document for t in s.turns], user=conv.id, kind="episodic", category="event",
                                 metas=[{"dia_id": t.dia_id, **turn_meta(t, conv)} for t in s.turns], at=when,
                                 vectors=vecs[pos:pos + n], session=f"{conv.id}/{s.id}")
        dia_of.update(zip((r.id for r in made), (t.dia_id for t in s.turns), strict=True))
        pos += n
    return dia_of


def guard(row: dict[str, Any], worst: dict[str, float], score: Callable[[], dict[str, Any]]) -> None:
    """Fill `row` from `score()`; if it raises, fill the worst values and keep the error (a failure is a row)."""
    try:
        row.update(score())
    # A runner boundary: one failing question must become a row, not end the run or vanish from the means.
    except Exception as exc:  # noqa: BLE001
        row.update(worst)
        row["error"] = f"{type(exc).__name__}: {exc}"
