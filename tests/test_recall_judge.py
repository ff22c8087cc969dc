"""Answerability: recall's features of a question and its candidates, the fitted model, and what "unknown" shows."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest

import mnemo
from mnemo.errors import ConfigError
from mnemo.extract.questions import ask
from mnemo.model import MemoryRecord, Scored
from mnemo.recall import NOT_AN_ANSWER
from mnemo.recall.judge import FEATURES, Answerability, asked_phrase, features, fit

T0 = datetime(2025, 2, 3, tzinfo=timezone.utc)


def _scored(mid, text, dense, cover, fused=1.0):
    m = MemoryRecord(id=mid, user="u", text=text)
    return Scored(m, fused, {}, 5), {"dense": dense, "coverage": cover, "fused": fused}


def _x(question, rows, fits=None, missing=(), focus=()):
    q = ask(question)
    top = [s for s, _ in rows]
    fused = {s.memory.id: e for s, e in rows}
    return dict(zip(FEATURES, features(q, top, fused, fits or {}, list(missing), focus, len(rows)), strict=True))


def test_features_read_the_candidates_and_the_question():
    rows = [_scored("a", "The user flies to Tallinn on 12 March for a conference.", 0.71, 0.5, 1.0),
            _scored("b", "The user likes oat milk.", 0.20, 0.0, 0.3)]
    x = _x("When is the user flying to Tallinn?", rows, {"a": "answers"})
    assert x["dense1"] == pytest.approx(0.71) and x["dense_margin"] == pytest.approx(0.51)
    assert x["answers"] == 1.0 and x["answers_top1"] == 1.0 and x["wants_date"] == 1.0
    assert x["typed_present"] == 1.0  # a date is in the candidates
    assert x["list_question"] == 0.0
    assert _x("Which hobbies does the user have?", rows)["list_question"] == 1.0
    missing = _x("What is Marta's phone number?", rows, missing=["marta"])
    assert missing["missing"] == 1.0 and missing["missing_share"] == 1.0


def test_features_say_whether_a_candidate_names_what_is_asked():
    """"When is the user's anniversary?" over memories that never say an anniversary: asked, not said; the noun's
    cosine with the best candidates is read for the first and the best of three."""
    rows = [_scored("a", "The user and Sam married in Porto.", 0.60, 0.3),
            _scored("b", "Sam's anniversary dinner is booked at Rosa's.", 0.40, 0.3)]
    x = _x("When is the user's anniversary?", rows[:1], focus=[0.2])
    assert x["asks_thing"] == 1.0 and x["asked_said"] == 0.0
    both = _x("When is the user's anniversary?", rows, focus=[0.2, 0.7])
    assert both["asked_said"] == 1.0 and both["focus_cos"] == pytest.approx(0.2)
    assert both["focus_max3"] == pytest.approx(0.7)
    assert _x("When did Sam go to Porto?", rows)["asks_thing"] == 0.0


def test_the_asked_phrase_is_what_the_question_asks_for():
    assert asked_phrase(ask("What instrument is the user learning?")) == "instrument"
    assert asked_phrase(ask("When is the user's birthday?")) in ("birthday", "birth day")


def test_a_fitted_model_separates_and_its_verdict_follows_its_thresholds():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, len(FEATURES)))
    y = (x[:, FEATURES.index("dense1")] > 0).astype(int)
    model = fit(x, y)
    hi = np.zeros(len(FEATURES))
    hi[FEATURES.index("dense1")] = 3.0
    lo = -hi
    assert model.probability(hi) > 0.9 > 0.1 > model.probability(lo)
    from dataclasses import replace

    m = replace(model, vague_at=0.3, certain_at=0.8)
    assert (m.verdict(0.9), m.verdict(0.5), m.verdict(0.1)) == ("certain", "vague", "unknown")


def test_a_model_fitted_on_other_features_is_refused():
    with pytest.raises(ConfigError, match="refit"):
        Answerability((0.0,), (1.0,), (0.0,), 0.0, features=("something",))


def test_unknown_keeps_the_near_memories_marked_as_no_answer():
    """An always-unknown model deciding alone: the pack still holds what is close to the question, each marked."""
    never = Answerability(tuple([0.0] * len(FEATURES)), tuple([1.0] * len(FEATURES)),
                          tuple([0.0] * len(FEATURES)), -20.0, certain_at=0.9, vague_at=0.5)
    with mnemo.Memory.open(":memory:", embedder="hash", clock=mnemo.SimulatedClock(T0),
                           config="answerability") as mem:
        mem.remember("My car is a grey Mazda 3.", user="u", at=T0)
        mem.remember("I grow tomatoes on the balcony.", user="u", at=T0)
        mem.answerable = never
        r = mem.recall("What colour is my car, the Mazda?", user="u", budget_tokens=200)
    assert r.confidence == "unknown" and r.message == "not in the record"
    assert r.memories and all(p.note == NOT_AN_ANSWER for p in r.memories)
    assert any("Mazda" in p.text for p in r.memories) and not any("tomatoes" in p.text for p in r.memories)
    assert r.provenance["answerability"]["p"] < 0.5


def _constant(intercept: float) -> Answerability:
    return Answerability(tuple([0.0] * len(FEATURES)), tuple([1.0] * len(FEATURES)),
                         tuple([0.0] * len(FEATURES)), intercept, certain_at=0.9, vague_at=0.5)


def test_by_default_the_model_only_overturns_the_rules_unknown():
    """The claim rules decide; a model sure the pack answers turns their "unknown" into "vague", never more."""
    with mnemo.Memory.open(":memory:", embedder="hash", clock=mnemo.SimulatedClock(T0)) as mem:
        mem.remember("My car is a grey Mazda 3.", user="u", at=T0)
        mem.remember("I grow tomatoes on the balcony.", user="u", at=T0)
        mem.answerable = _constant(-20.0)
        sure = mem.recall("What car do I drive?", user="u", budget_tokens=200)
        silent = mem.recall("What is my blood type?", user="u", budget_tokens=200)
        mem.answerable = _constant(20.0)
        rescued = mem.recall("What is my blood type?", user="u", budget_tokens=200)
    assert sure.confidence != "unknown" and silent.confidence == "unknown"
    assert rescued.confidence == "vague" and rescued.provenance["answerability"]["p"] > 0.5


@pytest.mark.parametrize("nearest", [0, 3])
def test_unknown_keeps_the_nearest_memories_below_the_floor_but_not_the_far_ones(nearest):
    """With a floor no memory reaches, "unknown" still shows the nearest (at least half as near as the best)."""
    from mnemo.config import Config, RecallConfig

    never = _constant(-20.0)
    cfg = Config(recall=RecallConfig(rescue_at=None, unknown_floor=1.0, unknown_nearest=nearest))
    with mnemo.Memory.open(":memory:", embedder="hash", clock=mnemo.SimulatedClock(T0), config=cfg) as mem:
        mem.remember("My car is a grey Mazda 3.", user="u", at=T0)
        mem.remember("I grow tomatoes on the balcony.", user="u", at=T0)
        mem.answerable = never
        r = mem.recall("What colour is my car, the Mazda?", user="u", budget_tokens=200)
    assert r.confidence == "unknown"
    assert [p.text for p in r.memories] == (["The user's car is a grey Mazda 3."] if nearest else [])
    assert all(p.note == NOT_AN_ANSWER for p in r.memories)


def test_the_answerable_bench_reports_what_the_recipe_itself_said():
    from mnemo.eval.bench.answerable import _recipe_scores

    # The claim rules' verdict ("rules") stands unless the out-of-fold model rescues an "unknown" (p >= 0.5).
    rows = [{"answerable": 1, "rules": "unknown", "p": 0.2}, {"answerable": 1, "rules": "vague", "p": 0.2},
            {"answerable": 1, "rules": "certain", "p": 0.9}, {"answerable": 1, "rules": "unknown", "p": 0.7},
            {"answerable": 0, "rules": "unknown", "p": 0.1}, {"answerable": 0, "rules": "vague", "p": 0.1}]
    assert _recipe_scores(rows) == {"recipe_false_unknown": 0.25, "recipe_unknown_on_unanswerable": 0.5}
    only = _recipe_scores(rows[:4])
    assert only["recipe_false_unknown"] == 0.25 and only["recipe_unknown_on_unanswerable"] != only[
        "recipe_unknown_on_unanswerable"]  # NaN: no unanswerable question in the group


def test_the_answerable_bench_refits_from_an_earlier_runs_rows(tmp_path):
    """`mnemo eval answerable --rows`: the rows keep their features, so the model is refitted out of fold and saved
    without asking a question again; the saved model loads and separates what the rows separate."""
    import pandas as pd

    from mnemo.eval.bench.answerable import run_answerable

    rng = np.random.default_rng(3)
    rows = []
    for c in range(8):
        for i in range(40):
            y = int(i % 2 == 0)
            x = rng.normal(size=len(FEATURES))
            x[FEATURES.index("dense1")] += 2.0 * y
            rows.append({"conversation": f"c{c}", "dataset": "locomo", "store": "turns", "kind": "answerable" if y
                         else "unanswerable", "question": f"q{c}-{i}", "answerable": y, "rules": "vague",
                         "features": json.dumps(x.tolist())})
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    res = run_answerable(rows_from=str(tmp_path / "rows.parquet"), save=str(tmp_path / "model.json"))
    assert res.aggregates["all"]["auc"] > 0.8 and res.params["rows_from"]
    model = Answerability.load(tmp_path / "model.json")
    hi, lo = np.zeros(len(FEATURES)), np.zeros(len(FEATURES))
    hi[FEATURES.index("dense1")], lo[FEATURES.index("dense1")] = 2.0, -1.0
    assert model.probability(hi) > 0.5 > model.probability(lo)
    assert 0.0 < model.vague_at <= model.certain_at <= 1.0 and model.info["rows"] == len(rows)
