"""Forget requests: exactly which memories a request names, and nothing else.

    forget_actions(row, base)    # the forget actions of one forget command, or one "ignore" saying why

A request names memories by entity and slot (exact before prefix before qualified before similar
before the slot's family), by marks (every memory holding the names or numbers the request
says: "the Calloway interview"), by all of its content words, or by cosine >= the duplicate
threshold. "old" / "previous" spare the newest match; a request for everything, or for
everything about the user, is refused as too broad. When nothing matches, the nearest memory is
taken only when it is clearly the nearest (`NEAREST_FLOOR`, `NEAREST_MARGIN`); else the action is
"ignore" with reason "nothing matched" and the nearest memories as evidence, never a guess.
"""

from __future__ import annotations

from typing import Any

from . import lexicon, match
from .model import Action, Candidate, MemoryRecord
from .normalise import content_tokens, marks, stem

# Words of a forget request that name no memory: "user" and "team" are in every third-person memory text.
COMMAND_WORDS = frozenset(stem(w) for w in ("forget", "delete", "erase", "remove", "wipe", "said", "told", "about",
                                             "everything", "anything", "all", "memory", "memories", "user", "team",
                                             "note", "notes", "bit", "part", "detail", "information", "info"))


def names(c: Candidate, m: Candidate | MemoryRecord, sim: float = 0.0, threshold: float = 2.0,
           slot_sim: float = 0.0, slot_threshold: float = 2.0, aliases: dict[str, str] | None = None) -> str | None:
    """Return how the forget command `c` names `m` ("entity+slot", "marks", "terms", ...), or None.

    `aliases` maps a stored name to the entity it names ("biscuit" -> "user's dog", from "my dog's
    name is Biscuit"), so that "forget everything about my dog" reaches what was said of Biscuit.
    """
    spec = c.meta.get("forget") or {}
    entity = match.entity_match(c.subject, m.subject) if c.subject else None
    if entity is None and c.subject and aliases and aliases.get(match.key(m.subject) or "") == match.key(c.subject):
        entity = "alias"
    about = spec.get("about")
    if about and m.subject and (match.entity_match(about, m.subject) == "same" or (
            aliases and aliases.get(match.key(m.subject) or "") == match.key(about))):
        return "entity (everything about it)"
    if c.attribute and (entity or not c.subject):
        level = match.slot_match(c.attribute, m.attribute, slot_sim, slot_threshold)
        if level is None and m.attribute in lexicon.slot_families().get(c.attribute, ()):
            level = "family"
        if level and (not c.value or match.holds(c.value, m.value, m.text)):
            return f"entity+slot ({level})"
    if c.value and (entity or not c.subject) and match.holds(c.value, m.value, m.text):
        return "value"
    wanted = frozenset(spec.get("marks") or c.meta.get("marks") or ())
    if c.meta.get("rule") in ("command.forget.same_turn", "command.forget.context"):
        # "X. Please delete that": a statement withdrawn as a whole names the memories holding its marks.
        wanted = frozenset(w for w in marks(c.text) if any(ch.isdigit() for ch in w) or "@" in w or "." in w)
    said = {w.strip(".,;:!?'\"()").lower().removesuffix("'s") for w in m.text.split()} | marks(m.text)
    if wanted and wanted <= said:
        return "marks"
    words = content_tokens(" ".join(filter(None, [m.text, m.subject, m.value, (m.attribute or "").replace("_", " ")])))
    if c.subject and c.subject not in ("user", "team") and not c.attribute and entity and (
            entity == "same" or _head(c.subject) == _head(m.subject)):
        # "forget my dog" reaches what was said of the dog; "forget the campsite gate code" names a code, so the
        # campsite's other memories are no part of it (the head of a noun phrase is its last word).
        return "entity"
    terms = _terms(c)
    # A plain noun phrase ("the locker code") is the user's own thing said without "my": its words name it.
    if terms and terms <= words and (not c.subject or c.subject in ("user", "team") or entity or wanted
                                     or match.soft(c) or _qualifies(c)):
        return "terms"
    if sim >= threshold and (not c.subject or entity):
        return "similarity"
    return None


def _terms(c: Candidate) -> set[str]:
    """Return the words a forget request names its memories by: its terms, else its content words."""
    return (set((c.meta.get("forget") or {}).get("terms") or ()) or content_tokens(c.text)) - COMMAND_WORDS


# A request that names nothing by its words takes the nearest memory only when it is this close and this far
# ahead of the next one; otherwise nothing goes and the nearest are listed.
NEAREST_FLOOR = 0.5
NEAREST_MARGIN = 0.25


def _clearly_nearest(sims: list[float]) -> bool:
    """Return True when the first of the best cosines is close enough and clearly ahead of the second."""
    return sims[0] >= NEAREST_FLOOR and sims[0] - (sims[1] if len(sims) > 1 else 0.0) >= NEAREST_MARGIN


def _qualifies(c: Candidate) -> bool:
    """Return True when the request's subject is a noun said just before its attribute ("the wifi password"): a
    compound's modifier says which password, it names no owner, so the words of the whole name the memory."""
    phrase = str(c.meta.get("slot_phrase") or c.attribute or "").replace("_", " ")
    key = match.key(c.subject) or ""
    return bool(phrase) and "'s" not in key and f"{key} {phrase}" in (c.meta.get("source_text") or c.text).casefold()


def _head(subject: str | None) -> str:
    """Return the head noun of an entity key, stemmed: its last word ("user's campsite gate code" -> "code")."""
    words = (match.key(subject) or "").replace("'s ", " ").split()
    return stem(words[-1]) if words else ""


def _by_value(named: list[tuple[int, str]], a: list[MemoryRecord], terms: set[str]) -> list[tuple[int, str]]:
    """Return `named` with, of the claims of one sentence (one text, one turn), only those whose value the
    request names ("forget the mandolin" of "I play the oboe and the mandolin"), when any: the others go as
    said in the same words, and what they said besides it is kept (`corrections.unsaid`)."""
    groups: dict[tuple[str, str | None], list[tuple[int, str]]] = {}
    for f in named:
        groups.setdefault((a[f[0]].text, a[f[0]].turn_id), []).append(f)
    out = []
    for group in groups.values():
        valued = [f for f in group if terms & content_tokens(a[f[0]].value)] if len(group) > 1 else group
        out += valued or group
    return out


def forget_actions(r: Any, base: dict[str, Any]) -> list[Action]:
    """Return the forget actions of one forget command, or one ignore action saying why."""
    c, a, cfg = r.c, r.active, r.cfg
    spec = c.meta.get("forget") or {}
    broad = spec.get("scope") == "all" or (
        match.key(c.subject) in ("user", "team") or spec.get("scope") in ("user", "team")) and not (
        c.attribute or c.value or spec.get("terms") or spec.get("marks") or c.meta.get("marks"))
    if broad:
        return [Action("ignore", c, reason="forget request too broad: name what to forget, or use "
                       "Memory.forget(memory_id)", evidence={**base, "scope": spec.get("scope")})]
    named = [(j, why) for j in range(len(a)) if r.free(j)
             for why in [names(c, a[j], float(r.sims[j]), cfg.duplicate_threshold, float(r.slot_sims[j]),
                                cfg.slot_threshold, r.names)] if why]
    # A slot named exactly takes precedence over slots that only contain it, which beat similar ones.
    for level in ("exact", "prefix", "derived", "qualified", "similar", "family"):
        tier = [f for f in named if f[1] == f"entity+slot ({level})"]
        if level == "qualified" and len({a[j].attribute for j, _ in tier}) > 1:
            # "forget my address" with a home and an office address stored: unsure, so nothing is taken.
            named = [f for f in named if not f[1].startswith("entity+slot")]
            break
        if tier:
            # A named slot is precise: loose word, name and similarity matches no longer count, named values do.
            named = tier + [f for f in named if f[1] == "value"]
            break
    named = _by_value(named, a, _terms(c))
    qualifier = spec.get("qualifier")
    if qualifier in ("old", "previous", "former", "current", "new") and named:
        newest = max(named, key=lambda f: (a[f[0]].created_at is not None, a[f[0]].created_at or 0, f[0]))
        named = [newest] if qualifier in ("current", "new") else [f for f in named if f != newest]
        if not named:
            return [Action("ignore", c, reason="nothing to forget: only the current value matches 'old'",
                           evidence={**base, "kept": a[newest[0]].id, "qualifier": qualifier})]
    if not named:
        near = sorted((j for j in range(len(a)) if r.free(j)), key=lambda j: -float(r.sims[j]))[:3]
        if near and _clearly_nearest([float(r.sims[j]) for j in near]):
            # "I'd rather you didn't remember my locker number" with "my locker code is 5521" stored: no word or
            # slot names it, but one memory is far closer than any other.
            named = [(near[0], "nearest (clearly)")]
    if not named:
        return [Action("ignore", c, reason="nothing matched: nothing forgotten", evidence={
            **base, "max_sim": float(r.sims.max()) if r.sims.size else 0.0,
            "nearest": [{"memory_id": a[j].id, "text": a[j].text, "sim": round(float(r.sims[j]), 3)} for j in near]})]
    r.taken.update(a[j].id for j, _ in named)
    what = c.meta.get("source_text") or c.text
    return [Action("forget", c, target_id=a[j].id, reason=f"user asked to forget: {what}",
                   evidence={**base, "match": why, "sim": float(r.sims[j])}) for j, why in named]
