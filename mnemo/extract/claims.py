"""Claims from clauses: who a statement is about, which slot it fills, with what value and polarity.

    for clause in clauses.heads(sent): claim(clause, mentions, now)  -> Candidate | None

The subject of a claim is an entity key (normalise.canonical_subject): "user" for I / me / my,
"team" for we / our, an identifier verbatim and upper-cased ("KT-40"), a named thing or person
lower-cased, or an owned thing ("user's sister", "user's mother-in-law"). The slot comes from the
construction, never from a sentence pattern:

- attribute: "my personal email is X", "KT-40's warranty is X", "the warranty period for model
  KT-40 is X", "part QX-5 has a lead time of X": the possessor, or the object of "of" / "for", is
  the subject; the owned noun with its modifiers is the slot (lemmatised: "warranty period").
- relation: "I work at Acme as a nurse" -> work_at = Acme (and work_as = nurse as a second claim);
  "my sister lives in Porto" -> live_in = Porto, about "user's sister". A preposition whose
  verb_prep phrase the slot table knows is preferred (it names a canonical slot: live_in -> city).
- typed: a copula or change with no attribute noun ("invoice INV-77 is for 1200 EUR", "we moved
  the standup to 10am") takes its slot from the value's type (amount for money, time, date, ...).

`assets/words/slots.tsv` maps phrases to canonical slots ("lead time" and "delivery time" -> lead_time,
live_in / move_to a place -> city) and gives cardinality; a phrase it does not know keeps its own
snake_case name. Pronouns are resolved within the turn by `Mentions` (most recent compatible
entity) where the parse makes it clear; unresolved ones leave the subject unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import replace as replace_field
from datetime import datetime
from typing import Any

from .. import lexicon
from ..model import Candidate
from ..normalise import normalise_value, parse_date
from .categories import BASE_IMPORTANCE, KIND_OF, category_of
from .clauses import Clause, conjuncts, speaker_dropped, subtree
from .entities import (
    NOT_KIND,
    TEAM,
    Entity,
    Mentions,
    attribute_of,
    entity_of,
    is_kin,
    modifiers,
    name_of,
    resolved_pronouns,
    span_text,
)
from .parser import IDENTIFIER
from .render import said
from .slots import (
    MEASURED,
    TYPED_SLOTS,
    attribute_noun,
    bare_attribute,
    canonical_slot,
    known_relation,
    noun_number,
    relation_phrase,
    role_noun,
    slot_words_key,
)
from .values import concrete, marks, proper_word, said_new, value_type

Token = Any


EXTRACTOR = "offline-parser-v2"
ADDITIVE = frozenset({"also", "too", "additionally", "either"})  # additive focus particles (closed class)


def _value_text(tokens: list[Token]) -> str:
    toks = list(tokens)
    while toks and (toks[0].dep_ in ("det", "case", "prep") or toks[0].lower_ in ("to", "from", "of", "for", "a",
                                                                                 "an", "the", "about")):
        toks.pop(0)
    while toks and (toks[-1].is_punct or toks[-1].lower_ in ("now", "anymore", "again", "too")):
        toks.pop()
    return span_text(toks)


@dataclass
class Built:
    """What `claim` found in one clause, before the turn decides what to keep."""

    candidate: Candidate
    entity: Entity
    tokens: list[Token]
    value_ids: frozenset[int] = frozenset()  # the tokens of its value, and the preposition that carried it
    replace: dict[int, str] | None = None
    relation: bool = False  # its slot is a verb relation ("work_at"), not an attribute noun
    me: str = "the user"  # who "I" is in its text
    conjunct: bool = False  # one of several values said together ("action and sci-fi"), in their sentence's words


def claim(c: Clause, mentions: Mentions, now: datetime | None, source: str) -> list[Built]:
    """Return the claims of one clause: usually one; an appositive name or a second relation adds one."""
    subj_entity: Entity | None = None
    slot_tokens: list[Token] = []
    relation = False
    value_tokens = c.value
    vtype = value_type(c.verb.doc[value_tokens[0].i:value_tokens[-1].i + 1]) if value_tokens else "none"
    thing = c.obj if c.change and c.obj is not None else c.subject
    if c.relative_of is not None and c.relative_pronoun is not None and c.relative_pronoun.dep_.startswith("nsubj"):
        thing = c.relative_of
    if c.subject is not None and not any(t.pos_ == "PRON" for t in subtree(c.subject)):
        # The subject is known before its pronouns are: "Rui put his fee up" resolves "his" to Rui.
        mentions.add(entity_of(c.subject, mentions))
    # "my email is X", "Flat 2's rent is X" fill an attribute of the owner; "my sister is a doctor", "my
    # daughter is allergic to X", "my car is red" say something of the owned thing itself.
    value_like = vtype in TYPED_SLOTS or not (c.prep and "_" in c.prep) and not (
        value_tokens and value_tokens[0].lower_ in ("a", "an")) and not (
        len(value_tokens) == 1 and value_tokens[0].pos_ == "ADJ" and not (
            proper_word(value_tokens[0]) and thing is not None and attribute_noun(thing)
            or proper_word(value_tokens[0]) and value_tokens[0].ent_type_ not in ("", "NORP")))
    # A change the verb carries ("moved to", "from X to Y") is of the owned noun; "now" alone does not make
    # "my flight now leaves at 8:15" a change of the user's flight: it is still the flight's relation.
    changed = c.change and (c.copula or c.prep == "to" or bool(c.old_value))
    owner_slot = attribute_of(thing, mentions) if thing is not None and (
        changed or c.copula and value_like) else None
    if owner_slot is None and thing is not None and thing.pos_ == "NOUN" and c.copula:
        owner_slot = _identified_by_verb(c, thing, mentions)
    if owner_slot is not None and thing.pos_ != "PRON":
        mentions.attributes[entity_of(thing, mentions).key or ""] = owner_slot
    elif owner_slot is None and thing is not None and thing.pos_ == "PRON" and c.copula and value_like:
        # A pronoun for an attribute named before fills that attribute ("my manager is not Priya, it's Daniel").
        found = mentions.resolve(thing.lower_)
        owner_slot = mentions.attributes.get(found.key or "") if found is not None else None
    if owner_slot is None and c.change and c.obj is not None and thing is not None and thing.i == c.obj.i:
        # "We changed the supplier for IC-MC-44 to Bolt": whose supplier hangs off the verb.
        owner = next((x for p in c.verb.children if p.dep_ == "prep" and p.lower_ in ("for", "of", "on")
                      for x in p.children if x.dep_ == "pobj"), None)
        if owner is not None:
            owner_slot = (entity_of(owner, mentions), [*modifiers(thing), thing])
    if thing is not None and c.verb.lemma_ == "have" and not c.change:
        # "part QX-5 has a lead time of 14 days": the object names the attribute, "of" carries the value.
        obj = next((k for k in c.verb.children if k.dep_ == "dobj"), None)
        of = next((k for k in obj.children if k.dep_ == "prep" and k.lower_ == "of"), None) if obj is not None else None
        pobj = next((k for k in of.children if k.dep_ == "pobj"), None) if of is not None else None
        if pobj is not None:
            owner_slot = (entity_of(thing, mentions), [t for t in [*modifiers(obj), obj] if t.pos_ != "PROPN"])
            value_tokens = subtree(pobj)
            vtype = value_type(c.verb.doc[value_tokens[0].i:value_tokens[-1].i + 1])
    inverted = _inverted(c, mentions)
    if inverted is not None:
        owner_slot, value_tokens = inverted
        vtype = value_type(c.verb.doc[value_tokens[0].i:value_tokens[-1].i + 1])
    if owner_slot is None and inverted is None and c.copula and thing is not None and role_noun(thing):
        # "The team lead is X" said in a team's chat is our team lead.
        owner_slot = (TEAM, [thing])
    elif owner_slot is None and inverted is None and thing is not None and (c.copula or c.change) and bare_attribute(thing):
        # "The deadline moved to the 10th": the deadline of whatever the turn was just about.
        own = entity_of(thing, mentions).key
        owner = next((e for e in reversed(mentions.seen) if e.key != own), None)
        owner_slot = (owner or Entity(None, ""), [thing])
    if owner_slot is not None:
        subj_entity, slot_tokens = owner_slot
        slot_tokens = [t for t in slot_tokens if t.lower_ not in NOT_KIND] or slot_tokens
        phrase = slot_words_key(slot_tokens)
    else:
        subj_entity = entity_of(thing, mentions) if thing is not None else (
            mentions.me if c.imperative or speaker_dropped(c) else Entity(None, ""))
        if c.copula and c.prep is None:
            phrase = TYPED_SLOTS.get(vtype, "is")
            if phrase == "is" and value_tokens and any(t.lower_ in ("a", "an") for t in value_tokens[:1]):
                phrase = "is_a"
            elif phrase == "is" and vtype == "name" and subj_entity.person:
                phrase = "name"
            elif phrase == "is" and subj_entity.person and len(value_tokens) == 1 and value_tokens[0].tag_ == "CD" \
                    and value_tokens[0].text.isdigit() and int(value_tokens[0].text) < 130:
                # "I'm 43", "Elsie's 6": a bare number said of a person is their age.
                phrase, vtype = "age", "age"
        elif c.change and c.obj is None and c.prep == "to" and not (
                c.verb.lemma_ in ("move", "relocate") and vtype in ("place", "name", "org")) and (
                not known_relation(f"{c.verb.lemma_.lower()}_to") or c.verb.lemma_ in lexicon.words("change_verbs")):
            # "slipped to 19 July": the verb is the change; "I now report to Farid" keeps its relation (report_to).
            phrase = TYPED_SLOTS.get(vtype, c.verb.lemma_)
        elif c.change and c.obj is not None:
            phrase = TYPED_SLOTS.get(vtype, c.verb.lemma_)
        else:
            relation = True
            phrase = relation_phrase(c, vtype)
            value_tokens = c.value
            named = None if c.verb.lemma_ in lexicon.words("preference_verbs") else _named_kind(value_tokens)
            if named is not None:
                # "plays the position of goalkeeper", "is associated with the sport of X": the noun names the slot.
                slot_noun, value_tokens = named
                phrase, relation = slot_words_key([*modifiers(slot_noun), slot_noun]), False
                inverted = inverted or ((subj_entity, []), value_tokens)
            maker = _made(c, subj_entity, mentions)
            if maker is not None:
                # "Yasushi Akimoto founded AKB48" and "AKB48 was founded by X" are one claim about AKB48.
                subj_entity, value_tokens, phrase = maker
                inverted = inverted or ((subj_entity, []), value_tokens)
            vtype = value_type(c.verb.doc[value_tokens[0].i:value_tokens[-1].i + 1]) if value_tokens else "none"
    value_tokens = value_tokens if inverted is not None or (owner_slot is not None and c.verb.lemma_ == "have") \
        else c.value
    if c.relative_pronoun is not None and any(t.i == c.relative_pronoun.i for t in value_tokens):
        # "the album, which we recorded at X": the object pronoun stands for the noun it modifies.
        value_tokens = [t for t in subtree(c.relative_of) if t.dep_ not in ("relcl", "punct") and not any(
            a.dep_ == "relcl" for a in t.ancestors if a.i > c.relative_of.i - 1 and a is not c.relative_of)]
        value_tokens = [t for t in value_tokens if t.i <= c.relative_of.i]
    counted = noun_number(value_tokens)
    if counted is not None and owner_slot is None and (relation or phrase in ("is_a", "is")):
        # "takes a size 34", "is a size 29": the noun names the slot, the number is the value.
        noun, value_tokens = counted
        phrase, relation, vtype = noun.lemma_.lower(), False, "number"
    slot, single, table_category = canonical_slot(phrase, vtype, relation=relation)
    if phrase in ("is", "is_a") and owner_slot is None:
        # A bare copula says what a thing is like or is one of ("Elise is very passionate", "is a teacher"): a
        # thing has many properties and kinds at once, so no one of them replaces another.
        single = False
    if not single and c.copula and owner_slot is not None and slot_tokens and slot_tokens[-1].tag_ == "NN" and \
            vtype != "name" and not is_kin(slot_tokens[-1]) and not role_noun(slot_tokens[-1]):
        # "Germany's official language is German", "my favourite sport is rugby": a singular attribute noun said
        # with "is" names the one value it has (a definite description), whatever the slot holds elsewhere ("I
        # speak French and German"); a person ("my friend is Tom", kin, a role) stays one of several.
        single = True
    if relation and phrase == f"{c.verb.lemma_.lower()}_by" and c.verb.lemma_.lower() in lexicon.words("maker_verbs"):
        # A made thing has one maker: a new one replaces the old.
        single = True
    if relation and vtype in MEASURED - {"number"}:
        # A relation measured by an amount, a date or a time holds one value at a time ("owes £850").
        single = True
    if c.prep == "status":
        slot, single, table_category = "status", True, None
    elif c.copula and c.prep and owner_slot is None:
        if "_" in c.prep:
            slot, single, table_category = canonical_slot(c.prep, vtype, relation=True)
        elif known_relation(f"be_{c.prep}") and canonical_slot(f"be_{c.prep}", vtype, relation=True)[0] != \
                f"be_{c.prep}":
            slot, single, table_category = canonical_slot(f"be_{c.prep}", vtype, relation=True)
        elif vtype in TYPED_SLOTS:
            slot, single, table_category = canonical_slot(TYPED_SLOTS[vtype], vtype, relation=False)
        else:
            slot, single, table_category = canonical_slot(f"be_{c.prep}", vtype, relation=True)
    if c.imperative and c.prep == "me":
        slot, single, table_category = canonical_slot(f"{c.verb.lemma_}", vtype, relation=True)
        slot = "preferred_name" if slot == "name" else slot
        single, subj_entity = True, mentions.me
    if c.copula and any(t.lemma_ == "due" and t.dep_ == "acomp" for t in c.tokens) and vtype == "date":
        slot, single, table_category = "deadline", True, "deadline"
    if c.verb.lemma_ == "prefer" and vtype == "name":
        slot, single, table_category = "preferred_name", True, "preference"
    if subj_entity.key is None and not value_tokens:
        return []
    replace = resolved_pronouns(c, mentions)
    tokens = c.tokens
    if c.relative_of is not None:
        tokens, replace = _relative(c, mentions, replace)
    category = category_of(c, slot, subj_entity, table_category, vtype)
    frame = _Frame(c, subj_entity, slot, single, category, phrase, source, now, _about(c, subj_entity, mentions),
                   mentions.me.display)
    out: list[Built] = []
    parts = conjuncts(value_tokens) if not single or relation else [value_tokens]
    if relation and value_tokens:
        # "I keep bees, two hives at the bottom of the garden": a counted second object is a value too.
        ids = {t.i for p in parts for t in p}
        parts += [[t for t in subtree(k) if t.dep_ != "prep" and t.head.dep_ != "prep" and
                   not any(a.dep_ == "prep" and a.i > k.i for a in t.ancestors)]
                  for k in c.verb.children if k.dep_ in ("oprd", "appos", "npadvmod") and k.pos_ == "NOUN"
                  and k.i not in ids and any(x.like_num for x in k.children)]
    for part in parts:
        # Each of several values said together is a claim of its own, in the words they were said in: "I love
        # action and sci-fi films" is kept as said, not as "loves action" and "loves sci-fi".
        built = frame.build(part, tokens, replace)
        built.relation = relation
        built.conjunct = len(parts) > 1
        out.append(built)
    if (relation or c.copula or c.verb.lemma_ in ("sign", "submit", "deliver", "finish", "complete")) \
            and not c.change:
        out.extend(_second_relations(c, frame, tokens, replace, value_tokens))
        out = _separate(out)
    if thing is not None and thing.pos_ == "NOUN" and subj_entity.key and \
            not subj_entity.key.endswith(thing.lemma_.lower()):
        # "his sister Ada is 13": the name is the sister's, not her brother's (the clause's subject entity).
        owned = Entity(f"{subj_entity.key}'s {thing.lemma_.lower()}", f"{subj_entity.display}'s {thing.lemma_.lower()}")
    else:
        owned = subj_entity
    # The name is said where its noun is: a clause that shares its subject with the one before ("noor is 8 and
    # does swimming") leaves the name to that one.
    said_as = out[0].candidate.text if out else None
    if thing is None or thing.i in {t.i for t in c.tokens}:
        out.extend(_appositive_names(thing, owned, source, said=said_as))
    out.extend(_named_objects(value_tokens, subj_entity, source, said=said_as))
    return out


@dataclass
class _Frame:
    """What every claim of one clause shares: its clause, subject, slot and category."""

    c: Clause
    entity: Entity
    slot: str
    single: bool
    category: str
    phrase: str
    source: str
    now: datetime | None
    about: list[str]
    me: str = "the user"  # who "I" is: the user, or a transcript line's speaker

    def build(self, value_tokens: list[Token], tokens: list[Token], replace: dict[int, str],
              slot: str | None = None, single: bool | None = None) -> Built:
        """Return the claim of this clause for one value."""
        c, entity = self.c, self.entity
        slot = slot or self.slot
        single = self.single if single is None else single
        doc = c.verb.doc
        vtype = value_type(doc[value_tokens[0].i:value_tokens[-1].i + 1]) if value_tokens else "none"
        value = normalise_value(_value_text(value_tokens)) if value_tokens else None
        meta: dict[str, Any] = {"source_text": self.source, "extractor": EXTRACTOR, "slot_phrase": self.phrase,
                                "value_type": vtype}
        if value and vtype == "date":
            iso, raw = parse_date(value, self.now)
            if iso is None and re.match(r"\d", value):
                iso, raw = parse_date(f"the {value}", self.now)
            if iso is None and raw:
                # Without a clock ("now") a relative date stays a phrase, marked as such.
                meta["date_unresolved"] = True
            if iso:
                meta["raw_date"], value = raw, iso
        if c.when:
            meta["when"] = span_text(c.when)
        additive = any(t.dep_ == "advmod" and t.lower_ in ADDITIVE for t in c.tokens)
        if additive:
            # "I also speak German now": an additive particle adds a value, whatever change the clause reads.
            meta["additive"] = True
        elif c.change or (concrete(value) and any(said_new(t) for t in c.tokens)):
            # "she's on 07700 900877, new phone", "the new price is £40": a figure said to be new replaces one.
            meta["change_cue"] = True
        if c.aspect:
            meta["aspect"] = c.aspect
        if c.hedged:
            meta["hedged"] = True
        text = said(tokens, replace, self.me)
        if c.negated:
            meta["negated"] = True
        if slot == "deadline" and value and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            meta["due"] = value
        meta["marks"] = sorted(marks(text))
        if entity.display and entity.key not in ("user", "team", None):
            meta["subject_display"] = entity.display
        if self.about:
            meta["about"] = self.about
        old = normalise_value(_value_text(c.old_value)) if c.old_value else None
        cand = Candidate(
            text=text, kind=KIND_OF[self.category], category=self.category, subject=entity.key,
            attribute=slot or None, value=value,
            record_id=entity.key if entity.key and IDENTIFIER.fullmatch(entity.key) else None,
            references=tuple(sorted({m.group(0).upper() for m in IDENTIFIER.finditer(text)} - {entity.key or ""})),
            importance=BASE_IMPORTANCE[self.category], single_valued=single and not c.negated, negated=c.negated,
            old_value=old, cause=span_text(c.cause) or None, meta=meta)
        ids = {t.i for t in value_tokens}
        head = next((t for t in value_tokens if t.head.i not in ids), None)
        if head is not None:
            # With the value go its article and the preposition that carried it ("as a", "at").
            ids |= {k.i for k in head.children if k.dep_ == "det"}
            if head.head.dep_ == "prep" and head.head.i not in {t.i for t in c.tokens if t.i == c.verb.i}:
                ids.add(head.head.i)
        return Built(cand, entity, tokens, frozenset(ids), replace, me=self.me)


def _dated(b: Built) -> Built:
    """Return a date claim marked as said of another claim's value (its text keeps that value)."""
    return Built(replace_field(b.candidate, meta={**b.candidate.meta, "dated": True}), b.entity, b.tokens,
                 b.value_ids, b.replace, b.relation, b.me)


def _identified_by_verb(c: Clause, thing: Token, mentions: Mentions) -> tuple[Entity, list[Token]] | None:
    """Return (identified thing, slot words) when a copula's prepositional phrase names what the subject is of.

    "Supplier lead time on part QM-51 is 21 days": the parser often hangs "on part QM-51" on the
    verb; the identifier still qualifies the subject, so the claim is part QM-51's lead time.
    """
    for prep in (k for k in c.verb.children if k.dep_ == "prep" and k.lower_ in ("on", "for", "of")):
        ident = next((t for t in subtree(prep) if IDENTIFIER.fullmatch(t.text)), None)
        if ident is not None:
            return entity_of(ident, mentions), [t for t in [*modifiers(thing), thing] if t.pos_ != "PROPN"]
    return None


def _separate(built: list[Built]) -> list[Built]:
    """Return the claims of one clause each in its own words: the other claims' values left out.

    "The user works as a data engineer at Acme" gives "The user works as a data engineer." and
    "The user works at Acme.", so that when one changes, the other's text holds nothing stale.
    """
    if len(built) < 2:
        return built
    table = lexicon.slot_table()
    known = [b.candidate.meta.get("dated") or (f"v:{b.candidate.meta.get('slot_phrase')}" if b.relation
                                                else b.candidate.meta.get("slot_phrase")) in table for b in built]
    if not all(known):
        # "rent a flat in Cork": a plain relation and the place it happens, said together. One memory
        # holds them, under the slot the table knows (city), so that a later move leaves no stale copy.
        texts: dict[tuple[str, str | None], Built] = {}
        for b, ok in zip(built, known, strict=True):
            # Conjuncts ("bees, two hives") share their sentence's words and are two claims of it.
            key = (b.candidate.text, b.candidate.value if b.conjunct else None)
            if key not in texts or ok:
                texts[key] = b
        return list(texts.values())
    out = []
    for b in built:
        if b.candidate.meta.get("dated"):
            # "an appointment on Tuesday": the date is said of the primary value, which it keeps.
            out.append(b)
            continue
        others = set().union(*(o.value_ids for o in built if o is not b and not (o.conjunct and b.conjunct))) \
            - b.value_ids
        kept = [t for t in b.tokens if t.i not in others]
        if others and b.value_ids & {t.i for t in kept} and len(kept) < len(b.tokens):
            text = said(kept, b.replace, b.me)
            meta = {**b.candidate.meta, "marks": sorted(marks(text))}
            b = Built(replace_field(b.candidate, text=text, meta=meta), b.entity, kept, b.value_ids, b.replace,
                      b.relation, b.me)
        out.append(b)
    return out


def _named_kind(value: list[Token]) -> tuple[Token, list[Token]] | None:
    """Return (noun, value tokens) for a value "the <noun> of <Y>" that names its own kind, else None."""
    ids = {t.i for t in value}
    head = next((t for t in value if t.head.i not in ids), None)
    if head is None or head.pos_ != "NOUN" or not any(k.dep_ == "det" and k.lower_ == "the" for k in head.children):
        return None
    of = next((k for k in head.children if k.dep_ == "prep" and k.lower_ == "of"), None)
    pobj = next((x for x in of.children if x.dep_ == "pobj"), None) if of is not None else None
    if pobj is None:
        return None
    return head, [t for t in subtree(pobj) if t.dep_ != "det" or t.head.i != pobj.i]


def _made(c: Clause, subject: Entity, mentions: Mentions) -> tuple[Entity, list[Token], str] | None:
    """Return (made thing, maker tokens, "<verb>_by") for an active clause of a maker verb, else None.

    Only a third party's making is turned around ("Microsoft developed X"); what the user or the
    team makes stays theirs ("I wrote a novel").
    """
    lemma = c.verb.lemma_.lower()
    if lemma not in lexicon.words("maker_verbs") or c.subject is None or subject.key in ("user", "team", None):
        return None
    if c.subject.pos_ not in ("PROPN", "NOUN") or any(k.dep_ == "auxpass" for k in c.verb.children):
        return None
    obj = next((k for k in c.verb.children if k.dep_ == "dobj"), None)
    if obj is None or not (obj.pos_ == "PROPN" or any(t.pos_ == "PROPN" for t in subtree(obj))):
        return None
    made = entity_of(obj, mentions)
    if made.key is None:
        return None
    return made, [t for t in subtree(c.subject) if t.dep_ != "det"], f"{lemma}_by"


def _inverted(c: Clause, mentions: Mentions) -> tuple[tuple[Entity, list[Token]], list[Token]] | None:
    """Return ((owner, slot words), value) for "X is my Y", which says what "my Y is X" says."""
    if not c.copula or c.subject is None or c.subject.pos_ == "PRON" or not c.value:
        return None
    ids = {t.i for t in c.value}
    head = next((t for t in c.value if t.head.i not in ids), None)
    if head is not None and head.pos_ == "NOUN" and c.subject.pos_ == "PROPN" and any(
            k.dep_ == "det" and k.lower_ == "the" for k in head.children):
        # "Eddie Howe is the head coach of AFC Bournemouth" says "the head coach of AFC Bournemouth is Eddie Howe".
        of = next((k for k in head.children if k.dep_ == "prep" and k.lower_ == "of"), None)
        pobj = next((x for x in of.children if x.dep_ == "pobj"), None) if of is not None else None
        if pobj is not None and pobj.pos_ in ("PROPN", "NUM") or pobj is not None and any(
                x.pos_ == "PROPN" for x in subtree(pobj)):
            words = [w for w in [*modifiers(head), head] if w.lower_ not in NOT_KIND] or [head]
            return (entity_of(pobj, mentions), words), [t for t in subtree(c.subject) if t.dep_ != "det"]
    if head is not None and role_noun(head) and c.subject.pos_ == "PROPN" and any(
            k.dep_ == "det" and k.lower_ == "the" for k in head.children):
        # "Priyanka is now the release manager" says the team's release manager is Priyanka.
        return (TEAM, [head]), [t for t in subtree(c.subject) if t.dep_ != "det"]
    if head is None or head.pos_ not in ("NOUN", "ADJ") or not any(k.dep_ == "poss" for k in head.children) or any(
            k.dep_ == "poss" for k in c.subject.children):
        return None
    poss = next(k for k in head.children if k.dep_ == "poss")
    found = attribute_of(head, mentions) if head.pos_ == "NOUN" else (entity_of(poss, mentions), [head])
    if found is None:
        return None
    owner, words = found
    return (owner, [w for w in words if w.lower_ not in NOT_KIND] or words), \
        [t for t in subtree(c.subject) if t.dep_ != "det"]


def _about(c: Clause, subject: Entity, mentions: Mentions) -> list[str]:
    """Return the keys of the other things a clause names (objects, prepositional objects), for typed changes."""
    keys: list[str] = []
    for t in c.tokens:
        if t.dep_ in ("dobj", "pobj", "dative") and t.pos_ in ("NOUN", "PROPN") and not t.like_num and \
                t.ent_type_ not in ("DATE", "TIME"):
            k = entity_of(t, mentions).key
            if k and k != subject.key and k not in keys and not any(ch.isdigit() for ch in k) or (
                    k and any(ch.isdigit() for ch in k) and k != subject.key and k not in keys and t.pos_ == "PROPN"):
                keys.append(k)
    return keys[:6]


def _second_relations(c: Clause, frame: _Frame, tokens: list[Token], replace: dict[int, str],
                      used: list[Token]) -> list[Built]:
    """Return a claim for each further preposition of the verb that names a known slot ("work at X as a nurse")."""
    out: list[Built] = []
    used_ids = {t.i for t in used}
    table = lexicon.slot_table()
    obj = next((k for k in c.verb.children if k.dep_ == "dobj" and k.pos_ == "NOUN"), None)
    dated = [*c.verb.children, *(obj.children if obj is not None else ())]
    for p in (k for k in dated if k.dep_ == "prep" and k.lower_ in ("by", "on", "for")):
        pobj = next((x for x in p.children if x.dep_ == "pobj"), None)
        if pobj is None or value_type(pobj.doc[pobj.left_edge.i:pobj.right_edge.i + 1]) != "date":
            continue
        iso, _ = parse_date(span_text(subtree(pobj)), frame.now)
        if p.lower_ == "by":
            # "submit the tax forms by April 30", "must be signed by the end of the month": a deadline.
            owner = entity_of(obj, Mentions()) if obj is not None else frame.entity
            out.append(_dated(_Frame(c, owner, "deadline", True, "deadline", "deadline", frame.source, frame.now,
                                     frame.about, frame.me).build(subtree(pobj), tokens, replace)))
        elif obj is not None and iso and frame.now is not None and iso >= frame.now.date().isoformat():
            # "I have a dentist appointment on Tuesday": a dated thing to come.
            owner = entity_of(obj, Mentions())
            out.append(_dated(_Frame(c, owner, "date", True, "event", "date", frame.source, frame.now,
                                     frame.about, frame.me).build(subtree(pobj), tokens, replace)))
    heads = [t for t in used if t.head.i not in used_ids][:1]
    inner = [k for h in heads for k in h.children if k.dep_ == "prep"]
    # A preposition fronted before the verb ("At the pool my locker is 48") sets the scene; it is no claim.
    for p in (k for k in [*c.verb.children, *inner] if k.dep_ == "prep" and (k.i not in used_ids or k in inner)
              and k.i > c.verb.i):
        pobj = next((x for x in p.children if x.dep_ == "pobj"), None)
        phrase = f"{c.verb.lemma_.lower()}_{p.lower_}"
        if pobj is None or pobj.i in used_ids or f"v:{phrase}" not in table:
            continue
        vals = subtree(pobj)
        vtype = value_type(pobj.doc[vals[0].i:vals[-1].i + 1])
        slot, single, _ = canonical_slot(phrase, vtype, relation=True)
        built = frame.build(vals, tokens, replace, slot=slot, single=single)
        built.candidate.meta["slot_phrase"] = phrase
        built.relation = True
        out.append(built)
    return out


def _named_objects(value: list[Token], entity: Entity, source: str, said: str | None = None) -> list[Built]:
    """Return a name claim for an object named in passing: "I have a dog named Biscuit" -> (user's dog, name)."""
    if entity.key is None:
        return []
    out: list[Built] = []
    ids = {t.i for t in value}
    heads = [t for t in value if t.head.i not in ids]
    for t in [*value, *(k for h in heads for k in h.children if k.i not in ids)]:
        if t.dep_ == "acl" and t.lemma_ in ("name", "call"):
            name = next((x for x in t.children if x.dep_ in ("oprd", "attr", "dobj")), None)
            if name is None or t.head.pos_ != "NOUN":
                continue
            owned = Entity(f"{entity.key}'s {t.head.lemma_.lower()}", f"{entity.display}'s {t.head.lemma_.lower()}")
            out.extend(_appositive_names(None, owned, source, name=span_text(subtree(name)), said=said))
    return out


def _relative(c: Clause, mentions: Mentions, replace: dict[int, str]) -> tuple[list[Token], dict[int, str]]:
    """Return the tokens of a relative clause with its pronoun replaced by the noun it modifies."""
    noun = c.relative_of
    pron = c.relative_pronoun
    toks = [t for t in c.tokens if t.i >= min(x.i for x in subtree(c.head))]
    shown = entity_of(noun, mentions).display or noun.text
    if pron is None:
        return toks, replace
    if pron.dep_.startswith("nsubj"):
        return toks, {**replace, pron.i: shown}
    # An object pronoun ("which we recorded at X") moves after its verb: "we recorded the album at X".
    rest = [t for t in toks if t.i != pron.i]
    at = next((k for k, t in enumerate(rest) if t.i == c.head.i), None)
    if at is None:
        return toks, replace
    replace = {**replace, c.head.i: f"{c.head.text} {shown}"}
    return rest, replace


def _appositive_names(thing: Token | None, entity: Entity, source: str, name: str | None = None,
                      said: str | None = None) -> list[Built]:
    """Return a name claim for "my sister Ana": (user's sister, name, Ana), kept with the sentence `said` when
    there is one (the claim is an index of what was said), else "X's name is Y." ("a dog named Biscuit")."""
    if entity.key is None or entity.key in ("user", "team"):
        return []
    if name is None:
        found = name_of(thing) if thing is not None else None
        if found is None:
            return []
        name = span_text([t for t in subtree(found) if t.pos_ == "PROPN"] or [found])
    value = name
    text = said or f"{entity.display[0].upper()}{entity.display[1:]}'s name is {value}."
    meta = {"source_text": source, "extractor": EXTRACTOR, "slot_phrase": "name", "value_type": "name",
            "marks": sorted(marks(text)), "subject_display": entity.display}
    cand = Candidate(text=text, kind="semantic", category="profile", subject=entity.key, attribute="name",
                     value=value, importance=BASE_IMPORTANCE["profile"], single_valued=True, meta=meta)
    return [Built(cand, entity, [])]
