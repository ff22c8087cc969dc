"""The set-based decay pass in SQL agrees with `decay.salience`, and the TTL review really forgets.

Every test runs on both store backends (DuckDB and PostgreSQL, see conftest.py): each
has its own SQL port of the formula, and both must equal the Python reference.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo.config import DecayConfig
from mnemo.decay import decay, review_expired, review_offline, salience
from mnemo.model import MemoryRecord
from mnemo.store import new_id

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
DIM = 4

records = st.builds(
    lambda kind, cat, imp, acc, cor, pinned, age_c, age_a: MemoryRecord(
        id=new_id(), user="u", text="x", kind=kind, category=cat, importance=imp, access_count=acc,
        corroborations=cor, pinned=pinned, created_at=T0 - timedelta(days=age_c), valid_from=T0 - timedelta(days=age_c),
        last_accessed=None if age_a is None else T0 - timedelta(days=age_a)),
    st.sampled_from(["semantic", "episodic", "procedural", "oddkind"]),
    st.sampled_from(["fact", "event", "preference", "profile", "failure"]),
    st.floats(0, 1), st.integers(0, 50), st.integers(0, 10), st.booleans(),
    st.floats(0, 800), st.one_of(st.none(), st.floats(0, 400)),
)


_examples = itertools.count()


# The fixture only hands out stores; each example opens a fresh one, so sharing it across examples is safe.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(records, min_size=1, max_size=30))
def test_sql_salience_equals_python_salience(backend, recs):
    cfg = DecayConfig(threshold=2.0)  # everything non-exempt is under 2, so the dry run reports every salience
    store = backend.open(f"h{next(_examples)}", embedder="t", dim=DIM)
    try:
        with store.transaction():
            store.insert_memories(recs, np.ones((len(recs), DIM), np.float32))
        got = dict(store.decay_pass(T0, cfg, dry_run=True))
        for r in recs:
            exempt = r.pinned or r.category in cfg.exempt_categories
            assert (r.id in got) == (not exempt)
            if not exempt:
                assert abs(got[r.id] - salience(r, T0, cfg)) < 1e-9
        assert store.stats()["by_status"] == {"active": len(recs)}
    finally:
        store.close()


def test_decay_pass_tombstones_with_reason_and_salience_and_syncs_the_index(backend):
    cfg = DecayConfig()
    crumb = MemoryRecord(id=new_id(), user="u", text="had a sandwich", kind="episodic", category="event",
                         importance=0.3, created_at=T0, valid_from=T0)
    name = MemoryRecord(id=new_id(), user="u", text="name is Ana", kind="semantic", category="profile",
                        importance=0.9, created_at=T0, valid_from=T0)
    pinned = MemoryRecord(id=new_id(), user="u", text="allergic to nuts", kind="episodic", category="event",
                          importance=0.3, pinned=True, created_at=T0, valid_from=T0)
    store = backend.open("d", embedder="t", dim=DIM)
    with store.transaction():
        store.insert_memories([crumb, name, pinned], np.eye(3, DIM, dtype=np.float32))
    assert decay(store, T0 + timedelta(days=21), cfg) == []  # survives three weeks
    decayed = decay(store, T0 + timedelta(days=60), cfg)
    assert [d[0] for d in decayed] == [crumb.id]
    assert decayed[0][1] < cfg.threshold
    got = store.get(crumb.id)
    assert (got.status, got.status_reason) == ("decayed", "decayed")
    (event,) = store.events(crumb.id)
    assert event.action == "decayed" and event.evidence["threshold"] == cfg.threshold
    assert abs(event.evidence["salience"] - decayed[0][1]) < 1e-9
    assert crumb.id not in [h[0] for h in store.search_dense(np.eye(3, DIM)[0], 3, user="u")]
    # A year later the identity fact and the pinned memory are still there.
    assert decay(store, T0 + timedelta(days=365 * 5), cfg) == []
    assert {m.id for m in store.memories("u")} == {name.id, pinned.id}


def test_review_of_expired_memories_forgets_and_keeps_with_reasons(backend):
    cfg = DecayConfig()
    expires = T0 + timedelta(hours=24)
    trivia = MemoryRecord(id=new_id(), user="u", text="it rained", kind="episodic", category="event",
                          importance=0.1, created_at=T0, valid_from=T0, expires_at=expires)
    used = MemoryRecord(id=new_id(), user="u", text="parked on level 3", kind="episodic", category="event",
                        importance=0.1, access_count=2, created_at=T0, valid_from=T0, expires_at=expires)
    store = backend.open("r", embedder="t", dim=DIM)
    with store.transaction():
        store.insert_memories([trivia, used], np.eye(2, DIM, dtype=np.float32))
    assert review_expired(store, T0 + timedelta(hours=1), cfg) == []  # nothing expired yet
    verdicts = {v["memory_id"]: v for v in review_expired(store, T0 + timedelta(hours=25), cfg, review_offline)}
    assert verdicts[trivia.id]["keep"] is False and verdicts[used.id]["keep"] is True
    assert store.get(trivia.id).status == "forgotten" and store.get(trivia.id).status_reason == "expired"
    kept = store.get(used.id)
    assert kept.status == "active" and kept.expires_at > T0 + timedelta(hours=25)
    assert [e.action for e in store.events(trivia.id)] == ["forgotten"]
    assert "judge" in store.events(trivia.id)[0].evidence
