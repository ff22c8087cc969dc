"""Out-of-fold model selection: the split is by conversation and deterministic; selection never sees its test fold."""

from __future__ import annotations

import pytest
from conftest import require_data

from mnemo.config import RecallConfig
from mnemo.errors import ConfigError
from mnemo.eval import bench
from mnemo.eval.bench import folds
from mnemo.recall.rerank import Reranker

CONVS = [f"conv-{i}" for i in (26, 30, 41, 42, 43, 44, 47, 48)]


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_folds_are_disjoint_cover_every_conversation_and_do_not_depend_on_input_order(n):
    split = folds.split_folds(CONVS, n)
    assert len(split) == n and all(split)
    flat = [c for f in split for c in f]
    assert sorted(flat) == sorted(CONVS) and len(flat) == len(set(flat))
    assert folds.split_folds(list(reversed(CONVS)), n) == split
    for k, test in enumerate(split):
        train = [c for j, f in enumerate(split) if j != k for c in f]
        assert not set(train) & set(test)


@pytest.mark.parametrize("n", [0, 1, 9])
def test_impossible_fold_counts_are_refused(n):
    with pytest.raises(ConfigError, match="--folds"):
        folds.split_folds(CONVS, n)


def _rows(good_on: dict[str, str]) -> list[dict]:
    """Per-question rows where candidate good_on[conv] scores 1 on that conversation and the others 0."""
    return [{"conversation": c, "category": 1, "candidate": cand, "R@10": float(cand == good_on[c]),
             "nDCG@10": float(cand == good_on[c])}
            for c in CONVS for cand in ("a", "b") for _ in range(3)]


def test_selection_uses_only_the_training_folds():
    split = folds.split_folds(CONVS, 4)
    held = split[0]
    # "b" wins everywhere except on the held-out fold, where "a" wins by far more questions.
    good_on = {c: ("a" if c in held else "b") for c in CONVS}
    rows = _rows(good_on) + [{"conversation": held[0], "category": 1, "candidate": "a", "R@10": 1.0,
                              "nDCG@10": 1.0} for _ in range(100)]
    chosen = folds.cross_validate(rows, split, ["a", "b"], main={1})
    assert chosen[0]["chosen"] == "b" and chosen[0]["test"] == sorted(held)
    assert not set(chosen[0]["train"]) & set(held)
    # Whatever the held-out fold scores, fold 0's choice does not move.
    flipped = [{**r, "R@10": 1.0 - r["R@10"]} if r["conversation"] in held else r for r in rows]
    assert folds.cross_validate(flipped, split, ["a", "b"], main={1})[0]["chosen"] == "b"


def test_selection_ignores_categories_outside_main_and_breaks_ties_by_grid_order():
    rows = [{"conversation": c, "category": 5, "candidate": "b", "R@10": 1.0, "nDCG@10": 1.0} for c in CONVS]
    rows += [{"conversation": c, "category": 1, "candidate": cand, "R@10": 0.5, "nDCG@10": 0.5}
             for c in CONVS for cand in ("a", "b")]
    assert {f["chosen"] for f in folds.cross_validate(rows, folds.split_folds(CONVS, 2), ["a", "b"], {1})} == {"a"}


def test_order_is_the_fusion_recall_uses():
    dense = [("m1", 0.9), ("m2", 0.5), ("m3", 0.1)]
    lexical = [("m3", 9.0), ("m4", 4.0)]
    cfg = RecallConfig(fusion="weighted", lexical_weight=0.8, rerank="")
    ranked = [m for m, _ in bench.order(dense, lexical, cfg)]
    assert ranked[0] == "m3" and set(ranked) == {"m1", "m2", "m3", "m4"}
    assert [m for m, _ in bench.order(dense, lexical, RecallConfig(lexical_weight=0.0, rerank=""))] == ["m1", "m2", "m3"]
    assert [m for m, _ in bench.order(dense, lexical, RecallConfig(lexical_weight=1.0, rerank=""))] == ["m3", "m4"]
    with pytest.raises(ConfigError, match="reranker"):  # a reranking recipe without the question is refused
        bench.order(dense, lexical, RecallConfig())


def test_run_folds_on_two_conversations_records_choices_and_scores_out_of_fold():
    require_data("locomo")
    res = folds.run_folds("locomo", ("bm25", "hybrid"), folds=2, limit=2, embedder="hash")
    chosen = res.params["folds"]
    assert [f["fold"] for f in chosen] == [0, 1] and all(f["chosen"] in folds.CANDIDATES for f in chosen)
    assert {c for f in chosen for c in f["test"]} == {r["conversation"] for r in res.rows}
    for f in chosen:
        assert not set(f["train"]) & set(f["test"])
    selected = [r for r in res.rows if r["recipe"] == "selected"]
    assert selected and all(r["candidate"] == chosen[r["fold"]]["chosen"] for r in selected)
    assert len(selected) == len([r for r in res.rows if r["recipe"] == "bm25"])
    main = res.aggregates["selected | main"]
    assert 0.0 < main["R@10"] <= 1.0 and main["R@10_sd"] >= 0.0 and "selected | fold 1" in res.aggregates


def test_run_folds_feature_rerank_is_fitted_without_the_held_out_fold(tmp_path):
    require_data("locomo")
    saved = tmp_path / "reranker.json"
    res = folds.run_folds("locomo", ("default",), folds=2, limit=2, embedder="hash", rerank=True,
                          save_reranker=str(saved))
    fits = res.params["rerank"]
    # The shipped default's reranker was fitted on these conversations: its rows say so.
    n_main = {f["fold"]: int(res.aggregates[f"default {folds.IN_SAMPLE} | fold {f['fold']}"]["n"]) for f in fits}
    # Fold k's model trains on the other fold's main-category questions, never its own.
    assert [f["train_questions"] for f in fits] == [n_main[1], n_main[0]]
    rows = [r for r in res.rows if r["recipe"] == "feature rerank"]
    assert len(rows) == len([r for r in res.rows if r["recipe"] == f"default {folds.IN_SAMPLE}"])
    assert 0.0 < res.aggregates["feature rerank | main"]["R@10"] <= 1.0
    # The saved reranker is fitted on both folds' main-category questions together.
    model = Reranker.load(str(saved))
    assert model.provenance["questions"] == sum(n_main.values()) and model.provenance["dataset"] == "locomo"


def test_run_folds_also_ranks_the_store_written_through_the_write_path():
    """`write`: every question is asked of the raw turns and of the store `remember_many` wrote, whose memories stand
    for the turns they came from; the reranker is fitted on both stores' questions, never on its held-out fold."""
    require_data("locomo")
    res = folds.run_folds("locomo", ("default",), folds=2, limit=2, embedder="hash", rerank=True, write=True)
    written = [r for r in res.rows if r["recipe"] == f"feature rerank{folds.WRITTEN}"]
    turns = [r for r in res.rows if r["recipe"] == "feature rerank"]
    assert written and len(written) == len(turns)
    assert {r["question_id"].removesuffix(folds.WRITTEN) for r in written} == {r["question_id"] for r in turns}
    # Both stores' main-category questions train each fold's model: twice those of one store.
    n_main = {k: int(res.aggregates[f"feature rerank | fold {k}"]["n"]) for k in (0, 1)}
    assert [f["train_questions"] for f in res.params["rerank"]] == [2 * n_main[1], 2 * n_main[0]]
    for name in (f"default {folds.IN_SAMPLE}{folds.WRITTEN}", f"{folds.NO_RERANK}{folds.WRITTEN}",
                 f"selected{folds.WRITTEN}"):
        assert 0.0 < res.aggregates[f"{name} | main"]["R@10"] <= 1.0
    # Without speakers, the shipped reranker leaves written memories in fusion's order: the same as no reranker.
    same = {r["question_id"]: r["R@10"] for r in res.rows if r["recipe"] == f"{folds.NO_RERANK}{folds.WRITTEN}"}
    assert all(same[r["question_id"]] == r["R@10"] for r in res.rows
               if r["recipe"] == f"default {folds.IN_SAMPLE}{folds.WRITTEN}")
