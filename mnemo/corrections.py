"""What a correction carries: the words of what it replaces, and what else the replaced memory said.

    corrected_words(old)          # "booked Rosalind's for dinner at 7:30" -> "booked Rosalind's for dinner at"
    remainder(old, new)           # "Plot 41B at the Hollins Lane site, £38 a year." + "it's plot 14B, not 41B"
                                  #   -> "Plot 14B at the Hollins Lane site, £38 a year." (source "derived")

A correction is said against what is known ("they've moved us to 8:15", "we've bumped the budget to
€3,100"): it names little of its topic, and the memory it supersedes may have said more than the
value it corrects ("Finally booking Crete in late June, budget €2,400"). The write path gives the
correction the old memory's words as context (`write.carry`), and, when the old memory said other
things, keeps them in a derived memory: the old sentence with the corrected value replaced by the new
one, so that superseding one value never retires the facts said beside it. A later correction then moves
every current memory that restates the value, the remainder and the correction alike (`restating`).

What a change can move: `held_kinds(m)` the types of the concrete values a memory says (its value, its numbers,
its time), and `moves_to(new, old)` whether a value is another one ("roughly 8 km" restates "8 km").

Forgetting is carried the same way: the other claims of a forgotten memory's sentence (one text, one turn:
`said_alike`) say what was forgotten, so they go with it, and what they said besides it is kept
(`forgotten_siblings`, `unsaid`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set
from typing import TYPE_CHECKING

from .extract.values import concrete, marks, value_type
from .judge import value_kind
from .model import CORRECTS_KEY, Candidate, Link, MemoryRecord
from .normalise import WEEKDAYS, same_value

if TYPE_CHECKING:
    from .store import Store

CORRECTS_CHARS = 400  # a chain of corrections keeps the newest words up to this length
_WITH_DIGITS = re.compile(r"[^\s,;:!?()\"']*\d[^\s;!?()\"']*")  # words that say a number: "€2,400", "15:10", "41B"
_KEPT_META = ("speaker", "addressees", "context", "source_text", "when", "value_type")


def corrected_words(old: MemoryRecord) -> str:
    """Return what memory `old` was about, as its words, for the memory that corrects it: its text and what it
    corrected in turn, without the values it held ("booked Rosalind's for dinner at 7:30" -> "booked Rosalind's
    for dinner at"). The figures that memory held are no longer true (`values.concrete`, its own value)."""
    gone = {w.casefold() for w in (old.value or "").split()}
    said = (w.strip(".,;:!?\"()") for w in f"{old.text} {old.meta.get(CORRECTS_KEY) or ''}".split())
    words = [w for w in said if w and not concrete(w) and w.casefold() not in gone]
    text = " ".join(words)
    return text if len(text) <= CORRECTS_CHARS else text[:CORRECTS_CHARS].rsplit(" ", 1)[0]


def _numbers(text: str) -> list[tuple[int, str]]:
    """Return (word position, word) of each word of `text` that says a number, trailing punctuation off."""
    words = text.split()
    return [(k, w.rstrip(".,")) for k, w in enumerate(words) if _WITH_DIGITS.fullmatch(w.rstrip(".,"))]


def _label(text: str, number: str) -> str | None:
    """Return the word said just before `number` in `text`, casefolded ("pitch" for "pitch 9"), or None."""
    words = [w.strip(".,;:!?\"'()").casefold() for w in text.split()]
    at = [k for k, w in enumerate(words) if w == number.casefold()]
    return words[at[0] - 1] if len(at) == 1 and at[0] > 0 and words[at[0] - 1].isalpha() else None


def _contrast(old: MemoryRecord, new: Candidate) -> tuple[str, str] | None:
    """Return (the old word, the new one) of a correction said as a contrast, "X, not Y", when `old` says Y once:
    X and Y are parallel ("it's Thursday, not Tuesday"; "plot 14B, not 41B"), of one type, one word each."""
    was = (new.old_value or "").strip()
    if not was or " " in was or not concrete(was):
        return None
    said = re.search(rf"([^\s,]+),?\s+not\s+{re.escape(was)}(?!\w)", new.text, re.I)
    now = said.group(1).strip(".;:!?\"'()") if said else ""
    found = re.findall(rf"(?<![\w€£$]){re.escape(was)}(?!\w)", old.text, re.I)
    if not now or len(found) != 1 or value_type(now) != value_type(was) or now.casefold() == was.casefold():
        return None
    return found[0], now


def moved(old: MemoryRecord, new: Candidate) -> tuple[str, str] | None:
    """Return (the word of `old`'s text the correction changes, the word it changes to), or None when unsure.

    The old word is the value the correction says it replaces ("14B, not 41B"), else the one word of `old`
    of the new value's type ("£38" is not a time), else the one of them nearest to a word of the
    correction's subject and after it, as a complement follows its subject ("Elsie's in bed by 7:30 and
    Arlo at 8:15" for Arlo's bedtime). Dates (several words) are left alone.
    """
    contrast = _contrast(old, new)
    if contrast is not None:
        return contrast
    kind = value_kind(new)
    if kind == "date":
        return _weekday_moved(old.text, str(new.meta.get("raw_date") or ""))
    if kind in (None, "duration"):
        return None
    theirs = _numbers(old.text)
    said_old = {w.casefold() for _, w in _numbers(new.old_value or "")}
    mine = [w for _, w in _numbers(new.text) if w.casefold() not in said_old]
    if said_old:
        found = [(k, w) for k, w in theirs if w.casefold() in said_old]
    else:
        found = [(k, w) for k, w in theirs if value_type(w) == value_type(mine[0])] if len(mine) == 1 else []
    if len(found) > 1 and len(mine) == 1:
        # A number names a thing with the noun before it ("pitch 22", "room 12"): the old one said with the
        # noun the new one is said with ("swapped us to pitch 9") is the one it replaces.
        label = _label(new.text, mine[0])
        same = [(k, w) for k, w in found if label and _label(old.text, w) == label]
        found = same if len(same) == 1 else found
    if len(found) > 1:
        near = {w.casefold() for w in (new.subject or "").replace("'s", " ").split()}
        at = [k for k, w in enumerate(old.text.split()) if w.strip(".,;:!?'\"").casefold().removesuffix("'s") in near]
        dist = sorted((min((k - a for a in at if a < k), default=99), w) for k, w in found)
        found = [(0, dist[0][1])] if at and dist[0][0] < dist[1][0] else []
    if len(found) != 1:
        return None
    was = found[0][1]
    now = [w for w in mine if value_type(w) == value_type(was) and w.casefold() != was.casefold()]
    return (was, now[0]) if len(now) == 1 else None


def _other_things(old: MemoryRecord, new: str, was: str) -> list[str]:
    """Return the people `old`'s claim is about (its index, `meta["about"]`) that `new` does not say: "hosted by my
    friend marta" is a fact a change of the meeting day leaves standing, however it was capitalised (a thing it
    is about, "in school shoes", is part of the fact changed)."""
    from .extract.parser import person_nouns

    said = {w.strip(".,;:!?\"'()").casefold().removesuffix("'s") for w in new.split()}
    out = []
    for thing in old.meta.get("about") or ():
        words = [w.casefold().removesuffix("'s") for w in str(thing).split()]
        if words and words[-1] in person_nouns() and not (set(words) - {"user", "the"}) & said and \
                was.casefold() not in words:
            out.append(str(thing))
    return out


def _weekday_moved(old: str, said: str) -> tuple[str, str] | None:
    """Return (the weekday `old` says, the one `said` names) when each says exactly one and they differ: a day of
    the week is one word, so it moves as a number does ("the first thursday" -> "the first wednesday")."""
    now = [w for w in re.findall(r"[A-Za-z]+", said) if w.lower().removesuffix("s") in WEEKDAYS]
    was = [w for w in re.findall(r"[A-Za-z]+", old) if w.lower().removesuffix("s") in WEEKDAYS]
    if len(now) != 1 or len(was) != 1 or now[0].lower() == was[0].lower():
        return None
    return was[0], now[0]


def _other_facts(old: str, new: str, was: str) -> set[str]:
    """Return the values and names `old` says besides `was` that `new` does not: concrete words (a number, a
    month, a weekday) and capitalised words inside a sentence, not a value it says is no longer so ("not 17B")."""
    words = old.split()
    said = {w.strip(".,;:!?\"'()").casefold().removesuffix("'s") for w in new.split()}
    out = set()
    for k, w in enumerate(words):
        bare = w.strip(".,;:!?\"'()").removesuffix("'s")
        named = k > 0 and bare[:1].isupper() and not words[k - 1].endswith((".", "!", "?"))
        before = " ".join(words[max(0, k - 2):k]).casefold().replace(",", "")
        if before.endswith((" not", " than", "instead of")) or before == "not":
            continue  # "71B, not 17B", "instead of Tuesday", "rather than 8:15": a value said to be no longer so
        if bare and bare.casefold() != was.casefold() and bare.casefold() not in said and (concrete(bare) or named):
            out.add(bare)
    return out


def remainder(old: MemoryRecord, new: Candidate) -> Candidate | None:
    """Return what `old` said besides the value `new` corrects, with the new value in its place, or None.

    None when the correction retracts (nothing replaces the value), when which word it changes is unsure
    (`moved`), or when `old` said no other fact: no other value a calendar or a count reads and no name
    that the correction does not say ("Mateo takes a size 34 in school shoes." says one fact, his size;
    "Plot 41B at the Hollins Lane site, £38 a year." says three).
    """
    if new.negated or not new.value:
        return None
    change = moved(old, new)
    if change is None:
        return None
    was, now = change
    if not _other_facts(old.text, new.text, was) and not _other_things(old, new.text, was):
        return None
    text = re.sub(rf"(?<![\w€£$]){re.escape(was)}(?!\w)", now, old.text, count=1)
    if text == old.text:
        return None
    # A date is kept as a calendar reads it: the weekday moved to is the new claim's value, not a word swapped in.
    value = new.value if value_kind(new) == "date" else old.value.replace(was, now) if old.value else None
    return _derived(old, text, value)


def _derived(old: MemoryRecord, text: str, value: str | None) -> Candidate:
    """Return the derived memory that says `text` in `old`'s place, with `old`'s keys and `value`."""
    meta = {k: old.meta[k] for k in _KEPT_META if k in old.meta}
    return Candidate(text=text, kind=old.kind, category=old.category, subject=old.subject, attribute=old.attribute,
                     value=value, record_id=old.record_id, references=old.references, importance=old.importance,
                     single_valued=old.single_valued, source="derived",
                     meta={**meta, "marks": sorted(marks(text)), "as_said": "remainder", "remainder_of": old.id})



def restating(store: Store, olds: Sequence[MemoryRecord], pending: Sequence[Link] = ()) -> list[MemoryRecord]:
    """Return the active memories that restate what `olds` hold: the other successors of the memories they
    superseded (a correction and the remainder it left both say the corrected value). `pending`: links written
    in this transaction but not yet stored (`write.process` holds them to the end)."""
    if not olds:
        return []
    mine = {o.id for o in olds}

    def links(ids: set[str]) -> list[Link]:
        return [*store.links(sorted(ids), ("supersedes",)),
                *(x for x in pending if x.kind == "supersedes" and (x.src in ids or x.dst in ids))]

    before = {x.dst for x in links(mine) if x.src in mine}
    after = {x.src for x in links(before) if x.dst in before} - mine if before else set()
    found = store.get_many(sorted(after)) if after else {}
    return [m for m in found.values() if m.active]


def said_alike(store: Store, olds: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """Return the active memories that are the same words as one of `olds`, from the same turn: the other claims
    of a sentence said as one ("I love action and sci-fi films" holds two), each kept with the whole sentence."""
    out: dict[str, MemoryRecord] = {}
    mine = {o.id for o in olds}
    for o in olds:
        hits = [m for m, _ in store.search_lexical(o.text, 8, user=o.user)]
        for m in store.get_many(hits).values() if hits else ():
            if m.active and m.id not in mine and m.text == o.text and m.turn_id == o.turn_id:
                out[m.id] = m
    return list(out.values())


def without(text: str, value: str | None) -> str | None:
    """Return `text` with the conjunct `value` and the word or comma that joined it taken out, or None when
    `value` is not one conjunct of it ("knitting and a pottery class" without "a pottery class": "knitting")."""
    if not value or len(re.findall(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.I)) != 1:
        return None
    v = rf"(?:(?:the|a|an|my|our|his|her|their|some)\s+)?{re.escape(value)}"
    for pattern in (rf",\s*{v}(?=\s+(?:and|or)\s)", rf",?\s+(?:and|or)\s+{v}(?!\w)", rf"(?<!\w){v},?\s+(?:and|or)\s+", rf",\s*{v}(?!\w)",
                    rf"(?<!\w){v}\s*,\s*"):
        out, n = re.subn(pattern, " " if pattern.endswith("+") else "", text, count=1, flags=re.I)
        if n:
            out = re.sub(r"\s+([,.;:!?])", r"\1", re.sub(r"\s{2,}", " ", out)).strip()
            return out[:1].upper() + out[1:]
    return None


def unsaid(sibling: MemoryRecord, forgotten: MemoryRecord) -> Candidate | None:
    """Return what a memory said in the same words as a forgotten one still holds, the forgotten value taken out
    ("I'm 43 and doing grade 3 piano" without the age: "doing grade 3 piano"), or None when it cannot be taken
    out as a conjunct, or is the sibling's own value."""
    if not forgotten.value or same_value(forgotten.value, sibling.value):
        return None
    return _without(sibling, forgotten.value)


def _without(sibling: MemoryRecord, value: str | None) -> Candidate | None:
    """Return the derived memory that says `sibling`'s sentence without the conjunct `value`, or None."""
    text = without(sibling.text, value)
    if text is None or text == sibling.text:
        return None
    return _derived(sibling, text, sibling.value)


def rest(sibling: MemoryRecord, target: MemoryRecord, new: Candidate) -> Candidate | None:
    """Return what a memory said in the same words as a corrected one still holds: the new value in place of the
    old (`remainder`), or, when none replaces it, the sentence without the corrected conjunct."""
    found = remainder(sibling, new)
    return found if found is not None else _without(sibling, target.value)


SAME_WORDS = "same words"  # why a memory is forgotten with another: it was said in the same words


def forgotten_siblings(store: Store, olds: Sequence[MemoryRecord], taken: Set[str] = frozenset()
                       ) -> list[tuple[MemoryRecord, Candidate | None]]:
    """Return the active memories said in the same words as a forgotten one (`said_alike`), each with what it
    still holds without the forgotten value (`unsaid`), or None when that cannot be said without it."""
    out: dict[str, tuple[MemoryRecord, Candidate | None]] = {}
    for o in olds:
        for m in said_alike(store, [o]):
            if m.id not in taken and m.id not in out:
                out[m.id] = (m, unsaid(m, o))
    return list(out.values())


def moves_to(new: str | None, old: str | None) -> bool:
    """Return True when `new` is another value than `old`: not the same value, nor the same numbers said again
    ("roughly 8 km both directions" restates "8 km": it changes nothing a count or a calendar reads)."""
    if same_value(new, old):
        return False
    numbers_new, numbers_old = _NUMBERS.findall(new or ""), _NUMBERS.findall(old or "")
    return not numbers_new or sorted(numbers_new) != sorted(numbers_old)


_NUMBERS = re.compile(r"\d+(?:[.:,]\d+)?")
_DIGIT_WORDS = re.compile(r"\S*\d\S*")  # the words of a sentence that say a number: "€2,400", "15:10", "5mg"


def held_kinds(m: MemoryRecord) -> set[str | None]:
    """Return the types of the concrete values a memory holds: its value's, the numbers it says, and its time's
    ("British Gas are coming to service it on 23 January", "booked Rosalind's for dinner at 7:30"), which is what
    a later change moves. A vague one ("ask your name yesterday", "a weekend trip") holds nothing to move."""
    held = [m.value, *(w.strip(".,;:!?()\"'") for w in _DIGIT_WORDS.findall(m.text))]
    kinds = {value_kind(m) if v == m.value else value_type(str(v)) for v in held if concrete(v)}
    when = str(m.meta.get("when") or "")
    when_kind = value_type(when) if concrete(when) else None
    return kinds | ({when_kind} if when_kind in ("date", "time") else set())
