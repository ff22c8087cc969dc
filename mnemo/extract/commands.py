"""Requests about the memory itself, read from the parse: forget this, remember that.

    command_verb(sentence)            # ("forget" | "remember", verb) or None
    target(verb)                      # the tokens naming what to forget or remember, and "old" / "new"
    forget_request(target, ...)       # the forget command a target names (entity, slot, marks, terms)

An imperative whose verb removes ("forget / delete / wipe X", `assets/words/removal_verbs.txt`),
about something the assistant holds (the speaker's, a stored statement, "from your notes"), or a
negated keep ("don't keep my address") asks to forget; "remember / note / keep in mind that X"
(`assets/words/retention_verbs.txt`) and "don't forget that X" ask to remember.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import lexicon
from ..model import Candidate
from ..normalise import canonical_attribute, content_tokens
from . import claims as claims_mod
from . import entities, slots
from .clauses import analyse, subtree
from .render import render

POINTER = frozenset({"this", "that", "it", "these", "those"})


def command_verb(sent: Any) -> tuple[str, Any] | None:
    """Return ("forget" | "remember", the verb) when the sentence asks the assistant to drop or keep something.

    The request's verb is the sentence's first verb when it has no subject but "you" and is no
    infinitive (an imperative, with "please", "can you", "don't" before it), or the verb a "want /
    need you to" governs (not "I need to ...", which is the user's own task). A removal verb asks
    to forget; a keep verb asks to remember, or to forget when negated.
    """
    verbs = [t for t in sent if t.pos_ in ("VERB", "AUX") and t.dep_ not in ("aux", "auxpass")]
    if not verbs:
        return None
    root = sent.root if sent.root.pos_ in ("VERB", "AUX") else verbs[0]
    first = verbs[0]
    # An infinitive is never an imperative: "any tips on how much to save?" asks nothing to be saved.
    candidates = [v for v in dict.fromkeys([first, root]) if not _infinitive(v)]
    addressed = any(c.lower_ == "you" for c in root.children)
    for c in root.children:
        # "I need you to log this" asks the assistant; "I need to log user consent" says what the user must do.
        if c.dep_ in ("xcomp", "ccomp") and root.lemma_ in ("want", "need", "like", "would", "ask") and (
                addressed or any(g.dep_ in ("nsubj", "nsubjpass") and g.lower_ == "you" for g in c.children)):
            candidates.insert(0, c)
    for verb in candidates:
        found = as_command(verb)
        if found is not None:
            return found
    return None


def _object_predicative(verb: Any) -> bool:
    """Return True for "keep X short", "keep it brief": a verb with an object complement says how X should
    be, it does not ask to store X (an adjective right after the object counts: the parser often hangs it
    elsewhere)."""
    if any(c.dep_ in ("oprd", "acomp") for c in verb.children):
        return True
    obj = next((c for c in verb.children if c.dep_ == "dobj"), None)
    after = obj.right_edge.i + 1 if obj is not None else None
    return after is not None and after < len(verb.doc) and verb.doc[after].pos_ == "ADJ"


def _infinitive(verb: Any) -> bool:
    return any(c.dep_ == "aux" and c.tag_ == "TO" for c in verb.children)


def names_memory(verb: Any) -> bool:
    """Return True when "delete / remove / wipe X" is about what the assistant holds, not about files.

    The object is the speaker's ("my phone number"), a stored statement ("that", "the bit about
    X"), or the request says where from ("from your notes / memory").
    """
    for t in subtree(verb):
        if t.i == verb.i:
            continue
        low = t.lower_
        if low in ("my", "me", "mine", "our", "us", "i") or low in POINTER and t.head.i == verb.i:
            return True
        if low in ("memory", "memories", "notes", "records") and any(a.lower_ == "from" for a in t.ancestors):
            return True
        if t.lemma_.lower() in lexicon.words("container_nouns") and t.head.i == verb.i:
            return True
    return False


def as_command(verb: Any) -> tuple[str, Any] | None:
    subj = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if not (subj is None or subj.lower_ == "you") or verb.tag_ not in ("VB", "VBP"):
        return None
    negated = any(c.dep_ == "neg" for c in verb.children)
    lemma = verb.lemma_.lower()
    if lemma in lexicon.words("removal_verbs") and negated:
        # "Don't forget that I'm allergic to shellfish" asks to remember.
        return "remember", verb
    if lemma in lexicon.words("removal_verbs") and (lemma in ("forget", "unlearn") or names_memory(verb)):
        return "forget", verb
    if lemma in ("stop",) and any(c.dep_ == "xcomp" and c.lemma_ in lexicon.words("retention_verbs")
                                  for c in verb.children):
        return "forget", verb
    if lemma in lexicon.words("retention_verbs") and not _object_predicative(verb):
        return ("forget" if negated else "remember"), verb
    if lemma == "make" and any(c.lower_ == "note" for c in verb.children):
        return "remember", verb
    return None


def target(verb: Any) -> tuple[list[Any], str | None]:
    """Return the tokens naming what a forget / remember request is about, and a qualifier (old / new).

    "Forget what I said about Tom" is about Tom; "forget the lead time for IC-MC-44" keeps the
    preposition the parse hung on the verb.
    """
    said = next((c for c in verb.children if c.dep_ == "ccomp" and c.lemma_ in ("say", "tell", "mention", "write")),
                None)
    about = next((c for c in said.children if c.dep_ == "prep" and c.lower_ in ("about", "regarding", "on")),
                 None) if said is not None else None
    if about is not None:
        pobj = next((c for c in about.children if c.dep_ == "pobj"), None)
        if pobj is not None:
            return subtree(pobj), None
    found, qual = target_np(verb)
    extra = [p for p in verb.children if p.dep_ == "prep" and p.lower_ in ("for", "of", "on") and found
             and found[0].dep_ != "ccomp" and p.i > max(t.i for t in found)
             and any(x.dep_ == "pobj" and x.pos_ in ("NOUN", "PROPN") for x in p.children)]
    if extra:
        found = sorted([*found, *subtree(extra[0])], key=lambda t: t.i)
    return found, qual


def target_np(verb: Any) -> tuple[list[Any], str | None]:
    obj = next((c for c in verb.children if c.dep_ in ("dobj", "ccomp", "xcomp", "attr", "oprd")), None) or next(
        (c for c in verb.children if c.i > verb.i and c.pos_ in ("NOUN", "PROPN")
         and c.dep_ in ("npadvmod", "dep", "appos", "nmod", "nsubj")), None)
    about = next((c for c in verb.children if c.dep_ == "prep" and c.lower_ in ("about", "on", "regarding")), None)
    if obj is None and about is None:
        return [], None
    if obj is not None and obj.lemma_.lower() in lexicon.words("container_nouns") | {"what", "anything", "all"}:
        inner = next((c for c in obj.children if c.dep_ == "prep" and c.lower_ in ("about", "on", "regarding", "of")),
                     None) or about
        if inner is None and obj.dep_ in ("ccomp",):
            return subtree(obj), None
        if inner is not None:
            pobj = next((c for c in inner.children if c.dep_ in ("pobj", "pcomp")), None)
            if pobj is not None:
                obj = pobj
            elif obj.lower_ in ("everything", "all", "anything"):
                return [obj], None
    elif obj is None and about is not None:
        obj = next((c for c in about.children if c.dep_ in ("pobj", "pcomp")), None)
    if obj is None:
        return [], None
    toks = [t for t in subtree(obj) if not (t.dep_ == "prep" and t.lower_ == "from") and t.head.lower_ != "from"]
    toks = [t for t in toks if not any(a.lower_ == "from" for a in t.ancestors if a.i > obj.i)]
    # "the locker code I gave you", "the address I mentioned": a relative clause whose subject is the speaker
    # says how it was shared, not what it is.
    told = {t.i for r in subtree(obj) if r.dep_ == "relcl" and any(
        k.dep_ == "nsubj" and k.lower_ in ("i", "we") for k in r.children) for t in subtree(r)}
    toks = [t for t in toks if t.i not in told]
    qual = next((t.lower_ for t in toks if t.lower_ in ("old", "previous", "former", "current", "new")), None)
    return toks, qual


def forget_request(target: list[Any], qualifier: str | None, source: str, mentions: entities.Mentions,
                   now: datetime | None) -> list[Candidate] | None:
    """Return the forget command for the target phrase of a request; None when it only points ("forget that")."""
    meta: dict[str, Any] = {"source_text": source, "rule": "command.forget", "extractor": claims_mod.EXTRACTOR}
    words = [t for t in target if t.lower_ not in ("old", "previous", "former", "current", "new")]
    low = " ".join(t.lower_ for t in words)
    if not words or low in ("everything", "all", "anything", "all memories", "all of it", "all data") or (
            words[0].lower_ in ("everything", "all") and all(t.lower_ in ("everything", "all", "about", "me", "my",
                                                                       "memories", "data", "of", "you", "know")
                                                          for t in words)):
        meta["forget"] = {"terms": [], "qualifier": qualifier, "scope": "all"}
        return [Candidate(text=source, category="note", command="forget", importance=1.0, single_valued=False,
                          meta=meta)]
    if len(words) == 1 and words[0].lower_ in POINTER:
        return None
    ids = {t.i for t in words}
    head = next((t for t in words if t.head.i not in ids or t.head.i == t.i), words[-1])
    subject, attribute, value = None, None, None
    if head.pos_ in ("VERB", "AUX"):
        # "Forget that I live in Berlin": the request names a statement; take its claim.
        said = [b.candidate for b in claims_mod.claim(analyse(head, None, head.sent, set()), mentions, now,
                                                       source)]
        if said:
            subject, attribute, value = said[0].subject, said[0].attribute, said[0].value
            meta["slot_phrase"] = said[0].meta.get("slot_phrase")
    owner_slot = entities.attribute_of(head, mentions) if attribute is None else None
    if owner_slot is None and attribute is None and head.pos_ == "NOUN":
        owner = next((x for p in words if p.dep_ == "prep" and p.lower_ in ("for", "of", "on") and p.head.i not in ids
                      for x in p.children if x.dep_ == "pobj"), None)
        if owner is not None:
            owner_slot = (entities.entity_of(owner, mentions), [*entities.modifiers(head), head])
    if owner_slot is not None:
        owner_slot = (owner_slot[0], [w for w in owner_slot[1] if w.lower_ not in entities.NOT_KIND]
                      or owner_slot[1])
        owner, slot_words = owner_slot
        subject = owner.key
        phrase = slots.slot_words_key(slot_words)
        attribute = canonical_attribute(slots.canonical_slot(phrase, "*", relation=False)[0]) if phrase else None
        meta["slot_phrase"] = phrase
    elif attribute is None:
        entity = entities.entity_of(head, mentions)
        subject = entity.key
        meta["subject_display"] = entity.display
    terms = sorted(content_tokens(" ".join(t.text for t in words)) - {"old", "previou", "former", "current", "new",
                                                                       "note", "memory", "memorie", "thing"})
    meta["forget"] = {"terms": terms, "qualifier": qualifier,
                      "scope": subject if subject in ("user", "team") and not attribute else None}
    if any(t.lower_ == "about" for t in head.ancestors) and any(
            t.lower_ in ("everything", "anything", "all") for t in head.sent):
        # "Forget everything about my dog": every memory whose subject is the dog, not only its "dog" slot.
        meta["forget"]["about"] = f"{subject}'s {attribute.replace('_', ' ')}" if subject and attribute else subject
    # The names, numbers and identifiers the request says, wherever they stand in it ("Forget Tom").
    meta["marks"] = sorted({t.lower_.removesuffix("'s") for t in words if t.pos_ == "PROPN" or t.like_num
                            or any(ch.isdigit() for ch in t.text) or "@" in t.text})
    shown = render(words)
    return [Candidate(text=shown, kind="semantic", category="note", subject=subject, attribute=attribute, value=value,
                      command="forget", importance=1.0, single_valued=False, meta=meta)]
