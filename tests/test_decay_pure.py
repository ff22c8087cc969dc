"""Property and example tests for the pure decay functions: salience, TTL tiers, offline review."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo.config import DecayConfig
from mnemo.decay import (
    REVIEW_JUDGE,
    anchor,
    deadline_of,
    decays,
    half_life_days,
    review_offline,
    salience,
    ttl_for,
)
from mnemo.model import CATEGORIES, KINDS, MemoryRecord

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
CFG = DecayConfig()

days = st.floats(min_value=0, max_value=3650, allow_nan=False)
opt_days = st.none() | days


@st.composite
def memories(draw, *, exempt: bool | None = None) -> MemoryRecord:
    """A memory with arbitrary importance, counts, kind, category and times around T0."""
    created, valid, accessed = draw(days), draw(opt_days), draw(opt_days)
    category = draw(st.sampled_from(CATEGORIES))
    pinned = draw(st.booleans())
    if exempt is False:
        pinned = False
        category = draw(st.sampled_from([c for c in CATEGORIES if c not in CFG.exempt_categories]))
    return MemoryRecord(
        id="m1", user="u", text="x",
        kind=draw(st.sampled_from(KINDS + ("unknown-kind",))),
        category=category, pinned=pinned,
        importance=draw(st.floats(min_value=-1, max_value=2, allow_nan=False)),
        access_count=draw(st.integers(min_value=0, max_value=10_000)),
        corroborations=draw(st.integers(min_value=0, max_value=1_000)),
        created_at=T0 + timedelta(days=created),
        valid_from=None if valid is None else T0 + timedelta(days=valid),
        last_accessed=None if accessed is None else T0 + timedelta(days=accessed),
    )


def episodic(importance: float = 0.3, **kw) -> MemoryRecord:
    return MemoryRecord(id="e", user="u", text="had coffee with Bob", kind="episodic", category="event",
                        importance=importance, created_at=T0, **kw)


@given(memories(), days)
def test_salience_is_bounded(memory, later):
    assert 0.0 <= salience(memory, T0 + timedelta(days=later), CFG) <= 1.0


@given(memories(), days, days)
def test_salience_never_rises_with_age(memory, a, b):
    early, late = sorted((a, b))
    assert salience(memory, T0 + timedelta(days=late), CFG) <= salience(memory, T0 + timedelta(days=early), CFG)


@given(memories(), st.integers(min_value=0, max_value=1000), days)
def test_salience_never_falls_with_more_accesses(memory, extra, later):
    now = T0 + timedelta(days=later)
    more = MemoryRecord(**{**memory.__dict__, "access_count": memory.access_count + extra})
    assert salience(more, now, CFG) >= salience(memory, now, CFG)


@given(memories(exempt=False), days)
def test_salience_halves_at_one_half_life(memory, start):
    base = max(anchor(memory), T0 + timedelta(days=start))
    h = half_life_days(memory, CFG)
    s0, s1 = salience(memory, base, CFG), salience(memory, base + timedelta(days=h), CFG)
    assert s1 == pytest.approx(s0 / 2, rel=1e-9, abs=1e-12)


def test_salience_halves_for_a_plain_memory():
    m = episodic(0.5)
    assert salience(m, T0, CFG) == pytest.approx(0.5)
    assert salience(m, T0 + timedelta(days=14), CFG) == pytest.approx(0.25)
    assert salience(m, T0 + timedelta(days=28), CFG) == pytest.approx(0.125)


def test_salience_formula_matches_its_docstring():
    m = episodic(0.4, access_count=3, corroborations=1, last_accessed=T0 + timedelta(days=10))
    expected = min(1, 0.4 * (1 + 0.15 * math.log2(4)) * (1 + 0.1 * math.log2(2))) * 0.5 ** (4 / 14)
    assert salience(m, T0 + timedelta(days=14), CFG) == pytest.approx(expected)


def test_age_counts_from_the_latest_of_created_valid_and_accessed():
    m = episodic(0.5, valid_from=T0 - timedelta(days=100), last_accessed=T0 + timedelta(days=14))
    assert salience(m, T0 + timedelta(days=14), CFG) == pytest.approx(0.5 * (1 + 0.15 * 0))
    future = episodic(0.5, valid_from=T0 + timedelta(days=30))
    assert salience(future, T0, CFG) == pytest.approx(0.5)


def test_naive_times_are_taken_as_utc():
    m = MemoryRecord(id="n", user="u", text="x", kind="episodic", importance=0.5, created_at=datetime(2025, 1, 1))
    assert salience(m, T0 + timedelta(days=14), CFG) == pytest.approx(0.25)


@pytest.mark.parametrize("memory", [
    episodic(0.3, pinned=True),
    MemoryRecord(id="p", user="u", text="my name is Ada", kind="semantic", category="profile", importance=0.3),
    MemoryRecord(id="q", user="u", text="I like tea", kind="episodic", category="preference", importance=0.3),
])
def test_pinned_and_identity_memories_never_decay(memory):
    memory = MemoryRecord(**{**memory.__dict__, "created_at": T0})
    assert half_life_days(memory, CFG) is None
    for years in (1, 10, 100):
        now = T0 + timedelta(days=365 * years)
        assert salience(memory, now, CFG) == pytest.approx(0.3)
        assert not decays(memory, now, CFG)


def test_half_life_by_kind():
    assert half_life_days(episodic(), CFG) == 14.0
    assert half_life_days(MemoryRecord(id="s", user="u", text="x", kind="semantic"), CFG) == 180.0
    assert half_life_days(MemoryRecord(id="s", user="u", text="x", kind="procedural"), CFG) == 365.0
    assert half_life_days(MemoryRecord(id="s", user="u", text="x", kind="odd"), CFG) == 180.0


def alive(memory: MemoryRecord, now: datetime, cfg: DecayConfig) -> bool:
    """The whole lifecycle: decay by salience, and TTL expiry followed by the offline review."""
    if decays(memory, now, cfg):
        return False
    ttl = ttl_for(memory.importance, cfg)
    expired = ttl is not None and now >= memory.created_at + ttl
    return not expired or review_offline(memory, now, cfg)["keep"]


@settings(max_examples=200)
@given(st.floats(min_value=0.25, max_value=0.35))
def test_design_note_low_importance_episodic_survives_three_weeks_and_decays_within_two_months(importance):
    cfg = DecayConfig()
    assert cfg.half_life_episodic_days == 14.0 and cfg.threshold == 0.08
    m = episodic(importance)
    for day in range(0, 22):
        assert alive(m, T0 + timedelta(days=day), cfg), f"gone on day {day}"
    assert decays(m, T0 + timedelta(days=60), cfg)
    assert not alive(m, T0 + timedelta(days=60), cfg)


def test_design_note_even_important_unreinforced_episodic_decays_within_two_months():
    assert decays(episodic(1.0), T0 + timedelta(days=60), CFG)


def test_design_note_pinned_or_identity_never_decays_over_the_same_clock():
    pinned = episodic(0.3, pinned=True)
    identity = MemoryRecord(id="i", user="u", text="I live in Lisbon", kind="episodic", category="profile",
                            importance=0.3, created_at=T0)
    for m in (pinned, identity):
        assert alive(m, T0 + timedelta(days=3650), CFG)


def test_reinforcement_keeps_a_memory_alive():
    recalled = episodic(0.3, access_count=4, last_accessed=T0 + timedelta(days=40))
    assert not decays(recalled, T0 + timedelta(days=60), CFG)


def test_only_active_memories_decay():
    gone = episodic(0.01, status="superseded")
    assert not decays(gone, T0 + timedelta(days=999), CFG)


@pytest.mark.parametrize("importance, hours", [(0.0, 24), (0.19, 24), (0.2, 720), (0.39, 720), (0.4, None),
                                               (1.0, None)])
def test_ttl_tiers(importance, hours):
    expected = None if hours is None else timedelta(hours=hours)
    assert ttl_for(importance, CFG) == expected


def test_ttl_tiers_follow_config():
    cfg = DecayConfig(ttl_low_hours=1, ttl_mid_hours=2, ttl_low_below=0.5, ttl_mid_below=0.9)
    assert ttl_for(0.4, cfg) == timedelta(hours=1)
    assert ttl_for(0.6, cfg) == timedelta(hours=2)
    assert ttl_for(0.9, cfg) is None


NOW = T0 + timedelta(days=40)


@pytest.mark.parametrize("memory, keep", [
    (episodic(0.1), False),
    (episodic(0.1, access_count=1), True),
    (episodic(0.1, corroborations=2), True),
    (episodic(0.1, pinned=True), True),
    (MemoryRecord(id="p", user="u", text="I prefer tea", category="preference", importance=0.1), True),
    (MemoryRecord(id="f", user="u", text="deploy failed: disk full", category="failure", created_at=T0), True),
    (MemoryRecord(id="l", user="u", text="check disk before deploy", category="lesson", created_at=T0), True),
    (MemoryRecord(id="d", user="u", text="report due 2025-03-01", category="deadline", created_at=T0), True),
    (MemoryRecord(id="d", user="u", text="report due 2025-01-20", category="deadline", created_at=T0), False),
    (MemoryRecord(id="d", user="u", text="report due", category="deadline", created_at=T0,
                  meta={"due": "2025-02-10"}), True),
    (MemoryRecord(id="d", user="u", text="report due soon", category="deadline", created_at=T0), True),
])
def test_review_offline(memory, keep):
    verdict = review_offline(memory, NOW)
    assert verdict["keep"] is keep
    assert verdict["judge"] == REVIEW_JUDGE
    assert verdict["why"]


def test_review_forgets_and_keeps_in_one_batch():
    verdicts = [review_offline(m, NOW) for m in (episodic(0.1), episodic(0.1, access_count=3))]
    assert [v["keep"] for v in verdicts] == [False, True]
    assert "without being recalled" in verdicts[0]["why"]


def test_deadline_is_due_at_the_end_of_its_day():
    m = MemoryRecord(id="d", user="u", text="x", category="deadline", value="2025-03-01")
    assert deadline_of(m) == datetime(2025, 3, 1, 23, 59, 59, tzinfo=timezone.utc)
    assert review_offline(m, datetime(2025, 3, 1, 9, tzinfo=timezone.utc))["keep"]
    assert not review_offline(m, datetime(2025, 3, 2, tzinfo=timezone.utc))["keep"]
