"""Judges: whether a new claim contradicts a stored memory, asked only where structure cannot decide.

    offline_judge(candidate, memory)    # {"contradicts", "score", "why", "judge"} from claims and cues
    model_judge(llm)                    # the same question to the live model ("judge" prompt), failing closed

Reconciliation asks a judge only inside the arbitration band (see `mnemo.reconcile`); a judge
error retires nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import match
from .errors import LLMResponseError
from .model import Candidate, MemoryRecord
from .normalise import content_tokens, overlap, same_value

Judge = Callable[[Candidate, MemoryRecord], dict]
NEVER_RETIRED = frozenset({"failure", "lesson"})
# Value types a change can replace by type alone ("their balance is down to 425 GBP").
TYPED = frozenset({"money", "date", "time", "duration", "number", "version", "percent", "quantity"})


def value_kind(item: Candidate | MemoryRecord) -> str | None:
    """Return a claim's value type: recorded at extraction, else read from the value's shape."""
    if item.meta.get("value_type"):
        return str(item.meta["value_type"])
    if not item.value:
        return None
    from .extract.values import value_type

    return value_type(item.value)


OFFLINE_JUDGE = "offline-claims-v2"


CHANGE_CUE = ("now", "no longer", "anymore", "any more", "instead", "switched", "changed", "moved", "actually",
               "correction", "updated", "not anymore", "from now on", "these days")


NEGATION_CUE = ("not", "no longer", "n't", "never", "anymore")


def offline_judge(candidate: Candidate, memory: MemoryRecord) -> dict:
    """Return the offline verdict on whether `candidate` contradicts `memory`, from their claims and cues.

    {"contradicts": bool, "score": float in [0, 1], "why": str, "judge": "offline-claims-v2"}.
    """
    def verdict(score: float, why: str) -> dict:
        return {"contradicts": score >= 0.5, "score": round(score, 3), "why": why, "judge": OFFLINE_JUDGE}

    if candidate.subject and memory.subject and match.entity_match(candidate.subject, memory.subject) is None \
            and not (match.soft(candidate) and match.soft(memory)):
        return verdict(0.0, "different entities")
    if memory.category in NEVER_RETIRED or candidate.category in NEVER_RETIRED:
        return verdict(0.0, "failures and lessons are never superseded")
    said = str(candidate.meta.get("source_text") or candidate.text).lower()
    cue = bool(candidate.meta.get("change_cue")) or any(f" {w} " in f" {said} " for w in CHANGE_CUE)
    if candidate.old_value and match.holds(candidate.old_value, memory.value, memory.text):
        return verdict(0.95, f"states that {candidate.old_value!r} was replaced")
    if match.negated(candidate) != match.negated(memory) and (
            match.holds(candidate.value, memory.value) or overlap(candidate.text, memory.text) >= 0.5):
        return verdict(0.9, "opposite polarity about the same thing")
    slot = match.slot_match(candidate.attribute, memory.attribute)
    if slot and candidate.value and memory.value:
        if same_value(candidate.value, memory.value):
            return verdict(0.0, "same value")
        if candidate.single_valued and memory.single_valued:
            return verdict(0.85, f"single-valued {candidate.attribute}: {memory.value!r} -> {candidate.value!r}")
        return verdict(0.1, f"multi-valued {candidate.attribute}: both can hold")
    kind = value_kind(candidate)
    if cue and kind in TYPED and kind == value_kind(memory) and candidate.value and not same_value(
            candidate.value, memory.value):
        return verdict(0.7, f"a change of {kind}: {memory.value!r} -> {candidate.value!r}")
    a, b = content_tokens(candidate.text), content_tokens(memory.text)
    only_a, only_b = a - b, b - a
    same_entity = match.entity_match(candidate.subject, memory.subject) == "same"
    if same_entity and only_a and only_b and all(any(ch.isdigit() for ch in w) for w in only_a | only_b):
        # "The office closes at 7pm" after "... at 6pm": one statement of one entity, another number.
        return verdict(0.7, f"same statement with different numbers: {sorted(only_b)} -> {sorted(only_a)}")
    neg_a = any(f" {w} " in f" {said} " or w in said.split() for w in NEGATION_CUE)
    neg_b = any(f" {w} " in f" {memory.text.lower()} " for w in NEGATION_CUE)
    shared = len(a & b) / max(1, len(a | b))
    if neg_a != neg_b and shared >= 0.5:
        return verdict(0.75, "one says not, the other says so")
    if cue and shared >= 0.3 and only_a:
        return verdict(0.6, f"change cue with new content {sorted(only_a)[:4]}")
    return verdict(0.1 + (0.2 if cue else 0.0), "no contradiction cue")


JUDGE_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["contradicts", "score", "why"],
    "properties": {"contradicts": {"type": "boolean"}, "score": {"type": "number"}, "why": {"type": "string"}},
}


def record_view(item: Candidate | MemoryRecord, name: str) -> dict[str, Any]:
    """Return the framed-data view of a candidate or memory for the judge prompt."""
    fields = {"id": getattr(item, "id", name), "text": item.text, "subject": item.subject,
              "attribute": item.attribute, "value": item.value, "category": item.category,
              "negated": match.negated(item)}
    return {k: v for k, v in fields.items() if v is not None}


def model_judge(llm) -> Judge:
    """Return a judge that asks the live model (prompt "judge", role "judge"), failing closed on a bad answer.

    An unusable answer (LLMResponseError, or a verdict of the wrong shape) gives
    {"contradicts": False, "score": 0.0, "why": "judge error: ...", "judge": ..., "error": True},
    so the plan retires nothing and adds the candidate as novel. A missing model
    (LLMUnavailable, CassetteMiss) is not an answer and propagates: it must stay loud.
    """
    models = getattr(llm, "models", None)
    name = f"model:{models['judge']}" if isinstance(models, dict) and models.get("judge") else \
        f"model:{type(llm).__name__}"

    def judge(candidate: Candidate, memory: MemoryRecord) -> dict:
        try:
            answer = llm.complete_json("judge", {"candidate": record_view(candidate, "candidate"),
                                                 "memory": record_view(memory, "memory")}, JUDGE_SCHEMA, role="judge")
            contradicts, score, why = answer["contradicts"], float(answer["score"]), str(answer["why"])
            if not isinstance(contradicts, bool) or not 0.0 <= score <= 1.0:
                raise ValueError(f"contradicts={contradicts!r}, score={score!r}")
        except (LLMResponseError, KeyError, TypeError, ValueError) as exc:
            return {"contradicts": False, "score": 0.0, "why": f"judge error: {exc}", "judge": name, "error": True}
        return {"contradicts": contradicts, "score": round(score, 3), "why": why, "judge": name}

    return judge
