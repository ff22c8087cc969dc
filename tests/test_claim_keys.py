"""Claim keys (`mnemo eval locomo|realtalk --folds N --claim-keys`): a turn found through what the parser reads in it.

A turn stored verbatim is found by its own words; its claim keys say the same in the record's
words with the speaker named where the turn says "I". Key hits count as hits of their turn, at the
better score (`fold_keys`). The sentences are written for these tests.
"""

from __future__ import annotations

from conftest import require_data

from mnemo.eval.bench import folds, keys
from mnemo.eval.bench.keys import fold_keys, keys_of


def test_a_key_names_the_speaker_where_the_turn_says_i():
    keys = keys_of("I just started volunteering at the animal shelter last week!", "Maren")
    assert keys and all("the user" not in k.lower() for k in keys)
    assert any(k.startswith("Maren ") and "animal shelter" in k for k in keys)


def test_a_question_or_a_greeting_gives_no_key():
    assert keys_of("Wow, that's cool! What made you choose that?", "Maren") == []


def test_key_hits_count_as_their_turns_at_the_better_score():
    key_of = {"k1": "t1", "k2": "t1", "k3": "t2"}
    hits = [("k1", 0.9), ("t3", 0.8), ("t1", 0.5), ("k3", 0.4), ("k2", 0.3), ("t2", 0.2)]
    assert fold_keys(hits, key_of, 10) == [("t1", 0.9), ("t3", 0.8), ("t2", 0.4)]
    assert fold_keys(hits, key_of, 2) == [("t1", 0.9), ("t3", 0.8)]
    assert fold_keys([], key_of, 5) == []


def test_run_folds_with_claim_keys_ranks_turns_only(monkeypatch):
    require_data("locomo")
    stored: list[int] = []
    add = keys.add_keys

    def counted(*args, **kw):
        key_of = add(*args, **kw)
        stored.append(len(key_of))
        return key_of

    monkeypatch.setattr(keys, "add_keys", counted)
    res = folds.run_folds("locomo", ("bm25",), folds=2, limit=2, embedder="hash", claim_keys=True)
    assert res.params["claim_keys"] is True and len(stored) == 2 and all(n > 100 for n in stored)
    assert 0.0 < res.aggregates["bm25 | main"]["R@10"] <= 1.0
