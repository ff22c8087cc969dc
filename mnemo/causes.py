"""Failures and what they caused: the `because` links of a write plan.

    plan = link_causes(plan, candidates, active)   # reconcile.plan_writes' last step

A candidate that states a cause ("we rolled back because the migration failed") is linked to
the failure it names: one said in the same turn, else a stored one whose words it shares
(`CAUSE_OVERLAP`), else, for a cause that points back ("because of that outage"), the newest
failure said before it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .model import Action, Candidate, MemoryRecord
from .normalise import overlap

CAUSE_OVERLAP = 0.6  # share of the cause's words a failure must contain to be its cause

# "because of that failure", "due to the outage": a cause that points back at a failure already said.
_ANAPHORIC_CAUSE = re.compile(r"\b(?:that|this|the|those|these)\s+(?:\w+\s+)?(?:failure|outage|incident|crash|"
                              r"problem|issue|error|bug|mess|breakage)\b", re.I)


def link_causes(plan: list[Action], candidates: list[Candidate], active: list[MemoryRecord]) -> list[Action]:
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
            stored = [(overlap(c.cause, m.text), m.id) for m in active if m.category == "failure"]
            score, mid = max(stored, default=(0.0, None))
            if score >= CAUSE_OVERLAP:
                because_id, link["overlap"] = mid, round(score, 3)
            elif _ANAPHORIC_CAUSE.search(c.cause):
                # "because of that failure": the newest failure said before it, in this turn or stored.
                earlier = [k for k, f in enumerate(candidates[:i]) if f.category == "failure" and f.command is None
                           and by_candidate.get(k) is not None and by_candidate[k].op != "ignore"]
                failures = [m for m in active if m.category == "failure"]
                if earlier:
                    link["because_candidate"] = earlier[-1]
                elif failures:
                    newest = max(failures, key=lambda m: (m.created_at is not None, m.created_at or 0))
                    because_id = newest.id
                link["anaphoric"] = True
        evidence = {**action.evidence, "because": link}
        if "because_candidate" in link:
            evidence["because_candidate"] = link["because_candidate"]
        out.append(replace(action, evidence=evidence, because_id=because_id))
    return out
