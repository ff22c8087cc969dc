"""Grounded answers from a recall pack: the model (live) or an extractive answer (offline).

An answer never goes beyond the pack: with confidence "unknown" it abstains
("not in the record") without asking a model; when the pack carries history
(a memory that corrected an older one), the answer states the current value
and names the correction instead of repeating the stale belief.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .model import Recall
from .recall import NOT_IN_RECORD

if TYPE_CHECKING:
    from .llm import LLM

_CITED = re.compile(r"\b[me]-[0-9a-f]{16}(?:-[0-9a-f]{8})?\b")  # ids made now, and the shorter ones of older stores


@dataclass(frozen=True)
class Answer:
    """A grounded answer with the memory ids it cites and the recall it came from."""

    text: str
    cited: list[str]
    confidence: str
    abstained: bool
    recall: Recall
    answered_by: str  # "offline-extractive-v1" or the model client
    provenance: dict[str, Any] = field(default_factory=dict)


def answer(llm: LLM, recall: Recall) -> Answer:
    """Return the answer to `recall.query` grounded in its packed memories."""
    if recall.confidence == "unknown" or not recall.memories:
        return Answer(NOT_IN_RECORD, [], recall.confidence, True, recall, "abstention",
                      {"llm": llm.provenance()})
    if llm.offline:
        return _extractive(recall, llm)
    memories = [{"id": p.id, "text": p.text, "kind": p.kind, "status": "current"} for p in recall.memories]
    memories += [{"id": p.id, "text": p.text, "status": "not current", "note": p.note or ""} for p in recall.history]
    text = llm.complete_text("answer", {"question": recall.query, "memories": memories}, role="answer").strip()
    packed = {p.id for p in recall.memories} | {p.id for p in recall.history}
    # A citation the pack does not contain is dropped: the model may not invent provenance.
    cited = [c for c in dict.fromkeys(_CITED.findall(text)) if c in packed]
    abstained = text.lower().strip(" .") == NOT_IN_RECORD
    return Answer(text, cited, recall.confidence, abstained, recall, llm.mode, {"llm": llm.provenance()})


def _extractive(recall: Recall, llm: LLM) -> Answer:
    """Answer offline with the best packed memory, and the correction that replaced an older one."""
    best = recall.memories[0]
    parts = [f"{best.text} [{best.id}]"]
    cited = [best.id]
    for note in recall.history:
        if note.note:
            parts.append(f"Note: {note.note} [{note.id}]")
            cited.append(note.id)
    hedge = "" if recall.confidence == "certain" else "Possibly: "
    return Answer(hedge + " ".join(parts), cited, recall.confidence, False, recall, "offline-extractive-v1",
                  {"llm": llm.provenance()})
