"""Loaders for the conversational QA benchmarks: LoCoMo-10, REALTALK and LongMemEval.

Schemas and the evidence-cleaning rules are in `$MNEMO_DATA_DIR/BENCHMARKS.md` (§1.1-1.5, §2).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from mnemo.errors import DatasetError
from mnemo.eval.datasets.base import (
    Conversation,
    Dataset,
    DialogTurn,
    Question,
    Session,
    checksum,
    first_existing,
    parse_when,
)
from mnemo.provenance import data_dir, dataset_root

# Upstream's own numbering (task_eval/evaluation.py), not the paper's order; see BENCHMARKS.md §1.1.
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
REALTALK_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "commonsense"}
_DIALOG_PROBES = {"temporal": "temporal", "adversarial": "abstain"}

# Held-out ids from the data README: never loaded unless include_heldout=True.
LOCOMO_HELDOUT = frozenset({"conv-49", "conv-50"})
REALTALK_HELDOUT_CHATS = frozenset({9, 10})

LONGMEMEVAL_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
_LONGMEMEVAL_PROBES = {
    "knowledge-update": "update",
    "temporal-reasoning": "temporal",
    "single-session-preference": "preference",
}

_SESSION_KEY = re.compile(r"session_(\d+)")
_PIECE_SPLIT = re.compile(r";|,|\s+(?=D)")
# A dia_id with a stray colon or spaces allowed: "D:11:26", "D 2:18", "D30:05".
_ID = r"D\s*:?\s*(\d+)\s*:\s*(\d+)"
_RANGE = re.compile(rf"^{_ID}\s*-\s*(?:D\s*:?\s*(\d+)\s*:\s*)?(\d+)$")
_ANY_ID = re.compile(_ID)


def clean_evidence(raw: list[str] | str | None, valid_ids: set[str]) -> list[str]:
    """Return the usable dia_ids in `raw` evidence, cleaned by the rules of BENCHMARKS.md §1.5.

    1. Split each string at ";", "," and at whitespace followed by "D".
    2. Trim each piece and drop a trailing ".".
    3. Expand a range within one session ("D12:3-D12:5", "D12:3-5") to every turn in it; of a range
       across sessions keep only the two endpoints.
    4. Otherwise take every "D<s>:<t>" in the piece, allowing a stray colon and spaces ("D:11:26" ->
       "D11:26") and leading zeros ("D30:05" -> "D30:5"); a piece with no id ("D") is unusable.
    5. Remove duplicates keeping the first occurrence, and drop ids that match no turn in `valid_ids`.
    """
    strings = [raw] if isinstance(raw, str) else list(raw or [])
    ids: list[str] = []
    for string in strings:
        for piece in _PIECE_SPLIT.split(str(string)):
            piece = piece.strip().rstrip(".").strip()
            match = _RANGE.match(piece)
            if match:
                s1, t1, s2, t2 = match.groups()
                s1_i, t1_i, t2_i = int(s1), int(t1), int(t2)
                if s2 is None or int(s2) == s1_i:
                    lo, hi = sorted((t1_i, t2_i))
                    ids.extend(f"D{s1_i}:{t}" for t in range(lo, hi + 1))
                else:
                    ids.extend([f"D{s1_i}:{t1_i}", f"D{int(s2)}:{t2_i}"])
                continue
            ids.extend(f"D{int(s)}:{int(t)}" for s, t in _ANY_ID.findall(piece))
    return [i for i in dict.fromkeys(ids) if i in valid_ids]


def _dialog_turn(raw: dict[str, Any], text_key: str) -> DialogTurn:
    """Return a LoCoMo / REALTALK turn, with an image caption rendered as upstream does."""
    utterance = str(raw.get(text_key) or "")
    caption = raw.get("blip_caption") or None
    text = f"{utterance}\n[shares {caption}]" if caption else utterance
    meta = {k: raw[k] for k in ("img_url", "query", "img_file") if raw.get(k)}
    return DialogTurn(
        dia_id=raw["dia_id"],
        speaker=raw["speaker"],
        text=text,
        role="user",
        raw_text=utterance,
        caption=caption,
        date_time=parse_when(raw.get("date_time")),
        meta=meta,
    )


def _dialog_sessions(conv: dict[str, Any], text_key: str) -> list[Session]:
    """Return the numbered sessions of a LoCoMo-format conversation, in session order."""
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    sessions = []
    for n in numbers:
        raw_date = conv.get(f"session_{n}_date_time")
        turns = [_dialog_turn(t, text_key) for t in conv[f"session_{n}"]]
        sessions.append(Session(id=f"S{n}", date_time=parse_when(raw_date), date_raw=raw_date, turns=turns))
    return sessions


def _dialog_questions(
    conv_id: str,
    qa: list[dict[str, Any]],
    valid_ids: set[str],
    categories: dict[int, str],
    require_evidence: bool,
    dropped: list[tuple[str, str]],
) -> list[Question]:
    """Return the questions of one LoCoMo-format conversation, recording the ones without usable evidence."""
    out = []
    for i, item in enumerate(qa):
        qid = f"{conv_id}/q{i}"
        evidence = clean_evidence(item.get("evidence"), valid_ids)
        if not evidence and require_evidence:
            dropped.append((qid, f"no usable evidence in {item.get('evidence')!r}"))
            continue
        category = int(item["category"])
        name = categories.get(category, f"category-{category}")
        answer = item.get("answer")
        extra = {"evidence_raw": item.get("evidence"), "index": i}
        if "adversarial_answer" in item:
            extra["adversarial_answer"] = item["adversarial_answer"]
        out.append(
            Question(
                id=qid,
                conversation_id=conv_id,
                question=item["question"],
                answer=None if answer is None else str(answer),
                category=category,
                category_name=name,
                evidence=evidence,
                probe=_DIALOG_PROBES.get(name, "recall"),
                extra=extra,
            )
        )
    return out


def load_locomo(
    path: str | Path | None = None,
    *,
    include_heldout: bool = False,
    require_evidence: bool = True,
    verify: bool = True,
) -> Dataset:
    """Return LoCoMo-10: conversations (sessions "S<N>", turns "D<N>:<i>") and their QA.

    Reads `locomo10_shared_8conv.json` (this folder) or upstream's `locomo10.json` /
    `data/locomo10.json` under `path` (default `$MNEMO_DATA_DIR/locomo`). Held-out conversations
    (conv-49, conv-50) are left out unless `include_heldout`. Questions whose evidence is unusable
    after `clean_evidence` are dropped (and listed in `dropped`) unless `require_evidence=False`.
    Category 5 (adversarial) questions have probe "abstain" and usually answer None.
    """
    root = dataset_root("locomo", path)
    file = first_existing(
        root, ["locomo10_shared_8conv.json", "locomo10.json", "data/locomo10.json"], "locomo"
    )
    checksums = checksum("locomo", root, [file], verify)
    conversations, questions, dropped, excluded = [], [], [], []
    for raw in json.loads(file.read_text(encoding="utf-8")):
        conv_id = raw["sample_id"]
        if conv_id in LOCOMO_HELDOUT and not include_heldout:
            excluded.append(conv_id)
            continue
        c = raw["conversation"]
        meta = {k: raw[k] for k in ("observation", "session_summary", "event_summary") if k in raw}
        conv = Conversation(conv_id, [c["speaker_a"], c["speaker_b"]], _dialog_sessions(c, "text"), meta)
        conversations.append(conv)
        questions += _dialog_questions(
            conv_id, raw["qa"], conv.turn_ids, LOCOMO_CATEGORIES, require_evidence, dropped
        )
    return Dataset(
        "locomo",
        conversations,
        questions,
        dropped,
        excluded,
        checksums,
        {"source": "snap-research/LoCoMo@3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376", "file": file.name},
    )


def _realtalk_chat_number(file: Path) -> int:
    match = re.match(r"Chat_(\d+)_", file.name)
    if not match:
        raise DatasetError(f"realtalk: unexpected file name {file.name}; expected Chat_<n>_<A>_<B>.json")
    return int(match.group(1))


def load_realtalk(
    path: str | Path | None = None,
    *,
    include_heldout: bool = False,
    require_evidence: bool = True,
    verify: bool = True,
) -> Dataset:
    """Return REALTALK: one conversation per `Chat_<n>_<A>_<B>.json`, text from `clean_text`.

    Reads `realtalk/Chat_*.json` (this folder) or upstream's `realtalk/data/Chat_*.json`. Chats 9
    and 10 are held out unless `include_heldout`. Evidence is cleaned as for LoCoMo; questions left
    without usable evidence are dropped and listed in `dropped`.
    """
    root = dataset_root("realtalk", path)
    files = sorted(root.glob("Chat_*.json")) or sorted((root / "data").glob("Chat_*.json"))
    if not files:
        raise DatasetError(
            f"realtalk: no Chat_*.json under {root} or {root / 'data'}; run `mnemo data download realtalk`"
        )
    files.sort(key=_realtalk_chat_number)
    excluded = [
        f.stem for f in files if _realtalk_chat_number(f) in REALTALK_HELDOUT_CHATS and not include_heldout
    ]
    files = [f for f in files if f.stem not in excluded]
    checksums = checksum("realtalk", root, files, verify)
    conversations, questions, dropped = [], [], []
    for file in files:
        raw = json.loads(file.read_text(encoding="utf-8"))
        names = raw.get("name", {})
        meta = {k: v for k, v in raw.items() if k.startswith("events_session_")}
        conv = Conversation(
            file.stem,
            [names.get("speaker_1", ""), names.get("speaker_2", "")],
            _dialog_sessions(raw, "clean_text"),
            meta,
        )
        conversations.append(conv)
        questions += _dialog_questions(
            conv.id, raw["qa"], conv.turn_ids, REALTALK_CATEGORIES, require_evidence, dropped
        )
    return Dataset(
        "realtalk",
        conversations,
        questions,
        dropped,
        excluded,
        checksums,
        {"source": "danny911kr/REALTALK@b903e06a9770bf4e5fe9018c3e132889666d3b4a"},
    )


# LongMemEval ----------------------------------------------------------------------------------


def _lme_stratum(item: dict[str, Any]) -> str:
    return item["question_type"] + ("/abs" if item["question_id"].endswith("_abs") else "")


def longmemeval_heldout(items: Iterable[dict[str, Any]]) -> set[str]:
    """Return the held-out question ids: per stratum (type, +"/abs"), sorted by id, every 5th (i % 5 == 4)."""
    by_stratum: dict[str, list[str]] = {}
    for item in items:
        by_stratum.setdefault(_lme_stratum(item), []).append(item["question_id"])
    return {qid for ids in by_stratum.values() for i, qid in enumerate(sorted(ids)) if i % 5 == 4}


def load_longmemeval(
    path: str | Path | None = None, *, include_heldout: bool = False, variant: str = "s"
) -> Dataset:
    """Return a LongMemEval file: one conversation (its haystack) per question, turn ids "<session>_<i+1>".

    `path` is the JSON file (`longmemeval_s_cleaned.json`, `_m_cleaned`, `longmemeval_oracle.json`
    or a sample in the same format); by default `$MNEMO_DATA_DIR/longmemeval/longmemeval_<variant>_cleaned.json`.
    The held-out rule of the data README (every 5th question per stratum) is applied to the file's
    questions unless `include_heldout`. Evidence is every turn with has_answer true; the
    session-level gold is in extra["answer_session_ids"]. `_abs` questions have probe "abstain".
    """
    if path is None:
        file = data_dir() / "longmemeval" / f"longmemeval_{variant}_cleaned.json"
        if variant == "oracle":
            file = file.with_name("longmemeval_oracle.json")
    else:
        file = Path(path).expanduser()
    if not file.is_file():
        raise DatasetError(
            f"longmemeval: {file} not found; run `mnemo data download longmemeval` or pass its path"
        )
    items = json.loads(file.read_text(encoding="utf-8"))
    heldout = longmemeval_heldout(items) if not include_heldout else set()
    checksums = checksum("longmemeval", file.parent, [file], verify=False)
    conversations, questions = [], []
    for item in items:
        qid = item["question_id"]
        if qid in heldout:
            continue
        sessions = []
        for sid, date, turns in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
        ):
            dialog = [
                DialogTurn(
                    dia_id=f"{sid}_{i + 1}",
                    speaker=t["role"],
                    text=t["content"],
                    role=t["role"],
                    raw_text=t["content"],
                    meta={"has_answer": bool(t.get("has_answer", False))},
                )
                for i, t in enumerate(turns)
            ]
            sessions.append(Session(sid, parse_when(date), date, dialog))
        conversations.append(Conversation(qid, ["user", "assistant"], sessions))
        qtype = item["question_type"]
        abstain = qid.endswith("_abs")
        questions.append(
            Question(
                id=qid,
                conversation_id=qid,
                question=item["question"],
                answer=str(item["answer"]),
                category=LONGMEMEVAL_TYPES.index(qtype) + 1 if qtype in LONGMEMEVAL_TYPES else 0,
                category_name=qtype,
                evidence=[t.dia_id for s in sessions for t in s.turns if t.meta["has_answer"]],
                probe="abstain" if abstain else _LONGMEMEVAL_PROBES.get(qtype, "recall"),
                extra={
                    "question_type": qtype,
                    "abstention": abstain,
                    "answer_session_ids": list(item.get("answer_session_ids", [])),
                    "question_date": item.get("question_date"),
                    "question_time": parse_when(item.get("question_date")),
                },
            )
        )
    return Dataset(
        "longmemeval",
        conversations,
        questions,
        heldout_excluded=sorted(heldout),
        checksums=checksums,
        meta={"source": "xiaowu0162/longmemeval-cleaned (HuggingFace)", "file": file.name},
    )


@dataclass(frozen=True)
class Corpus:
    """One question's retrieval corpus, built the LongMemEval way (BENCHMARKS.md §2)."""

    ids: list[str]  # document ids; gold ones contain "answer", non-gold evidence-session ids say "noans"
    texts: list[str]
    dates: list[datetime | None]
    gold: set[str]  # every id containing "answer"


def longmemeval_corpus(conversation: Conversation, granularity: str = "session") -> Corpus:
    """Return the per-question corpus of `conversation` at "session" or "turn" granularity, as upstream builds it.

    Session: one document per session, the contents of its user turns joined by a space, id = the
    session id; an `answer_*` session none of whose user turns has has_answer is renamed `noans_*`.
    Turn: one document per user turn, id "<session>_<i+1>" with i counting assistant turns too; in an
    `answer_*` session a user turn without has_answer is renamed `noans_*`. Assistant text is never indexed.
    """
    if granularity not in ("session", "turn"):
        raise ValueError(f"granularity must be 'session' or 'turn', not {granularity!r}")
    ids: list[str] = []
    texts: list[str] = []
    dates: list[datetime | None] = []
    for session in conversation.sessions:
        users = [t for t in session.turns if t.role == "user"]
        if granularity == "session":
            sid = session.id
            if "answer" in sid and not any(t.meta.get("has_answer") for t in users):
                sid = sid.replace("answer", "noans")
            ids.append(sid)
            texts.append(" ".join(t.text for t in users))
            dates.append(session.date_time)
            continue
        for turn in users:
            tid = turn.dia_id
            if "answer" in session.id and not turn.meta.get("has_answer"):
                tid = tid.replace("answer", "noans")
            ids.append(tid)
            texts.append(turn.text)
            dates.append(session.date_time)
    return Corpus(ids, texts, dates, {i for i in ids if "answer" in i})


def longmemeval_skip_reason(question: Question, conversation: Conversation) -> str | None:
    """Return why LongMemEval's retrieval evaluation skips `question` (§2.2), or None to keep it."""
    if question.id.endswith("_abs"):
        return "abstention question (_abs)"
    if not any(t.role == "user" and t.meta.get("has_answer") for t in conversation.turns):
        return "no user turn has has_answer (evidence only in assistant turns)"
    return None
