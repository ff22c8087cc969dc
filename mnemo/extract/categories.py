"""Categories of claims: what kind of memory a clause makes (profile, preference, failure, event, ...).

    category_of(clause, slot, entity, table_category, value_type)   # "preference"
    KIND_OF["failure"], BASE_IMPORTANCE["failure"]                   # "episodic", 0.6

A category comes from the construction and the words the lexicon files name (failure words,
preference verbs, maker verbs), in a fixed order: failure, lesson, instruction, a state of the
moment, decision, preference, deadline, routine, the slot table's category, a past event, the
user's own profile, else a fact.
"""

from __future__ import annotations

import re

from .. import lexicon
from .clauses import Clause
from .entities import Entity

KIND_OF = {"profile": "semantic", "preference": "semantic", "fact": "semantic", "deadline": "semantic",
           "note": "semantic", "decision": "procedural", "change": "procedural", "instruction": "procedural",
           "routine": "procedural", "lesson": "procedural", "event": "episodic", "failure": "episodic"}


BASE_IMPORTANCE = {"profile": 0.7, "preference": 0.6, "fact": 0.55, "deadline": 0.7, "decision": 0.6,
                   "instruction": 0.7, "failure": 0.6, "lesson": 0.7, "routine": 0.5, "event": 0.4, "change": 0.55,
                   "note": 0.3}


ROUTINE = re.compile(r"\b(?:every|each)\s+\w+|\bon\s+(?:mon|tues|wednes|thurs|fri|satur|sun)days\b|\b(?:usually|"
                      r"normally|typically|always|often|generally)\b", re.I)


LESSON = re.compile(r"\blessons? learn(?:ed|t)\b|\bnext time\b|\bwe learn(?:ed|t) that\b|\bin future\b", re.I)


# Deictic times that place a clause in one moment or day: what holds then is an episode, not a lasting fact.
TRANSIENT = re.compile(r"\bright now\b|\bat the moment\b|\btonight\b|\btoday\b|\byesterday\b|"
                       r"\bthis (?:morning|afternoon|evening)\b", re.I)


DECIDE = frozenset("decide agree choose settle opt pick commit".split())


def category_of(c: Clause, slot: str, entity: Entity, table_category: str | None, vtype: str) -> str:
    """Return the memory category of a claim from its construction, slot and words."""
    cause = {t.i for t in c.cause}
    own = [t for t in c.tokens if t.i not in cause]
    lemmas = {t.lemma_.lower() for t in own}
    relation = f"{c.verb.lemma_.lower()}_{c.particle}" if c.particle else c.verb.lemma_.lower()
    text = " ".join(t.text for t in own)
    if (lemmas | {relation}) & lexicon.words("failure_words") and not c.negated:
        return "failure"
    if LESSON.search(text):
        return "lesson"
    if c.imperative:
        return "instruction"
    if TRANSIENT.search(text) and not (c.old_value or c.prep == "to" or c.verb.lemma_ in lexicon.words("change_verbs")):
        # "I'm at the airport right now": a state of the moment, kept as an episode that fades.
        return "event"
    if c.verb.lemma_ in DECIDE or c.aspect == "intend" and entity.key in ("team",):
        return "decision"
    if c.verb.lemma_ in lexicon.words("preference_verbs") or slot in ("preferred_name", "diet") or (
            {"favourite", "favorite"} & set(slot.split("_"))) or (
            "rather" in lemmas and any(t.lower_ in ("would", "'d") for t in c.tokens)):
        return "preference"
    if slot == "deadline" or any(t.lower_ == "due" for t in c.tokens):
        return "deadline"
    if ROUTINE.search(text):
        return "routine"
    if table_category:
        return "fact" if table_category == "role" else table_category
    if c.verb.tag_ == "VBD" and not c.copula and not c.change and c.verb.lemma_ not in lexicon.words("maker_verbs"):
        return "event"
    if entity.key == "user" and c.copula:
        return "profile"
    return "fact"
