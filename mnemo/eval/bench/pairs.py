"""Labelled update pairs, their features as reconciliation computes them, and the fitted update model.

    pairs = labelled_pairs("dev")                   # (old, new, label, source) from three sources
    table = featurise(pairs)                         # one row per (claim, memory) the write path would weigh
    res = run_pairs(save="mnemo/recipes/updates.json")   # mnemo eval pairs --save ...: fit on dev, report on test

Sources, each split by its own unit so that no fact is in both splits:

* **the write-path benchmark** (`datasets.writes`, split by subject / family): correction -> update,
  correction_negative -> distinct, duplicate_paraphrase -> same, negation -> update (a retraction),
  duplicate_distinct -> distinct (neighbouring facts of one relation about other subjects), and
  other_relation -> distinct (two facts of one subject under two relations: the model must not read
  "same subject, another value" as an update when the slot is another one);
* **BEAM** knowledge_update and contradiction_resolution probes: the message that states the
  original fact and the one that updates (or contradicts) it -> update. Chats below 10 are dev,
  above are test (chats that are multiples of 5 are held out by the maintainers and not here);
* **the project's labelled pairs** (`data/pairs/pairs.jsonl`): duplicate / corroborate -> same,
  supersede -> update, novel -> distinct; its `train` rows are dev, its `heldout` rows test;
* **LoCoMo** (split by conversation as the write-path benchmark splits it): two turns of one speaker
  in one session, one after the other, as "Name: text" lines -> distinct. People add to what they
  said far more often than they correct it, so this is where the model sees one person's many
  facts in one slot ("I love painting", "I love hiking") that must all stay; a rare correction
  among them is label noise, not a rule.

Each pair is played through the write path's own stages: the old text's claims become memories
(`write.materialise`), then the new text's claims are extracted, embedded and set against them
exactly as `plan_writes` does (`reconcile.pool`, `reconcile.features_of`). A pair labels the (claim, memory) pair whose
sentences are closest (for BEAM, closest to the probe's question as well); the other pairs of the
same play are distinct when the pair's label is distinct, else left out (their label is unknown).

The model (`mnemo.updates.fit`) is fitted on dev; its thresholds are chosen on dev: P(update) at
the lowest value whose dev precision is at least `UPDATE_PRECISION`, P(same) likewise with
`SAME_PRECISION`. The test figures are computed once, after both are fixed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from mnemo.eval import datasets
from mnemo.eval.bench.common import BenchResult, register
from mnemo.updates import CLASSES, FEATURES, fit

UPDATE_PRECISION = 0.95  # a retirement is costly: dev precision at the chosen threshold
SAME_PRECISION = 0.97  # a merge loses a fact when wrong
PAIRS_FILE = Path(__file__).resolve().parents[3] / "data" / "pairs" / "pairs.jsonl"
_WRITES_LABEL = {"correction": "update", "correction_negative": "distinct", "duplicate_paraphrase": "same",
                 "negation": "update"}
_PAIRS_LABEL = {"duplicate": "same", "corroborate": "same", "supersede": "update", "novel": "distinct"}
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Pair:
    """A stored statement and a later one, with what a correct write does with the later one."""

    id: str
    old: str
    new: str
    label: str  # distinct | same | update
    source: str  # writes:<family> | beam:<ability> | pairs:<family>
    focus: str = ""  # a text the pair is about (BEAM: the probe's question), to pick the claims it labels


def labelled_pairs(split: str) -> list[Pair]:
    """Return the labelled pairs of `split` ("dev" or "test") from every source that is available."""
    from mnemo.eval.datasets.writes import build_examples

    out: list[Pair] = []
    said: dict[str, dict[str, str]] = {}  # subject unit -> {relation: a statement of it}
    for e in build_examples(split):
        texts = [s.text for s in e.steps if s.action == "remember"]
        if e.family in _WRITES_LABEL and len(texts) >= 2:
            out.append(Pair(e.id, texts[0], texts[1], _WRITES_LABEL[e.family], f"writes:{e.family}"))
        elif e.family == "duplicate_distinct":
            out += [Pair(f"{e.id}/{k}", texts[k], texts[k + 1], "distinct", "writes:duplicate_distinct")
                    for k in range(min(3, len(texts) - 1))]
        if e.unit.startswith("mquake:") and e.meta.get("relation") and texts:
            said.setdefault(e.unit, {}).setdefault(e.meta["relation"], texts[0])
    # One subject's facts under two relations ("X's capital is A", "X's official language is B") stand side by side.
    others = [Pair(f"{unit}/{a}-{b}", facts[a], facts[b], "distinct", "writes:other_relation")
              for unit, facts in sorted(said.items()) for a, b in zip(sorted(facts), sorted(facts)[1:], strict=False)]
    out += others[:OTHER_RELATION]
    out += _beam_pairs(split)
    out += _project_pairs(split)
    out += _locomo_pairs(split)
    return out


OTHER_RELATION = 400  # same-subject, other-relation pairs a split takes (the start of the sorted list)
LOCOMO_PAIRS = 300  # consecutive same-speaker pairs a split takes from LoCoMo, spread over its conversations


def _locomo_pairs(split: str) -> list[Pair]:
    from mnemo.eval.datasets.writes import LOCOMO_DEV

    try:
        ds = datasets.load("locomo")
    except datasets.DatasetError:
        return []
    convs = [c for c in ds.conversations if (c.id in LOCOMO_DEV) == (split == "dev")]
    found: list[Pair] = []
    for conv in convs:
        for session in conv.sessions:
            by_speaker: dict[str, list[datasets.DialogTurn]] = {}
            for t in session.turns:
                by_speaker.setdefault(t.speaker, []).append(t)
            for speaker, turns in by_speaker.items():
                found += [Pair(f"{conv.id}/{a.dia_id}-{b.dia_id}", f"{speaker}: {a.text}", f"{speaker}: {b.text}",
                               "distinct", "locomo:same_speaker") for a, b in zip(turns, turns[1:], strict=False)]
    step = max(1, len(found) // LOCOMO_PAIRS)
    return found[::step][:LOCOMO_PAIRS]


def _beam_pairs(split: str) -> list[Pair]:
    try:
        ds = datasets.load("beam")
    except datasets.DatasetError:
        return []
    turns = {(c.id, t.dia_id): t.text for c in ds.conversations for t in c.turns}
    out = []
    for q in ds.questions:
        number = int("".join(ch for ch in q.conversation_id if ch.isdigit()) or 0)
        if ("dev" if number < 10 else "test") != split:
            continue
        old_ids = q.extra.get("stale_ids") or q.extra.get("first_ids") or []
        new_ids = q.extra.get("current_ids") or q.extra.get("second_ids") or []
        for o in old_ids[:1]:
            for n in new_ids[:1]:
                if (q.conversation_id, o) in turns and (q.conversation_id, n) in turns and o != n:
                    first, second = sorted([o, n], key=lambda i: int(i) if i.isdigit() else 0)
                    out.append(Pair(q.id, turns[(q.conversation_id, first)], turns[(q.conversation_id, second)],
                                    "update", f"beam:{q.category_name}", focus=q.question))
    return out


def _project_pairs(split: str) -> list[Pair]:
    if not PAIRS_FILE.is_file():
        return []
    rows = [json.loads(line) for line in PAIRS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    want = "train" if split == "dev" else "heldout"
    return [Pair(r["id"], r["old"], r["new"], _PAIRS_LABEL[r["label"]], f"pairs:{r['family']}")
            for r in rows if r["split"] == want]


def featurise(pairs: Sequence[Pair], embedder: Any = "minilm") -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Return (features, labels as indices into CLASSES, one info dict a row) for the pairs, via the write path.

    The old statement's claims become memories as the write path makes them (`write.materialise`,
    into an empty store, so all are added), the new statement's claims are set against them as
    `plan_writes` sets them (`reconcile.row`, `pool`, `features_of`). Texts and slot phrases are
    embedded in batches, once.
    """
    from mnemo import reconcile as rec
    from mnemo import write as write_stage
    from mnemo.config import Config
    from mnemo.embed import make_embedder
    from mnemo.eval.bench.common import CachedEmbedder
    from mnemo.extract import extract_offline
    from mnemo.model import Turn

    cfg = Config.from_params(update_model=False)
    emb = CachedEmbedder(make_embedder(embedder))
    played = []
    for k, p in enumerate(pairs):
        old_turn = Turn(id=f"o{k}", user="u", text=p.old, at=T0, session="s")
        olds = [c for c in extract_offline(p.old, now=T0, cfg=cfg.write, user="u") if c.command is None]
        news = [c for c in extract_offline(p.new, context=[old_turn], now=T0 + timedelta(hours=1), cfg=cfg.write,
                                           user="u") if c.command is None]
        if olds and news:
            played.append((p, [write_stage.materialise(c, old_turn, cfg) for c in olds], news))
    texts = [t for _, olds, news in played for t in [*(m.text for m in olds), *(c.text for c in news)]]
    phrases = [x for _, olds, news in played for x in map(write_stage.slot_phrase, [*olds, *news]) if x]
    emb.embed(list(dict.fromkeys(texts + phrases + [p.focus for p, _, _ in played if p.focus])))
    rows: list[list[float]] = []
    labels: list[int] = []
    info: list[dict] = []
    for p, active, cands in played:
        avecs = emb.embed([m.text for m in active])
        vecs = emb.embed([c.text for c in cands])
        sims = vecs @ avecs.T
        slots = write_stage.slot_similarity(emb, cands, active)
        scored = []
        for i, c in enumerate(cands):
            r = rec.row(i, c, active, sims[i], slots[i], cfg.write)
            js = rec.pool(r)
            scored += [(i, j, x) for j, x in zip(js, rec.features_of(r, js), strict=True)]
        if not scored:
            continue
        focus = emb.embed([p.focus])[0] if p.focus else None
        best = max(scored, key=lambda item: _closeness(item, sims, vecs, avecs, focus))
        for item in scored:
            if item is not best and p.label != "distinct":
                continue
            label = p.label if item is best else "distinct"
            rows.append(item[2])
            labels.append(CLASSES.index(label))
            info.append({"pair": p.id, "source": p.source, "label": label, "labelled": item is best})
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)), np.asarray(labels, dtype=int), info


def _closeness(item: tuple[int, int, list[float]], sims: np.ndarray, vecs: np.ndarray, avecs: np.ndarray,
               focus: np.ndarray | None) -> float:
    """Return how close a (claim, memory) pair's sentences are, and, with a focus, how close both are to it."""
    i, j, _ = item
    return float(sims[i, j]) + (float(vecs[i] @ focus) + float(avecs[j] @ focus) if focus is not None else 0.0)


def _threshold(y: np.ndarray, p: np.ndarray, want: float) -> float:
    """Return the lowest threshold on p whose precision for y == 1 is at least `want` (1.0 when none is)."""
    best = 1.0
    for t in sorted(set(np.round(p, 3).tolist()), reverse=True):
        hit = p >= t
        if hit.sum() and (y[hit].mean() >= want):
            best = t
        elif hit.sum() >= 20:
            break
    return float(best)


def scores(model: Any, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Return precision and recall of update and same at the model's thresholds, and the accuracy."""
    from sklearn.metrics import precision_score, recall_score

    p = model.proba(x.tolist())
    pred = np.full(len(y), CLASSES.index("distinct"))
    pred[p[:, CLASSES.index("same")] >= model.same_at] = CLASSES.index("same")
    pred[p[:, CLASSES.index("update")] >= model.update_at] = CLASSES.index("update")
    out: dict[str, float] = {"n": float(len(y)), "accuracy": float((pred == y).mean()) if len(y) else float("nan")}
    for name in ("update", "same"):
        k = CLASSES.index(name)
        out[f"{name}_precision"] = float(precision_score(y == k, pred == k, zero_division=0))
        out[f"{name}_recall"] = float(recall_score(y == k, pred == k, zero_division=0))
        out[f"{name}_n"] = float((y == k).sum())
    return out


@register("pairs")
def run_pairs(recipes: Sequence[str] = ("default",), *, embedder: Any = "minilm", save: str | None = None,
              limit: int | None = None, progress: Any = None, **_: Any) -> BenchResult:
    """Fit the update model on the dev pairs, choose its thresholds on dev, report dev and test; save it if asked."""
    from mnemo.config import recipe

    found = {}
    for split in ("dev", "test"):
        pairs = labelled_pairs(split)[:limit] if limit else labelled_pairs(split)
        found[split] = (pairs, *featurise(pairs, embedder))
        if progress:
            progress(1 if split == "dev" else 2, 2, split)
    _, x, y, _ = found["dev"]
    model = fit(x, y)
    p = model.proba(x.tolist())
    update_at = _threshold((y == CLASSES.index("update")).astype(int), p[:, CLASSES.index("update")], UPDATE_PRECISION)
    same_at = _threshold((y == CLASSES.index("same")).astype(int), p[:, CLASSES.index("same")], SAME_PRECISION)
    from dataclasses import replace

    model = replace(model, update_at=update_at, same_at=same_at)
    figures = {split: scores(model, found[split][1], found[split][2]) for split in ("dev", "test")}
    sources = {split: sorted({i["source"] for i in found[split][3]}) for split in ("dev", "test")}
    model = replace(model, info={"fitted_on": "dev", "embedder": str(embedder), "sources": sources,
                                 "pairs": {s: len(found[s][0]) for s in found}, "figures": figures,
                                 "update_precision_target": UPDATE_PRECISION, "same_precision_target": SAME_PRECISION})
    if save:
        Path(save).write_text(json.dumps(model.to_json(), indent=1) + "\n", encoding="utf-8")
    rows = [{"qid": f"{split}/{k}", "split": split, **i, "error": None}
            for split in ("dev", "test") for k, i in enumerate(found[split][3])]
    aggregates = {f"{split}": figures[split] for split in ("dev", "test")}
    cfg = recipe(recipes[0])
    return BenchResult("pairs", rows, aggregates, {cfg.recipe: cfg}, {"embedder": str(embedder)}, {},
                       {"update_at": update_at, "same_at": same_at, "saved": save, "limit": limit})
