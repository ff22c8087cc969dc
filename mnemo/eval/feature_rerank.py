"""A feature reranker over recall's candidates, fitted on training folds only: a measured lever, not a recall stage.

    ids, X = features(question, dense, lexical, speaker_of)      # one row per candidate
    model = fit(Xs, ys)                                          # training folds' questions only
    ranked = rerank(model, ids, X)                               # best first

Issue #18 asks for a rerank stage, measured out of fold before it is kept. This module is the
measurement: `folds.run_folds(..., rerank=True)` fits one model per fold on the other folds'
main-category questions and scores the held-out fold with it. The features are what recall has
at hand for each candidate (no model call): dense cosine and BM25 score, both min-max normalised
within the query, their reciprocal ranks, the weighted mix of the two, whether the question names
the turn's speaker or only the other speaker (LoCoMo and REALTALK questions name people), and the
turn's length. A logistic regression (scikit-learn, standardised features, balanced classes)
scores each candidate; ties keep the weighted order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mnemo.errors import ConfigError

FEATURES = ("dense", "bm25", "dense_rr", "bm25_rr", "mix", "speaker_named", "other_named", "log_chars", "scoped",
            "context")
MIX_WEIGHT = 0.6  # lexical share of the "mix" feature (the default recipe's)
_WORD = re.compile(r"\w+")


def _normalised(hits: Sequence[tuple[str, float]]) -> dict[str, tuple[float, float]]:
    """Return {id: (min-max normalised score, reciprocal rank)} of one retriever's hits (best first)."""
    if not hits:
        return {}
    values = [v for _, v in hits]
    low, high = min(values), max(values)
    out: dict[str, tuple[float, float]] = {}
    for rank, (mid, v) in enumerate(hits, 1):
        if mid not in out:
            out[mid] = ((v - low) / (high - low) if high > low else 1.0, 1.0 / rank)
    return out


def features(question: str, dense: Sequence[tuple[str, float]], lexical: Sequence[tuple[str, float]],
             speaker_of: Mapping[str, tuple[str, str, int]], then: Any = None, links: Sequence[Any] = ()
             ) -> tuple[list[str], np.ndarray]:
    """Return the candidate ids (dense then lexical hits, first occurrence) and their FEATURES rows.

    `speaker_of[id]` = (this turn's speaker, the other speaker(s) joined by spaces, text length).
    `then` = the (dense, lexical) hits among the memories said in the time the question names
    (None: it names none): "scoped" is 1 for those. "context" is the best `follows` neighbour's mix.
    """
    d, b = _normalised(dense), _normalised(lexical)
    scoped = {m for hits in (then or ()) for m, _ in hits}
    ids = list(dict.fromkeys([m for m, _ in dense] + [m for m, _ in lexical] + sorted(scoped)))
    words = {w.lower() for w in _WORD.findall(question)}
    mix = {m: (1 - MIX_WEIGHT) * d.get(m, (0.0, 0.0))[0] + MIX_WEIGHT * b.get(m, (0.0, 0.0))[0] for m in ids}
    near: dict[str, set[str]] = {}
    for link in links:
        near.setdefault(link.src, set()).add(link.dst)
        near.setdefault(link.dst, set()).add(link.src)
    rows = []
    for mid in ids:
        dn, drr = d.get(mid, (0.0, 0.0))
        bn, brr = b.get(mid, (0.0, 0.0))
        speaker, others, chars = speaker_of.get(mid, ("", "", 0))
        named = bool({w.lower() for w in _WORD.findall(speaker)} & words)
        other = not named and bool({w.lower() for w in _WORD.findall(others)} & words)
        context = max((mix[n] for n in near.get(mid, ()) if n in mix), default=0.0)
        rows.append([dn, bn, drr, brr, mix[mid], float(named), float(other), math.log1p(chars), float(mid in scoped),
                     context])
    return ids, np.asarray(rows, dtype=float).reshape(len(ids), len(FEATURES))


def fit(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> Any:
    """Return a fitted pipeline (standardise, balanced logistic regression) on the stacked training rows."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = np.vstack(xs), np.concatenate(ys)
    if len(set(y.tolist())) < 2:
        raise ConfigError("the feature reranker needs relevant and irrelevant candidates in its training folds")
    return make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=1000)).fit(x, y)


def rerank(model: Any, ids: Sequence[str], x: np.ndarray) -> list[str]:
    """Return `ids` by the model's probability of relevance, best first; ties by the mix feature, then input order."""
    if not ids:
        return []
    p = model.predict_proba(x)[:, 1]
    mix = x[:, FEATURES.index("mix")]
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-p[i], -mix[i], i))]
