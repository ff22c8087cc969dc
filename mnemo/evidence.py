"""Evidence from claims: whether a memory answers what a question asks, not only shares its words.

    fit(q, memory, aliases)      # "answers" | "entity" | "other" | "conflict"
    verdict(q, fits, evidence)   # "certain" | "vague" | "unknown", with the reason

A memory *answers* a question when it is about the entity the question asks about (the same key,
an alias, or a stored name for it: "Ferris" for "the user's mechanic") and holds the slot asked
for (aligned as in reconciliation, or of the same family: `assets/words/slot_families.tsv`), or,
when the question asks through a type ("when", "how much"), a value of that type. A memory about
another entity named by a number or an identifier ("flat 2" when the question asks about
"flat 5") *conflicts*: it must not be ranked as if it answered.

The verdict comes from that evidence first: an answering memory in the pack is "certain"; a
question about a particular entity (owned, named or numbered: "the user's mother", "flat 5")
that no packed memory is about, or naming a thing no packed memory mentions ("room 216",
"Calloway Partners"), is "unknown" whatever the word overlap; a request for a task ("can you
recommend ...") is "vague" on half the evidence a question needs, since what the user prefers
bears on it; the rest falls back to the calibrated score thresholds (dense cosine and query
coverage).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from . import lexicon, match
from .model import MemoryRecord

FITS = ("answers", "entity", "other", "conflict")
# What each fit adds to a candidate's ranking score (times RecallConfig.weight_claim).
FIT_SCORE = {"answers": 1.0, "entity": 0.3, "other": 0.0, "conflict": -1.0}
# Value types a question word accepts: "when" is answered by a date, a time or a duration.
_COMPATIBLE = {"date": {"date", "time"}, "place": {"place", "name", "org"}, "name": {"name", "org", "group"},
               "money": {"money", "number"}, "number": {"number", "quantity", "money"}, "duration": {"duration"}}
_WORD = re.compile(r"[\w@.+-]+")


def _words(text: str) -> set[str]:
    return {w.lower().removesuffix("'s").strip(".") for w in _WORD.findall(text or "")}


def aliases(memories: Sequence[MemoryRecord]) -> dict[str, str]:
    """Return {name key: entity key} from stored name claims ("ferris" -> "user's mechanic")."""
    return {match.key(m.value) or "": match.key(m.subject) or "" for m in memories
            if m.attribute in ("name", "preferred_name") and m.value and m.subject not in (None, "user", "team")}


def about(q_subject: str | None, m: MemoryRecord, names: Mapping[str, str]) -> bool:
    """Return True when memory `m` is about the entity `q_subject` (key, alias, stored name, or mention)."""
    if not q_subject:
        return True
    if match.entity_match(q_subject, m.subject):
        return True
    named = names.get(match.key(m.subject) or "")
    if named and match.entity_match(q_subject, named):
        return True
    if q_subject in ("user", "team"):
        return False
    owner, _, group = q_subject.rpartition("'s ")
    if owner and group in lexicon.words("collective_nouns") and m.subject and (
            m.subject == owner or m.subject.startswith(f"{owner}'s ")):
        # "the user's family" covers "the user's daughter".
        return True
    # Mentioned in the text: every word of the entity's own name ("mother-in-law" is one word).
    thing = q_subject.rsplit("'s ", 1)[-1]
    owner = q_subject.rsplit("'s ", 1)[0] if "'s " in q_subject else None
    words = _words(m.text)
    owned = owner is None or owner in ("user", "team") or owner in words
    return owned and bool(_words(thing)) and _words(thing) <= words


def fit(q, m: MemoryRecord, names: Mapping[str, str]) -> str:
    """Return how memory `m` stands to question `q` (an `extract.questions.Ask`): see the module docstring.

    A question of several parts takes the best fit over its parts.
    """
    found = [_fit(part, m, names) for part in q.each()]
    return min(found, key=lambda f: ("answers", "entity", "other", "conflict").index(f))


def _fit(q, m: MemoryRecord, names: Mapping[str, str]) -> str:
    # "the country of citizenship of Narendra Modi": a memory naming the person the subject hangs on is about it.
    named = any(n in (q.subject or "") and _words(n) <= _words(m.text) for n in q.names)
    if not (about(q.subject, m, names) or named):
        if q.hard and m.subject and match.hard(m.subject) and match.entity_match(q.subject, m.subject) is None \
                and _words(q.subject) & _words(m.subject):
            return "conflict"
        return "other"
    if q.slot:
        slot = m.attribute
        family = lexicon.slot_families().get(q.slot, frozenset({q.slot}))
        if slot and (match.slot_match(q.slot, slot) or slot in family):
            return "answers"
        if _words(q.slot.replace("_", " ")) <= _words(m.text):
            return "answers"
        return "entity"
    if q.wants:
        kind = m.meta.get("value_type")
        if kind in _COMPATIBLE.get(q.wants, {q.wants}):
            return "answers"
    return "entity"


def missing_names(q, packed: Sequence[MemoryRecord], names: Mapping[str, str], self_names: Sequence[str]) -> list[str]:
    """Return the things the question names that no packed memory mentions or is about."""
    own = {n.casefold() for n in self_names}
    out = []
    for name in q.names:
        if name in own:
            continue
        if not any(about(name, m, names) or _words(name) <= _words(m.text) for m in packed):
            out.append(name)
    return out


def verdict(q, fits: Sequence[str], top_evidence: float, missing: Sequence[str], certain_at: float,
            vague_at: float) -> tuple[str, str]:
    """Return (confidence, why) for a pack, from the claims first and the score thresholds after."""
    if missing:
        return "unknown", f"the record never mentions {', '.join(missing)}"
    if "answers" in fits:
        return "certain", f"a packed memory holds {q.slot or q.wants or 'the answer'} for {q.subject or 'the subject'}"
    if q.pinned and "entity" not in fits:
        return "unknown", f"no packed memory is about {q.subject}"
    if top_evidence >= certain_at:
        return "certain", f"evidence {top_evidence:.2f} >= certain_at {certain_at}"
    if q.request and top_evidence >= vague_at / 2:
        # A task ("recommend a restaurant") is served by whatever the user prefers that bears on it.
        return "vague", f"a request; evidence {top_evidence:.2f} of what bears on it"
    if top_evidence >= vague_at or ("entity" in fits and q.specific):
        return "vague", f"evidence {top_evidence:.2f}" + (" about the entity asked" if "entity" in fits else "")
    return "unknown", f"evidence {top_evidence:.2f} < vague_at {vague_at}"
