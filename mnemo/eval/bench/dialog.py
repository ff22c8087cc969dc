"""LoCoMo and REALTALK: turn- and session-level retrieval and budgeted recall, by category.

    res = run_locomo(("dense", "bm25", "hybrid"), limit=2)   # or run_benchmark("locomo", ...)
    res.rows, res.aggregates                                 # one row per question and recipe; means by group

What the runner feeds the metrics is in `run_dialog`'s docstring; `folds` reuses its pieces for
out-of-fold recipe selection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from mnemo.errors import ConfigError
from mnemo.eval import datasets, metrics
from mnemo.eval.bench.common import (
    BUDGETS,
    Bench,
    BenchResult,
    Progress,
    add_turns,
    group_means,
    ranking,
    register,
    run_of,
    session_times,
)

DIALOG_KEYS = ("R@1", "R@5", "R@10", "nDCG@10", "RR", "S_R@5", "S_R@10", "S_nDCG@10", "recall_any@10", "recall_all@10")


SCOPES = ("conversation", "session")


def stores_of(conv: datasets.Conversation, questions: Sequence[datasets.Question],
              scope: str) -> list[tuple[datasets.Conversation, list[datetime], list[datasets.Question]]]:
    """Return the stores a conversation gives under `scope`: (what is stored, its session times, what is asked).

    "conversation": one store of every turn, every question. "session": one store per session
    (10-30 turns), asked the questions whose evidence all lies in that session; a question whose
    evidence spans sessions is asked of none, so the two scopes' means are over different
    questions (the rows say which store and how many turns).
    """
    times = session_times(conv)
    if scope == "conversation":
        return [(conv, times, list(questions))]
    out = []
    for s, at in zip(conv.sessions, times, strict=True):
        said = {t.dia_id for t in s.turns}
        asked = [q for q in questions if set(q.evidence) <= said]
        if asked:
            out.append((replace(conv, sessions=[s]), [at], asked))
    return out


def run_dialog(name: str, recipes: Sequence[str] = ("dense", "bm25", "hybrid"), *, limit: int | None = None,
               embedder: Any = "minilm", llm: Any = "offline", budgets: Sequence[int] = BUDGETS,
               scope: str = "conversation", progress: Progress | None = None) -> BenchResult:
    """Return turn- and session-level retrieval and budgeted recall on LoCoMo or REALTALK, by category.

    Every turn of both speakers is stored as an episodic memory with meta {"dia_id"} (bulk
    `insert_many`, the session's date as its time), one store per conversation, or with
    scope="session" one per session (`stores_of`: how recall does on a store of 10-30 turns). Per
    question and recipe, the ranking is `ranking` (recall's fused candidates); ir-measures gives
    R@1, R@5, R@10, nDCG@10 and RR (its mean is MRR) against the cleaned evidence turns, and again
    over sessions (S_*, the turn ranking collapsed to sessions in order of first appearance, gold =
    the evidence's sessions). recall_any/all@10 are LongMemEval's (`metrics.retrieval_scores`).
    Budgeted recall: for each budget B, `Memory.recall` with budget B; cover@B = the share of
    evidence turns among the packed memories, tokens@B = tokens used (0 when recall abstains).
    Aggregates: "main" (categories 1-4), and each category (LoCoMo 5 = adversarial, reported
    apart). Questions without usable evidence are dropped by the loader and counted in
    params["dropped"].
    """
    if scope not in SCOPES:
        raise ConfigError(f"scope must be one of {SCOPES}, not {scope!r}")
    ds = datasets.load(name)
    convs = ds.conversations[:limit] if limit else ds.conversations
    bench = Bench(recipes, embedder, llm)
    rows, runs, qrels, sruns, sqrels, corpora = [], {}, {}, {}, {}, {}
    for ci, whole in enumerate(convs):
        for conv, times, qs in stores_of(whole, [q for q in ds.questions if q.conversation_id == whole.id], scope):
            turns = conv.turns
            corpus = [t.dia_id for t in turns]
            mems = bench.open(max(times) + timedelta(days=1))
            vecs = bench.emb.embed([t.document for t in turns])
            dia_of: dict[str, str] = {}
            for w in bench.writers(mems):
                dia_of.update(add_turns(w, conv, times, vecs))
            qvecs = bench.emb.embed([q.question for q in qs]) if qs else []
            for rname, mem in mems.items():
                for q, qv in zip(qs, qvecs, strict=True):
                    key = f"{q.id}@{rname}"
                    row = {"qid": key, "question_id": q.id, "conversation": whole.id, "recipe": rname,
                           "category": q.category, "category_name": q.category_name, "n_gold": len(q.evidence),
                           "store_turns": len(turns), "error": None}
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
            progress(ci + 1, len(convs), whole.id)
    _score_dialog(rows, runs, qrels, sruns, sqrels, corpora)
    budget_keys = [f"{k}@{b}" for b in budgets for k in ("cover", "tokens", "abstained")]
    keys = [*DIALOG_KEYS, "store_turns", *budget_keys]
    main = {1, 2, 3, 4} if name == "locomo" else {1, 2, 3}
    aggregates = group_means(rows, keys, lambda r: [f"{r['recipe']} | main"] * (r["category"] in main)
                        + [f"{r['recipe']} | cat {r['category']} {r['category_name']}"])
    return bench.result(name, rows, aggregates, ds, limit=limit, budgets=list(budgets),
                        main_categories=sorted(main), scope=scope)


def _score_dialog(rows: list[dict[str, Any]], runs: dict, qrels: dict, sruns: dict, sqrels: dict,
                  corpora: dict) -> None:
    """Fill each row's ranking metrics: ir-measures at turn and session level, LongMemEval recall_any/all."""
    if not rows:
        return
    by_key = {r["qid"]: r for r in rows}
    turn_rows, _ = metrics.ranking_metrics(runs, qrels, ks=(1, 5, 10))
    sess_rows, _ = metrics.ranking_metrics(sruns, sqrels, ks=(5, 10))
    for tr in turn_rows:
        by_key[tr["qid"]].update({k: tr[k] for k in ("R@1", "R@5", "R@10", "nDCG@10", "RR")})
        by_key[tr["qid"]]["error"] = tr["error"]
    for sr in sess_rows:
        by_key[sr["qid"]].update({f"S_{k}": sr[k] for k in ("R@5", "R@10", "nDCG@10")})
    ranked = {k: list(v) for k, v in runs.items()}
    lme_rows, _ = metrics.retrieval_scores(ranked, {k: list(v) for k, v in qrels.items()}, ks=(10,),
                                           corpora=corpora)
    for lr in lme_rows:
        by_key[lr["qid"]].update({"recall_any@10": lr["recall_any@10"], "recall_all@10": lr["recall_all@10"]})


@register("locomo")
def run_locomo(recipes: Sequence[str] = ("dense", "bm25", "hybrid"), **kw: Any) -> BenchResult:
    """Return LoCoMo retrieval (see `run_dialog`); `limit` counts conversations."""
    return run_dialog("locomo", recipes, **kw)


@register("realtalk")
def run_realtalk(recipes: Sequence[str] = ("dense", "bm25", "hybrid"), **kw: Any) -> BenchResult:
    """Return REALTALK retrieval of evidence turns (see `run_dialog`); `limit` counts chats."""
    return run_dialog("realtalk", recipes, **kw)
