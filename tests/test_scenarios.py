"""Scenarios: the files load strictly, mnemo passes their expectations, the baselines fail as they should.

Every scenario is played once (module fixture) through mnemo's default recipe and the four
baselines with the offline stack. A probe mnemo genuinely fails is kept failing in the table and
marked xfail here with the reason; its expectation is never weakened.
"""

from __future__ import annotations

import pytest

from mnemo.eval.harness import run_scenarios
from mnemo.eval.scenarios import SCENARIO_DIR, ScenarioError, load_scenarios, parse_scenario

MNEMO = "mnemo:default"
# What the offline stack cannot do yet. Each entry is a real failure, reported, not a relaxed check.
# Probes mnemo fails with the offline stack, with why (none at present: failure_cause/practice passes since
# the fitted answerability may overturn the claim rules' "unknown"; a diet and a job
# asked for in words unlike the memory's, pass since coverage counts a typed memory's attribute name).
KNOWN_FAILURES: dict[str, str] = {}
REQUIRED = {"correction", "preference_change", "manual_forget", "budget_pressure", "cross_entity",
            "decay_staleness", "multi_valued", "paraphrased_duplicates", "failure_cause", "injection", "abstention"}


@pytest.fixture(scope="module")
def played():
    """Return {(scenario/probe, system): row} and the aggregates of every scenario through every system."""
    rows, aggregates, provenance = run_scenarios(load_scenarios(), recipes=["default"], embedder="auto")
    assert set(provenance) == {MNEMO, "no_memory", "full_history", "recent_only", "naive_rag"}
    return {(f"{r['scenario']}/{r['probe']}", r["system"]): r for r in rows}, aggregates


def _probe_ids() -> list:
    out = []
    for s in load_scenarios():
        for p in s.probes:
            key = f"{s.name}/{p.id}"
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[key])] if key in KNOWN_FAILURES else []
            out.append(pytest.param(key, id=key, marks=marks))
    return out


def test_scenario_files_cover_the_issue():
    scenarios = load_scenarios()
    assert len(scenarios) >= 10
    assert REQUIRED <= {s.name for s in scenarios}
    assert all(s.path and s.path.startswith(str(SCENARIO_DIR)) for s in scenarios)
    # Each kind of expectation is exercised somewhere.
    probes = [p for s in scenarios for p in s.probes]
    assert any(p.expect for p in probes) and any(p.forbid for p in probes) and any(p.abstain for p in probes)
    assert any(p.forgets for p in probes) and any(p.survivors for p in probes)
    assert any(st.action == "forget" for s in scenarios for st in s.steps)
    assert any(s.decay or any(x.decay for x in s.sessions) for s in scenarios)


@pytest.mark.parametrize("key", _probe_ids())
def test_mnemo_passes_each_probe(played, key):
    rows, _ = played
    row = rows[(key, MNEMO)]
    assert row["error"] is None
    assert row["passed"], {k: row[k] for k in ("context", "history", "context_recall", "stale",
                                                "forgetting_precision", "forgetting_recall", "collateral",
                                                "abstained", "confidence")}


def test_failing_rows_stay_in_the_table(played):
    rows, aggregates = played
    failed = [k for (k, system), r in rows.items() if system == MNEMO and not r["passed"]]
    assert set(failed) == set(KNOWN_FAILURES)
    mine = [r for (k, s), r in rows.items() if s == MNEMO]
    assert aggregates[MNEMO]["probes"] == len(mine)
    assert aggregates[MNEMO]["pass_rate"] == pytest.approx(sum(r["passed"] for r in mine) / len(mine))


def test_baselines_show_their_failure_modes(played):
    rows, agg = played
    # Full history keeps the stale statement ahead of its correction.
    assert rows[("correction/city", "full_history")]["stale"] == 1.0
    assert rows[("preference_change/drink", "full_history")]["stale"] == 1.0
    # Naive RAG retrieves the stale turn, which looks as relevant as its correction (here more so).
    assert rows[("preference_change/drink", "naive_rag")]["stale"] == 1.0
    # Under budget pressure the head (full history) and the tail (recent only) both miss the buried fact.
    assert rows[("budget_pressure/allergy", "full_history")]["context_recall"] == 0.0
    assert rows[("budget_pressure/allergy", "recent_only")]["context_recall"] == 0.0
    # No baseline can forget: the forgotten phone number is still shown, and forgetting recall is 0.
    for b in ("full_history", "recent_only", "naive_rag"):
        phone = rows[("manual_forget/phone", b)]
        assert phone["stale"] == 1.0 and phone["forgetting_recall"] == 0.0 and phone["forgetting_precision"] == 1.0
    # No memory knows nothing and abstains on everything.
    assert agg["no_memory"]["context_recall"] == 0.0 and agg["no_memory"]["abstained"] == 1.0
    # And mnemo does better than every baseline where it matters.
    for b in ("no_memory", "full_history", "recent_only", "naive_rag"):
        assert agg[MNEMO]["pass_rate"] > agg[b]["pass_rate"]
        assert agg[MNEMO]["forgetting_recall"] > agg[b]["forgetting_recall"]
    assert agg[MNEMO]["stale"] < min(agg[b]["stale"] for b in ("full_history", "recent_only", "naive_rag"))


def test_every_system_has_a_row_for_every_probe(played):
    rows, _ = played
    keys = {k for k, _ in rows}
    systems = {s for _, s in rows}
    assert len(rows) == len(keys) * len(systems) == len(keys) * 5


@pytest.mark.parametrize("raw, message", [
    ({"name": "x", "about": "y", "user": "u", "sessions": [{"turns": ["hi"]}], "probes": [
        {"id": "p", "question": "q?", "expect": ["a"], "forbidden": ["b"]}]}, "unknown key 'forbidden'.*'forbid'"),
    ({"name": "x", "about": "y", "user": "u", "sessions": [], "probes": []}, "'sessions' must be a non-empty list"),
    ({"name": "x", "about": "y", "user": "u", "sessions": [{"turns": ["hi"]}],
      "probes": [{"id": "p", "question": "q?"}]}, "must check something"),
    ({"name": "x", "about": "y", "user": "u", "sessions": [{"turns": ["hi"]}],
      "probes": [{"id": "p", "question": "q?", "abstain": True, "expect": ["a"]}]}, "cannot also expect"),
    ({"name": "x", "about": "y", "user": "u", "sessions": [{"day": 5, "turns": ["a"]}, {"day": 1, "turns": ["b"]}],
      "probes": [{"id": "p", "question": "q?", "expect": "a"}]}, "time order"),
    ({"name": "x", "about": "y", "user": "u", "sessions": [{"turns": [{"text": "a", "forget": "b"}]}],
      "probes": [{"id": "p", "question": "q?", "expect": "a"}]}, "exactly one of 'text' or 'forget'"),
    ({"name": "x", "about": "y", "user": "u", "budget_tokens": 0, "sessions": [{"turns": ["a"]}],
      "probes": [{"id": "p", "question": "q?", "expect": "a"}]}, "budget_tokens"),
])
def test_loader_is_strict(raw, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(raw)


def test_loader_defaults_and_abstention_rule():
    s = parse_scenario({"name": "x", "about": "y", "user": "u", "sessions": [
        {"turns": ["a", {"forget": "b"}, {"text": "c", "user": "v"}]}],
        "probes": [{"id": "p", "question": "q?", "expect": "a"}, {"id": "f", "question": "q?", "forbid": "b"}]})
    assert s.budget_tokens == 256 and s.start.isoformat().startswith("2024-01-01")
    assert [(x.action, x.user) for x in s.steps] == [("turn", "u"), ("forget", "u"), ("turn", "v")]
    assert s.probes[0].expect == ("a",)
    # A probe expecting values must not abstain; a forbid-only probe leaves abstention unchecked.
    assert s.probes[0].should_abstain is False and s.probes[1].should_abstain is None


def test_load_scenarios_by_name_and_unknown_name(tmp_path):
    assert [s.name for s in load_scenarios(names=["correction"])] == ["correction"]
    with pytest.raises(ScenarioError, match="unknown scenario"):
        load_scenarios(names=["nope"])
    with pytest.raises(ScenarioError, match="no scenario files"):
        load_scenarios(tmp_path)


def test_the_fresh_halves_load_and_match():
    """data/scenarios-fresh: two halves of 20 written blind, matched in mix (README), both strict-loadable."""
    fresh = SCENARIO_DIR.parent / "scenarios-fresh"
    a, b = load_scenarios(fresh / "A"), load_scenarios(fresh / "B")
    assert len(a) == len(b) == 20
    abstain = [sum(p.abstain is True for s in half for p in s.probes) for half in (a, b)]
    assert abstain[0] == abstain[1] > 0
    assert not {s.name for s in a} & {s.name for s in b}
