"""The live extractor: the model answers in the same claim schema the offline parser fills.

    extractor = extractor_for(llm)      # chosen once (`Memory.open`): the offline parser, or the "extract" prompt
    extractor(turn, context, cfg)       # the claims of one turn; `extractor.offline` says which reads them

The model's answer is normalised like the offline claims (canonical subjects, slots and values,
ISO dates), floored by the same rules, and a forget command is accepted only when the turn itself
holds an explicit forget request (defence in depth against a model talked into one). Each memory
keeps the sentences of the turn around the one it came from, searched beside its words
(`said_around`), as the parser's do. Items without
text are dropped; if every item is unusable the answer is refused with LLMResponseError rather
than read as "nothing found". Reconciliation is one code path for both extractors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..config import WriteConfig
from ..errors import LLMResponseError
from ..model import CATEGORIES, CONTEXT_KEY, KINDS, Candidate, Turn
from ..normalise import (
    DATE_ATTRIBUTES,
    RECORD_ID,
    canonical_attribute,
    canonical_subject,
    content_tokens,
    normalise_value,
    parse_date,
    sentences,
)
from .categories import KIND_OF
from .said import CONTEXT_SENTENCES
from .turns import allows_forget, extract_offline, finalise
from .values import marks, value_type

_NULL_STR = {"type": ["string", "null"]}
EXTRACT_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["candidates"],
    "properties": {"candidates": {"type": "array", "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["text", "kind", "category", "subject", "attribute", "value", "record_id", "references",
                     "importance", "single_valued", "negated", "old_value", "cause", "command", "pinned"],
        "properties": {
            "text": {"type": "string"},
            "kind": {"type": "string", "enum": list(KINDS)},
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "subject": _NULL_STR, "attribute": _NULL_STR, "value": _NULL_STR, "record_id": _NULL_STR,
            "references": {"type": "array", "items": {"type": "string"}},
            "importance": {"type": "number"},
            "single_valued": {"type": "boolean"},
            "negated": {"type": "boolean"},
            "old_value": _NULL_STR, "cause": _NULL_STR,
            "command": {"type": ["string", "null"], "enum": ["forget", None]},
            "pinned": {"type": "boolean"},
        },
    }}},
}


CONTEXT_CHARS = 2_000  # a context past this is cut: a turn with no sentence ends does not repeat whole per memory


def said_around(turn_text: str, text: str) -> str:
    """Return the sentences of the turn around the one a model's memory text came from (the sentence sharing
    most content words with it, `said.CONTEXT_SENTENCES` either side): what the memory is searched with, as
    the offline parser keeps it (`model.context_of`)."""
    said = sentences(turn_text)
    if not said:
        return ""
    words = content_tokens(text)
    k = max(range(len(said)), key=lambda i: len(words & content_tokens(said[i])))
    return " ".join(said[max(0, k - CONTEXT_SENTENCES):k + CONTEXT_SENTENCES + 1])[:CONTEXT_CHARS]


def from_model(item: dict, turn: Turn, cfg: WriteConfig, may_forget: bool) -> Candidate:
    """Return the claim for one item of the model's answer, normalised, checked and floored."""
    coerced = []
    category = item.get("category") if item.get("category") in CATEGORIES else "note"
    kind = item.get("kind") if item.get("kind") in KINDS else KIND_OF[category]
    if category != item.get("category") or kind != item.get("kind"):
        coerced.append("kind/category")
    attr = canonical_attribute(item.get("attribute"))
    value = normalise_value(item.get("value"))
    text = str(item["text"]).strip()
    meta: dict = {"source_text": turn.text, "extractor": "model", "marks": sorted(marks(text)),
                  "value_type": value_type(value) if value else "none", CONTEXT_KEY: said_around(turn.text, text)}
    if attr:
        meta["slot_phrase"] = (item.get("attribute") or "").lower().replace("_", " ")
    if attr in DATE_ATTRIBUTES and value:
        iso, raw = parse_date(value, turn.at)
        if iso:
            meta.update(raw_date=raw, **({"due": iso} if attr == "deadline" else {}))
            value = iso
    command = item.get("command") if item.get("command") == "forget" else None
    if command and not may_forget:
        command, meta["command_refused"] = None, "no explicit forget request in the turn"
    if command:
        old = re.search(r"\b(old|previous|former)\b", f"{text} {turn.text}", re.I)
        meta["forget"] = {"terms": [], "qualifier": old.group(1).lower() if old else None, "scope": None}
    negated = bool(item.get("negated"))
    if negated:
        meta["negated"] = True
    if coerced:
        meta["coerced"] = coerced
    rid = item.get("record_id")
    try:
        importance = float(item.get("importance", 0.5))
    except (TypeError, ValueError):
        importance, meta["coerced"] = 0.5, [*coerced, "importance"]
    c = Candidate(
        text=text, kind=kind, category=category, subject=canonical_subject(item.get("subject")),
        attribute=attr, value=value, record_id=rid.upper() if isinstance(rid, str) and RECORD_ID.fullmatch(rid) else None,
        references=tuple(str(r).upper() if RECORD_ID.fullmatch(str(r)) else str(r) for r in item.get("references") or ()),
        importance=min(1.0, max(0.0, importance)), single_valued=bool(item.get("single_valued", True)) and not negated,
        negated=negated, old_value=normalise_value(item.get("old_value")), cause=item.get("cause") or None,
        command=command, source="user", meta=meta,
    )
    return finalise(c, cfg, emphasis=False, hedge=False, pinned=bool(item.get("pinned")))


@dataclass(frozen=True)
class Extractor:
    """What reads the claims of a turn, chosen once where a memory is opened (`extractor_for`).

    `llm` is the live model that answers the "extract" prompt; None is the offline parser. The write
    path asks `offline` only to know whether there is anything to parse ahead; which extractor reads a
    turn is never decided again downstream.
    """

    llm: Any = None

    @property
    def offline(self) -> bool:
        """True when the offline parser, not a model, reads the turns."""
        return self.llm is None

    def __call__(self, turn: Turn, context: list[Turn], cfg: WriteConfig = WriteConfig()) -> list[Candidate]:
        """Return the claims in `turn`, with the turns before it as `context`."""
        if self.llm is None:
            return extract_offline(turn.text, context=context, now=turn.at, cfg=cfg, user=turn.user)
        return _live(self.llm, turn, context, cfg)


def extractor_for(llm: Any) -> Extractor:
    """Return the extractor for a model connection: the offline parser when it is offline, else the model."""
    return Extractor(None if llm.offline else llm)


def _live(llm: Any, turn: Turn, context: list[Turn], cfg: WriteConfig) -> list[Candidate]:
    """Return the claims the live model reads in `turn` through the "extract" prompt."""
    recent = context[-cfg.context_turns:] if cfg.context_turns > 0 else []
    variables = {
        "text": turn.text,
        "context": [{"id": t.id, "role": t.role, "at": t.at.isoformat(), "text": t.text} for t in recent],
        "now": turn.at.date().isoformat(),
        "identity_floor": cfg.identity_floor, "deadline_floor": cfg.deadline_floor,
        "remember_floor": cfg.remember_floor,
    }
    answer = llm.complete_json("extract", variables, EXTRACT_SCHEMA, role="extract")
    items = answer.get("candidates") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise LLMResponseError("the extraction answer has no 'candidates' list; check the 'extract' prompt")
    usable = [i for i in items if isinstance(i, dict) and isinstance(i.get("text"), str) and i["text"].strip()]
    if items and not usable:
        raise LLMResponseError(f"none of the {len(items)} extracted candidates has a text; the answer is unusable")
    may_forget = allows_forget(turn.text)
    return [from_model(i, turn, cfg, may_forget) for i in usable]
