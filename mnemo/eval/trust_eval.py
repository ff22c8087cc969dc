"""Evaluate the trust assessor and the consistency audit on their labelled sets, offline.

    python -m mnemo.eval.trust_eval            # both sets, JSON on stdout
    python -m mnemo.eval.trust_eval --out results.json

Every case runs through the real Memory API (hash embedder, offline model, a
simulated clock): memories are added at their ages, re-added at each confirmation
(the write path corroborates them), recalled with the case's query and assessed
with the case's tools. Audit cases are seeded straight into the store, because a
contradiction is by definition something reconciliation let through (bulk imports,
concurrent agents, a judge under its threshold); the audit then runs read-only.

The metrics are defined in the docstrings of `trust_metrics` and `audit_metrics`,
before any of them is computed. A case the harness fails on is a row, never dropped.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from mnemo.assess import SQLTool, values_agree
from mnemo.audit import record_key
from mnemo.clock import SimulatedClock
from mnemo.config import Config
from mnemo.lab.fitting import wilson
from mnemo.memory import Memory
from mnemo.model import MemoryRecord
from mnemo.store import new_id

DATA = Path(__file__).resolve().parents[2] / "data"
TRUST_CASES = DATA / "trust" / "cases.jsonl"
AUDIT_CASES = DATA / "audit" / "cases.jsonl"
START = datetime(2025, 6, 1, tzinfo=timezone.utc)
USER = "ops"
# The act threshold stays at its default; only the tool timeout is shortened so timeout cases take 0.25 s.
EVAL_TIMEOUT_S = 0.25
SLOW_TOOL_S = 1.0


def load(path: str | Path) -> list[dict[str, Any]]:
    """Return the cases of a JSONL file, one object a line."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def rate(k: int, n: int) -> float | None:
    """Return k / n rounded to 4 places, or None when there is nothing to divide by."""
    return round(k / n, 4) if n else None


# ----------------------------------------------------------------- trust
def build_tools(spec: dict[str, Any] | None) -> Any:
    """Return the tools a case registers: keyed by attribute, a plain callable, or an SQLTool on DuckDB."""
    if spec is None:
        return None
    rows, fail, kind = spec["rows"], spec.get("fail"), spec["type"]

    def lookup(key: str, attr: str) -> Any:
        if fail == "error":
            raise ConnectionError("system of record unreachable")
        if fail == "timeout":
            time.sleep(SLOW_TOOL_S)
        return rows.get(key, {}).get(attr)

    if kind == "keyed":
        attrs = spec.get("covers") or sorted({a for r in rows.values() for a in r})
        return {a: (lambda key, a=a: lookup(key, a)) for a in attrs}
    if kind == "callable":
        def erp(memory: MemoryRecord) -> Any:
            return lookup(memory.record_id or memory.subject, memory.attribute)
        return erp
    tool = SQLTool.from_rows(rows, name="erp-sql")
    if fail == "error":
        tool.close()  # a dead connection: every query raises, as an unreachable database would
    if fail == "timeout":
        def slow(memory: MemoryRecord) -> Any:
            time.sleep(SLOW_TOOL_S)
            return tool(memory)
        slow.attributes = tool.attributes  # type: ignore[attr-defined]
        return slow
    return tool


def _add(mem: Memory, spec: dict[str, Any]) -> None:
    """Add one case memory at its age, then re-add it at each confirmation (which corroborates it)."""
    fields = {k: spec[k] for k in ("subject", "attribute", "value", "category", "kind", "source", "importance")
              if k in spec}
    fields["record_id"] = spec.get("record_id")
    mem.add(spec["text"], user=USER, at=START - timedelta(days=spec["age_days"]), **fields)
    for days in sorted(spec.get("confirmations_days_ago", ()), reverse=True):
        mem.add(spec["text"], user=USER, at=START - timedelta(days=days), **fields)


def run_trust_case(case: dict[str, Any], config: Config | None = None) -> dict[str, Any]:
    """Return one row: the verdict on the case's pack, the value acted on, and whether it was re-grounded."""
    row: dict[str, Any] = {k: case.get(k) for k in ("id", "split", "family", "label", "correct_value")}
    row["ladder"] = case.get("ladder")
    cfg = config or Config.from_params(tool_timeout_s=EVAL_TIMEOUT_S)
    target = next(m for m in case["memories"] if m.get("target"))
    try:
        with Memory.open(":memory:", embedder="hash", llm="offline", clock=SimulatedClock(START), config=cfg) as mem:
            for spec in case["memories"]:
                _add(mem, spec)
            recall = mem.recall(case["query"], user=USER)
            a = mem.assess(recall, tools=build_tools(case.get("tool")))
    # The harness is a boundary: whatever breaks a case is recorded in its row and scored at its worst.
    except Exception as exc:  # noqa: BLE001
        return {**row, "verdict": None, "error": f"{type(exc).__name__}: {exc}"}
    slots = {(p.memory.subject, p.memory.attribute): p for p in a.pack.memories}
    hit = slots.get((target["subject"], target["attribute"]))
    fresh = {s.new.id for s in a.regrounded} | {p.id for p in a.pack.memories if (p.note or "").startswith("re-g")}
    acted = hit.memory.value if hit else None
    return {**row, "verdict": a.verdict, "trust": round(a.trust, 4), "acted_value": acted,
            "regrounded": bool(hit and hit.id in fresh),
            "agrees_with_gold": bool(case.get("correct_value") and values_agree(acted, case["correct_value"])),
            "statuses": [c.status for c in a.claims],
            "missing_from_pack": sum((m["subject"], m["attribute"]) not in slots for m in case["memories"]),
            "error": None}


def trust_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return the two-sided trust metric over `rows` (one per case).

    Definitions, fixed before anything is computed:

    - an *unsafe* case is one labelled "unsafe": acting on its pack as stored would act
      on a stale value, on an unconfirmed load-bearing claim, or on a check that failed;
      a *safe* case is one labelled "safe".
    - *acted on the fix*: the verdict is "act", the target memory was re-grounded in this
      assessment, and its value now agrees with the gold correct value.
    - **unsafe acceptance** = unsafe cases with verdict "act" that did not act on the fix,
      over all unsafe cases (acting on the stale or unconfirmed value: the harm).
    - **fix rate** = unsafe cases that acted on the fix, over all unsafe cases (acted on an
      unsafe pack, but on the re-grounded value: reported, not counted as harm).
    - **over-abstention** = safe cases with verdict "escalate", over all safe cases.
    - **wrong value on safe** = safe cases acted on with a value that disagrees with gold.

    A row whose harness failed (verdict None) counts at its worst: an unsafe acceptance
    when unsafe, an over-abstention when safe. Intervals are 95% Wilson intervals.
    """
    unsafe = [r for r in rows if r["label"] == "unsafe"]
    safe = [r for r in rows if r["label"] == "safe"]
    fixed = [r for r in unsafe if r["verdict"] == "act" and r.get("regrounded") and r.get("agrees_with_gold")]
    accepted = [r for r in unsafe if (r["verdict"] == "act" and r not in fixed) or r["verdict"] is None]
    abstained = [r for r in safe if r["verdict"] != "act"]
    wrong = [r for r in safe if r["verdict"] == "act" and r.get("correct_value") and not r.get("agrees_with_gold")]
    return {
        "n": len(rows), "n_unsafe": len(unsafe), "n_safe": len(safe),
        "unsafe_acceptance": rate(len(accepted), len(unsafe)), "unsafe_acceptance_ci": wilson(len(accepted), len(unsafe)),
        "fix_rate": rate(len(fixed), len(unsafe)),
        "over_abstention": rate(len(abstained), len(safe)), "over_abstention_ci": wilson(len(abstained), len(safe)),
        "wrong_value_on_safe": rate(len(wrong), len(safe)),
        "errors": sum(r["verdict"] is None for r in rows),
        "unsafe_accepted_ids": [r["id"] for r in accepted], "over_abstained_ids": [r["id"] for r in abstained],
    }


def ladder_report(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return, per ladder, each rung's verdict and trust, the policy age, the oldest age acted on, and the metric."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r["ladder"]["name"] for r in rows):
        rungs = sorted((r for r in rows if r["ladder"]["name"] == name),
                       key=lambda r: r["ladder"]["confirmation_age_days"])
        acted = [r["ladder"]["confirmation_age_days"] for r in rungs if r["verdict"] == "act"]
        out[name] = {"policy_max_age_days": rungs[0]["ladder"]["policy_max_age_days"],
                     "oldest_age_acted": max(acted) if acted else None,
                     "rungs": [[r["ladder"]["confirmation_age_days"], r["label"], r["verdict"], r.get("trust")]
                               for r in rungs],
                     **{k: v for k, v in trust_metrics(rungs).items() if not k.endswith("_ids")}}
    return out


def run_trust(path: str | Path = TRUST_CASES, config: Config | None = None) -> dict[str, Any]:
    """Return trust metrics per split (train, heldout, all decisive cases) and per ladder, with the rows."""
    cases = load(path)
    rows = [run_trust_case(c, config) for c in cases]
    decisive = [r for r in rows if not r["ladder"]]
    return {
        "act_threshold": (config or Config()).trust.act_threshold,
        "splits": {s: trust_metrics([r for r in decisive if s == "all" or r["split"] == s])
                   for s in ("train", "heldout", "all")},
        "ladders": ladder_report([r for r in rows if r["ladder"]]),
        "missing_from_pack": sum(r.get("missing_from_pack", 0) for r in rows),
        "rows": rows,
    }


# ----------------------------------------------------------------- audit
def seed(mem: Memory, specs: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Insert case memories straight into the store (no reconciliation); return case key -> memory id."""
    ids = {s["key"]: new_id("m") for s in specs}
    records = []
    for s in specs:
        at = START - timedelta(days=s.get("age_days", 0))
        refs = tuple(ids.get(r[1:], r) if r.startswith("@") else r for r in s.get("references", ()))
        records.append(MemoryRecord(
            id=ids[s["key"]], user=USER, text=s["text"], kind=s.get("kind", "semantic"),
            category=s.get("category", "fact"), subject=s.get("subject"), attribute=s.get("attribute"),
            value=s.get("value"), record_id=s.get("record_id"), references=refs,
            importance=s.get("importance", 0.5), single_valued=s.get("single_valued", True),
            source=s.get("source", "user"), created_at=at, valid_from=at, status=s.get("status", "active"),
            meta=dict(s.get("meta", {}))))
    with mem.store.transaction():
        mem.store.insert_memories(records, mem.embedder.embed([r.text for r in records]))
    return ids


def snapshot(mem: Memory) -> list[Any]:
    """Return a comparable full dump of the store: turns, memories with vectors, events, links."""
    out = []
    for table, batch in mem.store.dump():
        for item in batch:
            if table == "memories":
                rec, vec = item
                item = (rec, np.asarray(vec, np.float32).tobytes())
            out.append((table, item))
    return out


def run_audit_case(case: dict[str, Any]) -> dict[str, Any]:
    """Return one row: expected and found contradictions, absences and semantic conflicts, and read-only proof."""
    row: dict[str, Any] = {"id": case["id"], "type": case["type"], "control": case["control"],
                           "expect": case.get("expect", {})}
    try:
        with Memory.open(":memory:", embedder="hash", llm="offline", clock=SimulatedClock(START)) as mem:
            ids = seed(mem, case["memories"])
            before = snapshot(mem)
            report = mem.audit(USER)
            row["unchanged"] = snapshot(mem) == before
    except Exception as exc:  # noqa: BLE001 - the harness records any failure in the case's row
        return {**row, "error": f"{type(exc).__name__}: {exc}"}
    key_of = {v: k for k, v in ids.items()}
    row["contradictions"] = [{"record": c.record, "attribute": c.attribute,
                              "value": c.recommendation["value"], "rule": c.recommendation["rule"]}
                             for c in report.contradictions]
    row["absences"] = sorted(key_of.get(a.reference, a.reference) for a in report.absences)
    row["semantic"] = sorted(sorted((key_of[s.a_id], key_of[s.b_id])) for s in report.semantic)
    row["error"] = None
    return row


def _slot(record: str, attribute: str) -> tuple[str, str]:
    probe = MemoryRecord(id="probe", user=USER, text="", record_id=record)
    return record_key(probe) or record, attribute


def audit_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return detection, false positives and ladder conformance of the audit over `rows`.

    Definitions, fixed before anything is computed:

    - an *injected finding* is one listed under a case's "expect": a contradiction
      (record, attribute), an absence (reference) or a semantic conflict (a pair).
    - **detection rate** = injected findings the audit reported, over all injected
      findings (overall and per kind).
    - **false positives** = findings the audit reported that no case expects (in
      controls and in injected cases alike); **control false-positive rate** = control
      cases with at least one finding, over all control cases.
    - **ladder conformance** = detected contradictions whose recommendation has the
      expected rule and a value agreeing with the expected value (None for "undecided"),
      over detected contradictions.
    - **unchanged** = cases whose full store dump is identical before and after the audit.

    A failed case counts every expected finding as missed and the case as changed.
    """
    kinds = {"contradictions": 0, "absences": 0, "semantic": 0}
    found = dict(kinds)
    expected = dict(kinds)
    fps, conform, detected_c = [], 0, 0
    for r in rows:
        exp = r.get("expect") or {}
        got_c = {_slot(c["record"], c["attribute"]): c for c in r.get("contradictions", [])}
        want_c = {_slot(c["record"], c["attribute"]): c for c in exp.get("contradictions", [])}
        expected["contradictions"] += len(want_c)
        for slot, want in want_c.items():
            if slot in got_c:
                found["contradictions"] += 1
                detected_c += 1
                got = got_c[slot]
                same = (got["value"] is None and want["value"] is None) or values_agree(got["value"], want["value"])
                conform += bool(same and got["rule"] == want["rule"])
        fps += [(r["id"], "contradiction", s) for s in got_c if s not in want_c]
        for kind in ("absences", "semantic"):
            want = [tuple(x) if isinstance(x, list) else x for x in exp.get(kind, [])]
            got = [tuple(x) if isinstance(x, list) else x for x in r.get(kind, [])]
            expected[kind] += len(want)
            found[kind] += sum(w in got for w in want)
            fps += [(r["id"], kind, g) for g in got if g not in want]
    controls = [r for r in rows if r["control"]]
    noisy = {fp[0] for fp in fps}
    total_exp = sum(expected.values())
    return {
        "cases": len(rows), "controls": len(controls), "injected_findings": total_exp,
        "detection_rate": rate(sum(found.values()), total_exp), "detection_ci": wilson(sum(found.values()), total_exp),
        "detection_by_kind": {k: rate(found[k], expected[k]) for k in kinds},
        "false_positives": len(fps),
        "control_false_positive_rate": rate(sum(r["id"] in noisy or bool(r.get("error")) for r in controls),
                                            len(controls)),
        "ladder_conformance": rate(conform, detected_c),
        "unchanged": rate(sum(bool(r.get("unchanged")) for r in rows), len(rows)),
        "errors": sum(bool(r.get("error")) for r in rows),
        "false_positive_detail": [list(map(str, fp)) for fp in fps],
        "missed": [r["id"] for r in rows if _missed(r)],
    }


def _missed(r: dict[str, Any]) -> bool:
    exp = r.get("expect") or {}
    got_c = {_slot(c["record"], c["attribute"]) for c in r.get("contradictions", [])}
    if any(_slot(c["record"], c["attribute"]) not in got_c for c in exp.get("contradictions", [])):
        return True
    return any((tuple(w) if isinstance(w, list) else w) not in [tuple(g) if isinstance(g, list) else g
                                                                 for g in r.get(k, [])]
               for k in ("absences", "semantic") for w in exp.get(k, []))


def run_audit(path: str | Path = AUDIT_CASES) -> dict[str, Any]:
    """Return the audit metrics over the labelled audit set, with the rows."""
    rows = [run_audit_case(c) for c in load(path)]
    return {**audit_metrics(rows), "rows": rows}


def main(argv: Iterable[str] | None = None) -> dict[str, Any]:
    """Run both evaluations and print (or write) the figures without the per-case rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the full results (with rows) to this JSON file")
    args = parser.parse_args(list(argv) if argv is not None else None)
    results = {"trust": run_trust(), "audit": run_audit(), "provenance": {"embedder": "hash", "llm": "offline",
                                                                          "tool_timeout_s": EVAL_TIMEOUT_S}}
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    brief = {"trust": {k: v for k, v in results["trust"].items() if k != "rows"},
             "audit": {k: v for k, v in results["audit"].items() if k != "rows"}}
    print(json.dumps(brief, indent=2, default=str))
    return results


if __name__ == "__main__":
    main()
