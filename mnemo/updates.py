"""Update detection as a fitted decision: does a new claim update, restate, or stand beside a stored memory?

    x = pair_features(candidate, memory, sim=0.81, slot_sim=0.9, entity="same", slot="exact")
    model = UpdateModel.load(embedder="minilm-l6-int8")   # mnemo/recipes/updates.json (`mnemo eval pairs --save`)
    model.proba([x])                            # [[p_distinct, p_same, p_update]]

The features are general: agreement of subject and identifiers, how the slots align (and whether
the slot table knows the slot), value types and values, change cues, polarity, category and
kind (an episode does not update another), and the sentences' cosine. None names a
word or a shape from an example. The model is a multinomial logistic regression fitted with
scikit-learn on labelled pairs (the write-path benchmark's dev split, BEAM's knowledge updates
and contradictions, the project's labelled pairs), its thresholds chosen on the dev split and its
figures reported on the test split (`mnemo.eval.bench.pairs`). At run time it is numpy only: the
coefficients are read from JSON, so the write path needs no scikit-learn.

Reconciliation (`mnemo.reconcile`) asks it only where grammar has not decided: a stated old value
("from 21 to 35"), a negation and an exact restatement are read from the parse; everything else
between a claim and the memories it could touch is the model's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from . import match
from .judge import NEVER_RETIRED, TYPED, value_kind
from .model import Candidate, MemoryRecord
from .normalise import content_tokens, marks, same_value

MODEL_FILE = Path(__file__).parent / "recipes" / "updates.json"  # fitted with the local MiniLM embedder
# Cosines differ between embedders, so a model is fitted per embedder family; others use the MiniLM one.
MODEL_FILES = {"hash": MODEL_FILE.with_name("updates-hash.json"), "minilm": MODEL_FILE}


def model_file(embedder: str | None) -> Path:
    """Return the update model fitted for an embedder's family ("hash-bow-384" -> hash), else the default one."""
    family = next((k for k in MODEL_FILES if (embedder or "").startswith(k)), None)
    path = MODEL_FILES.get(family or "minilm", MODEL_FILE)
    return path if path.is_file() else MODEL_FILE
CLASSES = ("distinct", "same", "update")
SLOT_LEVELS = {"exact": 1.0, "prefix": 0.85, "derived": 0.75, "similar": 0.65, "qualified": 0.4}
FEATURES = (
    "same_subject", "alias_subject", "no_subject", "identifier_agree", "identifier_conflict",
    "slot_level", "slot_cosine", "no_slot", "same_value_type", "typed_value", "values_differ", "same_value",
    "value_overlap", "change_cue", "old_value_held", "new_negated", "old_negated", "polarity_differs",
    "both_single", "never_retired", "same_category", "sentence_cosine", "text_overlap", "marks_differ",
    "new_only_numbers", "table_slot", "episodic",
)


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


class Side(NamedTuple):
    """What the features read of one side of a pair, computed once per claim or memory (`side`)."""

    ids: frozenset[str]
    kind: str | None
    value_tokens: frozenset[str]
    text_tokens: frozenset[str]
    negated: bool
    marks: frozenset[str]


def side(item: Candidate | MemoryRecord) -> Side:
    """Return the side of a pair that `item` (a claim or a memory) is."""
    return Side(frozenset(item.references) | {item.record_id} - {None}, value_kind(item),
                frozenset(content_tokens(item.value)), frozenset(content_tokens(item.text)), match.negated(item),
                marks(item.text))


def pair_features(c: Candidate, m: MemoryRecord, *, sim: float, slot_sim: float, entity: str | None,
                  slot: str | None, sides: tuple[Side, Side] | None = None) -> list[float]:
    """Return the features (`FEATURES`, in order) of a new claim `c` against a stored memory `m`.

    `sim` is the cosine of their texts, `slot_sim` of their slot phrases; `entity` and `slot` are
    how `mnemo.match` aligns their subjects ("same", "alias", None) and slots ("exact", ...);
    `sides`: `side(c), side(m)` when the caller has them (a claim is paired with many memories).
    """
    sc, sm = sides or (side(c), side(m))
    ids_c, ids_m = sc.ids, sm.ids
    kind_c, kind_m = sc.kind, sm.kind
    tc, tm = sc.text_tokens, sm.text_tokens
    only_c, only_m = tc - tm, tm - tc
    numeric = bool(only_c and only_m) and all(any(ch.isdigit() for ch in w) for w in only_c | only_m)
    same = same_value(c.value, m.value)
    return [
        float(entity == "same"), float(entity == "alias"), float(not c.subject or not m.subject),
        float(bool(ids_c & ids_m)), float(bool(ids_c and ids_m and not ids_c & ids_m)),
        SLOT_LEVELS.get(slot or "", 0.0), float(slot_sim), float(not c.attribute or not m.attribute),
        float(kind_c is not None and kind_c == kind_m), float(kind_c in TYPED),
        float(bool(c.value and m.value) and not same),
        float(same) if c.value and m.value else 0.0, _jaccard(sc.value_tokens, sm.value_tokens),
        float(bool(c.meta.get("change_cue"))),
        float(bool(c.old_value) and match.holds(c.old_value, m.value, m.text)),
        float(sc.negated), float(sm.negated), float(sc.negated != sm.negated),
        float(c.single_valued and m.single_valued), float(m.category in NEVER_RETIRED or c.category in NEVER_RETIRED),
        float(c.category == m.category), float(sim), _jaccard(tc, tm),
        float(sc.marks != sm.marks), float(numeric),
        float(bool(c.attribute) and c.attribute in table_slots()), float("episodic" in (c.kind, m.kind)),
    ]


@cache
def table_slots() -> frozenset[str]:
    """Return the canonical slots the slot table knows (a known slot carries its cardinality)."""
    from . import lexicon

    return frozenset(info.slot for info in lexicon.slot_table().values())


@dataclass(frozen=True)
class UpdateModel:
    """A fitted multinomial logistic regression over `FEATURES`, with its operating thresholds."""

    coef: np.ndarray  # (classes, features)
    intercept: np.ndarray  # (classes,)
    mean: np.ndarray  # feature standardisation, as fitted
    scale: np.ndarray
    update_at: float = 0.5  # P(update) at or above which a memory is retired
    same_at: float = 0.5  # P(same) at or above which the claim restates a memory
    info: dict[str, Any] = field(default_factory=dict)  # what it was fitted on, and its dev/test figures

    @classmethod
    def load(cls, path: str | Path | None = None, *, embedder: str | None = None) -> UpdateModel | None:
        """Return the model saved at `path` (default: the packaged one for `embedder`), or None when there is none."""
        return _load(str(path or model_file(embedder)))

    def proba(self, rows: list[list[float]]) -> np.ndarray:
        """Return P(class) for each row of features, columns in `CLASSES` order."""
        if not rows:
            return np.zeros((0, len(CLASSES)))
        x = (np.asarray(rows, dtype=np.float64) - self.mean) / self.scale
        z = x @ self.coef.T + self.intercept
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def to_json(self) -> dict[str, Any]:
        """Return the model as plain JSON values."""
        return {"features": list(FEATURES), "classes": list(CLASSES), "coef": self.coef.round(6).tolist(),
                "intercept": self.intercept.round(6).tolist(), "mean": self.mean.round(6).tolist(),
                "scale": self.scale.round(6).tolist(), "update_at": self.update_at, "same_at": self.same_at,
                "info": self.info}


@cache
def _load(path: str) -> UpdateModel | None:
    file = Path(path)
    if not file.is_file():
        return None
    data = json.loads(file.read_text(encoding="utf-8"))
    if tuple(data["features"]) != FEATURES or tuple(data["classes"]) != CLASSES:
        # A model fitted on other features would read these in the wrong places: refuse it loudly.
        from .errors import ConfigError

        raise ConfigError(f"{path} was fitted on features {data['features']}; refit it with `mnemo eval pairs --save`")
    scale = np.asarray(data["scale"], dtype=np.float64)
    return UpdateModel(np.asarray(data["coef"], dtype=np.float64), np.asarray(data["intercept"], dtype=np.float64),
                       np.asarray(data["mean"], dtype=np.float64), np.where(scale > 0, scale, 1.0),
                       float(data["update_at"]), float(data["same_at"]), {**data.get("info", {}), "file": file.name})


def fit(x: np.ndarray, y: np.ndarray, *, c: float = 1.0) -> UpdateModel:
    """Return a model fitted on features `x` and labels `y` (indices into `CLASSES`), balanced by class."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    lr = LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
    lr.fit((x - mean) / scale, y)
    coef = np.zeros((len(CLASSES), x.shape[1]))
    intercept = np.full(len(CLASSES), -math.inf)
    for k, cls in enumerate(lr.classes_):
        coef[int(cls)], intercept[int(cls)] = lr.coef_[k], lr.intercept_[k]
    intercept = np.where(np.isfinite(intercept), intercept, -50.0)
    return UpdateModel(coef, intercept, mean, scale)
