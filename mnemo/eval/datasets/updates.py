"""Loaders for the update benchmarks: BEAM-128K (knowledge update, contradiction) and MQuAKE-hard (cascades).

Each dataset's schema, split and metric are in `$MNEMO_DATA_DIR/<name>/README.md`. Every question
carries a `probe` (see `datasets.base.PROBES`) saying what a correct memory does with it, and the
ids of the stale and current turns where the dataset names them, so update, contradiction,
deletion and abstention can be scored without an LLM.
"""

from __future__ import annotations

import json
import re
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
from mnemo.provenance import dataset_root

# BEAM ---------------------------------------------------------------------------------------

BEAM_ABILITIES = (
    "abstention",
    "contradiction_resolution",
    "event_ordering",
    "information_extraction",
    "instruction_following",
    "knowledge_update",
    "multi_session_reasoning",
    "preference_following",
    "summarization",
    "temporal_reasoning",
)
BEAM_PROBES = {
    "knowledge_update": "update",
    "contradiction_resolution": "contradiction",
    "abstention": "abstain",
    "preference_following": "preference",
    "temporal_reasoning": "temporal",
    "information_extraction": "recall",
    "multi_session_reasoning": "recall",
    "event_ordering": "other",
    "instruction_following": "other",
    "summarization": "other",
}
# The field holding the reference answer differs by ability.
_BEAM_ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")
# A generation artefact at the end of most user messages: " ->-> 1,2" (compare the `index` field).
_BEAM_MARKER = re.compile(r"\s*->->\s*[\d,\s]+$")


def _beam_chats(root: Path) -> tuple[str, list[tuple[int, Path]]]:
    """Return the layout ("shared" or "upstream") and (chat number, folder) of every chat under `root`."""
    for sub, layout in (("128k", "shared"), ("chats/100K", "upstream")):
        base = root / sub
        if base.is_dir():
            chats = [(int(p.name), p) for p in base.iterdir() if p.is_dir() and p.name.isdigit()]
            if chats:
                return layout, sorted(chats)
    raise DatasetError(
        f"beam: no chat folders under {root}/128k or {root}/chats/100K; run `mnemo data download beam`"
    )


def _beam_ids(value: Any) -> list[str]:
    """Return the message ids in a `source_chat_ids` value (an int, a list, or a dict of lists), as strings."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [i for v in value.values() for i in _beam_ids(v)]
    if isinstance(value, list):
        return [i for v in value for i in _beam_ids(v)]
    return [str(value)]


def _beam_conversation(n: int, batches: list[dict[str, Any]]) -> Conversation:
    sessions = []
    for batch in batches:
        messages = [m for group in batch["turns"] for m in group]
        # The batch-level time_anchor is always null; the first user message of the batch carries the date.
        anchor = next((m.get("time_anchor") for m in messages if m.get("time_anchor")), None)
        turns = [
            DialogTurn(
                dia_id=str(m["id"]),
                speaker=m["role"],
                text=_BEAM_MARKER.sub("", m["content"]) if m["role"] == "user" else m["content"],
                role=m["role"],
                raw_text=m["content"],
                meta={k: m[k] for k in ("index", "question_type", "time_anchor") if m.get(k)},
            )
            for m in messages
        ]
        sessions.append(Session(f"B{batch['batch_number']}", parse_when(anchor), anchor, turns))
    return Conversation(f"beam-{n}", ["user", "assistant"], sessions, {"chat": n})


def _beam_question(conv: Conversation, ability: str, i: int, item: dict[str, Any]) -> Question:
    valid = conv.turn_ids
    sources = item.get("source_chat_ids")
    extra: dict[str, Any] = {k: v for k, v in item.items() if k != "question"}
    if ability == "knowledge_update" and isinstance(sources, dict):
        extra["stale_ids"] = [i for i in _beam_ids(sources.get("original_info")) if i in valid]
        extra["current_ids"] = [i for i in _beam_ids(sources.get("updated_info")) if i in valid]
        refs = item.get("conversation_references") or []
        extra["stale_value"] = refs[0] if refs else None
    if ability == "contradiction_resolution" and isinstance(sources, dict):
        extra["first_ids"] = [i for i in _beam_ids(sources.get("first_statement")) if i in valid]
        extra["second_ids"] = [i for i in _beam_ids(sources.get("second_statement")) if i in valid]
    ids = list(dict.fromkeys(_beam_ids(sources)))
    extra["evidence_unresolved"] = [i for i in ids if i not in valid]
    answer = next((item[k] for k in _BEAM_ANSWER_KEYS if item.get(k)), None)
    return Question(
        id=f"{conv.id}/{ability}/{i}",
        conversation_id=conv.id,
        question=item["question"],
        answer=None if answer is None else str(answer),
        category=BEAM_ABILITIES.index(ability) + 1 if ability in BEAM_ABILITIES else 0,
        category_name=ability,
        evidence=[i for i in ids if i in valid],
        probe=BEAM_PROBES.get(ability, "other"),
        extra=extra,
    )


def load_beam(
    path: str | Path | None = None, *, include_heldout: bool = False, verify: bool = True
) -> Dataset:
    """Return BEAM-128K: one conversation per chat (sessions = batches, turn ids = message ids) + its probing questions.

    Reads `128k/<n>/{chat_trunecated.json|chat.json, probing_questions.json}` (this folder) or
    upstream's `chats/100K/<n>/{..., probing_questions/probing_questions.json}`, preferring the
    truncated chat as upstream's runner does. Chats with n % 5 == 0 are held out unless
    `include_heldout`. User text has the " ->-> i,j" plan marker stripped (raw_text keeps it).

    Probes: knowledge_update -> "update" (extra stale_ids / current_ids / stale_value),
    contradiction_resolution -> "contradiction" (extra first_ids / second_ids), abstention ->
    "abstain" (no evidence by design), preference_following -> "preference", temporal_reasoning ->
    "temporal", information_extraction and multi_session_reasoning -> "recall", the rest -> "other".
    """
    root = dataset_root("beam", path)
    conversations, questions, excluded, files = [], [], [], []
    layout, chats = _beam_chats(root)
    for n, folder in chats:
        if n % 5 == 0 and not include_heldout:
            excluded.append(f"beam-{n}")
            continue
        chat = first_existing(folder, ["chat_trunecated.json", "chat.json"], "beam")
        probes = first_existing(
            folder, ["probing_questions.json", "probing_questions/probing_questions.json"], "beam"
        )
        files += [chat, probes]
        conv = _beam_conversation(n, json.loads(chat.read_text(encoding="utf-8")))
        conversations.append(conv)
        for ability, items in json.loads(probes.read_text(encoding="utf-8")).items():
            questions += [_beam_question(conv, ability, i, item) for i, item in enumerate(items)]
    return Dataset(
        "beam",
        conversations,
        questions,
        heldout_excluded=excluded,
        checksums=checksum("beam", root, files, verify),
        meta={"source": "mohammadtavakoli78/BEAM@b2a3ee8ba12d68f83143dda191097dc3e028ddd3", "layout": layout},
    )


# MQuAKE-hard --------------------------------------------------------------------------------

# Held-out case ids, listed in mquake_hard/README.md (sorted by case_id, position i % 5 == 4 of 429).
MQUAKE_HELDOUT = frozenset(
    map(
        int,
        """7438 7466 7491 7502 7538 7555 7572 7608 7630 7647 7663 7684 7716 7729 7755 7775 7796 7813 7852
        7865 7878 7893 7905 7918 7934 7970 7984 7997 8008 8031 8051 8065 8076 8089 8110 8125 8144 8165 8188
        8207 8231 8249 8277 8292 8307 8323 8339 8368 8386 8406 8417 8433 8450 8484 8506 8529 8552 8568 8600
        8627 8635 8652 8670 8686 8697 8736 8771 8784 8827 8851 8874 8913 8959 8971 8993 9023 9046 9069 9085
        9120 9137 9156 9166 9187 9203""".split(),
    )
)


def _fact(dia_id: str, cloze: str, value: str) -> DialogTurn:
    text = f"{cloze} {value}."
    return DialogTurn(dia_id, "user", text, "user", text, meta={"cloze": cloze, "value": value})


def _mquake_case(case: dict[str, Any]) -> tuple[Conversation, list[Question]]:
    cid = f"mquake-{case['case_id']}"
    facts = [_fact(f"fact-{i}", h["cloze"], h["answer"]) for i, h in enumerate(case["single_hops"])]
    edits = [
        _fact(f"edit-{i}", e["prompt"].format(e["subject"]), e["target_new"]["str"])
        for i, e in enumerate(case["requested_rewrite"])
    ]
    conv = Conversation(
        cid,
        ["user"],
        [
            Session("S1", None, None, facts, {"stage": "original chain"}),
            Session("S2", None, None, edits, {"stage": "edits"}),
        ],
        {"case_id": case["case_id"]},
    )
    questions = []
    superseded: list[str] = []
    for i, (edit, turn) in enumerate(zip(case["requested_rewrite"], edits, strict=True)):
        # The stale memory is the original-chain fact with the same cloze, when the chain states it.
        stale = [f.dia_id for f in facts if f.meta["cloze"] == turn.meta["cloze"]]
        superseded += stale
        hop = case["new_single_hops"][i] if i < len(case["new_single_hops"]) else {}
        questions.append(
            Question(
                id=f"{cid}/edit-{i}",
                conversation_id=cid,
                question=edit["question"],
                answer=edit["target_new"]["str"],
                category=1,
                category_name="single-hop edit",
                evidence=[turn.dia_id],
                probe="update",
                extra={
                    "answer_alias": list(hop.get("answer_alias", [])),
                    "stale_answer": edit["target_true"]["str"],
                    "stale_sentence": f"{turn.meta['cloze']} {edit['target_true']['str']}.",
                    "stale_ids": stale,
                    "current_ids": [turn.dia_id],
                    "relation_id": edit["relation_id"],
                },
            )
        )
    # The new chain is supported by whichever turn states each new hop (an edit, or an unedited fact).
    by_statement = {(t.meta["cloze"], t.meta["value"]): t.dia_id for t in facts + edits}
    chain = [by_statement.get((h["cloze"], h["answer"])) for h in case["new_single_hops"]]
    questions.append(
        Question(
            id=f"{cid}/multi-hop",
            conversation_id=cid,
            question=case["questions"][0],
            answer=case["new_answer"],
            category=2,
            category_name="multi-hop cascade",
            evidence=[c for c in chain if c is not None],
            probe="cascade",
            extra={
                "paraphrases": list(case["questions"]),
                "answer_alias": list(case.get("new_answer_alias", [])),
                "stale_answer": case["answer"],
                "stale_answer_alias": list(case.get("answer_alias", [])),
                "stale_ids": list(dict.fromkeys(superseded)),
                "current_ids": [c for c in chain if c is not None],
            },
        )
    )
    return conv, questions


def load_mquake_hard(
    path: str | Path | None = None, *, include_heldout: bool = False, verify: bool = True
) -> Dataset:
    """Return MQuAKE-hard: per case, session S1 = the original 4-hop chain, S2 = the 4 edits, then questions.

    Reads `MQuAKE-hard_shared.json` (this folder) or upstream's `MQuAKE-hard.json` /
    `datasets/MQuAKE-hard.json`. The 85 held-out case ids of the README are left out unless
    `include_heldout`. Turns are sentences: "fact-<i>" = `cloze + " " + answer + "."`, "edit-<i>" =
    `prompt.format(subject) + " " + target_new + "."`. Give each case its own namespace: two
    (subject, relation) pairs are edited to different values in different cases.

    Questions: 4 single-hop edit questions (probe "update": answer target_new, extra stale_answer =
    target_true and stale_ids = the chain fact it supersedes) and 1 multi-hop question (probe
    "cascade": answer new_answer, extra paraphrases, stale_answer = the pre-edit answer, evidence =
    the turns stating the new chain).
    """
    root = dataset_root("mquake_hard", path)
    file = first_existing(
        root, ["MQuAKE-hard_shared.json", "MQuAKE-hard.json", "datasets/MQuAKE-hard.json"], "mquake_hard"
    )
    files = [file] + [p for p in (root / "LICENSE.MQuAKE.txt", root / "LICENSE") if p.is_file()]
    conversations, questions, excluded = [], [], []
    for case in json.loads(file.read_text(encoding="utf-8")):
        if case["case_id"] in MQUAKE_HELDOUT and not include_heldout:
            excluded.append(f"mquake-{case['case_id']}")
            continue
        conv, qs = _mquake_case(case)
        conversations.append(conv)
        questions += qs
    return Dataset(
        "mquake_hard",
        conversations,
        questions,
        heldout_excluded=excluded,
        checksums=checksum("mquake_hard", root, files, verify),
        meta={"source": "wangywUST/DeepEdit@c90b29588dec8325a6481054e63bf10baf3cff57", "file": file.name},
    )
