"""Retrieval and memory metrics: definitions on hand-worked cases, the ir-measures cross-check, failures as rows."""

from __future__ import annotations

import math
import random

import ir_measures
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo.errors import InvalidInput
from mnemo.eval.metrics import (
    Failed,
    MetricResult,
    Row,
    abstention,
    context_recall,
    dcg,
    forgetting,
    fractional_recall,
    is_abstention,
    is_stale,
    locomo_session,
    mentions,
    ndcg_any,
    per_question,
    ranking_metrics,
    real_pass_rate,
    recall_all,
    recall_any,
    retrieval_scores,
    stale_answer_rate,
    stale_rate,
    strip_turn_suffix,
    tokens_packed,
    turn_to_session,
)

L2_3 = 1 / math.log2(3)


# Ranking metrics through ir-measures -------------------------------------------------------------


def test_ranking_metrics_hand_case():
    qrels = {"q1": {"a": 1, "b": 0, "c": 1}, "q2": {"x": 1}}
    run = {"q1": {"a": 0.9, "b": 0.8, "d": 0.7}, "q2": {"y": 0.5, "x": 0.4}}
    rows, agg = ranking_metrics(run, qrels, ks=(1, 5))
    by = {r["qid"]: r for r in rows}
    assert by["q1"]["R@1"] == 0.5 and by["q1"]["R@5"] == 0.5 and by["q1"]["RR"] == 1.0
    assert by["q1"]["nDCG@5"] == pytest.approx(1 / (1 + L2_3))
    assert by["q2"]["RR"] == 0.5 and by["q2"]["nDCG@5"] == pytest.approx(L2_3)
    assert agg["RR"] == pytest.approx(0.75)


def test_ranking_metrics_failure_is_a_zero_row_in_the_average():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    run = {"q1": {"a": 1.0}, "q2": Failed("timeout")}  # q3 has no run at all
    rows, agg = ranking_metrics(run, qrels, ks=(5,))
    assert [r["qid"] for r in rows] == ["q1", "q2", "q3"]
    assert [r["error"] for r in rows] == [None, "timeout", "no output"]
    assert rows[1]["R@5"] == rows[2]["nDCG@5"] == 0.0
    assert agg["R@5"] == pytest.approx(1 / 3)  # not 1.0: failures are not skipped


def test_ranking_metrics_refuses_queries_without_relevant_documents():
    with pytest.raises(InvalidInput, match="no relevant"):
        ranking_metrics({"q": {"a": 1.0}}, {"q": {"a": 0}})


def _random_case(rng: random.Random, n_docs: int, n_gold: int):
    docs = [f"d{i}" for i in range(n_docs)]
    scores = rng.sample(range(10 * n_docs), n_docs)  # distinct: no tie-breaking differences
    run = dict(zip(docs, map(float, scores), strict=True))
    gold = set(rng.sample(docs, n_gold))
    ranked = sorted(docs, key=lambda d: -run[d])
    return run, gold, ranked


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 8), st.sampled_from([1, 3, 5, 10, 30]))
def test_standard_ndcg_and_recall_equal_ir_measures(seed, n_docs, n_gold, k):
    rng = random.Random(seed)
    run, gold, ranked = _random_case(rng, n_docs, min(n_gold, n_docs))
    qrels = {"q": dict.fromkeys(gold, 1)}
    measures = [ir_measures.parse_measure(f"nDCG@{k}"), ir_measures.parse_measure(f"R@{k}")]
    ref = {str(m.measure): m.value for m in ir_measures.iter_calc(measures, qrels, {"q": run})}
    assert ndcg_any(ranked, gold, k, "standard") == pytest.approx(ref[f"nDCG@{k}"], abs=1e-9)
    assert fractional_recall(ranked, gold, k) == pytest.approx(ref[f"R@{k}"], abs=1e-9)


def test_retrieval_scores_standard_ndcg_matches_ranking_metrics_on_random_runs():
    rng = random.Random(7)
    runs, qrels, rankings = {}, {}, {}
    for i in range(50):
        run, gold, ranked = _random_case(rng, rng.randint(5, 60), rng.randint(1, 5))
        runs[f"q{i}"], qrels[f"q{i}"], rankings[f"q{i}"] = run, dict.fromkeys(gold, 1), ranked
    _, ours = retrieval_scores(rankings, {q: set(g) for q, g in qrels.items()}, ks=(5, 10))
    _, theirs = ranking_metrics(runs, qrels, ks=(5, 10))
    for k in (5, 10):
        assert ours[f"ndcg_any_std@{k}"] == pytest.approx(theirs[f"nDCG@{k}"], abs=1e-12)
        assert ours[f"frac_recall@{k}"] == pytest.approx(theirs[f"R@{k}"], abs=1e-12)
        # The LongMemEval DCG is a different number: never report it as ir-measures' nDCG.
        assert ours[f"ndcg_any_lme@{k}"] != pytest.approx(ours[f"ndcg_any_std@{k}"], abs=1e-6)


# LongMemEval and LoCoMo variants -----------------------------------------------------------------


def test_dcg_variants():
    assert dcg([1, 1], 2, "longmemeval") == 2.0  # positions 1 and 2 both weigh 1
    assert dcg([1, 1], 2, "standard") == pytest.approx(1 + L2_3)
    assert dcg([0, 1], 2, "longmemeval") == 1.0
    assert dcg([0, 0, 1], 3, "longmemeval") == pytest.approx(L2_3)
    assert dcg([], 5) == 0.0
    with pytest.raises(ValueError):
        dcg([1], 1, "other")


def test_ndcg_any_variants():
    ranked = ["x", "g1", "g2"]
    assert ndcg_any(ranked, {"g1", "g2"}, 3) == pytest.approx((1 + L2_3) / 2)
    assert ndcg_any(ranked, {"g1", "g2"}, 3, "standard") == pytest.approx((L2_3 + 0.5) / (1 + L2_3))
    assert ndcg_any(["x"], {"g"}, 1) == 0.0
    assert ndcg_any(["g"], set(), 1) == 0.0
    # The ideal counts relevant items in the whole corpus, capped at k.
    assert ndcg_any(["g1"], {"g1"}, 1, n_relevant=3) == 1.0
    assert ndcg_any(["x", "g1"], {"g1"}, 2, n_relevant=3) == pytest.approx(1 / 2)


def test_recall_any_all():
    assert recall_any(["a", "b", "c"], {"c", "z"}, 3) == 1.0
    assert recall_all(["a", "b", "c"], {"c", "z"}, 3) == 0.0
    assert recall_all(["a", "b", "c"], {"a", "b"}, 2) == 1.0
    assert recall_any(["a", "b", "c"], {"c"}, 2) == 0.0
    assert recall_all(["a"], set(), 1) == 1.0  # vacuous, as upstream


def test_fractional_recall_locomo():
    assert fractional_recall(["D1:1", "D2:3", "D5:1"], ["D1:1", "D2:3", "D9:9"], 2) == pytest.approx(2 / 3)
    assert fractional_recall(["D1:1"], ["D1:1", "D1:1"], 1) == 1.0  # evidence is a set
    # Session-level units (LoCoMo's summaries): each evidence id counts when its session is retrieved.
    assert fractional_recall(
        ["S2", "S7"], ["D2:3", "D2:9", "D4:1"], 5, unit_of=locomo_session
    ) == pytest.approx(2 / 3)
    with pytest.raises(InvalidInput):
        fractional_recall(["D1:1"], [], 5)


def test_session_id_helpers():
    assert strip_turn_suffix("answer_3a6f1e82_1_4") == "answer_3a6f1e82_1"
    assert strip_turn_suffix("sharegpt_x_3") == "sharegpt_x"
    assert locomo_session("D12:3") == "S12"


def test_turn_to_session_grows_k_until_k_sessions():
    # Ranked turns: three from session a, then b, then c; gold is a turn of c.
    ranked = ["a_1", "a_2", "a_3", "b_1", "c_1", "c_2"]
    s = turn_to_session(ranked, {"c_2"}, 2)
    # Two distinct sessions need the top 4 turns: a, b; c is not among them.
    assert s["effective_k"] == 4 and s["recall_any"] == 0.0 and s["ndcg_any_lme"] == 0.0
    s = turn_to_session(ranked, {"c_2", "a_1"}, 3)
    assert s["effective_k"] == 5 and s["recall_all"] == 1.0
    # nDCG over turns: relevant positions 1, 2, 3 (session a) and 5 (c), ideal = 5 ones (a x3 + c x2 in corpus).
    rels = [1, 1, 1, 0, 1]
    assert s["ndcg_any_lme"] == pytest.approx(dcg(rels, 5) / dcg([1] * 5, 5))
    assert s["ndcg_any_std"] == pytest.approx(dcg(rels, 5, "standard") / dcg([1] * 5, 5, "standard"))


def test_turn_to_session_stops_past_the_corpus():
    # One session only: k' grows past the corpus (to its size + 1, as upstream's loop) and stops.
    s = turn_to_session(["a_1", "a_2", "a_3"], {"a_1"}, 2)
    assert s["effective_k"] == 4 and s["recall_all"] == 1.0 and s["ndcg_any_lme"] == 1.0
    # k larger than the corpus from the start: k' stays k.
    assert turn_to_session(["a_1", "a_2"], {"a_1"}, 5)["effective_k"] == 5


def test_retrieval_scores_labels_and_failures():
    gold = {"q1": {"s1_1"}, "q2": {"s2_1"}}
    rows, agg = retrieval_scores(
        {"q1": ["s1_1", "s3_1"], "q2": Failed("crash")}, gold, ks=(1,), session_of=strip_turn_suffix
    )
    assert set(agg) == {
        "frac_recall@1", "recall_any@1", "recall_all@1", "ndcg_any_lme@1", "ndcg_any_std@1",
        "session_recall_any@1", "session_recall_all@1", "session_ndcg_any_lme@1", "session_ndcg_any_std@1",
    }  # fmt: skip
    assert rows[1]["error"] == "crash" and rows[1]["recall_any@1"] == 0.0
    assert agg["recall_any@1"] == 0.5  # the failed question is in the mean


# Memory metrics ----------------------------------------------------------------------------------


def test_failure_counts_zero_not_skipped():
    """A question with an error counts as 0 in a higher-is-better average, never as a skipped row."""
    r = per_question("judge", [1.0, True, Failed("LLM timeout"), None])
    assert r.n == 4 and r.errors == 2 and r.mean == 0.5
    assert [row.value for row in r.rows] == [1.0, 1.0, 0.0, 0.0]
    assert r.rows[2] == Row("2", 0.0, "LLM timeout")
    worse = per_question("cost", [0.2, Failed("x")], higher_is_better=False)
    assert worse.mean == pytest.approx(0.6)


def test_metric_result_helpers():
    r = MetricResult("m", [Row("a", 1.0), Row("b", 0.0), Row("c", 0.5), Row("d", 1.0)])
    assert r.by_group({"a": "x", "b": "x", "c": "y"}) == {"?": 1.0, "x": 0.5, "y": 0.5}
    assert r.quantile(0.5) == 0.75 and r.quantile(1.0) == 1.0
    assert math.isnan(MetricResult("e", []).mean)


def test_is_stale():
    assert is_stale(["old", "x"], {"old"}, {"new"})  # only the stale one recalled
    assert is_stale(["old", "new"], {"old"}, {"new"})  # stale ranked above the update
    assert not is_stale(["new", "old"], {"old"}, {"new"})
    assert not is_stale(["x", "y"], {"old"}, {"new"})  # neither: not stale (a recall miss instead)
    assert not is_stale(["x", "old"], {"old"}, {"new"}, k=1)


def test_stale_rate_failure_counts_as_stale():
    r = stale_rate(
        [["old"], ["new", "old"], Failed("boom")], [{"old"}] * 3, [{"new"}] * 3, qids=["a", "b", "c"]
    )
    assert [row.value for row in r.rows] == [1.0, 0.0, 1.0]
    assert r.errors == 1 and not r.higher_is_better and r.mean == pytest.approx(2 / 3)
    with pytest.raises(InvalidInput):
        stale_rate([["old"]], [{"old"}, {"old"}], [{"new"}])


def test_stale_answer_rate():
    answers = [
        "You live in Berlin.",  # stale
        "You moved from Berlin to Lisbon.",  # names the new value: correct, as LongMemEval's judge
        "No idea.",  # neither
        None,  # failed
    ]
    r = stale_answer_rate(answers, [["Berlin"]] * 4, [["Lisbon"]] * 4)
    assert [row.value for row in r.rows] == [1.0, 0.0, 0.0, 1.0]
    assert mentions("Around 250ms now.", ["250ms"]) and not mentions("Berliner", ["Berlin"])


def test_context_recall():
    r = context_recall([{"D1:1", "D2:2"}, ["D3:3"], Failed("x")], [{"D1:1", "D9:9"}, {"D3:3"}, {"D4:4"}])
    assert [row.value for row in r.rows] == [0.5, 1.0, 0.0]
    with pytest.raises(InvalidInput, match="no gold"):
        context_recall([{"a"}], [set()])


def test_forgetting_precision_recall_collateral():
    res = forgetting(
        forgotten=[{"t1", "k1"}, set(), {"t1"}, Failed("store error")],
        targets=[{"t1", "t2"}, {"t1"}, set(), {"t1"}],
        keep=[{"k1", "k2"}, {"k1"}, set(), {"k1"}],
    )
    assert [r.value for r in res["forgetting_precision"].rows] == [0.5, 1.0, 0.0, 0.0]
    assert [r.value for r in res["forgetting_recall"].rows] == [0.5, 0.0, 1.0, 0.0]
    assert [r.value for r in res["collateral"].rows] == [0.5, 0.0, 0.0, 1.0]
    assert not res["collateral"].higher_is_better
    with pytest.raises(InvalidInput, match="both"):
        forgetting([set()], [{"a"}], [{"a"}])


def test_abstention_scores():
    res = abstention(
        [True, False, True, False, Failed("x"), Failed("y")], [True, True, False, False, True, False]
    )
    assert [r.value for r in res["abstention_accuracy"].rows] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert [r.value for r in res["abstain_rate"].rows] == [1.0, 0.0, 0.0]
    assert [r.value for r in res["false_abstain_rate"].rows] == [1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("answer", "confidence", "expected"),
    [
        ("No information available.", None, True),
        ("That is not mentioned in our conversations.", None, True),
        ("I don't know.", None, True),
        ("Uncertain — the team lead changed.", None, True),
        ("Seoyun Choi", "unknown", True),
        ("Seoyun Choi", "certain", False),
        ("", None, False),
        (None, None, False),
    ],
)
def test_is_abstention(answer, confidence, expected):
    assert is_abstention(answer, confidence) is expected


def test_tokens_packed():
    r = tokens_packed([100, 300, Failed("x")], budget=512)
    assert [row.value for row in r.rows] == [100.0, 300.0, 512.0] and not r.higher_is_better
    assert tokens_packed([100, 300, None]).rows[2].value == 300.0  # worst observed without a budget


def test_real_pass_rate():
    r = real_pass_rate([True, False, True, True], [True, True, False, Failed("x")])
    assert [row.value for row in r.rows] == [1.0, 0.0, 0.0, 0.0]
