"""Calibration: labelled examples in, thresholds out (scikit-learn), and the calibrated recipe.

The calibration notebook (notebooks/30_calibration.ipynb) only calls these, `mnemo.lab.fitting`, and
the research wing's example builders (`mnemo.eval.calibration`: scenarios, LoCoMo, the trust set):

* examples: `play_pairs` (data/pairs through the write path: outcomes, and the cosine and judge
  score that duplicate_threshold, arbitration_low and supersede_threshold compare); the
  evidence a recall's bands cut (`top_evidence`, `decision`), read off each example there;
* fitting, in `mnemo.lab.fitting`: `curves` (ROC, PR), `choose_threshold`, `Calibrator` (isotonic, Platt),
  `reliability`, `wilson`; and here `abstention_folds` (vague_at chosen out of fold, by conversation)
  and `choose_write_params` (the write thresholds on the write-path benchmark's dev split);
* checking: `pair_metrics`, `evidence_metrics`; and `write_recipe`.

Every split is fixed by the data (a `split` field, or a stable hash of the conversation or
scenario name), so fitting never sees the held-out examples.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import RECIPE_DIR, Config, recipe
from ..errors import ConfigError
from .fitting import choose_threshold, curves

DATA = Path(__file__).resolve().parents[2] / "data"
PAIRS = DATA / "pairs" / "pairs.jsonl"
MERGE = frozenset({"duplicate", "corroborate"})
# Recall runs with both bands at 0 while examples are made, so that nothing abstains and the
# top evidence of every pack is observable; the bands are then fitted on that evidence.
OPEN_BANDS = {"certain_at": 0.0, "vague_at": 0.0}


def stable_split(key: str, heldout_every: int = 3) -> str:
    """Return "heldout" for one key in `heldout_every` (by a stable hash of `key`), else "train"."""
    digest = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16)
    return "heldout" if digest % heldout_every == 0 else "train"


def split_rows(rows: Sequence[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """Return the rows of one split ("train" or "heldout"), or all rows for "all"."""
    return [r for r in rows if split == "all" or r["split"] == split]


# ----------------------------------------------------------------- pairs (write thresholds)
def load_pairs(path: str | Path = PAIRS) -> list[dict[str, Any]]:
    """Return the labelled memory pairs, one JSON object a line (see data/pairs/README.md)."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def play_pairs(pairs: Sequence[dict[str, Any]], config: Config | str | None = None, embedder: Any = "auto",
               llm: str = "offline") -> list[dict[str, Any]]:
    """Return one row per pair: what writing the pair did, and the scores its thresholds would compare.

    Each pair is a user of one shared in-memory store: `old` is remembered, then `new` an hour
    later, through `Memory.remember`; `outcome` is "supersede" when a memory of the first turn
    was retired, "merge" when the second turn added nothing, else "add". Before the second write,
    the new text's extracted candidate nearest a stored memory is planned against it with
    `reconcile.plan_writes` under opened thresholds, to see which threshold decides the pair:
    `dup_reachable` when only `duplicate_threshold` stands between it and a duplicate (no
    structural rule or conflict decides first), `judged` when, in the arbitration band, the
    judge would be asked; `cosine` is their cosine and `judge` the judge's score.
    """
    from dataclasses import replace

    from ..clock import SimulatedClock
    from ..embed import make_embedder
    from ..extract import extract_offline
    from ..memory import Memory
    from ..reconcile import plan_writes

    emb = make_embedder(embedder)
    clock = SimulatedClock("2025-01-01")
    rows = []
    with Memory.open(":memory:", embedder=emb, llm=llm, clock=clock, config=config) as mem:
        # Opened thresholds: every conflict-free pair is a duplicate / every band pair is judged, none retired by it.
        open_dup = replace(mem.config.write, duplicate_threshold=-1.0)
        open_band = replace(mem.config.write, duplicate_threshold=2.0, arbitration_low=-1.0, supersede_threshold=2.0)
        for p in pairs:
            user = f"pair-{p['id']}"
            first = mem.remember(p["old"], user=user)
            olds = mem.memories(user)
            cands = [c for c in extract_offline(p["new"]) if c.command is None]
            cosine, judge, dup_reachable, judged = 0.0, 0.0, False, False
            if olds and cands:
                sims = _cosines(emb.embed([c.text for c in cands]), emb.embed([m.text for m in olds]))
                i, j = np.unravel_index(int(np.argmax(sims)), sims.shape)
                cosine, one = float(sims[i, j]), sims[i:i + 1, j:j + 1]
                dup_reachable = plan_writes([cands[i]], [olds[j]], one, open_dup, mem.judge)[0].op == "duplicate"
                verdicts = plan_writes([cands[i]], [olds[j]], one, open_band, mem.judge)[0].evidence.get("judge", [])
                judged = bool(verdicts)
                judge = max((float(v.get("score", 0.0)) for v in verdicts), default=0.0)
            clock.advance(hours=1)
            second = mem.remember(p["new"], user=user)
            first_ids = {m.id for m in first.added}
            retired = [m for m in mem.memories(user, include_inactive=True) if m.id in first_ids and not m.active]
            outcome = "supersede" if retired else ("merge" if not second.added else "add")
            rows.append({**p, "cosine": round(cosine, 4), "judge": round(judge, 4), "dup_reachable": dup_reachable,
                         "judged": judged, "outcome": outcome, "stored_old": len(first.added),
                         "expected": expected_outcome(p["label"])})
            clock.advance(hours=1)
    return rows


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def expected_outcome(label: str) -> str:
    """Return the write outcome a pair's label calls for: merge, supersede or add."""
    return "merge" if label in MERGE else "supersede" if label == "supersede" else "add"


def pair_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Return forgetting and merging figures over played pairs (micro-averaged over pairs).

    - forgetting precision: pairs whose old memory was retired that are labelled supersede,
      over pairs retired (1.0 when none was: nothing was retired wrongly);
    - forgetting recall: supersede pairs retired, over supersede pairs;
    - collateral: pairs not labelled supersede whose old memory was retired, over those pairs;
    - merge precision / recall: the same for "merge" against duplicate + corroborate labels;
    - lost updates: supersede pairs merged (the new value was dropped), over supersede pairs;
    - accuracy: outcome equals the expected outcome, over all pairs.
    """
    n = len(rows)
    sup = [r for r in rows if r["label"] == "supersede"]
    other = [r for r in rows if r["label"] != "supersede"]
    retired = [r for r in rows if r["outcome"] == "supersede"]
    merged = [r for r in rows if r["outcome"] == "merge"]
    merge_gold = [r for r in rows if r["label"] in MERGE]

    def share(k: int, d: int, empty: float = 0.0) -> float:
        return round(k / d, 4) if d else empty

    return {
        "pairs": float(n),
        "forgetting_precision": share(sum(r["label"] == "supersede" for r in retired), len(retired), 1.0),
        "forgetting_recall": share(sum(r["outcome"] == "supersede" for r in sup), len(sup)),
        "collateral": share(sum(r["outcome"] == "supersede" for r in other), len(other)),
        "merge_precision": share(sum(r["label"] in MERGE for r in merged), len(merged), 1.0),
        "merge_recall": share(sum(r["outcome"] == "merge" for r in merge_gold), len(merge_gold)),
        "lost_updates": share(sum(r["outcome"] == "merge" for r in sup), len(sup)),
        "accuracy": share(sum(r["outcome"] == r["expected"] for r in rows), n),
    }


# ----------------------------------------------------------------- recall evidence (confidence bands)
def top_evidence(recall: Any) -> float:
    """Return the evidence `certain_at` / `vague_at` cut: the best among the packed memories that count.

    That is recall's own figure (`provenance["evidence_top"]`, see `evidence.top_evidence`). A
    recall that abstained on its claims (a name the record never mentions) scores 0: no band
    would make it answer.
    """
    if recall.confidence == "unknown":
        return 0.0
    return float(recall.provenance.get("evidence_top", 0.0))


def decision(recall: Any) -> float:
    """Return the score `vague_at` cuts for this recall: its top evidence, or 2.0 when no band can hide it.

    A pack about the entity asked is "vague" at any evidence (`evidence.about_asked`), so for
    fitting and scoring bands it stands above every threshold; a claims abstention stands below (0).
    """
    if recall.confidence != "unknown" and recall.provenance.get("about_asked"):
        return 2.0
    return top_evidence(recall)


def evidence_metrics(rows: Sequence[dict[str, Any]], certain_at: float, vague_at: float) -> dict[str, float]:
    """Return what the bands do on examples: abstention on never-said, false abstention, certain precision.

    unknown = evidence < vague_at (recall abstains); certain = evidence >= certain_at.
    - abstention accuracy: never-said questions answered "unknown", over never-said questions;
    - false abstention: answerable questions answered "unknown", over answerable ones;
    - certain precision: "certain" packs that hold gold evidence, over "certain" packs;
    - certain share: "certain" packs over all questions;
    - unknown_<kind>: the share answered "unknown" per kind of question (answerable, adversarial, ...).
    """
    ev = np.array([_decided(r) for r in rows], dtype=float)
    ans = np.array([r["answerable"] for r in rows], dtype=bool)
    gold = np.array([r["gold_packed"] for r in rows], dtype=bool)
    unknown, certain = ev < vague_at, ev >= certain_at

    def mean(mask: np.ndarray, of: np.ndarray) -> float | None:
        return round(float(mask[of].mean()), 4) if of.any() else None

    kinds = np.array([r.get("kind", "") for r in rows])
    return {"n": float(len(rows)), "abstention_accuracy": mean(unknown, ~ans), "false_abstention": mean(unknown, ans),
            "certain_precision": mean(gold, certain), "certain_share": mean(certain, np.ones(len(rows), bool)),
            **{f"unknown_{k}": mean(unknown, kinds == k) for k in sorted(set(kinds.tolist()))}}


def abstention_folds(rows: Sequence[dict[str, Any]], folds: int = 4, answerable_recall: float = 0.9
                     ) -> dict[str, Any]:
    """Return `vague_at` chosen per fold on the other folds' conversations, and abstention on the held-out ones.

    `rows` are `locomo_examples` (or `scenario_examples`): one question each, with its top
    evidence, its `decision` (the score the bands cut, `decision`), `answerable`, `kind` and
    `group` (the conversation). Groups are sorted and dealt round-robin into `folds`. On the
    training folds, `vague_at` is the highest threshold that keeps `answerable_recall` of the
    answerable questions that recall's claims left open (decision > 0: a question the claims
    abstain on, "the record never mentions X", no band can answer). The held-out fold is then
    scored as recall would answer it:
    - abstention precision: questions answered "unknown" that the record cannot answer, over all "unknown";
    - abstention recall (per kind): never-said questions answered "unknown", over those questions;
    - false abstention: answerable questions answered "unknown", over answerable ones.
    Returns {"folds": [per fold: test groups, vague_at, the training rule's point, held-out
    metrics], "heldout": the held-out metrics pooled over folds, "auc": ROC AUC of the decision
    score, answerable against each never-said kind, over all rows}.
    """
    groups = sorted({r["group"] for r in rows})
    if folds < 2 or folds > len(groups):
        raise ConfigError(f"folds must be between 2 and the number of groups ({len(groups)}), got {folds}")
    split = [groups[k::folds] for k in range(folds)]
    out, held_all = [], []
    for k, test in enumerate(split):
        train = [r for r in rows if r["group"] not in test and _decided(r) > 0]
        pick = choose_threshold([r["answerable"] for r in train], [_decided(r) for r in train],
                                min_recall=answerable_recall)
        held = [{**r, "vague_at": pick["threshold"]} for r in rows if r["group"] in test]
        held_all += held
        out.append({"fold": k, "test": test, "vague_at": round(pick["threshold"], 4), "rule": pick["rule"],
                    "train_point": {x: pick[x] for x in ("precision", "recall", "fpr")},
                    "heldout": _abstention(held)})
    kinds = sorted({r["kind"] for r in rows} - {"answerable"})
    auc = {}
    for kind in kinds:
        sub = [r for r in rows if r["kind"] in ("answerable", kind)]
        found = curves([r["answerable"] for r in sub], [_decided(r) for r in sub])["auc"]
        if found is not None:
            auc[kind] = round(found, 4)
    return {"folds": out, "heldout": _abstention(held_all), "auc": auc, "answerable_recall": answerable_recall}


def _decided(row: dict[str, Any]) -> float:
    """Return the score a row's bands cut: its `decision` (see `decision`), else its evidence."""
    return float(row.get("decision", row["evidence"]))


def _abstention(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return abstention precision, recall per kind and false abstention of rows carrying their own `vague_at`."""
    unknown = [_decided(r) < r["vague_at"] for r in rows]
    never = [not r["answerable"] for r in rows]
    said = sum(unknown)
    out = {"n": len(rows), "abstained": said,
           "abstention_precision": round(sum(u and n for u, n in zip(unknown, never, strict=True)) / said, 4)
           if said else None,
           "false_abstention": round(sum(u for u, n in zip(unknown, never, strict=True) if not n)
                                     / max(1, sum(not n for n in never)), 4)}
    for kind in sorted({r["kind"] for r in rows} - {"answerable"}):
        of = [u for u, r in zip(unknown, rows, strict=True) if r["kind"] == kind]
        out[f"abstention_recall_{kind}"] = round(sum(of) / len(of), 4) if of else None
    return out


# ----------------------------------------------------------------- the recipe
def write_recipe(name: str, params: dict[str, Any], provenance: dict[str, Any], *, base: str = "default",
                 folder: str | Path | None = None) -> Path:
    """Write `folder/<name>.json` ({"base", "params", "provenance"}) after checking it loads; return its path.

    The default folder is mnemo/recipes/, where `mnemo.config.recipe(name)` finds it.
    Unknown parameter names raise ConfigError before anything is written.
    """
    Config.from_params(base, **params)
    target = Path(folder) if folder is not None else RECIPE_DIR
    target.mkdir(parents=True, exist_ok=True)
    path = (target / f"{name}.json").resolve()
    payload = {"base": base, "params": params, "provenance": provenance}
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    if target.resolve() == RECIPE_DIR.resolve():
        recipe(name)
    return path


# ----------------------------------------------------------------- write thresholds on the write-path benchmark
WRITE_GRID = {"duplicate_threshold": (0.92, 0.96), "arbitration_low": (0.7, 0.8), "slot_threshold": (0.7, 0.8, 0.9)}
# The write-path rates one objective averages (mnemo.eval.bench.writes defines each); collateral subtracts.
WRITE_RATES = ("duplicate_precision", "paraphrase_handled", "correction_recall", "correction_precision",
               "negative_kept", "negation_handled", "forget_precision", "forget_recall")


def grid_points(grid: dict[str, Sequence[float]]) -> list[dict[str, float]]:
    """Return every combination of a grid of parameter values, in a stable order."""
    points: list[dict[str, float]] = [{}]
    for name, values in grid.items():
        points = [{**p, name: float(v)} for p in points for v in values]
    return points


def write_objective(headline: dict[str, float]) -> float:
    """Return one number for a write-path headline: the mean of WRITE_RATES (a missing rate counts 0) minus collateral.

    Every rate is in [0, 1] and higher is better; collateral (memories lost beside a forget) is
    subtracted whole, so losing what should survive costs as much as any rate.
    """
    rates = [headline.get(k) for k in WRITE_RATES]
    mean = sum(0.0 if v is None or v != v else float(v) for v in rates) / len(rates)
    collateral = headline.get("collateral")
    return mean - (0.0 if collateral is None or collateral != collateral else float(collateral))


def best_on_dev(points: Sequence[dict[str, Any]], default: dict[str, float]) -> dict[str, float]:
    """Return the params of the point with the best dev objective (ties: the one nearest the default)."""
    def distance(p: dict[str, float]) -> float:
        return sum(abs(p[k] - default.get(k, p[k])) for k in p)

    best = max(points, key=lambda pt: (round(write_objective(pt["dev"]), 6), -distance(pt["params"])))
    return dict(best["params"])


def choose_write_params(points: Sequence[dict[str, Any]], default: dict[str, float]) -> dict[str, Any]:
    """Return the write thresholds chosen on the dev split, kept only if they beat the default on the test split.

    `points`: one per grid point, {"params", "dev", "test"} with the write-path headlines of each
    split ("test" may be None for points not checked there). The point with the best dev objective
    is chosen (ties: the one nearest the default). It ships when its test objective is above the
    default's; else the default stays, with the rule saying so.
    """
    scored = [{**pt, "dev_objective": write_objective(pt["dev"])} for pt in points]
    best = next(pt for pt in scored if pt["params"] == best_on_dev(points, default))
    base = next((pt for pt in scored if all(abs(pt["params"][k] - default[k]) < 1e-9 for k in pt["params"])), None)
    if base is None or base.get("test") is None or best.get("test") is None:
        raise ConfigError("choose_write_params needs the default point and the chosen point checked on the test split")
    chosen_test, default_test = write_objective(best["test"]), write_objective(base["test"])
    ships = chosen_test > default_test and best is not base
    return {"params": dict(best["params"]) if ships else {k: default[k] for k in best["params"]},
            "chosen": dict(best["params"]), "dev_objective": best["dev_objective"],
            "test_objective": chosen_test, "default_test_objective": default_test,
            "rule": ("beats the default on the test split" if ships else
                     "unmet: the dev choice does not beat the default on the test split; default kept"),
            "points": [{**pt["params"], "dev_objective": pt["dev_objective"]} for pt in scored]}
