"""Memory text from parsed tokens: the speaker's words in the third person, as a full sentence.

    render(tokens, replace={i: "the user's mechanic"})   # "The user's mechanic put his rate up to 60 GBP."

The first person singular becomes who said it (`me`: "the user", or a transcript's speaker by
name: I, me, my -> "Owen", "Owen's"), and the finite verb of such a subject agrees with it ("I
am" -> "the user is"). The first person plural stays as said: "we" may be a household, a team
or a family, and the words do not say which. Everything else is kept as written, with the
parse's own whitespace, but for leading filler ("please", "oh", "so") and what `replace` names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

Token = Any
_FIRST = ("i", "me", "my", "mine", "myself")
_AGREE = {"am": "is", "'m": "is", "are": "is", "'re": "is", "have": "has", "'ve": "has", "do": "does",
          "were": "was", "was": "was", "'d": "would", "'ll": "will"}
_IRREGULAR = {"go": "goes", "be": "is", "wanna": "wants to"}
LEADING_FILLER = frozenset("please pls oh ah well so hey hi hello ok okay yes yeah also and but anyway btw".split())


def third_person_verb(verb: str) -> str:
    """Return the third person singular of a present-tense verb (go -> goes, try -> tries)."""
    low = verb.lower()
    if low in _AGREE:
        return _AGREE[low]
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low.endswith(("sh", "ch", "x", "z", "o", "ss")):
        return verb + "es"
    if len(low) > 2 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    if low.endswith("s"):
        return verb
    return verb + "s"


def _finite(subject: Token) -> Token | None:
    """Return the present-tense finite verb or auxiliary a first-person subject governs, if any."""
    head = subject.head
    for c in head.children:
        if c.dep_ in ("aux", "auxpass") and c.i > subject.i:
            return c if c.tag_ in ("VBP", "VBD") or c.lower_ in ("'d", "'ll") else None
    bare = head.tag_ in ("VB", "IN") and head.lower_ == head.lemma_.lower() and head.dep_ == "ROOT"
    if head.i > subject.i and (head.tag_ in ("VBP", "VBD") or (head.tag_ == "VB" or bare) and not any(
            c.dep_ in ("aux", "auxpass") for c in head.children)):
        return head
    return None


def stage_direction(tokens: Sequence[Token]) -> bool:
    """Return True for a transcript's stage direction: a verb phrase in square brackets with no subject
    ("[shares a photo of a sunset]", "[laughs]"), which narrates what the speaker of the line does."""
    inner = [t for t in tokens if not t.is_space]
    if len(inner) < 3 or inner[0].text != "[" or inner[-1].text != "]":
        return False
    head = inner[1]
    return head.pos_ == "VERB" and head.tag_ in ("VBZ", "VBD") and not any(
        c.dep_ in ("nsubj", "nsubjpass", "expl") for c in head.children)


def _perfect(aux: Token) -> bool:
    """Return True when a contracted "'s" is "has": before "been", or the auxiliary of a participle with an
    object ("she's started a course", "he's got a new job"), which no passive "is" takes."""
    nxt = aux.nbor() if aux.i + 1 < len(aux.doc) else None
    while nxt is not None and nxt.pos_ == "ADV" and nxt.i + 1 < len(aux.doc):
        nxt = nxt.nbor()
    if nxt is not None and nxt.lower_ == "been":
        return True
    head = aux.head
    return head.tag_ == "VBN" and any(c.dep_ in ("dobj", "xcomp", "ccomp") for c in head.children)


def _first(low: str, me: str) -> str:
    """Return what a first-person singular pronoun becomes when `me` said it ("myself": themselves, as a
    reflexive takes its own subject's place: "I'll cover the other days myself" -> "the user will cover the
    other days themselves")."""
    return f"{me}'s" if low in ("my", "mine") else "themselves" if low == "myself" else me


def render(tokens: Sequence[Token], replace: Mapping[int, str] | None = None, *, third: bool = True,
           me: str = "the user") -> str:
    """Return the tokens as one sentence in the third person for whoever `me` is (see the module docstring)."""
    replace = dict(replace or {})
    toks = list(tokens)
    # A stage direction's clause ("[shares a photo]") says what the speaker does: it takes them as its subject.
    acting = third and bool(toks) and toks[0].sent.root in toks and stage_direction(list(toks[0].sent))
    while toks and (toks[0].is_punct or toks[0].dep_ in ("intj", "cc") or toks[0].lower_ in LEADING_FILLER):
        toks.pop(0)
    # A name said to the listener before a comma ("John, I've been ...") addresses them; it says nothing.
    names = next((k for k, t in enumerate(toks) if t.pos_ != "PROPN"), len(toks))
    if 0 < names < len(toks) and toks[names].text == "," and all(
            t.dep_ not in ("nsubj", "nsubjpass") for t in toks[:names]):
        toks = toks[names + 1:]
    while toks and toks[-1].is_punct and toks[-1].text not in (")", '"', "'"):
        toks.pop()
    if third:
        for t in toks:
            low = t.lower_
            if t.i in replace or t.pos_ != "PRON" or low not in _FIRST:
                continue
            replace[t.i] = _first(low, me)
            if t.dep_ in ("nsubj", "nsubjpass") and low == "i":
                verb = _finite(t)
                if verb is not None and verb.i not in replace:
                    word = verb.text if verb.lower_ not in _AGREE else _AGREE[verb.lower_]
                    replace[verb.i] = word if verb.tag_ == "VBD" or verb.lower_ in _AGREE else third_person_verb(word)
        for t in toks:
            # "they" resolved to one named thing takes a singular verb only when replaced by the caller.
            if t.i in replace and t.dep_ in ("nsubj", "nsubjpass") and t.lower_ == "they":
                verb = _finite(t)
                if verb is not None and verb.i not in replace and verb.lower_ in ("are", "'re", "have", "'ve", "were"):
                    replace[verb.i] = _AGREE[verb.lower_]
        for t in toks:
            # A pronoun spelled out as a noun phrase takes its contracted verb in full: "it's" -> "the X is".
            nxt = t.nbor() if t.i + 1 < len(t.doc) else None
            if t.i in replace and t.pos_ == "PRON" and nxt is not None and nxt.i not in replace and \
                    nxt.text.startswith("'") and nxt.lemma_ in ("be", "have"):
                replace[nxt.i] = _AGREE.get(nxt.lower_, "is" if nxt.lemma_ == "be" and not _perfect(nxt) else "has")
    ids = {t.i for t in toks}
    # A comma that bordered a left-out clause ("The report, which ..., is due") goes with it.
    toks = [t for t in toks if not (t.text == "," and ((t.i + 1) not in ids or (t.i - 1) not in ids))]
    ids = {t.i for t in toks}
    parts: list[str] = []
    for k, t in enumerate(toks):
        word = replace[t.i] if t.i in replace else as_written(t)
        if t.i in replace and t.text.startswith("'") and parts and not parts[-1].endswith(" "):
            parts.append(" ")
        elif word[0] in "'\u2019" and parts and parts[-1].endswith(" "):
            parts[-1] = parts[-1].rstrip(" ")  # a clitic read again written out ("master is") joins its word again
        gap = t.whitespace_ if (t.i + 1) in ids or k == len(toks) - 1 else " "
        parts.append(word + gap)
    text = re.sub(r"\s+", " ", "".join(parts)).strip()
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    text = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", text).strip(" ,;:")
    if not text:
        return ""
    if acting:
        text = f"{me} {text[0].lower()}{text[1:]}"
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?", '"', ")")) else text + "."


def as_written(t: Token) -> str:
    """Return a token's text as it was written: the parser may have read it again written out (`parser._pipe`)."""
    return getattr(t._, "said", None) or t.text


# Pronouns a memory's text may spell out: he and she name one person, and the turn resolves them to a
# person it named. "It" and "they" may stand for a clause, a group or a thing: the text keeps them as said
# (the claim's subject still holds what the turn resolved them to).
SURE_PRONOUNS = frozenset({"he", "him", "his", "she", "her", "hers"})


def sure(tokens: Sequence[Token], replace: dict[int, str] | None) -> dict[int, str]:
    """Return the replacements a memory's text may make: sure pronouns, and what is not a pronoun."""
    return {i: r for i, r in (replace or {}).items() if not tokens or tokens[0].doc[i].pos_ != "PRON"
            or tokens[0].doc[i].lower_ in SURE_PRONOUNS or tokens[0].doc[i].tag_ in ("WDT", "WP", "WP$")}


def said(tokens: Sequence[Token], replace: dict[int, str] | None, me: str) -> str:
    """Return a clause's memory text: its own words, "I" as who said it, and only the sure pronouns resolved."""
    return render(tokens, sure(tokens, replace), me=me)
