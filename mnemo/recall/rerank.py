"""Rerank: a fitted linear model over what recall knows of each candidate orders the candidates.

    people = people_of(records)                                   # id -> (speaker, addressees, length)
    ids, x = features(question, dense, lexical, then, follows, people)
    fused = reranked(fused, Reranker.load("locomo"), ids, x, people)  # the turns, in the places turns held
    fused = apply(fused, "locomo", question, dense, lexical, then, follows, people)  # both, as recall does

Fusion mixes two retrievers with one weight; a question asks more of a candidate than that. The
features are what recall has at hand, no model call: each retriever's score (min-max within the
query) and reciprocal rank, their weighted mix, whether the question names the memory's speaker
or only whom it addresses (dialog turns stored with `meta["speaker"]` / `["addressees"]`), its
length, whether it was said in the time the question names (`ranking.time_scope`), and its best
`follows` neighbour's mix (`ranking.in_context`). A logistic regression, standardised and fitted on
labelled questions (`fit`, scikit-learn), weighs them; the shipped weights are a JSON file in
`mnemo/recipes/rerankers/` that records what they were fitted on. Scoring is numpy: one matrix
product a query.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..config import reranker_path
from ..errors import ConfigError
from ..model import Link, MemoryRecord
from .ranking import neighbours

FEATURES = ("dense", "bm25", "dense_rr", "bm25_rr", "mix", "speaker_named", "other_named", "log_chars", "scoped",
            "context")
_WORD = re.compile(r"\w+")
Hits = Sequence[tuple[str, float]]


@dataclass(frozen=True)
class Reranker:
    """A standardised logistic regression over FEATURES: probability of relevance = sigmoid(z @ coef + intercept)."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    mix_weight: float = 0.6  # lexical share of the "mix" feature
    features: tuple[str, ...] = FEATURES
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if tuple(self.features) != FEATURES:
            raise ConfigError(f"reranker features {list(self.features)} are not this version's {list(FEATURES)}")
        if not len(self.mean) == len(self.scale) == len(self.coef) == len(FEATURES):
            raise ConfigError("a reranker needs one mean, scale and weight per feature")

    def probability(self, x: np.ndarray) -> np.ndarray:
        """Return each row's probability of relevance."""
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return 1.0 / (1.0 + np.exp(-(z @ np.asarray(self.coef) + self.intercept)))

    @classmethod
    def load(cls, name_or_path: str) -> Reranker:
        """Return a shipped reranker by name (`mnemo/recipes/rerankers/<name>.json`) or one from a JSON file."""
        return _load(str(name_or_path))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1) + "\n")


@cache
def _load(name_or_path: str) -> Reranker:
    data = json.loads(reranker_path(name_or_path).read_text())
    return Reranker(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def fit(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], **provenance: Any) -> Reranker:
    """Return a reranker fitted on stacked feature rows and 0/1 labels (balanced classes, scikit-learn)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, y = np.vstack(xs), np.concatenate(ys)
    if len(set(y.tolist())) < 2:
        raise ConfigError("the reranker needs relevant and irrelevant candidates to fit on")
    scaler = StandardScaler().fit(x)
    model = LogisticRegression(class_weight="balanced", max_iter=1000).fit(scaler.transform(x), y)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    return Reranker(tuple(float(v) for v in scaler.mean_), tuple(float(v) for v in scale),
                    tuple(float(v) for v in model.coef_[0]), float(model.intercept_[0]),
                    provenance={"rows": int(len(y)), "relevant": int(y.sum()), **provenance})


def people_of(records: Iterable[MemoryRecord]) -> dict[str, tuple[str, str, int]]:
    """Return {id: (speaker, addressees joined by spaces, text length)}; a memory without a speaker has ""."""
    out = {}
    for m in records:
        speaker = str((m.meta or {}).get("speaker") or "")
        addressees = " ".join(str(a) for a in (m.meta or {}).get("addressees") or ())
        text = m.text.removeprefix(f"{speaker}:").strip() if speaker else m.text
        out[m.id] = (speaker, addressees, len(text))
    return out


def _normalised(hits: Hits) -> dict[str, tuple[float, float]]:
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


def features(question: str, dense: Hits, lexical: Hits, then: tuple[Hits, Hits] | None, follows: Iterable[Link],
             people: Mapping[str, tuple[str, str, int]], mix_weight: float = 0.6) -> tuple[list[str], np.ndarray]:
    """Return the candidate ids (dense, lexical, then the time scope's hits; first occurrence) and their FEATURES.

    `then` holds the hits among the memories said in the time the question names (None: it names
    none); `follows` the hits' `follows` links; `people` is `people_of` the candidates.
    """
    d, b = _normalised(dense), _normalised(lexical)
    scoped = {m for hits in (then or ()) for m, _ in hits}
    ids = list(dict.fromkeys([m for m, _ in dense] + [m for m, _ in lexical] + sorted(scoped)))
    words = {w.lower() for w in _WORD.findall(question)}
    mix = {m: (1 - mix_weight) * d.get(m, (0.0, 0.0))[0] + mix_weight * b.get(m, (0.0, 0.0))[0] for m in ids}
    near = neighbours(follows)
    rows = []
    for mid in ids:
        dn, drr = d.get(mid, (0.0, 0.0))
        bn, brr = b.get(mid, (0.0, 0.0))
        speaker, others, chars = people.get(mid, ("", "", 0))
        named = bool({w.lower() for w in _WORD.findall(speaker)} & words)
        other = not named and bool({w.lower() for w in _WORD.findall(others)} & words)
        context = max((mix[n] for n in near.get(mid, ()) if n in mix), default=0.0)
        rows.append([dn, bn, drr, brr, mix[mid], float(named), float(other), math.log1p(chars),
                     float(mid in scoped), context])
    return ids, np.asarray(rows, dtype=float).reshape(len(ids), len(FEATURES))


def order(reranker: Reranker, ids: Sequence[str], x: np.ndarray) -> list[str]:
    """Return `ids` best first: what was said in the time the question names, then by probability of relevance.

    The time scope's promise holds under the reranker: a question naming a time is answered
    first by what was said then (`ranking.fuse_scoped`); the reranker orders within each part.
    Ties go to the mix, then to input order.
    """
    if not len(ids):
        return []
    p = reranker.probability(x)
    mix, scoped = x[:, FEATURES.index("mix")], x[:, FEATURES.index("scoped")]
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-scoped[i], -p[i], -mix[i], i))]


def reranked(fused: Mapping[str, dict], reranker: Reranker, ids: Sequence[str], x: np.ndarray,
             people: Mapping[str, tuple[str, str, int]]) -> dict[str, dict]:
    """Return `fused` with the dialog turns among `ids` reordered by the reranker, in the places turns held.

    A reranker applies to what it was fitted on: turns of a conversation, stored with a speaker
    (`people`). Those hits keep the relevances they had between them, and the reranker decides
    which turn takes which; every other memory (a fact the write path extracted, a note without
    a speaker) keeps its relevance and its place. Each reordered entry gains `rerank` (its
    probability); an id the retrievers with weight did not find (relevance 0) stays at 0.
    """
    out = {m: dict(e) for m, e in fused.items()}
    live = [i for i, m in enumerate(ids) if m in out and out[m]["fused"] > 0 and people.get(m, ("",))[0]]
    if not live:
        return out
    kept = [ids[i] for i in live]
    places = sorted((out[m]["fused"] for m in kept), reverse=True)
    for place, mid in zip(places, order(reranker, kept, x[live]), strict=True):
        out[mid]["fused"] = place
    for mid, prob in zip(kept, reranker.probability(x[live]), strict=True):
        out[mid]["rerank"] = float(prob)
    return out


def apply(fused: Mapping[str, dict], name: str, question: str, dense: Hits, lexical: Hits,
          then: tuple[Hits, Hits] | None, follows: Iterable[Link],
          people: Mapping[str, tuple[str, str, int]]) -> dict[str, dict]:
    """Return `fused` reranked by the reranker `name` ("" = none): `features`, then `reranked`.

    One wiring for recall and the benchmark runner. Nothing is computed when no hit is a dialog
    turn (a memory with a speaker in `people`): the reranker reorders turns only.
    """
    if not name or not any(speaker for speaker, _, _ in people.values()):
        return dict(fused)
    reranker = Reranker.load(name)
    ids, x = features(question, dense, lexical, then, follows, people, reranker.mix_weight)
    return reranked(fused, reranker, ids, x, people)
