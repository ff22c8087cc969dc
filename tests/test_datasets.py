"""Benchmark loaders, evidence cleaning, checksums, held-out exclusion and the downloader.

Tests marked `data` read the shared copies from $MNEMO_DATA_DIR. Without them they skip locally (one
line saying how to enable them) and fail under CI; a dataset that is there but altered always fails.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import threading
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from conftest import require_data

from mnemo.errors import ConfigError
from mnemo.eval.datasets import (
    BEAM_ABILITIES,
    LOCOMO_HELDOUT,
    MQUAKE_HELDOUT,
    PREFEVAL_HELDOUT,
    PREFEVAL_TOPICS,
    DatasetError,
    clean_evidence,
    data_dir,
    load,
    load_beam,
    load_locomo,
    load_longmemeval,
    load_meme,
    load_mquake_hard,
    load_prefeval,
    load_realtalk,
    longmemeval_corpus,
    longmemeval_heldout,
    longmemeval_skip_reason,
    parse_when,
    verify_checksums,
)
from mnemo.eval.datasets import download as dl
from mnemo.eval.metrics import retrieval_scores, strip_turn_suffix

FIXTURES = Path(__file__).parent / "fixtures"
LME_SAMPLE = FIXTURES / "longmemeval_sample.json"


@pytest.fixture(scope="session")
def data_root() -> Path:
    """The shared benchmark folder: skip (locally) or fail (CI) when MNEMO_DATA_DIR does not name one."""
    return require_data()


@pytest.fixture(scope="module")
def locomo(data_root):
    require_data("locomo")
    return load_locomo()


@pytest.fixture(scope="module")
def realtalk(data_root):
    require_data("realtalk")
    return load_realtalk()


@pytest.fixture(scope="module")
def beam(data_root):
    require_data("beam")
    return load_beam()


@pytest.fixture(scope="module")
def mquake(data_root):
    require_data("mquake_hard")
    return load_mquake_hard()


@pytest.fixture(scope="module")
def meme(data_root):
    require_data("meme")
    return load_meme()


def _link(src: Path, dst: Path) -> None:
    """Make `dst` point at `src` (the shared copy), so no data is duplicated."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(src, dst)


# data_dir -------------------------------------------------------------------------------------


def test_data_dir_unset_raises_config_error_that_says_what_to_do(monkeypatch):
    monkeypatch.delenv("MNEMO_DATA_DIR", raising=False)
    with pytest.raises(ConfigError, match="MNEMO_DATA_DIR.*mnemo data download"):
        data_dir()


def test_data_dir_missing_folder_raises(monkeypatch, tmp_path):
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="not a folder"):
        data_dir()


def test_missing_dataset_raises_dataset_error(monkeypatch, tmp_path):
    monkeypatch.setenv("MNEMO_DATA_DIR", str(tmp_path))
    for loader in (load_locomo, load_realtalk, load_beam, load_mquake_hard, load_meme, load_prefeval):
        with pytest.raises(DatasetError, match="mnemo data download"):
            loader()
    assert issubclass(DatasetError, ConfigError)


def test_load_rejects_unknown_name():
    with pytest.raises(DatasetError, match="unknown dataset"):
        load("squad")


# Evidence cleaning (BENCHMARKS.md §1.5) ---------------------------------------------------------

VALID = {f"D{s}:{t}" for s in range(1, 31) for t in range(1, 30)}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),
        ("D8:6, D9:17", ["D8:6", "D9:17"]),
        (["D:11:26"], ["D11:26"]),
        (["D30:05"], ["D30:5"]),
        (["D"], []),
        (["D12:3-D12:5"], ["D12:3", "D12:4", "D12:5"]),
        (["D12:3-5"], ["D12:3", "D12:4", "D12:5"]),
        (["D20:6."], ["D20:6"]),
        (["D13:4. D14:4"], ["D13:4", "D14:4"]),
        (["D12:5-D14:2"], ["D12:5", "D14:2"]),  # across sessions: endpoints only
        (["D 2:18"], ["D2:18"]),
        (["D17;39", "23:29", "", "D:56", "D58"], []),
        (["D1:1", "D1:1", "D2:2", "D1:1"], ["D1:1", "D2:2"]),
        (["D12:28-D12:31"], ["D12:28", "D12:29"]),  # turns that do not exist are dropped
        (["D99:1", "D3:1"], ["D3:1"]),
        (None, []),
        ([], []),
    ],
)
def test_clean_evidence(raw, expected):
    assert clean_evidence(raw, VALID) == expected


def test_clean_evidence_keeps_first_occurrence_order():
    assert clean_evidence(["D3:1; D1:1", "D3:1"], VALID) == ["D3:1", "D1:1"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("29.12.2023, 22:42:04", datetime(2023, 12, 29, 22, 42, 4)),
        ("2023/05/30 (Tue) 23:40", datetime(2023, 5, 30, 23, 40)),
        ("March-15-2024", datetime(2024, 3, 15)),
        ("someday", None),
        (None, None),
    ],
)
def test_parse_when(raw, expected):
    assert parse_when(raw) == expected


# LoCoMo and REALTALK ----------------------------------------------------------------------------


@pytest.mark.data
def test_locomo_counts(locomo):
    assert [c.id for c in locomo.conversations] == [
        "conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48",
    ]  # fmt: skip
    assert sum(len(c.sessions) for c in locomo.conversations) == 217
    assert sum(len(c.turns) for c in locomo.conversations) == 4805
    assert sum(1 for c in locomo.conversations for t in c.turns if t.caption) == 1009
    everything = load_locomo(require_evidence=False)
    assert len(everything.questions) == 1586
    assert Counter(q.category for q in everything.questions) == {1: 213, 2: 256, 3: 76, 4: 681, 5: 360}
    # Two questions have no usable evidence after cleaning: dropped and reported, not silently lost.
    assert len(locomo.dropped) == 2
    assert len(locomo.questions) == 1586 - 2
    assert {qid for qid, _ in locomo.dropped}.isdisjoint(q.id for q in locomo.questions)


@pytest.mark.data
def test_locomo_records(locomo):
    conv = locomo.conversation("conv-26")
    assert conv.speakers == ["Caroline", "Melanie"]
    first = conv.sessions[0]
    assert (first.id, first.date_raw, first.date_time) == (
        "S1",
        "1:56 pm on 8 May, 2023",
        datetime(2023, 5, 8, 13, 56),
    )
    shared = next(t for t in conv.turns if t.caption)
    assert shared.text == f"{shared.raw_text}\n[shares {shared.caption}]"
    assert shared.document.startswith(f"{shared.speaker}: ")
    assert all(s.date_time is not None for c in locomo.conversations for s in c.sessions)
    for q in locomo.questions:
        assert q.evidence and set(q.evidence) <= locomo.conversation(q.conversation_id).turn_ids
    adversarial = [q for q in locomo.questions if q.category == 5]
    assert all(q.probe == "abstain" and "adversarial_answer" in q.extra for q in adversarial)
    assert {q.category_name for q in locomo.questions} == {
        "multi-hop", "temporal", "open-domain", "single-hop", "adversarial",
    }  # fmt: skip
    assert isinstance(
        next(q for q in locomo.questions if q.id == "conv-26/q1").answer, str
    )  # an int upstream


@pytest.mark.data
def test_realtalk_counts(realtalk):
    assert len(realtalk.conversations) == 8
    assert sum(len(c.sessions) for c in realtalk.conversations) == 177
    assert sum(len(c.turns) for c in realtalk.conversations) == 7026
    everything = load_realtalk(require_evidence=False)
    assert len(everything.questions) == 573
    assert Counter(q.category for q in everything.questions) == {1: 241, 2: 243, 3: 89}
    assert len(realtalk.dropped) == 11
    assert len(realtalk.questions) == 573 - 11
    assert not any(c.id.startswith(("Chat_9_", "Chat_10_")) for c in realtalk.conversations)
    turn = realtalk.conversations[0].turns[0]
    assert turn.text == "Hey! How are you?" and turn.date_time == datetime(2023, 12, 29, 22, 42, 4)


# BEAM, MQuAKE-hard, MEME, PrefEval ---------------------------------------------------------------


@pytest.mark.data
def test_beam_counts_and_probes(beam):
    assert len(beam.conversations) == 16
    assert not any(int(c.id.split("-")[1]) % 5 == 0 for c in beam.conversations)
    assert len(beam.questions) == 320
    assert Counter(q.category_name for q in beam.questions) == dict.fromkeys(BEAM_ABILITIES, 32)
    turns = [t for c in beam.conversations for t in c.turns]
    assert len(turns) == 4044 and sum(t.role == "user" for t in turns) == 2022
    probes = Counter(q.probe for q in beam.questions)
    assert (probes["update"], probes["contradiction"], probes["abstain"], probes["preference"]) == (
        32,
        32,
        32,
        32,
    )
    ku = next(q for q in beam.questions if q.id == "beam-1/knowledge_update/0")
    assert (ku.extra["stale_ids"], ku.extra["current_ids"], ku.evidence) == (["86"], ["114"], ["86", "114"])
    assert "250ms" in ku.answer
    # Known issue in the README: one update has an empty updated_info.
    assert [q.id for q in beam.questions if q.probe == "update" and not q.extra["current_ids"]] == [
        "beam-12/knowledge_update/0"
    ]
    assert all(not q.evidence for q in beam.questions if q.probe == "abstain")
    cr = [q for q in beam.questions if q.probe == "contradiction"]
    assert all(q.extra["first_ids"] and q.extra["second_ids"] for q in cr)
    first = beam.conversations[0]
    assert first.sessions[0].date_time == datetime(2024, 3, 15)
    assert "->->" in first.turns[0].raw_text and "->->" not in first.turns[0].text


@pytest.mark.data
def test_mquake_counts_and_probes(mquake):
    assert len(mquake.conversations) == 344
    assert not {int(c.id.split("-")[1]) for c in mquake.conversations} & MQUAKE_HELDOUT
    assert len(MQUAKE_HELDOUT) == 85
    edits = [q for q in mquake.questions if q.probe == "update"]
    cascades = [q for q in mquake.questions if q.probe == "cascade"]
    assert (len(edits), len(cascades)) == (1376, 344)
    first = next(q for q in edits if q.id == "mquake-7417/edit-0")
    assert (first.answer, first.extra["stale_answer"], first.extra["stale_ids"]) == (
        "Madonna",
        "The Beatles",
        ["fact-0"],
    )
    conv = mquake.conversation("mquake-7417")
    assert conv.sessions[1].turns[0].text == "Hey Jude was performed by Madonna."
    multi = next(q for q in cascades if q.conversation_id == "mquake-7417")
    assert (multi.answer, multi.extra["stale_answer"], len(multi.extra["paraphrases"])) == (
        "Arabic",
        "English",
        3,
    )
    assert all(len(q.evidence) == 4 for q in cascades)


@pytest.mark.data
def test_meme_episode(meme):
    (conv,) = meme.conversations
    assert (conv.id, len(conv.sessions), len(conv.turns)) == ("sw_033", 17, 157)
    assert [q.extra["phase"] for q in meme.questions] == ["before"] * 4 + ["after"] * 6
    after = {q.extra["tag"]: q for q in meme.questions if q.extra["phase"] == "after"}
    assert {t: q.probe for t, q in after.items()} == {
        "Tr": "tracking", "Cas": "cascade", "Abs": "abstain", "Del": "deletion", "Agg": "recall", "ER": "recall",
    }  # fmt: skip
    assert after["Cas"].answer == "James Lee" and after["Cas"].extra["stale_value"] == "Hyunwoo Nam"
    assert after["Del"].extra["stale_value"] == "stream.velturis.io/aurora"
    assert "S14:1" in after["Abs"].evidence  # the root change it depends on
    before_del = next(q for q in meme.questions if q.id == after["Del"].extra["pair"])
    assert before_del.probe == "recall" and "S14:5" not in before_del.evidence  # said after the probe
    assert set(after["ER"].extra["systems"]) == {
        "bm25",
        "dense",
        "graphiti",
        "karpathy",
        "md_file",
        "mem0",
        "md_file_opus",
    }


@pytest.mark.data
@pytest.mark.parametrize("form", ["explicit", "choice", "persona"])
def test_prefeval_counts(data_root, form):
    ds = load_prefeval(form=form, inter_turns=3)
    assert len(ds.questions) == 798
    topics = {q.category_name for q in ds.questions}
    assert len(topics) == 16 and not topics & PREFEVAL_HELDOUT
    assert all(q.probe == "preference" and q.evidence for q in ds.questions)
    assert all(len(q.extra["mcq_options"]) == 4 for q in ds.questions)
    conv = ds.conversations[0]
    assert [s.id for s in conv.sessions] == ["S1", "S2"] and len(conv.sessions[1].turns) == 6
    assert [t.role for t in conv.sessions[1].turns] == ["user", "assistant"] * 3


@pytest.mark.data
def test_prefeval_distractor_limits(data_root):
    assert [s.id for s in load_prefeval(inter_turns=0).conversations[0].sessions] == ["S1"]
    assert len(load_prefeval(inter_turns=316).conversations[0].sessions[1].turns) == 632
    with pytest.raises(DatasetError, match="distractor"):
        load_prefeval(inter_turns=317)


# Checksums ---------------------------------------------------------------------------------------


@pytest.mark.data
@pytest.mark.parametrize(
    ("name", "n_files"),
    [("locomo", 2), ("realtalk", 8), ("beam", 32), ("mquake_hard", 2), ("meme", 2), ("prefeval", 66)],
)
def test_verify_checksums_all_ok(data_root, name, n_files):
    report = verify_checksums(name)
    assert len(report) == n_files
    assert all(entry["ok"] for entry in report.values()), report


@pytest.mark.data
def test_loaders_record_checksums(locomo, meme, mquake):
    assert locomo.checksums == {
        "locomo/locomo10_shared_8conv.json": "80eb7a1f62c5baa5ae2ebdfbc8f3fbe1b1f1006ab9d5dc800069e27e024d56f4"
    }
    assert (
        meme.checksums["meme/sw033.json"]
        == "e8e439bdc19af09a42b2fe57209c8784ff9adb5785d3ebde0cb5250e396f6620"
    )
    assert mquake.checksums["mquake_hard/MQuAKE-hard_shared.json"].startswith("3e9f6523")


@pytest.mark.data
def test_altered_file_fails_its_checksum(data_root, tmp_path):
    raw = (data_root / "meme" / "sw033.json").read_bytes()
    (tmp_path / "sw033.json").write_bytes(raw.replace(b"Jihoon Ryu", b"Jihoon Ryx", 1))
    with pytest.raises(DatasetError, match="sha256"):
        load_meme(tmp_path)
    assert not verify_checksums("meme", tmp_path)["sw033.json"]["ok"]
    assert len(load_meme(tmp_path, verify=False).questions) == 10


# Both layouts and held-out exclusion --------------------------------------------------------------


@pytest.mark.data
def test_upstream_layouts_load_the_same(data_root, tmp_path, beam, meme):
    for f in (data_root / "realtalk").glob("Chat_*.json"):
        _link(f, tmp_path / "realtalk" / "data" / f.name)
    for chat in (data_root / "beam" / "128k").iterdir():
        for f in chat.iterdir():
            sub = "probing_questions/" if f.name == "probing_questions.json" else ""
            _link(f, tmp_path / "beam" / "chats" / "100K" / chat.name / f"{sub}{f.name}")
    for f in (data_root / "meme").glob("*.json"):
        _link(f, tmp_path / "meme" / "src" / "data" / f.name)
    for f in (data_root / "prefeval").rglob("*.json"):
        _link(f, tmp_path / "prefeval" / "benchmark_dataset" / f.relative_to(data_root / "prefeval"))
    _link(data_root / "prefeval" / "LICENSE.txt", tmp_path / "prefeval" / "LICENSE")

    # Byte copies keep their sha256, so the upstream layout verifies too.
    assert len(load_realtalk(tmp_path / "realtalk").questions) == 562
    up = load_beam(tmp_path / "beam")
    assert up.meta["layout"] == "upstream" and len(up.questions) == len(beam.questions) == 320
    assert sorted(up.checksums.values()) == sorted(beam.checksums.values())
    assert len(load_meme(tmp_path / "meme").questions) == len(meme.questions)
    assert len(load_prefeval(tmp_path / "prefeval").questions) == 798
    assert all(e["ok"] for e in verify_checksums("prefeval", tmp_path / "prefeval").values())


@pytest.mark.data
def test_locomo_upstream_file_with_heldout_conversations(data_root, tmp_path):
    convs = json.loads((data_root / "locomo" / "locomo10_shared_8conv.json").read_text(encoding="utf-8"))
    # Stand-ins for the held-out conversations a download from upstream brings.
    extra = [dict(convs[0], sample_id="conv-49"), dict(convs[1], sample_id="conv-50")]
    target = tmp_path / "locomo" / "data" / "locomo10.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(convs + extra), encoding="utf-8")
    with pytest.raises(DatasetError, match="sha256"):
        load_locomo(tmp_path / "locomo")
    ds = load_locomo(tmp_path / "locomo", verify=False)
    assert sorted(ds.heldout_excluded) == sorted(LOCOMO_HELDOUT)
    assert not {c.id for c in ds.conversations} & LOCOMO_HELDOUT and len(ds.conversations) == 8
    everything = load_locomo(tmp_path / "locomo", verify=False, include_heldout=True)
    assert {c.id for c in everything.conversations} >= LOCOMO_HELDOUT


@pytest.mark.data
def test_heldout_files_are_excluded_by_default(data_root, tmp_path):
    root = data_root
    # REALTALK: chats 9 and 10.
    for f in (root / "realtalk").glob("Chat_*.json"):
        _link(f, tmp_path / "realtalk" / f.name)
    _link(root / "realtalk" / "Chat_1_Emi_Elise.json", tmp_path / "realtalk" / "Chat_9_Fahim_Akib.json")
    ds = load_realtalk(tmp_path / "realtalk", verify=False)
    assert ds.heldout_excluded == ["Chat_9_Fahim_Akib"] and len(ds.conversations) == 8
    assert len(load_realtalk(tmp_path / "realtalk", verify=False, include_heldout=True).conversations) == 9
    # BEAM: chat numbers n % 5 == 0.
    for chat in (root / "beam" / "128k").iterdir():
        for f in chat.iterdir():
            _link(f, tmp_path / "beam" / "128k" / chat.name / f.name)
    for f in (root / "beam" / "128k" / "1").iterdir():
        _link(f, tmp_path / "beam" / "128k" / "5" / f.name)
    ds = load_beam(tmp_path / "beam")
    assert ds.heldout_excluded == ["beam-5"] and len(ds.questions) == 320
    assert len(load_beam(tmp_path / "beam", include_heldout=True).questions) == 340
    # MQuAKE-hard: the 85 listed case ids.
    cases = json.loads((root / "mquake_hard" / "MQuAKE-hard_shared.json").read_text(encoding="utf-8"))
    (tmp_path / "mquake_hard").mkdir()
    stand_in = dict(cases[0], case_id=7438)
    (tmp_path / "mquake_hard" / "MQuAKE-hard.json").write_text(
        json.dumps(cases + [stand_in]), encoding="utf-8"
    )
    ds = load_mquake_hard(tmp_path / "mquake_hard", verify=False)
    assert ds.heldout_excluded == ["mquake-7438"] and len(ds.conversations) == 344
    # PrefEval: 4 topics.
    for f in (root / "prefeval").rglob("*.json"):
        _link(f, tmp_path / "prefeval" / f.relative_to(root / "prefeval"))
    _link(
        root / "prefeval/explicit_preference/travel_hotel.json",
        tmp_path / "prefeval/explicit_preference/shop_motors.json",
    )
    ds = load_prefeval(tmp_path / "prefeval")
    assert ds.heldout_excluded == ["shop_motors"] and len(ds.questions) == 798
    assert len(load_prefeval(tmp_path / "prefeval", include_heldout=True).questions) > 798


def test_prefeval_heldout_rule_matches_readme():
    assert sorted(PREFEVAL_HELDOUT) == [
        "entertain_shows",
        "lifestyle_health",
        "shop_motors",
        "travel_transportation",
    ]
    assert list(PREFEVAL_TOPICS) == sorted(PREFEVAL_TOPICS) and len(PREFEVAL_TOPICS) == 20


# LongMemEval (synthetic sample in upstream's format) ---------------------------------------------


def test_longmemeval_heldout_rule():
    items = json.loads(LME_SAMPLE.read_text(encoding="utf-8"))
    assert longmemeval_heldout(items) == {"ku04"}  # the 5th knowledge-update question in id order
    ds = load_longmemeval(LME_SAMPLE)
    assert ds.heldout_excluded == ["ku04"] and len(ds.questions) == 9
    assert "ku04" not in {q.id for q in ds.questions}
    assert len(load_longmemeval(LME_SAMPLE, include_heldout=True).questions) == 10


def test_longmemeval_records():
    ds = load_longmemeval(LME_SAMPLE)
    q = {q.id: q for q in ds.questions}
    assert q["ku00"].probe == "update" and q["ku00"].category_name == "knowledge-update"
    assert q["ku00"].evidence == ["answer_ku0_1_1", "answer_ku0_2_1"]
    assert q["ku00"].extra["answer_session_ids"] == ["answer_ku0_1", "answer_ku0_2"]
    assert q["ku00"].extra["question_time"] == datetime(2023, 5, 30, 23, 40)
    assert q["ssu002_abs"].probe == "abstain" and q["ssu002_abs"].extra["abstention"]
    assert q["tr001"].answer == "12" and q["tr001"].probe == "temporal"
    assert q["ssa001"].evidence == ["answer_ssa001_2"]  # an assistant turn
    conv = ds.conversation("ku00")
    assert conv.sessions[1].date_time == datetime(2023, 5, 3, 18, 40)
    assert [t.dia_id for t in conv.sessions[0].turns] == [f"sharegpt_Qm3xP1a_0_{i}" for i in range(1, 5)]


def test_longmemeval_skip_rules():
    ds = load_longmemeval(LME_SAMPLE)
    reasons = {q.id: longmemeval_skip_reason(q, ds.conversation(q.conversation_id)) for q in ds.questions}
    assert reasons["ssu002_abs"].startswith("abstention")
    assert reasons["ssa001"].startswith("no user turn")
    assert {k for k, v in reasons.items() if v is None} == {
        "ku00",
        "ku01",
        "ku02",
        "ku03",
        "ku05",
        "ssu001",
        "tr001",
    }


def test_longmemeval_corpus_construction():
    conv = load_longmemeval(LME_SAMPLE).conversation("ssu001")
    session = longmemeval_corpus(conv, "session")
    assert session.ids == ["sharegpt_Qm3xP1a_0", "answer_ssu001", "noans_ssu001_b", "5f2e9c1d_2"]
    assert session.gold == {"answer_ssu001"}
    assert session.texts[1] == "My border collie Max keeps chewing shoes. How long should I walk him?"
    assert session.texts[0] == "Can you explain what a monad is? Show me one in Haskell."  # user turns only
    turn = longmemeval_corpus(conv, "turn")
    assert turn.ids == [
        "sharegpt_Qm3xP1a_0_1", "sharegpt_Qm3xP1a_0_3", "answer_ssu001_1", "noans_ssu001_3", "noans_ssu001_b_1",
        "5f2e9c1d_2_1",
    ]  # fmt: skip
    assert turn.gold == {"answer_ssu001_1"}
    assert turn.dates[2] == datetime(2023, 5, 29, 12, 30)
    with pytest.raises(ValueError):
        longmemeval_corpus(conv, "round")


def test_longmemeval_end_to_end_metrics():
    """Score an oracle and a reversed ranking on every kept question at turn and session level."""
    ds = load_longmemeval(LME_SAMPLE)
    kept = [q for q in ds.questions if longmemeval_skip_reason(q, ds.conversation(q.id)) is None]
    corpora = {q.id: longmemeval_corpus(ds.conversation(q.id), "turn") for q in kept}
    oracle = {qid: sorted(c.ids, key=lambda d: d not in c.gold) for qid, c in corpora.items()}
    gold = {qid: c.gold for qid, c in corpora.items()}
    rows, agg = retrieval_scores(oracle, gold, ks=(1, 5), session_of=strip_turn_suffix)
    assert len(rows) == 7
    assert agg["recall_all@5"] == agg["ndcg_any_lme@5"] == agg["session_recall_all@5"] == 1.0
    assert agg["recall_any@1"] == 1.0 and agg["recall_all@1"] < 1.0  # knowledge updates have 2 gold turns
    worst = {qid: list(reversed(r)) for qid, r in oracle.items()}
    _, low = retrieval_scores(worst, gold, ks=(1,), session_of=strip_turn_suffix)
    assert low["recall_any@1"] == 0.0


# Download ----------------------------------------------------------------------------------------


def test_plan_is_pinned_and_verifiable():
    for name, (_repo, commit) in dl.SOURCES.items():
        entries = dl.plan(name)
        assert entries, name
        for url, rel, sha in entries:
            assert rel.startswith(f"{name}/")
            assert url.startswith(f"{dl.RAW_BASE}/")
            assert f"/{commit}/" in url or url.startswith(f"{dl.RAW_BASE}/princeton-nlp/MQuAKE/")
            assert sha is not None and len(sha) == 64, (name, rel)
    assert dl.plan("locomo")[0][0] == (
        "https://raw.githubusercontent.com/snap-research/LoCoMo/3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376/data/locomo10.json"
    )
    lme = dl.plan("longmemeval")
    assert [e[1] for e in lme] == [
        "longmemeval/longmemeval_s_cleaned.json",
        "longmemeval/longmemeval_oracle.json",
    ]
    assert all(
        e[0].startswith("https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/")
        for e in lme
    )
    with pytest.raises(DatasetError):
        dl.plan("squad")


def test_plan_leaves_heldout_files_out_unless_asked():
    default = {rel for name in dl.SOURCES for _, rel, _ in dl.plan(name)}
    assert "realtalk/data/Chat_9_Fahim_Akib.json" not in default
    assert not any(rel.startswith("beam/chats/100K/5/") for rel in default)
    assert not any("entertain_shows" in rel for rel in default)
    assert len(dl.plan("beam")) == 32 and len(dl.plan("beam", include_heldout=True)) == 40
    assert "beam/chats/100K/15/chat.json" in {e[1] for e in dl.plan("beam", include_heldout=True)}
    assert len(dl.plan("realtalk", include_heldout=True)) == 10
    assert (
        len(dl.plan("prefeval")) == 16 * 4 + 2
        and len(dl.plan("prefeval", include_heldout=True)) == 20 * 4 + 2
    )


def test_plan_paths_are_a_layout_the_loaders_read():
    rels = {rel for name in dl.SOURCES for _, rel, _ in dl.plan(name)}
    assert {
        "locomo/data/locomo10.json",
        "realtalk/data/Chat_1_Emi_Elise.json",
        "beam/chats/100K/7/chat_trunecated.json",
        "beam/chats/100K/1/probing_questions/probing_questions.json",
        "mquake_hard/datasets/MQuAKE-hard.json",
        "mquake_hard/LICENSE",
        "meme/src/data/sw033.json",
        "prefeval/benchmark_dataset/filtered_inter_turns.json",
        "prefeval/LICENSE",
    } <= rels


@pytest.fixture
def server(tmp_path):
    """A local HTTP server over tmp_path/www; yields (base URL, folder, request log)."""
    www = tmp_path / "www"
    www.mkdir()
    log: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            log.append(self.path)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", www, log
    httpd.shutdown()
    httpd.server_close()


def _publish(www: Path, path: str, body: bytes) -> str:
    target = www / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(body)
    return hashlib.sha256(body).hexdigest()


def test_download_fetches_verifies_and_resumes(server, tmp_path, monkeypatch):
    base, www, log = server
    good = _publish(www, "org/repo/abc/data/a.json", b'{"a": 1}')
    _publish(www, "org/repo/abc/b.txt", b"licence")
    entries = [
        ("https://raw.githubusercontent.com/org/repo/abc/data/a.json", "toy/data/a.json", good),
        ("https://raw.githubusercontent.com/org/repo/abc/b.txt", "toy/b.txt", None),
    ]
    monkeypatch.setattr(dl, "plan", lambda name, include_heldout=False: entries)
    dest = tmp_path / "dest"
    seen = []
    paths = dl.download("toy", dest, mirror=base, progress=lambda url, target: seen.append(url))
    assert paths == [dest / "toy/data/a.json", dest / "toy/b.txt"]
    assert paths[0].read_bytes() == b'{"a": 1}' and seen[0] == f"{base}/org/repo/abc/data/a.json"
    # A file already present with its checksum is not fetched again.
    log.clear()
    dl.download("toy", dest, mirror=base)
    assert log == ["/org/repo/abc/b.txt"]


def test_download_rejects_a_checksum_mismatch(server, tmp_path, monkeypatch):
    base, www, _ = server
    _publish(www, "org/repo/abc/a.json", b"tampered")
    entries = [("https://raw.githubusercontent.com/org/repo/abc/a.json", "toy/a.json", "0" * 64)]
    monkeypatch.setattr(dl, "plan", lambda name, include_heldout=False: entries)
    with pytest.raises(DatasetError, match="sha256"):
        dl.download("toy", tmp_path / "dest", mirror=base)
    assert not list((tmp_path / "dest").rglob("a.json*"))  # nothing partial left behind


def test_download_reports_an_unreachable_file(server, tmp_path, monkeypatch):
    base, _, _ = server
    entries = [("https://raw.githubusercontent.com/org/repo/abc/missing.json", "toy/missing.json", None)]
    monkeypatch.setattr(dl, "plan", lambda name, include_heldout=False: entries)
    with pytest.raises(DatasetError, match="could not fetch"):
        dl.download("toy", tmp_path / "dest", mirror=base)


@pytest.mark.data
def test_download_meme_from_a_mirror_then_load(data_root, server, tmp_path):
    base, www, _ = server
    for url, _, _ in dl.plan("meme"):
        path = url.removeprefix(dl.RAW_BASE + "/")
        target = www / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_root / "meme" / Path(path).name, target)
    dest = tmp_path / "data"
    paths = dl.download("meme", dest, mirror=base)
    assert [p.relative_to(dest).as_posix() for p in paths] == [
        "meme/src/data/sw033.json",
        "meme/src/data/main_results.json",
    ]
    ds = load_meme(dest / "meme")
    assert len(ds.questions) == 10 and ds.checksums["meme/src/data/sw033.json"].startswith("e8e439bd")
