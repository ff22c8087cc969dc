"""Salience, decay, TTL tiers and the offline review of expired memories (pure functions).

Two mechanisms forget, and they answer different questions:

- Decay asks "has this memory stopped mattering?". `salience` falls with age at a
  per-kind half-life and rises with use; an active memory whose salience drops
  under `DecayConfig.threshold` is decayed (`decays`). The store runs the same
  formula in SQL over every memory at once; `salience` is the reference it is
  tested against, so its docstring states the formula exactly.
- A TTL asks "was this crumb ever worth keeping?". `ttl_for` gives low-importance
  memories an expiry at write time; when it passes, `review_offline` keeps the
  memory if it proved useful and forgets it otherwise.

Design note, checked by tests/test_decay_pure.py: at a 14-day half-life and a
0.08 threshold, a never-reinforced episodic memory of importance ~0.3 survives
three weeks (0.3 * 0.5**1.5 = 0.106) and decays within about two months (it
crosses 0.08 at 14 * log2(0.3 / 0.08) = 26.7 days; even importance 1.0 crosses at
51 days), while a pinned or identity (profile / preference) memory never decays.
The TTL of that importance tier must therefore not expire before three weeks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from .clock import utc
from .config import DecayConfig
from .errors import MnemoError
from .model import Event, MemoryRecord, new_id

if TYPE_CHECKING:
    from .llm import LLM
    from .store.protocol import Store

REVIEW_JUDGE = "offline-rules-v1"

# Categories whose memories carry a lesson: forgetting them invites repeating the failure.
_LESSON_CATEGORIES = ("failure", "lesson")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?))?")


def half_life_days(memory: MemoryRecord, cfg: DecayConfig) -> float | None:
    """Return the recency half-life of `memory` in days, or None when it is exempt from decay.

    Exempt: pinned memories and the categories in `cfg.exempt_categories` (identity
    facts: profile, preference). Otherwise the half-life is set by kind; an unknown
    kind is treated as semantic, the most common and middle-of-the-road kind.
    """
    if memory.pinned or memory.category in cfg.exempt_categories:
        return None
    return kind_half_life(memory.kind, cfg)


def kind_half_lives(cfg: DecayConfig) -> dict[str, float]:
    """Return the half-life in days configured for each memory kind (any other kind counts as semantic)."""
    return {
        "episodic": cfg.half_life_episodic_days,
        "semantic": cfg.half_life_semantic_days,
        "procedural": cfg.half_life_procedural_days,
    }


def kind_half_life(kind: str, cfg: DecayConfig) -> float:
    """Return the half-life in days configured for a memory kind (semantic for unknown kinds)."""
    return kind_half_lives(cfg).get(kind, cfg.half_life_semantic_days)


def anchor(memory: MemoryRecord) -> datetime | None:
    """Return the instant age counts from: the latest of created_at, valid_from and last_accessed."""
    times = [utc(t) for t in (memory.created_at, memory.valid_from, memory.last_accessed) if t is not None]
    return max(times) if times else None


def age_days(since: datetime | None, now: datetime) -> float:
    """Return the days from `since` to `now`, never negative (0 when `since` is unknown or future)."""
    if since is None:
        return 0.0
    return max(0.0, (utc(now) - utc(since)).total_seconds() / 86400.0)


def salience(memory: MemoryRecord, now: datetime, cfg: DecayConfig) -> float:
    """Return how much `memory` still matters at `now`, in [0, 1].

    Exactly (the SQL port in the store must match this)::

        i       = clip(importance, 0, 1)
        R       = 1 + reinforcement_weight * log2(1 + max(access_count, 0))
        C       = 1 + corroboration_weight * log2(1 + max(corroborations, 0))
        base    = min(1, i * R * C)
        anchor  = greatest(created_at, valid_from, last_accessed)      -- NULLs ignored
        age     = max(0, now - anchor) in days (0 if all three are NULL)
        h       = half_life_days(memory)    -- NULL when pinned or category exempt,
                                            -- else by kind: episodic / semantic /
                                            -- procedural (unknown kind -> semantic)
        D       = 1 if h is NULL else 0.5 ** (age / h)
        salience = base * D

    The boosts are clipped before the recency factor so that salience is bounded by
    1, non-decreasing in access and corroboration counts, non-increasing in age, and
    halves exactly at every half-life. An access both raises R and resets the age
    (last_accessed moves the anchor), which is how recall reinforces.
    """
    return salience_formula(float(memory.importance), memory.access_count, memory.corroborations,
                            age_days(anchor(memory), now), half_life_days(memory, cfg), cfg)


class _Numbers:
    """The functions `salience_formula` calls, over Python numbers (the store renders them as SQL)."""

    least = staticmethod(min)
    greatest = staticmethod(max)
    log2 = staticmethod(math.log2)


def salience_formula(importance, accesses, corroborations, age, half_life, cfg: DecayConfig, fn=_Numbers):
    """The one definition of salience (see `salience`), over numbers or, with the store's `fn`, SQL expressions.

    `half_life` None means exempt: no recency factor. Only +, *, /, ** and `fn`'s
    least, greatest and log2 are used, so the same lines render to each engine's SQL.
    """
    clipped = fn.least(1.0, fn.greatest(0.0, importance))
    reinforcement = 1.0 + cfg.reinforcement_weight * fn.log2(1 + fn.greatest(accesses, 0))
    corroboration = 1.0 + cfg.corroboration_weight * fn.log2(1 + fn.greatest(corroborations, 0))
    base = fn.least(1.0, clipped * reinforcement * corroboration)
    if half_life is None:
        return base
    return base * 0.5 ** (age / half_life)


def decays(memory: MemoryRecord, now: datetime, cfg: DecayConfig) -> bool:
    """Return True when an active, non-exempt memory has salience under `cfg.threshold` at `now`."""
    if not memory.active or half_life_days(memory, cfg) is None:
        return False
    return salience(memory, now, cfg) < cfg.threshold


def ttl_for(importance: float, cfg: DecayConfig) -> timedelta | None:
    """Return the time-to-live of a new memory of this importance, or None for permanent."""
    if importance < cfg.ttl_low_below:
        return timedelta(hours=cfg.ttl_low_hours)
    if importance < cfg.ttl_mid_below:
        return timedelta(hours=cfg.ttl_mid_hours)
    return None


def review_offline(memory: MemoryRecord, now: datetime, cfg: DecayConfig | None = None) -> dict:
    """Return the offline verdict on an expired memory: {"keep": bool, "why": str, "judge": ...}.

    Rules, first match wins: keep what is pinned, is an identity fact (a category in
    `cfg.exempt_categories`, default config if None), was recalled since it was
    written, was corroborated, records a failure or lesson, or is a deadline still ahead (or
    whose date cannot be read, since dropping a live deadline costs more than keeping
    a stale one); forget a deadline that has passed and anything else that expired
    without ever being used.
    """
    def verdict(keep: bool, why: str) -> dict:
        return {"keep": keep, "why": why, "judge": REVIEW_JUDGE}

    if not memory.active:
        return verdict(True, f"already {memory.status}: review applies to active memories only")
    if memory.pinned:
        return verdict(True, "pinned")
    if memory.category in (cfg or DecayConfig()).exempt_categories:
        return verdict(True, f"a {memory.category} is an identity fact, exempt from forgetting")
    if memory.access_count > 0:
        return verdict(True, f"recalled {memory.access_count} time(s) since it was written")
    if memory.corroborations > 0:
        return verdict(True, f"corroborated {memory.corroborations} time(s)")
    if memory.category in _LESSON_CATEGORIES:
        return verdict(True, f"a {memory.category} carries a lesson")
    if memory.category == "deadline":
        due = deadline_of(memory)
        if due is None:
            return verdict(True, "deadline with no readable date: kept to be safe")
        if due > utc(now):
            return verdict(True, f"deadline {due.date().isoformat()} is still ahead")
        return verdict(False, f"deadline {due.date().isoformat()} has passed")
    return verdict(False, "expired without being recalled or corroborated")


def deadline_of(memory: MemoryRecord) -> datetime | None:
    """Return the due date of a deadline memory, read from meta, value or text; None if unreadable.

    A bare date means the end of that day (UTC), so a deadline "2025-03-01" is still
    ahead on the morning of March 1st.
    """
    for key in ("due", "deadline", "until"):
        found = _as_datetime(memory.meta.get(key))
        if found is not None:
            return found
    for text in (memory.value, memory.text):
        match = _ISO_DATE.search(text or "")
        if match:
            return _as_datetime(match.group(0))
    return None


def _as_datetime(value: object) -> datetime | None:
    """Return `value` (datetime, date or ISO string) as an aware UTC datetime, or None."""
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, date):
        return utc(datetime(value.year, value.month, value.day, 23, 59, 59))
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        # A date without a time of day is due at the end of that day.
        if len(value.strip()) == 10:
            parsed = parsed.replace(hour=23, minute=59, second=59)
        return utc(parsed)
    return None


# ----------------------------------------------------------------- stages over a store
def decay(store: Store, now: datetime, cfg: DecayConfig) -> list[tuple[str, float]]:
    """Tombstone every active memory whose salience is under the threshold; return (id, salience).

    The store evaluates `salience` in SQL over the whole table in one pass
    (tests/test_decay_store.py checks that it agrees with the Python function).
    """
    return store.decay_pass(now, cfg)


REVIEW_SCHEMA = {
    "type": "object",
    "properties": {"keep": {"type": "boolean"}, "why": {"type": "string"}},
    "required": ["keep", "why"],
    "additionalProperties": False,
}


def model_review(llm: LLM) -> Callable[[MemoryRecord, datetime, DecayConfig], dict]:
    """Return a review judge backed by the model; on any model error it keeps the memory and says why."""

    def judge(memory: MemoryRecord, now: datetime, cfg: DecayConfig | None = None) -> dict:
        try:
            out = llm.complete_json("review", {"memory": memory.text, "category": memory.category,
                                               "importance": f"{memory.importance:.2f}",
                                               "created": str(memory.created_at), "now": now.isoformat(),
                                               "accesses": str(memory.access_count)},
                                    REVIEW_SCHEMA, role="judge")
        except MnemoError as exc:
            # Failing closed here means keeping: a judge that cannot answer must not forget anything.
            return {"keep": True, "why": f"judge error, kept: {exc}", "judge": "model", "error": True}
        return {"keep": bool(out["keep"]), "why": str(out["why"]), "judge": "model"}

    return judge


def review_expired(store: Store, now: datetime, cfg: DecayConfig,
                   judge: Callable[..., dict] = review_offline) -> list[dict]:
    """Judge every memory past its TTL: forget it (reason "expired") or keep it for another TTL; return verdicts."""
    verdicts = []
    with store.transaction():
        for memory in store.expired(now):
            verdict = {**judge(memory, now, cfg), "memory_id": memory.id, "text": memory.text}
            verdicts.append(verdict)
            if verdict["keep"]:
                ttl = ttl_for(memory.importance, cfg)
                store.set_expiry(memory.id, (now + ttl) if ttl else None)
                action, after = "reviewed", "active"
            else:
                store.set_status(memory.id, "forgotten", reason="expired", at=now)
                action, after = "forgotten", "forgotten"
            store.insert_events([Event(new_id("e"), memory.id, now, action, "active", after,
                                       "expired" if after == "forgotten" else "review kept",
                                       {k: v for k, v in verdict.items() if k != "text"})])
    return verdicts
