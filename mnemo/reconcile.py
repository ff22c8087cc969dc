"""Reconciliation: decide what each claim does to the active memories (a pure plan).

`plan_writes(candidates, active, sims, cfg, judge, slot_sims)` returns the actions of every
candidate, in candidate order (a forget or a retraction may return one per target). Every action
carries a reason and evidence: evidence["candidate_index"], what matched and how (entity, slot,
value, marks), the cosine, the thresholds, and every judge verdict asked for.

Decisions are made on structure first (`mnemo.match`): the entity, the slot, the value, the
polarity and the marks (numbers, identifiers, addresses, names) of each claim. Cosine only decides
among memories the structure allows, and never merges two claims whose marks differ. Rules, first
that applies wins; only memories of the same entity (or an alias of it: "Ostara" for "Ostara
Books", the team for the user) are ever retired, and different identifiers never touch:

1. same turn: when two candidates fill the same (entity, slot), the last wins; a forget in the
   turn cancels the earlier candidates it names.
2. same entity, aligned slot, same value and polarity -> corroborate.
3. old value stated ("from 21 to 35 days", "84, not 48", "instead of X") and a memory of the
   entity holds it -> supersede it. With no subject ("actually it's 84, not 48") the old value
   alone must single out one memory of the user.
4. negated claim ("I no longer drink coffee", "I don't smoke anymore") -> every positive memory of
   the entity in the aligned slot holding that value (any value when the claim names none), or
   holding that value in any slot, is superseded with reason "retracted"; the negation is the
   successor, so the tombstone points at why it ended. With nothing to retract it is added.
5. aligned slot, different value: single-valued slots supersede; multi-valued slots (pets,
   languages, "has") accumulate, unless a change cue replaces a value of the same kind ("I switched
   to almond milk" after "oat milk"). A more general slot contained in several stored ones
   ("email" with "personal email" and "work email" stored) is ambiguous and retires nothing.
6. a change with a typed value ("their balance is down to 425 GBP", "the test moved to 3 May")
   and no aligned slot supersedes the entity's one single-valued memory with a value of that type;
   when nothing names the changed thing ("the release slipped to 19 July" after "the album comes
   out on 7 June"), the value of that type whose sentence is clearly the nearest (`_nearest_of_kind`).
7. cosine >= duplicate_threshold, same marks and no structural conflict -> duplicate.
8. cosine in [arbitration_low, duplicate_threshold) with a memory of the same entity -> the judge
   (at most MAX_JUDGED, nearest first); a contradiction scoring >= supersede_threshold
   supersedes. A judge error fails closed: nothing is retired, the claim is added.
9. otherwise -> add (novel).

Failures and lessons are never superseded and never supersede: a second failure corroborates.
A candidate under min_importance is ignored. A pinned candidate ("remember that ...") that
corroborates or duplicates sets evidence["pin"] = True.

Forget commands target exactly what they name (`mnemo.forget_requests`: by slot, marks, words, never a
guess); the judges are in `mnemo.judge`.

`because` links: a candidate with a cause ("because the migration failed") is linked to the
failure it names (see `causes.link_causes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from . import corrections, lexicon, match
from .causes import CAUSE_OVERLAP, link_causes
from .config import WriteConfig
from .errors import InvalidInput
from .extract.values import concrete
from .forget_requests import forget_actions, names
from .judge import NEVER_RETIRED, TYPED, Judge, offline_judge, value_kind
from .model import Action, Candidate, MemoryRecord
from .normalise import WEEKDAYS, content_tokens, marks, overlap, same_value
from .updates import CLASSES, UpdateModel, pair_features, side, table_slots

MAX_JUDGED = 3  # same-entity memories in the arbitration band shown to the judge, nearest first


@dataclass
class _Row:
    """What plan_writes knows about one candidate against the active memories."""

    i: int
    c: Candidate
    sims: np.ndarray  # cosine of the candidate's text with each memory
    slot_sims: np.ndarray  # cosine of the candidate's slot phrase with each memory's
    cfg: WriteConfig
    active: list[MemoryRecord]
    taken: set[str]

    names: dict[str, str] | None = None  # {named entity key: the entity it names}, from stored name claims
    groups: dict[str | None, list[int]] | None = None  # {subject: positions of the memories about it}, ascending
    model: UpdateModel | None = None  # the fitted update decision (`mnemo.updates`); None: the hand rules
    declared: bool = False  # a structured write: its caller named the attribute (Memory.add)
    # entity(j) by memory subject: the rules ask it of every memory, several times a candidate.
    _entities: dict[str | None, str | None] = field(default_factory=dict, repr=False)

    def entity(self, j: int) -> str | None:
        return self.entity_of(self.active[j].subject)

    def entity_of(self, subject: str | None) -> str | None:
        """Return entity(j) of any memory about `subject` (answered once per subject)."""
        if subject not in self._entities:
            self._entities[subject] = self._match_entity(subject)
        return self._entities[subject]

    def _match_entity(self, subject: str | None) -> str | None:
        found = _entity_match(self.c.subject, subject)
        if found is None and self.names:
            # "Ferris put his rate up" is about "the user's mechanic" once "the mechanic's name is Ferris" is stored.
            named = self.names.get(match.key(self.c.subject) or "")
            if named and _entity_match(named, subject):
                return "alias"
        return found

    def slot(self, j: int) -> str | None:
        # match.slot_match with the similarity looked at last, as it does: the rest depends on the two slots only.
        a, b = self.c.attribute, self.active[j].attribute
        found = _slot_match(a, b)
        if found is None and a and b and float(self.slot_sims[j]) >= self.cfg.slot_threshold:
            return "similar"
        return found

    def free(self, j: int) -> bool:
        return self.active[j].id not in self.taken


# Both are pure functions of two short strings that recur across the candidates of a conversation (the
# same subjects and slots, turn after turn): answered once each (`remember_many` asked ~900 a turn at 100k).
_entity_match = lru_cache(maxsize=1 << 16)(match.entity_match)
_slot_match = lru_cache(maxsize=1 << 16)(match.slot_match)


def _aligned(r: _Row, js: list[int], qualified: bool = False) -> list[tuple[int, str]]:
    """Return the memories among `js` whose slot aligns with the candidate's, at the best level only.

    Exact beats prefix beats similar (beats qualified, counted only where `qualified`: a paraphrase
    restating a value, never a new value replacing one). Several stored slots at the best level
    ("email" in "personal email" and "work email") are ambiguous: none is returned.
    """
    found = [(j, level) for j in js for level in [r.slot(j)] if level and (qualified or level != "qualified")
             and not match.qualified_apart(r.c, r.active[j])]
    for level in ("exact", "prefix", "derived", "similar", "qualified"):
        group = [(j, lv) for j, lv in found if lv == level]
        if not group:
            continue
        if level != "exact" and len({r.active[j].attribute for j, _ in group}) > 1:
            return []
        return group
    return []


def _of_entity(r: _Row, *, retirable: bool = True) -> list[int]:
    """Return the free memories about the candidate's entity: the same key, else its aliases."""
    return _about(r, "same", retirable) or _about(r, "alias", retirable)


def _about(r: _Row, kind: str, retirable: bool) -> list[int]:
    """Return, in order, the free memories whose subject matches the candidate's as `kind` ("same" or "alias").

    Subjects are matched once each (`_Row.groups`), not once per memory: a user's "user" memories
    are most of the hundreds every candidate of a long conversation is reconciled against.
    """
    groups = r.groups if r.groups is not None else _by_subject(r.active)
    js = sorted(j for subject, at in groups.items() if r.entity_of(subject) == kind for j in at)
    return [j for j in js if r.free(j) and (not retirable or r.active[j].category not in NEVER_RETIRED)]


def _by_subject(active: list[MemoryRecord]) -> dict[str | None, list[int]]:
    """Return {subject: the ascending positions in `active` of the memories about it}."""
    out: dict[str | None, list[int]] = {}
    for j, m in enumerate(active):
        out.setdefault(m.subject, []).append(j)
    return out


def _best(js: list[int], r: _Row) -> int:
    """Return the index among `js` with the highest cosine, then the newest memory, then the first."""
    a = r.active
    return max(js, key=lambda j: (float(r.sims[j]), a[j].created_at is not None, a[j].created_at or 0, -j))


def _act(r: _Row, op: str, j: int | None, reason: str, base: dict[str, Any], **more: Any) -> Action:
    ev = {**base, **more}
    if j is not None:
        ev["target_sim"] = float(r.sims[j])
        ev["entity"] = r.entity(j)
        if r.c.attribute and r.active[j].attribute:
            ev["slot"] = r.slot(j)
    if r.c.pinned and op in ("corroborate", "duplicate"):
        # The user asked to remember something already stored: the store may pin the match.
        ev["pin"] = True
    return Action(op, r.c, target_id=r.active[j].id if j is not None else None, reason=reason, evidence=ev)


def _decide(r: _Row, judge: Judge, base: dict[str, Any]) -> list[Action]:
    """Return the actions of one claim that is not a command (rules 2-9 of the module docstring)."""
    c, a = r.c, r.active
    neg = match.negated(c)
    can_retire = c.category not in NEVER_RETIRED
    mine = _of_entity(r, retirable=False)
    aligned = _aligned(r, mine, qualified=True) if c.attribute else []
    same = [j for j, _ in aligned if same_value(c.value, a[j].value) and match.negated(a[j]) == neg]
    if same:
        return [_act(r, "corroborate", _best(same, r), "same entity, slot and value", base,
                     match="entity+slot+value")]
    if c.category in NEVER_RETIRED and c.subject:
        again = [j for j in mine if a[j].category == c.category and overlap(c.text, a[j].text) >= CAUSE_OVERLAP]
        if again:
            return [_act(r, "corroborate", _best(again, r), f"the same {c.category} again", base, match="lesson")]
    retirable = _of_entity(r) if can_retire else []
    if c.old_value and can_retire:
        pool = retirable if c.subject else [j for j in range(len(a)) if r.free(j) and a[j].category not in
                                             NEVER_RETIRED]
        hits = [j for j in pool if not match.negated(a[j]) and match.holds(c.old_value, a[j].value)]
        if not hits and (c.subject or concrete(c.old_value)):
            # Said in the text: by the claim's subject's memories, or, for a claim of no subject ("it's Thursday,
            # not Tuesday"), by the one memory that says the weekday, the number or the date it replaces.
            hits = [j for j in pool if not match.negated(a[j]) and match.holds(c.old_value, None, a[j].text)]
        slotted = [j for j, _ in _aligned(r, hits)] if c.attribute else []
        hits = slotted or hits
        if not hits and c.subject:
            # "We switched the billing service from Postgres to X" after "we use Postgres for the billing
            # service": the old value, held by the one memory that names the changed thing, singles it out.
            shown = str(c.meta.get("subject_display") or c.subject)
            hits = [j for j in range(len(a)) if r.free(j) and a[j].category not in NEVER_RETIRED and not
                    match.negated(a[j]) and match.holds(c.old_value, a[j].value) and overlap(shown, a[j].text) == 1]
            hits = hits if len(hits) == 1 else []
        if hits and (c.subject or len(hits) == 1):
            j = _best(hits, r)
            return [_act(r, "supersede", j, f"{c.attribute or 'value'} changed from {a[j].value} to {c.value}",
                         base, match="old value")]
    if neg and can_retire:
        hits = _retracted(r, retirable)
        if hits:
            return [_act(r, "supersede", j, f"retracted: {c.text}", base, match="negation") for j in hits]
    if c.attribute and can_retire and not neg and not c.meta.get("additive"):
        aligned = _aligned(r, retirable)
        group = [j for j, _ in aligned]
        # A slot that holds one value (the slot table's cardinality) takes the new one in place of the old; with a
        # fitted update model only when the slot is the same one exactly, the near alignments being the model's.
        single = {j for j, level in aligned if c.single_valued and a[j].single_valued
                  and (r.model is None or level == "exact")}
        hits = [j for j in group if not same_value(c.value, a[j].value) and (
            j in single or c.meta.get("change_cue") and match.same_kind(c.value, a[j].value))]
        hits += [j for j in group if match.negated(a[j]) and same_value(c.value, a[j].value)]
        if hits:
            j = _best(hits, r)
            why = "re-affirmed" if match.negated(a[j]) else (
                f"single-valued {c.attribute} changed" if c.single_valued and a[j].single_valued
                else f"{c.attribute} replaced by a value of the same kind")
            return [_act(r, "supersede", j, f"{why}: {a[j].value} -> {c.value}", base,
                         match="slot" if not match.negated(a[j]) else "re-affirmation")]
    if c.meta.get("change_cue") and can_retire and not neg and c.value:
        kinds = [j for j in retirable if not match.negated(a[j]) and match.same_kind(c.value, a[j].value)]
        if len(kinds) == 1:
            j = kinds[0]
            return [_act(r, "supersede", j, f"changed to a {match.head_word(c.value)} of another kind: "
                         f"{a[j].value} -> {c.value}", base, match="same kind")]
    if c.meta.get("change_cue") and can_retire and not neg and value_kind(c) in TYPED:
        pool = retirable or [j for j in range(len(a)) if r.free(j) and a[j].category not in NEVER_RETIRED and any(
            match.entity_match(c.subject, k) for k in a[j].meta.get("about") or ())]
        typed = [j for j in pool if a[j].single_valued and value_kind(a[j]) == value_kind(c)
                 and corrections.moves_to(c.value, a[j].value)]
        if not typed and retirable:
            # "4471 got pushed back to the 19th" after "#4471 is 20kg of soy wax, due on the 12th": the one memory
            # of the thing that says a value of the type (in its value, its numbers or its time) is what moves.
            typed = [j for j in retirable if value_kind(c) in corrections.held_kinds(a[j]) and not match.negated(a[j])
                     and corrections.moves_to(c.value, a[j].value)]
        if len(typed) == 1:
            j = typed[0]
            return [_act(r, "supersede", j, f"changed to {c.value} (the {value_kind(c)} of {c.subject})", base,
                         match="typed change")]
        near = _nearest_of_kind(r)
        if near is not None:
            return [_act(r, "supersede", near, f"changed to {c.value}: the nearest {value_kind(c)} "
                         f"({a[near].value})", base, match="nearest of its type")]
    if r.model is not None:
        return [_fitted(r, r.model, judge, base)]
    return [_similar(r, judge, base)]


# A change said in other words ("the release slipped to 19 July" after "the album comes out on 7 June") names the
# changed thing differently, so no subject or slot ties it to the old value. It moves the one value of its type
# whose sentence is clearly the nearest: at least this close, and this far ahead of the next value of that type.
NEAREST_FLOOR = 0.3
NEAREST_MARGIN = 0.1


def _nearest_of_kind(r: _Row) -> int | None:
    """Return the memory a change-cued typed claim moves when nothing named it: the clearly nearest of its type."""
    c, a = r.c, r.active
    kind = value_kind(c)
    if not concrete(c.meta.get("raw_date") or c.value) or kind == "date" and not c.meta.get("raw_date") and \
            str(c.value).lower().removesuffix("s") not in WEEKDAYS:
        # A value that no calendar or count reads ("part of my daily routine", "these days") names nothing to move to;
        # a day of the week ("to Fridays") is one.
        return None
    js = [j for j in range(len(a)) if r.free(j) and a[j].category not in NEVER_RETIRED and not match.negated(a[j])
          and kind in corrections.held_kinds(a[j]) and corrections.moves_to(c.value, a[j].value)]
    if not js:
        return None
    js.sort(key=lambda j: -float(r.sims[j]))
    top = float(r.sims[js[0]])
    # The claims of one sentence ("Trevalgan Farm near St Ives, pitch 22, 3-10 August" holds a place and a pitch)
    # are one candidate: the nearest other sentence is what the margin is measured against, and the claim whose
    # own value is of the type moves (its siblings follow it, `write.carry`).
    one = [j for j in js if a[j].text == a[js[0]].text and a[j].turn_id == a[js[0]].turn_id]
    second = next((float(r.sims[j]) for j in js if j not in one), 0.0)
    pick = next((j for j in one if value_kind(a[j]) == kind), js[0])
    return pick if top >= NEAREST_FLOOR and top - second >= NEAREST_MARGIN else None


# A memory of another subject is put to the fitted decision only when its sentence is this close and its value
# is of the claim's type: "the wifi password" and "the router password" may be one thing, said two ways.
POOL_SIM = 0.5


def pool(r: _Row) -> list[int]:
    """Return the free memories a claim could update or restate: the same subject (or an alias), a shared
    identifier, or a near neighbour whose value is of the same type."""
    c, a = r.c, r.active
    ids = set(c.references) | {c.record_id} - {None}
    kind = value_kind(c)
    hard = bool(c.subject) and match.hard(match.key(c.subject) or "")
    out = []
    for j in range(len(a)):
        if not r.free(j):
            continue
        m = a[j]
        theirs = set(m.references) | {m.record_id} - {None}
        if not r.entity(j) and (ids and theirs and not ids & theirs or hard and match.hard(match.key(m.subject) or "")
                                or match.possessions_apart(c.subject, m.subject) or match.names_apart(c, m)):
            # Two identifiers, two numbered things, two things of one owner ("my cat", "my dog") or two named
            # ones ("Japan", "Romania") are two records: never one updating the other.
            continue
        if r.entity(j) or ids & theirs or (float(r.sims[j]) >= POOL_SIM and kind is not None and kind == value_kind(m)):
            out.append(j)
    return out


def features_of(r: _Row, js: list[int]) -> list[list[float]]:
    """Return `updates.pair_features` of the claim against each memory of `js`."""
    mine = side(r.c)
    return [pair_features(r.c, r.active[j], sim=float(r.sims[j]), slot_sim=float(r.slot_sims[j]),
                          entity=r.entity(j), slot=r.slot(j) if r.c.attribute and r.active[j].attribute else None,
                          sides=(mine, side(r.active[j])))
            for j in js]


def replaces(c: Candidate, m: MemoryRecord, slot: str | None, declared: bool = False) -> bool:
    """Return True when structure lets the claim replace `m`'s value: what the model may then decide.

    A denial ends the value it names under a slot that aligns with its own, or the whole value of
    another. Otherwise the value must be of the same type as the old one, or fill the same slot (a
    place never replaces a name); two slots the slot table keeps apart never replace each other; and
    a value of a slot that holds several adds to the others unless a change cue says it replaces one,
    and a value said with an additive particle ("too", "also") never replaces another. A `declared` claim (a structured write whose
    caller named its attribute, `Memory.add`) replaces only memories of that attribute.
    """
    if match.negated(c) != match.negated(m):
        # A denial ends only the value its own predicate said ("I don't eat meat" leaves "I am vegetarian"
        # standing, and "I haven't played in years" leaves "I'm going skiing this year").
        return bool(c.value) and match.denies(c.value, m, aligned=slot is not None or not c.attribute,
                                              named=value_kind(c) in match.PROPER_KINDS)
    if c.meta.get("additive"):
        # "Greece is on my list too", "I also speak Japanese": an additive particle says the value joins the others.
        return False
    kind_c, kind_m = value_kind(c), value_kind(m)
    if not slot and (declared or kind_c and kind_m and kind_c != kind_m):
        return False
    if not slot and c.attribute and m.attribute and c.attribute != m.attribute and _known_apart(c.attribute,
                                                                                             m.attribute):
        # Two slots the slot table knows and keeps apart (a city is not a medication): another fact.
        return False
    # A slot that holds several values keeps them side by side unless the words say one replaces another
    # (a change cue; never with "also" / "too"): the slot table's cardinality, not the model, decides that.
    return (c.single_valued and m.single_valued) or bool(c.meta.get("change_cue"))


def _known_apart(a: str, b: str) -> bool:
    """Return True when both slots are ones the slot table knows and neither is of the other's family."""
    known = table_slots()
    families = lexicon.slot_families()
    return a in known and b in known and b not in families.get(a, ()) and a not in families.get(b, ())


def _restates(r: _Row, j: int) -> bool:
    """Return True when the claim may be merged into memory j: it adds nothing the memory does not hold.

    Either the slots align and the values agree, or every content word of the claim is already in
    the memory ("The cafe is closed on Saturdays" is never a restatement of "... open on Saturdays",
    however close their vectors); and never across different numbers, identifiers or polarity.
    """
    c, m = r.c, r.active[j]
    if marks(c.text) - marks(m.text) - marks(m.value) or match.negated(c) != match.negated(m):
        return False
    if r.slot(j) and same_value(c.value, m.value):
        return True
    return content_tokens(c.text) <= content_tokens(m.text) | content_tokens(m.value)


def _fitted(r: _Row, model: UpdateModel, judge: Judge, base: dict[str, Any]) -> Action:
    """Return the action the fitted update decision gives a claim no grammar rule decided.

    The memory with the highest P(update) at or above the model's threshold is retired (never a
    failure or a lesson, nor one value of a slot that holds several, unless a change cue or a
    negation says it goes); else the one with the highest P(same) is restated (corroborated when slot
    and value agree, else a duplicate), never across different numbers or identifiers; else the
    claim is novel. A live judge still arbitrates the cosine band when one is configured.
    """
    c, a = r.c, r.active
    js = pool(r)
    probs = model.proba(features_of(r, js))
    scored = [(j, {cls: round(float(p), 3) for cls, p in zip(CLASSES, row, strict=True)})
              for j, row in zip(js, probs, strict=True)]
    evidence = {"fitted": [{"memory_id": a[j].id, **p} for j, p in scored],
                "update_at": model.update_at, "same_at": model.same_at}
    can_retire = c.category not in NEVER_RETIRED
    updates = [(p["update"], j) for j, p in scored if can_retire and p["update"] >= model.update_at
               and a[j].category not in NEVER_RETIRED
               and replaces(c, a[j], r.slot(j) if c.attribute else None, r.declared)]
    if updates:
        p, j = max(updates)
        return _act(r, "supersede", j, f"fitted: updates it (p={p:.2f}): {a[j].value} -> {c.value}", base,
                    match="fitted", **evidence)
    same = [(p["same"], j) for j, p in scored if p["same"] >= model.same_at and _restates(r, j)]
    if same:
        p, j = max(same)
        op = "corroborate" if r.slot(j) and same_value(c.value, a[j].value) else "duplicate"
        return _act(r, op, j, f"fitted: says it again (p={p:.2f})", base, match="fitted", **evidence)
    if judge is not offline_judge:
        return _similar(r, judge, {**base, **evidence})
    return _act(r, "add", None, "novel", base, max_sim=float(r.sims.max()) if r.sims.size else 0.0, **evidence)


def _retracted(r: _Row, pool: list[int]) -> list[int]:
    """Return the positive memories a negated claim retracts (rule 4).

    A negation takes back what its own predicate said: a memory whose value it denies (`match.denies`:
    "I no longer work at Acme"), or whose relation its value names ("I gave up smoking"). Without
    a value it names only its predicate, so it takes back that slot and the habits whose slot it
    begins ("I don't cycle any more" ends "I cycle to work"), and never a bare copula's, whose
    content is the complement it lacks ("I haven't been there yet" says nothing of "I'm good").
    """
    c, a = r.c, r.active
    positive = [j for j in pool if not match.negated(a[j])]
    if not c.value:
        aligned = _aligned(r, positive) if c.attribute else []
        # It denies its predicate whatever followed it: "I don't cycle any more" ends the habit "I cycle to
        # work", not an event that happened ("I flew to Rome last week").
        return [j for j, level in aligned if not match.function_slot(c.attribute) and (
            level == "exact" or level == "prefix" and len(c.attribute) < len(a[j].attribute or "")
            and a[j].kind != "episodic")]
    # With its value, a denial also reaches a slot its own qualifies ("I don't drink coffee", a drink preference).
    aligned = _aligned(r, positive, qualified=True) if c.attribute else []
    slotted = {j for j, _ in aligned}
    named = value_kind(c) in match.PROPER_KINDS
    hits = [j for j in positive if match.denies(c.value, a[j], aligned=j in slotted, named=named)]
    # "I gave up smoking" ends "I smoke roll-ups": the value names the stored relation itself.
    return hits + [j for j in positive if j not in hits and match.names_relation(c.value, a[j].attribute)]


def _conflict(c: Candidate, m: MemoryRecord, slot: str | None) -> str | None:
    """Return why `c` cannot be a duplicate of `m` (entity, value, polarity, marks), or None."""
    if c.subject and m.subject and match.entity_match(c.subject, m.subject) is None:
        return "different entity"
    if slot and c.value and m.value and not same_value(c.value, m.value):
        return "different value of the same slot"
    if c.attribute and m.attribute and not slot:
        return "different slot"
    if match.negated(c) != match.negated(m):
        return "opposite polarity"
    if match.qualified_apart(c, m):
        return "names another thing"
    if c.old_value and match.holds(c.old_value, m.value, m.text):
        return "holds the value this candidate replaces"
    if marks(c.text) != marks(m.text):
        return "different numbers, identifiers or names"
    return None


def _similar(r: _Row, judge: Judge, base: dict[str, Any]) -> Action:
    """Return duplicate, judged supersession or add for a claim no structural rule decided (rules 7-9)."""
    c, a, cfg = r.c, r.active, r.cfg
    dups = [j for j in range(len(a)) if float(r.sims[j]) >= cfg.duplicate_threshold and r.free(j)
            and _conflict(c, a[j], r.slot(j)) is None]
    if dups:
        return _act(r, "duplicate", _best(dups, r), f"cosine >= duplicate threshold {cfg.duplicate_threshold} "
                    "with the same marks", base, match="cosine+marks")
    top = float(r.sims.max()) if r.sims.size else 0.0
    if c.category in NEVER_RETIRED:
        return _act(r, "add", None, "novel", base, max_sim=top)
    # The judge sees memories of the same entity, or of another plain noun phrase ("the release" and "the
    # album" may be one thing); names and identifiers that differ are never judged.
    near = _of_entity(r) or ([j for j in range(len(a)) if r.free(j) and a[j].category not in NEVER_RETIRED
                              and match.soft(a[j])] if match.soft(c) else [])
    band = [j for j in near if cfg.arbitration_low <= float(r.sims[j]) < cfg.duplicate_threshold
            and not (c.attribute and r.slot(j) and not (c.single_valued and a[j].single_valued))]
    verdicts: list[dict[str, Any]] = []
    for j in sorted(band, key=lambda j: -float(r.sims[j]))[:MAX_JUDGED]:
        verdict = dict(judge(c, a[j]))
        verdicts.append({**verdict, "memory_id": a[j].id, "sim": float(r.sims[j])})
        if verdict.get("error"):
            return _act(r, "add", None, "judge error: nothing retired, added as novel (fails closed)", base,
                        judge=verdicts, max_sim=top)
        if verdict.get("contradicts") and float(verdict.get("score", 0.0)) >= cfg.supersede_threshold:
            return _act(r, "supersede", j, f"judge: contradiction ({verdict.get('why', '')})", base, judge=verdicts,
                        match="judge")
    if verdicts:
        return _act(r, "add", None, "judged not a contradiction", base, judge=verdicts, max_sim=top)
    return _act(r, "add", None, "novel", base, max_sim=top)


def _same_turn(candidates: list[Candidate]) -> dict[int, str]:
    """Return {index: reason} for candidates overridden later in the same turn (the last wins)."""
    out: dict[int, str] = {}
    for i, a in enumerate(candidates):
        if a.command == "forget" or not (a.subject and a.attribute):
            continue
        for k in range(i + 1, len(candidates)):
            b = candidates[k]
            if b.command == "forget":
                if names(b, a) is not None:
                    out[i] = f"forgotten later in the same turn (candidate {k})"
                    break
                continue
            if match.entity_match(a.subject, b.subject) != "same" or match.slot_match(a.attribute, b.attribute) is None:
                continue
            retracts = (b.old_value and match.holds(b.old_value, a.value) and not match.negated(a)) or (
                match.negated(b) and not match.negated(a) and match.holds(b.value, a.value))
            if same_value(a.value, b.value) and match.negated(a) == match.negated(b):
                out[i] = f"repeated later in the same turn (candidate {k})"
                break
            if retracts or (b.single_valued and not match.negated(b) and a.single_valued) or (
                    same_value(a.value, b.value) and match.negated(a) != match.negated(b)):
                out[i] = f"overridden later in the same turn (candidate {k})"
                break
    return out


def _names(active: list[MemoryRecord]) -> dict[str, str]:
    """Return {named entity key: the entity it names}, from the stored name claims ("the mechanic's name is X")."""
    return {match.key(m.value) or "": match.key(m.subject) or "" for m in active
            if m.attribute in ("name", "preferred_name") and m.value and m.subject not in (None, "user", "team")}


def row(i: int, c: Candidate, active: list[MemoryRecord], sims: np.ndarray, slot_sims: np.ndarray,
        cfg: WriteConfig) -> _Row:
    """Return what `plan_writes` knows of candidate `c` (its i-th) against `active`, for `pool` and `features_of`."""
    return _Row(i, c, np.asarray(sims, dtype=np.float64), np.asarray(slot_sims, dtype=np.float64), cfg, active,
                set(), _names(active), _by_subject(active))


def plan_writes(candidates: list[Candidate], active: list[MemoryRecord], sims: np.ndarray, cfg: WriteConfig,
                judge: Judge = offline_judge, slot_sims: np.ndarray | None = None,
                model: UpdateModel | None = None, declared: bool = False) -> list[Action]:
    """Return the write plan: the actions of every candidate, decided by the rules above.

    `sims[i, j]` is the cosine of candidate i's text and active memory j's; `slot_sims[i, j]`
    the cosine of their slot phrases (zero where either has no slot, or when not given). Both are
    computed by the caller. The function is pure: it reads its arguments and calls only `judge`.
    """
    n, m = len(candidates), len(active)
    matrix = np.asarray(sims, dtype=np.float64) if n and m else np.zeros((n, m))
    if matrix.shape != (n, m):
        raise InvalidInput(f"sims has shape {matrix.shape}; expected ({n}, {m}) = (candidates, active memories)")
    slots = np.zeros((n, m)) if slot_sims is None or not (n and m) else np.asarray(slot_sims, dtype=np.float64)
    if slots.shape != (n, m):
        raise InvalidInput(f"slot_sims has shape {slots.shape}; expected ({n}, {m})")
    thresholds = {"duplicate": cfg.duplicate_threshold, "arbitration_low": cfg.arbitration_low,
                  "supersede": cfg.supersede_threshold, "slot": cfg.slot_threshold,
                  "min_importance": cfg.min_importance}
    overridden = _same_turn(candidates)
    names, groups = _names(active), _by_subject(active)
    taken: set[str] = set()
    plan: list[Action] = []
    for i, c in enumerate(candidates):
        base = {"candidate_index": i, "thresholds": thresholds}
        r = _Row(i, c, matrix[i], slots[i], cfg, active, taken, names, groups, model=model, declared=declared)
        if c.command == "forget":
            plan.extend(forget_actions(r, base))
        elif i in overridden:
            plan.append(Action("ignore", c, reason=overridden[i], evidence=base))
        elif c.importance < cfg.min_importance:
            plan.append(Action("ignore", c, reason=f"importance {c.importance} below min_importance "
                               f"{cfg.min_importance}", evidence=base))
        else:
            actions = _decide(r, judge, base)
            taken.update(x.target_id for x in actions if x.op == "supersede" and x.target_id)
            plan.extend(actions)
    # A memory corroborated or duplicated early in the plan may be retired by a later candidate:
    # the earlier candidate then has nothing left to lean on and is added in its own right.
    plan = [replace(a, op="add", target_id=None, reason=f"its match {a.target_id} is retired in the same plan",
                    evidence={**a.evidence, "retired_match": a.target_id})
            if a.op in ("corroborate", "duplicate") and a.target_id in taken else a for a in plan]
    return link_causes(plan, candidates, active)
