"""Extraction: one turn of text in, typed memory candidates out (live model or offline rules).

    extract(llm, turn, context, cfg)     # llm.offline -> extract_offline, else the "extract" prompt + EXTRACT_SCHEMA
    extract_offline(text, context=..., now=..., cfg=...)

The offline extractor is a real, deterministic rule set (mnemo.extract_rules and
mnemo.extract_clauses) over plain sentences. The semantics it shares with
reconciliation:

- Subjects, attributes and values are canonical (mnemo.normalise): "user" for the
  speaker, "team" for we / our, upper-cased record ids, lowercased names.
- Negation ("I no longer like X", "I don't eat meat anymore", "I left Acme") gives a
  candidate with negated=True, single_valued=False and meta["negated"]=True (the flag
  that survives into the stored memory); reconciliation retires the matching positive
  memory with it.
- "Remember that X" parses X like any sentence, pins it and floors its importance at
  remember_floor; commands inside X are never obeyed. "Save this" / "remember that"
  with no content resolves against the latest context turn ("forget that" too): the
  candidates of that turn, with meta["resolved_from_turn"] and meta["requested_by"].
- Only an explicit request to forget gives command="forget" ("Forget my old address",
  "forget what I said about Tom", "please delete my phone number"); its target is in
  subject / attribute / value and meta["forget"] = {"terms", "qualifier", "scope"}.
  A turn that looks like a prompt injection ("ignore previous instructions", a fake
  "SYSTEM:" line, chat-template tokens) yields no command at all: its suspicious
  sentences are stored verbatim, quoted, as low-importance notes.
- A cause ("because the migration failed") is kept in Candidate.cause; when it names a
  failure, the failure is also extracted as its own candidate (before the change) so
  the plan can link the change to it.
- Importance: a base by category, +0.15 for emphasis ("important", "urgent"), -0.15 for
  hedges ("maybe", "I think"), then floors: identity facts of the user
  (identity_floor), deadlines and dated events (deadline_floor), remember requests
  (remember_floor).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from .config import WriteConfig
from .errors import LLMResponseError
from .extract_clauses import parse_clause
from .extract_rules import (
    EXTRACTOR,
    FAILURE,
    KIND_OF,
    Clause,
    describe,
    failure,
    instruction,
    make,
)
from .model import CATEGORIES, KINDS, Candidate, Turn
from .normalise import (
    DATE_ATTRIBUTES,
    KNOWN_ATTRIBUTES,
    RECORD_ID,
    canonical_attribute,
    canonical_subject,
    chitchat,
    content_tokens,
    display_subject,
    expand,
    normalise_value,
    parse_date,
    sentences,
    stem,
    third_person,
)

IDENTITY_ATTRIBUTES = frozenset({"name", "city", "address", "job_title", "employer", "email", "phone", "age",
                                 "birthday", "origin"})
_NULL_STR = {"type": ["string", "null"]}
EXTRACT_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["candidates"],
    "properties": {"candidates": {"type": "array", "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["text", "kind", "category", "subject", "attribute", "value", "record_id", "references",
                     "importance", "single_valued", "negated", "old_value", "cause", "command", "pinned"],
        "properties": {
            "text": {"type": "string"},
            "kind": {"type": "string", "enum": list(KINDS)},
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "subject": _NULL_STR, "attribute": _NULL_STR, "value": _NULL_STR, "record_id": _NULL_STR,
            "references": {"type": "array", "items": {"type": "string"}},
            "importance": {"type": "number"},
            "single_valued": {"type": "boolean"},
            "negated": {"type": "boolean"},
            "old_value": _NULL_STR, "cause": _NULL_STR,
            "command": {"type": ["string", "null"], "enum": ["forget", None]},
            "pinned": {"type": "boolean"},
        },
    }}},
}

_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override) (?:all |any )?(?:of )?(?:the |your )?(?:previous|prior|above|earlier|"
    r"preceding|system|existing) (?:instructions|prompts?|rules|messages|directions)\b|\bsystem prompt\b|"
    r"\byou are now\b|\bnew instructions\s*:|<\|im_(?:start|end)\|>|\[/?INST\]|^\s*#+\s*(?:system|instruction)|"
    r"^\s*(?:system|assistant|developer|tool)\s*:", re.I | re.M)
_PREFIX = re.compile(
    r"^(?P<p>please|pls|hey|hi|hello|so|ok(?:ay)?|well|oh|btw|by the way|also|and|but|anyway|fyi|just so you know|"
    r"for the record|for your information|quick update|update|correction|actually|in fact|to be clear|"
    r"just to clarify|as of (?:today|now)|from now on|going forward|these days|nowadays|i think|i guess|"
    r"i believe|maybe|probably|apparently|note that|note|heads up|oh and|one more thing|important|importantly|"
    r"urgent|critical|fyi)\b[\s:,\-–—!]*", re.I)
_CHANGE_PREFIX = {"quick update", "update", "correction", "actually", "as of today", "as of now", "from now on",
                  "going forward", "these days", "nowadays"}
_HEDGE_PREFIX = {"i think", "i guess", "i believe", "maybe", "probably", "apparently"}
_CHANGE = re.compile(r"\b(?:now|no longer|anymore|any more|instead|switched|changed|moved|updated|corrected|"
                     r"actually|not \w+ anymore)\b", re.I)
_EMPHASIS = re.compile(r"\b(?:important|importantly|critical|crucial|urgent|urgently|asap|vital|essential|"
                       r"never forget)\b|!!", re.I)
_HEDGE = re.compile(r"\b(?:maybe|perhaps|probably|i think|i guess|not sure|might)\b", re.I)
_REMEMBER = re.compile(r"^(?:(?:can|could|would|will) you |please |pls )*(?P<verb>remember|memori[sz]e|keep in mind|"
                       r"don't forget|do not forget|make a note|take note|note down|save|store|keep|log|bookmark)"
                       r"(?: (?:that|the fact that))?\s*[:,-]?\s*(?P<rest>.*)$", re.I)
_THIS = re.compile(r"^(?:this|that|it|what I just said|the last (?:message|one|thing))(?: (?:for later|for me|"
                   r"please|too|down|in mind|in memory|as well|from (?:your |the )?memor(?:y|ies)))*$", re.I)
_FORGET = re.compile(r"^(?:(?:can|could|would|will) you |please |pls )*(?P<verb>forget|delete|erase|remove|wipe|"
                     r"discard|unlearn|stop remembering)\s+(?P<rest>.+)$", re.I)
# Whose is the thing to delete: mine, a note, or anything "from your memory" (the request names the memory itself).
_FIRST_PERSON = re.compile(r"\b(?:my|me|i|mine|i've|i'm)\b|\bthe (?:note|memory|memories|fact|entry|thing)s?\b|"
                           r"\bfrom (?:your |the )?memor(?:y|ies)\b", re.I)
# Words of praise and social glue: a statement made only of these is small talk, not a memory.
_SOCIAL = frozenset(stem(w) for w in (
    "wow awesome amazing great cool nice glad happy sound sounds congratulations congrats luck proud wonderful "
    "fantastic thank thanks hope soon fun sweet incredible inspiring impressive beautiful lovely adorable super "
    "totally definitely absolutely talk see later care bye hey hi hello yeah sure exactly agree true keep going "
    "buddy pal man dude feel feels glad sorry hear love appreciate cheers omg lol haha cute").split())
_SMALL_TALK = re.compile(r"^(?:wow|that(?:'s| is| sounds)|it sounds|sounds|congrat\w*|way to go|talk (?:to you )?soon|"
                         r"see you|good luck|take care|have (?:fun|a good)|glad|sorry to hear|let's|i'm so (?:happy|glad"
                         r"|sorry)|i am so (?:happy|glad|sorry)|thanks|thank you|what a)\b", re.I)
_CAUSE = re.compile(r"(?:,\s*|\s+)(?P<kw>because(?: of)?|due to|as a result of|since|after|as)\s+(?P<cause>.+)$", re.I)
_PAST = re.compile(r"^(?:I|we)(?: \w+ly| just| also)? (?:\w+ed|went|met|had|saw|got|took|made|bought|ate|ran|flew|"
                   r"gave|told|left|found|spent|came|began|wrote|drove|won|lost|paid|sent)\b", re.I)


# "...; if the team lead changes, this assignment would change": the statement holds only while a root fact does.
_DEPENDS = re.compile(r"(?:\s*[;,]\s*|\s+[—–-]+\s+|\s+)(?:and )?if (?:the|our|my) (?P<root>[a-z][\w -]{1,30}?) "
                      r"(?:ever )?changes?,? (?:then )?(?:this|that|it|these|those)(?: \w+)? (?:would|will|might|may|could|"
                      r"should) (?:also |probably )?change(?: too| as well)?$", re.I)


def _dependency(body: str) -> tuple[str, str | None]:
    """Return the body without a trailing "if <root> changes, this would change", and the root's attribute."""
    m = _DEPENDS.search(body)
    if not m or not m.start():
        return body, None
    return body[:m.start()].rstrip(" ,;—–-"), canonical_attribute(m["root"])


def _forget_request(body: str) -> re.Match | None:
    """Return the match of an explicit forget request: "forget ...", or "delete / remove ..." of something of mine."""
    m = _FORGET.match(body)
    if m and (m["verb"].lower() in ("forget", "unlearn", "stop remembering") or _FIRST_PERSON.search(m["rest"])):
        return m
    return None


def _strip(sentence: str) -> tuple[str, bool, bool]:
    """Return (sentence without politeness and discourse prefixes, saw a change cue, saw a hedge)."""
    body, changed, hedged = sentence.strip(), False, False
    while True:
        m = _PREFIX.match(body)
        if not m or m.end() == 0 or m.end() >= len(body):
            return body, changed, hedged
        word = m["p"].lower()
        changed |= word in _CHANGE_PREFIX
        hedged |= word in _HEDGE_PREFIX
        body = body[m.end():]


def _clauses(body: str) -> list[str]:
    """Return the independent clauses of a sentence: split at "; " and at "and I / but we / ..."."""
    parts = re.split(r";\s+|(?:,\s*|\s+)(?:and|but|while|whereas|so|plus)\s+(?=(?:I|we|We|my|My|our|Our)\b)", body)
    out = []
    for part in parts:
        # A comma splice of two first-person statements ("I don't eat meat, I'm a vegetarian") is two
        # clauses; a comma after a condition or a time ("If it rains, I stay in") is not split.
        m = re.match(r"^((?:I|We|we)\b[^,]*),\s+((?:I|we)(?:'m|'ve| am| have| do| don't)?\s.*)$", part)
        out += [m[1], m[2]] if m else [part]
    return [p.strip(" ,.") for p in out if p and p.strip(" ,.")]


def _note(text: str, source: str, *, suspicious: bool = False, category: str = "note",
          kind: str = "episodic", importance: float = 0.3) -> Candidate:
    """Return a note candidate: the sentence as said (quoted when it looks like an injection)."""
    shown = f'The user wrote (stored as data): "{text}"' if suspicious else third_person(text)
    ids = [r.upper() for r in RECORD_ID.findall(text)]
    first = re.match(r"^(?:I|my|me)\b", text, re.I) and "user" or re.match(r"^(?:we|our)\b", text, re.I) and "team"
    meta = {"source_text": source, "rule": "note.suspicious" if suspicious else "note", "extractor": EXTRACTOR}
    if suspicious:
        meta["suspicious"] = True
    return Candidate(text=shown, kind=kind, category=category, subject=(ids[0] if ids else first or None),
                     record_id=ids[0] if ids else None, references=tuple(ids[1:]),
                     importance=0.15 if suspicious else importance, single_valued=False, meta=meta)


def _finalise(c: Candidate, cfg: WriteConfig, *, emphasis: bool, hedge: bool, pinned: bool) -> Candidate:
    """Return `c` with its importance adjusted, floored and clamped, and pinned if asked to remember it."""
    imp = c.importance + (0.15 if emphasis else 0.0) - (0.15 if hedge else 0.0)
    if c.subject == "user" and c.attribute in IDENTITY_ATTRIBUTES and not c.negated:
        imp = max(imp, cfg.identity_floor)
    dated = c.category == "event" and c.meta.get("raw_date") and not c.meta.get("date_unresolved")
    if c.category == "deadline" or dated:
        imp = max(imp, cfg.deadline_floor)
    if pinned:
        imp = max(imp, cfg.remember_floor)
    meta = {**c.meta, "remember": True} if pinned else c.meta
    return replace(c, importance=round(min(1.0, max(0.0, imp)), 3), pinned=c.pinned or pinned, meta=meta)


class _Turn:
    """What one call of extract_offline knows: the time, the context turns and the flags of the whole turn."""

    def __init__(self, now: datetime | None, context: Sequence[Turn], cfg: WriteConfig, commands: bool):
        self.now, self.context, self.cfg, self.commands = now, list(context), cfg, commands
        self.found: list[Candidate] = []
        self.sentences: list[list[Candidate]] = []  # what each sentence of the turn gave, so far


def _points_back(body: str) -> bool:
    """Return True for a bare "save this" / "forget that": a turn that only points at another one."""
    m = _REMEMBER.match(body) or _FORGET.match(body)
    return m is not None and _THIS.match(body[m.end("verb"):].strip(" :,-") or "it") is not None


def _context_text(t: _Turn) -> tuple[Turn | None, list[Turn]]:
    """Return the latest context turn that is neither small talk nor a pointer to another turn, and the turns before it."""
    recent = t.context[-t.cfg.context_turns:] if t.cfg.context_turns > 0 else []
    for k in range(len(recent) - 1, -1, -1):
        body = _strip(recent[k].text.strip())[0].rstrip(" .!?")
        if not chitchat(body) and not _points_back(body):
            return recent[k], recent[:k]
    return None, []


def _from_context(t: _Turn, source: str) -> list[Candidate]:
    """Return the candidates of the turn "save this" / "forget that" points at ([] when there is none)."""
    turn, before = _context_text(t)
    if turn is None:
        return []
    if turn.role != "user":
        found = [_note(turn.text.strip(), source, category="note", kind="semantic", importance=0.5)]
    else:
        found = _extract(turn.text, before, t.now, t.cfg, commands=False) or [
            _note(turn.text.strip(), source, kind="semantic", importance=0.5)]
    return [replace(c, meta={**c.meta, "resolved_from_turn": turn.id, "requested_by": source}) for c in found]


def _forget(rest: str, source: str, t: _Turn) -> list[Candidate]:
    """Return the forget command(s) for the target phrase of "forget ..."."""
    target = rest.strip(" .!?")
    meta: dict = {"source_text": source, "rule": "command.forget", "extractor": EXTRACTOR}
    subject = attr = value = qualifier = scope = None
    if _THIS.match(target):
        # "X. Please delete that from your memory.": "that" is the turn's own last statement, which is then
        # never written; as a forget command it also retires what is stored of it. Else it is the last turn.
        k = next((k for k in range(len(t.sentences) - 1, -1, -1)
                  if t.sentences[k] and all(c.command is None for c in t.sentences[k])), None)
        said, rule = (t.sentences[k], "command.forget.same_turn") if k is not None else (
            _from_context(t, source), "command.forget.context")
        if k is not None:
            t.sentences[k] = []
        return [replace(c, command="forget", text=c.text, meta={**c.meta, "rule": rule,
                                                                "forget": {"terms": [], "qualifier": None,
                                                                           "scope": None}})
                for c in said]
    m_all = re.match(r"^(?:all|everything|every memory|all (?:of )?(?:my |your |the )?(?:memories|data|notes|"
                     r"information))(?: you (?:know|have|remember))?(?: about me)?$", target, re.I)
    m_about = re.match(r"^(?:(?:everything|anything|all|what) )?(?:(?:I|we) (?:said|told you|mentioned|wrote)|you know"
                       r"|you remember)? ?(?:about|regarding|on) (?P<x>.+)$|^the (?:note|memory|memories|fact|entry|"
                       r"thing)s? (?:about|on|regarding) (?P<y>.+)$", target, re.I)
    m_that = re.match(r"^(?:that|the fact that) (?P<x>.+)$", target, re.I)
    m_my = re.match(r"^(?P<own>my|our) (?:(?P<q>old|previous|former|current|new) )?(?P<x>.+)$", target, re.I)
    if m_all:
        scope = "all"
    elif m_about:
        x = target = (m_about["x"] or m_about["y"]).strip()
        subject = canonical_subject(x)
        scope = subject if subject in ("user", "team") else None
    elif m_that:
        found = parse_clause(Clause(m_that["x"], source, t.now))
        if found:
            subject, attr, value = found[0].subject, found[0].attribute, found[0].value
            target = found[0].text
    elif m_my:
        subject, qualifier = canonical_subject(m_my["own"]), (m_my["q"] or "").lower() or None
        phrase = m_my["x"].lower()
        if phrase in KNOWN_ATTRIBUTES or phrase in ("home", "job", "workplace"):
            attr = canonical_attribute(phrase)
    else:
        m_of = re.match(r"^(?:the )?(?P<a>[\w -]+?) (?:for|of) (?P<x>.+)$", target, re.I)
        if m_of and m_of["a"].lower() in KNOWN_ATTRIBUTES:
            subject, attr = canonical_subject(m_of["x"]), canonical_attribute(m_of["a"])
        elif RECORD_ID.search(target):
            subject = RECORD_ID.search(target).group(0).upper()
    terms = sorted(content_tokens(target) - {"old", "previou", "former", "current", "new", "said", "told", "note",
                                              "memory", "memorie", "thing", "everything", "anything"})
    meta["forget"] = {"terms": terms, "qualifier": qualifier, "scope": scope}
    text = target if target.endswith(".") else third_person(target)
    if m_about:
        text = text[:1].upper() + text[1:]
    return [Candidate(text=text, kind="semantic", category="note", subject=subject, attribute=attr, value=value,
                      command="forget", importance=1.0, single_valued=False, meta=meta)]


def _sentence(raw: str, t: _Turn) -> list[Candidate]:
    """Return the candidates of one sentence: commands first, then clauses through the rules, then a note."""
    if _INJECTION.search(raw):
        return [_note(raw.strip(), raw, suspicious=True)]
    body, changed, hedged = _strip(raw)
    question = body.rstrip().endswith("?")
    body = body.strip().rstrip(" .!?…")
    emphasis, hedge = bool(_EMPHASIS.search(raw)), hedged or bool(_HEDGE.search(raw))
    if not body:
        return []
    m = _REMEMBER.match(body)
    after = body[m.end("verb"):].strip(" :,-") if m else ""
    if m and m["verb"].lower() in ("save", "store", "keep", "log", "bookmark") and not _THIS.match(after or "it"):
        m = None
    if m:
        rest = m["rest"].strip()
        if not after or _THIS.match(after):
            found = _from_context(t, raw)
        elif re.match(r"^to\s", rest, re.I):
            action = clean_rest = rest[3:].strip()
            found = instruction(Clause(clean_rest, raw, t.now)) or [
                make(Clause(clean_rest, raw, t.now), "instruction.reminder", "instruction", "user", "reminder",
                     action, single=False, text=f"Reminder from the user: {action}.")]
        else:
            found = _content(rest, raw, t, changed) or [_note(rest, raw, kind="semantic")]
        return [_finalise(c, t.cfg, emphasis=emphasis, hedge=False, pinned=not c.meta.get("suspicious"))
                for c in found]
    m = _forget_request(body)
    if m and t.commands:
        return _forget(m["rest"], raw, t)
    if question or chitchat(body):
        return []
    body, root = _dependency(body)
    found = [_finalise(c, t.cfg, emphasis=emphasis, hedge=hedge, pinned=False)
             for c in _content(body, raw, t, changed)]
    if not found and _worth_a_note(body):
        category = "event" if _PAST.match(body) else "note"
        found = [_finalise(_note(body, raw, category=category), t.cfg, emphasis=emphasis, hedge=hedge, pinned=False)]
    # What holds only while a root fact does says so; the write path links it to that fact (`depends_on`).
    return [replace(c, meta={**c.meta, "depends_on": root}) for c in found] if root else found


def _worth_a_note(body: str) -> bool:
    """Return True when an unmatched statement carries information: not praise, not about "you" only."""
    words = body.split()
    informative = content_tokens(body) - _SOCIAL
    if len(words) < 4 or len(informative) < 2 or _SMALL_TALK.match(body):
        return False
    second = re.search(r"\b(?:you|your|you're|you've|yours)\b", body, re.I)
    first = re.search(r"\b(?:I|me|my|mine|we|our|us)\b", body)
    return not (second and not first)


def _content(body: str, source: str, t: _Turn, changed: bool) -> list[Candidate]:
    """Return the candidates of a statement's clauses, with causes split off and deadlines given a subject."""
    out: list[Candidate] = []
    for text in _clauses(expand(body)):
        cause, full = None, text
        m = _CAUSE.search(text)
        if m and (m["kw"].lower().startswith("because") or m["kw"].lower() == "due to" or FAILURE.search(m["cause"])):
            text, cause = text[: m.start()].strip(), m["cause"].strip()
        c = Clause(text, source, t.now, changed or bool(_CHANGE.search(text)), cause, full)
        found = parse_clause(c)
        if found and cause and FAILURE.search(cause) and all(x.category != "failure" for x in found):
            failed = failure(Clause(cause, source, t.now)) or [
                make(Clause(cause, source, t.now), "failure.cause", "failure", None, "failure", cause.lower(),
                     single=False, text=third_person(cause[0].upper() + cause[1:]), change=False)]
            out.extend(replace(f, cause=None, meta={**f.meta, "from_cause": True}) for f in failed)
        out.extend(_subject_from_context(x, t, out) for x in found)
    t.found.extend(out)
    return out


def _subject_from_context(c: Candidate, t: _Turn, same_turn: list[Candidate]) -> Candidate:
    """Return a subject-less deadline with the subject of the latest deadline said before it, if any."""
    if c.attribute != "deadline" or c.subject is not None:
        return c
    earlier = [x for x in [*t.found, *same_turn] if x.attribute == "deadline" and x.subject]
    if not earlier and t.context and t.cfg.context_turns > 0:
        for turn in reversed(t.context[-t.cfg.context_turns:]):
            earlier = [x for x in _extract(turn.text, (), t.now, t.cfg, commands=False)
                       if x.attribute == "deadline" and x.subject]
            if earlier:
                break
    if not earlier:
        return c
    subject = earlier[-1].subject
    shown = str(earlier[-1].meta.get("subject_display") or display_subject(subject))
    said = f"{c.value} ({c.meta['raw_date']})" if c.meta.get("raw_date") and c.meta["raw_date"] != c.value else c.value
    text = describe(subject, shown, "deadline", said or "", old=c.old_value)
    return replace(c, subject=subject, record_id=subject if RECORD_ID.fullmatch(subject) else None, text=text,
                   meta={**c.meta, "subject_from": "context"})


def _extract(text: str, context: Sequence[Turn], now: datetime | None, cfg: WriteConfig, *,
             commands: bool) -> list[Candidate]:
    """Return the candidates of `text`; `commands=False` for text quoted from another turn."""
    t = _Turn(now, context, cfg, commands=commands and not _INJECTION.search(text))
    for raw in sentences(text):
        t.sentences.append(_sentence(raw, t))
    return [c for said in t.sentences for c in said]


def extract_offline(text: str, context: Sequence[Turn] = (), now: datetime | None = None,
                    cfg: WriteConfig = WriteConfig()) -> list[Candidate]:
    """Return the candidates the offline rules find in `text`, sentence by sentence (see the module docstring).

    `context` is the session's recent turns, oldest first (for "save this" and
    subject-less deadlines); `now` resolves relative dates (None keeps them as phrases).
    """
    return _extract(text, context, now, cfg, commands=True)


def _allows_forget(text: str) -> bool:
    """Return True when the turn holds an explicit forget request and nothing that looks like an injection."""
    if _INJECTION.search(text):
        return False
    return any(_forget_request(_strip(raw)[0].rstrip(" .!?")) for raw in sentences(text))


def _from_model(item: dict, turn: Turn, cfg: WriteConfig, may_forget: bool) -> Candidate:
    """Return the candidate for one item of the model's answer, normalised, checked and floored."""
    coerced = []
    category = item.get("category") if item.get("category") in CATEGORIES else "note"
    kind = item.get("kind") if item.get("kind") in KINDS else KIND_OF[category]
    if category != item.get("category") or kind != item.get("kind"):
        coerced.append("kind/category")
    attr = canonical_attribute(item.get("attribute"))
    value = normalise_value(item.get("value"))
    meta: dict = {"source_text": turn.text, "extractor": "model"}
    if attr in DATE_ATTRIBUTES and value:
        iso, raw = parse_date(value, turn.at)
        if iso:
            meta.update(raw_date=raw, **({"due": iso} if attr == "deadline" else {}))
            value = iso
    command = item.get("command") if item.get("command") == "forget" else None
    if command and not may_forget:
        command, meta["command_refused"] = None, "no explicit forget request in the turn"
    if command:
        old = re.search(r"\b(old|previous|former)\b", f"{item['text']} {turn.text}", re.I)
        meta["forget"] = {"terms": [], "qualifier": old.group(1).lower() if old else None, "scope": None}
    negated = bool(item.get("negated"))
    if negated:
        meta["negated"] = True
    if coerced:
        meta["coerced"] = coerced
    rid = item.get("record_id")
    try:
        importance = float(item.get("importance", 0.5))
    except (TypeError, ValueError):
        importance, meta["coerced"] = 0.5, [*coerced, "importance"]
    c = Candidate(
        text=str(item["text"]).strip(), kind=kind, category=category, subject=canonical_subject(item.get("subject")),
        attribute=attr, value=value, record_id=rid.upper() if isinstance(rid, str) and RECORD_ID.fullmatch(rid) else None,
        references=tuple(str(r).upper() if RECORD_ID.fullmatch(str(r)) else str(r) for r in item.get("references") or ()),
        importance=min(1.0, max(0.0, importance)), single_valued=bool(item.get("single_valued", True)) and not negated,
        negated=negated, old_value=normalise_value(item.get("old_value")), cause=item.get("cause") or None,
        command=command, source="user", meta=meta,
    )
    return _finalise(c, cfg, emphasis=False, hedge=False, pinned=bool(item.get("pinned")))


def extract(llm, turn: Turn, context: list[Turn], cfg: WriteConfig = WriteConfig()) -> list[Candidate]:
    """Return the candidates in `turn`: offline rules when `llm.offline`, else the live "extract" prompt.

    The live answer is normalised like the offline one (canonical subjects, attributes,
    values, ISO dates), floored by the same rules, and a forget command is accepted only
    when the turn itself holds an explicit forget request (defence in depth against a
    model talked into one). Items without text are dropped; if every item is unusable
    the answer is refused with LLMResponseError rather than read as "nothing found".
    """
    if llm.offline:
        return extract_offline(turn.text, context=context, now=turn.at, cfg=cfg)
    recent = context[-cfg.context_turns:] if cfg.context_turns > 0 else []
    variables = {
        "text": turn.text,
        "context": [{"id": t.id, "role": t.role, "at": t.at.isoformat(), "text": t.text} for t in recent],
        "now": turn.at.date().isoformat(),
        "identity_floor": cfg.identity_floor, "deadline_floor": cfg.deadline_floor,
        "remember_floor": cfg.remember_floor,
    }
    answer = llm.complete_json("extract", variables, EXTRACT_SCHEMA, role="extract")
    items = answer.get("candidates") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise LLMResponseError("the extraction answer has no 'candidates' list; check the 'extract' prompt")
    usable = [i for i in items if isinstance(i, dict) and isinstance(i.get("text"), str) and i["text"].strip()]
    if items and not usable:
        raise LLMResponseError(f"none of the {len(items)} extracted candidates has a text; the answer is unusable")
    may_forget = _allows_forget(turn.text)
    return [_from_model(i, turn, cfg, may_forget) for i in usable]
