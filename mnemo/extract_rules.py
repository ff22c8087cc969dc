"""The offline extractor's sentence rules: one clause in, typed candidates out.

`parse_clause` tries the families in a fixed order, first match wins:

    negation      "I no longer like X", "I don't live in Berlin anymore": parse the positive, mark negated
    instruction   "Always CC Maria on invoices", "To deploy, run make ship"
    failure       "The migration failed", "We had an outage in billing"
    lesson        "Lesson learned: ...", "Next time we should ..."
    change        "We switched from X to Y", "We replaced X with Y"
    decision      "We decided to ...", "We're going with X"
    record        "The lead time for IC-MC-44 is 21 days", "S-208's lead time moved from 21 to 35 days"
    deadline      "The report is due on March 3", "the deadline moved to the 10th"
    profile       name, city, address, origin, job, employer, age, diet, allergy, languages, pets, family
    preference    favourites, prefer, like / love / hate, "I've switched to tea", habits (I drink / use X)
    attribute     "My email is ...", "The wifi password is ...", "The budget for Atlas is 50k EUR"
    event         "I have a dentist appointment on Tuesday", "The offsite is on May 4"
    routine       "Every Monday we ...", "I usually ..."

Rules only see a clause whose politeness prefixes and cause ("because ...") were
removed by `mnemo.extract`; they return candidates with a base importance that
the caller adjusts and floors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from .model import Candidate
from .normalise import (
    DATE_ATTRIBUTES,
    PAST_VERBS,
    RECORD_ID,
    canonical_attribute,
    canonical_subject,
    display_subject,
    normalise_value,
    parse_date,
    possessive,
    third_person,
)

EXTRACTOR = "offline-rules-v1"
KIND_OF = {"profile": "semantic", "preference": "semantic", "fact": "semantic", "deadline": "semantic",
           "note": "semantic", "decision": "procedural", "change": "procedural", "instruction": "procedural",
           "routine": "procedural", "lesson": "procedural", "event": "episodic", "failure": "episodic"}
# Preference topics the offline rules can infer from the object ("tea" -> drink).
TOPICS = {
    "drink": "tea decaf coffee espresso latte cappuccino matcha water juice beer wine soda cola milk kombucha",
    "food": "pizza sushi pasta burgers salad ramen tacos curry steak chocolate",
    "editor": "vim neovim emacs vscode vs code sublime intellij pycharm",
    "os": "linux windows macos mac ubuntu",
    "programming_language": "python rust go golang java javascript typescript kotlin c++ ruby scala",
    "music": "jazz rock pop classical hip-hop techno metal blues",
    "seat": "window seat aisle seat",
    "contact_channel": "email slack phone sms whatsapp teams",
    "time_of_day": "mornings morning evenings evening afternoons nights",
}
_TOPIC_OF = {word: topic for topic, words in TOPICS.items() for word in words.split()}
_TOPIC_OF.update({"vs code": "editor", "window seat": "seat", "aisle seat": "seat"})
PET_WORDS = set("dog dogs cat cats puppy kitten parrot hamster rabbit fish bird horse turtle snake".split())
FAMILY_WORDS = set("kid kids child children son sons daughter daughters brother brothers sister sisters wife "
              "husband partner boyfriend girlfriend twins".split())
THING_WORDS = set("car bike motorbike motorcycle scooter van house apartment flat boat".split())
JOB_WORDS = ("engineer", "developer", "manager", "designer", "nurse", "doctor", "teacher", "scientist", "analyst",
         "consultant", "lawyer", "accountant", "student", "researcher", "architect", "writer", "programmer",
         "administrator", "officer", "specialist", "technician", "journalist", "photographer", "recruiter",
         "founder", "director", "intern", "chef", "pilot", "pm", "cto", "ceo", "cfo", "coo", "lead",
         "professor", "librarian", "pharmacist", "plumber", "electrician", "ist", "ian")
NOT_NAMES = set("Sure Sorry Fine Good Back Here Done Ready Happy Tired Glad Not So Just Also Still Busy "
                 "Okay Ok Great Home Free Late Excited Afraid Confused Curious Interested".split())
EVENT_WORDS = set("meeting appointment call interview flight trip exam party dinner lunch review demo offsite "
                   "workshop conference standup launch wedding visit checkup check-up presentation".split())
FAILURE = re.compile(r"\b(?:fail\w*|broke|broken|crash\w*|outage|went down|is down|was down|errors?|bug|timed? ?out|"
                   r"corrupt\w*|incident|regression|didn't work|did not work|doesn't work|stopped working|"
                   r"rejected|overloaded|deadlock\w*|lost data|data loss|blew up|fell over)\b", re.I)
TIME_TAIL = re.compile(r"(?:,?\s+(?:now|these days|nowadays|currently|at the moment|anymore|any more|any longer|again|"
                   r"too|as well|instead|last (?:week|month|year)|this (?:week|month|year)|recently|lately|"
                   r"a (?:while|few \w+|couple of \w+) ago|since .+|for (?:the )?(?:past |last )?\d+ \w+|"
                   r"for (?:a|many|several) \w+|yesterday|today|for now))+$", re.I)
# The subject of a statement: I, we, my X, our X, or a capitalised name. A name must be followed by a
# third-person verb ("Tom lives", "Ana also works"), so sentence starters ("Sounds like ...") are not names.
SUBJ = (r"(?P<subj>I|[Ww]e|[Mm]y \w+|[Oo]ur \w+|(?!(?:The|This|That|It|There|He|She|They|What|When|Where|Why|How|"
        r"Who|Which|Yes|No|Ok|Okay|Please|Also|So|And|But|If|Then|Every|Each|Always|Never|Next|Lesson)\b)"
        r"[A-Z][a-z]+(?: [A-Z][a-z]+)?(?= (?:(?:also|now|still|really|currently|usually|just|recently|never|always|"
        r"no longer) )?[a-z]+s\b))")
BE = r"(?:am|is|are|was|were|have been|has been)"
_NOT_IMPERATIVE = frozenset("done had seen up a an the too again so been got gone made thought ever once happy good "
                            "great glad fun nice welcome ready here there available heard knew".split())
HAVE = r"(?:(?:have|has|'ve|just|recently|finally|now|also)\s+)*"


@dataclass(frozen=True)
class Clause:
    """One clause to parse, with what the caller learned about its sentence."""

    text: str  # the clause, prefixes and cause removed
    source: str  # the sentence as the user wrote it
    now: datetime | None = None
    change: bool = False  # a change cue ("actually", "now", "anymore", "switched") was seen
    cause: str | None = None  # "because ..." text
    full: str | None = None  # the clause with its cause, for sentences that restate it

    @property
    def said(self) -> str:
        return self.full or self.text


def clean(value: str | None) -> str | None:
    """Return a value phrase without trailing time words and punctuation ("Lisbon now" -> "Lisbon")."""
    if value is None:
        return None
    text = TIME_TAIL.sub("", value.strip().strip(" .,;:!?\"'")).strip(" .,;:!?\"'")
    return normalise_value(re.sub(r"^(?:now|currently|still|actually)\s+", "", text, flags=re.I))


def inline(clause: str) -> str:
    """Return a clause in the third person for use inside a sentence (no capital, no final stop)."""
    text = third_person(clause).rstrip(".")
    return text if clause[:1].isupper() else text[:1].lower() + text[1:]


def bare(value: str | None) -> str | None:
    """Return a noun-phrase value without a leading article or determiner."""
    text = clean(value)
    return re.sub(r"^(?:an?|the|some|my|our)\s+", "", text, flags=re.I) if text else text


def topic_of(value: str | None) -> str | None:
    """Return the preference topic of an object ("green tea" -> "drink"), or None."""
    low = (value or "").lower()
    if low in _TOPIC_OF:
        return _TOPIC_OF[low]
    words = re.findall(r"[a-z+#-]+", low)
    for word in reversed(words):
        if word in _TOPIC_OF:
            return _TOPIC_OF[word]
    return None


def _phrase(attribute: str) -> tuple[str, str]:
    """Return the (third person, base form) verb phrase that states `attribute` in a sentence."""
    verbs = {"city": ("lives in", "live in"), "employer": ("works at", "work at"), "address": ("lives at", "live at"),
             "job_title": ("works as", "work as"), "likes": ("likes", "like"), "language": ("speaks", "speak"),
             "pet": ("has a", "have a"), "family": ("has", "have"), "possession": ("has", "have"),
             "origin": ("is from", "be from"), "allergy": ("is allergic to", "be allergic to"),
             "diet": ("is", "be"), "routine": ("has the routine:", "have the routine:")}
    if attribute in verbs:
        return verbs[attribute]
    if attribute.startswith("preference"):
        return ("prefers", "prefer")
    base = attribute.replace("_", " ").rstrip("s") if attribute.endswith("s") else attribute.replace("_", " ")
    return (attribute.replace("_", " "), base)


def describe(subject: str, shown: str, attribute: str, value: str, *, negated: bool = False,
             change: bool = False, old: str | None = None, dislike: bool = False) -> str:
    """Return the third-person sentence that states one (subject, attribute, value) fact."""
    article = "an" if value[:1].lower() in "aeiou" else "a"
    verbal = attribute in ("city", "employer", "address", "job_title", "likes", "language", "pet", "family",
                           "possession", "origin", "allergy", "diet") or attribute.startswith("preference") \
        or attribute in ("uses", "drinks", "eats", "plays", "listens_to", "watches", "reads", "drives", "rides",
                         "cooks", "wears", "codes_in", "writes_in", "programs_in")
    if dislike:
        return f"{shown} dislikes {value}."
    if verbal:
        third, base = _phrase(attribute)
        obj = f"{article} {value}" if attribute == "job_title" else value
        if attribute in ("pet", "possession") and not re.match(r"^(?:\d+|two|three|four|some)\b", value):
            third, base = ("has", "have")
            obj = f"{article} {value}"
        if negated:
            head = f"{shown} no longer {third}" if change else f"{shown} does not {base}"
            if third.startswith("is "):
                head = f"{shown} is {'no longer' if change else 'not'} {third[3:]}"
            elif third == "is":
                head = f"{shown} is {'no longer' if change else 'not'}"
            return f"{head} {obj}."
        was = f" (previously {old})" if old else ""
        now = "now " if change and attribute not in ("family", "pet", "possession", "language", "allergy") else ""
        return f"{shown} {now}{third} {obj}{was}."
    if attribute == "age":
        return f"{shown} is {value} years old."
    if attribute == "date":
        return f"{shown} is on {value}."
    if attribute == "expiry_date":
        return f"{shown} expires {'on ' if value[:1].isdigit() else 'in '}{value}."
    if attribute == "deadline":
        plural = shown.startswith("The ") and shown.endswith("s") and not shown.endswith("ss")
        head = f"{shown} {'are' if plural else 'is'} due on" if subject else "The deadline is"
        return f"{head} {value}" + (f" (was {old})." if old else ".")
    words = attribute.replace("_", " ").replace(":", " ")
    if RECORD_ID.fullmatch(subject or ""):
        head = f"The {words} for {subject}"
    else:
        head = f"{possessive(shown)} {words}"
    verb = "is no longer" if negated else "is"
    return f"{head} {verb} {value}" + (f" (was {old})." if old else ".")


def make(c: Clause, rule: str, category: str, subject: str | None, attribute: str | None, value: str | None, *,
         text: str | None = None, raw_subject: str | None = None, single: bool = True, negated: bool = False,
         old: str | None = None, change: bool | None = None, meta: dict | None = None,
         importance: float | None = None) -> Candidate:
    """Return a candidate with canonical subject and attribute, a generated sentence and provenance meta."""
    subj = canonical_subject(subject) if subject is not None else None
    attr = canonical_attribute(attribute) if attribute and not attribute.startswith("preference") else attribute
    changed = c.change if change is None else change
    extra = dict(meta or {})
    if attr in DATE_ATTRIBUTES and value:
        iso, raw = parse_date(value, c.now)
        if iso:
            extra.update(raw_date=raw, due=iso) if attr == "deadline" else extra.update(raw_date=raw)
            value = iso
        elif raw:
            extra.update(raw_date=raw, date_unresolved=True)
    if old and value and re.fullmatch(r"\d+(?:\.\d+)?", old) and " " in value:
        old = f"{old} {value.split(' ', 1)[1]}"
    shown = display_subject(subj, raw_subject or subject)
    said = f"{value} ({extra['raw_date']})" if extra.get("raw_date") and extra["raw_date"] != value else value
    if text is None:
        text = describe(subj or "", shown, attr or "", said or "", negated=negated, change=changed, old=old,
                        dislike=bool(extra.get("dislike")))
    if negated:
        extra["negated"] = True
    if changed:
        extra["change_cue"] = True
    rid = subj if subj and RECORD_ID.fullmatch(subj) else None
    refs = tuple(dict.fromkeys(r.upper() for r in RECORD_ID.findall(c.source) if r.upper() != rid))
    base = {"profile": 0.7, "preference": 0.55, "fact": 0.6, "decision": 0.7, "change": 0.65, "failure": 0.6,
            "lesson": 0.75, "deadline": 0.7, "event": 0.45, "instruction": 0.7, "routine": 0.5, "note": 0.3}
    return Candidate(
        text=text, kind=KIND_OF[category], category=category, subject=subj, attribute=attr, value=value,
        record_id=rid, references=refs, importance=base[category] if importance is None else importance,
        single_valued=single and not negated, negated=negated, old_value=old, cause=c.cause,
        meta={"source_text": c.source, "rule": rule, "extractor": EXTRACTOR, "subject_display": shown, **extra},
    )


# ---------------------------------------------------------------- procedural and episodic families
def instruction(c: Clause) -> list[Candidate] | None:
    """Parse standing instructions and how-tos addressed to the assistant."""
    m = re.match(r"^(?:please )?(?P<v>(?:always|never|make sure (?:to|that)|be sure to|don't ever|do not ever) "
                 r"(?P<verb>[a-z]+).*)$", c.text, re.I)
    # An imperative needs a base verb ("never deploy", not "never been", "always up for"); advice to
    # the other person ("make sure to take time for yourself") is not an instruction to the assistant.
    if m and (m["verb"].lower() in _NOT_IMPERATIVE or m["verb"].lower().endswith(("ed", "en", "ing"))
              or m["verb"].lower() in PAST_VERBS or re.search(r"\byou\b", m["v"], re.I)):
        m = None
    if m and not re.search(r"\byour(?:self|selves)?\b", m["v"], re.I):
        return [make(c, "instruction.standing", "instruction", "user", "instruction", clean(m["v"]), single=False,
                     text=f"Instruction from the user: {clean(m['v'])}.")]
    m = re.match(r"^(?:to|in order to) (?P<goal>[\w' -]{2,40}), (?P<v>(?:run|use|call|open|go|click|set|type|"
                 r"ssh|restart|deploy|push|merge|ask|email|ping|check|create|add) .+)$", c.text, re.I)
    if m:
        return [make(c, "instruction.howto", "instruction", m["goal"], "howto", clean(m["v"]),
                     text=f"To {m['goal']}, {clean(m['v'])}.")]
    return None


def failure(c: Clause) -> list[Candidate] | None:
    """Parse failures: something failed, broke, crashed, went down; an outage or incident happened."""
    m = re.match(r"^(?:the |our |my |a )?(?P<thing>[\w .'/-]{2,50}?) (?:has |have |had |just |also |again )*"
                 r"(?P<v>failed|broke|crashed|crashes|went down|is down|was down|is failing|are failing|"
                 r"(?:keeps|kept) (?:failing|crashing|breaking|timing out|erroring)|timed out|stopped working|didn't work|did not work|doesn't work|is broken|"
                 r"was broken|errored(?: out)?|blew up|fell over|was rolled back|got rolled back)\b(?P<rest>.*)$",
                 c.text, re.I)
    subject = m["thing"] if m else None
    # "I put in so much work and it all crashed": the thing is a clause, not something that can fail.
    if subject and re.search(r"\b(?:I|it|you|he|she|they|this|that|and|why)\b", subject, re.I):
        subject = None
    if not m:
        m = re.match(r"^(?:we|I) (?:had|hit|ran into|got|saw|have) (?:an?|another|the) (?:\w+ )?(?:outage|incident|"
                     r"failure|crash|data loss)(?: (?:with|in|on|of) (?:the |our )?(?P<thing>[\w .'/-]+?))?"
                     r"(?: (?:today|yesterday|this \w+|last \w+|again|earlier))?$", c.text, re.I)
        subject = (m["thing"] if m and m["thing"] else "team") if m else None
    if not m:
        return None
    text = third_person(c.said)
    return [make(c, "failure", "failure", subject, "failure", c.text.strip(" .").lower(), text=text, single=False,
                 change=False)]


def lesson(c: Clause) -> list[Candidate] | None:
    """Parse lessons: "Lesson learned: ...", "We learned that ...", "Next time we should ..."."""
    m = (re.match(r"^(?:lessons? learned|lesson|takeaway|learning)\s*[:,-]\s*(?P<v>.+)$", c.text, re.I)
         or re.match(r"^(?P<s>we|I) (?:have |'ve )?learned (?:that|the hard way that|to) (?P<v>.+)$", c.text, re.I)
         or re.match(r"^next time,? (?P<s>we|I) (?:should|must|need to|will|have to) (?P<v>.+)$", c.text, re.I))
    if not m:
        return None
    who = m.groupdict().get("s") or "team"
    value = clean(m["v"]) or ""
    return [make(c, "lesson", "lesson", who, "lesson", value, single=False, change=False,
                 text=f"Lesson learned: {inline(value)}.")]


def change(c: Clause) -> list[Candidate] | None:
    """Parse switches: "We switched from X to Y", "We replaced X with Y", "We're using Y instead of X"."""
    patterns = [
        r"^(?P<s>we|our team|the team)(?: have|'ve| had)? (?:switched|moved|migrated|changed|went|transitioned|"
        r"rolled back|reverted|downgraded|upgraded)(?: over| back)? from (?P<old>.+?) to (?P<v>.+)$",
        r"^(?P<s>we|our team|the team)(?: have|'ve)? (?:replaced|swapped) (?P<old>.+?) (?:with|for) (?P<v>.+)$",
        r"^(?P<s>we|our team|the team)(?: have|'ve)? (?:dropped|ditched|abandoned) (?P<old>.+?) "
        r"(?:for|in favou?r of) (?P<v>.+)$",
        r"^(?P<s>we)(?:'re| are)? (?:now )?using (?P<v>.+?) instead of (?P<old>.+)$",
        r"^(?P<s>we|our team|the team)(?: have|'ve)? (?:switched|migrated|moved|changed|rolled back|reverted) "
        r"(?:over )?to (?P<v>.+)$",
    ]
    for pattern in patterns:
        m = re.match(pattern, c.text, re.I)
        if m:
            new, old = clean(m["v"]), clean(m.groupdict().get("old"))
            text = third_person(c.said)
            return [make(c, "change.switch", "change", m["s"], "uses", new, old=old, single=False, change=True,
                         text=text)]
    return None


def decision(c: Clause) -> list[Candidate] | None:
    """Parse decisions: "We decided to ...", "We agreed on ...", "We're going with X", "Decision: ..."."""
    m = (re.match(r"^(?P<s>we|I|the team|our team)(?: have|'ve| had|'d)?(?: finally| just)? (?:decided|agreed|chose|"
                  r"opted|resolved|committed|settled)(?: on| to| that(?: we(?:'ll| will| should| would)?)?)? "
                  r"(?P<v>.+)$", c.text, re.I)
         or re.match(r"^(?P<s>we|I)(?:'re| are|'ll| will|'m| am) (?:going|go) with (?P<v>.+)$", c.text, re.I)
         or re.match(r"^(?:decision|decided)\s*[:-]\s*(?P<v>.+)$", c.text, re.I))
    if not m:
        return None
    who = m.groupdict().get("s") or "team"
    value = clean(m["v"])
    use = re.match(r"^(?:to )?(?:use|adopt|go with|switch to|move to|migrate to|standardi[sz]e on) (?P<t>.+?)"
                   r"(?: for (?P<p>.+))?$", value or "", re.I)
    text = third_person(c.said if m.groupdict().get("s") else f"We decided: {value}")
    drop = re.match(r"^(?:to )?(?:drop|stop using|abandon|remove|retire|deprecate|get rid of) (?P<t>.+)$", value or "",
                    re.I)
    if drop:
        return [make(c, "decision.drop", "decision", who, "uses", clean(drop["t"]), single=False, text=text,
                     negated=True, change=True)]
    if use:
        return [make(c, "decision.use", "decision", who, "uses", clean(use["t"]), single=False, text=text,
                     meta={"purpose": use["p"]} if use["p"] else None)]
    return [make(c, "decision", "decision", who, "decision", value, single=False, text=text)]


# ---------------------------------------------------------------- named records and deadlines
_RID = r"(?P<rid>[A-Za-z]{1,6}(?:-[A-Za-z0-9]{1,10})*-\d[A-Za-z0-9]*)"
_ATTR = r"(?P<attr>[A-Za-z][A-Za-z -]{1,30}?)"
_MOVE = (r"(?:has |have )?(?:changed|moved|went|gone|increased|decreased|dropped|rose|risen|jumped|fell|slipped|"
         r"grew|shrank|(?:was|were|has been|got) (?:changed|updated|moved|raised|lowered|increased|reduced|"
         r"extended|shortened|corrected|revised|set))")
_IS = r"(?:\s*[:=]\s*|\s+(?:is|are|was|has been set to|is set to|should be|has been|will be)\s+)"
_RECORD = [
    ("set", rf"^(?:the )?{_ATTR} (?:for|of|on) {_RID}{_IS}(?P<v>.+)$"),
    ("set", rf"^{_RID}(?:'s|’s)? {_ATTR}{_IS}(?P<v>.+)$"),
    ("move", rf"^(?:the )?{_ATTR} (?:for|of|on) {_RID} {_MOVE}(?: from (?P<old>.+?))? to (?P<v>.+)$"),
    ("move", rf"^{_RID}(?:'s|’s)? {_ATTR} {_MOVE}(?: from (?P<old>.+?))? to (?P<v>.+)$"),
    ("move", rf"^(?:we |I )?(?:changed|updated|moved|set|raised|lowered|switched|corrected) (?:the )?{_ATTR} "
             rf"(?:for|of|on) {_RID} (?:from (?P<old>.+?) )?to (?P<v>.+)$"),
    ("move", rf"^(?:we |I )?(?:changed|updated|moved|set|raised|lowered|switched|corrected) {_RID}(?:'s|’s)? "
             rf"{_ATTR} (?:from (?P<old>.+?) )?to (?P<v>.+)$"),
    ("set", rf"^{_RID} has an? {_ATTR} of (?P<v>.+)$"),
]


def record(c: Clause) -> list[Candidate] | None:
    """Parse attributes of named records (ids like IC-MC-44, INV-5521, S-208), set or changed."""
    text = c.text
    corrected = re.search(r",?\s+(?:not|instead of) (?P<old>[\w .,€$£-]+?)$", text)
    if corrected and RECORD_ID.search(text):
        text = text[: corrected.start()]
    for how, pattern in _RECORD:
        m = re.match(pattern, text, re.I)
        if m and RECORD_ID.fullmatch(m["rid"]):
            old = clean(m.groupdict().get("old")) or (clean(corrected["old"]) if corrected else None)
            moved = how == "move" or bool(old) or c.change
            return [make(c, f"record.{how}", "fact", m["rid"], m["attr"], clean(m["v"]), old=old, change=moved)]
    m = re.match(rf"^{_RID} (?:is |was )?(?P<what>due|payable|expires|ships|ship date is|delivers)(?: on| by)? (?P<v>.+)$",
                 text, re.I)
    if m:
        attr = {"due": "deadline", "payable": "deadline", "expires": "expiry_date"}.get(m["what"].lower(), "ship_date")
        category = "deadline" if attr == "deadline" else "fact"
        return [make(c, "record.date", category, m["rid"], attr, clean(m["v"]))]
    m = re.match(rf"^{_RID} (?:costs|is priced at|sells for) (?P<v>.+)$", text, re.I)
    if m:
        return [make(c, "record.price", "fact", m["rid"], "price", clean(m["v"]))]
    m = re.match(rf"^{_RID} (?:is|was|has been|got) (?:now )?(?P<v>paid|unpaid|approved|rejected|shipped|delivered|"
                 r"cancelled|canceled|closed|open|pending|on hold|delayed|overdue|in stock|out of stock|"
                 r"discontinued|active|inactive|blocked|resolved)$", text, re.I)
    if m:
        return [make(c, "record.status", "fact", m["rid"], "status", m["v"].lower())]
    return None


def deadline(c: Clause) -> list[Candidate] | None:
    """Parse deadlines and expiry dates: "X is due on DATE", "the deadline moved to the 10th", "X expires in June"."""
    own = r"(?P<own>the |our |my )?"
    patterns = [
        (rf"^{own}(?P<thing>[\w' -]{{2,50}}?) (?:is|are|was|will be) (?:now )?due(?: on| by| at)? (?P<v>.+)$", False),
        (rf"^{own}(?P<thing>[\w' -]{{2,50}}?) (?:must|has to|needs to|should) be (?:done|finished|submitted|delivered|"
         r"sent|paid|filed|completed|ready|signed|approved|reviewed|merged|shipped|released|returned) by (?P<v>.+)$",
         False),
        (rf"^(?:the )?(?:deadline|due date) (?:for|of|on) {own}(?P<thing>[\w' -]{{2,50}}?) (?:is|will be|falls on)"
         r"(?: on)? (?P<v>.+)$", False),
        (rf"^{own}(?P<thing>[\w' -]{{2,50}}?) (?:deadline|due date) (?:is|will be|falls on)(?: on)? (?P<v>.+)$", False),
        (rf"^(?:we|I) (?:need to|have to|must|should|have got to) (?:submit|finish|deliver|send|complete|file|pay|ship|"
         rf"hand in) {own}(?P<thing>[\w' -]{{2,50}}?) by (?P<v>.+)$", False),
        (r"^(?:the )?(?:deadline|due date)(?: for (?P<own>the |our |my )?(?P<thing>[\w' -]{2,50}?))? (?:has )?(?:moved|"
         r"changed|shifted|slipped|been (?:moved|pushed|extended)|was (?:moved|pushed|extended)|got (?:moved|pushed|"
         r"extended)|is now)(?: back| out)?(?: from (?P<old>.+?))? (?:to )?(?P<v>.+)$", True),
        (rf"^{own}(?P<thing>[\w' -]{{2,50}}?) (?:deadline|due date) (?:has )?(?:moved|changed|shifted|slipped|"
         r"been (?:moved|pushed|extended)|was (?:moved|pushed|extended)|got (?:moved|pushed|extended))(?: back| out)?"
         r"(?: from (?P<old>.+?))? to (?P<v>.+)$", True),
        (rf"^{own}(?P<thing>[\w' -]{{2,50}}?) (?:was|has been|got|is) (?:postponed|pushed|moved|rescheduled|delayed|"
         r"brought forward|extended)(?: back| out)? (?:to|until|till) (?P<v>.+)$", True),
        (rf"^{own}(?P<thing>[\w' -]{{2,50}}?) (?:expires|runs out|is valid until)(?: on| in| by| at)? (?P<v>.+)$", False),
    ]
    for pattern, moved in patterns:
        m = re.match(pattern, c.text, re.I)
        if not m:
            continue
        thing, owner = m.groupdict().get("thing"), (m.groupdict().get("own") or "").strip().lower()
        value = clean(m["v"])
        if not parse_date(value or "", c.now)[1]:
            continue
        subject = f"{owner} {thing}" if thing and owner in ("my", "our") else thing
        if thing and thing.split()[-1].lower() in EVENT_WORDS:
            return [make(c, "deadline.event", "event", subject, "date", value, change=moved or c.change)]
        attr = "expiry_date" if re.search(r"\b(?:expires|runs out|valid until)\b", c.text, re.I) else "deadline"
        return [make(c, "deadline", "deadline", subject, attr, value, old=clean(m.groupdict().get("old")),
                     change=moved or c.change)]
    return None
