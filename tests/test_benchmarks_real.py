"""Bounded runs of the real benchmarks: every question gets a row and the figures are in sane ranges.

These read $MNEMO_DATA_DIR. They skip only when it is unset; when it is set (as in CI) a missing
dataset FAILS, because a benchmark test that skips there would pass without testing anything.
The full runs (`mnemo eval locomo ...`) are not tests; these take a few conversations each.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import require_data

from mnemo.embed import make_embedder
from mnemo.errors import ConfigError
from mnemo.eval import bench, datasets
from mnemo.eval.bench import updates as bench_updates


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The benchmark folder: skip when MNEMO_DATA_DIR is unset, fail when it is set but unusable."""
    return require_data("locomo", "realtalk", "beam", "mquake_hard", "prefeval")


@pytest.fixture(scope="module")
def minilm():
    """One MiniLM embedder for the module (loading the model once)."""
    return make_embedder("minilm")


def _in_unit(rows, keys):
    for r in rows:
        for k in keys:
            v = r.get(k)
            assert v is None or math.isnan(v) or 0.0 <= v <= 1.0, (r["qid"], k, v)


def _questions(name: str, convs: int, **kw) -> list[datasets.Question]:
    ds = datasets.load(name, **kw)
    ids = {c.id for c in ds.conversations[:convs]}
    return [q for q in ds.questions if q.conversation_id in ids]


def test_locomo_retrieval_two_conversations(data_dir, minilm):
    res = bench.run_locomo(("dense", "bm25", "hybrid"), limit=2, embedder=minilm, budgets=())
    qs = _questions("locomo", 2)
    assert len(res.rows) == 3 * len(qs) and {r["question_id"] for r in res.rows} == {q.id for q in qs}
    assert all(r["error"] is None for r in res.rows)
    _in_unit(res.rows, bench.DIALOG_KEYS)
    main = {rec: res.aggregates[f"{rec} | main"] for rec in ("dense", "bm25", "hybrid")}
    for m in main.values():
        assert 0.2 < m["R@10"] <= 1.0 and m["R@5"] <= m["R@10"] and m["R@10"] <= m["S_R@10"] + 1e-9
    assert main["hybrid"]["R@10"] > main["dense"]["R@10"]
    assert {"cat 5 adversarial", "cat 1 multi-hop"} <= {g.split(" | ")[1] for g in res.aggregates}
    assert res.checksums and res.params["dropped"] >= 0 and res.provenance["hybrid"]["embedder"] == minilm.name


def test_session_stores_ask_each_session_what_it_holds_and_rank_within_it(data_dir):
    """--scope session: a store per session, asked only the questions its turns answer; R@1 <= R@10 <= 1."""
    ds = datasets.load("locomo")
    conv = ds.conversations[0]
    asked = [q for q in ds.questions if q.conversation_id == conv.id]
    stores = bench.stores_of(conv, asked, "session")
    assert 1 < len(stores) <= len(conv.sessions)
    for part, times, qs in stores:
        said = {t.dia_id for t in part.turns}
        assert len(part.sessions) == len(times) == 1 and all(set(q.evidence) <= said for q in qs)
    spanning = [q for q in asked if len({e.split(":")[0] for e in q.evidence}) > 1]
    assert spanning and not {q.id for q in spanning} & {q.id for _, _, qs in stores for q in qs}
    res = bench.run_locomo(("bm25",), limit=1, embedder="hash", budgets=(), scope="session")
    assert len(res.rows) == sum(len(qs) for _, _, qs in stores) and res.params["scope"] == "session"
    assert all(r["store_turns"] < 60 and r["R@1"] <= r["R@10"] for r in res.rows)
    whole = bench.run_locomo(("bm25",), limit=1, embedder="hash", budgets=())
    assert whole.aggregates["bm25 | main"]["RR"] < res.aggregates["bm25 | main"]["RR"], "a small store ranks easier"
    with pytest.raises(ConfigError, match="scope"):
        bench.run_locomo(("bm25",), limit=1, embedder="hash", budgets=(), scope="week")


def test_realtalk_retrieval_and_budgeted_recall_one_chat(data_dir):
    res = bench.run_realtalk(("hybrid",), limit=1, embedder="hash", budgets=(512,))
    qs = _questions("realtalk", 1)
    assert len(res.rows) == len(qs) > 0
    _in_unit(res.rows, [*bench.DIALOG_KEYS, "cover@512", "abstained@512"])
    assert all(r["tokens@512"] <= 512 for r in res.rows)
    assert 0.0 < res.aggregates["hybrid | main"]["cover@512"] <= 1.0


def test_beam_two_chats(data_dir):
    res = bench_updates.run_beam(("default",), limit=2, embedder="hash")
    qs = _questions("beam", 2)
    assert len(res.rows) == len(qs) == 40 and all(r["error"] is None for r in res.rows)
    _in_unit(res.rows, [k for k in bench_updates.BEAM_KEYS if k != "tokens"])
    by = {r["question_id"]: r for r in res.rows}
    for q in qs:
        row = by[q.id]
        assert not math.isnan(row["abstained"]) and row["tokens"] <= 512
        if q.probe == "update":
            assert not math.isnan(row["current"])
        if q.probe == "contradiction":
            assert not math.isnan(row["both_surfaced"])
    assert {"default | knowledge_update", "default | abstention"} <= set(res.aggregates)


def test_mquake_hard_twenty_cases(data_dir):
    res = bench_updates.run_mquake(("default",), limit=20, embedder="hash")
    assert len(res.rows) == 20 * 5 and all(r["error"] is None for r in res.rows)
    _in_unit(res.rows, [k for k in bench_updates.MQUAKE_KEYS if k != "tokens"])
    update = res.aggregates["default | structured | update"]
    # Written as structured corrections, every edit supersedes what it replaces.
    assert update["current_packed"] > 0.9 and update["stale"] == 0.0
    assert not math.isnan(res.aggregates["default | structured | cascade"]["chain_recall"])


def test_prefeval_one_topic(data_dir):
    res = bench_updates.run_prefeval(("default",), limit=1, inter_turns=20, embedder="hash")
    qs = [q for q in datasets.load("prefeval", inter_turns=20).questions]
    topic = qs[0].category_name
    assert len(res.rows) == sum(q.category_name == topic for q in qs) > 0
    _in_unit(res.rows, ["R@5", "R@10", "RR", "pref_packed", "abstained"])
    assert res.aggregates["default | all topics"]["R@10"] > 0.0
    assert res.params["inter_turns"] == 20


def test_missing_dataset_is_an_error_not_a_skip(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path))
    with pytest.raises(datasets.DatasetError, match="does not exist"):
        bench.run_locomo(("hybrid",), limit=1, embedder="hash", budgets=())
