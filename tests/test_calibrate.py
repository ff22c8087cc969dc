"""Calibration helpers: threshold rules, isotonic / Platt, reliability, pair and band metrics, the recipe."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mnemo.config import RECIPE_DIR, recipe
from mnemo.errors import ConfigError
from mnemo.eval import calibration
from mnemo.lab import calibrate, fitting

Y = [0, 0, 0, 0, 1, 0, 1, 1, 1, 1]
S = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]


def test_operating_point_counts():
    p = fitting.operating_point(Y, S, 0.55)
    assert (p["precision"], p["recall"], p["fpr"]) == (0.8, 0.8, 0.2)


def test_choose_threshold_rules():
    strict = fitting.choose_threshold(Y, S, min_precision=1.0)
    assert strict["met"] and 0.6 < strict["threshold"] < 0.7 and strict["recall"] == 0.8
    loose = fitting.choose_threshold(Y, S, min_recall=1.0)
    assert loose["met"] and 0.4 < loose["threshold"] < 0.5 and loose["fpr"] == 0.2
    bounded = fitting.choose_threshold(Y, S, max_fpr=0.0)
    assert bounded["threshold"] == strict["threshold"]
    best = fitting.choose_threshold(Y, S)
    assert best["rule"] == "best F1" and best["f1"] >= fitting.operating_point(Y, S, 0.55)["f1"]


def test_an_unmet_rule_falls_back_to_best_f1_and_says_so():
    pick = fitting.choose_threshold([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5], min_precision=0.9)
    assert not pick["met"] and "unmet" in pick["rule"]


def test_a_bound_rule_needs_enough_examples_and_keeps_the_fallback():
    few = fitting.choose_threshold(Y, S, min_precision=0.9, bound=True, fallback=0.77)
    assert not few["met"] and few["threshold"] == 0.77 and "kept 0.77" in few["rule"]
    many_y, many_s = [0] * 200 + [1] * 200, [i / 400 for i in range(400)]
    many = fitting.choose_threshold(many_y, many_s, min_precision=0.9, bound=True, fallback=0.77)
    assert many["met"] and many["precision_lb"] >= 0.9 and many["threshold"] < 0.77
    assert fitting.operating_point(many_y, many_s, 0.5)["fpr_ub"] > 0.0


def test_threshold_is_never_on_an_observed_score():
    pick = fitting.choose_threshold(Y, S, min_precision=1.0)
    assert pick["threshold"] not in S


def test_isotonic_is_monotone_and_finds_its_threshold():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 400)
    y = (rng.uniform(0, 1, 400) < x).astype(int)
    iso = fitting.Calibrator.fit(y, x, "isotonic")
    grid = np.linspace(0, 1, 50)
    assert np.all(np.diff(iso(grid)) >= 0)
    t = iso.threshold_for(0.8)
    assert t is not None and 0.6 < t < 0.95 and iso([t])[0] >= 0.8
    assert iso.threshold_for(1.01) is None
    platt = fitting.Calibrator.fit(y, x, "platt")
    assert platt([0.1])[0] < platt([0.9])[0]
    assert len(iso.table()) == 11
    with pytest.raises(ConfigError):
        fitting.Calibrator.fit(y, x, "beta")
    one_class = fitting.Calibrator.fit([1, 1], [0.2, 0.3], "platt")
    assert one_class.method == "constant" and one_class([0.0, 1.0]).tolist() == [1.0, 1.0]


def test_reliability_of_calibrated_probabilities_is_close():
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 1, 4000)
    y = (rng.uniform(0, 1, 4000) < p).astype(int)
    rel = fitting.reliability(y, p)
    assert rel["ece"] < 0.05 and len(rel["predicted"]) == len(rel["observed"]) > 5
    assert fitting.reliability(y, 1 - p)["ece"] > 0.3


def test_curves_and_a_single_class():
    c = fitting.curves(Y, S)
    assert 0.9 < c["auc"] <= 1 and len(c["fpr"]) == len(c["tpr"])
    assert fitting.curves([1, 1], [0.2, 0.3])["auc"] is None


def pair(label, outcome):
    return {"label": label, "outcome": outcome, "expected": calibrate.expected_outcome(label)}


def test_pair_metrics():
    rows = [pair("supersede", "supersede"), pair("supersede", "merge"), pair("novel", "supersede"),
            pair("duplicate", "merge"), pair("corroborate", "add"), pair("novel", "add")]
    m = calibrate.pair_metrics(rows)
    assert m["forgetting_precision"] == 0.5 and m["forgetting_recall"] == 0.5
    assert m["collateral"] == 0.25 and m["lost_updates"] == 0.5
    assert m["merge_precision"] == 0.5 and m["merge_recall"] == 0.5 and m["accuracy"] == 0.5
    assert calibrate.pair_metrics([pair("novel", "add")])["forgetting_precision"] == 1.0


def test_evidence_metrics():
    rows = [{"evidence": 0.9, "answerable": 1, "gold_packed": 1, "kind": "answerable"},
            {"evidence": 0.5, "answerable": 1, "gold_packed": 0, "kind": "answerable"},
            {"evidence": 0.2, "answerable": 1, "gold_packed": 0, "kind": "answerable"},
            {"evidence": 0.1, "answerable": 0, "gold_packed": 0, "kind": "foreign"},
            {"evidence": 0.7, "answerable": 0, "gold_packed": 0, "kind": "adversarial"}]
    m = calibrate.evidence_metrics(rows, certain_at=0.6, vague_at=0.3)
    assert m["abstention_accuracy"] == 0.5 and m["false_abstention"] == pytest.approx(0.3333, abs=1e-4)
    assert m["certain_precision"] == 0.5 and m["certain_share"] == 0.4
    assert m["unknown_foreign"] == 1.0 and m["unknown_adversarial"] == 0.0


def test_trust_at_redecides_verdicts():
    rows = [{"id": "a", "label": "safe", "trust": 0.7, "verdict": "act", "error": None},
            {"id": "b", "label": "unsafe", "trust": 0.5, "verdict": "escalate", "error": None},
            {"id": "c", "label": "unsafe", "trust": 0.0, "verdict": None, "error": "boom"}]
    low = calibration.trust_at(rows, 0.4)
    assert low["unsafe_acceptance"] == 1.0 and low["over_abstention"] == 0.0
    high = calibration.trust_at(rows, 0.8)
    assert high["unsafe_acceptance"] == 0.5 and high["over_abstention"] == 1.0  # the failed case counts at worst


def test_stable_split_is_deterministic_and_mixed():
    keys = [f"k{i}" for i in range(60)]
    splits = [calibrate.stable_split(k) for k in keys]
    assert splits == [calibrate.stable_split(k) for k in keys] and 10 < splits.count("heldout") < 30


def test_pairs_data_is_labelled_and_split():
    pairs = calibrate.load_pairs()
    assert len(pairs) >= 80 and len({p["id"] for p in pairs}) == len(pairs)
    assert {p["label"] for p in pairs} == {"duplicate", "corroborate", "supersede", "novel"}
    for label in ("duplicate", "corroborate", "supersede", "novel"):
        mine = [p for p in pairs if p["label"] == label]
        assert {p["split"] for p in mine} == {"train", "heldout"}
    assert all(p["old"] and p["new"] and p["subject"] and p["why"] for p in pairs)


def test_play_pairs_through_the_write_path():
    pairs = [p for p in calibrate.load_pairs() if p["id"] in ("P001", "P043", "P073", "P060")]
    rows = calibrate.play_pairs(pairs, "default", "hash")
    assert [r["id"] for r in rows] == ["P001", "P043", "P060", "P073"]
    assert {r["outcome"] for r in rows} <= {"merge", "supersede", "add"}
    by_id = {r["id"]: r for r in rows}
    assert by_id["P043"]["outcome"] == "supersede"  # a changed lead time is a supersession
    assert all(0.0 <= r["cosine"] <= 1.0 + 1e-6 and 0.0 <= r["judge"] <= 1.0 for r in rows)


def test_write_recipe_round_trip(tmp_path):
    path = calibrate.write_recipe("trial", {"duplicate_threshold": 0.9, "act_threshold": 0.55},
                                  {"embedder": "hash-bow-384"}, folder=tmp_path)
    data = json.loads(path.read_text())
    assert data["base"] == "default" and data["params"]["act_threshold"] == 0.55
    with pytest.raises(ConfigError, match="duplicate_threshold"):
        calibrate.write_recipe("bad", {"duplicate_threshhold": 0.9}, {}, folder=tmp_path)
    assert not (tmp_path / "bad.json").exists()


def test_the_committed_calibrated_recipe_loads_with_its_provenance():
    cfg = recipe("calibrated")
    data = json.loads((RECIPE_DIR / "calibrated.json").read_text())
    assert cfg.recipe == "calibrated"
    for name, value in data["params"].items():
        assert cfg.params()[name] == pytest.approx(value)
    assert cfg.recall.vague_at <= cfg.recall.certain_at
    assert cfg.write.arbitration_low < cfg.write.duplicate_threshold
    prov = data["provenance"]
    assert prov["embedder"] and prov["git_commit"] and set(prov["heldout"]) >= {"pairs", "bands", "trust"}


def _headline(value: float, collateral: float = 0.0) -> dict:
    return {**dict.fromkeys(calibrate.WRITE_RATES, value), "collateral": collateral}


def test_write_objective_rewards_rates_and_charges_collateral():
    assert calibrate.write_objective(_headline(1.0)) == 1.0
    assert calibrate.write_objective(_headline(1.0, collateral=0.5)) == 0.5
    assert calibrate.write_objective({"duplicate_precision": float("nan")}) == 0.0


def test_write_params_ship_only_when_the_test_split_agrees():
    default = {"duplicate_threshold": 0.92, "slot_threshold": 0.8}
    grid = calibrate.grid_points({"duplicate_threshold": (0.88, 0.92), "slot_threshold": (0.8,)})
    assert [p["duplicate_threshold"] for p in grid] == [0.88, 0.92]
    good = [{"params": grid[0], "dev": _headline(0.9), "test": _headline(0.85)},
            {"params": grid[1], "dev": _headline(0.8), "test": _headline(0.8)}]
    chosen = calibrate.choose_write_params(good, default)
    assert chosen["params"]["duplicate_threshold"] == 0.88 and chosen["rule"].startswith("beats")
    # The same dev choice, worse on the held-out test split: the default stays, and says why.
    bad = [{**good[0], "test": _headline(0.7)}, good[1]]
    kept = calibrate.choose_write_params(bad, default)
    assert kept["params"] == default and kept["chosen"]["duplicate_threshold"] == 0.88
    assert kept["rule"].startswith("unmet")
