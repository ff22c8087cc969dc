"""The MEME runner on the one published episode (sw_033): 10 questions, a unit-level check, never a score.

Reads $MNEMO_DATA_DIR/meme. Skips only when MNEMO_DATA_DIR is unset; when it is set (as in CI) a
missing meme/ folder FAILS, as in test_benchmarks_real. The episode is played once (module fixture)
through `run_benchmark("meme")` with the fast hash embedder. A probe mnemo genuinely fails stays a
failing row in the results and is marked xfail (strict) here with the reason; its expectation is
never weakened, and the test turns red when mnemo starts passing it (update KNOWN_FAILURES then).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from conftest import require_data

from mnemo.eval import bench, datasets
from mnemo.eval.bench import meme as bench_meme

DELETED = "stream.velturis.io/aurora"
# Paired after-questions mnemo fails with the offline stack, and why. Each is a real failure, reported.
# Probes mnemo fails on this episode, with why. None at present: the cascade and absence probes pass since
# "if the team lead changes, this would change" links a memory `depends_on` the team lead (mnemo.write), and
# recall shows it as uncertain history once the lead is superseded (mnemo.recall).
KNOWN_FAILURES: dict[str, str] = {}


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The benchmark folder: skip when MNEMO_DATA_DIR is unset, fail when it is set but lacks meme/."""
    return require_data("meme")


@pytest.fixture(scope="module")
def res(data_dir) -> bench.BenchResult:
    return bench.run_benchmark("meme", embedder="hash")


@pytest.fixture(scope="module")
def by(res) -> dict:
    return {r["question_id"]: r for r in res.rows}


def test_registered():
    assert "meme" in bench.BENCHMARKS and "meme" in bench.SUMMARY_COLUMNS


def test_one_row_per_question_with_its_kind(res, by):
    ds = datasets.load("meme")
    assert res.name == "meme" and len(res.rows) == len(ds.questions) == 10
    assert set(by) == {q.id for q in ds.questions}
    assert Counter(r["phase"] for r in res.rows) == {"before": 4, "after": 6}
    assert Counter(r["probe"] for r in res.rows) == {"recall": 6, "tracking": 1, "cascade": 1, "abstain": 1,
                                                     "deletion": 1}
    for r in res.rows:
        assert r["error"] is None and r["recipe"] == "default", r
        assert r["passed"] in (0.0, 1.0) and r["confidence"] in ("certain", "vague", "unknown")
        assert 0 <= r["tokens"] <= 512 and r["items"] >= 0
        for k in ("context_recall", "leaked", "stale", "abstained", "real_pass"):
            assert math.isnan(r[k]) or 0.0 <= r[k] <= 1.0, (r["qid"], k)
    assert not math.isnan(by["sw_033/after/3"]["leaked"]) and not math.isnan(by["sw_033/after/2"]["stale"])
    assert all(not math.isnan(by[q]["context_recall"]) for q in by if by[q]["probe"] in ("recall", "tracking"))


def test_real_pass_only_on_paired_after_questions(res):
    paired = {r["question_id"] for r in res.rows if not math.isnan(r["real_pass"])}
    assert paired == {"sw_033/after/1", "sw_033/after/2", "sw_033/after/3"}
    for r in res.rows:
        if r["question_id"] in paired:
            assert r["real_pass"] <= r["passed"]


def test_aggregates_and_summary(res):
    groups = {"all", "before", "after", "recall", "tracking", "cascade", "abstain", "deletion"}
    assert {f"default | {g}" for g in groups} <= set(res.aggregates)
    assert res.aggregates["default | all"]["n"] == 10 and res.aggregates["default | before"]["n"] == 4
    assert res.params["budget"] == 512 and res.checksums
    header, rows = bench.summary("meme", res.aggregates)
    assert header[:3] == ["group", "n", "passed"] and "real_pass" in header and len(rows) == len(res.aggregates)


def test_before_questions_know_the_values(by):
    # The guard against a memory that forgets everything: before session 14 changes and deletes them,
    # the weekly report recipient, the code reviewer and the log drain endpoint are all packed.
    for qid in ("sw_033/before/0", "sw_033/before/1", "sw_033/before/2"):
        assert by[qid]["passed"] == 1.0 and by[qid]["context_recall"] == 1.0, by[qid]


def test_deletion_row_is_recorded(by):
    r = by["sw_033/after/3"]
    assert r["probe"] == "deletion" and r["pair"] == "sw_033/before/2"
    assert r["passed"] == 1.0 - r["leaked"] and r["real_pass"] == r["passed"]


@pytest.mark.parametrize("qid", [
    pytest.param(q, id=q, marks=[pytest.mark.xfail(strict=True, reason=why)] if (why := KNOWN_FAILURES.get(q)) else [])
    for q in ("sw_033/after/1", "sw_033/after/2", "sw_033/after/3")])
def test_change_and_delete_real_pass(by, qid):
    # Deletion: the endpoint is not packed after the user asked to delete it; cascade: James Lee without the
    # old recipient; abstain: the old reviewer is not stated as current. Each only counts if its before passed.
    assert by[qid]["real_pass"] == 1.0, by[qid]
    if qid == "sw_033/after/3":
        assert by[qid]["leaked"] == 0.0


def test_gold_values_split_the_log_and_drop_glosses(data_dir):
    qs = {q.id: q for q in datasets.load("meme").questions}
    log = bench_meme.gold_values(qs["sw_033/before/3"])
    assert len(log) == 4 and log[0].startswith("ConnectionRefusedError")
    assert bench_meme.gold_values(qs["sw_033/after/4"])[0] == "paired oncall"
    assert bench_meme.gold_values(qs["sw_033/after/3"]) == [DELETED]


def test_missing_dataset_is_an_error_not_a_skip(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path))
    with pytest.raises(datasets.DatasetError, match="does not exist"):
        bench_meme.run_meme(embedder="hash")
