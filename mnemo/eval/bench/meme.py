"""Runner for the one published MEME episode (sw_033): deletion, cascade and absence through mnemo's write path.

ONE episode, 10 questions: a development and unit-level check of the Deletion / Cascade / Absence
logic end to end, NEVER a benchmark score (the data README says so: nothing is held out, and the
paper's figures are over 100 episodes). Like the runners in `bench.updates`, it returns a
`common.BenchResult` with one row per question and recipe; a question whose recall raises is a row
with its error and the worst value of every metric.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from mnemo.eval import datasets, metrics
from mnemo.eval.bench.common import Bench, BenchResult, Progress, group_means, guard, register, session_times
from mnemo.memory import Memory

NAN = math.nan
MEME_KEYS = ("passed", "real_pass", "context_recall", "leaked", "stale", "abstained", "items", "tokens")
# The after-questions whose pass is "real" only if the matching before-question passed.
PAIRED_TAGS = ("Del", "Cas", "Abs")


@register("meme")
def run_meme(recipes: Sequence[str] = ("default",), *, limit: int | None = None, embedder: Any = "minilm",
             llm: Any = "offline", budget: int = 512, progress: Progress | None = None) -> BenchResult:
    """Return MEME's 10 probes on episode sw_033 (4 asked after session 13, 6 after session 16), per recipe.

    One episode, 10 questions: a development / unit-level check, never a benchmark score.
    `limit` counts episodes (there is one). Every recipe gets a `Memory` at ":memory:" (recipes
    with equal write and decay settings share a store) with a `SimulatedClock`; the 17 sessions
    are played in order, the clock set to each user turn's time (the session's timestamp plus one
    minute per turn) and the turn remembered (extraction + reconciliation, so a forget request or
    an update acts on what is stored). Assistant turns are not stored: every gold fact is in a user
    turn, and the assistant's replies ("Got it, I won't remember that!") state nothing to keep.
    After session 13 the clock moves past its last turn and the 4 before-questions are asked, after
    session 16 the 6 after-questions, each with `Memory.recall(question, budget_tokens=budget)`.
    The check is on what recall packs (what an answerer would see), not on a generated answer.

    Values are compared with `metrics.mentions` (whole-word phrase, ignoring case, punctuation and
    whitespace). "Shown" texts are the packed memories plus the history recall attaches (superseded
    memories and their notes, marked not current); "current" texts are the packed memories only.
    * recall / tracking / cascade: the gold values are the question's `entity_values` (a multi-line
      value, the error log, counts line by line; a parenthesised gloss, as in "paired oncall (primary
      + secondary)", is not required: the conversation never says it). context_recall = the share
      of gold values in a shown text; passed = all of them are. Tracking does not check the order.
      A cascade also requires the pre-change value (`stale_value`, Hyunwoo Nam) in no current text
      (MEME's judge wants only the new value): stale = 1 if it is there.
    * deletion: leaked = 1 if the deleted value is in any shown text; passed = not leaked.
    * abstain: stale = 1 if the pre-change value (Seoyun Choi) is in a current text, i.e. the pack
      states the old reviewer as current; passed = confidence is "unknown" or not stale. An
      irrelevant pack passes: that is why real_pass exists.
    real_pass (after-questions tagged Del / Cas / Abs only; `metrics.real_pass_rate`): passed and
    the paired before-question passed. abstained: confidence is "unknown"; items, tokens: what
    recall packed. Aggregates: per recipe, by probe kind, by phase and "all".
    """
    ds = datasets.load("meme")
    convs = ds.conversations[:limit] if limit else ds.conversations
    bench = Bench(recipes, embedder, llm)
    rows: list[dict[str, Any]] = []
    for ci, conv in enumerate(convs):
        times = session_times(conv)
        mems = bench.open(times[0])
        qs = [q for q in ds.questions if q.conversation_id == conv.id]
        for si, (s, when) in enumerate(zip(conv.sessions, times, strict=True)):
            users = [t for t in s.turns if t.role == "user"]
            # Each turn at its minute, never before the clock (as _tick moves it): one call per store.
            start = max(mem.clock.now() for mem in mems.values())
            ats = [max(start, when + timedelta(minutes=i)) for i in range(len(users))]
            for w in bench.writers(mems):
                bench.remember_many(w, [(t.text, t.dia_id, s.id, at) for t, at in zip(users, ats, strict=True)],
                                    user=conv.id)
            if ats:
                _tick(mems, ats[-1])
            asked = [q for q in qs if s.id == f"S{q.extra['ask_after_session']}"]
            if asked:
                _tick(mems, when + timedelta(minutes=len(users) + 1))
                for rname, mem in mems.items():
                    rows += [_meme_row(bench, mem, q, rname, conv.id, budget) for q in asked]
            if progress:
                progress(ci * len(conv.sessions) + si + 1, len(convs) * len(conv.sessions), f"{conv.id} {s.id}")
        Bench.close(mems)
    _real_pass(rows)
    aggregates = group_means(rows, MEME_KEYS, lambda r: [f"{r['recipe']} | all", f"{r['recipe']} | {r['phase']}",
                                                    f"{r['recipe']} | {r['probe']}"])
    return bench.result("meme", rows, aggregates, ds, limit=limit, budget=budget)


def _tick(mems: dict[str, Memory], when: datetime) -> datetime:
    """Move every memory's simulated clock forward to `when` (never back); return the time they read."""
    for mem in mems.values():
        if when > mem.clock.now():
            mem.clock.set(when)
    return max(mem.clock.now() for mem in mems.values())


def _meme_row(bench: Bench, mem: Memory, q: datasets.Question, rname: str, user: str, budget: int) -> dict[str, Any]:
    """Return one question's row, scored by `_meme_score`; a question that raises is a row with its error."""
    row = {"qid": f"{q.id}@{rname}", "question_id": q.id, "conversation": user, "recipe": rname,
           "phase": q.extra["phase"], "tag": q.extra["tag"], "probe": q.probe, "task_type": q.category_name,
           "ask_after_session": q.extra["ask_after_session"], "pair": q.extra.get("pair"), "confidence": None,
           "error": None, **dict.fromkeys(MEME_KEYS, NAN)}
    worst: dict[str, float] = {"passed": 0.0, "items": 0.0, "tokens": float(budget),
                               "abstained": 0.0 if q.probe == "abstain" else 1.0}
    if q.probe == "deletion":
        worst["leaked"] = 1.0
    elif q.probe == "abstain":
        worst["stale"] = 1.0
    else:
        worst["context_recall"] = 0.0
        if q.probe == "cascade":
            worst["stale"] = 1.0
    guard(row, worst, partial(_meme_score, mem, q, user, budget))
    return row


def gold_values(q: datasets.Question) -> list[str]:
    """Return the strings a pack must show for `q`: its entity values, line by line, parenthesised glosses dropped."""
    out = []
    for vs in q.extra.get("entity_values", {}).values():
        for v in vs if isinstance(vs, list) else [vs]:
            for line in str(v).splitlines():
                line = re.sub(r"\s*\([^)]*\)", "", line).strip()
                if line:
                    out.append(line)
    return list(dict.fromkeys(out))


def _meme_score(mem: Memory, q: datasets.Question, user: str, budget: int) -> dict[str, Any]:
    r = mem.recall(q.question, user=user, budget_tokens=budget)
    current = [p.text for p in r.memories]
    shown = current + [p.text for p in r.history] + [p.note for p in [*r.memories, *r.history] if p.note]
    out: dict[str, Any] = {"confidence": r.confidence, "abstained": float(r.confidence == "unknown"),
                           "items": float(len(r.memories)), "tokens": float(r.tokens_used)}

    def said(texts: list[str], value: str) -> bool:
        return any(metrics.mentions(t, [value]) for t in texts)

    if q.probe == "deletion":
        out["leaked"] = float(said(shown, q.extra["stale_value"]))
        out["passed"] = 1.0 - out["leaked"]
    elif q.probe == "abstain":
        out["stale"] = float(said(current, q.extra["stale_value"]))
        out["passed"] = float(r.confidence == "unknown" or not out["stale"])
    else:
        gold = gold_values(q)
        out["context_recall"] = sum(said(shown, g) for g in gold) / len(gold)
        ok = out["context_recall"] == 1.0
        if q.probe == "cascade":
            out["stale"] = float(said(current, q.extra["stale_value"]))
            ok = ok and not out["stale"]
        out["passed"] = float(ok)
    return out


def _real_pass(rows: list[dict[str, Any]]) -> None:
    """Fill real_pass on the paired after-rows: the row passed and so did its before-question (same recipe)."""
    by_key = {(r["question_id"], r["recipe"]): r for r in rows}
    for r in rows:
        before = by_key.get((r["pair"], r["recipe"]))
        if r["phase"] != "after" or r["tag"] not in PAIRED_TAGS or before is None:
            continue
        b = metrics.Failed(before["error"]) if before["error"] else bool(before["passed"])
        a = metrics.Failed(r["error"]) if r["error"] else bool(r["passed"])
        r["real_pass"] = metrics.real_pass_rate([b], [a], qids=[r["qid"]]).rows[0].value
