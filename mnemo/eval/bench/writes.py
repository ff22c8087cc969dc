"""The write-path benchmark: what `remember` and `forget` leave in the store, on labelled examples.

    examples = build_examples(split="test")                 # mnemo.eval.datasets.writes
    res = run_writes(examples, embedder="hash")
    res.rows, res.aggregates                                # one row per example; sums and means by family

Each example (see `mnemo.eval.datasets.writes`) is played through the public API alone, so the
benchmark measures any implementation of the write path: its steps run in order, one simulated
minute apart, under a user of its own (`Memory.remember(text, user=...)` for a turn,
`Memory.forget(query=..., user=...)` for an API forget); then `Memory.memories(user,
include_inactive=True)` is read once. A memory *comes from* step i when its `turn_id` is the
turn id step i's `WriteReport` returned. A memory *mentions* a value when
`metrics.mentions(text, [value])` holds (whole words, case and punctuation ignored). A memory is
*retired* when its status is not "active" (superseded, forgotten or decayed). A memory is
*negative* when it is flagged `meta["negated"]` or its text carries negation wording
(`NEGATIVE`: not, n't, never, no longer, ...), so "It is not true that X is a citizen of India"
does not count as a positive memory of India.

An example that raises anywhere is a row with its error, scored at the worst value of every
metric that applies to its family (0 for the rates below, 1 for collateral and for
"paraphrase superseded original"), never dropped.

## Metrics (numerator / denominator; what counts)

* **duplicate precision** (family duplicate_distinct): stored_distinct / distinct_given, summed
  over the family's examples (micro; the 300-ticket example weighs 300). distinct_given = the
  example's statements, each a different fact (different identifier, or different subject of
  one relation). A statement counts as stored distinct when some *active* memory comes from its
  step and mentions its key value (the identifier, or the object value). A statement merged
  into an earlier one (duplicate, corroboration), one that superseded an earlier one (which
  then is not active), and one the write path stored nothing for, all count 0.
* **paraphrase handled** (duplicate_paraphrase): examples handled / examples. One statement,
  then the same fact in another of the dataset's templates. Handled = every memory that comes
  from the original step and mentions the value is active, at least one exists, and exactly
  one active memory of the user mentions the value (stored once, or corroborated). Also
  reported: **paraphrase superseded original** = examples where a memory from the original step
  was superseded / examples (a paraphrase must never supersede its own original).
* **correction recall** (correction): examples corrected / examples. An old statement, then the
  new value of the same subject and relation, usually in another template. Corrected = at
  least one memory comes from the old step and mentions the old value, every such memory is
  superseded (status "superseded"), and some active memory from the new step mentions the new
  value.
* **correction precision** (correction and correction_negative together, micro over
  supersessions): correct supersessions / all supersessions made. A supersession is a memory
  whose final status is "superseded". Correct = in a correction example, a memory that comes
  from the old step and mentions the old value. Everything else is a false positive: in a
  correction example any other superseded memory (the new statement's, for instance); in a
  correction_negative example every superseded memory (same relation, different subject or
  identifier: nothing may be superseded). A failed example of either family counts as one
  wrong supersession. NaN when nothing at all was superseded. Also
  reported: **negative kept** (correction_negative) = examples where nothing was retired and
  both statements have an active memory mentioning their value / examples.
* **negation handled** (negation): examples handled / examples. A statement, then its negation
  ("It is not true that ...", "<subject>'s <relation> is no longer <value>"). Handled = at least
  one memory comes from the positive step and mentions the value, every such memory is retired
  (superseded or forgotten, whatever the reason), and no active memory of the user that
  mentions the value is positive (each is negative, as defined above).
* **forget precision / recall / collateral** (forget; `metrics.forgetting`, macro over
  examples): several facts about one subject, then a request naming one of them by its
  relation (a turn "Please forget the <relation> of <subject>." or the API
  `forget(query="the <relation> of <subject>")`). Per example: F = the user's retired memories
  among those that come from the fact steps; T = the memories from the target fact's step
  (a phantom id when there are none, so a fact never stored cannot count as forgotten);
  K = the memories from the other facts' steps. precision = |F ∩ T| / |F| (1 when F is empty),
  recall = |F ∩ T| / |T|, collateral = |F ∩ K| / |K| (0 when K is empty; lower is better).
  Memories of the request turn itself are in none of F, T, K.
* **extraction recall** (extraction; LoCoMo observations, silver): facts found / facts, summed
  over the family's examples (micro). One LoCoMo turn is remembered; its gold facts are the
  observations the dataset attributes to that turn (see `datasets.writes.content_terms` and
  `SUPPORT` for which observations are kept). A fact is found when at least `COVER` = 0.6 of
  its content terms are among the content terms of the memories that come from the turn
  (active or not). Content terms: lowercase alphanumeric tokens, minus the SMART stopwords
  (mnemo/assets/stopwords_english.txt) and the speaker's name, plural-stemmed (Harman's S
  stemmer). Also reported per row: the memories stored and their share of the turn's terms,
  because storing the turn verbatim maximises this recall.

Aggregates: the headline metrics per recipe and split ("<recipe> | <split>", with "n <family>"
counts, supersessions and errors), and each family's row means per "<recipe> | <split> | <family>"
(with n and errors). Counts stay counts (sums), rates are computed from the sums where the definition says
micro, from row means where it says examples.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from mnemo.errors import ConfigError
from mnemo.eval import metrics
from mnemo.eval.bench.common import EPOCH, TABLES, BenchResult, CachedEmbedder, Progress, register
from mnemo.eval.datasets.writes import FAMILIES, SPLITS, WriteExample, WriteSet, build, content_terms, counts

COVER = 0.6  # share of a fact's content terms the turn's memories must hold for the fact to count as found
CHUNK = 100  # examples per store: a fresh store now and then keeps one run's stores small
# Negation wording that makes a memory negative (a retraction), not a positive statement of its value.
NEGATIVE = re.compile(r"\b(?:not|never|no longer|no more|any ?more|neither|nor|none|isn't|wasn't|aren't|"
                      r"weren't|doesn't|don't|didn't|won't|never)\b|n't\b", re.I)
NAN = math.nan
# The headline metrics in table order: (name, family it is read from, "micro" sums or "macro" row means).
HEADLINE = (
    ("duplicate_precision", "duplicate_distinct", "micro"),
    ("paraphrase_handled", "duplicate_paraphrase", "macro"),
    ("paraphrase_superseded_original", "duplicate_paraphrase", "macro"),
    ("correction_recall", "correction", "macro"),
    ("correction_precision", "correction+correction_negative", "micro"),
    ("negative_kept", "correction_negative", "macro"),
    ("negation_handled", "negation", "macro"),
    ("forget_precision", "forget", "macro"),
    ("forget_recall", "forget", "macro"),
    ("collateral", "forget", "macro"),
    ("extraction_recall", "extraction", "micro"),
)


@dataclass(frozen=True)
class Held:
    """One memory of an example's user after the example ran, reduced to what the scorers read."""

    id: str
    step: str | None  # the key of the step whose turn it came from, None when from no step
    text: str
    status: str  # active | superseded | forgotten | decayed
    negated: bool = False  # flagged negated by the write path

    @property
    def active(self) -> bool:
        return self.status == "active"

    @property
    def negative(self) -> bool:
        """Return True when the memory retracts rather than asserts (flag or negation wording)."""
        return self.negated or bool(NEGATIVE.search(self.text))


def _of(held: Sequence[Held], step: str, value: str | None = None) -> list[Held]:
    """Return the memories that come from `step` (and mention `value`, when given)."""
    return [h for h in held if h.step == step and (value is None or metrics.mentions(h.text, [value]))]


# Scorers: one per family, from hand-checkable values ------------------------------------------------


def score_distinct(ex: WriteExample, held: Sequence[Held]) -> dict[str, float]:
    """Return given / stored_distinct counts and their ratio for a duplicate_distinct example."""
    keys = ex.expect["keys"]
    stored = sum(any(h.active for h in _of(held, f"fact-{i}", k)) for i, k in enumerate(keys))
    return {"given": float(len(keys)), "stored_distinct": float(stored), "duplicate_precision": stored / len(keys)}


def score_paraphrase(ex: WriteExample, held: Sequence[Held]) -> dict[str, float]:
    """Return paraphrase_handled and paraphrase_superseded_original (0/1) for a duplicate_paraphrase example."""
    v = ex.expect["value"]
    orig = _of(held, "original", v)
    once = sum(h.active and metrics.mentions(h.text, [v]) for h in held) == 1
    return {"paraphrase_handled": float(bool(orig) and all(h.active for h in orig) and once),
            "paraphrase_superseded_original": float(any(h.status == "superseded" for h in _of(held, "original")))}


def score_correction(ex: WriteExample, held: Sequence[Held]) -> dict[str, float]:
    """Return correction_recall (0/1) and the supersessions it made, correct and wrong."""
    olds = _of(held, "old", ex.expect["old"])
    right = sum(h.status == "superseded" for h in olds)
    made = sum(h.status == "superseded" for h in held)
    fixed = bool(olds) and right == len(olds) and any(h.active for h in _of(held, "new", ex.expect["new"]))
    return {"correction_recall": float(fixed), "sup_correct": float(right), "sup_wrong": float(made - right)}


def score_negative(ex: WriteExample, held: Sequence[Held]) -> dict[str, float]:
    """Return negative_kept (0/1) and its supersessions, all wrong, for a correction_negative example."""
    both = all(any(h.active for h in _of(held, step, ex.expect[step])) for step in ("first", "second"))
    kept = both and all(h.active for h in held if h.step in ("first", "second"))
    return {"negative_kept": float(kept), "sup_correct": 0.0,
            "sup_wrong": float(sum(h.status == "superseded" for h in held))}


def score_negation(ex: WriteExample, held: Sequence[Held]) -> dict[str, float]:
    """Return negation_handled (0/1): the positive stored then retired, and no positive memory of the value left."""
    v = ex.expect["value"]
    pos = _of(held, "positive", v)
    left = [h for h in held if h.active and metrics.mentions(h.text, [v]) and not h.negative]
    return {"negation_handled": float(bool(pos) and not any(h.active for h in pos) and not left)}


def score_forget(ex: WriteExample, held: Sequence[Held]) -> dict[str, float]:
    """Return forget_precision, forget_recall and collateral (`metrics.forgetting`) for a forget example."""
    facts = [h for h in held if h.step is not None and (h.step == "target" or h.step.startswith("fact-"))]
    retired = {h.id for h in facts if not h.active}
    target = {h.id for h in facts if h.step == "target"} or {"missing:target"}
    keep = {h.id for h in facts if h.step != "target"}
    res = metrics.forgetting([retired], [target], [keep], [ex.id])
    return {"forget_precision": res["forgetting_precision"].mean, "forget_recall": res["forgetting_recall"].mean,
            "collateral": res["collateral"].mean}


def score_extraction(ex: WriteExample, held: Sequence[Held]) -> dict[str, float]:
    """Return facts, facts_found (coverage >= COVER), extraction_recall, memories and turn_share for one turn."""
    drop = [ex.expect["speaker"]]
    mine = _of(held, "turn")
    got = content_terms(" ".join(h.text for h in mine), drop)
    facts = ex.expect["facts"]
    found = 0
    for fact in facts:
        want = content_terms(fact, drop)
        found += (len(want & got) / len(want) if want else 1.0) >= COVER
    turn = content_terms(ex.steps[0].text, drop)
    return {"facts": float(len(facts)), "facts_found": float(found), "extraction_recall": found / len(facts),
            "memories": float(len(mine)), "turn_share": len(turn & got) / len(turn) if turn else NAN}


SCORERS: dict[str, Callable[[WriteExample, Sequence[Held]], dict[str, float]]] = {
    "duplicate_distinct": score_distinct, "duplicate_paraphrase": score_paraphrase, "correction": score_correction,
    "correction_negative": score_negative, "negation": score_negation, "forget": score_forget,
    "extraction": score_extraction,
}


def worst(ex: WriteExample) -> dict[str, float]:
    """Return the values a failed example scores: 0 for rates, 1 for collateral, one wrong supersession."""
    return {
        "duplicate_distinct": lambda: {"given": float(len(ex.expect["keys"])), "stored_distinct": 0.0,
                                       "duplicate_precision": 0.0},
        "duplicate_paraphrase": lambda: {"paraphrase_handled": 0.0, "paraphrase_superseded_original": 1.0},
        "correction": lambda: {"correction_recall": 0.0, "sup_correct": 0.0, "sup_wrong": 1.0},
        "correction_negative": lambda: {"negative_kept": 0.0, "sup_correct": 0.0, "sup_wrong": 1.0},
        "negation": lambda: {"negation_handled": 0.0},
        "forget": lambda: {"forget_precision": 0.0, "forget_recall": 0.0, "collateral": 1.0},
        "extraction": lambda: {"facts": float(len(ex.expect["facts"])), "facts_found": 0.0,
                               "extraction_recall": 0.0},
    }[ex.family]()


# Playing examples through the public API ---------------------------------------------------------


def play(mem: Any, ex: WriteExample, user: str) -> list[Held]:
    """Run the example's steps for `user` one simulated minute apart; return the user's memories afterwards."""
    turn_step: dict[str, str] = {}
    for step in ex.steps:
        mem.clock.advance(timedelta(minutes=1))
        if step.action == "forget":
            mem.forget(query=step.text, user=user, reason="benchmark: user asked")
        else:
            turn_step[mem.remember(step.text, user=user, session=ex.id).turn_id] = step.key
    return [Held(m.id, turn_step.get(m.turn_id or ""), m.text, m.status, bool(m.meta.get("negated")))
            for m in mem.memories(user, include_inactive=True)]


def score(ex: WriteExample, held: Sequence[Held] | BaseException) -> dict[str, Any]:
    """Return the example's row: its identity, the family's values, and the error if it failed."""
    row: dict[str, Any] = {"id": ex.id, "family": ex.family, "split": ex.split, "unit": ex.unit,
                           "steps": len(ex.steps), "error": None, **{k: v for k, v in ex.meta.items()
                                                                    if isinstance(v, (str, int, float))}}
    if isinstance(held, BaseException):
        row.update(worst(ex), error=f"{type(held).__name__}: {held}")
        return row
    row.update(SCORERS[ex.family](ex, held))
    row["stored"] = len(held)
    return row


@register("writes")
def run_writes(recipes: Sequence[str] = ("default",), *, split: str = "test", limit: int | None = None,
               embedder: Any = "minilm", llm: Any = "offline", progress: Progress | None = None,
               examples: WriteSet | None = None, configs: dict[str, Any] | None = None) -> BenchResult:
    """Return a `common.BenchResult` of the write-path examples of `split`, one row per example and recipe.

    `limit` keeps the first N examples of each family (per split). `configs` ({name: Config}) runs
    those configurations instead of the named recipes (the calibration notebook's grid). Examples run CHUNK to a fresh
    `Memory.open(":memory:")` (one embedder and model client for the run), each under its own
    user, on a simulated clock. Provenance records each recipe's memory and the `meta["extractor"]`
    of every memory written (which extractor answered), counted.
    """
    from mnemo.clock import SimulatedClock
    from mnemo.config import recipe
    from mnemo.embed import make_embedder
    from mnemo.llm import connect
    from mnemo.memory import Memory

    ws = examples or build(split=split)
    todo = [e for e in ws.examples if split in ("all", e.split)]
    if limit is not None:
        todo = first_per_family(todo, limit)
    if not todo:
        raise ConfigError(f"no write-path examples in split {split!r}")
    configs = dict(configs) if configs else {r: recipe(r) for r in recipes}
    emb, client = CachedEmbedder(make_embedder(embedder)), connect(llm)
    rows: list[dict[str, Any]] = []
    provenance: dict[str, Any] = {}
    for name, cfg in configs.items():
        extractors: Counter = Counter()
        for start in range(0, len(todo), CHUNK):
            mem = Memory.open(":memory:", embedder=emb, llm=client, clock=SimulatedClock(EPOCH), config=cfg)
            provenance.setdefault(name, mem.provenance())
            try:
                for i, ex in enumerate(todo[start:start + CHUNK], start):
                    try:
                        held = play(mem, ex, f"w{i}")
                        extractors.update(str(m.meta.get("extractor")) for m in mem.memories(f"w{i}",
                                                                                             include_inactive=True))
                    # A runner boundary: one failing example is a row with its error, never a lost run.
                    except Exception as exc:  # noqa: BLE001
                        held = exc
                    rows.append({**score(ex, held), "recipe": name})
                    if progress:
                        progress(len(rows), len(todo) * len(configs), ex.id)
            finally:
                mem.close()
        provenance[name]["extractors"] = dict(extractors.most_common())
    params = {"split": split, "limit": limit, "embedder": emb.name, "examples": len(todo),
              "counts": {f"{f} | {s}": n for (f, s), n in counts(todo).items()}, "dropped": ws.dropped}
    return BenchResult("writes", rows, aggregate(rows), configs, provenance, ws.checksums, params)


def first_per_family(examples: Sequence[WriteExample], limit: int) -> list[WriteExample]:
    """Return the first `limit` examples of each (family, split), in their order."""
    seen: Counter = Counter()
    out = []
    for e in examples:
        seen[(e.family, e.split)] += 1
        if seen[(e.family, e.split)] <= limit:
            out.append(e)
    return out


# Aggregates and the table ------------------------------------------------------------------------


def _ratio(num: float, den: float) -> float:
    return num / den if den else NAN


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float)) and not math.isnan(r[key])]
    return sum(vals) / len(vals) if vals else NAN


def headline(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Return every HEADLINE metric over `rows` (one split, one recipe), as the module docstring defines it."""
    fam = {f: [r for r in rows if r["family"] == f] for f in FAMILIES}
    sup = fam["correction"] + fam["correction_negative"]
    sums = {k: sum(r.get(k, 0.0) for r in rs) for k, rs in (("given", fam["duplicate_distinct"]),
            ("stored_distinct", fam["duplicate_distinct"]), ("sup_correct", sup), ("sup_wrong", sup),
            ("facts", fam["extraction"]), ("facts_found", fam["extraction"]))}
    out = {"duplicate_precision": _ratio(sums["stored_distinct"], sums["given"]),
           "correction_precision": _ratio(sums["sup_correct"], sums["sup_correct"] + sums["sup_wrong"]),
           "extraction_recall": _ratio(sums["facts_found"], sums["facts"])}
    for name, family, how in HEADLINE:
        if how == "macro":
            out[name] = _mean(fam[family], name)
    out.update({f"n {f}": float(len(rs)) for f, rs in fam.items()})
    out["supersessions"] = sums["sup_correct"] + sums["sup_wrong"]
    out["errors"] = float(sum(r["error"] is not None for r in rows))
    return out


def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Return the headline metrics per "<recipe> | <split>" and every family's row means per "... | <family>"."""
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r["recipe"] for r in rows):
        for split in SPLITS:
            mine = [r for r in rows if r["recipe"] == name and r["split"] == split]
            if not mine:
                continue
            out[f"{name} | {split}"] = headline(mine)
            for family in FAMILIES:
                rs = [r for r in mine if r["family"] == family]
                keys = sorted({k for r in rs for k, v in r.items() if isinstance(v, float)})
                if rs:
                    out[f"{name} | {split} | {family}"] = {"n": float(len(rs)), **{k: _mean(rs, k) for k in keys},
                                                           "errors": float(sum(r["error"] is not None for r in rs))}
    return out


@register("writes", TABLES)
def summary(aggregates: dict[str, dict[str, float]]) -> tuple[list[str], list[list[str]]]:
    """Return (header, rows) of the 80-column table: one row per headline metric, one column per recipe and split."""
    groups = [g for g in aggregates if g.count("|") == 1]
    header = ["metric", "family", *(g.replace(" | ", " ") for g in groups)]
    fams = {"correction+correction_negative": "corr+neg", "duplicate_distinct": "distinct",
            "duplicate_paraphrase": "paraphrase", "correction_negative": "corr_neg"}
    names = {"paraphrase_superseded_original": "paraphrase_supersedes"}

    def cell(v: float | None) -> str:
        return "-" if v is None or math.isnan(v) else f"{v:.3f}"

    rows = [[names.get(n, n), fams.get(f, f), *(cell(aggregates[g].get(n)) for g in groups)] for n, f, _ in HEADLINE]
    rows.append(["examples", "all", *(f"{sum(v for k, v in aggregates[g].items() if k.startswith('n ')):.0f}"
                                      for g in groups)])
    rows.append(["errors", "all", *(f"{aggregates[g]['errors']:.0f}" for g in groups)])
    return header, rows
