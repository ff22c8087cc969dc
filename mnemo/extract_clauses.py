"""The offline clause parser: rules about people and things, and `parse_clause`, which runs every family.

`parse_clause(clause)` tries the families in order (see mnemo.extract_rules for the
list), first match wins, and parses negated statements ("I no longer X") as their
positive, then negates the result. The rules here cover profile, preferences,
generic attributes, dated events and routines; each takes a `Clause` and returns
candidates, or None when it does not apply.
Preference attributes (documented in `mnemo.extract`):

- "likes" (multi-valued): I like / love / enjoy / am a fan of X; "I hate X" is "likes" negated;
- "preference:<topic>" when the topic is known (favourite T, or an object in the
  topic lexicon: tea -> drink, vim -> editor); single-valued, so a new preferred drink
  replaces the old one;
- "preference" (multi-valued) when no topic can be inferred;
- habits "uses", "drinks", "eats", "plays", ... (multi-valued): I drink / use X;
  "instead of Y" makes Y the value it replaces.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .extract_rules import (
    BE,
    EVENT_WORDS,
    FAMILY_WORDS,
    HAVE,
    JOB_WORDS,
    NOT_NAMES,
    PET_WORDS,
    SUBJ,
    THING_WORDS,
    TIME_TAIL,
    Clause,
    bare,
    change,
    clean,
    deadline,
    decision,
    failure,
    instruction,
    lesson,
    make,
    record,
    topic_of,
)
from .model import Candidate
from .normalise import (
    DATE_ATTRIBUTES,
    KNOWN_ATTRIBUTES,
    MONTHS,
    PAST_VERBS,
    ROLE_ATTRIBUTES,
    canonical_attribute,
    parse_date,
    third_person,
)

_ROUTINE_CUE = re.compile(r"\b(?:every|each) (?:day|morning|evening|night|week|weekday|weekend|month|monday|tuesday|"
                          r"wednesday|thursday|friday|saturday|sunday)s?\b|\bon (?:mondays|tuesdays|wednesdays|"
                          r"thursdays|fridays|saturdays|sundays|weekends|weekdays)\b|\b(?:daily|weekly|monthly|"
                          r"nightly)\b", re.I)


# Habit verbs (base or third person) -> the multi-valued attribute they state.
_HABITS = {"drink": "drinks", "eat": "eats", "use": "uses", "play": "plays", "listen to": "listens_to",
           "watch": "watches", "read": "reads", "drive": "drives", "ride": "rides", "cook": "cooks", "wear": "wears",
           "code in": "codes_in", "write in": "writes_in", "program in": "programs_in"}
_HABITS.update({v.replace("_", " "): v for v in list(_HABITS.values())})


_WORK = r"(?:(?:am|is|are|have been|has been) )?(?:(?:now|currently|still|also) )?(?:work|works|working)"


def _place(value: str | None) -> str | None:
    """Return a place without what follows it ("New York with my wife" -> "New York")."""
    return clean(re.split(r"\s+(?:with|for|since|because|and|but|near)\s+|,", value or "")[0]) if value else None


_NOT_ROUTINE = frozenset("am is are was were would could should might will have had did do does can must".split())
_PRONOUN = re.compile(r"^(?:it|that|this|them|these|those|him|her|you|your|one)\b", re.I)
# A liked thing ends where a new clause starts: "I love hiking - it clears my head".
_CLAUSE_BREAK = re.compile(r"\s+[-–—]\s+|,\s+(?=(?:it|they|which|that|he|she|this|the \w+ (?:is|are|looks?))\b)")


def _capitalised(value: str | None) -> bool:
    return bool(value) and value[:1].isupper()


def profile(c: Clause) -> list[Candidate] | None:
    """Parse identity and profile facts: name, city, address, origin, job, employer, age, diet, allergies, ..."""
    t = c.text
    m = (re.match(r"^(?i:my name is|my name's|i am called|i'm called|call me|you can call me|people call me|"
                  r"i go by)\s+(?P<v>[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,2})$", t)
         or re.match(r"^(?:I'm|I am) (?P<v>[A-Z][a-z]+(?: [A-Z][a-z]+)?)$", t))
    if m and m["v"].split()[0] not in NOT_NAMES:
        return [make(c, "profile.name", "profile", "user", "name", m["v"])]
    m = re.match(rf"^{SUBJ} (?:(?:am|is|are|have been|has been) )?(?:(?:now|currently|still|also) )?(?:live|lives|"
                 r"living|reside|resides|based|staying|stay|stays) in (?P<v>.+)$", t)
    if m and _capitalised(_place(m["v"])):
        return [make(c, "profile.city", "profile", m["subj"], "city", _place(m["v"]), raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} {HAVE}(?:moved|relocated|am moving|'m moving|is moving|are moving)"
                 r"(?: back)? (?:from (?P<old>.+?) )?(?:to|into) (?P<v>.+)$", t)
    if m and _capitalised(_place(m["v"])) and not topic_of(m["v"]):
        return [make(c, "profile.moved", "profile", m["subj"], "city", _place(m["v"]), old=_place(m["old"]),
                     change=True, raw_subject=m["subj"])]
    m = re.match(r"^(?P<subj>[Mm]y|[Oo]ur) home (?:is|has been) (?:now )?(?:in )?(?P<v>[A-Z].+)$", t)
    if m:
        return [make(c, "profile.home", "profile", m["subj"], "city", clean(m["v"]))]
    m = re.match(rf"^{SUBJ} (?:(?:am|is|are) )?(?:(?:now|currently) )?(?:live|lives|living) at (?P<v>.+)$", t)
    if m:
        return [make(c, "profile.address", "profile", m["subj"], "address", clean(m["v"]), raw_subject=m["subj"])]
    m = (re.match(rf"^{SUBJ} {BE} (?:originally )?from (?P<v>[A-Z].+)$", t)
         or re.match(rf"^{SUBJ} (?:grew up|was born) in (?P<v>[A-Z].+)$", t))
    if m:
        return [make(c, "profile.origin", "profile", m["subj"], "origin", clean(m["v"]), raw_subject=m["subj"])]
    # Diets before jobs: "a vegetarian" ends like "a librarian" (JOB_WORDS), and is not one.
    m = re.match(rf"^{SUBJ} {BE} (?:now )?(?:a |an |strictly )?(?P<v>vegetarian|vegan|pescatarian|pescetarian|"
                 r"gluten-free|lactose intolerant|keto|teetotal)\b.*$", t, re.I)
    if m:
        return [make(c, "profile.diet", "preference", m["subj"], "diet", m["v"].lower(), raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} {_WORK} as (?:an? |the )?(?P<job>.+?)(?: (?:at|for|with) (?P<emp>[A-Z].*))?$", t)
    if not m:
        m = re.match(rf"^{SUBJ} {BE} (?:now |currently |still )?(?:an? |the )(?P<job>[\w -]+?)"
                     r"(?: (?:at|for|of|with|in) (?P<emp>[A-Z].*))?$", t)
        if m and not m["job"].lower().split()[-1].endswith(JOB_WORDS):
            m = None
    if m:
        out = [make(c, "profile.job", "profile", m["subj"], "job_title", clean(m["job"]), raw_subject=m["subj"])]
        if m["emp"]:
            out.append(make(c, "profile.employer", "profile", m["subj"], "employer", clean(m["emp"]),
                            raw_subject=m["subj"]))
        return out
    m = (re.match(rf"^{SUBJ} {_WORK} (?:at|for) (?P<v>[A-Z].+)$", t)
         or re.match(rf"^{SUBJ} {BE} (?:now )?employed (?:at|by) (?P<v>.+)$", t))
    if m:
        return [make(c, "profile.employer", "profile", m["subj"], "employer", clean(m["v"]), raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} {HAVE}(?:joined|started (?:a new job )?at|got a (?:new )?job at|started working "
                 r"(?:at|for)|moved to a new job at) (?P<v>[A-Z].+)$", t)
    if m:
        return [make(c, "profile.joined", "profile", m["subj"], "employer", clean(m["v"]), change=True,
                     raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} {HAVE}(?:left|quit) (?P<v>[A-Z].+)$", t)
    if m:
        return [make(c, "profile.left", "profile", m["subj"], "employer", clean(m["v"]), negated=True, change=True,
                     raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} (?:{BE}|just turned|turned|have turned) (?P<v>\d{{1,3}})(?: years? old| yo)?$", t)
    if m:
        return [make(c, "profile.age", "profile", m["subj"], "age", m["v"], raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} {BE} (?:(?:severely|very|mildly|also) )?allergic to (?P<v>.+)$", t)
    if m:
        return [make(c, "profile.allergy", "profile", m["subj"], "allergy", bare(m["v"]), single=False,
                     importance=0.8, raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} (?:(?:also|now) )?(?:speak|speaks|am fluent in|'m fluent in) (?P<v>.+)$", t)
    if m:
        langs = [v for v in re.split(r",\s*|\s+and\s+", clean(m["v"]) or "") if v]
        return [make(c, "profile.language", "profile", m["subj"], "language", v, single=False,
                     raw_subject=m["subj"]) for v in langs]
    m = re.match(rf"^{SUBJ} (?:also )?(?:have|has|'ve got|have got|has got|own|owns)(?: also)? "
                 r"(?P<v>(?:an?|one|two|three|four|\d+|another) [\w -]+?)(?: (?:named|called) (?P<name>[A-Z]\w+))?$", t)
    if m:
        head = m["v"].split()[-1].lower()
        attr = "pet" if head in PET_WORDS else "family" if head in FAMILY_WORDS else "possession" if head in THING_WORDS else None
        if attr:
            value = re.sub(r"^(?:an?|another|one)\s+", "", clean(m["v"]) or "")
            text = None
            if m["name"]:
                text = f"{third_person(m['subj'] + ' have').rstrip('.')} a {value} named {m['name']}."
            return [make(c, f"profile.{attr}", "profile", m["subj"], attr, value, single=False, text=text,
                         meta={"name": m["name"]} if m["name"] else None, raw_subject=m["subj"])]
    return None


def preference(c: Clause) -> list[Candidate] | None:
    """Parse preferences and their changes: favourites, prefer, like / love / hate, switched to, habits."""
    t = c.text
    m = (re.match(r"^(?P<subj>[Mm]y|[Oo]ur|[A-Z][a-z]+'s) (?:all[- ]time )?favou?rite (?P<topic>[\w -]+?) "
                  r"(?:is|are) (?:now |still )?(?P<v>.+)$", t)
         or re.match(r"^(?P<v>.+?) (?:is|are) (?:now |still )?(?P<subj>my|our) (?:all[- ]time )?favou?rite"
                     r"(?: (?P<topic>[\w -]+))?$", t))
    if m:
        topic = canonical_attribute(m["topic"]) if m["topic"] else topic_of(m["v"])
        if not m["topic"] and topic and m["v"][:1].isupper() and m["v"][1:2].islower():
            m = {**m.groupdict(), "v": m["v"][:1].lower() + m["v"][1:]}
        attr = f"preference:{topic}" if topic else "preference"
        subj = m["subj"].removesuffix("'s")
        text = None
        if m["topic"]:
            text = third_person(f"{m['subj']} favourite {m['topic']} is {bare(m['v'])}").replace("favourite", "favourite")
        return [make(c, "preference.favourite", "preference", subj, attr, bare(m["v"]), single=bool(topic),
                     raw_subject=subj, text=text)]
    m = re.match(rf"^{SUBJ} (?:(?:now|still|really|generally|usually|definitely|much|strongly|also) )*(?:prefer|prefers|"
                 r"'d prefer|would prefer|'d rather have|would rather have|'d rather|would rather) (?P<v>.+?)"
                 r"(?: (?:over|to|than|rather than|instead of) (?P<over>.+))?$", t)
    if m:
        value = bare(re.sub(r"^to\s+", "", m["v"]))
        over = bare(m["over"])
        topic = topic_of(value) or topic_of(over)
        attr = f"preference:{topic}" if topic else "preference"
        text = None
        if over:
            text = f"{third_person(m['subj'] + ' prefer').rstrip('.')} {value} over {over}."
        return [make(c, "preference.prefer", "preference", m["subj"], attr, value, single=bool(topic), text=text,
                     meta={"over": over, "topic": topic} if over else {"topic": topic}, raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} (?:(?:really|absolutely|totally|also|still|just|kind of|kinda|now) )*(?:like|likes|love|"
                 r"loves|enjoy|enjoys|adore|adores|am into|'m into|is into|am a (?:big |huge )?fan of|"
                 r"'m a (?:big |huge )?fan of|is a (?:big |huge )?fan of) (?P<v>.+)$", t)
    if m and not _PRONOUN.match(m["v"]) and not m["v"].lower().startswith("the idea"):
        value = bare(re.sub(r"^to\s+", "", _CLAUSE_BREAK.split(m["v"])[0]))
        return [make(c, "preference.like", "preference", m["subj"], "likes", value, single=False,
                     meta={"topic": topic_of(value)}, raw_subject=m["subj"])]
    m = re.match(rf"^{SUBJ} (?:really )?(?:hate|hates|dislike|dislikes|can't stand|cannot stand|detest|detests|"
                 r"am not a fan of|'m not a fan of|am not into|'m not into) (?P<v>.+)$", t)
    if m:
        return [make(c, "preference.dislike", "preference", m["subj"], "likes", bare(m["v"]), negated=True,
                     change=False, meta={"dislike": True}, raw_subject=m["subj"])]
    m = re.match(r"^I(?:'ve| have)?(?: (?:just|recently|finally|now))? (?:switched|changed|moved on|gone over|converted|"
                 r"gone back|went back)(?: over| back)? (?:from (?P<old>.+?) )?to (?P<v>.+)$", t)
    if m:
        value, old = bare(m["v"]), bare(m["old"])
        topic = topic_of(value) or topic_of(old)
        attr = f"preference:{topic}" if topic else "preference"
        return [make(c, "preference.switch", "preference", "user", attr, value, old=old, single=bool(topic),
                     change=True)]
    m = re.match(rf"^{SUBJ} (?:(?:usually|mostly|mainly|often|always|only|now|also|still|generally|normally) )*"
                 r"(?P<verb>drink|drinks|eat|eats|use|uses|play|plays|listen to|listens to|watch|watches|read|reads|"
                 r"drive|drives|ride|rides|cook|cooks|wear|wears|code in|codes in|write in|writes in|program in|"
                 r"programs in) (?P<v>.+?)(?: instead(?: of (?P<old>.+))?)?$", t)
    if m and not _ROUTINE_CUE.search(t) and len(m["v"].split()) <= 5 and not _PRONOUN.match(m["v"]):
        attr = _HABITS.get(m["verb"].lower(), m["verb"].lower().replace(" ", "_"))
        old = bare(m["old"])
        instead = "instead" in t.lower()
        value, _, purpose = (bare(m["v"]) or "").partition(" for ")
        return [make(c, "preference.habit", "preference", m["subj"], attr, value, old=old, single=False,
                     change=c.change or instead, raw_subject=m["subj"], meta={"purpose": purpose} if purpose else None,
                     text=third_person(t) if purpose else None)]
    return None


def attribute(c: Clause) -> list[Candidate] | None:
    """Parse "my X is Y", "Tom's X is Y", "the wifi password is Y", "the budget for Atlas is Y" for known X."""
    m = re.match(r"^(?P<own>[Mm]y|[Oo]ur|[Tt]he|[A-Z][\w-]*(?:'s|’s)) (?P<np>[\w' -]{1,40}?) (?:is|are|was|=|:|has "
                 r"been|is now|will be|changed to|is set to) (?:now )?(?P<v>.+)$", c.text)
    attr = thing = None
    if m:
        words = m["np"].replace("’", "'").split()
        for n in (3, 2, 1):
            tail = " ".join(words[-n:]).lower()
            if len(words) >= n and tail in KNOWN_ATTRIBUTES:
                attr, rest = tail, " ".join(words[:-n])
                break
        if attr:
            own = m["own"].replace("’", "'").removesuffix("'s")
            if own.lower() == "the" and not rest and canonical_attribute(attr) in ROLE_ATTRIBUTES:
                thing = "Our"  # "The team lead is X": the speaker's team's
            elif own.lower() == "the":
                thing = rest or None
            else:
                thing = f"{own} {rest.removesuffix(chr(39) + 's')}".strip() if rest else own
    elif m := re.match(r"^(?P<v>[A-Z][\w'-]*(?: [A-Z][\w'-]*){0,3}) (?:is|'s) (?:now )?(?P<own>our|my|the) "
                       r"(?P<new>new )?(?P<np>[a-z][\w -]{1,30})$", c.text):
        # "Jihoon Ryu is our new team lead": a person named into a role; "new" says it changed.
        role = canonical_attribute(m["np"])
        if role not in ROLE_ATTRIBUTES:
            return None
        thing = "My" if m["own"] == "my" else "Our"
        return [make(c, "attribute.role", "fact", thing, role, clean(m["v"]), raw_subject=thing,
                     change=c.change or bool(m["new"]))]
    else:
        m = re.match(r"^(?:the )?(?P<attr>[\w -]{2,30}?) (?:for|of) (?:the |our |my )?(?P<thing>[\w' -]{2,40}?) "
                     r"(?:is|are|was|=|:|is now|will be|has been) (?:now )?(?P<v>.+)$", c.text, re.I)
        if m and m["attr"].lower() in KNOWN_ATTRIBUTES:
            attr, thing = m["attr"].lower(), m["thing"]
    if not attr:
        return None
    canon = canonical_attribute(attr)
    value = clean(m["v"])
    if canon == "birthday":
        found = re.search(r"(?P<a>[A-Za-z]+)\.? (?P<d>\d{1,2})|(?P<d2>\d{1,2})(?:st|nd|rd|th)? (?:of )?(?P<b>[A-Za-z]+)",
                          value or "")
        month = found and MONTHS.get((found["a"] or found["b"] or "").lower())
        if month:
            value = f"{month:02d}-{int(found['d'] or found['d2']):02d}"
    category = "deadline" if canon == "deadline" else "profile" if thing and thing.lower() in ("my", "i") else "fact"
    if canon in ("name", "city", "email", "phone", "address", "job_title", "employer", "birthday", "age") and (
            (thing or "").lower() in ("my", "our")):
        category = "profile"
    text = None if canon in DATE_ATTRIBUTES else third_person(c.text)
    return [make(c, f"attribute.{canon}", category, thing, canon, value, raw_subject=thing, text=text,
                 change=c.change or "now" in c.text.lower().split())]


def event(c: Clause) -> list[Candidate] | None:
    """Parse dated events: "I have a dentist appointment on Tuesday", "The offsite is on May 4"."""
    m = re.match(rf"^{SUBJ} (?:have|has|'ve got|have got|has got) (?:an?|my|our|the) (?P<thing>[\w' -]+?) "
                 r"(?P<when>(?:on|at|this|next|tomorrow|today|tonight|in|by)\b.*)$", c.text)
    if not m:
        m = re.match(r"^(?:the |my |our )(?P<thing>[\w' -]+?) (?:is|was|will be|has been) (?:on|scheduled for|set for|"
                     r"planned for|moved to|rescheduled to|at) (?P<when>.+)$", c.text, re.I)
    if not m:
        return None
    iso, raw = parse_date(m["when"], c.now)
    if not raw:
        return None
    thing = m["thing"].lower()
    if thing.split()[-1] not in EVENT_WORDS and not iso:
        return None
    who = m.groupdict().get("subj")
    owner = f"{who} " if who and who not in ("I", "We", "we") else ""
    return [make(c, "event.dated", "event", f"{owner}{thing}".strip(), "date", iso or raw,
                 text=f"{third_person(c.text).rstrip('.')}" + (f" ({iso})." if iso and iso not in c.text else "."),
                 meta={"raw_date": raw, **({"date_unresolved": True} if not iso else {})})]


def routine(c: Clause) -> list[Candidate] | None:
    """Parse routines: "Every Monday we ...", "I usually ...", "We do X on Fridays"."""
    m = re.match(r"^(?:every|each) (?!time\b)(?P<when>[\w ]{2,30}?),? (?P<subj>I|[Ww]e) (?P<v>.+)$", c.text, re.I) or \
        re.match(r"^on (?P<when>(?:mon|tues|wednes|thurs|fri|satur|sun)days|weekends|weekdays),? (?P<subj>I|[Ww]e) "
                 r"(?P<v>.+)$", c.text, re.I)
    if not m:
        m = re.match(r"^(?P<subj>I|[Ww]e) (?:usually|normally|typically|always|generally|tend to) (?P<v>.+)$", c.text)
        if not m:
            m = re.match(r"^(?P<subj>I|[Ww]e) (?P<v>.+)$", c.text)
            m = m if m and _ROUTINE_CUE.search(c.text) else None
        # A routine is stated in the present: not "I always dreamed of ...", not "I would love to ... every day".
        verb = m["v"].split()[0].lower() if m else ""
        if not m or verb in _NOT_ROUTINE or verb.endswith("ed") or verb in PAST_VERBS:
            return None
    return [make(c, "routine", "routine", m["subj"], "routine", clean(c.text), single=False,
                 text=third_person(c.text), change=False)]


def _positive(c: Clause) -> list[Candidate]:
    """Return the candidates of a clause from the first rule family that applies."""
    for family in (instruction, failure, lesson, change, decision, record, deadline, profile, preference, attribute,
                   event, routine):
        found = family(c)
        if found is not None:
            return found
    return []


_NEGATIONS = (
    (re.compile(r"^(?P<s>I|[Ww]e) (?:do not|don't|no longer|never|can no longer) (?P<rest>.+)$"), "{s} {rest}"),
    (re.compile(r"^(?P<s>I)(?:'m| am) (?:not|no longer) (?P<rest>.+)$"), "I am {rest}"),
    (re.compile(r"^(?P<s>[Ww]e)(?:'re| are) (?:not|no longer) (?P<rest>.+)$"), "we are {rest}"),
    (re.compile(r"^(?P<s>I|[Ww]e)(?: have|'ve)? (?:stopped|quit|gave up|given up) (?P<ger>[a-z]+)ing\b(?P<rest>.*)$"),
     "{s} {ger}{rest}"),
)
_E_VERBS = frozenset("us smok liv driv rid writ mak tak bak danc hav serv shar car vot bik hik cod stor sav".split())


def _base(stem: str) -> str:
    """Return the base verb of an -ing stem ("smok" -> "smoke", "runn" -> "run")."""
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
        return stem[:-1]
    return stem + "e" if stem in _E_VERBS else stem


def parse_clause(c: Clause) -> list[Candidate]:
    """Return the candidates of one clause; negated statements are parsed as their positive, then negated.

    "I gave up smoking" / "I quit sugar" with no rule for the positive become a
    negated "habit" ("smoking", "sugar"), so they can still retract a matching memory.
    """
    for pattern, form in _NEGATIONS:
        m = pattern.match(c.text)
        if not m:
            continue
        parts = m.groupdict()
        if "ger" in parts:
            parts["ger"] = _base(parts["ger"])
        changed = bool(re.search(r"\b(?:no longer|anymore|any more|any longer|stopped|quit|gave up|given up)\b",
                                 c.text, re.I))
        inner = replace(c, text=TIME_TAIL.sub("", form.format(**parts)).strip(), change=changed)
        found = [x for x in _positive(inner) if x.attribute and x.category in ("profile", "preference", "fact")]
        if not found and "ger" in parts:
            break
        return [make(inner, str(x.meta["rule"]) + ".negated", x.category, x.subject, x.attribute, x.value,
                     negated=True, change=changed) for x in found]
    m = re.match(r"^(?P<s>I|[Ww]e)(?: have)? (?:quit|gave up|given up|stopped) (?P<v>[\w' -]{2,40})$", c.text)
    if m:
        what = TIME_TAIL.sub("", m["v"]).strip()
        return [make(c, "habit.negated", "preference", m["s"], "habit", what, negated=True, change=True,
                     text=f"{'The user' if m['s'] == 'I' else 'The team'} gave up {what}.")]
    return _positive(c)
