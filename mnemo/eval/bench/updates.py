"""Benchmark runners that write through mnemo's write path: BEAM, MQuAKE-hard (updates) and PrefEval.

The shared `Bench` machinery is in `bench.common`; the LoCoMo / REALTALK retrieval runners are in
`bench.dialog`. Every runner returns a `common.BenchResult`
with one row per question and recipe; a question whose recall raises is a row with its error and
the worst value of every metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from mnemo.errors import ConfigError
from mnemo.eval import datasets, metrics
from mnemo.eval.bench.common import (
    EPOCH,
    Bench,
    BenchResult,
    Progress,
    group_means,
    guard,
    ranking,
    register,
    run_of,
    session_times,
)

NAN = math.nan


# BEAM ---------------------------------------------------------------------------------------

BEAM_KEYS = ("current", "stale", "superseded_shown", "both_surfaced", "abstained", "evidence_recall", "tokens")


@register("beam")
def run_beam(recipes: Sequence[str] = ("default",), *, limit: int | None = None, embedder: Any = "minilm",
             llm: Any = "offline", budget: int = 512, progress: Progress | None = None) -> BenchResult:
    """Return BEAM-128K knowledge update, contradiction and abstention checks (and the other abilities' recall).

    Each chat gets a store; every user message is remembered (extraction + reconciliation, so a
    later value can supersede an earlier one) at its batch's date; assistant messages are not
    stored (the ids the three abilities point to are user messages). Per question,
    `Memory.recall(question, budget)`; its packed memories map back to message ids.
    * current (knowledge_update): 1 if a memory from an `updated_info` message is packed;
    * stale (knowledge_update, `metrics.is_stale`): 1 if a memory from an `original_info` message
      is packed with no current one ranked above it; shown only as history ("corrected from ...,
      not current") it is not stale, and superseded_shown says so;
    * both_surfaced (contradiction_resolution): 1 if memories of both the first and the second
      statement are in the pack or its history;
    * abstained: recall's confidence is "unknown" (the abstain rate on `abstention`, the
      false-abstain rate on `information_extraction`);
    * evidence_recall: the share of the question's user-message evidence in the pack.
    """
    ds = datasets.load("beam")
    convs = ds.conversations[:limit] if limit else ds.conversations
    bench = Bench(recipes, embedder, llm)
    rows: list[dict[str, Any]] = []
    for ci, conv in enumerate(convs):
        times = session_times(conv)
        mems = bench.open(max(times) + timedelta(days=1))
        turns = [(t.text, t.dia_id, s.id, when + timedelta(minutes=i))
                 for s, when in zip(conv.sessions, times, strict=True)
                 for i, t in enumerate(x for x in s.turns if x.role == "user")]
        for w in bench.writers(mems):
            bench.remember_many(w, turns, user=conv.id)
        users = {t.dia_id for t in conv.turns if t.role == "user"}
        for rname, mem in mems.items():
            for q in (q for q in ds.questions if q.conversation_id == conv.id):
                row = {"qid": f"{q.id}@{rname}", "question_id": q.id, "conversation": conv.id, "recipe": rname,
                       "ability": q.category_name, "probe": q.probe, "error": None, **dict.fromkeys(BEAM_KEYS, NAN)}
                # The worst abstention is the wrong one: not abstaining where it should, abstaining elsewhere.
                worst = {"current": 0.0, "stale": 1.0, "both_surfaced": 0.0, "evidence_recall": 0.0,
                         "abstained": 0.0 if q.probe == "abstain" else 1.0, "tokens": float(budget)}
                guard(row, {k: v for k, v in worst.items() if k in _beam_applies(q)},
                       partial(_beam_score, bench, mem, q, conv.id, budget, users))
                rows.append(row)
        Bench.close(mems)
        if progress:
            progress(ci + 1, len(convs), conv.id)
    aggregates = group_means(rows, BEAM_KEYS, lambda r: [f"{r['recipe']} | {r['ability']}"])
    return bench.result("beam", rows, aggregates, ds, limit=limit, budget=budget)


def _beam_applies(q: datasets.Question) -> set[str]:
    """Return the metric names that apply to a BEAM question."""
    keys = {"abstained", "tokens"}
    if q.probe == "update":
        keys |= {"current", "stale", "superseded_shown"}
    if q.probe == "contradiction":
        keys.add("both_surfaced")
    if q.evidence:
        keys.add("evidence_recall")
    return keys


def _beam_score(bench: Bench, mem: Any, q: datasets.Question, user: str, budget: int,
                users: set[str]) -> dict[str, Any]:
    r = mem.recall(q.question, user=user, budget_tokens=budget)
    packed = [bench.dia(p.memory) for p in r.memories]
    shown = set(packed) | {bench.dia(h.memory) for h in r.history}
    out: dict[str, Any] = {"abstained": float(r.confidence == "unknown"), "tokens": float(r.tokens_used),
                           "confidence": r.confidence}
    gold = [e for e in q.evidence if e in users]
    if gold:
        out["evidence_recall"] = len(set(gold) & set(packed)) / len(gold)
    if q.probe == "update":
        stale, current = q.extra.get("stale_ids", []), q.extra.get("current_ids", [])
        out["current"] = float(any(c in packed for c in current)) if current else NAN
        out["stale"] = float(metrics.is_stale(packed, stale, current)) if stale else NAN
        out["superseded_shown"] = float(any(h in stale for h in shown - set(packed))) if stale else NAN
    if q.probe == "contradiction":
        first, second = q.extra.get("first_ids", []), q.extra.get("second_ids", [])
        out["both_surfaced"] = float(bool(shown & set(first)) and bool(shown & set(second)))
    return out


# MQuAKE-hard --------------------------------------------------------------------------------

MQUAKE_KEYS = ("current_top1", "current_packed", "stale", "chain_recall", "stale_shown", "cascade_ok", "tokens")


@register("mquake")
def run_mquake(recipes: Sequence[str] = ("default",), *, limit: int | None = None, write: str = "structured",
               embedder: Any = "minilm", llm: Any = "offline", budget: int = 64,
               progress: Progress | None = None) -> BenchResult:
    """Return MQuAKE-hard update and cascade checks after the edits are remembered as corrections.

    Per case (its own user namespace): session 1 writes the original 4-hop chain, session 2 a day
    later writes the 4 edits. `write` chooses how: "structured" calls `Memory.add` with the fact's
    slot as subject (the cloze, e.g. "Hey Jude was performed by") and the object as value, so an
    edit of a stored slot supersedes it through reconciliation; "text" remembers each sentence,
    the edits prefixed "Correction: ", leaving the extractor to find the slot. Then
    `Memory.recall(question, budget)`:
    * update questions (one per edit): current_top1 = the first packed memory comes from the edit;
      current_packed = it is packed; stale (`metrics.is_stale`, only for the edits whose original
      fact was stored, the others have nothing stale) = the original is packed with no edit above it;
    * the multi-hop question (cascade): chain_recall = the share of the post-edit chain's facts
      packed; stale_shown = a superseded original is packed; cascade_ok = every hop packed and no
      stale one.
    """
    if write not in ("structured", "text"):
        raise ConfigError(f"write must be 'structured' or 'text', not {write!r}")
    ds = datasets.load("mquake_hard")
    convs = ds.conversations[:limit] if limit else ds.conversations
    bench = Bench(recipes, embedder, llm)
    mems = bench.open(EPOCH + timedelta(days=2))
    rows: list[dict[str, Any]] = []
    for ci, conv in enumerate(convs):
        for w in bench.writers(mems):
            for day, session in enumerate(conv.sessions):
                for i, t in enumerate(session.turns):
                    at = EPOCH + timedelta(days=day, minutes=i)
                    if write == "text":
                        text = t.text if day == 0 else f"Correction: {t.text}"
                        bench.remember(w, text, t.dia_id, user=conv.id, session=session.id, at=at)
                        continue
                    rec = w.add(t.text, user=conv.id, subject=t.meta["cloze"], attribute="object",
                                value=t.meta["value"], session=session.id, at=at)
                    bench.dia_of_turn.setdefault(rec.turn_id or "", t.dia_id)
        for rname, mem in mems.items():
            for q in (q for q in ds.questions if q.conversation_id == conv.id):
                row = {"qid": f"{q.id}@{rname}", "question_id": q.id, "case": conv.id, "recipe": rname,
                       "probe": q.probe, "write": write, "error": None, **dict.fromkeys(MQUAKE_KEYS, NAN)}
                worst = ({"current_top1": 0.0, "current_packed": 0.0, "stale": 1.0} if q.probe == "update" else
                         {"chain_recall": 0.0, "stale_shown": 1.0, "cascade_ok": 0.0})
                guard(row, worst, partial(_mquake_score, bench, mem, q, conv.id, budget))
                rows.append(row)
        if progress:
            progress(ci + 1, len(convs), conv.id)
    Bench.close(mems)
    aggregates = group_means(rows, MQUAKE_KEYS, lambda r: [f"{r['recipe']} | {r['write']} | {r['probe']}"])
    return bench.result("mquake_hard", rows, aggregates, ds, limit=limit, budget=budget, write=write)


def _mquake_score(bench: Bench, mem: Any, q: datasets.Question, user: str, budget: int) -> dict[str, Any]:
    r = mem.recall(q.question, user=user, budget_tokens=budget)
    packed = [bench.dia(p.memory) for p in r.memories]
    stale, current = q.extra.get("stale_ids", []), q.extra.get("current_ids", [])
    out: dict[str, Any] = {"tokens": float(r.tokens_used), "confidence": r.confidence}
    if q.probe == "update":
        out["current_top1"] = float(bool(packed) and packed[0] in current)
        out["current_packed"] = float(any(c in packed for c in current))
        out["stale"] = float(metrics.is_stale(packed, stale, current)) if stale else NAN
    else:
        out["chain_recall"] = len(set(current) & set(packed)) / len(current) if current else NAN
        out["stale_shown"] = float(any(s in packed for s in stale))
        out["cascade_ok"] = float(out["chain_recall"] == 1.0 and not out["stale_shown"])
    return out


# PrefEval -----------------------------------------------------------------------------------

PREFEVAL_KEYS = ("R@5", "R@10", "RR", "pref_packed", "abstained", "tokens")


@register("prefeval")
def run_prefeval(recipes: Sequence[str] = ("default",), *, limit: int | None = None, form: str = "explicit",
                 inter_turns: int = 100, embedder: Any = "minilm", llm: Any = "offline", budget: int = 512,
                 progress: Progress | None = None) -> BenchResult:
    """Return PrefEval preference recall after `inter_turns` distractor pairs, per topic (`limit` counts topics).

    Per item (its own user namespace; one store per topic): the preference's user turns are
    remembered (the write path types them), its assistant turns (choice / persona forms) and
    then the distractor pairs (LMSYS chats, the same for every item, embedded once) are bulk-added
    as raw episodic turns. Then, for the item's question: R@5, R@10, RR (ir-measures) of the
    preference's user turns in `ranking` (recall's fused candidates); pref_packed = a memory of a
    preference turn is in `Memory.recall(question, budget)`; abstained and tokens as elsewhere.
    """
    ds = datasets.load("prefeval", form=form, inter_turns=inter_turns)
    topics = list(dict.fromkeys(q.category_name for q in ds.questions))[:limit] if limit else \
        list(dict.fromkeys(q.category_name for q in ds.questions))
    bench = Bench(recipes, embedder, llm)
    first = ds.conversations[0] if ds.conversations else None
    noise = first.sessions[1].turns if first and len(first.sessions) > 1 else []
    noise_vecs = bench.emb.embed([t.text for t in noise]) if noise else None
    rows: list[dict[str, Any]] = []
    runs: dict[str, Any] = {}
    qrels: dict[str, dict[str, int]] = {}
    for ti, topic in enumerate(topics):
        convs = [c for c in ds.conversations if c.meta.get("topic") == topic]
        mems = bench.open(EPOCH + timedelta(days=1))
        for w in bench.writers(mems):
            for conv in convs:
                for j, t in enumerate(conv.sessions[0].turns):
                    at = EPOCH + timedelta(minutes=j)
                    if t.role == "user":
                        bench.remember(w, t.text, t.dia_id, user=conv.id, session="S1", at=at)
                    else:
                        w.insert_many([t.text], user=conv.id, metas=[{"dia_id": t.dia_id}], at=at)
                if noise:
                    w.insert_many([t.text for t in noise], user=conv.id, metas=[{"dia_id": t.dia_id} for t in noise],
                               at=EPOCH + timedelta(hours=1), vectors=noise_vecs)
        for rname, mem in mems.items():
            for q in (q for q in ds.questions if q.category_name == topic):
                key = f"{q.id}@{rname}"
                row = {"qid": key, "question_id": q.id, "topic": topic, "recipe": rname, "form": form,
                       "inter_turns": inter_turns, "error": None, **dict.fromkeys(PREFEVAL_KEYS, NAN)}
                qrels[key] = dict.fromkeys(q.evidence, 1)

                def score(q: datasets.Question = q, mem: Any = mem, key: str = key) -> dict[str, Any]:
                    ids = [m for m, _ in ranking(mem, q.question, user=q.conversation_id)]
                    found = mem.store.get_many(ids)
                    runs[key] = run_of([bench.dia(found[m]) for m in ids if m in found])
                    r = mem.recall(q.question, user=q.conversation_id, budget_tokens=budget)
                    packed = {bench.dia(p.memory) for p in r.memories}
                    return {"pref_packed": float(bool(packed & set(q.evidence))), "tokens": float(r.tokens_used),
                            "abstained": float(r.confidence == "unknown"), "confidence": r.confidence}

                guard(row, {"pref_packed": 0.0}, score)
                rows.append(row)
        Bench.close(mems)
        if progress:
            progress(ti + 1, len(topics), topic)
    if rows:
        ranked, _ = metrics.ranking_metrics(runs, qrels, ks=(5, 10))
        by_key = {r["qid"]: r for r in rows}
        for rr in ranked:
            by_key[rr["qid"]].update({k: rr[k] for k in ("R@5", "R@10", "RR")})
    aggregates = group_means(rows, PREFEVAL_KEYS, lambda r: [f"{r['recipe']} | all topics", f"{r['recipe']} | {r['topic']}"])
    return bench.result("prefeval", rows, aggregates, ds, limit=limit, budget=budget, form=form,
                        inter_turns=inter_turns)
