"""Entities in a parse: who or what a noun phrase names, what it owns, and what a pronoun stands for.

    entity_of(token, mentions)      # Entity("user's sister", "the user's sister"), Entity("KT-40", "KT-40")
    attribute_of(token, mentions)   # (owner, slot words) for "my personal email", "KT-40's warranty"

Keys are `normalise.canonical_subject` keys: "user" for I / me / my, "team" for we / our, an
identifier upper-cased, a named thing lower-cased, an owned thing "user's sister". `Mentions`
keeps the third-party entities of a turn, newest last, so that he / she / it / they resolve to
the newest compatible one (a person for he / she, a thing for it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .. import lexicon
from ..normalise import canonical_subject
from .clauses import Clause, subtree
from .parser import IDENTIFIER
from .values import value_type

Token = Any

FIRST_SINGULAR = frozenset({"i", "me", "my", "mine", "myself"})


FIRST_PLURAL = frozenset({"we", "us", "our", "ours", "ourselves"})


THIRD = {"he": "person", "him": "person", "his": "person", "she": "person", "her": "person", "hers": "person",
          "it": "thing", "its": "thing", "they": "any", "them": "any", "their": "any", "theirs": "any",
          "this": "thing", "that": "thing"}


# Modifiers that say when or how much, not which kind: "my new manager" is my manager.
NOT_KIND = frozenset("new old current former previous latest present one real only main".split())


@dataclass(frozen=True)
class Entity:
    """A subject as a claim holds it: its key, how to show it, and whether it is a person."""

    key: str | None
    display: str
    person: bool = False


USER = Entity("user", "the user", True)


TEAM = Entity("team", "the team", True)


@dataclass
class Mentions:
    """Third-party entities mentioned so far in a turn, newest last, for resolving he / she / it / they.

    `me` is who "I" is in the sentence being read: the user, or the named speaker of a transcript line.
    """

    seen: list[Entity] = field(default_factory=list)
    me: Entity = USER
    # An owned attribute named so far ("my manager" -> user, [manager]), by the key of its noun phrase, so a
    # pronoun that stands for it fills the same slot: "my manager is not Priya, it's Daniel".
    attributes: dict[str, tuple[Entity, list[Token]]] = field(default_factory=dict)

    def add(self, entity: Entity) -> None:
        if entity.key and entity.key not in ("user", "team", self.me.key):
            self.seen = [e for e in self.seen if e.key != entity.key] + [entity]

    def resolve(self, pronoun: str) -> Entity | None:
        """Return the newest entity of the pronoun's kind (person / thing); for he / she, else the newest of any.

        An entity not known to be a person may still be one (a name the tagger left untyped), so he / she
        fall back to it; an entity known to be a person is never what "it" stands for, and one named
        person is never what "they" stands for (number: "they" is a group, or a thing).
        """
        want = THIRD.get(pronoun.lower())
        # "he" never stands for a daughter, "she" never for a brother: English fixes the pronoun of kin nouns.
        other = _OTHER_PRONOUN.get(pronoun.lower())
        seen = [e for e in self.seen if other is None or _pronoun_of(e) != other]
        for e in reversed(seen):
            if want == "any" and not (e.person and " and " not in e.display) or want != "any" and (
                    want == "person") == e.person:
                return e
        if want != "person":
            return None
        # A name the tagger left untyped may be a person; a day, a date, a time or an amount never is.
        return next((e for e in reversed(seen) if value_type(e.display) not in _NEVER_PEOPLE), None)


_OTHER_PRONOUN = {"he": "she", "him": "she", "his": "she", "she": "he", "her": "he", "hers": "he"}


def _pronoun_of(e: Entity) -> str | None:
    """Return "he" / "she" for an entity its noun fixes ("the user's sister" -> "she"), else None."""
    return lexicon.pronoun_of().get(e.display.rsplit(" ", 1)[-1].lower())


_NEVER_PEOPLE = frozenset({"date", "time", "money", "duration", "number", "age", "phone", "email", "url", "identifier"})


def span_text(tokens: list[Token]) -> str:
    """Return the text of tokens as written: contiguous runs keep the source's own spacing."""
    if not tokens:
        return ""
    toks = sorted(tokens, key=lambda t: t.i)
    out = toks[0].text
    for prev, t in zip(toks, toks[1:], strict=False):
        out += (prev.whitespace_ if t.i == prev.i + 1 else " ") + t.text
    return out.strip()


def number_after(tok: Token) -> list[Token]:
    """Return the bare number right after a noun ("Flat 2", "room 216"), which names it whatever the parse says."""
    doc = tok.doc
    if tok.i + 2 < len(doc) and doc[tok.i + 1].text in ("#", "no", "No", "No.", "nr") and doc[tok.i + 2].like_num \
            and tok.pos_ in ("NOUN", "PROPN"):
        # "Customer #3181", "Room No 12": the number sign goes with the number.
        return [doc[tok.i + 1], doc[tok.i + 2]]
    if tok.i + 1 < len(doc):
        nxt = doc[tok.i + 1]
        after = doc[nxt.i + 1] if nxt.i + 1 < len(doc) else None
        # Whatever the entity tagger thinks of "Ticket 31", a number right after a noun names it; only a
        # month ("May 31"), a money sign or a unit after the number ("31 days") makes it something else.
        # The tagger may read the noun as an adjective ("Flat 2" beside "flat tyre"); its numeral says it is one.
        noun = tok.pos_ in ("NOUN", "PROPN") or nxt.dep_ == "nummod" and nxt.head.i == tok.i and tok.is_alpha
        if nxt.like_num and noun and value_type(tok.text) not in ("date", "money") \
                and nxt.ent_type_ not in ("MONEY", "PERCENT") and not (
                after is not None and after.lower_ in ("am", "pm", "%", "days", "weeks", "months", "years", "hours",
                                                       "minutes", "kg", "km", "euros", "dollars", "pounds")):
            return [nxt]
    return []


def modifiers(head: Token) -> list[Token]:
    """Return the noun's own modifiers that belong to its name (compounds, adjectives), in order."""
    mods = [c for c in head.children if c.dep_ in ("compound", "amod", "nmod") and c.i < head.i]
    out: list[Token] = []
    for m in mods:
        out.extend(t for t in subtree(m) if t.dep_ not in ("det", "poss", "case") and not t.is_punct)
    return sorted(out, key=lambda t: t.i)


def name_of(noun: Token) -> Token | None:
    """Return the proper name given to a common noun in passing: "my sister Ana", "my mechanic Gary".

    An appositive or trailing compound name, or (a frequent misparse) a proper noun right after
    the noun holding the same role in the clause.
    """
    if noun.pos_ != "NOUN":
        return None
    found = next((c for c in noun.children if c.dep_ in ("appos", "compound") and c.pos_ == "PROPN" and c.i > noun.i),
                 None)
    if found is None and noun.i + 1 < len(noun.doc):
        nxt = noun.doc[noun.i + 1]
        if nxt.pos_ == "PROPN" and nxt.dep_ == noun.dep_ and nxt.head.i == noun.head.i:
            found = nxt
    return found


def is_person(tok: Token) -> bool:
    return tok.ent_type_ == "PERSON" or tok.lower_ in THIRD and THIRD[tok.lower_] == "person" or is_kin(tok)


def is_kin(tok: Token) -> bool:
    """Return True for a kin word ("Dad", "my sister", "nan"): a person, whatever the entity tagger says."""
    words = _kin_words()
    return tok.lower_ in words or tok.lemma_.lower() in words


@cache
def _kin_words() -> frozenset[str]:
    return frozenset(lexicon.kin()) | frozenset(lexicon.kin().values())


# Where the small parser may hang an identifier written after a noun ("Order DQ-73 shipped ..." read with
# "DQ-73" as the passive auxiliary): not as an argument of its own.
_MISREAD_LABEL = frozenset({"aux", "auxpass", "dep", "compound", "nummod", "npadvmod", "appos", "nmod"})


def _label_after(tok: Any) -> Any:
    """Return the identifier written right after the noun `tok` ("Order DQ-73", "desk 4B-12"), which names it,
    wherever the parser attached it, or None."""
    nxt = tok.doc[tok.i + 1] if tok.pos_ in ("NOUN", "PROPN") and tok.i + 1 < len(tok.doc) else None
    return nxt if nxt is not None and IDENTIFIER.fullmatch(nxt.text) and nxt.dep_ in _MISREAD_LABEL else None


def entity_of(tok: Token, mentions: Mentions) -> Entity:
    """Return the entity a noun phrase headed by `tok` names (see the module docstring).

    A coordination that includes the speaker ("my partner and I") is about the user.
    """
    low = tok.lower_
    if tok.dep_ in ("nsubj", "nsubjpass") and any(k.dep_ == "conj" and k.lower_ in ("i", "me") for k in tok.children):
        return mentions.me
    if IDENTIFIER.fullmatch(tok.text):
        return Entity(tok.text.upper(), tok.text.upper())
    label = tok.doc[tok.i - 1] if tok.like_num and tok.i > 0 else None
    if label is not None and label.is_alpha and label.head.i == tok.i and label.dep_ in ("amod", "compound", "nmod") \
            and value_type(label.text) not in ("date", "money"):
        # "flat 2 is a student": the tagger made the numeral the head; the noun before it names it with it.
        shown = f"{label.text} {tok.text}"
        return Entity(canonical_subject(shown), shown)
    if tok.pos_ == "PRON" or low in FIRST_SINGULAR | FIRST_PLURAL:
        if low in FIRST_SINGULAR:
            return mentions.me
        if low in FIRST_PLURAL:
            return TEAM
        found = mentions.resolve(low) if low in THIRD else None
        return found or Entity(None, tok.text)
    ident = next((t for t in [tok, *tok.children] if IDENTIFIER.fullmatch(t.text)), None) or next(
        (t for t in subtree(tok) if IDENTIFIER.fullmatch(t.text) and t.head.i == tok.i or
         IDENTIFIER.fullmatch(t.text) and t.dep_ in ("appos", "nummod", "npadvmod")), None) or _label_after(tok)
    if ident is not None:
        return Entity(ident.text.upper(), ident.text.upper())
    poss = next((c for c in tok.children if c.dep_ == "poss"), None)
    words = [*modifiers(tok), tok]
    if poss is not None:
        owner = entity_of(poss, mentions)
        own = span_text(words).lower()
        if owner.key is None:
            return Entity(None, f"{owner.display} {own}")
        return Entity(f"{owner.key}'s {own}", f"{owner.display}'s {own}", looks_human(tok))
    if tok.pos_ == "PROPN":
        names = [t for t in subtree(tok) if t.pos_ == "PROPN" or t.dep_ in ("compound", "flat") or t.lower_ == "&"
                 or t.dep_ == "nummod" and t.i < tok.i and t.head.i == tok.i]
        amp = any(t.lower_ == "&" for t in names)
        # "Pelham & Rook" is one name; "Tom and Ana" are two people.
        names = [t for t in names if t.i <= tok.i + 3 and (t.dep_ not in ("appos", "conj") or amp and t.dep_ == "conj")]
        names += [n for n in number_after(max(names, key=lambda t: t.i) if names else tok) if n not in names]
        shown = span_text(sorted(names, key=lambda t: t.i)) or tok.text
        return Entity(canonical_subject(shown), shown, is_person(tok))
    anchor = next((p for p in tok.children if p.dep_ == "prep" and p.lower_ in ("in", "at", "of", "for", "on") and any(
        x.dep_ == "pobj" and x.ent_type_ not in ("DATE", "TIME") and (x.pos_ == "PROPN" or any(
            ch.isdigit() for ch in x.text) or any(y.like_num for y in x.children)) for x in p.children)), None)
    if anchor is not None:
        # "the tenant in Flat 2": a noun anchored to a named or numbered thing keeps the anchor in its key.
        inside = [x for x in subtree(anchor) if x.i != anchor.i and x.dep_ != "det"]
        words = [*words, *number_after(tok), anchor, *inside, *number_after(max(inside, key=lambda t: t.i))]
    else:
        words = [*words, *number_after(tok)]
    shown = span_text([t for t in words if t.dep_ != "det"])
    article = any(c.dep_ == "det" for c in tok.children) and not shown[:1].isupper()
    return Entity(canonical_subject(shown), f"the {shown}" if article else shown, looks_human(tok))


def looks_human(tok: Token) -> bool:
    """Return True for a noun the parser's entity types or a person's relations mark as a person."""
    return tok.ent_type_ == "PERSON" or is_kin(tok) or any(c.dep_ == "appos" and c.ent_type_ == "PERSON"
                                                          for c in tok.children)


def attribute_of(tok: Token, mentions: Mentions) -> tuple[Entity, list[Token]] | None:
    """Return (owner, slot words) when the noun phrase names an attribute of something, else None.

    "my personal email" -> (user, [personal, email]); "KT-40's warranty" -> (KT-40, [warranty]);
    "the warranty period for model KT-40" -> (KT-40, [warranty, period]).
    """
    if tok.pos_ not in ("NOUN",) or IDENTIFIER.fullmatch(tok.text):
        return None
    poss = next((c for c in tok.children if c.dep_ == "poss"), None)
    words = [t for t in [*modifiers(tok), tok] if not IDENTIFIER.fullmatch(t.text) and t.pos_ != "PROPN"]
    if poss is not None:
        return entity_of(poss, mentions), words
    for prep in (c for c in tok.children if c.dep_ == "prep" and c.lower_ in ("of", "for", "on")):
        # The tagger may call a name after the preposition its clausal complement ("for QSS-785" as pcomp).
        pobj = next((x for x in prep.children if x.dep_ == "pobj" or x.dep_ == "pcomp" and x.pos_ == "PROPN"), None)
        if pobj is None:
            # "the deadline for completing the first sprint": a gerund's object is what the attribute is of.
            gerund = next((x for x in prep.children if x.dep_ == "pcomp" and x.tag_ == "VBG"), None)
            pobj = next((x for x in gerund.children if x.dep_ == "dobj"), None) if gerund is not None else None
        if pobj is not None:
            # "the warranty period for model ZR-9": an identifier after the preposition's noun names it.
            ident = next((x for x in tok.children if x.dep_ == "appos" and IDENTIFIER.fullmatch(x.text)), None)
            return (entity_of(ident, mentions) if ident is not None else entity_of(pobj, mentions)), words
    named = [c for c in tok.children if c.dep_ in ("compound", "nummod") and IDENTIFIER.fullmatch(c.text)]
    if named:
        return entity_of(named[-1], mentions), [w for w in words if w.i not in {n.i for n in named}]
    owned = [c for c in tok.children if c.dep_ == "compound" and c.i < tok.i]
    definite = any(c.dep_ == "det" and c.lower_ in ("the", "this", "that") for c in tok.children)
    if owned and definite and lexicon.slot_table().get(tok.lemma_.lower()) is not None:
        # "the wifi password", "the budget review deadline": a known attribute noun after what it belongs to.
        thing = [t for c in owned for t in subtree(c)]
        shown = span_text(thing)
        return Entity(canonical_subject(shown), f"the {shown}"), [tok]
    return None


def resolved_pronouns(c: Clause, mentions: Mentions) -> dict[int, str]:
    """Return {token index: what it stands for} for the clause's third-person pronouns the turn resolves."""
    out: dict[int, str] = {}
    named: set[str] = set()
    if c.subject is not None and c.subject.pos_ != "PRON":
        named.add(entity_of(c.subject, mentions).key or "")
    for t in c.tokens:
        low = t.lower_
        if t.pos_ != "PRON" or low not in THIRD or low in ("this", "that", "it") and t.dep_ not in ("nsubj", "poss"):
            continue
        found = mentions.resolve(low)
        if found is None or not found.key or found.key in named:
            # A second pronoun for an entity already named in the clause stays a pronoun ("X put his rate up").
            continue
        named.add(found.key)
        shown = found.display
        if t.dep_ == "poss" or low in ("his", "its", "their", "hers"):
            shown = shown + ("'" if shown.endswith("s") else "'s")
        out[t.i] = shown
    return out
