"""What a memory says: the speaker's own words, kept whole, with the claims read from them as an index.

    as_said(built, sent, me)          # the sentence's claims, each with a text that keeps what was said
    attach_fragments(said)            # a short sentence joined to the statement it leans on
    leans_on_context(sent)            # "That's neat.", "It took three weekends.": evidence only beside another
    said_with(chunks, k)              # the sentences around one, searched with its memory (meta["context"])
    labelled(candidate)               # "Caroline: It stands for ...": a transcript speaker named

A claim's text is its clause, rendered with "I" as who said it and only sure pronouns resolved
(`claims.said`), when that clause reads as a sentence; else the whole sentence. When the clauses
kept leave words of the sentence out, the first claim takes the whole sentence. A sentence that
leans on what came before is joined to the statement it follows, and so is one too short to be a
sentence by itself (no verb, or under three content words). So no memory is worse evidence
than the sentence it came from, and nothing stored is a heading or a fragment that leans on
another; a verbless line stands alone only when its turn says nothing else ("Table for six at
Luca's, Friday 8pm."), as said.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .. import lexicon
from ..model import Candidate
from ..normalise import STOPWORDS
from . import claims as claims_mod
from . import entities
from .commands import POINTER
from .render import render, sure
from .speakers import USER_SPEAKER, Speaker
from .values import marks

CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "ADV", "NUM"})
# meta["fragment"] of a whole sentence that is not a sentence by itself (`sentence_like`) but does not lean on
# another: joined to a neighbour of its turn like any fragment, and kept as said when the turn has none.
SHORT = "short"

_FILLER = frozenset("please oh ah well so hey hi hello ok okay yeah also anyway btw".split())


def words_of(tokens: Sequence[Any]) -> set[str]:
    """Return the content words of parsed tokens, lower-cased: no pronoun, punctuation or function word."""
    return {t.lower_ for t in tokens if not (t.is_punct or t.is_space or t.pos_ in ("PRON", "DET", "ADP", "CCONJ",
                                                                                    "SCONJ", "PART", "INTJ", "AUX")
                                             or t.lower_ in STOPWORDS or t.lower_ in _FILLER)}


def content_words(tokens: Sequence[Any], named: frozenset[int] = frozenset()) -> int:
    """Return how many content words parsed tokens hold: nouns, names, main verbs, adjectives, adverbs,
    numbers, and the pronouns a memory spells out (the first person as who said it; `named`, the
    positions of the pronouns it resolves)."""
    return sum(1 for t in tokens if t.pos_ in CONTENT_POS and not t.is_punct
               or t.pos_ == "PRON" and (t.lower_ in entities.FIRST_SINGULAR or t.i in named))


def sentence_like(tokens: Sequence[Any], named: frozenset[int] = frozenset()) -> bool:
    """Return True when tokens read as a sentence: a verb, and at least three content words (no heading,
    no verbless fragment, no lone noun phrase), and a head that is not a bare infinitive ("to store my
    bikes" is a purpose or a relative, not a sentence)."""
    return any(t.pos_ in ("VERB", "AUX") for t in tokens) and content_words(tokens, named) >= 3 \
        and not _dependent(tokens)


# Conjunctions that make a clause an adverbial of another ("when I look after myself", "since we last chatted"):
# such a clause is no sentence by itself. "so" (a result) and "that" (a complement) are not among them.
_SUBORDINATORS = frozenset("when whenever since because although though while whereas unless until till before "
                           "after once if".split())


def _dependent(tokens: Sequence[Any]) -> bool:
    """Return True when every verb that heads the tokens depends on a clause they leave out: a "to" infinitive
    with no subject of its own ("to store my bikes"), or a clause its conjunction subordinates ("when I ...")."""
    ids = {t.i for t in tokens}
    heads = [t for t in tokens if t.pos_ in ("VERB", "AUX") and (t.head.i not in ids or t.head.i == t.i)]
    return bool(heads) and all(
        any(c.dep_ == "aux" and c.tag_ == "TO" for c in h.children)
        and not any(c.dep_ in ("nsubj", "nsubjpass") for c in h.children)
        or any(c.lower_ in _SUBORDINATORS and (c.dep_ == "mark" or c.dep_ == "advmod" and h.dep_ != "ROOT")
               and c.i < h.i for c in h.children) for h in heads)


def _names_its_subject(verb: Any, named: frozenset[int]) -> bool:
    """Return True when a clause's subject names who or what it is about (not a pronoun pointing back)."""
    subj = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None:
        return False
    if subj.pos_ == "PRON":
        return subj.lower_ in entities.FIRST_SINGULAR | entities.FIRST_PLURAL | {"you"} or subj.i in named
    return not any(c.dep_ == "det" and c.lower_ in ("this", "that", "these", "those") for c in subj.children)


def leans_on_context(sent: Any, named: frozenset[int] = frozenset()) -> bool:
    """Return True for a sentence that is evidence only beside what was said before it.

    Its subject points back (a pronoun the text does not resolve, "It took three weekends.", or a
    demonstrative, "That photo is great."), or is left out of a finite verb ("Looks great."), and
    it is short; or its verb is elided ("Caroline hasn't."); or it has under three content words
    and nothing that names what it is about ("Lovely day."). `named`: the positions of pronouns
    the memory's text resolves ("She got the job" -> "Kwame got the job").
    """
    n = content_words(sent, named)
    root = sent.root
    subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass", "csubj", "expl")), None)
    if any(_names_its_subject(t, named) for t in sent if t.dep_ in ("conj", "ccomp", "parataxis")
           and t.pos_ in ("VERB", "AUX") and t.head.i == root.i):
        # "It's a tough issue, but we've gotta do what we can": a second clause says who it is about.
        return False
    if subj is None:
        return n < 3 or root.tag_ in ("VBZ", "VBD", "VBP", "MD") and n < 5
    if subj.pos_ == "PRON" and subj.lower_ not in entities.FIRST_SINGULAR | entities.FIRST_PLURAL | {"you"} \
            and subj.i not in named:
        return n < 6
    if any(c.dep_ == "det" and c.lower_ in ("this", "that", "these", "those") for c in subj.children):
        return n < 6
    return root.pos_ == "AUX" and not any(c.dep_ in ("attr", "acomp", "dobj", "xcomp", "ccomp", "prep", "advmod",
                                                     "oprd", "npadvmod") for c in root.children)


_ARGUMENTS = frozenset({"nsubj", "nsubjpass", "dobj", "pobj", "attr", "oprd", "dative"})


def names_a_thing(tokens: Sequence[Any]) -> bool:
    """Return True when tokens name something as an argument of their verb: a name or a number that is its
    subject, object or complement ("It was Matt Patterson.", "This is from Osaka Miami!"), not a name
    said to the listener ("Thanks so much, Mel.")."""
    return any(t.pos_ in ("PROPN", "NUM") and (t.head if t.dep_ in ("compound", "nummod") else t).dep_ in _ARGUMENTS
               for t in tokens)


def leaning(c: Candidate, sent: Any) -> Candidate:
    """Return candidate `c` of a sentence that leans on its turn, marked as a fragment (joined to a neighbour),
    and as naming something when it does (kept as said when the turn has nothing to join it to)."""
    return replace(c, meta={**c.meta, "fragment": True, **({"names": True} if names_a_thing(sent) else {})})


def as_said(built: list[claims_mod.Built], sent: Any, me: str) -> list[Candidate]:
    """Return the sentence's claims with texts that keep what was said.

    A claim keeps its clause's own text (`claims.said`: "I" as who said it, only sure pronouns
    resolved) when that clause reads as a sentence. A clause that does not (a fragment: "Answers.",
    a lone noun phrase, no verb) takes the whole sentence as its text instead. And when the
    clauses kept leave out content words of the sentence (a clause no claim came from, a word the
    reading dropped), the first claim takes the whole sentence, so that no memory of the sentence
    is worse evidence than the sentence itself.
    """
    if not built:
        return []
    whole = render(list(sent), me=me)
    out: list[Candidate] = []
    covered: set[str] = set()
    for b in built:
        c = b.candidate
        named = frozenset(sure(b.tokens, b.replace))
        if b.tokens and not c.meta.get("from_cause") and (gaps := holes(b.tokens)):
            # Its words with the phrases it left out between them put back: a text that says no less than it read.
            b = replace(b, tokens=sorted([*b.tokens, *gaps], key=lambda t: t.i))
            c = replace(c, text=render(b.tokens, sure(b.tokens, b.replace), me=me))
        if b.tokens and not sentence_like(b.tokens, named) and not c.meta.get("from_cause"):
            c = replace(c, text=whole, meta={**c.meta, "as_said": "sentence", "marks": sorted(marks(whole))})
            covered |= words_of(sent)
        elif b.tokens:
            covered |= words_of(b.tokens)
        out.append(c)
    missing = words_of(sent) - covered
    if missing and all(c.text != whole for c in out):
        first = next((k for k, b in enumerate(built) if b.tokens and not b.candidate.meta.get("from_cause")), 0)
        c = out[first]
        out[first] = replace(c, text=whole, meta={**c.meta, "as_said": "sentence", "marks": sorted(marks(whole))})
    named = frozenset(i for b in built for i in sure(b.tokens, b.replace))
    if leans_on_context(sent, named):
        # The sentence itself is too short to stand alone: the turn joins it to a neighbour.
        out = [leaning(replace(c, text=whole), sent) for c in out]
    elif not sentence_like(sent, named):
        # Whole, but not a sentence by itself (no verb, or under three content words): joined to a neighbour
        # of the turn too, and kept as said when there is none.
        out = [replace(c, text=whole, meta={**c.meta, "fragment": SHORT}) for c in out]
    return out


# What a clause may leave out between its own words: the other members of a coordination, and other clauses.
_SEPARABLE = frozenset({"conj", "cc", "advcl", "relcl", "ccomp", "parataxis", "punct", "mark", "intj", "discourse",
                        "appos", "preconj", "dep"})


def holes(tokens: Sequence[Any]) -> list[Any]:
    """Return the words a clause's tokens leave out between their first and last word that belong to a phrase
    depending on a word they keep other than as a conjunct or a clause of its own: "Elsie's in bed by 7:30
    and Arlo at 8:15" read as "Elsie is by 7:30 and Arlo at 8:15" leaves out "in bed", and its text would say
    less than the sentence while reading as complete. "I like tea and coffee" -> "I like coffee" leaves out
    a conjunct and keeps its meaning: no hole."""
    if not tokens:
        return []
    kept = {t.i for t in tokens}
    doc = tokens[0].doc
    out = []
    for i in range(min(kept), max(kept) + 1):
        if i in kept:
            continue
        top = doc[i]
        while top.head.i != top.i and top.head.i not in kept:
            top = top.head
        if top.head.i in kept and top.head.i != top.i and top.dep_ not in _SEPARABLE and not top.is_punct:
            out.append(doc[i])
    return out


def asks_the_assistant(sent: Any) -> bool:
    """Return True for a sentence that tells the listener what to do: an imperative clause (a base-form verb
    with no subject and no "to", main or adverbial) in a sentence of three content words or more."""
    return content_words(sent) >= 3 and any(
        t.tag_ == "VB" and t.dep_ in ("ROOT", "advcl", "conj") and not any(
            k.dep_ in ("nsubj", "nsubjpass", "expl") or k.dep_ == "aux" and k.lower_ == "to" for k in t.children)
        and not (t.dep_ == "conj" and any(k.dep_ in ("nsubj", "nsubjpass") for k in t.head.children)) for t in sent)


def points_back_to(tokens: Sequence[Any]) -> bool:
    """Return True for a cause that names something said before ("because of that failure"): a noun phrase
    with a demonstrative and no verb of its own refers back; it is not a new event."""
    return not any(t.pos_ in ("VERB", "AUX") and t.dep_ != "amod" for t in tokens) and any(
        t.dep_ == "det" and t.lower_ in ("this", "that", "these", "those") for t in tokens)


def states(c: Candidate) -> bool:
    """Return False for a claim that states nothing of its own.

    A claim whose value is only a pronoun ("Tom assigned it") says nothing the turn does not say
    better; a copula or an instruction with nothing after it ("I'm.", "Please delete.") states nothing.
    """
    return bool(c.value or c.attribute or c.category == "failure") and bool(
        c.value or c.negated or c.category == "failure" or not (
            c.category == "instruction" or c.meta.get("slot_phrase") in ("is", "is_a", "name")
            or c.attribute in lexicon.slot_families() or c.attribute == "name")) and \
        (c.value or "").lower() not in POINTER | {"them", "him", "her", "one"}


def attach_fragments(said: list[list[Candidate]]) -> list[list[Candidate]]:
    """Return the turn's statements with each fragment joined to the statement before it (else after it).

    A sentence too short to stand alone ("It was Matt Patterson.", "That's neat.") is evidence only
    beside what it follows: its words go onto the memory of the previous statement of the turn
    (or the next one), as said, so nothing is stored that is not a sentence and nothing said is
    lost. A turn made only of fragments stores nothing but what stands without a neighbour: a claim
    about someone or something named, a short sentence that does not lean on what came before
    (`SHORT`: "Table for six at Luca's, Friday 8pm."), one that leans but names something
    (`names_a_thing`: "This is from Osaka Miami!"), and one that says enough alone (`informative`: "It was a
    mix of drama and romance."), kept as said.
    """
    out: list[list[Candidate]] = []
    waiting: list[Candidate] = []
    for cands in said:
        if cands and all(c.meta.get("fragment") for c in cands):
            text = cands[0].text
            kept = next((k for k in range(len(out) - 1, -1, -1) if out[k]), None)
            if kept is not None and out[kept][-1].command is None:
                joined = f"{out[kept][-1].text} {text}"
                out[kept][-1] = _with_text(out[kept][-1], joined)
                # A claim the fragment makes ("..., it's Dr. Lindqvist") stays a claim, in the joined words.
                out.append([_claim_of(c, joined) for c in cands if _claims(c)])
            else:
                waiting.extend(cands)
                out.append([])
            continue
        if waiting and cands and cands[0].command is None:
            joined = " ".join([waiting[0].text, cands[0].text])
            cands = [_with_text(cands[0], joined), *cands[1:], *(_claim_of(c, joined) for c in waiting if _claims(c))]
            waiting = []
        out.append(cands)
    # Fragments with nothing to lean on: a claim about someone or something named, a correction ("Actually
    # it's 84, not 48."), a short sentence whole in itself, or one that names something, is kept in its own
    # words; the rest ("Looks great.") says nothing alone.
    out.append([c for c in waiting if (_claims(c) and (c.subject or c.old_value))
                or c.meta.get("fragment") == SHORT or c.meta.get("names") or c.meta.get("informative")])
    return out


def _claim_of(c: Candidate, joined: str) -> Candidate:
    """Return the memory of a fragment's own claim: in the joined words when its words lean on them ("It was
    Matt Patterson."); in its own when they do not ("I'm Alice."), so that it never carries the words of a
    neighbour's claim, which may later be superseded while it stays."""
    return c if c.meta.get("fragment") == SHORT else _with_text(c, joined)


def _claims(c: Candidate) -> bool:
    """Return True for a candidate that holds a claim (a slot and a value), not only words."""
    return bool(c.attribute and c.value and c.meta.get("rule") != "note")


def _with_text(c: Candidate, text: str) -> Candidate:
    return replace(c, text=text, meta={**c.meta, "marks": sorted(marks(text)), "joined": True})


CONTEXT_SENTENCES = 3  # a memory's context: this many sentences of its speaker either side of its own


def said_with(chunks: Sequence[tuple[Speaker, str]], k: int) -> str:
    """Return what the sentence of chunk `k` was said with: its speaker's name and the sentences of the same
    speaker around it, as said. Search reads a memory's words with these (store.search_lexical), so a
    clause that leans on its turn ("It stands for love, faith and strength.") is found by the turn's words
    ("necklace"); it is never packed, and it is bounded, so a long turn does not repeat itself per memory."""
    speaker = chunks[k][0]
    near = [text for j, (who, text) in enumerate(chunks) if who == speaker and abs(j - k) <= CONTEXT_SENTENCES]
    return " ".join(([] if speaker.key == USER_SPEAKER.key else [f"{speaker.display}:"]) + near)


def labelled(c: Candidate) -> Candidate:
    """Return a transcript speaker's memory with the speaker named, as the line was ("Caroline: It stands for
    love, faith and strength."), unless its words name them already ("Caroline went to a support group."):
    who said it is part of the evidence, and the words stay as said."""
    who = c.meta.get("said_by")
    if not who or c.command is not None or re.search(rf"\b{re.escape(who)}\b", c.text, re.IGNORECASE):
        return c
    return replace(c, text=f"{who}: {c.text}")
