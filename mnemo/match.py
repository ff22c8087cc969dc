"""The claim matcher: when two claims are about the same thing, in the same slot, with the same value.

Reconciliation, forgetting and recall's evidence all ask these questions, so they are answered
here once, on structure, with similarity only where structure allows it:

- entities (`entity_match`): the same key is "same". Identifiers and numbers are hard: "KT-40"
  and "KT-41", "flat 2" and "flat 5" never match. A key whose every word is inside another
  ("Ostara" in "Ostara Books", "flat 2" in "tenant in flat 2") is an "alias", unless one sets itself
  apart ("my other sister" is not "my sister"); so are the user and the team ("we" includes "I").
  Aliases count only where no memory of the same key does.
- slots (`slot_match`): the same canonical slot is "exact"; a slot that opens the other
  ("warranty" and "warranty period") is "prefix", one attribute; a slot that ends the other
  ("address" and "home address") is "qualified", one of its kinds; slot phrases whose embeddings
  are at least `slot_threshold` close are "similar". Different qualifiers ("personal email" and
  "work email") are not aligned.
- values (`same_value`, `same_kind`): normalised equality; the same head noun ("oat milk" and
  "almond milk") is the same kind of value, which a change replaces.
- marks (`values.marks`): the numbers, identifiers, addresses and names of a statement. Two
  statements whose marks differ are never duplicates, whatever their cosine.
"""

from __future__ import annotations

import re
from typing import Any

from .normalise import RECORD_ID, STOPWORDS, content_tokens, marks, same_value, value_key

_GENERIC = frozenset({"user", "team"})
# Determiners that set a thing apart from one of its kind already spoken of: "my other sister" is not "my sister".
_CONTRAST = frozenset({"other", "another"})
_DIGIT = re.compile(r"\d")


def key(subject: str | None) -> str | None:
    """Return the comparable form of an entity key."""
    return subject.strip().casefold() if subject else None


def _words(k: str) -> list[str]:
    return re.findall(r"[\w@.+-]+", k.replace("'s ", " "))


def hard(k: str) -> bool:
    """Return True for a key that must match exactly: an identifier, or a name with a number in it."""
    return bool(RECORD_ID.fullmatch(k) or _DIGIT.search(k))


def _named(shown: Any) -> bool:
    """Return True for a subject said as a proper name: every word capitalised ("Antonio Conte", "South Korea")."""
    words = str(shown or "").split()
    return bool(words) and all(w[:1].isupper() for w in words) and "'s" not in str(shown)


def names_apart(a: Any, b: Any) -> bool:
    """Return True for two claims about things said by two different proper names ("Japan", "Romania"): two things,
    whatever else they share (`entity_match` has already said they are not one name inside the other)."""
    shown_a, shown_b = a.meta.get("subject_display"), b.meta.get("subject_display")
    return _named(shown_a) and _named(shown_b) and entity_match(a.subject, b.subject) is None


def _set_apart(a: list[str], b: list[str]) -> bool:
    """Return True when one of two phrases of a kind sets itself apart from the other ("other sister", "sister")."""
    return bool(_CONTRAST.intersection(a)) != bool(_CONTRAST.intersection(b))


def possessions_apart(a: str | None, b: str | None) -> bool:
    """Return True for two things one owner has under different nouns ("emi's cat", "emi's dog"), or one of them
    set apart from the other ("my sister", "my other sister"): two things."""
    ka, kb = key(a) or "", key(b) or ""
    if "'s " not in ka or "'s " not in kb:
        return False
    (owner_a, thing_a), (owner_b, thing_b) = ka.rsplit("'s ", 1), kb.rsplit("'s ", 1)
    wa, wb = thing_a.split(), thing_b.split()
    return owner_a == owner_b and (wa[-1:] != wb[-1:] or _set_apart(wa, wb))


def entity_match(a: str | None, b: str | None) -> str | None:
    """Return "same", "alias" or None for two entity keys (see the module docstring)."""
    ka, kb = key(a), key(b)
    if not ka or not kb:
        return None
    if ka == kb:
        return "same"
    if {ka, kb} == _GENERIC:
        return "alias"
    if ka in _GENERIC or kb in _GENERIC:
        return None
    owner_a, thing_a = ka.rsplit("'s ", 1) if "'s " in ka else (None, ka)
    owner_b, thing_b = kb.rsplit("'s ", 1) if "'s " in kb else (None, kb)
    if owner_a and owner_b and owner_a != owner_b:
        # "the user's test" may be "the test"; "Mateo's size" is never "Lucía's size", nor Mateo himself.
        return None
    wa, wb = _words(thing_a), _words(thing_b)
    if _set_apart(wa, wb):
        # "The user's other sister" is another one than "the user's sister": never an alias of it.
        return None
    small, big = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    # Containment keeps identifiers exact: "flat 2" is inside "tenant in flat 2", never inside "flat 5".
    if small and all(w in big for w in small) and (len(small) < len(big) or owner_a != owner_b) and not (
            RECORD_ID.fullmatch(ka) and RECORD_ID.fullmatch(kb)):
        return "alias"
    return None


def soft(item: Any) -> bool:
    """Return True for a claim about a plain noun phrase ("the release", "the album") or about nothing named.

    Soft entities may be one thing under two words; names, identifiers, the user and the team may not.
    """
    k = key(item.subject)
    if k is None:
        return True
    if k in _GENERIC or hard(k) or k.startswith(("user's", "team's")):
        return False
    shown = str(item.meta.get("subject_display") or "")
    return shown.startswith("the ")


def slot_words(slot: str | None) -> frozenset[str]:
    """Return the words of a canonical slot ("personal_email" -> {"personal", "email"})."""
    return frozenset(w for w in re.split(r"[_\s:]+", slot or "") if w)


def slot_match(a: str | None, b: str | None, similarity: float = 0.0, threshold: float = 2.0) -> str | None:
    """Return "exact", "prefix", "qualified", "similar" or None for two slots (see the module docstring).

    "prefix": one slot opens the other ("warranty" and "warranty_period", "email" and
    "email_address"): the longer one only adds a head noun, so both name one attribute.
    "qualified": one slot ends the other ("address" and "home_address", "email" and
    "personal_email"): the longer one adds a qualifier, so it may be one of several kinds; a
    forget request may name it, a new value never replaces it.
    "derived": an agent noun and the passive relation of its verb ("creator" and "create_by").
    Two slots with two letters swapped in one long word ("origianl_broadcaster") are "exact".
    """
    if not a or not b:
        return None
    if a == b:
        return "exact"
    la, lb = [w for w in re.split(r"[_\s:]+", a) if w], [w for w in re.split(r"[_\s:]+", b) if w]
    if len(la) == len(lb) and sum(x != y for x, y in zip(la, lb, strict=True)) == 1 and all(
            x == y or _slip(x, y) for x, y in zip(la, lb, strict=True)):
        return "exact"
    short, long_ = (la, lb) if len(la) <= len(lb) else (lb, la)
    # A slot of function words only ("is", "has") names no attribute: "is" is not the start of "is_a".
    if short and len(short) < len(long_) and any(w not in STOPWORDS for w in short):
        if long_[:len(short)] == short:
            return "prefix"
        if long_[-len(short):] == short:
            return "qualified"
    if _agent_of(la, lb) or _agent_of(lb, la):
        return "derived"
    if similarity >= threshold:
        return "similar"
    return None


def function_slot(slot: str | None) -> bool:
    """Return True for a slot of function words only ("is", "is_a", "has"): it names no attribute."""
    words = [w for w in re.split(r"[_\s:]+", slot or "") if w]
    return bool(words) and all(w in STOPWORDS for w in words)


def _slip(x: str, y: str) -> bool:
    """Return True when two words of six letters or more differ by two neighbouring letters swapped
    ("origianl" / "original", "univeristy" / "university"), the commonest typing slip. Other one-letter
    differences are often other words ("employer" / "employee", "country" / "county")."""
    if len(x) != len(y) or len(x) < 6:
        return False
    diff = [i for i, (p, q) in enumerate(zip(x, y, strict=True)) if p != q]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and x[diff[0]] == y[diff[1]] and x[diff[1]] == y[diff[0]]


def _agent_of(noun: list[str], relation: list[str]) -> bool:
    """Return True when a one-word slot is the agent noun of a passive relation ("creator" and "create_by").

    English makes agent nouns from verbs with -er / -or / -r: creator, performer, developer,
    founder, owner, publisher.
    """
    if len(noun) != 1 or len(relation) != 2 or relation[1] != "by":
        return False
    verb, agent = relation[0], noun[0]
    stems = {verb, verb.rstrip("e"), verb + verb[-1]}
    return any(agent in (f"{v}er", f"{v}or", f"{v}r") for v in stems)


def head_word(value: str | None) -> str | None:
    """Return the head (last content word) of a value, singular: "almond milk" -> "milk"."""
    words = [w for w in value_key(value).split() if not _DIGIT.search(w)] if value else []
    if not words:
        return None
    w = words[-1]
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def same_kind(a: str | None, b: str | None) -> bool:
    """Return True when two values name the same kind of thing (same head noun) without being equal."""
    ha, hb = head_word(a), head_word(b)
    return bool(ha and hb and ha == hb and not same_value(a, b))


def holds(value: str | None, memory_value: str | None, memory_text: str | None = None) -> bool:
    """Return True when a memory holds `value`: the same value, or every word of it within the memory's value."""
    if not value:
        return False
    if same_value(value, memory_value):
        return True
    small = content_tokens(value)
    if not small:
        return False
    return small <= content_tokens(memory_value) or (memory_text is not None and small <= content_tokens(memory_text))


# Value kinds that name one thing (a person, place, organisation, identifier): a denial of one reaches any memory
# that holds it, whatever the verb.
PROPER_KINDS = frozenset({"name", "place", "org", "group", "language", "identifier", "email", "url", "phone"})


def denies(value: str | None, m: Any, *, aligned: bool, named: bool) -> bool:
    """Return True when a claim of the other polarity with `value` names `m`'s value: the value it ends.

    Under a slot aligned with its own, a value held or of the same kind; said with another verb,
    the whole value ("It is not true that Acme built X" and "X was developed by Acme"), or a name
    (`named`) a lasting memory holds ("is a citizen of Peru"); a common word it merely shares is not
    that ("I haven't played in years" and "I'm going skiing this year").
    """
    if same_value(value, m.value):
        return True
    if aligned:
        return holds(value, m.value) or same_kind(value, m.value)
    return named and m.kind != "episodic" and holds(value, m.value)


def names_relation(value: str | None, slot: str | None) -> bool:
    """Return True when a value is the gerund of a relation slot's verb ("smoking" and "smoke")."""
    if not value or not slot or " " in value.strip():
        return False
    word, verb = value.strip().lower(), slot.split("_")[0]
    if not word.endswith("ing") or len(verb) < 3:
        return False
    stem = word[:-3]
    return stem in (verb, verb.rstrip("e"), verb + verb[-1]) or stem + "e" == verb


def negated(item: Any) -> bool:
    """Return the polarity flag of a claim or a stored memory (the stored flag lives in meta)."""
    return bool(getattr(item, "negated", False) or item.meta.get("negated"))


def marks_of(item: Any) -> frozenset[str]:
    """Return the marks of a claim or memory, computed from its text (the same way for both)."""
    return marks(item.text)


def qualifiers(item: Any) -> frozenset[str]:
    """Return the other things a claim names beside its subject, slot and value ("for the billing service").

    Read from meta["about"] (the objects and prepositional objects of the clause, `extract.claims`).
    """
    slot = slot_words(item.attribute) | slot_words(str(item.meta.get("slot_phrase") or ""))
    subject = key(item.subject) or ""
    # A phrase sharing a word with a named subject is about the subject itself ("Bold's country").
    own = set() if subject in ("user", "team") else {w.removesuffix("'s") for w in subject.split()} - STOPWORDS

    def other(k: str) -> bool:
        words = {w.removesuffix("'s") for w in k.split()}
        return bool(k) and k not in (subject, key(item.value)) and not words <= slot and not own & words and \
            not holds(k, item.value) and not holds(item.value, k)

    return frozenset(k for k in item.meta.get("about") or () if other(k))


def qualified_apart(a: Any, b: Any) -> bool:
    """Return True when each of two claims names another thing the other does not.

    "We use Postgres for the billing service" and "... for the search service" are two facts, and
    "my flight to Oslo leaves at 7:40" does not replace "my flight to Rome leaves at 9:00"; a claim
    that names nothing else ("we use Postgres") may still be the same fact as a qualified one.
    """
    def alone(x: Any, y: Any) -> bool:
        # Something x names that y neither names nor says (a mis-cut value or subject of y still says it).
        named = set(y.meta.get("about") or ())
        return any(q not in named and not holds(q, None, y.text) for q in qualifiers(x))

    return alone(a, b) and alone(b, a)
