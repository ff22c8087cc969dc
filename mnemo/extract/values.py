"""Values as claims carry them: the span of a value, its type, and the marks that identify a statement.

    value_type(span)      # "money", "date", "time", "duration", "number", "email", "place", "name", "thing", ...
    marks(text)           # {"kt-40", "24", "rosa.k@example.org"}: what makes two statements distinct

Types come from spaCy's entity labels where the parser found an entity, from the shape of the
words otherwise (a currency sign, "10am", an e-mail address, a record id). `marks` is computed from
text alone, the same way for a new sentence and for a stored memory, so a duplicate check compares
like with like: two statements whose numbers, identifiers, addresses or names differ are distinct
whatever their cosine.
"""

from __future__ import annotations

import re
from typing import Any

from ..normalise import CURRENCIES, RECORD_ID, marks  # noqa: F401  (re-exported: values and marks go together)

_ENTITY_TYPES = {"MONEY": "money", "DATE": "date", "TIME": "time", "PERCENT": "percent", "QUANTITY": "quantity",
                 "CARDINAL": "number", "ORDINAL": "number", "GPE": "place", "LOC": "place", "FAC": "place",
                 "ORG": "org", "PERSON": "name", "NORP": "group", "PRODUCT": "thing", "WORK_OF_ART": "thing",
                 "EVENT": "thing", "LANGUAGE": "language"}
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL = re.compile(r"\b(?:https?://|www\.)\S+|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|test|app)(?:/\S*)?\b", re.I)
_TIME = re.compile(r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b", re.I)
_PHONE = re.compile(r"(?:\+\d[\d ()-]{6,}\d|\b\d{3}[ -]\d{3,4}(?:[ -]\d{3,4})?\b)")
_VERSION = re.compile(r"\bv?\d+(?:\.\d+){1,3}\b|\bversion\s+\d", re.I)
_CURRENCY = re.compile(r"[€$£¥]|\b(?:" + "|".join(sorted((k for k in CURRENCIES if k.isalpha()), key=len,
                                                           reverse=True)) + r")\b", re.I)
_DURATION = re.compile(r"\b(?:\d+(?:\.\d+)?|a|an|one|two|three|four|five|six|ten|twelve)\s+(?:business\s+|working\s+)?"
                       r"(?:minutes?|hours?|days?|weeks?|months?|years?)\b", re.I)
# Month names ("May" only next to a number: "I may"), abbreviations, weekdays and ISO dates.
_MONTH_OR_DAY = re.compile(r"\b(?:january|february|march|april|june|july|august|september|october|november|december|"
                           r"jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\b\.?|\bmay\s+\d|\d\s+may\b|"
                           r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\b\d{4}-\d{2}-\d{2}\b|\bweekends?\b", re.I)
_NUMBER = re.compile(r"\d")
# What a date's words say besides its numbers: a year, or a word of the calendar or the clock of days.
_CALENDAR = re.compile(r"\b(?:19|20)\d\d\b|\b(?:days?|weeks?|weekends?|months?|years?|decades?|today|tonight|tomorrow|"
                       r"yesterday|ago|morning|afternoon|evening|night|spring|summer|autumn|fall|winter|christmas|"
                       r"easter|new year)\b", re.I)
_ORDINAL_DAY = re.compile(r"(?:the\s+)?(?:[1-9]|[12]\d|3[01])(?:st|nd|rd|th)", re.I)
_AGE = re.compile(r"\b\d{1,3}\s*(?:years?|yrs?)(?:\s+|-)old\b", re.I)


def concrete(text: str | None) -> bool:
    """Return True when a value names a point a calendar, a clock or a count reads: a digit, a month or a weekday
    ("19 July", "8:15", "Friday", "£32"), not "these days", "daily" or "one of my favourites"."""
    return bool(text) and bool(_NUMBER.search(text) or _MONTH_OR_DAY.search(re.sub(r"\bweekends?\b", "", text)))


def value_type(span: Any) -> str:
    """Return the type of a value span (a spaCy Span, or a string when no parse is at hand)."""
    text = span if isinstance(span, str) else span.text
    if _EMAIL.search(text):
        return "email"
    if _AGE.search(text):
        return "age"
    if _URL.search(text):
        return "url"
    if RECORD_ID.fullmatch(text.strip()):
        return "identifier"
    if _CURRENCY.search(text) and _NUMBER.search(text):
        return "money"
    if _TIME.search(text):
        return "time"
    if _DURATION.search(text) and not _MONTH_OR_DAY.search(text):
        return "duration"
    if _MONTH_OR_DAY.search(text) or _ORDINAL_DAY.fullmatch(text.strip()):
        return "date"
    if _VERSION.search(text):
        return "version"
    if _PHONE.search(text):
        return "phone"
    if not isinstance(span, str):
        labels = [e.label_ for e in span.ents] or [t.ent_type_ for t in span if t.ent_type_]
        for label in labels:
            if label in _ENTITY_TYPES:
                kind = _ENTITY_TYPES[label]
                if kind == "date" and _NUMBER.search(text) and not _CALENDAR.search(text):
                    # A code the tagger took for a date ("locker 71B", "plot 14B"): no calendar word, no year.
                    continue
                return "duration" if kind == "date" and _DURATION.search(text) else kind
        if any(t.pos_ == "PROPN" for t in span) and not any(t.pos_ == "NOUN" for t in span):
            return "name"
    if _NUMBER.search(text):
        return "number"
    return "thing"


def said_new(t: Any) -> bool:
    """Return True for the adjective "new", also where the tagger reads a sentence's first word as part of a
    name ("New gate code is 9902": NNP) while the next word is in lower case (unlike "New York")."""
    nxt = t.doc[t.i + 1] if t.i + 1 < len(t.doc) else None
    return t.lower_ == "new" and (t.tag_ == "JJ" or t.dep_ == "amod" or t.is_sent_start and nxt is not None
                                  and nxt.is_lower and nxt.pos_ == "NOUN")


def proper_word(t: Any) -> bool:
    """A proper adjective ("Arabic", "French") names a thing as a noun would: after an attribute noun ("the
    official language is French") it is the value, not a property of the owned thing ("my sister is Canadian").
    One the tagger reads as a named thing, not a nationality ("my favourite band is Radiohead": ORG), is a name."""
    return bool(t.ent_type_) or t.is_title and t.i > t.sent.start
