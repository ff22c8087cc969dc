"""Answerability, fitted on labelled questions by conversation folds: when is the record silent?

    res = run_answerable(folds=4, save="mnemo/recipes/answerable.json")   # mnemo eval answerable --save ...

Labelled questions, each asked of a store holding its conversation:

* **LoCoMo** categories 1-4 are answerable, category 5 (adversarial: asks of something never
  said) is not; **REALTALK**'s questions are all answerable; **BEAM**'s abstention probes are not,
  and its information-extraction, event-ordering, knowledge-update, temporal and multi-session
  probes are;
* **near misses**, made from answerable questions so that the record does not hold the answer:
  the thing asked for is swapped for one another conversation's question asks for and this
  conversation never mentions ("What instrument is Caroline learning?" -> "What vehicle is
  Caroline learning?"), or the person named is swapped for a name the conversation never says.

Each conversation is stored in ways that cover the stores recall meets: its turns as said
(`Memory.insert_many`, "Name: text") and, for LoCoMo and REALTALK, through the write path
(`remember_many`, speakers named), whole (hundreds of turns); and sessions alone (a few dozen
turns: `SESSIONS` of each conversation, as said and through the write path), asked the questions
whose evidence is all in that session (answerable), their near misses, and as many questions whose
evidence is all in other sessions (the session is silent on them: "other_session"). The features are recall's own (`recall.judge.features`,
read from `Recall.provenance["answerability"]`), so what is fitted is what runs.

Folds are by conversation. For each fold the model is fitted on the others and its thresholds
chosen there: "unknown" below the highest threshold that keeps false "unknown" on the training
folds' answerable questions at or under `FALSE_UNKNOWN` (3%), "certain" from where P(answerable)
reaches `CERTAIN_PRECISION`; it is then scored on its own fold. Reported per dataset, out of fold:
false "unknown" on answerable questions and "unknown" on unanswerable ones, with ROC AUC, Brier
score and the reliability table (`fitting.reliability`). Beside them, what the recipe itself said
(`recipe_false_unknown`, `recipe_unknown_on_unanswerable`: the claim rules decide, the model of the
other folds rescues their "unknown" at the default recipe's `rescue_at`). Each row keeps its features, so
a model can be refitted from the rows without asking again. The model saved is fitted
on every fold.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from mnemo.errors import ConfigError
from mnemo.eval import datasets
from mnemo.eval.bench.common import Bench, BenchResult, add_turns, register, session_times
from mnemo.recall.judge import FEATURES, fit

FALSE_UNKNOWN = 0.03  # false "unknown" allowed on the training folds' answerable questions
CERTAIN_PRECISION = 0.8  # share of answerable questions among those called "certain", on the training folds
ANSWERABLE_BEAM = {"information_extraction", "event_ordering", "knowledge_update", "temporal_reasoning",
                   "multi_session_reasoning"}
SOURCES = ("locomo", "realtalk", "beam")
SESSIONS = 4  # single-session stores built from each LoCoMo / REALTALK conversation


@dataclass(frozen=True)
class Asked:
    """A question asked of one conversation's store, with whether the record answers it."""

    conversation: str
    dataset: str
    question: str
    answerable: int
    kind: str  # answerable | unanswerable | near_miss_thing | near_miss_name


def questions(ds: datasets.Dataset, name: str) -> list[Asked]:
    """Return the labelled questions of one dataset (near misses added in `near_misses`)."""
    out = []
    for q in ds.questions:
        if name == "locomo":
            label = int(q.category != 5)
        elif name == "beam":
            if q.category_name == "abstention":
                label = 0
            elif q.category_name in ANSWERABLE_BEAM:
                label = 1
            else:
                continue
        else:
            label = 1
        out.append(Asked(q.conversation_id, name, q.question, label, "answerable" if label else "unanswerable"))
    return out


def near_misses(asked: list[Asked], texts: dict[str, str], seed: int = 0) -> list[Asked]:
    """Return one near miss per answerable question where one can be made (see the module docstring)."""
    from mnemo.extract.questions import ask
    from mnemo.recall.judge import asked_phrase

    rng = random.Random(seed)
    readings = {a: ask(a.question) for a in asked if a.answerable}
    things = sorted({p.lower() for q in readings.values() if (p := asked_phrase(q)) and len(p.split()) == 1})
    names = sorted({n for q in readings.values() for n in q.names if n.isalpha()})
    out = []
    for k, (a, q) in enumerate(readings.items()):
        said = texts[a.conversation].lower()
        phrase = asked_phrase(q)
        if k % 2 == 0 and phrase and len(phrase.split()) == 1 and re.search(rf"\b{re.escape(phrase)}\b", a.question,
                                                                             re.I):
            pool = [t for t in things if t != phrase.lower() and t not in said]
            if pool:
                swap = rng.choice(pool)
                text = re.sub(rf"\b{re.escape(phrase)}\b", swap, a.question, count=1, flags=re.I)
                out.append(Asked(a.conversation, a.dataset, text, 0, "near_miss_thing"))
                continue
        named = [n for n in q.names if n.isalpha() and re.search(rf"\b{re.escape(n)}\b", a.question, re.I)]
        pool = [n for n in names if n.lower() not in said]
        if named and pool:
            text = re.sub(rf"\b{re.escape(named[0])}\b", rng.choice(pool).title(), a.question, count=1, flags=re.I)
            out.append(Asked(a.conversation, a.dataset, text, 0, "near_miss_name"))
    return out


def _sessions(conv: datasets.Conversation, times: list, ds: datasets.Dataset, name: str, seed: int
              ) -> list[tuple[datasets.Conversation, list, list[Asked]]]:
    """Return up to `SESSIONS` single-session stores of a conversation, each with its labelled questions."""
    rng = random.Random(seed)
    where = {t.dia_id: s.id for s in conv.sessions for t in s.turns}
    qs = [q for q in ds.questions if q.conversation_id == conv.id and q.evidence and q.answer is not None
          and all(e in where for e in q.evidence) and len({where[e] for e in q.evidence}) == 1]
    by_session: dict[str, list] = {}
    for q in qs:
        by_session.setdefault(where[q.evidence[0]], []).append(q)
    picked = sorted(by_session, key=lambda sid: -len(by_session[sid]))[:SESSIONS]
    out = []
    for sid in picked:
        k = next(i for i, s in enumerate(conv.sessions) if s.id == sid)
        part = datasets.Conversation(conv.id, conv.speakers, [conv.sessions[k]], conv.meta)
        own = [Asked(conv.id, name, q.question, 1, "answerable") for q in by_session[sid]]
        others = [q for s2, items in by_session.items() if s2 != sid for q in items]
        silent = [Asked(conv.id, name, q.question, 0, "other_session")
                  for q in rng.sample(others, min(len(own), len(others)))]
        text = " ".join(t.text for t in conv.sessions[k].turns)
        out.append((part, [times[k]], own + silent + near_misses(own, {conv.id: text}, seed=seed)))
    return out


def _line(turn: datasets.DialogTurn) -> str:
    return turn.text if turn.speaker == "user" else f"{turn.speaker}: {turn.text}"


def featurise(names: Sequence[str], embedder: Any, limit: int | None, progress: Any = None
              ) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Return (features, labels, one info dict a row) of every labelled question, asked of its stores."""
    # The claim rules alone ("claim-rules"): the features do not depend on a fitted model, and the one being
    # refitted may not load (its features are another version's). What the default recipe says is then the
    # rules with the out-of-fold model's rescue (`_recipe_scores`).
    bench = Bench(("claim-rules",), embedder, "offline")
    rows: list[list[float]] = []
    labels: list[int] = []
    info: list[dict[str, Any]] = []
    convs = [(name, c, ds) for name in names for ds in [datasets.load(name)]
             for c in (ds.conversations[:limit] if limit else ds.conversations)]
    for n, (name, conv, ds) in enumerate(convs):
        asked = [a for a in questions(ds, name) if a.conversation == conv.id]
        text = " ".join(t.text for t in conv.turns)
        asked += near_misses(asked, {conv.id: text}, seed=n)
        times = session_times(conv)
        ways = ["turns", "written"] if name != "beam" else ["turns"]
        plays = [(way, conv, times, asked) for way in ways]
        if name != "beam":
            plays += [(f"session {way}", part, part_times, part_asked) for way in ways
                      for part, part_times, part_asked in _sessions(conv, times, ds, name, n)]
        for way, store_conv, store_times, store_asked in plays:
            mem = bench.open(max(store_times) + timedelta(days=1))["claim-rules"]
            if way.endswith("turns"):
                add_turns(mem, store_conv, store_times, bench.emb.embed([t.document for t in store_conv.turns]))
            else:
                mem.remember_many([{"text": _line(t), "session": f"{conv.id}/{s.id}", "at": at}
                                   for s, at in zip(store_conv.sessions, store_times, strict=True)
                                   for t in s.turns if t.role == "user"], user=conv.id)
            for a in store_asked:
                r = mem.recall(a.question, user=conv.id, budget_tokens=512)
                rows.append(r.provenance["answerability"]["features"])
                labels.append(a.answerable)
                info.append({"conversation": conv.id, "dataset": name, "store": way, "kind": a.kind,
                             "question": a.question, "answerable": a.answerable, "rules": r.confidence,
                             "features": rows[-1]})
            mem.close()
        if progress:
            progress(n + 1, len(convs), conv.id)
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)), np.asarray(labels, dtype=int), info


def thresholds(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """Return (vague_at, certain_at) chosen on training rows (see the module docstring)."""
    pos = np.sort(p[y == 1])
    vague_at = float(pos[int(np.floor(FALSE_UNKNOWN * len(pos)))]) if len(pos) else 0.5
    certain_at = 1.0
    for t in sorted(set(np.round(p, 3).tolist())):
        hit = p >= t
        if hit.sum() >= 20 and y[hit].mean() >= CERTAIN_PRECISION:
            certain_at = float(t)
            break
    return vague_at, max(certain_at, vague_at)


def _scores(y: np.ndarray, p: np.ndarray, vague_at: float) -> dict[str, float]:
    from sklearn.metrics import brier_score_loss, roc_auc_score

    unknown = p < vague_at
    out = {"n": float(len(y)), "false_unknown": float(unknown[y == 1].mean()) if (y == 1).any() else float("nan"),
           "unknown_on_unanswerable": float(unknown[y == 0].mean()) if (y == 0).any() else float("nan"),
           "brier": float(brier_score_loss(y, p)) if len(y) else float("nan")}
    out["auc"] = float(roc_auc_score(y, p)) if len(set(y.tolist())) == 2 else float("nan")
    return out


@register("answerable")
def run_answerable(recipes: Sequence[str] = ("default",), *, embedder: Any = "minilm", n_folds: int = 4,
                   limit: int | None = None, save: str | None = None, data: Sequence[str] = SOURCES,
                   rows_from: str | None = None, progress: Any = None,
                   **_: Any) -> BenchResult:
    """Fit answerability out of fold, report it per dataset and kind, and save the model fitted on all folds."""
    from mnemo.config import recipe
    from mnemo.lab.fitting import reliability

    if rows_from:
        x, y, info = _read_rows(rows_from)
        names = [n for n in data if any(i["dataset"] == n for i in info)]
    else:
        names = [n for n in data if _available(n)]
        x, y, info = featurise(names, embedder, limit, progress)
    convs = sorted({i["conversation"] for i in info})
    folds = n_folds
    fold_by_conv = {c: k % folds for k, c in enumerate(convs)}
    fold_of = np.array([fold_by_conv[i["conversation"]] for i in info])
    chosen = []
    p_oof = _oof(x, y, fold_of)
    for k in range(folds):
        test = fold_of == k
        if not test.any() or len(set(y[~test].tolist())) < 2:
            continue
        # The thresholds are chosen on the training folds' own out-of-fold probabilities (a fitted model reads
        # its training rows too well to place a threshold on them).
        vague_at, certain_at = thresholds(y[~test], _oof(x[~test], y[~test], fold_of[~test]))
        chosen.append((vague_at, certain_at))
        for i in np.flatnonzero(test):
            info[i]["vague_at"] = vague_at
    rows = []
    for i, row in enumerate(info):
        unknown = p_oof[i] < row.get("vague_at", 0.5)
        rows.append({"qid": f"{row['conversation']}/{row['store']}/{i}", **row, "p": float(p_oof[i]),
                     "unknown": float(unknown), "error": None})
    aggregates: dict[str, dict[str, float]] = {}
    for group in ["all", *names, *(f"{n} | {s}" for n in names for s in ("turns", "written", "session turns",
                                                                          "session written"))]:
        pick = np.array([group == "all" or r["dataset"] == group or f"{r['dataset']} | {r['store']}" == group
                         for r in rows])
        if pick.any():
            yy, pp = y[pick], p_oof[pick]
            unknown = np.array([r["unknown"] for r, k in zip(rows, pick, strict=True) if k]).astype(bool)
            aggregates[group] = {"n": float(pick.sum()),
                                 "false_unknown": float(unknown[yy == 1].mean()) if (yy == 1).any() else float("nan"),
                                 "unknown_on_unanswerable": float(unknown[yy == 0].mean()) if (yy == 0).any()
                                 else float("nan"), **{k: v for k, v in _scores(yy, pp, 0.0).items()
                                                       if k in ("auc", "brier")},
                                 **_recipe_scores([r for r, k in zip(rows, pick, strict=True) if k])}
    final = fit(x, y)
    vague_at, certain_at = thresholds(y, p_oof)
    from dataclasses import replace

    final = replace(final, vague_at=vague_at, certain_at=certain_at, info={
        "fitted_on": names, "embedder": str(embedder), "rows": int(len(y)), "answerable": int(y.sum()),
        "folds": folds, "fold_thresholds": chosen, "false_unknown_target": FALSE_UNKNOWN,
        "certain_precision_target": CERTAIN_PRECISION, "out_of_fold": aggregates,
        "reliability": reliability(y.tolist(), p_oof.tolist())})
    if save:
        Path(save).write_text(json.dumps(final.to_json(), indent=1, default=float) + "\n", encoding="utf-8")
    cfg = recipe(recipes[0])
    return BenchResult("answerable", rows, aggregates, {cfg.recipe: cfg}, {"embedder": str(embedder)}, {},
                       {"folds": folds, "vague_at": vague_at, "certain_at": certain_at, "saved": save,
                        "rows_from": rows_from})


def _oof(x: np.ndarray, y: np.ndarray, fold_of: np.ndarray) -> np.ndarray:
    """Return out-of-fold probabilities over the folds present in `fold_of`."""
    p = np.zeros(len(y))
    for k in sorted(set(fold_of.tolist())):
        test = fold_of == k
        if len(set(y[~test].tolist())) < 2:
            p[test] = float(y[~test].mean()) if (~test).any() else 0.5
            continue
        model = fit(x[~test], y[~test])
        p[test] = [model.probability(r) for r in x[test]]
    return p


def _read_rows(path: str) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Return (features, labels, info) from the rows.parquet of an earlier run: a refit without asking again."""
    import pandas as pd

    frame = pd.read_parquet(path)
    keep = ["conversation", "dataset", "store", "kind", "question", "answerable", "rules"]
    feats = [json.loads(v) if isinstance(v, str) else list(v) for v in frame["features"]]
    if any(len(f) != len(FEATURES) for f in feats):
        raise ConfigError(f"{path}: its rows' features are not this version's {len(FEATURES)}; run without --rows")
    info = [{**{k: r[k] for k in keep}, "answerable": int(r["answerable"]), "features": f}
            for r, f in zip(frame[keep].to_dict("records"), feats, strict=True)]
    return np.asarray(feats, dtype=np.float64), np.asarray([i["answerable"] for i in info], dtype=int), info


def _recipe_scores(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Return what the default recipe says, out of fold: the claim rules' "unknown" (`rules`) unless the model
    of the other folds rescues it (P(answerable) >= the recipe's `rescue_at`), beside the model's own figures."""
    from mnemo.config import recipe

    rescue_at = recipe("default").recall.rescue_at
    said = [(r["answerable"], r["rules"] == "unknown" and (rescue_at is None or r["p"] < rescue_at)) for r in rows]
    yes = [u for a, u in said if a]
    no = [u for a, u in said if not a]
    return {"recipe_false_unknown": sum(yes) / len(yes) if yes else float("nan"),
            "recipe_unknown_on_unanswerable": sum(no) / len(no) if no else float("nan")}


def _available(name: str) -> bool:
    try:
        datasets.load(name)
    except datasets.DatasetError:
        return False
    return True
