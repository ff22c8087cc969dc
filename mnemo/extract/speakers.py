"""Who says each part of a turn: the user, or the named speakers of a transcript.

    speaker_lines(text, user, context)   # [(Speaker("owen", "Owen"), "My daughter starts school in April.")]

A turn of "Name: text" lines is a transcript (timestamps, bullets and quote marks before a name
are tolerated, and a chat handle may be lowercase: "elise: ..."); so is a turn said in a session whose turns are labelled. A lone label names a
speaker when it looks like a name and its line speaks in the first person. The user's own lines
("User:", "Me:", the user's name) are the user's; the assistant's lines are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .. import lexicon
from ..model import Turn
from ..normalise import STOPWORDS, canonical_subject
from . import entities

# A transcript line: "Name: text", tolerating a bullet, a timestamp ("[09:03]", "09:03 -") and quote marks before
# the name. The text after the colon starts with a non-space.
_SPEAKER = re.compile(r"^\s*(?:[-*\u2022>]+\s*)?(?:[\[(]?\d{1,2}:\d{2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?[\])]?\s*[-\u2013]?\s*)?"
                      r"[\"'\u201c\u2018]?(?P<who>[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}|[a-z][\w.-]*)[\"'\u201d\u2019]?\s*:\s+"
                      r"(?P<text>\S.*)$")


# A line that opens by speaking to someone by name: a greeting or thanks, then the name set off by a comma or ending
# its sentence ("Hey Mel!", "Thanks, Nate!", "Hi Sam, ..."). The greeting words are English's salutations.
_VOCATIVE = re.compile(r"^\s*(?i:hey|hi|hiya|hello|thanks|thank you|cheers|bye|morning|evening|congrats|congratulations)"
                       r",?\s+([A-Z][a-z]+)\s*[!,.?]")


_ASSISTANT = frozenset({"assistant", "ai", "bot", "agent", "system", "mnemo", "model", "gpt", "claude", "qwen"})


_USER_SPEAKERS = frozenset({"user", "me", "human", "customer", "client", "you"})


@dataclass(frozen=True)
class Speaker:
    """Who says a part of a turn: the user (key "user"), or a named person of a transcript."""

    key: str
    display: str

    @property
    def entity(self) -> entities.Entity:
        return entities.USER if self.key == "user" else entities.Entity(self.key, self.display, True)


USER_SPEAKER = Speaker("user", "the user")


def _label(line: str) -> re.Match | None:
    """Return the match of a "Name: text" line; a lowercase label is a chat handle ("elise:", "dana:") unless it
    is a note heading ("note:", "update:") or a function word."""
    m = _SPEAKER.match(line)
    if m is None or m["who"][:1].isupper():
        return m
    who = m["who"].lower()
    return None if who in lexicon.words("heading_labels") or who in STOPWORDS else m


def _labelled(text: str) -> list[re.Match | None]:
    return [_label(ln) for ln in text.splitlines() if ln.strip()]


def _names_speaker(label: str, user: str | None, line: str = "") -> bool:
    """Return True when a lone "Label:" before a line names who speaks rather than heading a note.

    A speaker's label is a name: one to three capitalised words, none a function word or a note
    heading (`assets/words/heading_labels.txt`: "Correction:", "Update:", "Lesson learned:"), before
    a line in which someone speaks of themselves (a first-person word): "Allergies: peanuts and
    sesame." is a label and its list.
    """
    low = label.lower()
    if low in _ASSISTANT:
        # A lone "System:" or "Assistant:" line is what an injection looks like: it stays the user's words.
        return False
    if low in _USER_SPEAKERS or (user and low == user.lower()):
        return True
    words = label.split()
    first = re.search(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|we|us|our)\b", line, re.I)
    # Or it speaks to someone by name ("Joanna: Thanks, Nate! It's a mix of drama and romance."): two people talk.
    spoken_to = any(m.group(1) != label for m in _VOCATIVE.finditer(line))  # opens the line: one match at most
    return (first is not None or spoken_to) and all(w[:1].isupper() for w in words) and not any(
        w.lower() in lexicon.words("heading_labels") or w.lower() in STOPWORDS for w in words)


def _speaker(label: str, user: str | None) -> Speaker | None:
    """Return the speaker a label names (None for the assistant, whose lines say nothing of the user)."""
    low = label.strip().lower()
    if low in _ASSISTANT:
        return None
    if low in _USER_SPEAKERS or (user and low == user.lower()):
        return USER_SPEAKER
    return Speaker(canonical_subject(label.strip()), label.strip())


def speaker_lines(text: str, user: str | None, context: Sequence[Turn] = ()) -> list[tuple[Speaker, str]]:
    """Return (speaker, text) parts of a turn: the user's own, unless its lines say who speaks ("Name: ...").

    A turn of two or more labelled lines, or one said in a session whose turns are labelled, is a
    transcript: each label names its line's speaker, and unlabelled lines continue the last one.
    A lone label names a speaker when it looks like a name (`_names_speaker`). The user's lines
    ("User:", "Me:", the user's own name) are the user's; the assistant's lines are dropped.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    labelled = [_label(ln) for ln in lines]
    if not any(labelled):
        return [(USER_SPEAKER, text)]
    transcript = sum(m is not None for m in labelled) >= 2 or any(
        any(_labelled(t.text)) for t in context if t.role == "user")
    if not transcript and not (labelled[0] is not None and _names_speaker(labelled[0]["who"], user,
                                                                          labelled[0]["text"])):
        return [(USER_SPEAKER, text)]
    out: list[tuple[Speaker, str]] = []
    who: Speaker | None = USER_SPEAKER
    for line, m in zip(lines, labelled, strict=True):
        if m is not None and (transcript or _names_speaker(m["who"], user, m["text"])):
            who = _speaker(m["who"], user)
            line = m["text"]
        if who is not None:
            out.append((who, line))
    return out
