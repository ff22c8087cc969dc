"""Evidence from claims: whether a memory answers what a question asks, not only shares its words.

    fit(q, memory, aliases)      # "answers" | "entity" | "other" | "conflict"
    verdict(q, fits, evidence)   # "certain" | "vague" | "unknown", with the reason

A memory *answers* a question when it is about the entity the question asks about (the same key,
an alias, or a stored name for it: "Ferris" for "the user's mechanic") and holds the slot asked
for (aligned as in reconciliation, or of the same family: `assets/words/slot_families.tsv`), or,
when the question asks through a type ("when", "how much"), a value of that type. A memory that
states a number for what the question asks (`stated`: "the main branch has now reached 165" for "how
many commits have I merged?") answers whatever keys its claims were stored under, when it is about
the entity asked or the question is the user's own. A memory about
another entity named by a number or an identifier ("flat 2" when the question asks about
"flat 5") *conflicts*: it must not be ranked as if it answered.

The verdict comes from that evidence first: an answering memory in the pack is "certain", and a
question that asks for a slot or a thing is certain only so (high topical evidence alone makes it
"vague"); a
question about a particular entity (owned, named or numbered: "the user's mother", "flat 5")
that no packed memory is about, or naming a thing no packed memory mentions ("room 216",
"Calloway Partners"), is "unknown" whatever the word overlap; a request for a task ("can you
recommend ...") is "vague" on half the evidence a question needs, since what the user prefers
bears on it; the rest falls back to the calibrated score thresholds (dense cosine and query
coverage). For a question pinned to one entity only the evidence of memories about that entity
counts (`top_evidence`): "What did Caroline realise after the race?" is not evidenced by Melanie
saying she realised something after hers.

Who a memory is about reads dialog turns as dialog (`mentions`): a turn stored with its
speaker and addressees speaks of its speaker in the first person and of the addressees in the
second. When a question names a time ("on 1 May, 2022", "in August 2023"), that time is in the
record as when a memory was said (`spans`, `missing_names`), and recall's time scope ranks what
was said then first (`ranking.fuse_scoped`).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache

from .. import lexicon, match
from ..model import MemoryRecord, topic_of
from ..normalise import CURRENCY_WORDS, MONTHS, RECORD_ID, STOPWORDS, content_tokens, stem

FITS = ("answers", "entity", "other", "conflict")
# What each fit adds to a candidate's ranking score (times RecallConfig.weight_claim).
FIT_SCORE = {"answers": 1.0, "entity": 0.3, "other": 0.0, "conflict": -1.0}
# Value types a question word accepts: "when" is answered by a date, a time or a duration.
_COMPATIBLE = {"date": {"date", "time"}, "place": {"place", "name", "org"}, "name": {"name", "org", "group"},
               "money": {"money", "number"}, "number": {"number", "quantity"}, "duration": {"duration"}}
_WORD = re.compile(r"[\w@.+-]+")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[,.]\d+)*")
_DIGIT = re.compile(r"\d")
# A number that is part of a name, not a quantity: a record id ("CLM-40872", "TRV-7731") or a number with one
# capital letter glued to it ("Plot 14B", "Flat 3C"); an amount keeps its currency ("£14B").
_LABEL = re.compile(rf"{RECORD_ID.pattern}|(?<![€$£¥\w.])\d+[A-Z]\b")
_NUMBER_WORD = re.compile(r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|"
                          r"fifty|hundred|dozen|a couple)\b", re.I)
# A number said as an amount of money: a currency sign or word beside it ("£3.50", "300 euros", "53p").
_MONEY = re.compile(rf"(?:[€$£¥]\s*(?:{_NUMBER.pattern})|(?:{_NUMBER.pattern})(?:p\b|\s*(?:{CURRENCY_WORDS})\b))", re.I)
# A date said with its month's name ("November 25", "25 November 2024", "May 13th"), or a year alone.
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DATE = re.compile(rf"\b(?:(?:{_MONTH})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|"
                   rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH})\.?(?:,?\s+\d{{4}})?|(?:19|20)\d{{2}})\b", re.I)
# A "when" question in the present or future tense, and any word that says a date or a time of one (lenient:
# a digit, a month or weekday, "tomorrow", "next week", "spring").
_WHEN_NOW = re.compile(r"\s*when\s+(?:is|are|does|do|will|'s|am)\b", re.I)
_DATE_SAID = re.compile(rf"\d|\b(?:{_MONTH}|monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tonight|"
                        r"tomorrow|yesterday|week|weekend|month|year|spring|summer|autumn|fall|winter|christmas|"
                        r"easter|morning|afternoon|evening|night|noon|midnight)s?\b", re.I)
_YEAR = re.compile(r"\b(?:1[5-9]|20)\d\d\b")
_PAST = re.compile(r"\b(?:did|was|were|had)\b", re.I)
# Value types that a statement gives as a number (a date also by its month).
_NUMERIC = (None, "number", "money", "date", "duration")
_SLACK = timedelta(days=7)
_FIRST = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"})
_SECOND = frozenset({"you", "your", "yours", "yourself", "yourselves"})


@lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    # Kept per text: a recall reads each candidate's words several times, and hot memories recur across recalls.
    return frozenset(w.lower().removesuffix("'s").strip(".") for w in _WORD.findall(text or ""))


@lru_cache(maxsize=4096)
def _content(text: str) -> frozenset[str]:
    return frozenset(content_tokens(text))


def _said(m: MemoryRecord) -> str:
    """Return the words memory `m` says, without the "<speaker>:" prefix a transcript renders (see `mentions`)."""
    speaker = m.meta.get("speaker") if m.meta else None
    return topic_of(m.text.removeprefix(f"{speaker}:") if speaker else m.text, m.meta)


def mentions(m: MemoryRecord) -> set[str]:
    """Return the words memory `m` mentions, reading a dialog turn's pronouns as the people they stand for.

    A turn stored with `meta["speaker"]` (and `meta["addressees"]`) is one person speaking to
    others: its first person ("I", "my", "we") is the speaker and its second person ("you",
    "your") the addressees, and a turn with neither pronoun speaks for its speaker. The
    "<speaker>:" prefix a transcript renders is not a mention: "Caroline: how was your race?"
    is about the person asked, not about Caroline's race.
    """
    speaker = m.meta.get("speaker") if m.meta else None
    said = _words(_said(m))
    if not speaker:
        return said
    out = set(said)
    if said & _FIRST or not said & _SECOND:
        out |= _words(speaker)
    if said & _SECOND:
        for other in m.meta.get("addressees") or ():
            out |= _words(other)
    return out


def _period(name: str) -> tuple[int | None, int | None, int | None] | None:
    """Return (year, month, day) of a name that is a calendar time ("october 13", "august 2023", "2022"), else None.

    Parts the name leaves open are None: "may" is (None, 5, None).
    """
    words = name.replace(",", " ").split()
    if not words or len(words) > 3:
        return None
    year = month = day = None
    for w in words:
        if w.isdigit() and len(w) == 4:
            year = int(w)
        elif w.rstrip(".") in MONTHS:
            month = MONTHS[w.rstrip(".")]
        elif w.rstrip("stndrh").isdigit() and 1 <= int(w.rstrip("stndrh")) <= 31:
            day = int(w.rstrip("stndrh"))
        else:
            return None
    if month is None and (day is not None or year is None):
        return None
    return year, month, day


_MONTH_NAME = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
               r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\b\.?")
_ORD = r"(?:st|nd|rd|th)?"
_TIME_LEAD = frozenset({"in", "of", "during", "since", "until", "till", "by", "before", "after", "last", "next",
                        "early", "late", "mid", "this", "that", "through", "throughout"})
_TIME_NAMED = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}}){_ORD}\s+(?:of\s+)?)?(?P<month>{_MONTH_NAME})(?:\s+(?P<d2>\d{{1,2}}){_ORD}\b)?"
    r"(?:,?\s+(?P<year>(?:19|20)\d{2})\b)?|\b(?:in|of|since|during|by)\s+(?P<lone>(?:19|20)\d{2})\b")


def spans(q, now: datetime) -> list[tuple[datetime, datetime]]:
    """Return the calendar times question `q` names ("in August 2023", "on 25 May, 2022", "in 2021") as UTC spans.

    Read from the question's own words, with month names capitalised as written (so the
    verb "may" is no month). Each span is the day, month or year named, widened by a week
    either side (see `_said_then`). A time without a year is its latest occurrence that
    starts before `now`.
    """
    out = []
    for m in _TIME_NAMED.finditer(q.text):
        if m["lone"]:
            year, month, day = int(m["lone"]), None, None
        else:
            name = m["month"].rstrip(".").casefold()
            month = MONTHS.get(name) or MONTHS.get(name[:3])
            if month is None:
                continue
            day = int(m["d1"] or m["d2"]) if (m["d1"] or m["d2"]) else None
            year = int(m["year"]) if m["year"] else None
            before = q.text[:m.start()].split()
            if day is None and year is None and (not before or before[-1].casefold() not in _TIME_LEAD):
                continue  # a bare month only after a time word: "May I ask ..." names no time
        for y in ([year] if year else [now.year, now.year - 1]):
            days = _days(y, month, day)
            if days is None:
                break
            start = datetime(days[0].year, days[0].month, days[0].day, tzinfo=timezone.utc)
            if year or start <= now:
                end = datetime(days[1].year, days[1].month, days[1].day, tzinfo=timezone.utc) + timedelta(days=1)
                out.append((start - _SLACK, end + _SLACK))
                break
    return out


def _days(year: int, month: int | None, day: int | None) -> tuple[date, date] | None:
    """Return the first and last day of a day, a month or a year of `year`; None for no such day ("31 February")."""
    try:
        first = date(year, month or 1, day or 1)
    except ValueError:
        return None
    if day:
        return first, first
    if month:
        return first, date(year, month, calendar.monthrange(year, month)[1])
    return first, date(year, 12, 31)


def _said_then(name: str, m: MemoryRecord) -> bool:
    """Return True when `name` is a calendar time and memory `m` was said within a week of it.

    A question dated "in August 2023" or "on 31 July" is answered by what was said then, in
    words that need not name the date ("last week I ..."): the date is in the record as the
    memory's time. A week's slack either side covers telling of an event after it, or before.
    """
    period = _period(name.casefold())
    when = m.valid_from or m.created_at
    if period is None or when is None:
        return False
    year, month, day = period
    for y in ([year] if year else [when.year - 1, when.year, when.year + 1]):
        days = _days(y, month, day)
        if days is None:
            return False
        if days[0] - _SLACK <= when.date() <= days[1] + _SLACK:
            return True
    return False


def aliases(memories: Sequence[MemoryRecord]) -> dict[str, str]:
    """Return {name key: entity key} from stored name claims ("ferris" -> "user's mechanic")."""
    return {match.key(m.value) or "": match.key(m.subject) or "" for m in memories
            if m.attribute in ("name", "preferred_name") and m.value and m.subject not in (None, "user", "team")}


def namesakes(question: str, memories: Sequence[MemoryRecord]) -> list[str]:
    """Return the entity keys `question` reaches only through a stored name claim among `memories`.

    A name claim joins two keys: "The user's mechanic is called Ferris" files what is said of the
    mechanic under "user's mechanic", and what is said of Ferris under "ferris". A question that
    says one side and not the other asks of both: "How much does Ferris charge?" of what is stored
    about the user's mechanic, "What does my mechanic charge?" of what is stored about Ferris. The
    name counts as said when one of its words of three letters or more is ("Okafor" for "Dr
    Okafor"); the entity when its own noun is ("mechanic"). The user's and the team's own names
    are left out: every memory of the user is about them.
    """
    said = _words(question)
    out: list[str] = []
    for name, entity in aliases(memories).items():
        thing = _words(entity.rsplit("'s ", 1)[-1])
        by_name = bool({w for w in _words(name) if len(w) > 2} & said)
        by_entity = bool(thing) and thing <= said
        if by_name and not by_entity:
            out.append(entity)
        elif by_entity and not by_name:
            out.append(name)
    return list(dict.fromkeys(k for k in out if k))


def about(q_subject: str | None, m: MemoryRecord, names: Mapping[str, str]) -> bool:
    """Return True when memory `m` is about the entity `q_subject` (key, alias, stored name, or mention)."""
    if not q_subject:
        return True
    if match.entity_match(q_subject, m.subject):
        return True
    named = names.get(match.key(m.subject) or "")
    if named and match.entity_match(q_subject, named):
        return True
    # And the other way: the question names "Ferris", the memory is filed under the user's mechanic.
    called = names.get(match.key(q_subject) or "")
    if called and match.entity_match(called, m.subject):
        return True
    if q_subject in ("user", "team"):
        return False
    owner, _, group = q_subject.rpartition("'s ")
    if owner and group in lexicon.words("collective_nouns") and m.subject and (
            m.subject == owner or m.subject.startswith(f"{owner}'s ")):
        # "the user's family" covers "the user's daughter".
        return True
    # Mentioned in the text: every word of the entity's own name ("mother-in-law" is one word).
    thing = q_subject.rsplit("'s ", 1)[-1]
    owner = q_subject.rsplit("'s ", 1)[0] if "'s " in q_subject else None
    words = mentions(m)
    owned = owner is None or owner in ("user", "team") or owner in words
    return owned and bool(_words(thing)) and (_words(thing) <= words or _says_head(thing, m, words))


def says_asked(phrase: str | None, m: MemoryRecord) -> bool | None:
    """Return whether memory `m` names what a question asks for by its head noun ("birthday", "vet practice"),
    or None when the phrase asked has no content word ("live in")."""
    words = [w for w in _WORD.findall((phrase or "").casefold()) if w not in STOPWORDS]
    return _says_head(" ".join(words), m, mentions(m)) if words else None


def _form(word: str) -> str:
    """Return the form a word is compared in: a kin word as a question says it ("nan" -> "grandmother"), stemmed."""
    return stem(lexicon.kin().get(word, word))


def _says_head(thing: str, m: MemoryRecord, words: frozenset[str] | set[str]) -> bool:
    """Return True when memory `m` names the thing by its head noun, with no other noun before it.

    The head of an English noun compound is its last word and the words before it say which one:
    "Plot 14B" names what a question calls "the allotment plot", "the 9kW pump" "the heat pump", but
    "car insurance" is no "home insurance", nor "front door" "garage door". A word before the head that
    is a function word, holds a digit ("4.2kW system") or is one of the thing's own words leaves it the
    same thing. A one-word thing is compared with the words `m` mentions (`words`, read as dialog).
    Words are compared in `_form`: kin as a question says them ("Nan" for "the grandmother"), stemmed.
    """
    said = tuple(_WORD.findall(thing.casefold()))
    if len(said) == 1:
        return _form(said[0]) in _forms(frozenset(words))
    return bool(said) and _head_said(said, _said(m))


@lru_cache(maxsize=4096)
def _forms(words: frozenset[str]) -> frozenset[str]:
    return frozenset(_form(w) for w in words)


@lru_cache(maxsize=8192)
def _head_said(said: tuple[str, ...], text: str) -> bool:
    head, mods = _form(said[-1]), {_form(w) for w in said[:-1]}
    words = _WORD.findall(text.casefold())
    for i, w in enumerate(words):
        if _form(w) == head:
            j = i - 1
            while j >= 0 and _form(words[j]) in mods:
                j -= 1  # "home insurance policy number": past the thing's own modifiers, to what stands before them
            before = words[j] if j >= 0 else ""
            if not before or before in STOPWORDS or _DIGIT.search(before):
                return True
    return False


def fit(q, m: MemoryRecord, names: Mapping[str, str]) -> str:
    """Return how memory `m` stands to question `q` (an `extract.questions.Ask`): see the module docstring.

    A question of several parts takes the best fit over its parts.
    """
    found = [_fit(part, m, names) for part in q.each()]
    return min(found, key=lambda f: ("answers", "entity", "other", "conflict").index(f))


def _fit(q, m: MemoryRecord, names: Mapping[str, str]) -> str:
    # "the country of citizenship of Narendra Modi": a memory naming the person the subject hangs on is about it.
    named = any(n in (q.subject or "") and _words(n) <= mentions(m) for n in q.names)
    if not (about(q.subject, m, names) or named):
        if q.hard and m.subject and match.hard(m.subject) and match.entity_match(q.subject, m.subject) is None \
                and _words(q.subject) & _words(m.subject):
            return "conflict"
        # A question of the user's own ("how many commits have I merged?") is answered by a statement of a
        # value for what it asks; one about a particular entity only by memories about that entity: "my
        # mother-in-law's birthday is on 3 August" does not answer "when is my mother's birthday?".
        return "answers" if not q.specific and stated(q, m) else "other"
    if stated(q, m):
        return "answers"
    if q.slot:
        slot = m.attribute
        family = lexicon.slot_families().get(q.slot, frozenset({q.slot}))
        level = match.slot_match(q.slot, slot) if slot else None
        asked = tuple(q.slot.split("_"))
        if level == "qualified" and len(asked) > len(slot.split("_")):
            # The memory's slot lacks what the question's qualifies it by ("policy number" for "home insurance
            # policy number"): it answers unless its words name the head with another qualifier ("Car policy").
            named_otherwise = asked[-1] in _words(m.text) and not _head_said(asked, _said(m))
            return "entity" if named_otherwise else "answers"
        if slot and (level or slot in family):
            return "answers"
        if _words(q.slot.replace("_", " ")) <= _words(m.text):
            return "answers"
        return "entity"
    if q.wants:
        kind = m.meta.get("value_type")
        if kind in _COMPATIBLE.get(q.wants, {q.wants}):
            return "answers"
    return "entity"


@lru_cache(maxsize=512)
def focus(q) -> tuple[frozenset[str], ...]:
    """Return what a question asks for, as stemmed content words: the noun it counts or asks, its slot, and
    the thing it asks about when that is a thing, not a person ("my dentist appointment", not "Caroline")."""
    found = (content_tokens(p) for p in _asked(q))
    return tuple(dict.fromkeys(frozenset(f) for f in found if f))


def _asked(q) -> tuple[str | None, ...]:
    """Return the phrases of what a question asks for: the noun it counts or asks, its slot, and the thing it
    asks about when that is a thing, not a person."""
    thing = q.subject.rsplit("'s ", 1)[-1] if q.specific and q.subject not in q.names else None
    return q.asked, q.slot_phrase, thing


@lru_cache(maxsize=512)
def _heads(q) -> frozenset[str]:
    """Return the head nouns of what a question asks for, stemmed: the last content word of each phrase."""
    return frozenset(stem(w) for p in _asked(q) if p for w in _WORD.findall(p.casefold())[-1:] if w not in STOPWORDS)


def stated(q, m: MemoryRecord) -> frozenset[str]:
    """Return the values memory `m` states for what question `q` asks, or an empty set when it states none.

    A memory states a value when its text holds at least half the words of one of the question's
    focuses ("daily call quota", "commits") and a number that the question does not say itself: "the
    new daily quota of 1,200 calls" states {"1200"} for "What is the daily call quota?". A date is a
    value (its month too) unless a count or an amount is asked: "my November 25 interview" states no
    number of interviews. Only values said as numbers are read (a slot whose values are words is left
    to the claims), and only from statements: a pasted code block's numbers are not.
    """
    if q.wants not in _NUMERIC or m.meta.get("rule") == "note.code" or not _DIGIT.search(m.text):
        return frozenset()  # most memories say no number: nothing to read, and no words to count
    return _stated(q, m.text)


@lru_cache(maxsize=8192)
def _stated(q, text: str) -> frozenset[str]:
    # Kept per (question, text): recall reads it for the claim fit and again for current_first.
    words = _content(text)
    # Half the words of what is asked, and its head noun when it has several: "home insurance" is not said of
    # "the home insurance policy number", whose head is "number".
    heads = _heads(q)
    if not any(2 * len(f & words) >= len(f) and (len(f) == 1 or not f & heads or f & heads & words)
               for f in focus(q)):
        return frozenset()
    dated = q.wants in (None, "date")
    text = text if dated else _DATE.sub(" ", text)
    text = _as_asked(q, _LABEL.sub(" ", text))
    values = {n.replace(",", "") for n in _NUMBER.findall(text)}
    if _asks_year(q):
        # "What year is my car?": a year is four digits; the 3 of "a grey Mazda 3" is none.
        return frozenset(v for v in values if _YEAR.fullmatch(v))
    if dated:
        values |= {w for w in _words(text) if w in MONTHS}
    return frozenset(values - {n.replace(",", "") for n in _NUMBER.findall(q.text)})


def type_asked(q) -> str | None:
    """Return the type of value `holds_the_type` reads for a question ("year", "date", "money", "number")."""
    return "year" if _asks_year(q) else q.wants


def _asks_year(q) -> bool:
    """Return True for a question in the present tense that asks for a year ("What year is my car?"). In the past
    tense ("Which year did she start?") the time a memory was said may answer it, as for "when"."""
    return (q.asked == "year" or q.slot == "year") and not _PAST.search(q.text)


def _as_asked(q, text: str) -> str:
    """Return the part of `text` the question's type reads: an amount of money answers "how much does it cost",
    not "how old" or "how many"; a bare number the reverse."""
    if q.wants == "money":
        return " ".join(m.group() for m in _MONEY.finditer(text))
    return _MONEY.sub(" ", text) if q.wants is not None else text


def missing_names(q, packed: Sequence[MemoryRecord], names: Mapping[str, str], self_names: Sequence[str]) -> list[str]:
    """Return the things the question names that no packed memory mentions or is about."""
    own = {n.casefold() for n in self_names}
    out = []
    for name in q.names:
        if name in own:
            continue
        # A thing named by its number ("flat 3") is another thing than its neighbour ("flat 2"): the number must
        # be said; a memory about a flat is not about flat 3.
        number = {w for w in _words(name) if any(ch.isdigit() for ch in w)}
        if not any(_said_then(name, m) or (about(name, m, names) or _words(name) <= mentions(m))
                   and number <= mentions(m) | _words(m.text) for m in packed):
            out.append(name)
    return out


def top_evidence(q, fitted: Sequence[tuple[str, float]]) -> float:
    """Return the best evidence among packed memories, given as (fit, evidence) pairs.

    A question pinned to one entity ("What did Caroline realise after the race?") is evidenced
    only by memories about that entity: a memory about someone else that shares every word of
    the question ("Melanie: after the race I realised ...") supports a different claim, so it
    does not count. Other questions take the best evidence of any packed memory.
    """
    about_it = ("answers", "entity")
    return max((e for f, e in fitted if not q.pinned or f in about_it), default=0.0)


def verdict(q, fits: Sequence[str], top_evidence: float, missing: Sequence[str], certain_at: float,
            vague_at: float) -> tuple[str, str]:
    """Return (confidence, why) for a pack, from the claims first and the score thresholds after."""
    if missing:
        return "unknown", f"the record never mentions {', '.join(missing)}"
    if "answers" in fits:
        return "certain", f"a packed memory holds {q.slot or q.wants or 'the answer'} for {q.subject or 'the subject'}"
    if q.pinned and "entity" not in fits:
        return "unknown", f"no packed memory is about {q.subject}"
    if top_evidence >= certain_at:
        if not (q.slot or q.asked):
            return "certain", f"evidence {top_evidence:.2f} >= certain_at {certain_at}"
        # A question that asks for a slot or a thing is certain only when a packed memory answers it
        # (above): words in common with "which ESLint rules did I enforce?" are no answer to it.
        return "vague", f"evidence {top_evidence:.2f}, but no packed memory holds {q.slot or q.asked}"
    if q.request and top_evidence >= vague_at / 2:
        # A task ("recommend a restaurant") is served by whatever the user prefers that bears on it.
        return "vague", f"a request; evidence {top_evidence:.2f} of what bears on it"
    if top_evidence >= vague_at or about_asked(q, fits):
        return "vague", f"evidence {top_evidence:.2f}" + (" about the entity asked" if "entity" in fits else "")
    return "unknown", f"evidence {top_evidence:.2f} < vague_at {vague_at}"


def holds_the_type(q, texts: Sequence[str]) -> bool | None:
    """Return whether some text says a value of the type the question wants (an amount of money for "how much
    does it cost", a number other than money for "how old" / "how many", a date for "when is ...", a year of
    four digits for "what year"), or None when it wants no such type.

    A pack about the thing asked with no value of that type ("How much was the camp?" over its dates) does not
    answer it: hedging "vague" there answers a question the record is silent on. A "when" question in the
    present or future tense ("When is Roisin's birthday?", "When does the passport expire?") asks for a date
    that must be said; in the past tense the time a memory was said may answer it ("When did she go?"), so
    it asks for no type here.
    """
    if _asks_year(q):
        return any(_YEAR.search(t) for t in texts)
    if q.wants == "date":
        if not _WHEN_NOW.match(q.text):
            return None
        return any(_DATE_SAID.search(t) for t in texts)
    if q.wants not in ("money", "number"):
        return None
    kept = [_as_asked(q, _LABEL.sub(" ", t)) for t in texts]
    return any(_DIGIT.search(k) or q.wants == "number" and _NUMBER_WORD.search(k) for k in kept)


def about_asked(q, fits: Sequence[str]) -> bool:
    """Return True when a packed memory is about the particular thing a question asks of: "vague" at any evidence.

    A memory about the entity asked that does not hold the slot asked ("where does the user's
    sister work?" and "my sister is a nurse") may still bear on it: it is shown, hedged, rather
    than hidden as "unknown". Calibration sees it (`calibrate.decision`): no `vague_at` hides it.
    """
    return "entity" in fits and q.specific
