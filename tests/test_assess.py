"""The trust assessor: value comparison, claim classes, provenance, pack trust, tools, re-grounding, the evaluator."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo.assess import (
    BoundTool,
    Check,
    Claim,
    SQLTool,
    bind_tools,
    classify_claim,
    decide,
    ground,
    judge_claim,
    pack_trust,
    provenance_trust,
    render_value,
    run_checks,
    values_agree,
)
from mnemo.clock import SimulatedClock
from mnemo.config import Config, TrustConfig
from mnemo.errors import InvalidInput
from mnemo.memory import Memory
from mnemo.model import MemoryRecord

T0 = datetime(2025, 6, 1, tzinfo=timezone.utc)
CFG = TrustConfig()


def rec(**kw) -> MemoryRecord:
    base = dict(id="m-1", user="ops", text="Lead time for AX-7 is 14 days", subject="AX-7", attribute="lead_time",
                value="14 days", importance=0.8, created_at=T0, valid_from=T0)
    base.update(kw)
    return MemoryRecord(**base)


@pytest.fixture
def mem():
    m = Memory.open(":memory:", embedder="hash", llm="offline", clock=SimulatedClock(T0),
                    config=Config.from_params(tool_timeout_s=0.3))
    yield m
    m.close()


def add_lead_time(mem, value="14 days", days_ago=10, source="user", confirmations=()):
    kw = dict(user="ops", subject="AX-7", attribute="lead_time", value=value, source=source, importance=0.8)
    m = mem.add(f"Lead time for AX-7 is {value}", at=T0 - timedelta(days=days_ago), **kw)
    for d in confirmations:
        m = mem.add(f"Lead time for AX-7 is {value}", at=T0 - timedelta(days=d), **kw)
    return m


# ----------------------------------------------------------------- values
@pytest.mark.parametrize("a,b", [("21 days", "21 d"), ("21 days", "21"), ("21 days", 21), ("3 weeks", "21 days"),
                                 ("1200 EUR", "€1,200"), (0.1 + 0.2, "0.3"), ("2025-03-01", "March 1, 2025"),
                                 ("Open", "open"), ("12.5 kg", "12.500000001 kg"), (21.0, "21 days")])
def test_values_that_agree(a, b):
    assert values_agree(a, b) and values_agree(b, a)


@pytest.mark.parametrize("a,b", [("14 days", "21"), ("500 EUR", "500 USD"), ("net 30", "net 45"),
                                 ("21 days", "21 EUR"), ("2025-03-01", "2025-03-02"), ("x", None), (None, None)])
def test_values_that_disagree(a, b):
    assert not values_agree(a, b)


def test_a_bare_number_takes_the_base_unit_of_its_dimension():
    assert render_value(42, "3 weeks") == "42 days"
    assert render_value(1350, "1200 EUR") == "1350 EUR"
    assert render_value("net 45", "net 30") == "net 45"
    assert values_agree(render_value(42, "3 weeks"), 42)


# ----------------------------------------------------------------- claims
@pytest.mark.parametrize("kw,kind", [
    ({}, "verifiable"),
    ({"subject": "acme", "attribute": "stock", "value": "12"}, "verifiable"),
    ({"subject": "acme", "attribute": "contact", "value": "Dana"}, "unverifiable"),
    ({"subject": "acme", "attribute": "contact", "value": "Dana", "source": "structured"}, "verifiable"),
    ({"category": "preference"}, "unverifiable"),
    ({"subject": "user", "attribute": "city", "value": "Lisbon"}, "unverifiable"),
    ({"subject": "user's sister", "attribute": "amount", "value": "3"}, "unverifiable"),
    ({"attribute": None}, "unverifiable"),
    ({"value": None}, "unverifiable"),
])
def test_classify_claim(kw, kind):
    assert classify_claim(rec(**kw)) == kind


@settings(max_examples=200, deadline=None)
@given(age=st.floats(0, 5000), extra=st.floats(0, 500), c=st.integers(0, 20),
       source=st.sampled_from(["structured", "tool", "user", "derived", "elsewhere"]),
       category=st.sampled_from(["fact", "preference", "routine"]))
def test_provenance_trust_is_bounded_monotone_in_age_and_corroboration(age, extra, c, source, category):
    def trust(a, n):
        m = rec(valid_from=T0 - timedelta(days=a), created_at=T0 - timedelta(days=a), corroborations=n,
                source=source, category=category)
        return provenance_trust(m, T0, CFG)

    assert 0.0 <= trust(age, c) <= 1.0
    assert trust(age + extra, c) <= trust(age, c) + 1e-12
    assert trust(age, c + 1) >= trust(age, c) - 1e-12


def test_single_source_and_weak_source_cost_trust():
    fresh = rec(corroborations=1)
    assert provenance_trust(rec(corroborations=0), T0, CFG) < provenance_trust(fresh, T0, CFG)
    assert provenance_trust(rec(source="derived"), T0, CFG) < provenance_trust(rec(source="structured"), T0, CFG)


claims = st.builds(
    lambda t, lb: Claim(rec(), "unverifiable", "unverifiable", t, lb),
    st.floats(0, 1), st.booleans())


@given(st.lists(claims, max_size=12))
def test_pack_trust_is_the_minimum_over_load_bearing_claims(cs):
    bearing = [c.trust for c in cs if c.load_bearing]
    if bearing:
        assert pack_trust(cs) == min(bearing)
    else:
        assert pack_trust(cs) == (cs[0].trust if cs else 0.0)


@given(st.lists(claims, min_size=1, max_size=8), st.floats(0, 1))
def test_a_trusted_extra_claim_never_raises_pack_trust(cs, t):
    extra = Claim(rec(), "unverifiable", "unverifiable", t, True)
    if any(c.load_bearing for c in cs):
        assert pack_trust([*cs, extra]) <= pack_trust(cs)


@given(answer=st.one_of(st.none(), st.integers(), st.text(), st.floats(allow_nan=True)),
       error=st.one_of(st.none(), st.text(min_size=1)))
def test_a_failed_check_never_verifies(answer, error):
    check = Check("erp", answer, error)
    status, fresh = ground(rec(), check)
    if error is not None:
        assert status == "unverified" and fresh is None
    claim = judge_claim(rec(source="structured", corroborations=9), check, T0, CFG)
    if status == "unverified":
        assert claim.trust == 0.0 and claim.load_bearing
        assert decide(pack_trust([claim]), CFG) == "escalate"


@given(st.floats(0.01, 1.0))
def test_unverified_claim_escalates_at_any_positive_threshold(threshold):
    cfg = replace(CFG, act_threshold=threshold)
    claim = judge_claim(rec(), Check("erp", None, "TimeoutError"), T0, cfg)
    other = judge_claim(rec(id="m-2", category="preference", importance=0.9), None, T0, cfg)
    assert decide(pack_trust([other, claim]), cfg) == "escalate"


def test_decide_threshold_is_inclusive():
    assert decide(CFG.act_threshold, CFG) == "act"
    assert decide(CFG.act_threshold - 1e-9, CFG) == "escalate"


# ----------------------------------------------------------------- tools
def test_run_checks_turns_errors_and_timeouts_into_unverified():
    def boom(m):
        raise ConnectionError("down")

    def slow(m):
        time.sleep(1.0)
        return "14 days"

    jobs = [(rec(id="a"), BoundTool("boom", boom)), (rec(id="b"), BoundTool("slow", slow)),
            (rec(id="c"), BoundTool("ok", lambda m: 14))]
    began = time.perf_counter()
    out = run_checks(jobs, 0.2, T0)
    assert time.perf_counter() - began < 0.9
    assert out["a"].error.startswith("ConnectionError") and out["b"].error.startswith("timed out")
    assert out["c"].error is None and out["c"].answer == 14
    assert [ground(rec(), out[k])[0] for k in "abc"] == ["unverified", "unverified", "verified"]


def test_bind_tools_forms():
    def erp(m):
        return None

    assert bind_tools(None) == []
    assert bind_tools(erp)[0].covers(rec(attribute="anything"))
    keyed = bind_tools({"lead_time": lambda key: key})
    assert keyed[0].covers(rec()) and not keyed[0].covers(rec(attribute="stock"))
    assert keyed[0].fn(rec(record_id="AX-7")) == "AX-7"
    assert len(bind_tools([erp, {"stock": erp}])) == 2
    with pytest.raises(InvalidInput):
        bind_tools(42)


@pytest.fixture
def erp_file(tmp_path):
    path = tmp_path / "erp.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE parts (part_no VARCHAR, lead_time_days INTEGER, stock INTEGER)")
    con.execute("INSERT INTO parts VALUES ('AX-7', 21, 5), ('DUP-1', 1, 1), ('DUP-1', 2, 2)")
    con.close()
    return path


def test_sql_tool_reads_a_read_only_system_of_record(erp_file):
    tool = SQLTool(erp_file, "parts", "part_no", {"lead_time": "lead_time_days", "stock": "stock"})
    try:
        assert tool(rec(subject="ax-7")) == 21
        assert tool(rec(subject="NOPE-1")) is None
        with pytest.raises(LookupError):
            tool(rec(subject="DUP-1"))
        with pytest.raises(duckdb.Error):
            tool._con.execute("DELETE FROM parts")  # the adapter's own connection is read-only
    finally:
        tool.close()
    with pytest.raises(InvalidInput, match="no column"):
        SQLTool(duckdb.connect(str(erp_file), read_only=True), "parts", "part_no", ["missing_col"])


# ----------------------------------------------------------------- the stage, through the Memory API
def test_stale_claim_is_regrounded_through_the_write_path(mem):
    old = add_lead_time(mem, "14 days")
    r = mem.recall("What is the lead time for AX-7?", user="ops")
    a = mem.assess(r, tools={"lead_time": lambda key: 21 if key == "AX-7" else None})
    assert a.verdict == "act" and a.claims[0].status == "regrounded"
    assert [p.memory.value for p in a.pack.memories] == ["21 days"]
    assert "re-grounded" in a.pack.memories[0].note and a.pack.citations[0].memory_id == a.pack.memories[0].id
    (sup,) = a.regrounded
    assert sup.old.id == old.id and sup.reason == "re-grounded"
    assert set(sup.evidence) == {"tool", "answer", "old_value", "at"} and sup.evidence["old_value"] == "14 days"
    assert mem.get(old.id).status == "superseded" and mem.get(old.id).successor_id == sup.new.id
    assert mem.get(sup.new.id).active and mem.get(sup.new.id).source == "tool"
    assert any(e.action == "superseded" and e.reason == "re-grounded" for e in mem.history(old.id))
    assert any(lk.kind == "supersedes" for lk in mem.store.links([old.id]))


@pytest.mark.parametrize("failure", ["error", "timeout", "no answer", "ambiguous"])
def test_a_failing_tool_never_yields_act(mem, failure):
    # The strongest provenance there is: structured, corroborated, confirmed today.
    old = add_lead_time(mem, "14 days", days_ago=3, source="structured", confirmations=(1, 0))

    def tool(m):
        if failure == "error":
            raise RuntimeError("ERP 503")
        if failure == "timeout":
            time.sleep(1.0)
        if failure == "ambiguous":
            raise LookupError("two rows")
        return None

    r = mem.recall("What is the lead time for AX-7?", user="ops")
    a = mem.assess(r, tools=tool)
    assert a.verdict == "escalate" and a.trust == 0.0
    assert a.claims[0].status == "unverified" and a.claims[0].check.tool == "tool"
    assert a.regrounded == () and mem.get(old.id).active


def test_verified_claim_acts_and_writes_nothing(mem):
    old = add_lead_time(mem, "3 weeks", days_ago=400, source="derived")
    before = mem.store.stats()
    a = mem.assess(mem.recall("lead time for AX-7", user="ops"), tools={"lead_time": lambda k: 21})
    assert a.verdict == "act" and a.claims[0].status == "verified" and a.regrounded == ()
    after = mem.store.stats()
    assert (after["memories"], after["events"], after["links"]) == (before["memories"], before["events"],
                                                                  before["links"])
    assert mem.get(old.id).active


def test_unchecked_and_unverifiable_claims_use_provenance(mem):
    add_lead_time(mem, "14 days", days_ago=300)
    mem.add("The user prefers aisle seats", user="ops", subject="user", attribute="seat", value="aisle",
            category="preference", importance=0.3, at=T0 - timedelta(days=900))
    a = mem.assess(mem.recall("lead time for AX-7 and aisle seats", user="ops"), tools={"stock": lambda k: 1})
    by = {c.memory.attribute: c for c in a.claims}
    assert by["lead_time"].status == "unchecked" and by["lead_time"].load_bearing
    assert by["seat"].status == "unverifiable" and not by["seat"].load_bearing
    assert a.trust == by["lead_time"].trust < CFG.act_threshold and a.verdict == "escalate"


def test_empty_pack_escalates(mem):
    a = mem.assess(mem.recall("anything at all?", user="nobody"))
    assert a.pack.memories == [] and a.verdict == "escalate" and a.trust == 0.0


def test_sql_tool_regrounds_end_to_end(mem, erp_file):
    add_lead_time(mem, "14 days")
    tool = SQLTool(erp_file, "parts", "part_no", {"lead_time": "lead_time_days"})
    try:
        a = mem.assess(mem.recall("What is the lead time for AX-7?", user="ops"), tools=[tool])
    finally:
        tool.close()
    assert a.verdict == "act" and a.pack.memories[0].memory.value == "21 days"
    assert a.regrounded[0].evidence["tool"] == "sql:parts"


# ----------------------------------------------------------------- the evaluator
@pytest.fixture(scope="module")
def trust_results():
    from mnemo.eval.trust_eval import run_trust

    return run_trust()


@pytest.mark.slow
def test_trust_set_is_large_stratified_and_separate_from_ladders(trust_results):
    rows = trust_results["rows"]
    decisive = [r for r in rows if not r["ladder"]]
    assert len(decisive) >= 60 and len(rows) > len(decisive)
    heldout = sum(r["split"] == "heldout" for r in decisive) / len(decisive)
    assert 0.2 <= heldout <= 0.4
    for label in ("safe", "unsafe"):
        assert any(r["split"] == "heldout" and r["label"] == label for r in decisive)
    assert trust_results["ladders"] and all(len(v["rungs"]) >= 5 for v in trust_results["ladders"].values())


@pytest.mark.slow
def test_trust_figures_are_sane(trust_results):
    held = trust_results["splits"]["heldout"]
    assert held["errors"] == 0 and trust_results["missing_from_pack"] == 0
    # Decisive cases are unambiguous by construction, so a working assessor sits far from both trivial
    # policies (always act: unsafe acceptance near 1; always escalate: over-abstention 1). A quarter is
    # half of what a coin would score; the figures themselves are reported, not pinned here.
    assert held["unsafe_acceptance"] <= 0.25 and held["over_abstention"] <= 0.25
    # Fail-closed is not a figure but an invariant: no tool failure family may ever act.
    for r in trust_results["rows"]:
        if r["family"] in ("tool_error", "tool_timeout", "tool_missing"):
            assert r["verdict"] == "escalate", r["id"]
