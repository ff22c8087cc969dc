"""Claim keys as features of their own: the feature reranker out of fold, with and without them (#18).

    MNEMO_DATA_DIR=../shared/data .venv/bin/python benchmarks/claim_key_features.py locomo     # or realtalk

Per conversation, the turns are stored as `mnemo eval ... --folds 4 --feature-rerank` stores them
(its "base" reproduces that command's "feature rerank" row), and the turns' claim keys
(`mnemo.eval.bench.keys`) in a second store of their own. Each question's candidates are the turn
store's hits plus the turns only a key found; "sep" adds four features, the keys' dense and BM25
scores folded to their turns (min-max within the question, and reciprocal rank). A logistic
regression is fitted per fold on the other folds (4 folds by conversation, sorted ids dealt
round-robin, as `folds.split_folds`), ordered as `rerank.order`, and scored by turn recall@10.
A measurement, not a recipe: recall does not search keys (README, "Claim keys, measured").
"""

from __future__ import annotations

import statistics
import sys
from datetime import timedelta

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from mnemo.eval import datasets
from mnemo.eval.bench import keys
from mnemo.eval.bench.common import Bench, add_turns, hits, hits_then, neighbours, session_times
from mnemo.eval.bench.folds import split_folds
from mnemo.recall import rerank

DEPTH = 50  # hits a retriever, as recall's `candidates`


def key_features(question, kmem, user, qv, key_of, ids, links, people):
    """Return (candidate ids, base rows for the turns only a key found, the four key features of every candidate)."""
    dense, lexical = hits(kmem, question, user=user, qvec=qv, k=2 * DEPTH)
    dk, lk = keys.fold_keys(dense, key_of, DEPTH), keys.fold_keys(lexical, key_of, DEPTH)
    extra = [m for m in dict.fromkeys([m for m, _ in dk] + [m for m, _ in lk]) if m not in set(ids)]
    width = len(rerank.FEATURES)
    xe = np.zeros((0, width))
    if extra:
        _, xe = rerank.features(question, [(m, 0.0) for m in extra], [], None, links, people)
        xe[:, [0, 1, 2, 3, 4, 8, 9]] = 0.0  # no retriever, time scope or context of their own: speaker and length only
    kd, kb = rerank._normalised(dk), rerank._normalised(lk)
    every = ids + extra
    kx = np.asarray([[*kd.get(m, (0.0, 0.0)), *kb.get(m, (0.0, 0.0))] for m in every], float).reshape(len(every), 4)
    return every, xe, kx


def collect(name: str) -> tuple[list[list[str]], dict[str, list]]:
    ds = datasets.load(name)
    main = {1, 2, 3, 4} if name == "locomo" else {1, 2, 3}
    bench = Bench(["default"], "minilm", "offline")
    pool: dict[str, list] = {"base": [], "sep": []}
    for conv in ds.conversations:
        qs = [q for q in ds.questions if q.conversation_id == conv.id and q.category in main]
        times = session_times(conv)
        mem = bench.open(max(times) + timedelta(days=1))["default"]
        kmem = bench.open(max(times) + timedelta(days=1))["default"]
        dia_of = add_turns(mem, conv, times, bench.emb.embed([t.document for t in conv.turns]))
        key_of = keys.add_keys(kmem, conv, times, dia_of, bench.emb.embed)
        people = rerank.people_of(mem.store.memories(conv.id))
        for q, qv in zip(qs, bench.emb.embed([q.question for q in qs]), strict=True):
            dense, lexical = hits(mem, q.question, user=conv.id, qvec=qv, k=DEPTH)
            then = hits_then(mem, q.question, user=conv.id, qvec=qv, k=DEPTH)
            links = neighbours(mem, dense, lexical, then)
            ids, x = rerank.features(q.question, dense, lexical, then, links, people)
            gold = set(q.evidence)
            pool["base"].append((conv.id, [dia_of.get(m) for m in ids], x, gold))
            every, xe, kx = key_features(q.question, kmem, conv.id, qv, key_of, ids, links, people)
            pool["sep"].append((conv.id, [dia_of.get(m) for m in every], np.hstack([np.vstack([x, xe]), kx]), gold))
        mem.close()
        kmem.close()
        print(conv.id, f"{len(key_of)} keys", flush=True)
    return split_folds([c.id for c in ds.conversations], 4), pool


def out_of_fold(split: list[list[str]], rows: list) -> tuple[float, list[float]]:
    """Return (mean recall@10 over questions, per-fold means), each fold ranked by a model fitted on the others."""
    scoped, mix = rerank.FEATURES.index("scoped"), rerank.FEATURES.index("mix")
    per_fold, every = [], []
    for test in split:
        held = set(test)
        train = [r for r in rows if r[0] not in held]
        x = np.vstack([r[2] for r in train])
        y = np.concatenate([[float(d in r[3]) for d in r[1]] for r in train])
        scaler = StandardScaler().fit(x)
        model = LogisticRegression(class_weight="balanced", max_iter=1000).fit(scaler.transform(x), y)
        found = []
        for _, dias, xs, gold in (r for r in rows if r[0] in held):
            p = model.predict_proba(scaler.transform(xs))[:, 1]
            order = sorted(range(len(dias)), key=lambda i: (-xs[i, scoped], -p[i], -xs[i, mix], i))
            ranked = list(dict.fromkeys(dias[i] for i in order if dias[i]))
            found.append(len(set(ranked[:10]) & gold) / len(gold))
        per_fold.append(statistics.fmean(found))
        every += found
    return statistics.fmean(every), per_fold


if __name__ == "__main__":
    dataset = sys.argv[1] if len(sys.argv) > 1 else "locomo"
    folds, pools = collect(dataset)
    for variant, rows in pools.items():
        mean, per = out_of_fold(folds, rows)
        print(f"{dataset} {variant:4s} turn R@10 out of fold {mean:.3f}  folds {[round(f, 3) for f in per]}")
