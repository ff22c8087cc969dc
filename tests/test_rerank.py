"""Tests for the reranker (`mnemo.recall.rerank`): features, fitting, ordering, the shipped file, and recall with it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import mnemo
from mnemo.config import Config, RecallConfig
from mnemo.errors import ConfigError
from mnemo.model import Link, MemoryRecord
from mnemo.recall import rerank as rr
from mnemo.recall.ranking import fuse

PEOPLE = {"a": ("Caroline", "Melanie", 40), "b": ("Melanie", "Caroline", 40), "c": ("Caroline", "Melanie", 5)}


def test_features_read_retrievers_speakers_time_and_neighbours():
    ids, x = rr.features("What does Caroline do for work?", [("a", 0.5), ("b", 0.9)], [("c", 3.0), ("a", 1.0)],
                         ([("d", 0.4)], []), [Link("c", "b", "follows")], PEOPLE)
    assert ids == ["a", "b", "c", "d"] and x.shape == (4, len(rr.FEATURES))
    col = {f: x[:, i].tolist() for i, f in enumerate(rr.FEATURES)}
    assert col["speaker_named"] == [1.0, 0.0, 1.0, 0.0] and col["other_named"] == [0.0, 1.0, 0.0, 0.0]
    assert col["scoped"] == [0.0, 0.0, 0.0, 1.0]
    # c's neighbour is b: b's mix (dense 1.0 x 0.4, no BM25) is c's context, and c's (BM25 1.0 x 0.6) is b's.
    assert col["context"] == pytest.approx([0.0, 0.6, 0.4, 0.0])


def test_people_of_reads_dialog_meta_and_leaves_plain_memories_blank():
    turn = MemoryRecord("t", "u", "Caroline: I started at the shelter.", meta={"speaker": "Caroline",
                                                                                "addressees": ["Melanie"]})
    plain = MemoryRecord("p", "u", "Lead time for AX-7 is 14 days")
    assert rr.people_of([turn, plain]) == {"t": ("Caroline", "Melanie", len("I started at the shelter.")),
                                           "p": ("", "", len(plain.text))}


def test_fit_learns_from_labelled_rows_orders_by_them_and_round_trips(tmp_path):
    ids, x = rr.features("What does Caroline do for work?", [("a", 0.5), ("b", 0.9)], [("c", 3.0), ("a", 1.0)],
                         None, [], PEOPLE)
    # Trained where the named speaker's turns are the relevant ones, it puts the other speaker's last.
    model = rr.fit([x] * 5, [np.array([1.0, 0.0, 1.0])] * 5, dataset="toy")
    assert rr.order(model, ids, x)[-1] == "b" and model.provenance == {"rows": 15, "relevant": 10, "dataset": "toy"}
    path = tmp_path / "toy.json"
    model.save(path)
    again = rr.Reranker.load(str(path))
    assert again == model and np.allclose(again.probability(x), model.probability(x))
    with pytest.raises(ConfigError, match="relevant and irrelevant"):
        rr.fit([x], [np.zeros(3)])


def test_a_reranker_for_other_features_or_a_missing_one_is_refused(tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"mean": [0.0], "scale": [1.0], "coef": [1.0], "intercept": 0.0, "features": ["dense"]}))
    with pytest.raises(ConfigError, match="not this version's"):
        rr.Reranker.load(str(bad))
    with pytest.raises(ConfigError, match="no reranker 'nope'.*locomo"):
        rr.Reranker.load("nope")


def test_the_shipped_reranker_says_what_it_was_fitted_on():
    model = rr.Reranker.load("locomo")
    assert model.provenance["dataset"] == "locomo" and model.provenance["questions"] > 1000
    assert model.provenance["fitted_by"].startswith("mnemo eval locomo --folds")


def test_reranked_reorders_turns_in_the_places_turns_held_and_leaves_other_memories_be():
    cfg = RecallConfig(lexical_weight=0.0)
    dense = [("b", 0.9), ("fact", 0.8), ("a", 0.5)]
    fused = fuse(dense, [("c", 3.0)], cfg)
    people = {**PEOPLE, "fact": ("", "", 30)}  # a fact the write path extracted: no speaker
    ids, x = rr.features("What does Caroline do?", dense, [("c", 3.0)], None, [], people)
    model = rr.Reranker(mean=(0.0,) * 10, scale=(1.0,) * 10, intercept=0.0,
                        coef=tuple(-5.0 if f == "other_named" else 0.0 for f in rr.FEATURES))
    out = rr.reranked(fused, model, ids, x, people)
    # Melanie's turn b (the question names only whom it addresses) and Caroline's a swap places; the fact stays.
    assert [out[m]["fused"] for m in ("a", "fact", "b")] == [fused["b"]["fused"], fused["fact"]["fused"],
                                                              fused["a"]["fused"]]
    assert out["c"]["fused"] == 0.0 and "rerank" not in out["c"] and "rerank" not in out["fact"]
    assert out["b"]["rerank"] < out["a"]["rerank"]


def test_recall_with_a_reranker_orders_by_it_and_says_so(tmp_path):
    t0 = datetime(2023, 5, 1, tzinfo=timezone.utc)
    mem = mnemo.Memory.open(":memory:", embedder="hash", clock=mnemo.SimulatedClock(t0 + timedelta(days=2)))
    try:
        turns = [("Melanie", "Caroline", "Melanie: Last weekend I did something for my mental health: a race."),
                 ("Caroline", "Melanie", "Caroline: I went to a support group.")]
        ids = [r.id for r in mem.insert_many([t for _, _, t in turns], user="c", session="s1", at=t0,
                                             metas=[{"speaker": s, "addressees": [a]} for s, a, _ in turns])]
        # Both retrievers put Melanie's turn first; a reranker that only reads "the question names the
        # speaker" puts Caroline's first.
        path = tmp_path / "speaker.json"
        rr.Reranker(mean=(0.0,) * 10, scale=(1.0,) * 10, intercept=0.0, provenance={"dataset": "toy"},
                    coef=tuple(5.0 if f == "speaker_named" else 0.0 for f in rr.FEATURES)).save(path)
        question = "What did Caroline do for her mental health last weekend?"
        def recall(rerank: str) -> mnemo.Recall:
            cfg = Config(recall=replace(RecallConfig(), rerank=rerank))
            return mnemo.Memory(mem.store, mem.embedder, mem.llm, mem.clock, cfg).recall(question, user="c",
                                                                                        budget_tokens=500)

        plain, ranked = recall(""), recall(str(path))
        def top(r: mnemo.Recall) -> str:  # the candidate with the best relevance (packing adds claims and recency)
            return max(r.trace, key=lambda t: t.scores["fused"]).memory_id

        assert top(plain) == ids[0] and top(ranked) == ids[1]
        assert plain.provenance["rerank"] == {} and ranked.provenance["rerank"]["dataset"] == "toy"
        assert ranked.provenance["rerank"]["turns"] == 2
    finally:
        mem.close()
