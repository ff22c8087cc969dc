"""Loaders for scripted episodes: the MEME episode (deletion, cascade, absence) and PrefEval (preferences).

Each dataset's schema, split and metric are in `$MNEMO_DATA_DIR/<name>/README.md`. Both script a
conversation session by session and then probe it, so each question says after which session it
is asked and what a correct memory must (or must not) say.
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

# MEME ---------------------------------------------------------------------------------------

# After the change-and-delete session, what each task checks; before it, every probe is plain recall.
MEME_PROBES_AFTER = {
    "ER": "recall",
    "Agg": "recall",
    "Tr": "tracking",
    "Del": "deletion",
    "Cas": "cascade",
    "Abs": "abstain",
}


def _meme_tag(task_type: str, tag_map: dict[str, str]) -> str:
    if task_type in tag_map:
        return tag_map[task_type]
    # "Deletion (before delete)" and "Exact (exact recall)" are not in the page's tag map.
    head = task_type.split(" (")[0]
    return tag_map.get(head, head)


def load_meme(path: str | Path | None = None, *, verify: bool = True) -> Dataset:
    """Return the one published MEME episode (sw_033): 17 sessions and 10 probe questions (4 before, 6 after).

    Reads `sw033.json` (this folder) or upstream's `src/data/sw033.json`. Nothing is held out (one
    episode): use it for unit-level checks, never as a benchmark score. Turn ids are "S<idx>:<j>",
    j being the 0-based position in the session (what gold_facts' `conveyed_in_turn` uses).

    Before-questions (asked after session 13) all probe "recall". After-questions (asked after
    session 16): Deletion -> "deletion" (must not reveal the value), Cascade-D -> "cascade" (answer
    the pre-declared new value), Cascade-U -> "abstain" (uncertain: its root changed and no new
    value was given), Multiple-update -> "tracking", Exact and Multi-hop -> "recall". extra["pair"]
    names the matching question of the other phase (a Del/Cas/Abs pass is "real" only if its
    before-question passed); extra["systems"] holds the 7 evaluated systems' answers and verdicts.
    """
    root = dataset_root("meme", path)
    file = first_existing(root, ["sw033.json", "src/data/sw033.json"], "meme")
    files = [file] + [p for p in (file.parent / "main_results.json",) if p.is_file()]
    raw = json.loads(file.read_text(encoding="utf-8"))
    episode = raw["episode"]
    sessions, facts = [], []
    for s in raw["sessions"]:
        idx = s["idx"]
        turns = [
            DialogTurn(f"S{idx}:{j}", m["role"], m["content"], m["role"], m["content"])
            for j, m in enumerate(s["conversation"])
        ]
        meta = {
            "kind": s["kind"],
            "evidence_type": s.get("evidence_type"),
            "gold_facts": s.get("gold_facts") or [],
        }
        sessions.append(Session(f"S{idx}", parse_when(s["timestamp"]), s["timestamp"], turns, meta))
        facts += [(f"S{idx}:{g['conveyed_in_turn']}", g) for g in s.get("gold_facts") or []]
    conv_id = episode["tag"]
    conv = Conversation(conv_id, ["user", "assistant"], sessions, {"episode": episode})

    def evidence(phase_tag: str, values: dict[str, Any], ask_after: int) -> list[str]:
        # The turns stating the expected value, said no later than the probe; for a cascade or absence
        # probe also the statements of the root fact (the team lead) it depends on.
        wanted = {(e, str(v)) for e, vs in values.items() for v in (vs if isinstance(vs, list) else [vs])}
        out = []
        for dia_id, g in facts:
            if int(dia_id[1:].split(":")[0]) > ask_after:
                continue
            if (g["entity"], str(g["value"])) in wanted or (
                phase_tag in ("Cas", "Abs") and g["entity"] == episode["root"]
            ):
                out.append(dia_id)
        return out

    tag_map = raw.get("taskTagMap", {})
    order = raw.get("taskOrder", list(MEME_PROBES_AFTER))
    systems = raw["results"]
    reference = systems[next(iter(systems))]
    questions = []
    for phase, ask_after in (("before", episode["probe_before_idx"]), ("after", episode["probe_after_idx"])):
        for j, item in enumerate(reference[phase]):
            tag = _meme_tag(item["task_type"], tag_map)
            entities = item.get("entity") or []
            other = "after" if phase == "before" else "before"
            pairs = [k for k, o in enumerate(reference[other]) if o["question"] == item["question"]]
            extra = {
                "phase": phase,
                "tag": tag,
                "ask_after_session": ask_after,
                "entity": entities,
                "entity_values": item.get("entity_values", {}),
                "pair": f"{conv_id}/{other}/{pairs[0]}" if pairs else None,
                "systems": {
                    name: {"answer": r[phase][j].get("agent_answer"), "pass": r[phase][j].get("u_pass")}
                    for name, r in systems.items()
                },
            }
            if phase == "after" and tag in ("Del", "Cas", "Abs") and pairs:
                # What must no longer be asserted as current: the deleted value, or the pre-change value.
                extra["stale_value"] = str(reference["before"][pairs[0]]["gold_answer"])
            questions.append(
                Question(
                    id=f"{conv_id}/{phase}/{j}",
                    conversation_id=conv_id,
                    question=item["question"],
                    answer=str(item["gold_answer"]),
                    category=order.index(tag) + 1 if tag in order else 0,
                    category_name=item["task_type"],
                    evidence=evidence(tag, item.get("entity_values", {}), ask_after),
                    probe=MEME_PROBES_AFTER.get(tag, "other") if phase == "after" else "recall",
                    extra=extra,
                )
            )
    return Dataset(
        "meme",
        [conv],
        questions,
        checksums=checksum("meme", root, files, verify),
        meta={
            "source": "SeokwonJung-Jay/meme-eval@66731b1ab2ae063dbd61d1bf93d966520bc2f2ea",
            "file": file.name,
        },
    )


# PrefEval -----------------------------------------------------------------------------------

# All 20 topics, sorted: a topic's category is its 1-based position here, held-out topics included.
PREFEVAL_TOPICS = (
    "education_learning_styles",
    "education_resources",
    "entertain_games",
    "entertain_music_book",
    "entertain_shows",
    "entertain_sports",
    "lifestyle_beauty",
    "lifestyle_dietary",
    "lifestyle_fit",
    "lifestyle_health",
    "pet_ownership",
    "professional_work_location_style",
    "shop_fashion",
    "shop_home",
    "shop_motors",
    "shop_technology",
    "travel_activities",
    "travel_hotel",
    "travel_restaurant",
    "travel_transportation",
)
PREFEVAL_HELDOUT = frozenset(t for i, t in enumerate(PREFEVAL_TOPICS) if i % 5 == 4)
PREFEVAL_FORMS = {
    "explicit": "explicit_preference",
    "choice": "implicit_preference/choice-based",
    "persona": "implicit_preference/persona-driven",
}


def _prefeval_preference_turns(form: str, item: dict[str, Any]) -> list[DialogTurn]:
    """Return the turns that convey the preference, in the form's presentation."""
    if form == "explicit":
        messages = [("user", item["preference"])]
    elif form == "choice":
        c = item["conversation"]
        messages = [
            ("user", c["query"]),
            ("assistant", c["assistant_options"]),
            ("user", c["user_selection"]),
            ("assistant", c["assistant_acknowledgment"]),
        ]
    else:
        conv = item["conversation"]
        messages = []
        for key in sorted(conv, key=lambda k: int(re.sub(r"\D", "", k) or 0)):
            messages += [("user", conv[key]["user"]), ("assistant", conv[key]["assistant"])]
    return [DialogTurn(f"P{j + 1}", role, text, role, text) for j, (role, text) in enumerate(messages)]


def prefeval_distractors(pool: list[dict[str, Any]], inter_turns: int) -> list[DialogTurn]:
    """Return the first `inter_turns` user/assistant pairs of the concatenated distractor pool, as upstream inserts them."""
    messages = [m for conv in pool for m in conv["conversation"]][: 2 * inter_turns]
    if len(messages) < 2 * inter_turns or (messages and messages[-1]["role"] != "assistant"):
        raise DatasetError(
            f"prefeval: cannot take {inter_turns} distractor pairs from the pool of {len(messages)} messages"
        )
    return [
        DialogTurn(f"I{j + 1}", m["role"], m["content"], m["role"], m["content"])
        for j, m in enumerate(messages)
    ]


def load_prefeval(
    path: str | Path | None = None,
    *,
    form: str = "explicit",
    inter_turns: int = 0,
    include_heldout: bool = False,
    verify: bool = True,
) -> Dataset:
    """Return PrefEval in one presentation: per item, a preference session, N distractor pairs, then the question.

    `form` is "explicit" (one user turn states it), "choice" (the user picks among options) or
    "persona" (mentioned in passing in a 3-7 turn chat). Session S1 holds the preference turns
    ("P<j>"), session S2 the first `inter_turns` user/assistant pairs of `filtered_inter_turns.json`
    ("I<j>"), as upstream's `--inter_turns N`. Reads `prefeval/` (this folder) or upstream's
    `prefeval/benchmark_dataset/`. Held-out topics (entertain_shows, lifestyle_health, shop_motors,
    travel_transportation) are left out unless `include_heldout`.

    Every question probes "preference": there is no gold answer (answer None); evidence is the
    user turns of S1; extra holds the preference, the explanation and the 4 MCQ options (the first
    one follows the preference). PrefEval has no changing preference, no deletion and no abstention.
    """
    if form not in PREFEVAL_FORMS:
        raise ValueError(f"form must be one of {sorted(PREFEVAL_FORMS)}, not {form!r}")
    if inter_turns < 0:
        raise ValueError("inter_turns must be >= 0")
    root = dataset_root("prefeval", path)
    base = root if (root / "explicit_preference").is_dir() else root / "benchmark_dataset"
    pool_file = first_existing(base, ["filtered_inter_turns.json"], "prefeval")
    distractors = prefeval_distractors(json.loads(pool_file.read_text(encoding="utf-8")), inter_turns)
    files = [pool_file]
    conversations, questions, excluded = [], [], []
    for category, topic in enumerate(PREFEVAL_TOPICS, start=1):
        file = base / PREFEVAL_FORMS[form] / f"{topic}.json"
        if topic in PREFEVAL_HELDOUT and (not include_heldout or not file.is_file()):
            # Held-out topics are absent from the shared copy; a download from upstream brings them.
            if file.is_file():
                excluded.append(topic)
            continue
        if not file.is_file():
            raise DatasetError(f"prefeval: {file} is missing; run `mnemo data download prefeval`")
        mcq_file = base / "mcq_options" / f"{topic}.json"
        mcq = json.loads(mcq_file.read_text(encoding="utf-8")) if mcq_file.is_file() else []
        files += [file] + ([mcq_file] if mcq else [])
        for i, item in enumerate(json.loads(file.read_text(encoding="utf-8"))):
            cid = f"prefeval/{form}/{topic}/{i}"
            pref = _prefeval_preference_turns(form, item)
            sessions = [Session("S1", None, None, pref, {"stage": "preference"})]
            if distractors:
                sessions.append(Session("S2", None, None, distractors, {"stage": "distractors"}))
            conversations.append(Conversation(cid, ["user", "assistant"], sessions, {"topic": topic}))
            extra = {k: v for k, v in item.items() if k not in ("question", "conversation")}
            extra.update(form=form, topic=topic, inter_turns=inter_turns)
            if i < len(mcq):
                extra["mcq_options"] = mcq[i].get("classification_task_options", [])
            questions.append(
                Question(
                    id=cid,
                    conversation_id=cid,
                    question=item["question"],
                    answer=None,
                    category=category,
                    category_name=topic,
                    evidence=[t.dia_id for t in pref if t.role == "user"],
                    probe="preference",
                    extra=extra,
                )
            )
    files += [p for p in (root / "LICENSE.txt", root / "LICENSE") if p.is_file()]
    return Dataset(
        "prefeval",
        conversations,
        questions,
        heldout_excluded=excluded,
        checksums=checksum("prefeval", root, files, verify),
        meta={"source": "amazon-science/PrefEval@50795054b5ff5f418d2b768a331d71e480f93331", "form": form},
    )
