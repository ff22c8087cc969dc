"""Tests for recall: the pure stages (fuse, score, veto, pack, confidence, history, cite) and the
orchestrator against an in-memory FakeStore that implements the store interface recall needs."""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo.config import Config, DecayConfig, RecallConfig
from mnemo.errors import ConfigError, InvalidInput
from mnemo.model import KINDS, Link, MemoryRecord, Packed, Scored
from mnemo.recall import (
    NO_ROOM,
    NOT_IN_RECORD,
    cite,
    confidence,
    coverage,
    evidence_of,
    fuse,
    history_notes,
    in_context,
    make_room,
    pack,
    prior,
    recall,
    resolve_self,
    score,
    veto,
)

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=30)
CFG = RecallConfig()
DCFG = DecayConfig()


def mem(mid: str, text: str = "", **kw) -> MemoryRecord:
    kw.setdefault("created_at", T0)
    return MemoryRecord(id=mid, user=kw.pop("user", "alice"), text=text or f"memory {mid}", **kw)


def scored(mid: str, s: float, tokens: int, kind: str = "semantic", fused: float | None = None, **kw) -> Scored:
    return Scored(mem(mid, kind=kind, **kw), s, {"fused": s if fused is None else fused}, tokens)


# ---------------------------------------------------------------- fuse

hits = st.lists(st.tuples(st.sampled_from([f"m{i}" for i in range(12)]),
                          st.floats(min_value=-1, max_value=30, allow_nan=False)),
                max_size=12, unique_by=lambda t: t[0])


@given(hits, hits, st.sampled_from(["rrf", "weighted", "weighted_rank", "scores"]), st.floats(min_value=0, max_value=1),
       st.randoms())
def test_fuse_is_order_invariant_and_bounded(dense, lexical, fusion, w, rnd):
    cfg = RecallConfig(fusion=fusion, lexical_weight=w)
    shuffled_d, shuffled_l = dense[:], lexical[:]
    rnd.shuffle(shuffled_d)
    rnd.shuffle(shuffled_l)
    a, b = fuse(dense, lexical, cfg), fuse(shuffled_d, shuffled_l, cfg)
    assert a == b
    assert set(a) == {m for m, _ in dense} | {m for m, _ in lexical}
    assert all(0.0 <= e["fused"] <= 1.0 for e in a.values())


# weighted_rank is left out: its relevance is a rank, so a hit of one retriever is not capped by its weight.
@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_fuse_best_in_both_is_one_and_weights_split(fusion):
    cfg = RecallConfig(fusion=fusion, lexical_weight=0.3)
    out = fuse([("a", 0.9), ("b", 0.5), ("c", 0.1)], [("a", 7.0), ("c", 2.0)], cfg)
    assert out["a"]["fused"] == pytest.approx(1.0)
    assert out["a"] | {"fused": 0} == {"dense": 0.9, "bm25": 7.0, "dense_rank": 1, "bm25_rank": 1, "fused": 0}
    assert out["b"]["bm25"] is None and out["b"]["bm25_rank"] is None
    assert out["b"]["fused"] < 0.7 + 1e-9


@pytest.mark.parametrize("fusion", ["rrf", "weighted", "weighted_rank"])
def test_fuse_weight_zero_ignores_lexical_only_hits(fusion):
    out = fuse([("a", 0.9)], [("b", 3.0)], RecallConfig(fusion=fusion, lexical_weight=0.0))
    assert out["a"]["fused"] == pytest.approx(1.0) and out["b"]["fused"] == 0.0


@given(hits, hits, st.floats(min_value=0, max_value=1))
def test_weighted_rank_orders_as_weighted_on_rrfs_scale(dense, lexical, w):
    weighted = fuse(dense, lexical, RecallConfig(fusion="weighted", lexical_weight=w))
    ranked = fuse(dense, lexical, RecallConfig(fusion="weighted_rank", lexical_weight=w, rrf_k=60))
    ids = [m for m in weighted if (m in dict(dense) and w < 1) or (m in dict(lexical) and w > 0)]
    for a in ids:
        for b in ids:
            # The same order (ties included) as weighted fusion ...
            assert (weighted[a]["fused"] > weighted[b]["fused"]) == (ranked[a]["fused"] > ranked[b]["fused"])
        # ... with relevance 61 / (60 + rank): neighbours a little apart, never min-max's full spread.
        assert ranked[a]["fused"] >= 61 / (60 + len(ids)) - 1e-12


def test_scores_fusion_keeps_a_clear_winner_clear_and_a_near_tie_near():
    cfg = RecallConfig(fusion="scores", lexical_weight=0.5)
    out = fuse([("a", 0.82), ("b", 0.30), ("c", 0.80)], [("a", 9.0), ("b", 1.0), ("c", 8.6)], cfg)
    assert out["a"]["fused"] == pytest.approx(1.0)
    assert out["a"]["fused"] - out["b"]["fused"] > 0.5  # a clear winner in a store of three stays clear
    assert out["a"]["fused"] - out["c"]["fused"] < 0.05  # a near tie stays a near tie, for `score` to decide
    # Under rank fusion the same gaps are alike whatever the scores: that is what "scores" changes.
    ranked = fuse([("a", 0.82), ("b", 0.30), ("c", 0.80)], [("a", 9.0), ("b", 1.0), ("c", 8.6)],
                  RecallConfig(fusion="weighted_rank", lexical_weight=0.5))
    assert ranked["a"]["fused"] - ranked["b"]["fused"] < 0.05


def test_fuse_ties_share_a_rank():
    out = fuse([("a", 0.5), ("b", 0.5), ("c", 0.1)], [], CFG)
    assert (out["a"]["dense_rank"], out["b"]["dense_rank"], out["c"]["dense_rank"]) == (1, 1, 3)


def test_fuse_unknown_method_raises():
    with pytest.raises(ConfigError, match="unknown fusion"):
        fuse([], [], RecallConfig(fusion="borda"))


def test_rerank_names_a_fitted_reranker_or_is_refused():
    # It was once accepted and did nothing; now it names a fitted reranker, and one that is not there is refused.
    with pytest.raises(ConfigError, match="no reranker 'model'"):
        Config.from_params(rerank="model")
    assert Config.from_params(rerank="").recall.rerank == "" and Config().recall.rerank == "locomo"


# ---------------------------------------------------------------- score, veto

def test_score_combines_components_with_config_weights():
    fact = mem("f", kind="semantic", category="preference", importance=0.5)
    crumb = mem("c", kind="episodic", category="note", importance=0.5)
    fused = {"f": {"fused": 0.5, "dense": 0.4}, "c": {"fused": 0.5}}
    out = score([crumb, fact], fused, NOW, CFG, DCFG, {"f": 7})
    assert [s.memory.id for s in out] == ["f", "c"]
    f = out[0]
    assert f.tokens == 7 and f.scores["dense"] == 0.4 and "bm25" not in f.scores
    expected = 0.7 * 0.5 + 0.1 * f.scores["recency"] + 0.1 * f.scores["salience"] + 0.1 * 1.0
    assert f.score == pytest.approx(expected)
    assert prior(fact) == 1.0 and prior(crumb) == pytest.approx(0.18)


@given(st.lists(st.tuples(st.floats(min_value=0, max_value=1), st.floats(min_value=-5, max_value=5),
                          st.integers(min_value=0, max_value=50), st.sampled_from(KINDS)), max_size=10))
def test_score_components_are_bounded(rows):
    memories = [mem(f"m{i}", kind=k, importance=imp, access_count=acc,
                    created_at=T0 + timedelta(days=i)) for i, (_, imp, acc, k) in enumerate(rows)]
    fused = {f"m{i}": {"fused": f} for i, (f, *_rest) in enumerate(rows)}
    out = score(memories, fused, NOW, CFG, DCFG)
    assert [s.score for s in out] == sorted((s.score for s in out), reverse=True)
    for s in out:
        assert all(0.0 <= s.scores[k] <= 1.0 for k in ("fused", "recency", "salience", "prior"))
        assert 0.0 <= s.score <= 1.0 + 1e-9


def test_score_prefers_newer_information():
    old, new = mem("o", created_at=T0 - timedelta(days=400)), mem("n", created_at=T0)
    out = score([old, new], {"o": {"fused": 0.5}, "n": {"fused": 0.5}}, NOW, CFG, DCFG)
    assert out[0].memory.id == "n"


def test_veto_hides_a_stale_duplicate_value():
    stale = Scored(mem("old", "Alice lives in Berlin", subject="alice", attribute="city", value="Berlin",
                       valid_from=T0 - timedelta(days=300)), 0.9, {"fused": 0.9}, 5)
    fresh = Scored(mem("new", "Alice lives in Lisbon", subject="Alice", attribute="City", value="Lisbon",
                       valid_from=T0), 0.6, {"fused": 0.6}, 5)
    same = Scored(mem("rep", "Alice is in Lisbon", subject="alice", attribute="city", value="lisbon",
                      created_at=T0 - timedelta(days=10)), 0.5, {}, 5)
    multi = Scored(mem("hob", "Alice likes chess", subject="alice", attribute="hobby", value="chess",
                       single_valued=False), 0.4, {}, 5)
    multi2 = Scored(mem("hob2", "Alice likes go", subject="alice", attribute="hobby", value="go",
                        single_valued=False), 0.3, {}, 5)
    kept, trace = veto([stale, fresh, same, multi, multi2])
    assert [s.memory.id for s in kept] == ["new", "rep", "hob", "hob2"]
    assert [(t.memory_id, t.reason, t.included) for t in trace] == [("old", "veto", False)]
    assert "new" in trace[0].detail and "Lisbon" in trace[0].detail


def test_veto_ignores_other_users_and_inactive_memories():
    a = Scored(mem("a", subject="s", attribute="x", value="1"), 0.5, {}, 1)
    b = Scored(mem("b", subject="s", attribute="x", value="2", user="bob"), 0.5, {}, 1)
    c = Scored(mem("c", subject="s", attribute="x", value="3", status="superseded",
                   created_at=T0 + timedelta(days=1)), 0.5, {}, 1)
    kept, trace = veto([a, b, c])
    assert len(kept) == 3 and trace == []


# ---------------------------------------------------------------- pack

@st.composite
def pack_inputs(draw):
    n = draw(st.integers(min_value=0, max_value=30))
    items = []
    for i in range(n):
        items.append(Scored(
            mem(f"m{i}", kind=draw(st.sampled_from(KINDS + ("odd",))),
                status=draw(st.sampled_from(["active"] * 4 + ["superseded", "forgotten"]))),
            draw(st.floats(min_value=0, max_value=1)),
            {"fused": draw(st.floats(min_value=0, max_value=1))},
            draw(st.integers(min_value=0, max_value=80))))
    pinned_ids = draw(st.sets(st.integers(min_value=0, max_value=max(n - 1, 0)), max_size=4)) if n else set()
    pinned = [replace(s, memory=replace(s.memory, pinned=True)) for i, s in enumerate(items) if i in pinned_ids]
    # Pinned memories may also be retrieved: pack must still trace them once.
    rest = [s for i, s in enumerate(items) if i not in pinned_ids or draw(st.booleans())]
    cfg = RecallConfig(min_relevance=draw(st.sampled_from([0.0, 0.2])))
    return rest, pinned, draw(st.integers(min_value=0, max_value=300)), cfg


@settings(max_examples=300)
@given(pack_inputs())
def test_pack_invariants(inputs):
    items, pinned, budget, cfg = inputs
    packed, trace = pack(items, budget, cfg, pinned)
    # The ceiling is hard.
    assert sum(p.tokens for p in packed) <= budget
    # Every candidate is traced exactly once.
    ids = [t.memory_id for t in trace]
    assert len(ids) == len(set(ids))
    assert set(ids) == {s.memory.id for s in items} | {s.memory.id for s in pinned}
    assert {t.memory_id for t in trace if t.included} == {p.id for p in packed}
    # Inactive never packed; nothing under the threshold unless pinned.
    assert all(p.memory.active for p in packed)
    pinned_ids = {s.memory.id for s in pinned}
    assert all(p.scores["fused"] >= cfg.min_relevance for p in packed if p.id not in pinned_ids)
    # Pinned memories go in whenever they fit together, and go first.
    active_pins = [s for s in pinned if s.memory.active]
    if sum(s.tokens for s in active_pins) <= budget:
        assert {s.memory.id for s in active_pins} <= {p.id for p in packed}
    firsts = [p.id in pinned_ids for p in packed]
    assert firsts == sorted(firsts, reverse=True)
    # Pass 1 respects the per-kind quotas.
    shares = {"semantic": cfg.semantic_quota, "procedural": cfg.procedural_quota, "episodic": cfg.episodic_quota}
    by_id = {p.id: p for p in packed}
    for kind, share in shares.items():
        pass1 = sum(by_id[t.memory_id].tokens for t in trace
                    if t.detail.startswith("pass 1") and by_id[t.memory_id].kind == kind)
        assert pass1 <= int(share * budget)
    assert {t.reason for t in trace} <= {"pinned", "packed", "budget", "quota", "inactive", "below_threshold"}


def test_one_critical_preference_survives_forty_episodic_crumbs():
    crumbs = [scored(f"crumb{i}", 0.9, 10, kind="episodic", category="event") for i in range(40)]
    pref = scored("pref", 0.5, 20, kind="semantic", category="preference")
    packed, trace = pack(crumbs + [pref], 200, CFG)
    assert "pref" in [p.id for p in packed]
    assert sum(p.tokens for p in packed) == 200
    # Without quotas the crumbs would have filled the whole budget.
    no_quota = RecallConfig(semantic_quota=0, procedural_quota=0, episodic_quota=0)
    assert "pref" not in [p.id for p in pack(crumbs + [pref], 200, no_quota)[0]]
    reasons = {t.reason for t in trace if not t.included}
    assert reasons == {"quota"}


def test_unused_quota_flows_to_other_kinds():
    items = [scored(f"e{i}", 0.9 - i / 100, 10, kind="episodic") for i in range(10)]
    packed, trace = pack(items, 100, CFG)
    assert len(packed) == 10
    assert sum(t.detail.startswith("pass 2") for t in trace) == 7


def test_pack_reasons():
    items = [
        scored("big", 0.9, 500), scored("ok", 0.8, 10), scored("gone", 0.95, 1, status="forgotten"),
        scored("weak", 0.7, 1, fused=0.01),
    ]
    packed, trace = pack(items, 100, RecallConfig(min_relevance=0.05))
    reasons = {t.memory_id: t.reason for t in trace}
    assert reasons == {"big": "budget", "ok": "packed", "gone": "inactive", "weak": "below_threshold"}
    assert [p.id for p in packed] == ["ok"]


def test_pinned_over_budget_are_packed_by_score_until_full():
    pins = [scored("p1", 0.9, 60, pinned=True), scored("p2", 0.8, 60, pinned=True),
            scored("p3", 0.1, 30, pinned=True)]
    packed, trace = pack([scored("x", 1.0, 1)], 100, CFG, pins)
    assert [p.id for p in packed] == ["p1", "p3", "x"]
    assert {t.memory_id: t.reason for t in trace} == {"p1": "pinned", "p2": "budget", "p3": "pinned",
                                                       "x": "packed"}


def test_zero_budget_packs_nothing():
    packed, trace = pack([scored("a", 0.5, 1)], 0, CFG, [scored("p", 0.5, 1)])
    assert packed == [] and {t.reason for t in trace} == {"budget"}


# ---------------------------------------------------------------- confidence, cite, history

def test_coverage_and_evidence():
    assert coverage("Where does alice live?", "Alice lives in Lisbon") == 1.0
    assert coverage("What is alice's blood type?", "Alice lives in Lisbon") == pytest.approx(1 / 3)
    assert coverage("What is the capital of Peru?", "Alice lives in Lisbon") == 0.0
    assert coverage("what is it?", "anything") == 0.0
    assert evidence_of({"dense": 0.8, "coverage": 1.0}) == pytest.approx(0.9)
    assert evidence_of({"dense": -0.3, "coverage": None}) == 0.0


def test_a_typed_memory_covers_the_words_that_name_its_attribute_and_no_other_memory_does():
    q = "What does the user do for a living?"
    assert coverage(q, "The user works as a nurse.", attribute="job_title") == 1.0
    assert coverage(q, "The user works as a nurse.") == 0.0
    assert coverage(q, "The user lives in Lisbon.", attribute="city") == 0.0
    diet = "What diet does the user follow, and what food does the user like?"
    assert coverage(diet, "The user is vegetarian.", attribute="diet") == pytest.approx(1 / 4)
    assert coverage(diet, "The user likes mushrooms.", attribute="likes") == pytest.approx(1 / 4)
    # A question about an attribute the memory does not have gains nothing from it.
    assert coverage("What is the user's salary?", "The user is vegetarian.", attribute="diet") == 0.0
    assert coverage("What is the user's job title?", "The user works as a nurse.", attribute="job_title") == 1.0


def test_confidence_thresholds():
    p = [Packed(mem("a"), 0.5, 3)]
    assert confidence(p, {"a": {"dense": 0.6, "coverage": 1.0}}, CFG) == "certain"
    assert confidence(p, {"a": {"dense": 0.4, "coverage": 0.5}}, CFG) == "vague"
    assert confidence(p, {"a": {"dense": 0.1, "coverage": 0.0}}, CFG) == "unknown"
    assert confidence(p, {}, CFG) == "unknown"
    assert confidence([], {}, CFG) == "unknown"


def test_cite():
    m = mem("a", session="s1", turn_id="t1", source="tool", valid_from=T0 + timedelta(days=2))
    (c,) = cite([Packed(m, 1.0, 3)])
    assert (c.memory_id, c.session, c.turn_id, c.at, c.source) == ("a", "s1", "t1", T0 + timedelta(days=2), "tool")


def supersession_chain() -> tuple[dict[str, MemoryRecord], list[Link]]:
    day = timedelta(days=1)
    records = {
        "v1": mem("v1", "Lead time for AX-7 is 14 days", value="14 days", status="superseded"),
        "v2": mem("v2", "Lead time for AX-7 is 21 days", value="21 days", status="superseded",
                  status_reason="supplier update"),
        "v3": mem("v3", "Lead time for AX-7 is 35 days", value="35 days"),
        "f": mem("f", "The supplier's factory flooded", category="failure"),
    }
    links = [Link("v2", "v1", "supersedes", T0 + day), Link("v3", "v2", "supersedes", T0 + 5 * day),
             Link("v3", "f", "because", T0 + 5 * day)]
    return records, links


def test_history_notes_follow_supersessions_with_reasons():
    records, links = supersession_chain()
    packed = [Packed(records["v3"], 0.9, 8)]
    notes = history_notes(packed, links, records, hops=2)
    assert [n.id for n in notes] == ["v2", "v1"]
    assert notes[0].note == ("corrected from '21 days' on 2025-01-06, because The supplier's factory flooded "
                             "(not current)")
    assert notes[1].note == "corrected from '14 days' on 2025-01-02 (not current)"
    assert [n.id for n in history_notes(packed, links, records, hops=1)] == ["v2"]
    assert history_notes(packed, links, records, hops=0) == []


def test_history_falls_back_to_status_reason_and_text():
    old = mem("o", "Bob prefers email", status="superseded", status_reason="user said so")
    new = mem("n", "Bob prefers phone")
    (note,) = history_notes([Packed(new, 1, 1)], [Link("n", "o", "supersedes")], {"o": old}, 2)
    assert note.note == "corrected from 'Bob prefers email' on 2025-01-01, because user said so (not current)"


def test_make_room_evicts_only_lower_unpinned_fillers_for_history():
    records, links = supersession_chain()
    top = Packed(records["v3"], 0.9, 10)
    pin = Packed(mem("pin", pinned=True), 0.1, 10)
    high, low = Packed(mem("hi"), 0.95, 10), Packed(mem("lo"), 0.2, 10)
    notes = history_notes([top], links, records, 2)
    packed, kept, evicted = make_room([pin, high, top, low], notes, [8, 8], links, 46)
    # 6 tokens were left: the first note evicts "lo"; the second fits in what that freed.
    assert [p.id for p in packed] == ["pin", "hi", "v3"]
    assert [(k.id, k.tokens) for k in kept] == [("v2", 8), ("v1", 8)]
    assert list(evicted) == ["lo"] and evicted["lo"].reason == "budget" and "v3" in evicted["lo"].detail
    assert sum(p.tokens for p in packed) + sum(k.tokens for k in kept) <= 46
    # An older correction never shows without the newer one it leads to.
    assert make_room([top], notes, [100, 1], links, 15)[1] == []
    # Nothing cheaper to evict: the note is dropped, the pack is untouched.
    packed, kept, evicted = make_room([pin, high, top], notes[:1], [30], links, 35)
    assert [p.id for p in packed] == ["pin", "hi", "v3"] and kept == [] and evicted == {}


# ---------------------------------------------------------------- orchestrator against a fake store

def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class HashEmbedder:
    """A deterministic bag-of-words embedder: each word hashed into one of 256 dimensions."""

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for row, text in enumerate(texts):
            for w in words(text):
                out[row, int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1.0
            norm = np.linalg.norm(out[row])
            out[row] /= norm if norm else 1.0
        return out


class FakeStore:
    """An in-memory implementation of the store interface `recall` uses, with call logs."""

    def __init__(self, records: list[MemoryRecord], links: list[Link] = ()):
        self.records = {m.id: m for m in records}
        self.link_rows = list(links)
        self.vecs = dict(zip(self.records, HashEmbedder().embed([m.text for m in records]), strict=True))
        self.touched: list[tuple[list[str], datetime]] = []
        self.lexical_calls = 0

    def _visible(self, user: str, filters: dict | None) -> list[MemoryRecord]:
        f = filters or {}
        return [m for m in self.records.values() if m.user == user and m.active
                and (not f.get("kinds") or m.kind in f["kinds"])
                and all(m.meta.get(k) == v for k, v in f.get("meta", {}).items())]

    def search_dense(self, qvec, k, *, user, filters):
        hits = [(m.id, float(np.dot(qvec, self.vecs[m.id]))) for m in self._visible(user, filters)]
        return sorted(hits, key=lambda h: -h[1])[:k]

    def search_lexical(self, query, k, *, user, filters):
        self.lexical_calls += 1
        q = set(words(query))
        hits = [(m.id, float(len(q & set(words(m.text))))) for m in self._visible(user, filters)]
        return sorted([h for h in hits if h[1] > 0], key=lambda h: -h[1])[:k]

    def get_many(self, ids):
        return {i: self.records[i] for i in ids if i in self.records}

    def vectors(self, ids):
        return np.stack([self.vecs[i] for i in ids])

    def self_names(self, user):
        return [m.value for m in self._visible(user, None) if m.subject == "user" and m.attribute == "name"]

    def pinned(self, user, filters):
        return [m for m in self._visible(user, filters) if m.pinned]

    def links(self, ids, kinds):
        wanted = set(ids)
        return [x for x in self.link_rows if x.kind in kinds and (x.src in wanted or x.dst in wanted)]

    def follows(self, ids):
        return self.links(ids, ("follows",))

    def touch(self, ids, at):
        self.touched.append((list(ids), at))


def count_many(texts: list[str]) -> list[int]:
    return [len(words(t)) + 1 for t in texts]


def alice_store() -> FakeStore:
    day = timedelta(days=1)
    records = [
        mem("berlin", "Alice lives in Berlin", subject="alice", attribute="city", value="Berlin",
            status="superseded", status_reason="moved"),
        mem("lisbon", "Alice lives in Lisbon", subject="alice", attribute="city", value="Lisbon",
            created_at=T0 + 3 * day, importance=0.8, category="profile"),
        mem("move", "Alice moved because of a new job at Acme", kind="episodic", category="event",
            created_at=T0 + 3 * day),
        mem("tea", "Alice prefers green tea in the morning", category="preference"),
        mem("deploy", "To deploy run make release then tag the commit", kind="procedural", category="routine"),
        mem("french", "Always answer Alice in French", kind="procedural", category="instruction", pinned=True),
        mem("bob", "Bob lives in Lisbon too", user="bob"),
    ]
    records += [mem(f"crumb{i}", f"Alice had lunch at cafe number {i}", kind="episodic", category="event",
                    importance=0.2) for i in range(20)]
    return FakeStore(records, [Link("lisbon", "berlin", "supersedes", T0 + 3 * day),
                               Link("lisbon", "move", "because", T0 + 3 * day)])


def run(store: FakeStore, query: str, budget: int | None = 64, cfg: RecallConfig = CFG, **kw):
    return recall(store, HashEmbedder(), query, user=kw.pop("user", "alice"), budget_tokens=budget, cfg=cfg,
                  decay_cfg=DCFG, now=NOW, count_many=count_many, tokenizer="words+1", **kw)


def test_recall_answers_with_citations_history_and_one_touch():
    store = alice_store()
    r = run(store, "Where does Alice live?")
    # The toy hash embedder gives weak cosines, so the band is certain or vague, never unknown.
    assert r.confidence in ("certain", "vague")
    assert r.ids[0] == "french"  # pinned memories go first
    assert "lisbon" in r.ids and "berlin" not in r.ids and "bob" not in r.ids
    assert r.message == ""
    assert [c.memory_id for c in r.citations] == r.ids
    assert [h.id for h in r.history] == ["berlin"]
    assert r.history[0].note == ("corrected from 'Berlin' on 2025-01-04, because Alice moved because of a new "
                                 "job at Acme (not current)")
    assert r.tokens_used <= r.budget_tokens == 64
    assert r.tokens_used == sum(p.tokens for p in r.memories) + sum(h.tokens for h in r.history)
    # One batched touch, of the memories that support the answer only (not the pinned instruction or filler).
    (touched,) = store.touched
    assert touched[1] == NOW and "lisbon" in touched[0] and "french" not in touched[0]
    assert set(touched[0]) < set(r.ids)
    assert {k: r.provenance[k] for k in ("retrievers", "fusion", "evidence", "tokenizer")} == {
        "retrievers": ["dense", "bm25"], "fusion": "weighted_rank",
        "evidence": "claims, then dense cosine + query coverage", "tokenizer": "words+1"}
    # The reranker that ordered the candidates is named, with what it was fitted on.
    assert r.provenance["rerank"]["model"] == "locomo" and r.provenance["rerank"]["dataset"] == "locomo"
    assert r.provenance["rerank"]["turns"] == 0  # no dialog turn among these memories: nothing was reordered
    assert r.provenance["question"]["subject"] == "user" and r.provenance["confidence_why"]
    traced = [t.memory_id for t in r.trace]
    assert len(traced) == len(set(traced))
    assert {t.memory_id for t in r.trace if t.reason == "expansion"} == {"berlin"}


def test_recall_abstains_on_an_unrelated_question():
    store = alice_store()
    r = run(store, "What is the capital of Peru?")
    assert r.confidence == "unknown"
    assert r.memories == [] and r.citations == [] and r.history == []
    assert r.message == NOT_IN_RECORD
    assert r.trace and all(t.reason == "abstain" and not t.included for t in r.trace)
    assert store.touched == []


def test_recall_budget_is_a_hard_ceiling():
    store = alice_store()
    for budget in (0, 1, 5, 9, 17, 40, 200):
        r = run(store, "Where does Alice live and what does she drink?", budget)
        assert sum(p.tokens for p in r.memories) + sum(h.tokens for h in r.history) <= budget
    r = run(store, "Where does Alice live?", 0)
    assert r.confidence == "unknown" and r.message == NO_ROOM


def test_recall_uses_config_budget_by_default_and_rejects_negative():
    assert run(alice_store(), "Where does Alice live?", None).budget_tokens == CFG.budget_tokens
    with pytest.raises(InvalidInput):
        run(alice_store(), "Where does Alice live?", -1)


def test_recall_vetoes_a_stale_value_the_store_left_active():
    store = alice_store()
    store.records["berlin"] = replace(store.records["berlin"], status="active")
    r = run(store, "Where does Alice live?", 200)
    assert "berlin" not in r.ids and "lisbon" in r.ids
    (v,) = [t for t in r.trace if t.reason == "veto"]
    assert v.memory_id == "berlin" and "lisbon" in v.detail


def test_recall_empty_store_and_unknown_user():
    assert run(FakeStore([]), "Where does Alice live?").confidence == "unknown"
    r = run(alice_store(), "Where does Alice live?", user="carol")
    assert r.memories == [] and r.message == NOT_IN_RECORD


@pytest.mark.parametrize("w, retrievers, lexical_calls", [(0.0, ["dense"], 0), (1.0, ["bm25"], 1)])
def test_recall_single_retriever_recipes(w, retrievers, lexical_calls):
    store = alice_store()
    r = run(store, "Where does Alice live?", 200, RecallConfig(lexical_weight=w))
    assert r.provenance["retrievers"] == retrievers
    assert store.lexical_calls == lexical_calls
    assert "lisbon" in r.ids and r.confidence in ("certain", "vague")


def test_recall_passes_filters_to_the_store():
    r = run(alice_store(), "How do I deploy a release?", 200, filters={"kinds": ["procedural"]})
    assert r.ids and {p.kind for p in r.memories} == {"procedural"}
    assert r.ids[0] == "french" and "deploy" in r.ids


def test_recall_keeps_trace_complete_under_random_budgets():
    store, rnd = alice_store(), random.Random(7)
    for _ in range(20):
        r = run(store, "Alice lunch cafe Lisbon tea", rnd.randint(0, 120))
        traced = [t.memory_id for t in r.trace if t.reason != "expansion"]
        assert len(traced) == len(set(traced))
        assert set(r.ids) <= set(traced)


def test_resolve_self_rewrites_the_users_names_as_memories_say_them():
    assert resolve_self("Where does Alice live?", ["alice"]) == "Where does the user live?"
    assert resolve_self("Is ALICE's sister Alicia?", ["Alice"]) == "Is the user's sister Alicia?"
    assert resolve_self("Where does Bob live?", ["alice", ""]) == "Where does Bob live?"


def test_the_users_name_is_no_evidence_of_an_answer():
    assert coverage("What is Alice's blood type?", "The user's name is Alice.", ["alice"]) == 0.0
    assert coverage("Where does Alice live?", "Alice lives in Lisbon", ["alice"]) == 1.0


def test_make_room_never_evicts_the_answer_for_another_memorys_history():
    # The carrier (a corrected city) outscores the answer, but the answer has better evidence for the query.
    carrier = Packed(mem("city"), 0.9, 10, {"dense": 0.2, "coverage": 0.0})
    answer = Packed(mem("employer"), 0.56, 10, {"dense": 0.5, "coverage": 1.0})
    note = Packed(mem("old-city"), 0.0, 10, note="corrected from 'Berlin' (not current)")
    packed, kept, evicted = make_room([carrier, answer], [note], [10], [Link("city", "old-city", "supersedes")], 20)
    assert [p.id for p in packed] == ["city", "employer"] and kept == [] and evicted == {}


def test_the_newest_statement_of_a_slot_ranks_first():
    from mnemo.recall.ranking import current_first

    def sc(mid, value, day, score):
        m = MemoryRecord(id=mid, user="u", text=f"The user drinks {value}.", subject="user", attribute="drinks",
                         value=value, single_valued=False, created_at=datetime(2025, 1, day, tzinfo=timezone.utc))
        return Scored(m, score, {}, 5)

    old, new, other = sc("a", "tea", 1, 0.9), sc("b", "coffee", 9, 0.5), sc("c", "coffee", 5, 0.4)
    ranked = current_first([old, new, other])
    assert [s.memory.id for s in ranked][:2] == ["b", "a"]
    # One value only: nothing moves.
    assert [s.memory.id for s in current_first([old])] == ["a"]


def _mixes(**values: float) -> dict[str, dict]:
    """Return `fuse`-shaped entries whose weighted mix is `values` (the weighted_rank scale over them)."""
    return fuse([(m, v) for m, v in values.items()], [], RecallConfig(fusion="weighted_rank", lexical_weight=0.0))


def test_in_context_lifts_a_hit_whose_neighbour_is_relevant_over_a_lone_hit():
    fused = _mixes(question=0.9, lone=0.5, answer=0.45)
    order = lambda out: sorted(out, key=lambda m: -out[m]["fused"])  # noqa: E731
    assert order(fused) == ["question", "lone", "answer"]
    follows = [Link("answer", "question", "follows")]
    raised = in_context(fused, follows, RecallConfig(context_weight=0.5))
    assert order(raised) == ["question", "answer", "lone"]
    assert raised["answer"]["fused"] == pytest.approx(61 / 62) and raised["question"]["fused"] == 1.0
    # No weight, no links, or links of another kind: unchanged.
    assert in_context(fused, follows, RecallConfig(context_weight=0.0)) == fused
    assert in_context(fused, [Link("answer", "question", "supersedes")], RecallConfig(context_weight=0.5)) == fused


def test_in_context_takes_nothing_from_a_neighbour_no_retriever_found():
    fused = _mixes(a=0.9, b=0.5)
    raised = in_context(fused, [Link("b", "unseen", "follows"), Link("unseen2", "b", "follows")],
                        RecallConfig(context_weight=1.0))
    assert [raised[m]["mix"] for m in "ab"] == [fused[m]["mix"] for m in "ab"]


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_in_context_keeps_other_fusions_in_their_range(fusion):
    cfg = RecallConfig(fusion=fusion, lexical_weight=0.0, context_weight=1.0)
    fused = fuse([("a", 0.9), ("b", 0.8), ("c", 0.3), ("d", 0.1)], [], cfg)
    raised = in_context(fused, [Link("c", "a", "follows")], cfg)
    assert max(e["fused"] for e in raised.values()) == pytest.approx(max(e["fused"] for e in fused.values()))
    assert raised["c"]["fused"] > raised["b"]["fused"]


def test_in_context_joins_a_neighbour_no_retriever_found_on_what_its_neighbour_lends():
    fused = _mixes(necklace=0.9, lone=0.6, weak=0.2)
    follows = [Link("symbol", "necklace", "follows")]
    order = lambda out: sorted(out, key=lambda m: -out[m]["fused"])  # noqa: E731
    joined = in_context(fused, follows, RecallConfig(context_weight=0.5))
    assert joined["symbol"]["joined"] and joined["symbol"]["dense"] is None and joined["symbol"]["mix"] > 0
    # It lends nothing back (it has no mix of its own) and ranks by what it was lent: above the weak hit.
    assert joined["necklace"]["mix"] == fused["necklace"]["mix"]
    assert order(joined).index("symbol") < order(joined).index("weak")
    # Without joins it stays out; a neighbour of a hit with no relevance joins nothing.
    assert "symbol" not in in_context(fused, follows, RecallConfig(context_weight=0.5, context_joins=0))
    assert "x" not in in_context(fused, [Link("x", "nobody", "follows")], RecallConfig(context_weight=0.5))
