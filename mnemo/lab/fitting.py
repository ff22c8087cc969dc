"""Fitting thresholds and probabilities from labelled scores: curves, operating points, rules, calibrators.

    pick = choose_threshold(y, score, min_recall=0.95, bound=True)   # the rule's threshold and its point
    iso = Calibrator.fit(y, score, "isotonic"); iso(score)           # scores to probabilities
    reliability(y, iso(score))                                        # observed against predicted, Brier, ECE

Pure functions over labels and scores (scikit-learn underneath), used by `mnemo.lab.calibrate` and the
calibration notebook; nothing here knows what the scores mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError


def wilson(k: int, n: int, z: float = 1.96) -> list[float] | None:
    """Return the 95% Wilson interval of k successes in n trials (None when n is 0)."""
    if n == 0:
        return None
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def curves(y: Sequence[int], score: Sequence[float]) -> dict[str, Any]:
    """Return ROC and precision-recall curves with ROC AUC and average precision (scikit-learn)."""
    from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score, roc_curve

    y_arr, s = np.asarray(y, dtype=int), np.asarray(score, dtype=float)
    if len(set(y_arr.tolist())) < 2:
        # Small runs (smoke tests) may hold one class only: the curves are then undefined, not an error.
        return {**dict.fromkeys(("fpr", "tpr", "roc_thresholds", "precision", "recall", "pr_thresholds"), np.array([])),
                "auc": None, "average_precision": None, "n": int(len(y_arr)), "positives": int(y_arr.sum())}
    fpr, tpr, roc_thr = roc_curve(y_arr, s)
    precision, recall, pr_thr = precision_recall_curve(y_arr, s)
    return {"fpr": fpr, "tpr": tpr, "roc_thresholds": roc_thr, "precision": precision, "recall": recall,
            "pr_thresholds": pr_thr, "auc": float(roc_auc_score(y_arr, s)),
            "average_precision": float(average_precision_score(y_arr, s)), "n": int(len(y_arr)),
            "positives": int(y_arr.sum())}


def operating_point(y: Sequence[int], score: Sequence[float], threshold: float) -> dict[str, float]:
    """Return precision, recall (TPR), FPR and F1 of "score >= threshold" against labels `y`, with 95% bounds.

    precision_lb and recall_lb are Wilson lower bounds, fpr_ub the Wilson upper bound
    (`wilson`): what the rule can claim with 95% confidence on this many examples.
    """
    y_arr, s = np.asarray(y, dtype=bool), np.asarray(score, dtype=float)
    pred = s >= threshold
    tp, fp = int((pred & y_arr).sum()), int((pred & ~y_arr).sum())
    pos, neg = int(y_arr.sum()), int((~y_arr).sum())
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / pos if pos else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"threshold": round(float(threshold), 4), "precision": round(precision, 4), "recall": round(recall, 4),
            "fpr": round(fp / neg, 4) if neg else 0.0, "f1": round(f1, 4), "n": len(y_arr),
            "precision_lb": (wilson(tp, tp + fp) or [1.0])[0], "recall_lb": (wilson(tp, pos) or [0.0])[0],
            "fpr_ub": (wilson(fp, neg) or [0.0, 0.0])[1]}


def choose_threshold(y: Sequence[int], score: Sequence[float], *, min_precision: float | None = None,
                     min_recall: float | None = None, max_fpr: float | None = None, bound: bool = False,
                     fallback: float | None = None) -> dict[str, Any]:
    """Return the threshold a rule picks on (y, score), with its operating point and whether the rule was met.

    Candidates are the midpoints between consecutive distinct scores (and just under the lowest
    and above the highest), so a threshold never sits on an observed score. Rules:
    `min_precision`: the lowest threshold whose precision reaches it (most recall);
    `min_recall`: the highest threshold whose recall reaches it (fewest false positives);
    `max_fpr`: the lowest threshold whose false-positive rate stays within it (most recall);
    none given: the threshold of best F1. With `bound`, the rule must hold for the 95% Wilson
    bound, not the point estimate: a few lucky examples do not move a threshold. A rule no
    threshold meets keeps `fallback` (e.g. the default's value) if given, else best F1; met=False.
    """
    s = np.unique(np.asarray(score, dtype=float))
    cands = np.concatenate([[s[0] - 1e-3], (s[:-1] + s[1:]) / 2, [s[-1] + 1e-3]]) if len(s) else np.array([0.5])
    points = [operating_point(y, score, float(t)) for t in cands]
    prec, rec, fpr = ("precision_lb", "recall_lb", "fpr_ub") if bound else ("precision", "recall", "fpr")
    how = " (95% bound)" if bound else ""
    if min_precision is not None:
        ok, pick, rule = [p for p in points if p[prec] >= min_precision and p["recall"] > 0], min, \
            f"precision >= {min_precision}{how}"
    elif min_recall is not None:
        ok, pick, rule = [p for p in points if p[rec] >= min_recall], max, f"recall >= {min_recall}{how}"
    elif max_fpr is not None:
        ok, pick, rule = [p for p in points if p[fpr] <= max_fpr], min, f"fpr <= {max_fpr}{how}"
    else:
        ok, pick, rule = [], min, "best F1"
    if ok:
        return {**pick(ok, key=lambda p: p["threshold"]), "rule": rule, "met": True}
    if rule != "best F1" and fallback is not None:
        return {**operating_point(y, score, fallback), "rule": f"{rule} (unmet: kept {fallback})", "met": False}
    best = max(points, key=lambda p: (p["f1"], -p["threshold"]))
    return {**best, "rule": rule if rule == "best F1" else f"{rule} (unmet: best F1)", "met": rule == "best F1"}


@dataclass
class Calibrator:
    """A monotone map from a raw score to a probability, fitted by isotonic regression or Platt scaling."""

    method: str  # "isotonic" | "platt" | "constant" (examples of one class only: their share)
    model: Any

    @classmethod
    def fit(cls, y: Sequence[int], score: Sequence[float], method: str = "isotonic") -> Calibrator:
        """Return a calibrator fitted on (score, y) with scikit-learn."""
        x, y_arr = np.asarray(score, dtype=float), np.asarray(y, dtype=int)
        if method in ("isotonic", "platt") and len(np.unique(y_arr)) < 2:
            return cls("constant", float(y_arr.mean()) if len(y_arr) else 0.0)
        if method == "isotonic":
            from sklearn.isotonic import IsotonicRegression

            return cls(method, IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(x, y_arr))
        if method == "platt":
            from sklearn.linear_model import LogisticRegression

            return cls(method, LogisticRegression().fit(x.reshape(-1, 1), y_arr))
        raise ConfigError(f"unknown calibration method '{method}'; use 'isotonic' or 'platt'")

    def __call__(self, score: Sequence[float]) -> np.ndarray:
        """Return the calibrated probability of each score."""
        x = np.asarray(score, dtype=float)
        if self.method == "constant":
            return np.full(x.shape, self.model)
        if self.method == "isotonic":
            return np.clip(self.model.predict(x), 0.0, 1.0)
        return self.model.predict_proba(x.reshape(-1, 1))[:, 1]

    def threshold_for(self, probability: float, grid: Sequence[float] | None = None) -> float | None:
        """Return the lowest score whose calibrated probability reaches `probability` (None if none does)."""
        xs = np.asarray(grid if grid is not None else np.linspace(0.0, 1.0, 1001), dtype=float)
        hits = xs[self(xs) >= probability]
        return round(float(hits.min()), 4) if hits.size else None

    def table(self, grid: Sequence[float] = tuple(np.round(np.linspace(0, 1, 11), 2))) -> list[list[float]]:
        """Return [[score, probability], ...] on `grid`: the fitted map, small enough for provenance."""
        return [[float(x), round(float(p), 4)] for x, p in zip(grid, self(grid), strict=True)]


def reliability(y: Sequence[int], prob: Sequence[float], bins: int = 10) -> dict[str, Any]:
    """Return the reliability diagram (mean predicted vs observed, per quantile bin), Brier score and ECE."""
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss

    y_arr, p = np.asarray(y, dtype=int), np.clip(np.asarray(prob, dtype=float), 0.0, 1.0)
    if not len(y_arr):
        return {"predicted": [], "observed": [], "brier": None, "ece": None, "n": 0}
    observed, predicted = calibration_curve(y_arr, p, n_bins=bins, strategy="quantile")
    edges = np.unique(np.quantile(p, np.linspace(0, 1, bins + 1)))
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, max(len(edges) - 2, 0))
    ece = sum(abs(p[which == b].mean() - y_arr[which == b].mean()) * (which == b).mean()
              for b in np.unique(which))
    return {"predicted": predicted.round(4).tolist(), "observed": observed.round(4).tolist(),
            "brier": round(float(brier_score_loss(y_arr, p)), 4), "ece": round(float(ece), 4), "n": int(len(y_arr))}
