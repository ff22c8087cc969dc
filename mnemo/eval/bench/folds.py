"""Honest model selection on LoCoMo and REALTALK: folds by conversation, each recipe chosen without its test fold.

    res = run_folds("locomo", folds=4, embedder="minilm")
    res.params["folds"]        # per fold: test and train conversations, the candidate chosen, its scores
    res.aggregates["selected | main"]["R@10"], res.aggregates["selected | main"]["R@10_sd"]

The conversations (sorted by id) are dealt into `folds` folds round-robin, so no conversation is in
two folds and the split depends on nothing but the ids. For each fold, every candidate of the grid
(`CANDIDATES`: the named recipes dense / bm25 / hybrid, RRF, weighted and weighted_rank fusion at a
few lexical weights) is scored on the *other* folds' questions by mean turn recall@10 over the main
categories (LoCoMo 1-4, REALTALK 1-3); the best one (ties: higher nDCG@10, then grid order) scores the held-out
fold. `selected` is that procedure: its rows are each question scored by the candidate its fold
chose, so its mean is an out-of-fold figure. The fixed recipes asked for are scored on every fold too.

Only fusion settings differ between candidates, so each question is retrieved once (dense and BM25
hits, as recall retrieves them: `common.hits`) and ranked under every candidate (`common.order`,
the ordering `common.ranking` and recall use). Metrics are ir-measures' (`metrics.ranking_metrics`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import numpy as np

from mnemo.config import Config, RecallConfig, recipe
from mnemo.errors import ConfigError
from mnemo.eval import datasets, metrics
from mnemo.eval.bench import keys
from mnemo.eval.bench.common import (
    Bench,
    BenchResult,
    Progress,
    add_turns,
    hits,
    hits_then,
    neighbours,
    order,
    run_of,
    session_times,
)
from mnemo.eval.bench.written import transcript_line
from mnemo.provenance import git_commit
from mnemo.recall import rerank as rerank_stage

KEYS = ("R@5", "R@10", "nDCG@10", "RR")
WRITTEN = " [written]"  # after the name of a system that ranked the store written through the write path
NO_RERANK = "default, no rerank"
IN_SAMPLE = "(in-sample: its reranker was fitted on these conversations)"
SELECT_BY = ("R@10", "nDCG@10")  # what selection maximises on the training folds, in order of precedence


def _grid() -> dict[str, RecallConfig]:
    # Every lever off but the ones a candidate names: the default's time scope and context are candidates here;
    # its reranker is fitted per fold instead ("feature rerank"), never chosen from a grid.
    base = replace(RecallConfig(), time_scope=False, context_weight=0.0, rerank="")
    grid = {"dense": recipe("dense").recall, "bm25": recipe("bm25").recall, "hybrid": recipe("hybrid").recall}
    # RRF at 0.5 is hybrid itself.
    for w in (0.3, 0.7, 0.8, 0.9):
        grid[f"rrf w={w}"] = replace(base, fusion="rrf", lexical_weight=w)
    # weighted_rank ranks exactly as weighted (only the relevance scale differs, see `ranking.fuse`), so
    # the two tie on every question; listed first, it wins the tie, because its scale leaves recall's
    # recency, salience and claim terms their weight (scenarios-dev: weighted ranks stale values first).
    for fusion in ("weighted_rank", "weighted"):
        for w in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9):
            grid[f"{fusion} w={w}"] = replace(base, fusion=fusion, lexical_weight=w)
    # Time scope (`ranking.fuse_scoped`) on top of the weighted candidates: listed after them, it wins no tie.
    for w in (0.5, 0.6, 0.7):
        grid[f"weighted_rank w={w} +time"] = replace(base, fusion="weighted_rank", lexical_weight=w, time_scope=True)
    # Context (`ranking.in_context`: a turn shares its neighbours' relevance) on top of the time scope.
    for w in (0.5, 0.6, 0.7):
        for beta in (0.2, 0.35, 0.5, 0.75, 1.0):
            grid[f"weighted_rank w={w} +time +context {beta}"] = replace(
                base, fusion="weighted_rank", lexical_weight=w, time_scope=True, context_weight=beta)
    return grid


# The candidate grid: named recipes first (grid order breaks exact ties, so the earlier candidate wins them).
CANDIDATES: dict[str, RecallConfig] = _grid()


def split_folds(ids: Sequence[str], n: int) -> list[list[str]]:
    """Return `ids` dealt into `n` folds: sorted, the i-th id to fold i mod n (deterministic, disjoint)."""
    unique = sorted(set(ids))
    if n < 2 or n > len(unique):
        raise ConfigError(f"--folds must be between 2 and the number of conversations ({len(unique)}), got {n}")
    return [unique[k::n] for k in range(n)]


def choose(scores: Mapping[str, Sequence[Mapping[str, float]]], candidates: Sequence[str]) -> str:
    """Return the candidate whose rows have the best mean of SELECT_BY (in precedence), ties to the earlier one.

    `scores[c]` holds candidate c's per-question rows on the training folds only: the caller
    passes nothing of the held-out fold, and this function sees nothing else.
    """
    def key(c: str) -> tuple[float, ...]:
        rows = scores[c]
        return tuple(statistics.fmean(r[k] for r in rows) if rows else 0.0 for k in SELECT_BY)

    best = candidates[0]
    for c in candidates[1:]:
        if key(c) > key(best):
            best = c
    return best


def cross_validate(rows: Sequence[Mapping[str, Any]], folds: Sequence[Sequence[str]], candidates: Sequence[str],
                   main: set[int]) -> list[dict[str, Any]]:
    """Return, per fold, the candidate chosen on the other folds (main categories) and the conversations on each side.

    `rows` are per-question scores with keys conversation, candidate, category and SELECT_BY.
    """
    out = []
    for k, test in enumerate(folds):
        held = set(test)
        train = sorted(c for f in folds for c in f if c not in held)
        scores: dict[str, list[Mapping[str, Any]]] = {c: [] for c in candidates}
        for r in rows:
            if r["conversation"] not in held and r["category"] in main and r["candidate"] in scores:
                scores[r["candidate"]].append(r)
        chosen = choose(scores, candidates)
        train_means = {m: statistics.fmean(r[m] for r in scores[chosen]) if scores[chosen] else 0.0
                       for m in SELECT_BY}
        out.append({"fold": k, "test": sorted(test), "train": train, "chosen": chosen,
                    "train_n": len(scores[chosen]), **{f"train_{m}": v for m, v in train_means.items()}})
    return out


def run_folds(name: str, recipes: Sequence[str] = ("dense", "bm25", "hybrid", "default"), *, folds: int = 4,
              limit: int | None = None, embedder: Any = "minilm", llm: Any = "offline", rerank: bool = False,
              save_reranker: str | None = None, claim_keys: bool = False, write: bool = False,
              progress: Progress | None = None, **_ignored: Any) -> BenchResult:
    """Return out-of-fold turn retrieval on LoCoMo or REALTALK: fixed `recipes` and the fold-selected candidate.

    Rows: one per question and system (each fixed recipe, and "selected"), with its fold, the
    candidate that ranked it, R@5, R@10, nDCG@10 and RR. Aggregates: "<system> | main" (main
    categories, every fold: mean of questions, plus R@10_sd and nDCG@10_sd across fold means),
    "<system> | fold k" and "<system> | cat c ...". params["folds"] records each fold's
    conversations, choice and training score; params["candidates"] the grid. With `rerank`, the
    system "feature rerank" is `recall.rerank` fitted per fold on the other folds. `save_reranker`
    writes one reranker fitted on every conversation (what `RecallConfig.rerank` ships).

    With `write`, each conversation is also written through the write path (`Memory.remember_many`, "Name: text"
    lines, as `eval locomo --write remember` writes it) into a second store, and every question is asked of both:
    a memory stands for the turn it was extracted from (first occurrence counts). Its systems are named with
    `WRITTEN` after them; the reranker is fitted on the questions of both stores together (one ranking model for
    either ingestion), and "default, no rerank" is the default recipe without one, to compare against.
    """
    ds = datasets.load(name)
    convs = ds.conversations[:limit] if limit else ds.conversations
    split = split_folds([c.id for c in convs], folds)
    fold_of = {c: k for k, f in enumerate(split) for c in f}
    main = {1, 2, 3, 4} if name == "locomo" else {1, 2, 3}
    fixed = {r: recipe(r).recall for r in recipes}
    if write and "default" in fixed:
        fixed[NO_RERANK] = replace(fixed["default"], rerank="")
    systems = {**{f"cand:{c}": cfg for c, cfg in CANDIDATES.items()},
               **{f"recipe:{r}": cfg for r, cfg in fixed.items()}}
    depth = max(cfg.candidates for cfg in systems.values())
    # One store for every system: they differ only in fusion, so the data is written once per conversation.
    bench = Bench(["default"], embedder, llm)
    runs: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    meta: dict[str, dict[str, Any]] = {}
    pool: dict[str, tuple[list[str | None], Any, Any]] = {}  # per question: candidates, features, labels
    categories: dict[str, int] = {}
    stores = ("", WRITTEN) if write else ("",)
    for ci, conv in enumerate(convs):
        qs = [q for q in ds.questions if q.conversation_id == conv.id]
        times = session_times(conv)
        qvecs = bench.emb.embed([q.question for q in qs]) if qs else []
        for tag in stores:
            mem, dia_of = _store(bench, conv, times, written=bool(tag))
            key_of = keys.add_keys(mem, conv, times, dia_of, bench.emb.embed) if claim_keys and not tag else {}
            people = rerank_stage.people_of(mem.store.memories(conv.id))
            for q, qv in zip(qs, qvecs, strict=True):
                qid = f"{q.id}{tag}"
                dense, lexical = hits(mem, q.question, user=conv.id, qvec=qv, k=depth * (2 if key_of else 1))
                then = hits_then(mem, q.question, user=conv.id, qvec=qv, k=depth * (2 if key_of else 1))
                if key_of:
                    dense, lexical = (keys.fold_keys(h, key_of, depth) for h in (dense, lexical))
                    then = tuple(keys.fold_keys(h, key_of, depth) for h in then) if then else then
                links = neighbours(mem, dense, lexical, then)
                for sname, cfg in systems.items():
                    key = f"{qid}@{sname}"
                    ranked = order(dense, lexical, cfg, then, links, question=q.question, people=people)
                    runs[key] = run_of([dia_of.get(m) for m, _ in ranked])
                    qrels[key] = dict.fromkeys(q.evidence, 1)
                    meta[key] = {"question_id": qid, "conversation": conv.id, "fold": fold_of[conv.id],
                                 "category": q.category, "category_name": q.category_name, "n_gold": len(q.evidence)}
                if rerank or save_reranker:
                    categories[qid] = q.category
                    ids, x = rerank_stage.features(q.question, dense, lexical, then, links, people)
                    dias = [dia_of.get(m) for m in ids]
                    pool[qid] = (dias, x, np.asarray([float(d in q.evidence) for d in dias]))
            mem.close()
        if progress:
            progress(ci + 1, len(convs), conv.id)
    rerank_fits = _rerank_folds(pool, meta, split, main, runs, qrels) if rerank else []
    if save_reranker:
        # One reranker on every conversation's main-category questions: what recall ships (its out-of-fold
        # figure is the "feature rerank" system above, fitted per fold the same way).
        everyone = [q for q in pool if categories.get(q) in main]
        rerank_stage.fit([pool[q][1] for q in everyone], [pool[q][2] for q in everyone], dataset=name,
                         conversations=[c.id for c in convs], questions=len(everyone), embedder=bench.emb.name,
                         commit=git_commit(), fitted_by=f"mnemo eval {name} --folds {folds} --feature-rerank "
                         "--save-reranker PATH").save(save_reranker)
    scored, _ = metrics.ranking_metrics(runs, qrels, ks=(5, 10)) if qrels else ([], {})
    per: dict[str, dict[str, Any]] = {}
    for r in scored:
        qid, sname = r["qid"].rsplit("@", 1)
        per[r["qid"]] = {**meta[r["qid"]], "system": sname, **{k: r[k] for k in KEYS}, "error": r["error"]}
    cand_rows = [{**r, "candidate": r["system"].removeprefix("cand:")} for r in per.values()
                 if r["system"].startswith("cand:")]
    chosen = cross_validate(cand_rows, split, list(CANDIDATES), main)
    # A fixed recipe whose reranker was fitted on these conversations is scored on its own training data:
    # its rows are labelled so (IN_SAMPLE), and the out-of-fold figure for it is "feature rerank".
    seen = {c.id for c in convs}
    label = {r: f"{r} {IN_SAMPLE}" if cfg.rerank and seen & set(
        rerank_stage.Reranker.load(cfg.rerank).provenance.get("conversations", ())) else r for r, cfg in fixed.items()}
    rows = []
    for r in per.values():
        if r["system"].startswith("recipe:"):
            rname = label[r["system"].removeprefix("recipe:")] + _tag(r)
            rows.append({"qid": f"{r['question_id']}@{rname}", **r, "recipe": rname, "candidate": rname})
        elif r["system"] == "feature rerank":
            rows.append({"qid": f"{r['question_id']}@rerank", **r, "recipe": f"feature rerank{_tag(r)}",
                         "candidate": f"logreg fold {r['fold']}"})
    for r in cand_rows:
        if r["candidate"] == chosen[r["fold"]]["chosen"]:
            rows.append({"qid": f"{r['question_id']}@selected", **r, "recipe": f"selected{_tag(r)}"})
    for r in rows:
        r.pop("system", None)
    # Every candidate on every fold too (so a reader can see what selection chose among), without rows.
    grid_rows = [{**r, "recipe": f"grid {r['candidate']}"} for r in cand_rows]
    aggregates = {**_aggregate(rows, main, len(split)), **_aggregate(grid_rows, main, len(split), per_category=False)}
    configs = {r: recipe(r) for r in recipes}
    configs.update({f"candidate {c}": Config(recall=cfg, recipe=c) for c, cfg in CANDIDATES.items()})
    res = bench.result(name, rows, aggregates, ds, limit=limit, folds=chosen, n_folds=len(split), claim_keys=claim_keys,
                       split="conversations sorted by id, dealt round-robin into folds",
                       selection=f"mean turn {' then '.join(SELECT_BY)} on the other folds, main categories",
                       main_categories=sorted(main), rerank=rerank_fits,
                       candidates={c: {"fusion": cfg.fusion, "lexical_weight": cfg.lexical_weight, "rrf_k": cfg.rrf_k,
                                       "time_scope": cfg.time_scope, "context_weight": cfg.context_weight}
                                   for c, cfg in CANDIDATES.items()})
    res.configs = configs
    return res


def _tag(row: Mapping[str, Any]) -> str:
    """Return `WRITTEN` for a row of a question asked of the written store, else ""."""
    return WRITTEN if str(row["question_id"]).endswith(WRITTEN) else ""


def _store(bench: Bench, conv: datasets.Conversation, times: Sequence[Any], *, written: bool
           ) -> tuple[Any, dict[str, str]]:
    """Return a store of `conv` and {memory id: the dataset turn it stands for}: every turn verbatim, or, `written`,
    the turns written through `Memory.remember_many` as "Name: text" lines (each memory stands for its turn)."""
    mem = bench.open(max(times) + timedelta(days=1))["default"]
    if not written:
        return mem, add_turns(mem, conv, times, bench.emb.embed([t.document for t in conv.turns]))
    bench.remember_many(mem, [(transcript_line(t), t.dia_id, f"{conv.id}/{s.id}", at) for s, at in
                              zip(conv.sessions, times, strict=True) for t in s.turns if t.role == "user"], user=conv.id)
    return mem, {m.id: d for m in mem.store.memories(conv.id) if (d := bench.dia(m))}


def _rerank_folds(pool: Mapping[str, tuple[list[str | None], Any, Any]], meta: dict[str, dict[str, Any]],
                  split: Sequence[Sequence[str]], main: set[int], runs: dict, qrels: dict) -> list[dict[str, Any]]:
    """Fit the feature reranker per fold on the other folds' main-category questions; add its held-out runs.

    Returns, per fold, the training size and the fitted coefficients (on standardised features).
    """
    # Every question has a run under the first candidate: its key gives the question's qrels and meta.
    first = f"@cand:{next(iter(CANDIDATES))}"
    info = {meta[k]["question_id"]: (k, meta[k]) for k in meta if k.endswith(first)}
    out = []
    for k, test in enumerate(split):
        held = set(test)
        train = [q for q in pool if info[q][1]["conversation"] not in held and info[q][1]["category"] in main]
        model = rerank_stage.fit([pool[q][1] for q in train], [pool[q][2] for q in train])
        for q, (dias, x, _) in pool.items():
            if info[q][1]["conversation"] in held:
                ranked = rerank_stage.order(model, list(range(len(dias))), x)
                key = f"{q}@feature rerank"
                runs[key] = run_of([dias[i] for i in ranked])
                qrels[key], meta[key] = qrels[info[q][0]], dict(info[q][1])
        out.append({"fold": k, "train_questions": len(train),
                    "coef": dict(zip(rerank_stage.FEATURES, (round(c, 4) for c in model.coef), strict=True))})
    return out


def _aggregate(rows: list[dict[str, Any]], main: set[int], n_folds: int, per_category: bool = True
               ) -> dict[str, dict[str, float]]:
    """Return per system: main over all folds (with fold-to-fold sd), per fold, and per category."""
    out: dict[str, dict[str, float]] = {}
    for system in dict.fromkeys(r["recipe"] for r in rows):
        mine = [r for r in rows if r["recipe"] == system]
        core = [r for r in mine if r["category"] in main]
        agg = _means(core)
        fold_means = [_means([r for r in core if r["fold"] == k]) for k in range(n_folds)]
        for k in ("R@10", "nDCG@10"):
            vals = [f[k] for f in fold_means if f["n"]]
            agg[f"{k}_sd"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        out[f"{system} | main"] = agg
        for k, f in enumerate(fold_means):
            out[f"{system} | fold {k}"] = f
        if per_category:
            for cat in sorted({(r["category"], r["category_name"]) for r in mine}):
                out[f"{system} | cat {cat[0]} {cat[1]}"] = _means([r for r in mine if r["category"] == cat[0]])
    return out


def _means(rows: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {"n": float(len(rows))}
    for k in KEYS:
        out[k] = statistics.fmean(r[k] for r in rows) if rows else math.nan
    return out
