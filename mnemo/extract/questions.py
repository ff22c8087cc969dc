"""Questions read like claims: what a question asks about (entity), which slot, and what type of value.

    q = ask("When is the birthday of the user's mother?")
    q.subject, q.slot, q.wants        # "user's mother", "birthday", "date"

Recall uses this to decide whether a packed memory answers the question (same entity, aligned
slot) rather than only sharing words with it: "What is the name of Lena's dog?" is not answered
by "Lena's name is Ana", and "the user's mother" is not "the user's mother-in-law". The reading is
the extractor's own (`entities.attribute_of`, `entities.entity_of`, the slot table), so a question
and a memory meet on the same keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from .. import lexicon
from ..match import hard
from ..normalise import canonical_subject
from . import entities, slots
from .parser import parse_one
from .render import LEADING_FILLER

# What a question word asks for.
_WANTS = {"when": "date", "where": "place", "who": "name", "whom": "name", "whose": "name"}
_HOW = {"much": "money", "many": "number", "long": "duration", "old": "number", "often": "thing",
        # "how" with a dimensional adjective asks for a measure: a number with its unit.
        **dict.fromkeys(("big", "large", "tall", "high", "far", "heavy", "wide", "deep", "fast"), "number")}
_SELF = frozenset({"user", "team"})
_SUBJECTS = frozenset({"nsubj", "nsubjpass", "expl"})


@dataclass(frozen=True)
class Ask:
    """What a question asks: about which entity, which slot, what type of value, and its marks."""

    text: str
    subject: str | None = None  # entity key ("user", "user's mother", "flat 5"), None when unclear
    slot: str | None = None  # canonical slot asked for ("birthday", "city"), None when only a relation
    slot_phrase: str | None = None  # the slot as asked ("birthday", "live in")
    wants: str | None = None  # value type of the answer: date | place | name | money | number | duration
    entities: tuple[str, ...] = field(default_factory=tuple)  # every entity key the question names
    names: tuple[str, ...] = field(default_factory=tuple)  # the entities it names by a proper name or a number
    parts: tuple[Ask, ...] = field(default_factory=tuple)  # the other parts of a question of several parts
    request: bool = False  # a task ("can you recommend a restaurant?", "plan my week"), not a question of fact
    asked: str | None = None  # the noun phrase asked for or counted ("project cards" in "how many project cards")
    earlier: bool = False  # asks for an earlier value ("my original budget"), not the current one

    def each(self) -> tuple[Ask, ...]:
        """Return this reading and the readings of the question's other parts."""
        return (self, *self.parts)

    @property
    def specific(self) -> bool:
        """Return True when the question is about something in particular, not just the user or the team."""
        return bool(self.subject) and self.subject not in _SELF

    @property
    def pinned(self) -> bool:
        """Return True when the subject is one particular thing: owned ("the user's mother"), named, or numbered.

        A plain noun phrase ("the dashboard api") may be stored in other words; these may not.
        """
        if not self.specific:
            return False
        return "'s " in self.subject or hard(self.subject) or any(n in self.subject for n in self.names)

    @property
    def hard(self) -> bool:
        """Return True when the subject is named by a number or an identifier ("flat 5", "KT-40")."""
        return bool(self.subject) and hard(self.subject)


_PARTS = re.compile(r",?\s+and\s+(?=(?:what|which|who|whom|whose|when|where|how|is|does|do|did)\b)", re.I)


@lru_cache(maxsize=512)
def ask(question: str) -> Ask:
    """Return what `question` asks (see the module docstring); an unparseable question asks nothing specific.

    A question of several parts ("What diet does the user follow, and what food does the user
    like?") is read part by part: the first part's reading, with the others in `parts`.
    """
    pieces = [p.strip() for p in _PARTS.split(question.strip()) if p.strip()]
    first = _ask_one(pieces[0] if pieces else question)
    if earlier(pieces[0] if pieces else question, first):
        first = replace(first, earlier=True)
    if len(pieces) < 2:
        return first
    return replace(first, text=question, parts=tuple(_ask_one(p) for p in pieces[1:]))


def earlier(question: str, q: Ask | None = None) -> bool:
    """Return True when `question` asks for an earlier value, by a cue of prior time (`words/earlier_cues.txt`).

    An adverb asks it wherever it stands ("where did I live previously?"); an adjective only when it
    qualifies what is asked ("my original budget"), not when it names another thing ("how should I
    schedule the work so that the initial phase ends by May?" asks about a schedule).
    """
    cues = lexicon.words("earlier_cues")
    doc = parse_one(question.strip())
    words = [t.lower_ for t in doc]
    if {f"{a} {b}" for a, b in zip(words, words[1:], strict=False)} & cues:
        return True
    asked = set(((q.slot_phrase or "") + " " + (q.asked or "")).replace("_", " ").split()) if q else set()
    return any(t.lower_ in cues and (t.dep_ != "amod" or t.head.lower_ in asked) for t in doc)


def _ask_one(question: str) -> Ask:
    doc = parse_one(question.strip())
    if not len(doc) or all(t.is_punct or t.is_space for t in doc):
        return Ask(question)
    mentions = entities.Mentions()
    wh = next((t for t in doc if t.tag_ in ("WDT", "WP", "WP$", "WRB")), None)
    wants = None
    asked_noun = None
    if wh is not None:
        low = wh.lower_
        wants = _WANTS.get(low)
        if low == "how":
            nxt = doc[wh.i + 1] if wh.i + 1 < len(doc) else None
            wants = _HOW.get(nxt.lower_) if nxt is not None else None
        if wh.dep_ == "det" and wh.head.pos_ == "NOUN":
            # "which city", "what diet": the noun names the slot.
            asked_noun = wh.head
        elif low in ("which", "what") and wh.i + 1 < len(doc) and doc[wh.i + 1].pos_ == "NOUN":
            asked_noun = doc[wh.i + 1]
        elif low == "how" and wh.i + 2 < len(doc) and doc[wh.i + 1].lower_ in ("many", "much") and \
                doc[wh.i + 2].pos_ == "NOUN":
            # "how many commits": what is counted is asked for, not talked about.
            asked_noun = doc[wh.i + 2]
    subject, slot_words, keys = None, None, []
    repaired = _verb_read_as_noun(doc, mentions)
    if repaired is not None:
        # "When does the user's home insurance renew?": the small model reads "renew" as a noun.
        subject, verb_lemma = repaired
        keys.append(subject)
        slot, phrase = _relation_slot(doc, wants, lemma=verb_lemma)
        if slot is None and asked_noun is not None and not (wh is not None and wh.lower_ == "how"):
            # "Which banking app do they use?": the verb names no slot the table knows; the noun asked does.
            slot, phrase = _noun_slot(_asked_words(asked_noun), wants)
        return Ask(question, subject=subject, slot=slot, slot_phrase=phrase or verb_lemma, wants=wants,
                   entities=(subject,), names=tuple(e for e in (subject,) if hard(e)),
                   asked=_phrase(asked_noun) if asked_noun is not None else None)
    called = _called(doc, mentions)
    if called is not None:
        # "What is the user's dog called?": the name of the user's dog.
        return Ask(question, subject=called, slot="name", slot_phrase="name", wants="name", entities=(called,),
                   names=tuple(e for e in (called,) if hard(e)))
    nouns = [t for t in doc if t.dep_ in ("nsubj", "nsubjpass", "dobj", "pobj", "attr", "poss", "dative")
             and t.pos_ in ("NOUN", "PROPN", "PRON") and t.tag_ not in ("WP", "WDT")
             and (asked_noun is None or t.i != asked_noun.i)]
    root = doc[:].root
    # "What is the user's X?" and "the X of Y" ask for an attribute; "Is the user's daughter allergic to
    # X?" asks about the daughter herself.
    asks_attribute = root.lemma_ == "be" and wh is not None and wh.dep_ in ("attr", "nsubj", "advmod") and not any(
        c.dep_ in ("acomp",) for c in root.children)
    for t in nouns:
        if t.dep_ == "poss" and t.head.pos_ == "NOUN":
            continue
        has_of = any(c.dep_ == "prep" and c.lower_ == "of" for c in t.children)
        # "the user's home": a noun the slot table knows names an attribute wherever it stands.
        known = t.pos_ == "NOUN" and lexicon.slot_table().get(t.lemma_.lower()) is not None
        found = entities.attribute_of(t, mentions) if asks_attribute or has_of or known else None
        if found is not None and subject is None and found[0].key:
            subject, slot_words = found[0].key, found[1]
            keys.append(found[0].key)
            continue
        entity = entities.entity_of(t, mentions)
        if entity.key:
            keys.append(entity.key)
            if subject is None and t.dep_ in ("nsubj", "nsubjpass", "poss") or subject is None and not any(
                    n.dep_ in ("nsubj", "nsubjpass") for n in nouns):
                subject = entity.key
    thing = next((t for t in doc if t.dep_ == "dobj" and t.pos_ in ("NOUN", "PROPN")
                  and (asked_noun is None or t.i != asked_noun.i)), None)
    if wants in ("place", "date", "time") and thing is not None and root.lemma_ not in ("be", "have"):
        # "Where does the lab keep its primers?" asks about the primers, not the lab: the lab's primers.
        subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is not None and subj.pos_ != "PRON":
            mentions.add(entities.entity_of(subj, mentions))
        found = entities.entity_of(thing, mentions)
        key = found.key or canonical_subject(entities.span_text([*entities.modifiers(thing), thing]))
        if key:
            subject = key
            keys.append(key)
    if subject is None and keys:
        subject = keys[0]
    slot, phrase = None, None
    related = _relation_slot(doc, wants)
    counted = wh is not None and wh.lower_ == "how"
    if asked_noun is not None and not counted:
        # "which city" names a slot; "how many hives" names what is counted, and the number is the answer.
        slot_words = _asked_words(asked_noun)
    if related[0] is not None and related[0] != (related[1] or "").replace(" ", "_") and not (
            slot_words and asks_attribute):
        # A verb or adjective the slot table knows ("live in", "allergic to") names the slot better than the
        # type of thing asked for ("which medicine").
        slot, phrase = related
    elif slot_words:
        slot, phrase = _noun_slot(slot_words, wants)
    else:
        slot, phrase = _relation_slot(doc, wants)
    if slot == "name" and wants is None:
        wants = "name"  # "What is the name of the user's audit firm?" asks for a name, as "who" does
    if wants is None and asked_noun is not None and not counted and asked_noun.tag_ in ("NNS", "NNPS"):
        wants = "thing"  # "What specific bugs were logged?" asks for the bugs, not for how many there were
    names = _names(doc) + [e for e in keys if e and hard(e) and not any(e in n for n in _names(doc))]
    request = wh is None and (root.tag_ == "VB" and not any(c.dep_ in ("nsubj", "nsubjpass") for c in root.children)
                              or any(c.dep_ == "nsubj" and c.lower_ == "you" for c in root.children))
    return Ask(question, subject=_canonical(subject), slot=slot, slot_phrase=phrase, wants=wants,
               entities=tuple(dict.fromkeys(e for e in keys if e)), names=tuple(dict.fromkeys(names)),
               request=request, asked=_phrase(asked_noun) if asked_noun is not None else None)


def _asked_words(noun: Any) -> list[Any]:
    """Return the words of the noun a question asks for, without its question word ("which city")."""
    return [w for w in [*entities.modifiers(noun), noun] if w.lower_ not in ("what", "which")]


def _noun_slot(words: list[Any], wants: str | None) -> tuple[str | None, str]:
    """Return (slot, phrase) that a noun's words name ("banking app" -> banking_app)."""
    phrase = slots.slot_words_key(words)
    return slots.canonical_slot(phrase, wants or "*", relation=False)[0], phrase


def _phrase(noun: Any) -> str:
    """Return a noun with its name's modifiers and an "of" complement: "hours of overtime", "project cards"."""
    while noun.dep_ == "compound" and noun.head.i > noun.i:
        noun = noun.head  # "how many project cards": the head of the compound is what is counted
    words = [*entities.modifiers(noun), noun]
    of = next((c for c in noun.children if c.dep_ == "prep" and c.lower_ == "of"), None)
    obj = next((c for c in of.children if c.dep_ == "pobj"), None) if of is not None else None
    if obj is not None:
        words += [of, *entities.modifiers(obj), obj]
    return " ".join(t.lower_ for t in words if t.lower_ not in ("what", "which", "how", "many", "much"))


def _names(doc: Any) -> list[str]:
    """Return the proper names the question says, each as its run of proper nouns ("narendra modi")."""
    out, run = [], []
    for t in [*doc, None]:
        if t is not None and _capital_only(t):
            continue
        if t is not None and (t.pos_ == "PROPN" and not _predicate(t) or run and t.like_num and t.i == run[-1].i + 1):
            run.append(t)
            continue
        if run:
            out.append(" ".join(x.lower_ for x in run))
            run = []
        num = doc[t.i + 1] if t is not None and t.i + 1 < len(doc) else None
        if num is not None and num.like_num and t.pos_ in ("NOUN", "ADJ") and t.is_alpha and (
                t.pos_ == "NOUN" and num.head.i == t.i or t.head.i == num.i and t.dep_ in ("amod", "compound", "nmod")):
            # A numeral after its noun designates one thing, as a name does ("flat 3", "room 216"); before it,
            # it counts ("3 flats"). The tagger may read the noun as the numeral's modifier ("flat 3").
            out.append(f"{t.lower_} {num.lower_}")
    return [n for n in out if n not in _SELF and n != "user"]


def _predicate(t: Any) -> bool:
    """Return True for a word that takes an auxiliary or a subject: a verb the tagger read as a proper noun
    ("What cookware does the user bake bread in?"), never a name."""
    return any(c.dep_ in ("aux", "auxpass", "nsubj", "nsubjpass") for c in t.children)


def _capital_only(t: Any) -> bool:
    """Return True for a sentence's first word tagged a proper noun for its capital alone ("Mention only five
    items."): neither the entity tagger nor a proper noun running on from it says it is a name."""
    nxt = t.nbor() if t.i + 1 < len(t.doc) else None
    return t.is_sent_start and t.pos_ == "PROPN" and not t.ent_type_ and (nxt is None or nxt.pos_ != "PROPN")


def _verb_read_as_noun(doc: Any, mentions: entities.Mentions) -> tuple[str, str] | None:
    """Return (subject key, verb) for "wh do NP V?" parsed with V as the head noun of NP, else None."""
    words = [t for t in doc if not t.is_punct]
    if not words or words[-1].pos_ != "NOUN":
        return None
    head = words[-1]
    do = head.head if head.dep_ != "ROOT" else next((c for c in head.children if c.dep_ == "aux"), None)
    if do is None or do.lemma_ != "do":
        return None
    # The noun is read as the subject of "do" ("does the user's insurance renew"), as the root that "do"
    # is the auxiliary of ("how much does the retreat cost"), or, when "do" is the only verb and a wh-word
    # opens the question, as its object ("which app do the user's children use").
    auxiliary = words[0].tag_ in ("WDT", "WP", "WRB") and not any(c.dep_ == "aux" for c in do.children)
    if head.dep_ not in ("nsubj", "nsubjpass", "ROOT") and not (head.dep_ == "dobj" and auxiliary):
        return None
    if not any(c.dep_ in ("compound", "poss") for c in head.children):
        return None
    poss = next((c for c in head.children if c.dep_ == "poss"), None)
    mods = [t for t in entities.modifiers(head) if t.lower_ not in ("how", "much", "many", "what", "which")]
    thing = " ".join(t.text.lower() for t in mods) if mods else None
    if thing is None:
        return None
    owner = entities.entity_of(poss, mentions).key if poss is not None else None
    return (f"{owner}'s {thing}" if owner else canonical_subject(thing)), head.lemma_.lower()


def _called(doc: Any, mentions: entities.Mentions) -> str | None:
    """Return the entity a "what is X called / named?" question asks the name of, else None."""
    root = doc[:].root
    if root.lemma_ not in ("call", "name") or not any(c.dep_ in ("auxpass",) or c.lemma_ == "be" for c in root.children):
        return None
    subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    return entities.entity_of(subj, mentions).key if subj is not None else None


def _relation_slot(doc: Any, wants: str | None, lemma: str | None = None) -> tuple[str | None, str | None]:
    """Return (slot, phrase) for a question that asks through a verb ("where does the user live?")."""
    verb = doc[:].root
    adjective = (next((c for c in verb.children if c.dep_ == "acomp"), None) or next(
        (t for t in doc if t.pos_ == "ADJ" and any(c.dep_ == "prep" for c in t.children)), None)) \
        if lemma is None else None
    if adjective is not None:
        # "allergic to": the adjective and its preposition name the relation.
        prep = next((c.lower_ for c in [*adjective.children, *verb.children] if c.dep_ == "prep"), None)
        phrase = f"{adjective.lemma_.lower()}_{prep}" if prep else adjective.lemma_.lower()
        if slots.known_relation(phrase):
            return slots.canonical_slot(phrase, "*", relation=True)[0], phrase
    if lemma is not None or verb.lemma_ not in ("be", "do", "have") and not verb.is_punct:
        prep = next((c.lower_ for c in verb.children if c.dep_ == "prep"), None) if lemma is None else None
        lemma = lemma or verb.lemma_.lower()
        tries = [f"{lemma}_{prep}"] if prep else [f"{lemma}_{p}" for p in ("in", "at", "to", "for", "as")]
        for phrase in [*tries, lemma]:
            if slots.known_relation(phrase):
                vtype = "place" if wants == "place" else "*"
                slot = slots.canonical_slot(phrase, vtype, relation=True)[0]
                if slot != phrase or vtype == "*":
                    return slot, phrase
    # A multiword attribute name anywhere in the question ("do for a living", "line of work").
    words = [t.lower_ for t in doc if not t.is_punct]
    table = lexicon.slot_table()
    for n in (4, 3, 2, 1):
        for i in range(len(words) - n + 1):
            info = table.get(" ".join(words[i:i + n]))
            if info is not None:
                return info.slot, " ".join(words[i:i + n])
    return None, None


def _canonical(key: str | None) -> str | None:
    return canonical_subject(key) if key and "'s " not in key else key


def describe(q: Ask) -> dict[str, Any]:
    """Return the question's reading as plain values, for a recall's provenance and trace."""
    return {"subject": q.subject, "slot": q.slot, "slot_phrase": q.slot_phrase, "wants": q.wants,
            "entities": list(q.entities), "names": list(q.names), "request": q.request, "asked": q.asked,
            "earlier": q.earlier}


def is_question(sent: Any) -> bool:
    """Return True for a parsed sentence that is a question, said with its "?" or without one (`_inverted`);
    a statement with a question tag ("X means Y, right?") is a statement.

    A tagged statement keeps declarative order: its first clause has its subject before its verb
    and no question word or inverted auxiliary opens it; the tag after the last comma is short.
    """
    text = sent.text.strip()
    if text.endswith("?"):
        return not _tagged(sent)
    return _inverted(sent)


def _inverted(sent: Any) -> bool:
    """Return True for a question written without its "?": an auxiliary before its subject, opening the sentence
    ("Can you help me plan a week of lunches") or right after a question word's phrase ("What do I pack for
    ...", "How much cash should I take"). Exclamations ("What a day", "How lucky I am") keep the subject first."""
    words = [t for t in sent if not (t.is_punct or t.is_space or t.dep_ == "intj" or t.lower_ in LEADING_FILLER)]
    if not words:
        return False
    first = words[0]
    for k, a in enumerate(words[:-1]):
        if a.dep_ in _SUBJECTS:
            return False  # the subject came first: declarative order
        subject = words[k + 1] if words[k + 1].dep_ in _SUBJECTS else words[k + 1].head
        if a.pos_ == "AUX" and (a.dep_ in ("aux", "auxpass") or a.dep_ == "ROOT" and k == 0) and \
                subject.dep_ in _SUBJECTS and subject.i > a.i:
            return k == 0 or first.tag_ in ("WDT", "WP", "WP$", "WRB")
    return False


def _tagged(sent: Any) -> bool:
    """Return True when a "?" sentence is a statement with a short tag after a comma ("..., right?")."""
    commas = [t.i for t in sent if t.text == ","]
    if not commas or sent.end - commas[-1] > 5:
        return False
    body = sent.doc[sent.start:commas[-1]]
    first = next((t for t in body if not t.is_punct and t.dep_ not in ("intj", "cc")), None)
    if first is None or first.tag_ in ("WDT", "WP", "WP$", "WRB") or first.pos_ == "AUX":
        return False
    verb = next((t for t in body if t.pos_ in ("VERB", "AUX") and t.dep_ not in ("aux", "auxpass", "amod")), None)
    return verb is not None and any(c.dep_ in ("nsubj", "nsubjpass", "expl") and c.i < verb.i for c in verb.children)
