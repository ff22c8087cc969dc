"""Clauses from a dependency parse: where each statement's subject, predicate, value and polarity are.

    for clause in clauses(sent):      # a spaCy sentence Span
        clause.subject, clause.verb, clause.value, clause.negated, clause.change, ...

This module only reads structure; `claims` turns a clause into a claim (subject, slot, value).
A clause is headed by the sentence root, a verb conjoined to another clause head ("I play bass and
sing"), or a relative clause ("the album, which we recorded at X, ..."). Its parts:

- subject: the nsubj / nsubjpass child, else the subject of the clause it is conjoined to; none for
  an imperative.
- verb: the lexical verb. An aspectual or modal head that governs another verb ("I stopped
  smoking", "I used to live in X", "I want to learn Go") hands the clause to the governed verb and
  records its aspect (negate / keep / intend, from `assets/words/aspect_verbs.txt`).
- polarity: a `neg` child of the verb or its auxiliary ("not", "n't", "never"), "no longer", or a
  negating aspect; "not Y" attached to a value is not polarity but the old value ("84, not 48").
- change: a change verb with a "to" value ("slipped to 19 July", "bumped X to version 16"), a "from"
  value, a particle "up"/"down", or a current-state cue ("now", "these days", "anymore").
- value: the "to" value of a change, else the direct object, attribute or adjective complement,
  else the object of the first preposition (a temporal one only when nothing else is there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .. import lexicon

Token = Any  # spaCy Token
SUBJECT_DEPS = ("nsubj", "nsubjpass", "csubj", "expl")
OBJECT_DEPS = ("dobj", "attr", "oprd", "acomp", "dative", "pobj")
_TEMPORAL_ENTS = ("DATE", "TIME")
_REPORTING = frozenset("think believe guess reckon suppose feel say mean know realise realize suspect".split())


@dataclass
class Clause:
    """One statement inside a sentence, as positions in the parse."""

    head: Token  # the clause's syntactic head (a verb, a copula, or a noun in a fragment)
    verb: Token  # the lexical predicate after handing over from aspectual heads
    subject: Token | None  # head of the subject phrase
    copula: bool  # "X is Y" (the verb is "be")
    negated: bool
    aspect: str | None  # negate | keep | intend | None
    change: bool  # states a new value of something
    value: list[Token] = field(default_factory=list)  # the value's tokens, in order
    old_value: list[Token] = field(default_factory=list)  # "from X to Y", "Y, not X", "instead of X"
    prep: str | None = None  # the preposition that carried the value ("in" for "live in X")
    particle: str | None = None  # "out" in "come out", "up" in "went up"
    obj: Token | None = None  # a direct object that is the thing changing ("bumped the database to 16")
    when: list[Token] = field(default_factory=list)  # a temporal phrase ("last week", "in the spring")
    cause: list[Token] = field(default_factory=list)  # "because ..." clause tokens
    tokens: list[Token] = field(default_factory=list)  # the clause's own tokens, in order
    imperative: bool = False
    hedged: bool = False  # "I think ...", "maybe"
    relative_of: Token | None = None  # for a relative clause: the noun it modifies
    relative_pronoun: Token | None = None
    overrides_value: bool = False  # the value was set by "not X but Y"
    alternative_at: int | None = None  # where a negated alternative ("not 48", "instead of X") starts
    cause_head: Token | None = None  # the head of a "because ..." clause, when there is one
    have_got: bool = False  # "I've got X": the relation is "have"


def subtree(tok: Token, skip: set[int] = frozenset()) -> list[Token]:
    """Return `tok`'s subtree in order, leaving out the subtrees rooted at indices in `skip`."""
    out: list[Token] = []

    def walk(t: Token) -> None:
        if t.i in skip and t.i != tok.i:
            return
        out.append(t)
        for c in t.children:
            walk(c)

    walk(tok)
    return sorted(out, key=lambda t: t.i)


def _subject_of(tok: Token) -> Token | None:
    for c in tok.children:
        if c.dep_ in SUBJECT_DEPS:
            return c
    return None


def _is_clause_head(tok: Token) -> bool:
    return tok.pos_ in ("VERB", "AUX") or _subject_of(tok) is not None


def _result(tok: Token) -> bool:
    """Return True for a clause introduced by "so" of result (not "so that" of purpose)."""
    so = next((k for k in tok.children if k.lower_ == "so" and k.dep_ in ("advmod", "mark") and k.i < tok.i), None)
    return so is not None and not (so.i + 1 < len(so.doc) and so.doc[so.i + 1].lower_ == "that")


def truth_frame(sent: Any) -> tuple[Token, bool] | None:
    """Return (the embedded clause, whether it is denied) for "it is (not) true / false that S", else None."""
    root = sent.root
    if root.lemma_ != "be" or not any(c.dep_ in ("nsubj", "expl") and c.lower_ == "it" for c in root.children):
        return None
    judged = next((c for c in root.children if c.dep_ in ("acomp", "attr") and c.lemma_.lower() in
                   ("true", "false", "correct", "wrong", "untrue", "case", "right")), None)
    inner = next((c for c in root.children if c.dep_ == "ccomp"), None)
    if judged is None or inner is None:
        return None
    denied = any(c.dep_ == "neg" for c in root.children) != (judged.lemma_.lower() in ("false", "wrong", "untrue"))
    return inner, denied


def heads(sent: Any, root: Token | None = None) -> list[tuple[Token, Token | None]]:
    """Return (clause head, inherited subject) for the clauses of a sentence, in reading order.

    A verb conjoined to a clause head shares its subject when it has
    none; a complement of a reporting verb with the speaker as subject ("I think I left it
    at home") replaces the reporting clause; relative clauses come with their noun.
    """
    out: list[tuple[Token, Token | None]] = []
    root = root if root is not None else sent.root

    def visit(tok: Token, inherited: Token | None) -> None:
        own = _subject_of(tok)
        comp = next((c for c in tok.children if c.dep_ == "ccomp" and _subject_of(c) is not None), None)
        if tok.lemma_ in _REPORTING and own is not None and own.lower_ in ("i", "we") and comp is not None:
            visit(comp, None)
            return
        out.append((tok, None if own is not None else inherited))
        subject = own if own is not None else inherited
        for c in tok.children:
            if c.dep_ == "conj" and _is_clause_head(c):
                visit(c, subject)
            elif c.dep_ in ("parataxis",) and _subject_of(c) is not None:
                visit(c, None)
            elif c.dep_ == "ccomp" and c.i < tok.i and _subject_of(c) is not None:
                # "X goes to Y — Z assigned it": a clause before its head is a statement of its own.
                visit(c, None)
            elif c.dep_ == "advcl" and _subject_of(c) is not None and _result(c):
                # "We put in a key safe, so the key's not in the rock any more": a clause of result asserts.
                visit(c, None)
        for t in subtree(tok):
            if t.dep_ == "relcl" and t.head.pos_ in ("NOUN", "PROPN"):
                out.append((t, None))

    visit(root, None)
    seen: set[int] = set()
    found = [(h, s) for h, s in out if not (h.i in seen or seen.add(h.i))]
    # In the order they were said, so a pronoun meets what it stands for first and the last said wins.
    return sorted(found, key=lambda hs: min([hs[0].i] + [x.i for x in [_subject_of(hs[0])] if x is not None]))


def _negates(tok: Token) -> bool:
    """Return True when `tok` carries a negation child ("not", "n't", "never", "no longer")."""
    for c in tok.children:
        if c.dep_ == "neg":
            return True
        if c.lower_ in ("longer",) and any(g.lower_ == "no" for g in c.children):
            return True
        if c.lower_ == "never":
            return True
    return False


def _most_by_negation(verb: Token) -> bool:
    """Return True for a negated "could" with an upward comparative of degree: it says there is no more to have.

    A downward one keeps its negation ("I couldn't care less" is not caring).
    """
    could = any(k.dep_ == "aux" and k.lower_ == "could" for k in verb.children)
    return could and any(k.tag_ in ("RBR", "JJR") and k.lower_ not in ("less", "fewer", "worse")
                         and k.dep_ in ("advmod", "acomp") for k in verb.children)


def _aspect_chain(head: Token) -> tuple[Token, str | None, bool]:
    """Return (lexical verb, aspect, negated on the way) after following aspectual heads to their verb."""
    verb, aspect, negated = head, None, _negates(head)
    aspects = lexicon.aspects()
    for _ in range(3):
        governed = next((c for c in verb.children if c.dep_ == "xcomp" and c.pos_ in ("VERB", "AUX")), None)
        if governed is None:
            # "I gave up smoking": the governed verb hangs off the particle's head as a gerund object.
            governed = next((c for c in verb.children if c.dep_ in ("dobj", "pcomp") and c.tag_ == "VBG"), None)
        if governed is None and verb.lemma_ in lexicon.ending_objects() and any(
                c.dep_ == "dobj" for c in verb.children) and (verb.lemma_ != "give" or _particle(verb) == "up"):
            # "I gave up smoking", "I quit my job": what the object names has ended.
            aspect, negated = "negate", True
            break
        if governed is None or verb.lemma_ not in aspects:
            break
        kind = aspects[verb.lemma_]
        if verb.lemma_ == "give" and not any(c.dep_ == "prt" and c.lower_ == "up" for c in verb.children):
            break
        aspect = kind if aspect is None or kind == "negate" else aspect
        verb = governed
        negated = negated or _negates(verb)
    return verb, aspect, negated


# Adverbs that, right after their verb, make a phrasal verb with it ("get back to", "come over"): the tagger
# often reads them as adverbs, not particles.
_PARTICLE_ADVERBS = frozenset({"back", "up", "down", "out", "off", "away", "over"})


def _particle(verb: Token) -> str | None:
    return next((c.lower_ for c in verb.children if c.dep_ == "prt" or c.dep_ == "advmod"
                 and c.lower_ in _PARTICLE_ADVERBS and c.i == verb.i + 1), None)


def _after(tokens: list[Token], word: str, start: int) -> Token | None:
    return next((t for t in tokens if t.i > start and t.lower_ == word), None)


def _value_run(tok: Token, clause: set[int], stop: set[str]) -> list[Token]:
    """Return the tokens of the value phrase that starts right after `tok` (a "to" or "from").

    The run ends at punctuation, a conjunction, a stop word, a time phrase that is not the value
    itself ("to Lisbon last week"), or another dependent of the clause's verb ("in the spring").
    """
    out: list[Token] = []
    verb = tok.head if tok.head.pos_ in ("VERB", "AUX") else None
    for t in tok.doc[tok.i + 1:]:
        if t.i not in clause or t.is_punct and t.text not in ("$", "£", "€", "-", "/", ".") or t.lower_ in stop:
            break
        if t.dep_ in ("cc",) or t.dep_ == "mark":
            break
        if out and (t.ent_iob_ == "B" and t.ent_type_ in _TEMPORAL_ENTS and not any(
                x.ent_type_ in _TEMPORAL_ENTS for x in out)):
            break
        if out and verb is not None and t.head.i == verb.i and t.dep_ in ("prep", "advmod", "npadvmod", "advcl"):
            break
        out.append(t)
    while out and (out[-1].is_punct or out[-1].lower_ in ("a", "an", "the")):
        out.pop()
    return out


def analyse(head: Token, inherited: Token | None, sent: Any, skip_heads: set[int]) -> Clause:
    """Return the clause headed by `head` (see the module docstring), leaving out other clauses' tokens."""
    verb, aspect, negated = _aspect_chain(head)
    # "I've got three hives" is "I have three hives".
    have_got = verb.lemma_ == "get" and any(c.dep_ == "aux" and c.lemma_ == "have" for c in verb.children)
    subject = _subject_of(head) or _subject_of(verb) or inherited
    # Tokens of other clauses (conjoined heads, relative clauses) and of subordinate "because" clauses.
    skip = {i for i in skip_heads if i != head.i}
    cause_head = next((c for c in verb.children if c.dep_ == "advcl" and any(
        m.lower_ in ("because", "since", "as", "cause") for m in c.children if m.dep_ == "mark")), None)
    if cause_head is None:
        cause_head = next((c for c in verb.children if c.dep_ == "prep" and c.lower_ in ("because", "due")), None)
    own = [t for t in subtree(head, skip) if (t.dep_ != "cc" or t.head.i != head.i)
           and not (t.dep_ == "mark" and t.head.i == head.i and t.lower_ in ("because", "since", "as", "that"))]
    result = next((k for k in head.children if k.i in skip and k.dep_ == "advcl" and _result(k)), None)
    if result is not None:
        # "A so B": what follows "so" is B's, whatever the parse attached to A ("... so the key's not there any more").
        own = [t for t in own if t.i < min(x.i for x in subtree(result))]
    while own and (own[-1].is_punct or own[-1].dep_ == "cc"):
        own.pop()
    clause_ids = {t.i for t in own}
    copula = verb.lemma_ == "be"
    modal = any(c.dep_ in ("aux", "auxpass") and c.tag_ == "MD" for c in head.children)
    # "Call me Sam" and "you can call me Jo" both tell the assistant what to do.
    imperative = (subject is None and head.dep_ == "ROOT" and head.tag_ == "VB" and not modal) or (
        subject is not None and subject.lower_ == "you" and modal and head.tag_ == "VB")
    c = Clause(head=head, verb=verb, subject=subject, copula=copula, negated=negated, aspect=aspect, change=False,
               tokens=own, imperative=imperative, particle=_particle(verb), have_got=have_got)
    if cause_head is not None:
        c.cause = [t for t in subtree(cause_head) if t.dep_ != "mark" and t.i != cause_head.i or
                   t.i == cause_head.i and t.lower_ not in ("because", "due")]
        c.cause_head = cause_head
    if head.dep_ == "relcl":
        c.relative_of = head.head
        c.relative_pronoun = next((t for t in subtree(head) if t.tag_ in ("WDT", "WP", "WP$", "WRB")
                                   or (t.lower_ == "that" and t.dep_ in ("nsubj", "dobj", "nsubjpass"))), None)
    if aspect == "negate":
        negated = c.negated = True
    if c.negated and _most_by_negation(verb):
        # "I couldn't agree more", "it couldn't be better": no degree beyond it, so it asserts the most.
        c.negated = False
    if verb.lemma_.lower() in lexicon.words("negative_verbs") and c.negated and aspect != "negate":
        # "Idris never misses judo": a negated negative verb affirms.
        c.negated = False
    if any(t.lower_ in ("maybe", "perhaps", "probably") for t in own):
        c.hedged = True
    _values(c, clause_ids)
    return c


def _values(c: Clause, clause: set[int]) -> None:
    """Fill the value, old value, change flag, preposition and time of a clause."""
    verb = c.verb
    own = c.tokens
    # "84, not 48" / "not 48 but 84" / "X rather than Y" / "instead of Y": the negated alternative is the old value.
    _alternatives(c, clause)
    to = _after(own, "to", verb.i)
    frm = _after(own, "from", verb.i)
    change_verb = verb.lemma_ in lexicon.words("change_verbs")
    # "now", "these days", "anymore" say the value is the current one; "right now" only says where one is.
    cue = any(t.lower_ in lexicon.words("time_cues") and not (t.i > 0 and t.doc[t.i - 1].lower_ == "right")
              or (t.lower_ == "days" and t.i > 0 and t.doc[t.i - 1].lower_ in ("these", "nowadays"))
              for t in own) or any(t.lower_ in ("longer", "anymore") for t in own) or any(
        # "we're going to Sicily instead": "instead" with no "of" says this value takes another's place.
        t.lower_ == "instead" and (t.i + 1 >= len(t.doc) or t.doc[t.i + 1].lower_ != "of") for t in own) or any(
        # "actually, it's the first wednesday": the discourse adverb of a correction (the judge's change cue too).
        t.lower_ == "actually" and t.dep_ == "advmod" and t.head.i == verb.i for t in own)
    replace_with = next((t for t in own if t.lower_ == "with" and t.head.i == verb.i), None)
    if verb.lemma_ in ("replace", "swap", "substitute") and replace_with is not None:
        # "We replaced Slack with Teams": the object is the old value, "with" the new one.
        obj = next((k for k in verb.children if k.dep_ == "dobj"), None)
        if obj is not None:
            c.old_value = _trim(subtree(obj))
            c.value = _value_run(replace_with, clause, {"because", "and", "but", "after", "since"})
            c.change, c.prep = bool(c.value), "to"
    # A capitalised word after "to" mid-sentence is a name the tagger took for an infinitive ("to RabbitMQ").
    # So is a word after "to" with a number as its object ("swapped us to pitch 9"): a thing named by its number.
    # A word with a digit in it is no verb ("changed the password to maple77"): a value.
    to_value = to is not None and (to.head.tag_ != "VB" or to.head.text[:1].isupper() or _DIGIT.search(to.head.text)
                                   or (to.head.i + 1 < len(to.doc) and to.doc[to.head.i + 1].tag_ == "CD"
                                       and to.doc[to.head.i + 1].head.i == to.head.i))
    if not c.change and to_value and (change_verb or c.particle in ("up", "down")
                                      or any(t.lower_ in ("up", "down") and t.i < to.i for t in own)):
        c.value = _value_run(to, clause, {"because", "from", "and", "but", "so", "after", "since"})
        c.change = bool(c.value)
        if frm is not None and _deictic(frm):
            pass  # "moved to Fridays from next week": when the change holds from, not the value it had
        elif frm is not None and frm.i < to.i:
            c.old_value = _value_run(frm, clause, {"to"})
        elif frm is not None:
            c.old_value = _value_run(frm, clause, {"because", "and", "but"})
        c.prep = "to"
        obj = next((t for t in verb.children if t.dep_ == "dobj" and t.i < to.i and t.pos_ in ("NOUN", "PROPN")), None)
        c.obj = obj
    if not c.value:
        _plain_value(c, clause)
    if not c.value and verb.tag_ == "VBN" and any(k.dep_ == "auxpass" for k in verb.children):
        # "INV-5521 is paid": a passive with nothing after it states the subject's status.
        c.value, c.prep = [verb], "status"
    if c.alternative_at is not None and c.value and not c.overrides_value:
        # The value stops where its negated alternative starts ("31, not 13" -> "31").
        c.value = [t for t in c.value if t.i < c.alternative_at and not (t.is_punct and t.i == c.alternative_at - 1)]
    c.change = c.change or bool(c.old_value) or (cue and not c.negated)
    c.when = _temporal(c, clause)


_DIGIT = re.compile(r"\d")
# Words that point at a time from the moment of speaking: "from next week", "from tomorrow" say when, not a value.
_DEICTIC = frozenset({"next", "this", "today", "tomorrow", "tonight", "now", "then", "coming"})


def _deictic(frm: Token) -> bool:
    """Return True when the words after a "from" point at a time from now ("from next week", "from tomorrow")."""
    nxt = frm.doc[frm.i + 1] if frm.i + 1 < len(frm.doc) else None
    return nxt is not None and (nxt.lower_ in _DEICTIC or nxt.lower_ == "the" and frm.i + 2 < len(frm.doc)
                                and frm.doc[frm.i + 2].lower_ in ("following", "coming"))


def _alternatives(c: Clause, clause: set[int]) -> None:
    """Fill the old value from a negated alternative next to the value, and clear the polarity it is not."""
    own = c.tokens
    stops = {"because", "and", "so", "since", "after"}
    for k, t in enumerate(own):
        nxt = own[k + 1] if k + 1 < len(own) else None
        but = next((x for x in own[k + 1:] if x.lower_ == "but"), None) if t.lower_ == "not" else None
        if t.lower_ in ("not", "n't") and (t.head.i != c.verb.i and t.head.dep_ not in ("aux", "auxpass")
                                           or but is not None and k + 1 < len(own) and own[k + 1].i == t.i + 1
                                           or _contrasts(t, c.verb)):
            if but is not None:
                # "not 13 but 31": the old value sits between "not" and "but", the new one after "but".
                c.old_value = [x for x in own[k + 1:] if x.i < but.i and not x.is_punct]
                c.value = _value_run(but, clause, stops)
                c.overrides_value = True
            elif k > 0 and (own[k - 1].text == "," or own[k - 1].i < t.i - 1 or t.head.i < t.i):
                # "31, not 13": what follows "not" is the old value.
                c.old_value = _value_run(t, clause, stops | {"but"})
            if c.old_value:
                c.negated = any(n.dep_ == "neg" and n.i != t.i for n in c.verb.children)
                c.alternative_at = t.i
                return
        if t.lower_ == "instead" and nxt is not None and nxt.lower_ == "of":
            c.old_value = _value_run(nxt, clause, stops | {"to", "but"})
            c.alternative_at = t.i
            return
        if t.lower_ == "than" and k > 0 and own[k - 1].lower_ == "rather":
            c.old_value = _value_run(t, clause, stops | {"but"})
            c.alternative_at = own[k - 1].i
            return


_COMPLEMENTS = frozenset({"attr", "dobj", "acomp", "oprd", "npadvmod"})


def _contrasts(neg: Token, verb: Token) -> bool:
    """Return True when a "not" of the verb stands between two of its complements of one function: "was £140 not
    £95", "is happy not sad". A predicate's own negation comes before its complement ("was not £95")."""
    if neg.head.i != verb.i:
        return False
    before = {x.dep_ for x in verb.children if x.i < neg.i and x.dep_ in _COMPLEMENTS}
    return any(x.i > neg.i and x.dep_ in before for x in verb.children)


def _numeral_run(value: list[Token], clause: set[int]) -> list[Token]:
    """Return a value ending in a numeral with the numerals right after it: one number said in groups ("07700
    900111"), which the parser may hang off the verb as two complements."""
    if not value or value[-1].tag_ != "CD":
        return value
    out, doc = list(value), value[-1].doc
    while out[-1].i + 1 < len(doc) and doc[out[-1].i + 1].tag_ == "CD" and out[-1].i + 1 in clause:
        out.append(doc[out[-1].i + 1])
    return out


def _plain_value(c: Clause, clause: set[int]) -> None:
    """Fill the value of a clause that states no change with a "to": object, complement, or a preposition's object."""
    verb = c.verb
    skip = {c.subject.i} if c.subject is not None else set()
    kids = [k for k in verb.children if k.i in clause and k.i not in skip]
    # A pronoun object is who, not what, when another object follows ("charges us £31 a sack").
    nominal = [k for k in kids if k.dep_ in ("dobj", "dative") and k.pos_ != "PRON"]
    if nominal and any(k.dep_ == "dobj" and k.pos_ == "PRON" for k in kids) and not c.imperative:
        kids = [k for k in kids if not (k.dep_ == "dobj" and k.pos_ == "PRON")]
    measured = [k for k in kids if k.dep_ == "dobj" and (k.like_num or k.pos_ == "NUM")]
    if measured:
        # Several objects with an amount among them: the amount and what it is counted in ("£31 a sack").
        k = measured[0]
        after = [x for x in kids if x.dep_ in ("dobj", "npadvmod") and x.i == k.right_edge.i + 2 or
                 x.dep_ in ("dobj", "npadvmod") and x.left_edge.i == k.right_edge.i + 1]
        span = subtree(k) + [t for x in after for t in subtree(x) if t.dep_ != "prep" and t.head.dep_ != "prep"
                             and t.head.head.dep_ != "prep"]
        c.value = _trim(sorted(span, key=lambda t: t.i))
        return
    for dep in ("dobj", "attr", "oprd", "acomp", "ccomp", "xcomp", "npadvmod", "advmod"):
        for k in kids:
            if k.dep_ != dep:
                continue
            if dep == "advmod" and not (k.like_num or "@" in k.text or k.pos_ in ("PROPN", "NUM", "X")):
                continue
            if dep == "npadvmod" and (k.ent_type_ in _TEMPORAL_ENTS or k.lower_ in ("days",)):
                continue
            if dep in ("ccomp", "xcomp") and c.copula:
                continue
            span = _trim(subtree(k, _clause_heads_below(k)))
            if dep == "acomp":
                # "allergic to penicillin", "due on Friday": the adjective's (or the verb's) preposition carries
                # the value.
                p = next((x for x in k.children if x.dep_ == "prep"), None) or next(
                    (x for x in kids if x.dep_ == "prep" and x.lower_ in ("on", "by", "in", "at", "to")), None)
                pobj = next((x for x in p.children if x.dep_ == "pobj"), None) if p is not None else None
                if pobj is not None:
                    c.prep = f"{k.lemma_.lower()}_{p.lower_}"
                    c.value = subtree(pobj)
                    return
                # "allergic to shellfish" misread as an infinitive: "to" + a "verb" that is the object.
                inf = next((x for x in k.children if x.dep_ == "xcomp" and any(
                    a.lower_ == "to" for a in x.children if a.dep_ == "aux")), None)
                if inf is not None:
                    c.prep, c.value = f"{k.lemma_.lower()}_to", [t for t in subtree(inf) if t.lower_ != "to"]
                    return
            c.value = _numeral_run([t for t in span if t.dep_ != "neg" and t.lower_ not in ("not", "n't")], clause)
            if dep == "dobj" and k.tag_ == "PRP" and k.lower_ in ("me", "us") and c.imperative:
                # "call me Teddy": the second object is the value.
                second = next((x for x in kids if x.dep_ in ("oprd", "attr", "npadvmod", "dobj") and x.i != k.i), None)
                if second is not None:
                    c.prep = "me"
                    c.value = subtree(second)
            return
    direct = next((k for k in kids if k.dep_ == "pobj"), None)
    if direct is not None:
        # "I no longer like coffee" with "like" read as a preposition: its object is the value.
        c.value = _trim(subtree(direct))
        return
    preps = [k for k in kids if k.dep_ in ("prep", "agent", "dative") and k.lower_ != "of"]
    best = None
    for p in preps:
        pobj = next((x for x in p.children if x.dep_ in ("pobj", "pcomp")), None)
        if pobj is None:
            continue
        temporal = pobj.ent_type_ in _TEMPORAL_ENTS or pobj.lemma_ in ("morning", "evening", "week", "month", "year",
                                                                      "spring", "summer", "autumn", "winter", "fall")
        if best is None or (best[2] and not temporal):
            best = (p, pobj, temporal)
    if best is not None:
        p, pobj, temporal = best
        c.prep = None if temporal else p.lower_
        c.value = _trim(subtree(pobj))
        return
    # "The plumber is coming Thursday": with no object and no preposition, a bare day or date is what is said of
    # the event, as "on Thursday" would be.
    when = next((k for k in kids if k.dep_ in ("npadvmod", "nmod") and k.ent_type_ == "DATE" and k.pos_ == "PROPN"), None)
    if when is not None and not c.copula:
        c.value = _trim(subtree(when))


def _temporal_word(t: Token) -> bool:
    return t.ent_type_ in _TEMPORAL_ENTS or t.lemma_.lower() in (
        "morning", "evening", "week", "month", "year", "spring", "summer", "autumn", "winter", "fall", "weekend",
        "night", "afternoon")


def _trim(value: list[Token]) -> list[Token]:
    """Return a value without what only qualifies it: a comma tail, and time phrases that are not the value.

    "interpreter, mostly in courtrooms" -> "interpreter"; "choir on Thursdays" -> "choir".
    """
    if not value:
        return value
    comma = next((k for k, t in enumerate(value) if t.text == "," and k > 0), None)
    if comma is not None:
        value = value[:comma]
    drop: set[int] = set()
    ids = {t.i for t in value}
    head = next((t for t in value if t.head.i not in ids or t.head.i == t.i), value[0])
    measured = head.like_num or head.pos_ == "NUM" or any(c.like_num for c in head.children) or head.tag_ == "$"
    for t in value:
        if t.dep_ == "acl" and t.lemma_ in ("name", "call") and t.head.i == head.i:
            # "a cat named Tom": the name is a claim of its own, not part of the value.
            drop |= {x.i for x in subtree(t)}
        if t.dep_ == "prep" and t.head.i == head.i and t.lower_ in ("over", "than") or (
                t.dep_ == "prep" and t.head.i == head.i and t.lower_ in ("at", "for") and any(
                    x.dep_ == "pobj" and x.pos_ == "PROPN" for x in t.children) and head.pos_ == "NOUN"):
            # "tea over coffee" (what is preferred), "engineer at Acme" (the employer is its own claim).
            drop |= {x.i for x in subtree(t)}
        if t.dep_ == "prep":
            pobj = next((x for x in t.children if x.dep_ == "pobj"), None)
            if pobj is not None and _temporal_word(pobj) and not _temporal_word(value[0]):
                drop |= {x.i for x in subtree(t)}
            elif measured and t.head.i == head.i and t.lower_ not in ("per", "a", "an", "of"):
                # "£300 for the logo refresh": an amount's purpose is not part of the amount.
                drop |= {x.i for x in subtree(t)}
    return [t for t in value if t.i not in drop]


def _clause_heads_below(tok: Token) -> set[int]:
    return {t.i for t in subtree(tok) if t.dep_ in ("relcl", "advcl") and t.i != tok.i}


def _temporal(c: Clause, clause: set[int]) -> list[Token]:
    """Return the tokens of the clause's time phrase outside its value ("last week", "in the spring")."""
    value_ids = {t.i for t in c.value}
    for t in c.tokens:
        if t.i in value_ids:
            continue
        if t.ent_type_ in _TEMPORAL_ENTS and t.ent_iob_ == "B":
            ent = next((e for e in t.doc.ents if e.start == t.i), None)
            if ent is not None:
                return [x for x in ent if x.i in clause]
        if t.dep_ == "prep" and t.head.i == c.verb.i and t.lower_ in ("in", "on", "at", "since", "during"):
            pobj = next((x for x in t.children if x.dep_ == "pobj"), None)
            if pobj is not None and pobj.i not in value_ids and pobj.lemma_ in (
                    "spring", "summer", "autumn", "winter", "fall", "morning", "evening", "weekend"):
                return [t, *subtree(pobj)]
    return []


def conjuncts(value: list[Token]) -> list[list[Token]]:
    """Return the value split at its coordination ("a cat and two hamsters" -> [a cat], [two hamsters]).

    A counted apposition is a value of its own too: "bees, two hives" -> [bees], [two hives].
    """
    ids = {t.i for t in value}
    head = next((t for t in value if t.head.i not in ids or t.head.i == t.i), None)
    conj = [k for k in head.children if k.i in ids and (k.dep_ == "conj" or k.dep_ == "appos" and _counted_apposition(
        head, k))] if head is not None else []
    if not conj:
        return [value]
    later: list[Token] = []
    for k in conj:
        later += [x for x in subtree(k) if x.i in ids]
        conj += [x for x in subtree(k) if x.dep_ == "conj" and x not in conj and x.i in ids]
    later_ids = {t.i for t in later}
    first = [t for t in value if t.i not in later_ids and t.dep_ != "cc" and not (t.is_punct and t.i > head.i)]
    out = [first]
    for k in sorted({k.i: k for k in conj}.values(), key=lambda t: t.i):
        nested = {x.i for j in conj if j.i != k.i and j.i > k.i for x in subtree(j)}
        out.append([x for x in subtree(k) if x.i in ids and x.i not in nested and x.dep_ != "cc"
                    and not (x.is_punct and x.i > k.i)])
    return [p for p in out if p]


def _counted_apposition(head: Token, k: Token) -> bool:
    """True for an apposition set off by a comma whose number counts it ("bees, two hives"), not a model
    number read as one ("a grey Mazda 3")."""
    doc = head.doc
    comma = any(t.is_punct for t in doc[min(head.i, k.i) + 1:max(head.i, k.i)])
    return comma and any(x.like_num and x.i < k.i for x in k.children)


def speaker_dropped(c: Clause) -> bool:
    """Return True for a sentence that opens on a past-tense verb with no subject ("Booked the flights"): the chat's
    dropped "I", so the speaker did it; so did they a fronted participle's ("Sold the Civic, I've got a Kia")."""
    verb = c.verb
    if c.subject is not None or verb.i != verb.sent.start or verb.tag_ not in ("VBD", "VBN"):
        return False
    if verb.dep_ == "ROOT":
        # A participle with an object and no auxiliary is no passive: the tagger's VBN for a past tense.
        return verb.tag_ == "VBD" or any(k.dep_ == "dobj" for k in verb.children) and not any(
            k.dep_ in ("aux", "auxpass") for k in verb.children)
    return verb.dep_ == "advcl" and any(k.dep_ == "nsubj" and k.lower_ in ("i", "we") for k in verb.head.children)
