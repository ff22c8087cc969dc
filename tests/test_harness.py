"""The harness, baselines, results files and `mnemo eval`, on tiny hand-made cases (no benchmark data)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from typer.testing import CliRunner

from mnemo.cli import app
from mnemo.config import recipe
from mnemo.embed import HashEmbedder
from mnemo.eval import bench
from mnemo.eval.baselines import (
    Context,
    FullHistory,
    Item,
    NaiveRAG,
    NoMemory,
    RecentOnly,
    Record,
    fit,
    make_baseline,
)
from mnemo.eval.harness import git_commit, play, score, write_results
from mnemo.eval.scenarios import parse_scenario
from mnemo.tokens import count_many

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
SCENARIO = {
    "name": "tiny", "about": "a correction and a forget", "user": "u", "budget_tokens": 64,
    "sessions": [{"id": "s1", "day": 0, "turns": ["I live in Berlin.", "My phone number is 555-0142."]},
                 {"id": "s2", "day": 3, "turns": ["Actually I moved to Lisbon.", {"forget": "my phone number"}]}],
    "probes": [
        {"id": "city", "question": "Where does the user live?", "expect": ["Lisbon"], "forbid": ["Berlin"],
         "forgets": ["lives in Berlin", "555-0142"], "survivors": ["Lisbon"]},
        {"id": "blood", "question": "What is the user's blood type?", "abstain": True},
    ],
}


class Scripted:
    """A fake system whose context and records are given: checks scoring without any model."""

    name = "scripted"

    def __init__(self, items, records, abstained=False, fail=False):
        self.items, self.rec, self.abstained, self.fail = items, records, abstained, fail

    def ingest(self, text, *, user, session, at):
        if self.fail:
            raise RuntimeError("boom")

    def forget(self, query, *, user, at):
        pass

    def decay(self, at):
        pass

    def context(self, question, *, user, budget, at):
        items = [Item(str(i), t, 5, retracted) for i, (t, retracted) in enumerate(self.items)]
        return Context(items, 5 * len(items), self.abstained)

    def records(self, user):
        return self.rec

    def provenance(self):
        return {"system": "scripted"}

    def close(self):
        pass


def _score(system):
    rows, agg = score(play(parse_scenario(SCENARIO), system))
    return {r["probe"]: r for r in rows}, agg["scripted"]


def test_stale_is_a_forbidden_value_shown_before_any_current_one():
    rows, _ = _score(Scripted([("The user lives in Berlin.", False), ("The user lives in Lisbon.", False)], {}))
    assert rows["city"]["stale"] == 1.0 and rows["city"]["context_recall"] == 1.0 and not rows["city"]["passed"]
    rows, _ = _score(Scripted([("The user lives in Lisbon.", False), ("The user lives in Berlin.", False)], {}))
    assert rows["city"]["stale"] == 0.0
    # A retraction names the old value without asserting it, whether flagged or worded so.
    for item in [("The user no longer lives in Berlin.", False), ("Berlin, the old city.", True)]:
        rows, _ = _score(Scripted([item], {}))
        assert rows["city"]["stale"] == 0.0 and rows["city"]["context_recall"] == 0.0


def test_forgetting_sets_with_phantom_targets_and_collateral():
    records = {"a": ("The user lives in Berlin.", False), "b": ("The user lives in Lisbon.", True),
               "c": ("Unrelated note.", False)}
    rows, _ = _score(Scripted([("The user lives in Lisbon.", False)], records))
    city = rows["city"]
    # F = {a, c}; T = {a, missing:555-0142}; K = {b}.
    assert city["forgetting_precision"] == 0.5 and city["forgetting_recall"] == 0.5 and city["collateral"] == 0.0
    rows, _ = _score(Scripted([("x", False)], {"b": ("The user lives in Lisbon.", False)}))
    assert rows["city"]["collateral"] == 1.0 and rows["city"]["forgetting_recall"] == 0.0


def test_what_states_the_change_is_never_a_forgetting_target():
    """A retraction, or a record that says the current value, mentions the old value and must stay active."""
    records = {"a": Record("The user lives in Berlin.", False),
               "n": Record("The user no longer lives in Berlin.", True, True),
               "q": Record("The user still lives in Berlin, not Lisbon... no: lives in Berlin until Lisbon.", True)}
    rows, _ = _score(Scripted([("The user lives in Lisbon.", False)], records))
    # T = {a, missing:555-0142}: n is a retraction and q says the current value (Lisbon); F = {a}.
    city = rows["city"]
    assert city["forgetting_precision"] == 1.0 and city["forgetting_recall"] == 0.5
    # Without the exception the two active records would have counted as targets not forgotten.
    negated = {"a": Record("The user lives in Berlin.", False), "n": Record("The user lives in Berlin.", True)}
    assert _score(Scripted([("x", False)], negated))[0]["city"]["forgetting_recall"] == 1 / 3


def test_abstention_is_checked_only_where_the_probe_says():
    rows, agg = _score(Scripted([], {}, abstained=True))
    assert rows["blood"]["abstention_correct"] == 1.0 and rows["blood"]["passed"]
    assert rows["city"]["abstention_correct"] == 0.0
    assert agg["abstention_correct"] == 0.5


def test_a_failing_system_is_rows_at_the_worst_value_not_dropped():
    rows, agg = _score(Scripted([], {}, fail=True))
    assert all(r["error"] == "RuntimeError: boom" and not r["passed"] for r in rows.values())
    assert rows["city"]["context_recall"] == 0.0 and rows["city"]["stale"] == 1.0
    assert rows["city"]["forgetting_recall"] == 0.0 and rows["city"]["collateral"] == 1.0
    assert rows["city"]["tokens"] == 64.0 and rows["city"]["RR"] == 0.0
    assert agg["errors"] == 2.0 and agg["pass_rate"] == 0.0 and agg["probes"] == 2.0


def _turns(system, texts):
    for i, t in enumerate(texts):
        system.ingest(t, user="u", session="s", at=T0 + timedelta(minutes=i))
    return T0 + timedelta(days=1)


def test_baselines_pack_under_the_budget_each_their_way():
    texts = [f"Turn number {i} talks about topic {i}." for i in range(10)]
    budget = sum(count_many(texts[:3]))
    full, recent, none = FullHistory(), RecentOnly(), NoMemory()
    for s in (full, recent, none):
        at = _turns(s, texts)
    assert [i.text for i in full.context("q", user="u", budget=budget, at=at).items] == texts[:3]
    assert [i.text for i in recent.context("q", user="u", budget=budget, at=at).items] == texts[-3:]
    empty = none.context("q", user="u", budget=budget, at=at)
    assert empty.items == [] and empty.abstained and empty.tokens == 0
    assert full.context("q", user="other", budget=budget, at=at).abstained
    ctx = full.context("q", user="u", budget=budget, at=at)
    assert ctx.tokens <= budget and not ctx.abstained
    full.forget("anything", user="u", at=at)
    assert all(r.active for r in full.records("u").values())


def test_naive_rag_ranks_by_similarity_and_skips_what_does_not_fit():
    rag = NaiveRAG(HashEmbedder(), k=2)
    at = _turns(rag, ["I live in Lisbon now.", "The weather is nice.", "Lisbon has trams and hills everywhere."])
    ctx = rag.context("Lisbon trams hills", user="u", budget=100, at=at)
    assert ctx.items[0].text.startswith("Lisbon has trams") and len(ctx.items) == 2
    items = fit([rag.turns[2], rag.turns[1]], count_many(["The weather is nice."])[0], stop_at_first_miss=False)
    assert [i.text for i in items] == ["The weather is nice."]
    with pytest.raises(Exception, match="naive_rag needs an embedder"):
        make_baseline("naive_rag")


def test_bench_ranking_is_recalls_fused_order():
    mem = bench.Bench(["hybrid"], HashEmbedder(), "offline").open(T0 + timedelta(days=1))["hybrid"]
    texts = ["Alice moved to Lisbon in May.", "Bob likes sailing.", "Lisbon trams are yellow.", "Cats sleep a lot."]
    mem.insert_many(texts, user="u", metas=[{"dia_id": f"D1:{i}"} for i in range(4)], at=T0)
    ranked = bench.ranking(mem, "When did Alice move to Lisbon?", user="u")
    assert mem.get(ranked[0][0]).meta["dia_id"] == "D1:0"
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    packed = mem.recall("When did Alice move to Lisbon?", user="u", budget_tokens=200)
    assert packed.memories[0].id == ranked[0][0]
    # The bench store keeps questions independent: recall does not reinforce.
    assert mem.get(ranked[0][0]).access_count == 0
    dense = bench.ranking(mem, "When did Alice move to Lisbon?", user="u", cfg=recipe("dense").recall)
    assert {m for m, _ in dense} <= {m.id for m in mem.memories("u")}


def test_write_results_records_config_commit_checksums_provenance(tmp_path):
    rows = [{"qid": "a", "x": 1.0, "y": math.nan, "tags": ["p", "q"]}, {"qid": "b", "x": 0.5, "y": 1.0, "tags": []}]
    json_path, parquet_path = write_results(tmp_path / "out", benchmark="toy", rows=rows, aggregates={"g": {"x": 0.75}},
                                            configs={"default": recipe("default")}, provenance={"g": {"llm": "off"}},
                                            checksums={"toy/file": "abc"}, params={"limit": 1}, started=0.0)
    data = json.loads(json_path.read_text())
    assert data["config"]["default"]["recall"]["budget_tokens"] == 512
    assert data["git_commit"] != "" and data["data_checksums"] == {"toy/file": "abc"}
    assert data["rows"][0]["y"] is None and data["aggregates"]["g"]["x"] == 0.75
    frame = pd.read_parquet(parquet_path)
    assert list(frame["qid"]) == ["a", "b"] and json.loads(frame["tags"][0]) == ["p", "q"]
    assert git_commit(tmp_path) == "unknown"


def test_summary_table_picks_the_benchmark_columns():
    header, rows = bench.summary("locomo", {"hybrid | main": {"n": 10.0, "R@5": 0.5, "nDCG@10": math.nan}})
    assert header == ["group", "n", "R@5", "nDCG@10"] and rows == [["hybrid | main", "10", "0.500", "-"]]


def test_mnemo_eval_scenarios_cli(tmp_path):
    out = tmp_path / "res"
    res = CliRunner().invoke(app, ["eval", "scenarios", "--limit", "1", "--no-baselines", "--embedder", "hash",
                                   "-r", "default", "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "results.json").read_text())
    assert data["benchmark"] == "scenarios" and set(data["provenance"]) == {"mnemo:default"}
    assert data["provenance"]["mnemo:default"]["llm"]["mode"] == "offline"
    assert len(data["rows"]) == len(pd.read_parquet(out / "rows.parquet")) > 0
    assert any(k.startswith("scenarios/") for k in data["data_checksums"])
    res = CliRunner().invoke(app, ["eval", "nope", "-o", str(out)])
    assert res.exit_code != 0
