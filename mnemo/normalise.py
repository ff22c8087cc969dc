"""Canonical forms shared by extraction and reconciliation: subjects, attributes, values, dates, tokens.

Both stages must agree on what "the same subject", "the same attribute" and "the
same value" mean, so the rules live here once:

- subjects: "user" for the speaker (I, me, my), "team" for we / our, record ids
  upper-cased ("ic-mc-44" -> "IC-MC-44"), "user's sister" for my sister, and any
  other named person or thing lowercased and trimmed ("the Q3 report" -> "q3 report");
- attributes: snake_case, through the slot table (`mnemo.lexicon`: "lead time" -> "lead_time",
  "due date" -> "deadline", "company" -> "employer"); qualifiers are kept ("home address");
- values: trimmed, thousands separators dropped, currencies as ISO codes after the
  number ("€1,200" -> "1200 EUR");
- dates: ISO dates resolved against `now` (a month and day in the past means next year);
- sentences: splitting and small talk recognised;
- marks: the numbers, identifiers, addresses and names that make two statements distinct.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta
from functools import lru_cache

RECORD_ID = re.compile(r"\b[A-Za-z]{1,6}(?:-[A-Za-z0-9]{1,10})*-\d[A-Za-z0-9]*\b")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'@.+-]*[A-Za-z0-9]|[A-Za-z0-9]")

DATE_ATTRIBUTES = frozenset({"deadline", "start_date", "end_date", "launch_date", "release_date", "eta", "date",
                             "expiry_date", "ship_date"})

CURRENCIES = {"€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR", "$": "USD", "usd": "USD",
              "dollar": "USD", "dollars": "USD", "£": "GBP", "gbp": "GBP", "pound": "GBP", "pounds": "GBP",
              "chf": "CHF", "jpy": "JPY", "yen": "JPY", "cny": "CNY", "rmb": "CNY", "yuan": "CNY"}
CURRENCY_WORDS = r"eur|euros?|usd|dollars?|gbp|pounds?|chf|jpy|yen|cny|rmb|yuan"
_CUR = rf"(?:€|\$|£|{CURRENCY_WORDS})"
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_MONEY_BEFORE = re.compile(rf"^(?P<cur>{_CUR})\s*(?P<num>{_NUM})$", re.I)
_MONEY_AFTER = re.compile(rf"^(?P<num>{_NUM})\s*(?P<cur>{_CUR})$", re.I)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")

STOPWORDS = frozenset(
    "a an the of for to in on at by with and or but is are was were be been being it its this that these those "
    "i me my mine we us our you your he she they them their his her there here what which who whom whose "
    "do does did have has had will would should can could may might must shall just so very really also too "
    "about from as into than then now not no yes please okay ok".split()
)
_SUFFIXES = ("ing", "ed", "es", "s")

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<year>\d{4}))?"
_DATE_FORMS = [
    ("iso", re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b")),
    ("mdy", re.compile(rf"\b(?P<month>{_MONTH})\.?\s+{_DAY}\b{_YEAR}", re.I)),
    ("dmy", re.compile(rf"\b(?:the\s+)?{_DAY}(?:\s+of)?\s+(?P<month>{_MONTH})\b\.?{_YEAR}", re.I)),
    ("rel", re.compile(r"\b(?P<rel>today|tonight|tomorrow|day after tomorrow)\b", re.I)),
    ("in", re.compile(r"\bin\s+(?P<n>\d+|a|one|two|three|four)\s+(?P<unit>days?|weeks?)\b", re.I)),
    ("weekday", re.compile(r"\b(?:(?:next|this|on|by)\s+)?(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I)),
    ("next", re.compile(r"\bnext\s+(?P<unit>week|month)\b", re.I)),
    ("eom", re.compile(r"\b(?:the\s+)?end\s+of\s+(?:the\s+|this\s+)?month\b", re.I)),
    ("nth", re.compile(r"\bthe\s+(?P<day>\d{1,2})(?:st|nd|rd|th)\b", re.I)),
    ("month", re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b(?:\s+\d{4})?")),
]
_SMALL = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4}


def canonical_subject(raw: str | None) -> str | None:
    """Return the canonical subject for a subject phrase ("I" -> "user", "ic-mc-44" -> "IC-MC-44")."""
    if raw is None:
        return None
    text = " ".join(raw.strip().strip(".,;:!?\"'").split())
    low = text.lower()
    if not low:
        return None
    if low in ("i", "me", "my", "myself", "mine", "the user", "user"):
        return "user"
    if low in ("we", "us", "our", "ourselves", "the team", "our team", "team", "my team"):
        return "team"
    if RECORD_ID.fullmatch(text):
        return text.upper()
    for owner, canon in (("my ", "user's "), ("our ", "team's ")):
        if low.startswith(owner):
            return canon + _strip_article(low[len(owner):])
    return _strip_article(low)


def _strip_article(text: str) -> str:
    """Return `text` without a leading article or possessive determiner."""
    return re.sub(r"^(?:the|a|an|this|that|some)\s+", "", text.strip()).strip()


def canonical_attribute(phrase: str | None) -> str | None:
    """Return the canonical slot for an attribute phrase, through the slot table ("Lead time" -> "lead_time").

    The table (`assets/words/slots.tsv`, loaded by `mnemo.lexicon`) merges synonyms only; a phrase
    it does not know keeps its own snake_case form, qualifiers included ("home address" ->
    "home_address").
    """
    from .lexicon import slot_table

    if phrase is None:
        return None
    low = " ".join(phrase.lower().replace("_", " ").split()).strip(" .:")
    if not low:
        return None
    info = slot_table().get(low)
    if info is not None:
        return info.slot
    return re.sub(r"[^\w:]+", "_", low).strip("_")


def normalise_value(raw: str | None) -> str | None:
    """Return a value trimmed, with thousands separators dropped and money as "<number> <CODE>"."""
    if raw is None:
        return None
    text = " ".join(raw.strip().split()).strip(" .,;:!?\"'")
    if not text:
        return None
    for form in (_MONEY_BEFORE, _MONEY_AFTER):
        m = form.match(text)
        if m:
            return f"{m.group('num').replace(',', '')} {CURRENCIES[m.group('cur').lower()]}"
    return _THOUSANDS.sub("", text)


# The three below are pure functions of one string, asked again for the same memories at every claim that
# reconciles against them (`updates.pair_features`: ~35 memories a claim in a conversation): answered once each.
@lru_cache(maxsize=1 << 16)
def value_key(value: str | None) -> str:
    """Return the comparable form of a value: casefolded, no articles, no punctuation."""
    text = (normalise_value(value) or "").casefold()
    text = re.sub(r"^(?:the|a|an|my|our)\s+", "", text)
    return " ".join(re.sub(r"[^\w@.:+-]+", " ", text).split())


def same_value(a: str | None, b: str | None) -> bool:
    """Return True when two values are the same after normalisation."""
    return a is not None and b is not None and value_key(a) == value_key(b)


def stem(word: str) -> str:
    """Return a crude stem of a lowercase word (failed, fails, failing -> fail)."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_tokens(text: str | None) -> set[str]:
    """Return the stemmed content words of `text` (stopwords removed)."""
    return set(_content_tokens(text))


@lru_cache(maxsize=1 << 16)
def _content_tokens(text: str | None) -> frozenset[str]:
    words = (w.lower().strip("'.") for w in _WORD.findall(text or ""))
    return frozenset(stem(w) for w in words if w and w not in STOPWORDS)


def overlap(a: str | None, b: str | None) -> float:
    """Return the share of `a`'s content tokens that also occur in `b` (0 when `a` has none)."""
    small = content_tokens(a)
    return len(small & content_tokens(b)) / len(small) if small else 0.0


def _future(candidate: date, today: date, step: str) -> date:
    """Return `candidate`, moved one year (or month) ahead when it is already past."""
    if candidate >= today:
        return candidate
    if step == "year":
        return _safe_date(candidate.year + 1, candidate.month, candidate.day) or candidate
    month = candidate.month % 12 + 1
    year = candidate.year + (1 if month == 1 else 0)
    return _safe_date(year, month, min(candidate.day, calendar.monthrange(year, month)[1])) or candidate


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def parse_date(text: str, now: datetime | None) -> tuple[str | None, str | None]:
    """Return (ISO date, raw phrase) for the first date expression in `text`, or (None, None).

    Forms: ISO dates, "March 3(rd)(, 2026)", "3 March", "the 10th", today / tomorrow,
    "in 2 weeks", weekdays (the next such day strictly after today; "next Friday" said
    before Friday in the same week means the Friday of the following week), "next week",
    "end of the month". A month and day without a year take the year of `now`, or
    the next year when that date has passed; "the 10th" takes this month, or the
    next one. Without `now` only fully specified dates resolve: the others return
    (None, raw) so the caller keeps the phrase.
    """
    today = now.date() if now is not None else None
    for form, pattern in _DATE_FORMS:
        m = pattern.search(text)
        if not m:
            continue
        raw = m.group(0).strip()
        if form == "iso":
            found = _safe_date(int(m["year"]), int(m["month"]), int(m["day"]))
            return (found.isoformat() if found else None), raw
        if form in ("mdy", "dmy"):
            month = MONTHS[m["month"].lower().rstrip(".")]
            day = int(m["day"])
            if m["year"]:
                found = _safe_date(int(m["year"]), month, day)
                return (found.isoformat() if found else None), raw
            if today is None:
                return None, raw
            found = _safe_date(today.year, month, day)
            return (_future(found, today, "year").isoformat() if found else None), raw
        if today is None or form == "month":
            return None, raw
        if form == "rel":
            shift = {"today": 0, "tonight": 0, "tomorrow": 1, "day after tomorrow": 2}[m["rel"].lower()]
            return (today + timedelta(days=shift)).isoformat(), raw
        if form == "in":
            n = int(m["n"]) if m["n"].isdigit() else _SMALL[m["n"].lower()]
            days = n * (7 if m["unit"].lower().startswith("week") else 1)
            return (today + timedelta(days=days)).isoformat(), raw
        if form == "weekday":
            ahead = (WEEKDAYS[m["wd"].lower()] - today.weekday()) % 7 or 7
            if raw.lower().startswith("next") and today.weekday() + ahead < 7:
                ahead += 7
            return (today + timedelta(days=ahead)).isoformat(), raw
        if form == "next":
            if m["unit"].lower() == "week":
                return (today + timedelta(days=7)).isoformat(), raw
            return _future(date(today.year, today.month, 1), today + timedelta(days=1), "month").isoformat(), raw
        if form == "eom":
            last = calendar.monthrange(today.year, today.month)[1]
            return date(today.year, today.month, last).isoformat(), raw
        if form == "nth":
            found = _safe_date(today.year, today.month, int(m["day"]))
            return (_future(found, today, "month").isoformat() if found else None), raw
    return None, None


# ---------------------------------------------------------------- sentences
_ABBREV = re.compile(r"\b(?:mr|mrs|ms|dr|st|jr|sr|vs|etc|e\.g|i\.e|inc|ltd|co|approx|no)\.$", re.I)
_CHIT = frozenset("ok okay k kk thanks thank you thx ty cheers haha hahaha lol lmao nice cool great awesome sure "
                  "yes yeah yep no nope hi hello hey bye goodbye good morning night evening afternoon see ya later "
                  "perfect wow hmm hm oh ah got it sounds good np problem welcome alright right fine indeed agreed "
                  "true exactly that's that is so very really much lot a :) 👍 🙂 😂 xd lovely".split())


def sentences(text: str) -> list[str]:
    """Return the sentences of `text`: lines split after ! and ?, and after . before a capital or digit (not "Dr.")."""
    out: list[str] = []
    for line in text.splitlines():
        merged: list[str] = []
        for part in re.split(r"(?<=[!?])\s+|(?<=\.)\s+(?=[\"'(]?[A-Z0-9])", line.strip()):
            # "Dr." and an initial ("Charles M. Schulz") do not end a sentence.
            if merged and (_ABBREV.search(merged[-1]) or re.search(r"(?:^|\s)[A-Z]\.$", merged[-1])):
                merged[-1] += " " + part
            elif part:
                merged.append(part)
        out.extend(merged)
    return out


def chitchat(sentence: str) -> bool:
    """Return True for small talk that stores nothing ("ok thanks", "haha nice")."""
    words = re.findall(r"[\w':()👍🙂😂]+", sentence.lower())
    return not content_tokens(sentence) or all(w in _CHIT for w in words)


_MARK_DIGIT = re.compile(r"\d")
# Words that make a mark: digits, an address, a record id, or a capitalised name inside a sentence.
_TOKEN = re.compile(r"[\w@.+'/:-]+")
_HOSTLIKE = re.compile(r"\w\.\w{2,}|/\w")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|[:;]\s+|\"\s*)$")
_NOT_NAMES = frozenset("i i'm i've i'd i'll the user user's team team's a an it this that my our he she they we you "
                       "mr mrs ms dr".split())


@lru_cache(maxsize=1 << 16)
def marks(text: str | None) -> frozenset[str]:
    """Return the marks of a statement: numbers, identifiers, addresses and names inside it, lower-cased.

    A capitalised word counts as a name unless it starts a sentence (or is "I"); digits count
    wherever they are, with their attached letters ("4412", "kt-40", "10am"); so do e-mail
    addresses, hosts and paths ("stream.example.io/logs").
    """
    if not text:
        return frozenset()
    out: set[str] = set()
    for m in _TOKEN.finditer(text):
        word = m.group(0).strip(".'-/:")
        low = word.lower()
        if not word or low in _NOT_NAMES:
            continue
        if _MARK_DIGIT.search(word) or "@" in word or _HOSTLIKE.search(word):
            out.add(low.rstrip(".,"))
        elif word[0].isupper() and not _SENTENCE_START.search(text[:m.start()]):
            out.add(low.removesuffix("'s"))
    return frozenset(out)
