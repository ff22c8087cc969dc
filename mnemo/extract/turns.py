"""A turn of text to claims: speakers, sentences, commands, coreference, notes and importance.

    extract_offline(text, context=(), now=None, cfg=WriteConfig(), user=None)  -> list[Candidate]

What the turn level adds to `claims`:

- Transcripts: a turn of "Name: ..." lines is split by speaker. Assistant lines give nothing; the
  user's lines ("User:", "Me:", or the user's own name) are read as the user's; another named
  speaker's first person is that speaker ("Caroline: I started at the shelter" is about caroline).
- Size: a turn is cut into sentences without parsing; only the first `max_sentences` of them are
  parsed, and each is cut at `MAX_SENTENCE_CHARS`, so a 1 MB turn costs what its first sentences
  cost. What was not read is reported by the caller.
- Commands, read from the parse: an imperative whose verb removes ("forget / delete / wipe ... X",
  `assets/words/removal_verbs.txt`) or a negated keep ("don't keep my address") is a forget request for
  X; "remember / note / keep in mind that X" (`assets/words/retention_verbs.txt`) pins X's claims; "save
  this" / "forget that" point at the previous statement of the turn, or at the latest context turn.
  A turn that looks like a prompt injection gives no command at all: its suspicious sentences are
  stored verbatim, quoted, as low-importance notes.
- Conditions: "if the team lead changes, this would change" is not a statement; it marks the
  claims of the statement before it as holding only while that fact does (meta["depends_on"]).
- Notes: an informative statement that yields no claim is kept as a note (its text in the third
  person, no slot), so nothing said is lost; small talk and questions give nothing, but what a
  question-final sentence states before it asks is read as a statement ("I moved to Lisbon last
  month, can you recommend a gym?" stores the move; "If I move ..., can you ...?" stores nothing).
- Code: a fenced block ("```") is not read as sentences; it is kept as one note per block.
- Importance: a base by category, +0.15 for emphasis, -0.15 for hedges, then floors for identity
  facts of the user, deadlines and dated events, and remember requests (WriteConfig).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from .. import lexicon
from ..config import WriteConfig
from ..model import CONTEXT_KEY, Candidate, Turn
from ..normalise import canonical_attribute, chitchat, content_tokens, sentences
from . import claims as claims_mod
from . import entities, slots
from .categories import BASE_IMPORTANCE, LESSON
from .clauses import analyse, heads, truth_frame
from .commands import POINTER, command_verb, forget_request, target
from .parser import RECENT_SIZE, parse
from .questions import is_question
from .render import render
from .said import (
    SHORT,
    as_said,
    asks_the_assistant,
    attach_fragments,
    content_words,
    labelled,
    leaning,
    leans_on_context,
    points_back_to,
    said_with,
    sentence_like,
    states,
)
from .speakers import USER_SPEAKER, Speaker, speaker_lines
from .values import marks

IDENTITY_ATTRIBUTES = frozenset({"name", "city", "address", "job_title", "employer", "email", "phone", "mobile",
                                 "age", "birthday", "origin", "preferred_name"})
# Texts parsed ahead at once (`read_ahead`): half the parser's memory of recent parses, so none is
# forgotten before its turn is read.
AHEAD = RECENT_SIZE // 2
MAX_SENTENCE_CHARS = 2_000  # a "sentence" longer than this is cut: no statement a person makes is longer
INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override) (?:all |any )?(?:of )?(?:the |your )?(?:previous|prior|above|earlier|"
    r"preceding|system|existing) (?:instructions|prompts?|rules|messages|directions)\b|\bsystem prompt\b|"
    r"\byou are now\b|\bnew instructions\s*:|<\|im_(?:start|end)\|>|\[/?INST\]|^\s*#+\s*(?:system|instruction)|"
    r"^\s*(?:system|assistant|developer|tool)\s*:", re.I | re.M)
_EMPHASIS = re.compile(r"\b(?:important|importantly|critical|crucial|urgent|urgently|asap|vital|essential|"
                       r"never forget)\b|!!", re.I)
_HEDGE = re.compile(r"\b(?:maybe|perhaps|probably|i think|i guess|not sure|might)\b", re.I)
_SOCIAL = frozenset("wow awesome amazing great cool nice glad happy sound sounds congratulations congrats luck "
                    "proud wonderful fantastic thank thanks hope soon fun sweet lovely super totally definitely "
                    "absolutely bye hey hi hello yeah sure exactly agree true sorry hear love appreciate cheers "
                    "lol haha cute ooh oh ah hmm useful helpful brilliant perfect fair enough way go talk see "
                    "later".split())


@dataclass
class TurnState:
    """What extraction knows while reading one turn: its time, context, speaker and what it found so far."""

    now: datetime | None
    context: list[Turn]
    cfg: WriteConfig
    commands: bool
    mentions: entities.Mentions = field(default_factory=entities.Mentions)
    said: list[list[Candidate]] = field(default_factory=list)  # the claims of each statement, in order


_SPLICE = re.compile(r",\s+(?=(?:I|we|he|she|they|it|I'm|I've|I'd|we're|it's)\s)")
_SUBORDINATE = re.compile(r"^(?:if|when|whenever|because|although|though|as|since|while|after|before|once|unless|"
                          r"until|whether)\b", re.I)


def _splices(sentence: str) -> list[str]:
    """Return a comma splice of independent clauses as separate sentences ("I left, I couldn't keep up").

    A comma after a subordinate clause ("If it rains, I stay in") joins, it does not splice.
    """
    parts = _SPLICE.split(sentence)
    if len(parts) < 2 or _SUBORDINATE.match(sentence.strip()):
        return [sentence]
    out = [parts[0]]
    for p in parts[1:]:
        if len(out[-1].split()) < 3 or len(p.split()) < 3:
            out[-1] = f"{out[-1]}, {p}"
        else:
            out.append(p)
    return out


# A fenced code block ("```lang" ... "```", or to the end of an unclosed one): an artefact, not statements.
_CODE = re.compile(r"```[ \t]*(?P<lang>[\w+#.-]*)[^\n]*\n?(?P<body>.*?)(?:```|\Z)", re.S)
CODE_NOTE_CHARS = 240  # of a code block, kept in its note's text (whitespace collapsed) so that search finds it


def without_code(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Return `text` with its fenced code blocks cut out, and the blocks as (language, code).

    Code a user pastes is not English: parsed as sentences it gives dozens of false claims
    ("Git add.", "Const apiKey = ..."). It is kept whole as one note per block instead (`_code_note`).
    """
    blocks = [(m["lang"], m["body"]) for m in _CODE.finditer(text) if m["body"].strip()]
    return (_CODE.sub("\n", text) if blocks else text), blocks


def _code_note(lang: str, code: str) -> Candidate:
    """Return the note that keeps a pasted code block: what language, and its start, as the user shared it."""
    flat = " ".join(code.split())
    head = flat if len(flat) <= CODE_NOTE_CHARS else flat[:CODE_NOTE_CHARS].rsplit(" ", 1)[0] + " ..."
    text = f"The user shared {lang + ' ' if lang else ''}code: {head}"
    return Candidate(text=text, kind="episodic", category="note", subject="user", importance=0.2, single_valued=False,
                     meta={"source_text": code[:MAX_SENTENCE_CHARS], "rule": "note.code",
                           "extractor": claims_mod.EXTRACTOR, "marks": []})


# Where a question starts inside a sentence that ends in one: after a comma or a spaced dash (and a
# "so" / "but" / "and"), an interrogative word, or an auxiliary inverted before its subject ("can you",
# "is that", "does the timing"). "where" / "when" / "which" / "who" must be followed by an inversion, or they start a
# relative clause (", which has improved to 250ms").
_INV = r"(?:can|could|would|will|should|shall|may|might|do|does|did|is|are|was|were|have|has|had|am)"
_PRON = r"(?:you|i|we|it|that|this|there|they|he|she|these|those)"
# A subject that opens on a determiner inverts as a pronoun does: "does the timing matter", "is my dose right".
_SUBJECT = rf"(?:{_PRON}|the|a|an|my|your|his|her|our|their|any|some)"
_ASKS = re.compile(rf"(?:,|\s[-\u2013\u2014])\s+(?:(?:so|but|and|then|or)\s+)?(?=(?:how|what|why)\b|"
                   rf"(?:where|when|which|who|whom|whose)\s+{_INV}\s+{_PRON}\b|{_INV}\s+{_SUBJECT}\b)", re.I)
# A sentence led by these is a supposition: what precedes its question is not said to be so.
_SUPPOSED = re.compile(r"^\s*(?:if|unless|when|whenever|whether|suppose|supposing|assuming|in case|once|until|"
                       r"before|what if|should)\b", re.I)


def _asked_after(sentence: str) -> list[str]:
    """Return a question-final sentence as what it states, then its question.

    "I moved to Lisbon last month, can you recommend a gym nearby?" states a move and asks for a
    gym: read whole, as a question, the move would be lost. A supposition is not a statement ("If I
    move to Lisbon, can you ...?"), so such a sentence stays whole.
    """
    text = sentence.strip()
    if not text.endswith("?") or _SUPPOSED.match(text):
        return [sentence]
    cut = _ASKS.search(text)
    if cut is None or not text[:cut.start()].strip():
        return [sentence]
    return [text[:cut.start()].strip() + ".", text[cut.end():].strip()]


_LABEL = re.compile(r"^\s*(?P<label>[A-Za-z][\w'.-]*(?:\s+[\w'.-]+){0,2})\s*:\s+(?P<text>\S.*)$", re.S)


def _heading(whole: Any, rest: Any) -> bool:
    """Return True when a sentence is a heading and a clause ("Correction: my flight leaves at 8:15").

    The heading is at most three words, none a name or pronoun ("Maria: I moved" is Maria speaking)
    or a finite verb ("the doctor said: ..." reports speech), and what follows the colon is a clause
    of its own with a subject. Then the clause is read alone; a list after a label ("Allergies:
    peanuts") stays whole. A heading that is a keep verb ("Note to self:", "Remember:") pins the
    clause's claims as "remember that ..." does.
    """
    colon = next((t for t in whole if t.text == ":"), None)
    label = whole[:colon.i] if colon is not None else []
    if not label:
        return False
    named = any(t.lower_ in lexicon.words("heading_labels") for t in label)
    if not named and any(t.pos_ in ("PROPN", "PRON") or t.tag_ in ("VBD", "VBZ", "VBP", "MD") for t in label):
        return False
    root = rest[:].root
    # A clause with a subject, or (under a heading word) an imperative: "Lesson learned: never deploy on Fridays".
    return root.pos_ in ("VERB", "AUX") and (named and root.tag_ == "VB" or any(
        c.dep_ in ("nsubj", "nsubjpass", "expl") for c in root.children))


def _chunks(text: str, limit: int) -> tuple[list[str], int]:
    """Return the first `limit` sentences of `text` (semicolons split too, long ones cut) and how many were left."""
    found: list[str] = []
    for s in sentences(text):
        for part in [x for piece in re.split(r"(?<=;)\s+", s) for y in _splices(piece) for x in _asked_after(y)]:
            part = part.strip()
            while len(part) > MAX_SENTENCE_CHARS:
                cut = part.rfind(" ", 0, MAX_SENTENCE_CHARS)
                cut = cut if cut > 0 else MAX_SENTENCE_CHARS
                found.append(part[:cut])
                part = part[cut:].strip()
            if part:
                found.append(part.rstrip(";").strip() + ("" if part.endswith((".", "!", "?", ";")) else ""))
    return found[:limit], max(0, len(found) - limit)


def _informative(text: str, to_a_person: bool = False) -> bool:
    """Return True for a sentence worth keeping as said when no claim came from it: four words or more, two
    content words beyond thanks and praise, not chit-chat. What the user says to "you" alone is said to the
    assistant, not about the world; a named person of a transcript (`to_a_person`) says it to another person
    ("Instagram and TikTok can help you reach a younger crowd"), and that is kept."""
    words = text.split()
    rich = content_tokens(text) - _SOCIAL
    second = re.search(r"\b(?:you|your|you're|you've)\b", text, re.I)
    first = re.search(r"\b(?:I|me|my|mine|we|our|us)\b", text)
    return len(words) >= 4 and len(rich) >= 2 and (to_a_person or not (second and not first)) and not chitchat(text)


def _note(sent: Any, source: str, *, suspicious: bool = False, importance: float = 0.3,
          category: str = "note", kind: str = "episodic", me: Speaker = USER_SPEAKER) -> Candidate:
    """Return a note: the sentence as said, "I" as who said it (quoted as data when it looks like an injection)."""
    text = sent if isinstance(sent, str) else render(list(sent), me=me.display)
    shown = f'The user wrote (stored as data): "{source.strip()}"' if suspicious else text
    ids = sorted({m.group(0).upper() for m in re.finditer(r"\b[A-Za-z]{1,6}(?:-[A-Za-z0-9]{1,10})*-\d[A-Za-z0-9]*\b",
                                                           source)})
    subject = ids[0] if ids else (me.key if re.match(r"^(?:I|my|me)\b", source.strip(), re.I) else
                                  "team" if re.match(r"^(?:we|our)\b", source.strip(), re.I) else None)
    meta: dict[str, Any] = {"source_text": source, "rule": "note.suspicious" if suspicious else "note",
                            "extractor": claims_mod.EXTRACTOR, "marks": sorted(marks(shown))}
    if suspicious:
        meta["suspicious"] = True
    return Candidate(text=shown, kind=kind, category=category, subject=subject, record_id=ids[0] if ids else None,
                     references=tuple(ids[1:]), importance=0.15 if suspicious else importance, single_valued=False,
                     meta=meta)


def finalise(c: Candidate, cfg: WriteConfig, *, emphasis: bool, hedge: bool, pinned: bool) -> Candidate:
    """Return `c` with its importance adjusted, floored and clamped, and pinned if asked to remember it."""
    imp = c.importance + (0.15 if emphasis else 0.0) - (0.15 if hedge else 0.0)
    if c.subject == "user" and c.attribute in IDENTITY_ATTRIBUTES and not c.negated:
        imp = max(imp, cfg.identity_floor)
    dated = c.category == "event" and c.meta.get("raw_date")
    if c.category == "deadline" or dated:
        imp = max(imp, cfg.deadline_floor)
    if pinned:
        imp = max(imp, cfg.remember_floor)
    meta = {**c.meta, "remember": True} if pinned else c.meta
    return replace(c, importance=round(min(1.0, max(0.0, imp)), 3), pinned=c.pinned or pinned, meta=meta)


def _forget_that(source: str, st: TurnState) -> list[Candidate]:
    """Return forget commands for what "that" points at: this turn's last statement, else the latest context turn.

    The statement withdrawn in the same turn is never written; as a command it also retires
    stored memories holding its identifiers.
    """
    k = next((k for k in range(len(st.said) - 1, -1, -1) if st.said[k] and all(c.command is None for c in st.said[k])),
             None)
    if k is not None:
        found, rule = st.said[k], "command.forget.same_turn"
        st.said[k] = []
    else:
        found, rule = _from_context(st, source), "command.forget.context"
    return [replace(c, command="forget", meta={**c.meta, "rule": rule, "forget": {"terms": [], "qualifier": None,
                                                                                   "scope": None}})
            for c in found]


def _context_turn(st: TurnState) -> tuple[Turn | None, list[Turn]]:
    """Return the latest context turn that says something (not small talk, not a pointer), and the turns before it."""
    recent = st.context[-st.cfg.context_turns:] if st.cfg.context_turns > 0 else []
    for k in range(len(recent) - 1, -1, -1):
        text = recent[k].text.strip()
        if chitchat(text) or _points_back(text):
            continue
        return recent[k], recent[:k]
    return None, []


def _points_back(text: str) -> bool:
    words = re.findall(r"[a-z']+", text.lower())
    verbs = lexicon.words("removal_verbs") | lexicon.words("retention_verbs") | {"save"}
    return bool(words) and len(words) <= 6 and any(w in verbs for w in words) and any(w in POINTER for w in words)


def _from_context(st: TurnState, source: str) -> list[Candidate]:
    """Return the claims of the turn "save this" / "forget that" points at ([] when there is none)."""
    turn, before = _context_turn(st)
    if turn is None:
        return []
    if turn.role != "user":
        found = [_note(turn.text.strip(), turn.text, importance=0.5, kind="semantic")]
    else:
        found = read_turn(turn.text, before, st.now, st.cfg, commands=False)[0] or [
            _note(turn.text.strip(), turn.text, importance=0.5, kind="semantic")]
    return [replace(c, meta={**c.meta, "resolved_from_turn": turn.id, "requested_by": source}) for c in found]


def _condition(sent: Any) -> str | None:
    """Return the attribute a sentence's "if <root fact> changes, this would change" depends on, or None."""
    for t in sent:
        if t.lemma_ == "change" and any(m.lower_ == "if" for m in t.children if m.dep_ == "mark"):
            subj = next((c for c in t.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            if subj is not None and subj.pos_ == "NOUN":
                words = [*entities.modifiers(subj), subj]
                return canonical_attribute(slots.canonical_slot(slots.slot_words_key(words), "*",
                                                                     relation=False)[0])
    return None


def _named(sent: Any, st: TurnState, before_pronouns: bool = False) -> None:
    """Register the people and organisations a sentence names, so its own pronouns can find them.

    With `before_pronouns`, only names said before the sentence's first third-person pronoun that could
    stand for them count: in "his name is Barnaby", "his" is not Barnaby; in "It was Matt Patterson, he
    is so talented", "it" could not stand for a person, so Matt Patterson counts. A name is read at its
    head ("Matt Patterson" at "Patterson"). A name said in direct address ("Thanks, Caroline!", a noun
    phrase modifying the clause, `npadvmod`) is the person spoken to, "you": never what a he / she
    stands for.
    """
    def first(kinds: tuple[str, ...]) -> int | None:
        return next((t.i for t in sent if t.pos_ == "PRON" and entities.THIRD.get(t.lower_) in kinds), None)

    stops = {"PERSON": first(("person", "any")), "ORG": first(("thing", "any", "person"))}
    for ent in sent.ents:
        head = ent.root
        if ent.label_ not in stops or before_pronouns and stops[ent.label_] is not None \
                and ent.start > stops[ent.label_]:
            continue
        named = head.i > 0 and getattr(entities.name_of(sent.doc[ent.start - 1]), "i", -1) == ent.start
        addressed = ent.label_ == "PERSON" and head.dep_ == "npadvmod"
        if head.dep_ not in ("appos", "compound", "oprd") and not named and not addressed:
            st.mentions.add(entities.entity_of(head, st.mentions))


def _about_memory(c: Any) -> bool:
    """Return True for a clause about the storing itself ("I'd rather that wasn't stored"), not about the world."""
    verbs = lexicon.words("retention_verbs") | lexicon.words("removal_verbs")
    return any(t.lemma_.lower() in verbs and t.pos_ == "VERB" for t in c.tokens) and any(
        t.lower_ in POINTER and t.pos_ == "PRON" or t.lower_ == "you" for t in c.tokens)


def _says_something(c: Any) -> bool:
    """Return False for a clause made only of thanks, praise and names, or about the listener alone.

    "That sounds great, John", "Congratulations on your win", "Talk to you soon": what is said to
    "you" with no first person in it is not a fact about the speaker.
    """
    words = {t.lower_ for t in c.tokens}
    if words & {"you", "your", "yours"} and not words & {"i", "me", "my", "mine", "we", "us", "our", "'m"}:
        return False
    text = " ".join(t.text for t in c.tokens if t.pos_ not in ("PRON", "INTJ", "PUNCT", "PROPN"))
    return bool(content_tokens(text) - _SOCIAL)


def _statement(sent: Any, source: str, st: TurnState) -> list[Candidate]:
    """Return the claims of one declarative sentence, each with its text as said (see `as_said`)."""
    _named(sent, st, before_pronouns=True)
    frame = truth_frame(sent)
    # "It is not true that S" says S is false: S's claims, denied.
    all_heads = heads(sent, frame[0]) if frame else heads(sent)
    skip = {h.i for h, _ in all_heads}
    built: list[claims_mod.Built] = []
    for head, inherited in all_heads:
        if head.pos_ in ("ADP", "SCONJ", "CCONJ", "PART", "INTJ", "DET", "PUNCT") and not any(
                k.dep_ in ("nsubj", "nsubjpass") for k in head.children):
            # A misparse that heads a clause with "Because" or "of" and no subject reads no clause at all
            # (one that gives such a word a subject, "I no longer like coffee", is a verb mistagged).
            continue
        c = analyse(head, inherited, sent, skip)
        if _about_memory(c) or not _says_something(c):
            continue
        for b in claims_mod.claim(c, st.mentions, st.now, source):
            st.mentions.add(b.entity)
            built.append(b)
        if c.cause and any(t.lemma_.lower() in lexicon.words("failure_words") for t in c.cause) and built \
                and not points_back_to(c.cause):
            # "because the migration failed": the failure is a memory of its own, said before the change it caused.
            head = c.cause_head if c.cause_head is not None and c.cause_head.pos_ in ("VERB", "AUX") else None
            said = claims_mod.claim(analyse(head, None, sent, set()), st.mentions, st.now, source) \
                if head is not None else []
            failed = said[0] if said else claims_mod.Built(
                _note(render(c.cause, me=st.mentions.me.display), source, importance=0.6, category="failure",
                      kind="episodic"), st.mentions.me, list(c.cause))
            failed.candidate = replace(failed.candidate, category="failure", kind="episodic", cause=None,
                                       single_valued=False,
                                       meta={**failed.candidate.meta, "from_cause": True, "rule": "failure.cause"})
            built.insert(len(built) - 1, failed)
    _named(sent, st)
    out = as_said([b for b in built if states(b.candidate)], sent, st.mentions.me.display)
    if frame and frame[1]:
        said = render(list(sent), me=st.mentions.me.display)
        out = [replace(c, negated=not c.negated, single_valued=False, text=said,
                       meta={**c.meta, "negated": not c.negated, "denied": True, "marks": sorted(marks(said))})
               for c in out]
    return out


def _seed_mentions(doc: Any, st: TurnState) -> None:
    """Register the entities the previous turn talked about (its subjects and names), oldest first."""
    for sent in doc.sents:
        _named(sent, st)
        for head, inherited in heads(sent):
            subj = next((c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")), None) or inherited
            if subj is not None and subj.pos_ in ("NOUN", "PROPN"):
                seen = entities.entity_of(subj, st.mentions)
                st.mentions.add(seen)
                owned = entities.attribute_of(subj, st.mentions) if head.lemma_ == "be" else None
                if owned is not None and seen.key:
                    # "My mum's number is X" then "it's Y": the pronoun fills the attribute named before.
                    st.mentions.attributes[seen.key] = owned


def _layout(text: str, context: Sequence[Turn], cfg: WriteConfig, user: str | None
            ) -> tuple[list[tuple[Speaker, str]], int, dict[int, str], Turn | None, list[tuple[str, str]]]:
    """Return how a turn is read, before any parse: its prose as (speaker, sentence) chunks, sentences left
    unread, the clauses after a "Label:" heading by chunk, the context turn that seeds its mentions, and
    its code blocks (`without_code`)."""
    text, blocks = without_code(text)
    chunks: list[tuple[Speaker, str]] = []
    left = 0
    for speaker, part in speaker_lines(text, user, context):
        found, more = _chunks(part, cfg.max_sentences - len(chunks))
        chunks += [(speaker, s) for s in found]
        left += more
    seed = next((t for t in reversed(context) if t.role == "user"), None)
    rests = {k: m["text"] for k, (_, s) in enumerate(chunks) if (m := _LABEL.match(s))}
    return chunks, left, rests, seed, blocks


def parsed_texts(text: str, context: Sequence[Turn], cfg: WriteConfig, user: str | None) -> list[str]:
    """Return the texts `read_turn` parses first for this turn, so a batch of turns can be parsed in one pass."""
    chunks, _, rests, seed, _ = _layout(text, context, cfg, user)
    return [s for _, s in chunks] + list(rests.values()) + ([seed.text[:MAX_SENTENCE_CHARS]] if seed else [])


def read_ahead(texts: Sequence[str]) -> None:
    """Parse `texts` (from `parsed_texts` of the turns about to be read) in one batch; the parser keeps them.

    Reading the turns afterwards finds their parses ready (`parser.parse` keeps the last
    RECENT_SIZE texts), so callers read ahead at most AHEAD texts at a time.
    """
    parse(texts)


def read_turn(text: str, context: Sequence[Turn], now: datetime | None, cfg: WriteConfig, *,
              commands: bool = True, user: str | None = None) -> tuple[list[Candidate], int]:
    """Return (claims of `text`, sentences left unread); `commands=False` for text quoted from another turn."""
    st = TurnState(now, list(context), cfg, commands=commands and not INJECTION.search(text))
    chunks, left, rests, seed, blocks = _layout(text, st.context, cfg, user)
    texts = [s for _, s in chunks]
    docs = parse(texts + list(rests.values()) + ([seed.text[:MAX_SENTENCE_CHARS]] if seed is not None else []))
    if seed is not None:
        # "His sister ..." may point at someone named in the previous turn of the session.
        _seed_mentions(docs.pop(), st)
    keep, lessons = set(), set()
    for k, doc in zip(rests, docs[len(texts):], strict=True):
        if not _heading(docs[k], doc):
            continue
        if docs[k][0].lemma_.lower() in lexicon.words("retention_verbs"):
            # "Note to self: X" / "Remember: X" ask to keep X, as "remember that X" does.
            keep.add(k)
        if LESSON.search(chunks[k][1][:len(chunks[k][1]) - len(rests[k])]):
            # "Lesson learned: X": X is a lesson, whatever its own clause reads as.
            lessons.add(k)
        docs[k] = doc  # the clause is read alone; the chunk stays as said (the claims' source text)
    del docs[len(texts):]
    for k, ((speaker, raw), doc) in enumerate(zip(chunks, docs, strict=True)):
        if INJECTION.search(raw):
            st.said.append([_note(raw, raw, suspicious=True)])
            continue
        emphasis, hedge = bool(_EMPHASIS.search(raw)), bool(_HEDGE.search(raw))
        st.mentions.me = speaker.entity
        for sent in doc.sents:
            said = _sentence(sent, raw, st, speaker, emphasis, hedge)
            if k in lessons:
                said = [replace(c, category="lesson", kind="procedural", single_valued=False,
                                importance=max(c.importance, BASE_IMPORTANCE["lesson"])) for c in said]
            if speaker.key != USER_SPEAKER.key:
                said = [replace(c, meta={**c.meta, "said_by": speaker.display}) for c in said]
            said = [replace(c, meta={**c.meta, CONTEXT_KEY: said_with(chunks, k)}) for c in said]
            st.said.append([finalise(c, st.cfg, emphasis=False, hedge=False, pinned=True) for c in said]
                           if k in keep else said)
    st.said = [[labelled(c) for c in cands] for cands in attach_fragments(st.said)]
    st.said += [[_code_note(lang, code)] for lang, code in blocks]
    return [c for said in st.said for c in said], left


def _sentence(sent: Any, raw: str, st: TurnState, speaker: Speaker, emphasis: bool, hedge: bool) -> list[Candidate]:
    """Return the claims of one parsed sentence: a command, a condition on the last statement, claims, or a note."""
    text = sent.text.strip()
    if not text or chitchat(text.rstrip(" .!?")):
        return []
    command = command_verb(sent) if speaker.key == "user" else None
    if command is not None:
        kind, verb = command
        if kind == "forget":
            if not st.commands:
                return []
            return forget_request(*target(verb), raw, st.mentions, st.now) or _forget_that(raw, st)
        tgt, _ = target(verb)
        pointer = not tgt or (len(tgt) == 1 and tgt[0].lower_ in POINTER)
        if pointer:
            found = _from_context(st, raw) if not any(st.said) else [c for c in st.said[-1]]
        else:
            found = _content_of(tgt, raw, st) or [_note(sent, raw, kind="semantic", me=speaker)]
        # What the person asked to keep is kept whole: a short request ("Remember to buy milk.") as said.
        whole = render(list(sent), me=speaker.display)
        found = [replace(c, text=c.text if content_words(parse([c.text])[0]) >= 3 or c.meta.get("suspicious") else whole,
                         meta={k: v for k, v in c.meta.items() if k != "fragment"}) for c in found]
        return [finalise(c, st.cfg, emphasis=emphasis, hedge=False, pinned=not c.meta.get("suspicious"))
                for c in found]
    if is_question(sent):
        return []
    root = _condition(sent)
    if root is not None:
        # "...; if the team lead changes, this would change": qualifies the statement before it.
        for k in range(len(st.said) - 1, -1, -1):
            if st.said[k]:
                st.said[k] = [replace(c, meta={**c.meta, "depends_on": root}) for c in st.said[k]]
                break
        main = [t for t in sent if t.lemma_ == "change" and t.dep_ == "ROOT"]
        if main or len(sent) < 14:
            return []
    found = [finalise(c, st.cfg, emphasis=emphasis, hedge=hedge or c.meta.get("hedged", False), pinned=False)
             for c in _statement(sent, raw, st)]
    if found and speaker.key == "user" and asks_the_assistant(sent):
        # "Keep replies brief, bullet points suit me best": a rule for the assistant, kept whole as one.
        found = [replace(c, category="instruction", kind="procedural", importance=max(
            c.importance, BASE_IMPORTANCE["instruction"])) if c.category in ("fact", "note", "event") else c
            for c in found]
    if found and all(c.meta.get("fragment") for c in found) and content_words(sent) >= 3 and \
            _informative(text, to_a_person=speaker.key != "user"):
        # "It was a mix of drama and romance.": it leans on what came before, but says enough (a verb, three content
        # words) to be kept as said when the turn has nothing to join it to (`said.attach_fragments`).
        found = [replace(c, meta={**c.meta, "informative": True}) for c in found]
    if not found and _informative(text, to_a_person=speaker.key != "user"):
        note = _note(sent, raw, category="event" if sent.root.tag_ == "VBD" else "note", me=speaker)
        if leans_on_context(sent):
            note = leaning(note, sent)
        elif not sentence_like(sent):
            note = replace(note, meta={**note.meta, "fragment": SHORT})
        found = [finalise(note, st.cfg, emphasis=emphasis, hedge=hedge, pinned=False)]
    elif not found and not chitchat(text) and any(t.like_num or any(ch.isdigit() for ch in t.text) for t in sent):
        # A short piece that says a number ("... at the library 8-12 July", split off by the parser) is evidence
        # beside the statement it follows: joined to it (`said.attach_fragments`), never dropped unread.
        note = leaning(_note(sent, raw, me=speaker), sent)
        found = [finalise(note, st.cfg, emphasis=emphasis, hedge=hedge, pinned=False)]
    return found


def _content_of(tgt: list[Any], raw: str, st: TurnState) -> list[Candidate]:
    """Return the claims of the content of a remember request ("remember that X" -> X's claims)."""
    tgt = [t for t in tgt if not (t.dep_ == "mark" and t.lower_ in ("that", "whether"))]
    if not tgt:
        return []
    doc = parse([render(tgt, third=False)])[0]
    out: list[Candidate] = []
    for sent in doc.sents:
        out += _statement(sent, raw, st)
    return out


def extract_offline(text: str, context: Sequence[Turn] = (), now: datetime | None = None,
                    cfg: WriteConfig = WriteConfig(), *, user: str | None = None) -> list[Candidate]:
    """Return the claims the offline parser finds in `text`, sentence by sentence (see the module docstring).

    `context` is the session's recent turns, oldest first (for "save this" / "forget that");
    `now` resolves relative dates (None keeps them as phrases).
    """
    return read_turn(text, context, now, cfg, commands=True, user=user)[0]


def allows_forget(text: str) -> bool:
    """Return True when the turn holds an explicit forget request and nothing that looks like an injection."""
    if INJECTION.search(text):
        return False
    return any(command_verb(sent) is not None and command_verb(sent)[0] == "forget"
               for doc in parse([s for s in sentences(text)]) for sent in doc.sents)
