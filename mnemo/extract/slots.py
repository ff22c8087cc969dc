"""Slots: the canonical name of what a claim fills, from an attribute noun, a verb relation or a value type.

    canonical_slot("lead time", "duration", relation=False)   # ("lead_time", True, "fact")
    relation_phrase(clause, vtype)                            # "live_in", "work_as", "rent_in"

`assets/words/slots.tsv` (through `mnemo.lexicon`) merges synonyms and gives cardinality; a
phrase it does not know keeps its own snake_case name, qualifiers included. A value's type names
the slot when nothing else does ("invoice INV-77 is for 1200 EUR" -> amount).
"""

from __future__ import annotations

import re
from typing import Any

from .. import lexicon
from .clauses import Clause, subtree
from .entities import modifiers
from .values import value_type

Token = Any

# Value types that name the slot when the sentence has no attribute noun ("X is for 1200 EUR" -> amount).
MEASURED = frozenset({"money", "date", "time", "duration", "number", "percent", "quantity", "version", "age"})


TYPED_SLOTS = {"money": "amount", "date": "date", "time": "time", "duration": "duration", "percent": "rate",
               "email": "email", "phone": "phone", "url": "url", "version": "version", "place": "location",
               "quantity": "quantity", "age": "age"}


def slot_words_key(words: list[Token]) -> str:
    return " ".join(w.lemma_.lower() if w.pos_ in ("NOUN", "VERB") else w.lower_ for w in words).strip()


def canonical_slot(phrase: str, vtype: str, *, relation: bool) -> tuple[str, bool, str | None]:
    """Return (slot, single-valued, category or None) for a lemmatised slot phrase and the value's type."""
    table = lexicon.slot_table()
    info = table.get(f"v:{phrase}" if relation else phrase)
    # A proper name after "live in" / "move to" is a place even when the parser's entity types miss it, or take
    # it for an organisation ("moved to Bristol": the small model's ORG): the verb relation selects a place.
    if info is not None and info.needs not in ("*", vtype) and not (
            info.needs == "place" and (vtype == "name" or relation and vtype == "org")
            or info.needs == "org" and vtype in ("name", "place")):
        info = None
    if info is not None:
        return info.slot, info.single, info.category
    snake = re.sub(r"[^\w]+", "_", phrase.lower()).strip("_")
    head = phrase.split()[-1] if phrase else ""
    head_info = table.get(head) if not relation else None
    if head_info is not None and head_info.needs == "*":
        return snake, head_info.single, head_info.category
    multi = lexicon.multi_slots()
    if relation:
        return snake, False, None
    return snake, head not in multi and snake not in multi, None


def known_relation(phrase: str) -> bool:
    """Return True when the slot table names a canonical slot for a verb relation ("live_in")."""
    return f"v:{phrase}" in lexicon.slot_table()


def relation_phrase(c: Clause, vtype: str) -> str:
    """Return the relation phrase of a verb clause: lemma, particle and the preposition carrying the value."""
    parts = ["have" if c.have_got else c.verb.lemma_.lower()]
    if c.particle:
        parts.append(c.particle)
    if c.prep and c.prep not in ("to",) or (c.prep == "to" and not c.change):
        parts.append(c.prep)
    elif c.prep == "to" and c.change:
        parts.append("to")
    phrase = "_".join(p for p in parts if p)
    if not known_relation(phrase):
        # "rent a flat in Cork": a place inside the object, under a preposition the table knows for this verb.
        for t in c.value:
            if t.dep_ == "prep" and known_relation(f"{parts[0]}_{t.lower_}"):
                pobj = next((x for x in t.children if x.dep_ == "pobj"), None)
                if pobj is not None and value_type(t.doc[pobj.left_edge.i:pobj.right_edge.i + 1]) == "place":
                    c.value = subtree(pobj)
                    return f"{parts[0]}_{t.lower_}"
    return phrase


def bare_attribute(tok: Token) -> bool:
    """Return True for "the <attribute noun>" with nothing saying whose ("the deadline", "the price")."""
    info = lexicon.slot_table().get(tok.lemma_.lower())
    return (tok.pos_ == "NOUN" and info is not None and info.category != "role"
            and not any(c.dep_ in ("poss", "compound", "prep", "amod", "nummod") for c in tok.children))


def attribute_noun(tok: Token) -> bool:
    """Return True for a noun the slot table knows as an attribute ("language", "status"), not a thing or a person."""
    table = lexicon.slot_table()
    lemma = tok.lemma_.lower()
    return tok.pos_ == "NOUN" and (lemma in table and table[lemma].category != "role" or any(
        info.slot == lemma and info.category != "role" for info in table.values()))


def role_noun(tok: Token) -> bool:
    """Return True for a bare "the <role>" whose name the slot table lists with the category "role"."""
    info = lexicon.slot_table().get(slot_words_key([*modifiers(tok), tok]))
    return info is not None and info.category == "role" and not any(
        c.dep_ == "poss" or c.dep_ == "prep" for c in tok.children)


def noun_number(value: list[Token]) -> tuple[Token, list[Token]] | None:
    """Return (noun, number tokens) for a value that is a noun named by a number ("a size 34"), else None."""
    toks = [t for t in value if t.dep_ != "det"]
    if len(toks) == 2 and toks[0].pos_ == "NOUN" and toks[1].like_num:
        return toks[0], [toks[1]]
    return None
