"""Reconciliation: decide what each extracted candidate does to the active memories (a pure plan).

`plan_writes(candidates, active, sims, cfg, judge)` returns one Action per candidate
(a forget command may return one per target), in candidate order. Every action
carries a reason and evidence: evidence["candidate_index"], the best cosine, the
thresholds, what matched, and every judge verdict asked for (with which judge answered).

Rules, first that applies wins (subject = the candidate's canonical subject; only
memories about that same subject are ever retired, an unrelated memory never is):

1. same turn: when two candidates state the same (subject, attribute), the last
   wins; an earlier one is ignored if the later one is single-valued, or states the
   same value, or the opposite polarity, or retracts / replaces its value (negation,
   old value). A forget in the turn cancels the earlier candidates it names. A
   candidate that corroborates or duplicates a memory a later candidate retires is
   added instead.
2. same (subject, attribute, value, polarity) as an active memory -> corroborate.
3. old value stated ("moved from 21 to 35 days", "switched from X to Y") and an active
   memory of that subject holds it -> supersede that memory.
4. negated candidate ("I no longer like X") and an active positive memory of that
   subject holds X, in the same attribute or the preference family -> supersede with
   reason "retracted". The negation itself becomes the successor memory (op
   "supersede", not "forget"), so the tombstone points at a memory saying why it ended.
   With nothing to retract, the negation is added as a fact ("does not like X").
5. single-valued attribute, different value (or opposite polarity) -> supersede; a
   positive candidate re-affirming a negated memory supersedes it too.
6. cosine >= duplicate_threshold with no structural conflict (other subject, other
   value of the same attribute, opposite polarity, the old value of a change) -> duplicate.
7. cosine in [arbitration_low, duplicate_threshold) with a same-subject memory -> ask
   the judge (at most MAX_JUDGED memories, nearest first); a contradiction with
   score >= supersede_threshold supersedes. A judge error fails closed: judging stops,
   nothing is retired and the candidate is added as novel, with the error in evidence.
8. otherwise -> add (novel).

Failures and lessons are never superseded, and never supersede anything.
Multi-valued attributes ("I have a dog", "I also have a cat") keep every value.
A candidate under min_importance is ignored. Polarity is Candidate.negated or
meta["negated"] (the flag a stored memory keeps). A pinned candidate ("remember
that ...") that corroborates or duplicates sets evidence["pin"] = True.

`because` links: a candidate with a cause ("because the migration failed") is linked
to the failure it names. The failure extracted from that cause (meta["from_cause"])
is a duplicate of an active failure memory whose words contain it; otherwise it is
added. If that same-turn failure is added, the caused action gets
evidence["because_candidate"] = its index in `candidates` (the store links the two
new memories); if it duplicates or corroborates a stored failure, or the cause
matches an active failure memory, Action.because_id is that memory's id.

Forget commands target exactly the memories they name: by subject, attribute (then
its aliases) and value, by the terms of the request ("forget what I said about Tom"
-> memories about or mentioning Tom), or by cosine >= duplicate_threshold. "old" /
"previous" spare the newest match (and forget nothing when only one matches); a
request for everything, or for everything about the user or the team with no
attribute or value, is refused ("too broad"); no match -> op "ignore", reason
"nothing to forget".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from .config import WriteConfig
from .errors import InvalidInput, LLMResponseError
from .model import Action, Candidate, MemoryRecord
from .normalise import content_tokens, overlap, same_value, stem, value_within

OFFLINE_JUDGE = "offline-heuristic-v1"
MAX_JUDGED = 3  # same-subject memories in the arbitration band shown to the judge, nearest first
NEVER_RETIRED = frozenset({"failure", "lesson"})
PREFERENCE_FAMILY = frozenset({"likes", "preference", "uses", "drinks", "eats", "plays", "listens_to", "watches",
                               "reads", "drives", "rides", "cooks", "wears", "codes_in", "writes_in", "programs_in",
                               "diet", "habit"})
# Tried only when the named attribute itself matches nothing ("forget my address" with only a city stored).
FORGET_ALIASES = {"address": ("city",), "city": ("address",), "job_title": ("employer",)}
CAUSE_OVERLAP = 0.6  # share of the cause's words a failure must contain to be its cause
_IDENTIFIER = re.compile(r"\d|[./@]")  # a token that is a value of its own: digits, a host, a path, an address
# Words of a forget request that name no memory: "user" and "team" are in every third-person memory text.
_COMMAND_WORDS = frozenset(stem(w) for w in ("forget", "delete", "erase", "remove", "wipe", "said", "told", "about",
                                             "everything", "anything", "all", "memory", "memories", "user", "team"))
_CHANGE_CUE = ("now", "no longer", "anymore", "any more", "instead", "switched", "changed", "moved", "actually",
               "correction", "updated", "not anymore", "from now on")
_NEGATION_CUE = ("not", "no longer", "n't", "never", "anymore")

Judge = Callable[[Candidate, MemoryRecord], dict]


def _key(subject: str | None) -> str | None:
    return subject.strip().casefold() if subject else None


def _negated(item: Candidate | MemoryRecord) -> bool:
    return bool(getattr(item, "negated", False) or item.meta.get("negated"))


def _family(attribute: str | None) -> bool:
    return bool(attribute) and (attribute in PREFERENCE_FAMILY or attribute.startswith("preference"))


def _same_attribute(a: str | None, b: str | None) -> bool:
    """Return True for the same attribute, or two attributes of the preference family."""
    return bool(a and b) and (a == b or (_family(a) and _family(b)))


def _holds(value: str | None, memory_value: str | None) -> bool:
    return same_value(value, memory_value) or value_within(value, memory_value)


def _conflict(c: Candidate, m: MemoryRecord) -> str | None:
    """Return why `c` cannot be a duplicate of `m` (other subject, other value, polarity), or None."""
    if c.subject and m.subject and _key(c.subject) != _key(m.subject):
        return "different subject"
    if c.attribute and m.attribute and c.attribute != m.attribute:
        return "different attribute"
    if c.attribute and c.attribute == m.attribute and c.value and m.value and not same_value(c.value, m.value):
        return "different value of the same attribute"
    if _negated(c) != _negated(m):
        return "opposite polarity"
    if c.old_value and _holds(c.old_value, m.value):
        return "holds the value this candidate replaces"
    return None


def _same_turn(candidates: list[Candidate]) -> dict[int, str]:
    """Return {index: reason} for candidates overridden later in the same turn (the last wins)."""
    out: dict[int, str] = {}
    for i, a in enumerate(candidates):
        if a.command == "forget" or not (a.subject and a.attribute):
            continue
        for k in range(i + 1, len(candidates)):
            b = candidates[k]
            if b.command == "forget":
                if _forget_match(b, a) is not None:
                    out[i] = f"forgotten later in the same turn (candidate {k})"
                    break
                continue
            if _key(b.subject) != _key(a.subject) or not _same_attribute(a.attribute, b.attribute):
                continue
            retracts = (b.old_value and _holds(b.old_value, a.value) and not _negated(a)) or (
                _negated(b) and not _negated(a) and _holds(b.value, a.value))
            if b.attribute != a.attribute and not retracts:
                continue
            if same_value(a.value, b.value) and _negated(a) == _negated(b):
                out[i] = f"repeated later in the same turn (candidate {k})"
                break
            if retracts or (b.single_valued and not _negated(b)) or (
                    same_value(a.value, b.value) and _negated(a) != _negated(b)):
                out[i] = f"overridden later in the same turn (candidate {k})"
                break
    return out


def _forget_match(c: Candidate, m: Candidate | MemoryRecord, sim: float = 0.0, threshold: float = 2.0,
                  exact_attribute: bool = True) -> str | None:
    """Return how the forget command `c` names `m` ("subject/attribute/value", "terms", ...), or None."""
    spec = c.meta.get("forget") or {}
    subj, msubj = _key(c.subject), _key(m.subject)
    if c.attribute or c.value:
        if subj and msubj != subj:
            return None
        names = (c.attribute,) if exact_attribute else FORGET_ALIASES.get(c.attribute or "", ())
        if c.attribute and m.attribute not in names:
            return None
        if c.value and not (_holds(c.value, m.value) or value_within(c.value, m.text)):
            return None
        return "subject/attribute/value"
    words = content_tokens(" ".join(filter(None, [m.text, m.subject, m.value, (m.attribute or "").replace("_", " ")])))
    if subj and subj not in ("user", "team"):
        if msubj == subj:
            return "subject"
        if content_tokens(subj) and content_tokens(subj) <= words:
            return "mentions the subject"
        return None
    terms = (set(spec.get("terms") or ()) or content_tokens(c.text)) - _COMMAND_WORDS
    if terms and terms <= words and (not subj or msubj == subj):
        return "terms"
    # "X. Please delete that": a statement withdrawn as a whole also names the memories holding its
    # identifiers (a URL, a number, an id), however they were worded when stored.
    if c.meta.get("rule") in ("command.forget.same_turn", "command.forget.context") and not spec.get("terms"):
        marks = {w for w in terms if _IDENTIFIER.search(w)}
        if marks and marks <= words and (not subj or msubj == subj):
            return "identifier"
    if sim >= threshold and (not subj or msubj == subj):
        return "similarity"
    return None


def _forget(i: int, c: Candidate, active: list[MemoryRecord], row: np.ndarray, cfg: WriteConfig,
            taken: set[str], base: dict[str, Any]) -> list[Action]:
    """Return the forget actions of one forget command, or one ignore action."""
    spec = c.meta.get("forget") or {}
    # "Forget everything about me" is too broad; "forget my tea preference" names terms and is not.
    broad = spec.get("scope") == "all" or (
        _key(c.subject) in ("user", "team") or spec.get("scope") in ("user", "team")) and not (
        c.attribute or c.value or spec.get("terms"))
    if broad:
        return [Action("ignore", c, reason="forget request too broad: name what to forget, or use "
                       "Memory.forget(memory_id)", evidence={**base, "scope": spec.get("scope")})]
    found: list[tuple[int, str]] = []
    for exact in (True, False):
        found = [(j, why) for j, m in enumerate(active) if m.id not in taken
                 for why in [_forget_match(c, m, float(row[j]), cfg.duplicate_threshold, exact)] if why]
        if found or not c.attribute:
            break
    qualifier = spec.get("qualifier")
    if qualifier in ("old", "previous", "former", "current", "new") and found:
        newest = max(found, key=lambda f: (active[f[0]].created_at is not None, active[f[0]].created_at or 0, f[0]))
        found = [newest] if qualifier in ("current", "new") else [f for f in found if f != newest]
        if not found:
            return [Action("ignore", c, reason="nothing to forget: only the current value matches 'old'",
                           evidence={**base, "kept": active[newest[0]].id, "qualifier": qualifier})]
    if not found:
        return [Action("ignore", c, reason="nothing to forget", evidence={**base, "max_sim": _top(row)})]
    taken.update(active[j].id for j, _ in found)
    what = c.meta.get("source_text") or c.text
    return [Action("forget", c, target_id=active[j].id, reason=f"user asked to forget: {what}",
                   evidence={**base, "match": why, "sim": float(row[j])}) for j, why in found]


def _top(row: np.ndarray) -> float:
    return float(row.max()) if row.size else 0.0


def _best(js: list[int], row: np.ndarray, active: list[MemoryRecord]) -> int:
    """Return the index among `js` with the highest cosine, then the newest memory, then the first."""
    return max(js, key=lambda j: (float(row[j]), active[j].created_at is not None, active[j].created_at or 0, -j))


def _decide(c: Candidate, active: list[MemoryRecord], row: np.ndarray, cfg: WriteConfig, judge: Judge,
            taken: set[str], base: dict[str, Any]) -> Action:
    """Return the action for one non-command candidate (rules 2-8 of the module docstring)."""
    subj = _key(c.subject)
    same = [j for j, m in enumerate(active) if subj and _key(m.subject) == subj and m.id not in taken]
    neg = _negated(c)

    def act(op: str, j: int | None, reason: str, **more: Any) -> Action:
        ev = {**base, **more}
        if j is not None:
            ev["target_sim"] = float(row[j])
        if c.pinned and op in ("corroborate", "duplicate"):
            # The user asked to remember something already stored: the store may pin the match.
            ev["pin"] = True
        return Action(op, c, target_id=active[j].id if j is not None else None, reason=reason, evidence=ev)

    exact = [j for j in same if c.attribute and active[j].attribute == c.attribute
             and same_value(c.value, active[j].value) and _negated(active[j]) == neg]
    if exact:
        return act("corroborate", _best(exact, row, active), "same subject, attribute and value",
                   match="subject+attribute+value")
    can_retire = c.category not in NEVER_RETIRED
    retirable = [j for j in same if active[j].category not in NEVER_RETIRED] if can_retire else []
    if c.old_value:
        hits = [j for j in retirable if not _negated(active[j]) and _holds(c.old_value, active[j].value)
                and (_same_attribute(c.attribute, active[j].attribute) or not active[j].attribute)]
        if hits:
            j = _best(hits, row, active)
            return act("supersede", j, f"{c.attribute or 'value'} changed from {active[j].value} to {c.value}",
                       match="old value")
    if neg:
        hits = [j for j in retirable if not _negated(active[j]) and _same_attribute(c.attribute, active[j].attribute)
                and _holds(c.value, active[j].value)]
        if hits:
            return act("supersede", _best(hits, row, active), f"retracted: {c.text}", match="negation")
    if c.attribute and can_retire:
        if c.single_valued and not neg:
            hits = [j for j in retirable if active[j].attribute == c.attribute
                    and (not same_value(c.value, active[j].value) or _negated(active[j]))]
            if hits:
                j = _best(hits, row, active)
                return act("supersede", j, f"single-valued {c.attribute} changed from {active[j].value} to {c.value}",
                           match="single-valued attribute")
        if not neg:
            hits = [j for j in retirable if _negated(active[j]) and _same_attribute(c.attribute, active[j].attribute)
                    and same_value(c.value, active[j].value)]
            if hits:
                return act("supersede", _best(hits, row, active), f"re-affirmed: {c.text}", match="re-affirmation")
    if c.category == "failure" and c.meta.get("from_cause"):
        known = [(overlap(c.value or c.text, m.text), j) for j, m in enumerate(active)
                 if m.category == "failure" and m.id not in taken]
        score, j = max(known, default=(0.0, -1))
        if score >= CAUSE_OVERLAP:
            return act("duplicate", j, "the stated cause is a failure already stored", match="cause",
                       overlap=round(score, 3))
    dups = [j for j in range(len(active)) if float(row[j]) >= cfg.duplicate_threshold and active[j].id not in taken
            and _conflict(c, active[j]) is None]
    if dups:
        return act("duplicate", _best(dups, row, active), f"cosine >= duplicate threshold {cfg.duplicate_threshold}",
                   match="cosine")
    band = [j for j in retirable if cfg.arbitration_low <= float(row[j]) < cfg.duplicate_threshold
            and not (c.attribute and c.attribute == active[j].attribute and not (c.single_valued and active[j].single_valued))]
    verdicts: list[dict[str, Any]] = []
    for j in sorted(band, key=lambda j: -float(row[j]))[:MAX_JUDGED]:
        verdict = dict(judge(c, active[j]))
        verdicts.append({**verdict, "memory_id": active[j].id, "sim": float(row[j])})
        if verdict.get("error"):
            return act("add", None, "judge error: nothing retired, added as novel (fails closed)", judge=verdicts,
                       max_sim=_top(row))
        if verdict.get("contradicts") and float(verdict.get("score", 0.0)) >= cfg.supersede_threshold:
            return act("supersede", j, f"judge: contradiction ({verdict.get('why', '')})", judge=verdicts,
                       match="judge")
    reason = "judged not a contradiction" if verdicts else "novel"
    return act("add", None, reason, judge=verdicts, max_sim=_top(row)) if verdicts else act(
        "add", None, reason, max_sim=_top(row))


def _link_causes(plan: list[Action], candidates: list[Candidate], active: list[MemoryRecord]) -> list[Action]:
    """Return the plan with `because` links from caused changes to the failures that caused them."""
    by_candidate = {int(a.evidence["candidate_index"]): a for a in plan if "candidate_index" in a.evidence}
    out: list[Action] = []
    for action in plan:
        c = action.candidate
        if c is None or not c.cause or action.op in ("ignore", "forget"):
            out.append(action)
            continue
        i = int(action.evidence["candidate_index"])
        link: dict[str, Any] = {"cause": c.cause}
        because_id = None
        same_turn = [(overlap(c.cause, f.value or f.text), k) for k, f in enumerate(candidates)
                     if k != i and f.category == "failure" and f.command is None]
        score, k = max(same_turn, default=(0.0, -1))
        cause_action = by_candidate.get(k)
        if score >= CAUSE_OVERLAP and cause_action is not None and cause_action.op != "ignore":
            if cause_action.op in ("corroborate", "duplicate"):
                because_id = cause_action.target_id
            else:
                link["because_candidate"] = k
            link["overlap"] = round(score, 3)
        else:
            stored = [(overlap(c.cause, m.text) , m.id) for m in active if m.category == "failure"]
            score, mid = max(stored, default=(0.0, None))
            if score >= CAUSE_OVERLAP:
                because_id, link["overlap"] = mid, round(score, 3)
        evidence = {**action.evidence, "because": link}
        if "because_candidate" in link:
            evidence["because_candidate"] = link["because_candidate"]
        out.append(replace(action, evidence=evidence, because_id=because_id))
    return out


def offline_judge(candidate: Candidate, memory: MemoryRecord) -> dict:
    """Return the offline verdict on whether `candidate` contradicts `memory`, from change cues, negation and values.

    {"contradicts": bool, "score": float in [0, 1], "why": str, "judge": "offline-heuristic-v1"}.
    """
    def verdict(score: float, why: str) -> dict:
        return {"contradicts": score >= 0.5, "score": round(score, 3), "why": why, "judge": OFFLINE_JUDGE}

    if candidate.subject and memory.subject and _key(candidate.subject) != _key(memory.subject):
        return verdict(0.0, "different subjects")
    if memory.category in NEVER_RETIRED or candidate.category in NEVER_RETIRED:
        return verdict(0.0, "failures and lessons are never superseded")
    said = str(candidate.meta.get("source_text") or candidate.text).lower()
    cue = bool(candidate.meta.get("change_cue")) or any(f" {w} " in f" {said} " for w in _CHANGE_CUE)
    if candidate.old_value and _holds(candidate.old_value, memory.value or memory.text):
        return verdict(0.95, f"states that {candidate.old_value!r} was replaced")
    if _negated(candidate) != _negated(memory) and (
            _holds(candidate.value, memory.value) or overlap(candidate.text, memory.text) >= 0.5):
        return verdict(0.9, "opposite polarity about the same thing")
    if candidate.attribute and candidate.attribute == memory.attribute and candidate.value and memory.value:
        if same_value(candidate.value, memory.value):
            return verdict(0.0, "same value")
        if candidate.single_valued and memory.single_valued:
            return verdict(0.85, f"single-valued {candidate.attribute}: {memory.value!r} -> {candidate.value!r}")
        return verdict(0.1, f"multi-valued {candidate.attribute}: both can hold")
    a, b = content_tokens(candidate.text), content_tokens(memory.text)
    only_a, only_b = a - b, b - a
    if only_a and only_b and all(any(ch.isdigit() for ch in w) for w in only_a | only_b):
        return verdict(0.7, f"same statement with different numbers: {sorted(only_b)} -> {sorted(only_a)}")
    neg_a = any(f" {w} " in f" {said} " or w in said.split() for w in _NEGATION_CUE)
    neg_b = any(f" {w} " in f" {memory.text.lower()} " for w in _NEGATION_CUE)
    shared = len(a & b) / max(1, len(a | b))
    if neg_a != neg_b and shared >= 0.5:
        return verdict(0.75, "one says not, the other says so")
    if cue and shared >= 0.3 and only_a:
        return verdict(0.6, f"change cue with new content {sorted(only_a)[:4]}")
    return verdict(0.1 + (0.2 if cue else 0.0), "no contradiction cue")


JUDGE_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["contradicts", "score", "why"],
    "properties": {"contradicts": {"type": "boolean"}, "score": {"type": "number"}, "why": {"type": "string"}},
}


def _record(item: Candidate | MemoryRecord, name: str) -> dict[str, Any]:
    """Return the framed-data view of a candidate or memory for the judge prompt."""
    fields = {"id": getattr(item, "id", name), "text": item.text, "subject": item.subject,
              "attribute": item.attribute, "value": item.value, "category": item.category,
              "negated": _negated(item)}
    return {k: v for k, v in fields.items() if v is not None}


def model_judge(llm) -> Judge:
    """Return a judge that asks the live model (prompt "judge", role "judge"), failing closed on a bad answer.

    An unusable answer (LLMResponseError, or a verdict of the wrong shape) gives
    {"contradicts": False, "score": 0.0, "why": "judge error: ...", "judge": ..., "error": True},
    so the plan retires nothing and adds the candidate as novel. A missing model
    (LLMUnavailable, CassetteMiss) is not an answer and propagates: it must stay loud.
    """
    models = getattr(llm, "models", None)
    name = f"model:{models['judge']}" if isinstance(models, dict) and models.get("judge") else \
        f"model:{type(llm).__name__}"

    def judge(candidate: Candidate, memory: MemoryRecord) -> dict:
        try:
            answer = llm.complete_json("judge", {"candidate": _record(candidate, "candidate"),
                                                 "memory": _record(memory, "memory")}, JUDGE_SCHEMA, role="judge")
            contradicts, score, why = answer["contradicts"], float(answer["score"]), str(answer["why"])
            if not isinstance(contradicts, bool) or not 0.0 <= score <= 1.0:
                raise ValueError(f"contradicts={contradicts!r}, score={score!r}")
        except (LLMResponseError, KeyError, TypeError, ValueError) as exc:
            return {"contradicts": False, "score": 0.0, "why": f"judge error: {exc}", "judge": name, "error": True}
        return {"contradicts": contradicts, "score": round(score, 3), "why": why, "judge": name}

    return judge


def plan_writes(candidates: list[Candidate], active: list[MemoryRecord], sims: np.ndarray, cfg: WriteConfig,
                judge: Judge = offline_judge) -> list[Action]:
    """Return the write plan: one Action per candidate (a forget may fan out), decided by the rules above.

    `sims[i, j]` is the cosine of candidate i and active memory j, computed by the caller.
    The function is pure: it reads its arguments and calls only `judge`.
    """
    n, m = len(candidates), len(active)
    matrix = np.asarray(sims, dtype=np.float64) if n and m else np.zeros((n, m))
    if matrix.shape != (n, m):
        raise InvalidInput(f"sims has shape {matrix.shape}; expected ({n}, {m}) = (candidates, active memories)")
    thresholds = {"duplicate": cfg.duplicate_threshold, "arbitration_low": cfg.arbitration_low,
                  "supersede": cfg.supersede_threshold, "min_importance": cfg.min_importance}
    overridden = _same_turn(candidates)
    taken: set[str] = set()
    plan: list[Action] = []
    for i, c in enumerate(candidates):
        base = {"candidate_index": i, "thresholds": thresholds}
        row = matrix[i]
        if c.command == "forget":
            plan.extend(_forget(i, c, active, row, cfg, taken, base))
        elif i in overridden:
            plan.append(Action("ignore", c, reason=overridden[i], evidence=base))
        elif c.importance < cfg.min_importance:
            plan.append(Action("ignore", c, reason=f"importance {c.importance} below min_importance "
                               f"{cfg.min_importance}", evidence=base))
        else:
            action = _decide(c, active, row, cfg, judge, taken, base)
            if action.op == "supersede" and action.target_id:
                taken.add(action.target_id)
            plan.append(action)
    # A memory corroborated or duplicated early in the plan may be retired by a later candidate:
    # the earlier candidate then has nothing left to lean on and is added in its own right.
    plan = [replace(a, op="add", target_id=None, reason=f"its match {a.target_id} is retired in the same plan",
                    evidence={**a.evidence, "retired_match": a.target_id})
            if a.op in ("corroborate", "duplicate") and a.target_id in taken else a for a in plan]
    return _link_causes(plan, candidates, active)
