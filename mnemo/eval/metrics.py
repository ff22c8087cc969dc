"""Retrieval and memory metrics, each defined in its docstring before it is computed.

Conventions shared by every metric here:

* **Macro averages.** A metric gives one value per question (a row); its mean is the mean of the
  rows, one vote per question.
* **A failure is a row, never dropped.** Where a question's output is missing because the harness
  failed on it (pass `Failed(reason)` or None in its place), the question still counts, at the
  metric's worst value: 0 for a higher-is-better metric (recall, accuracy, precision), 1 for a
  lower-is-better rate (stale rate, collateral, false-abstain rate). A question with an error is
  0 credit, not skipped; `MetricResult.errors` says how many rows are failures.
* **Inputs are plain values**: ids as strings, lists in rank order (best first), sets of gold ids,
  so a harness can call these without mnemo's types.

Ranking metrics with standard definitions (Recall@k, nDCG@k, reciprocal rank) go through
`ir-measures` (`ranking_metrics`); the LongMemEval and LoCoMo variants, which differ from the
standard ones in documented ways, are written out here to match their reference code.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from mnemo.errors import ConfigError, InvalidInput

T = TypeVar("T")


@dataclass(frozen=True)
class Failed:
    """Stands in for the output of a question the harness failed on (it scores the worst value)."""

    reason: str


@dataclass(frozen=True)
class Row:
    """One question's value for one metric; `error` is set when the question failed."""

    qid: str
    value: float
    error: str | None = None


@dataclass(frozen=True)
class MetricResult:
    """Every question's row for one metric, and their macro mean (failures included at the worst value)."""

    name: str
    rows: list[Row]
    higher_is_better: bool = True

    @property
    def n(self) -> int:
        """Return the number of questions scored (failures included)."""
        return len(self.rows)

    @property
    def errors(self) -> int:
        """Return how many rows are failures."""
        return sum(1 for r in self.rows if r.error is not None)

    @property
    def mean(self) -> float:
        """Return the mean over all rows (NaN when there are none)."""
        return statistics.fmean(r.value for r in self.rows) if self.rows else math.nan

    def quantile(self, q: float) -> float:
        """Return the q-quantile (0..1) of the row values, linear interpolation, NaN when empty."""
        values = sorted(r.value for r in self.rows)
        if not values:
            return math.nan
        pos = q * (len(values) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return values[lo] + (values[hi] - values[lo]) * (pos - lo)

    def by_group(self, groups: Mapping[str, str]) -> dict[str, float]:
        """Return the mean per group, `groups` mapping each qid to its group (e.g. a category name)."""
        buckets: dict[str, list[float]] = {}
        for r in self.rows:
            buckets.setdefault(groups.get(r.qid, "?"), []).append(r.value)
        return {g: statistics.fmean(v) for g, v in sorted(buckets.items())}


def _failed(value: object) -> str | None:
    """Return the failure reason if `value` stands for a failed question, else None."""
    if value is None:
        return "no output"
    if isinstance(value, Failed):
        return value.reason
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return None


def _qids(qids: Sequence[str] | None, n: int) -> list[str]:
    if qids is None:
        return [str(i) for i in range(n)]
    if len(qids) != n:
        raise InvalidInput(f"got {len(qids)} qids for {n} questions; pass one qid per question")
    return [str(q) for q in qids]


def _same_length(**lists: Sequence[Any]) -> int:
    lengths = {name: len(v) for name, v in lists.items()}
    if len(set(lengths.values())) > 1:
        raise InvalidInput(f"parallel inputs differ in length: {lengths}; pass one entry per question")
    return next(iter(lengths.values()), 0)


def per_question(
    name: str,
    values: Sequence[float | bool | Failed | None],
    qids: Sequence[str] | None = None,
    higher_is_better: bool = True,
) -> MetricResult:
    """Return a MetricResult from one value per question (a judge score, a correctness flag, ...).

    A `Failed` or None value scores the worst value: 0 if higher is better, else 1.
    """
    ids = _qids(qids, len(values))
    worst = 0.0 if higher_is_better else 1.0
    rows = []
    for qid, value in zip(ids, values, strict=True):
        reason = _failed(value)
        rows.append(Row(qid, worst, reason) if reason else Row(qid, float(value)))
    return MetricResult(name, rows, higher_is_better)


# Ranking metrics through ir-measures ---------------------------------------------------------


def ranking_metrics(
    run: Mapping[str, Mapping[str, float] | Failed | None],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Iterable[int] = (5, 10),
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Return per-query rows and macro means of R@k, nDCG@k (for each k) and RR, computed by ir-measures.

    Definitions (trec_eval's, which ir-measures computes through pytrec_eval): for a query with
    relevant set G (qrels relevance >= 1) and documents ranked by descending score,
    * R@k = |G ∩ top k| / |G|;
    * nDCG@k = DCG@k / IDCG@k with DCG@k = Σ_{i=1..k} rel_i / log2(i + 1) (graded gains from qrels;
      position 1 has weight 1, position 2 weight 1/log2(3)) and IDCG@k the DCG of the ideal
      ordering of every judged document of the query;
    * RR = 1 / rank of the first relevant document, 0 if none is ranked.
    Ties in score are broken as trec_eval does (by document id), so give distinct scores.

    The query set is `qrels`: every query in it is a row. A query whose run is missing, empty or
    `Failed` scores 0 on every measure (its row carries the error). Queries in `run` but not in
    `qrels` are ignored. A query in qrels with no relevant document raises InvalidInput: drop it
    (and report that you did) before scoring, as the loaders do for unusable evidence.
    """
    try:
        import ir_measures
    except ImportError as exc:  # the optional dependency of the "eval" extra
        raise ConfigError(
            "ranking_metrics needs ir-measures; install it with pip install 'mnemo-ltm[eval]'"
        ) from exc
    ks = list(ks)
    measures = [ir_measures.parse_measure(f"R@{k}") for k in ks]
    measures += [ir_measures.parse_measure(f"nDCG@{k}") for k in ks]
    measures.append(ir_measures.parse_measure("RR"))
    names = [str(m) for m in measures]
    clean_qrels = {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    for qid, docs in clean_qrels.items():
        if not any(r >= 1 for r in docs.values()):
            raise InvalidInput(f"query {qid!r} has no relevant document in qrels; drop it before scoring")
    clean_run: dict[str, dict[str, float]] = {}
    errors: dict[str, str] = {}
    for qid in clean_qrels:
        docs = run.get(qid)
        reason = _failed(docs) or ("empty run" if not docs else None)
        if reason:
            errors[qid] = reason
            continue
        clean_run[qid] = {str(d): float(s) for d, s in docs.items()}
    values: dict[str, dict[str, float]] = {q: dict.fromkeys(names, 0.0) for q in clean_qrels}
    if clean_run:
        for metric in ir_measures.iter_calc(measures, clean_qrels, clean_run):
            values[metric.query_id][str(metric.measure)] = float(metric.value)
    rows = [{"qid": q, **values[q], "error": errors.get(q)} for q in clean_qrels]
    aggregates = {name: statistics.fmean(r[name] for r in rows) if rows else math.nan for name in names}
    return rows, aggregates


# LongMemEval and LoCoMo retrieval metrics -----------------------------------------------------


def dcg(relevances: Sequence[float], k: int, variant: str = "longmemeval") -> float:
    """Return the DCG of the first k relevances.

    * variant "longmemeval" (LongMemEval's `eval_utils.dcg`): rel_1 + Σ_{i=2..k} rel_i / log2(i),
      so positions 1 and 2 both have weight 1. Not the usual formula.
    * variant "standard": Σ_{i=1..k} rel_i / log2(i + 1), as trec_eval and ir-measures.
    """
    rels = [float(r) for r in relevances[:k]]
    if variant == "longmemeval":
        return (rels[0] + sum(r / math.log2(i) for i, r in enumerate(rels[1:], start=2))) if rels else 0.0
    if variant == "standard":
        return sum(r / math.log2(i + 1) for i, r in enumerate(rels, start=1))
    raise ValueError(f"variant must be 'longmemeval' or 'standard', not {variant!r}")


def ndcg_any(
    ranked: Sequence[str],
    gold: Collection[str],
    k: int,
    variant: str = "longmemeval",
    n_relevant: int | None = None,
) -> float:
    """Return binary nDCG@k of `ranked` against `gold`: DCG@k / ideal DCG@k, with `dcg`'s `variant`.

    Relevance is 1 for an id in `gold`, else 0, at each ranked position (an id repeated in `ranked`
    counts at each position, as in LongMemEval's turn-to-session collapse). The ideal DCG puts
    min(R, k) ones first, R being the number of relevant items in the whole corpus: `n_relevant`
    when given, else |gold|. 0 when R = 0.
    """
    rels = [1.0 if d in gold else 0.0 for d in ranked[:k]]
    n_rel = len(set(gold)) if n_relevant is None else n_relevant
    ideal = dcg([1.0] * min(n_rel, k), k, variant)
    return dcg(rels, k, variant) / ideal if ideal > 0 else 0.0


def recall_any(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Return 1.0 if any gold id is in the top k of `ranked`, else 0.0 (LongMemEval's recall_any@k)."""
    top = set(ranked[:k])
    return float(any(g in top for g in gold))


def recall_all(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    """Return 1.0 if every gold id is in the top k of `ranked`, else 0.0 (LongMemEval's recall_all@k).

    Vacuously 1.0 for an empty gold set, as upstream; LongMemEval skips such questions first.
    """
    top = set(ranked[:k])
    return float(all(g in top for g in gold))


def fractional_recall(
    ranked: Sequence[str],
    evidence: Collection[str],
    k: int,
    unit_of: Callable[[str], str] | None = None,
) -> float:
    """Return LoCoMo's recall accuracy R@k: |evidence ∩ top k| / |evidence| (task_eval/evaluation.py).

    Neither "any" nor "all": the fraction of the evidence turns found in the top k. With
    `unit_of` (for example `locomo_session`), the ranking holds coarser units (sessions) and each
    evidence id counts as found when its unit is in the top k, as LoCoMo scores session summaries.
    `evidence` should be cleaned and non-empty (upstream scores an empty one as 1; we refuse it).
    """
    gold = list(dict.fromkeys(evidence))
    if not gold:
        raise InvalidInput(
            "fractional_recall needs at least one evidence id; drop questions without evidence"
        )
    top = set(ranked[:k])
    return sum((unit_of(e) if unit_of else e) in top for e in gold) / len(gold)


def strip_turn_suffix(doc_id: str) -> str:
    """Return the session id of a LongMemEval turn id "<session>_<i>" (everything before the last "_")."""
    return "_".join(doc_id.split("_")[:-1])


def locomo_session(dia_id: str) -> str:
    """Return the session id ("S<N>", as the loaders name sessions) of a LoCoMo / REALTALK dia_id "D<N>:<i>"."""
    return "S" + dia_id.split(":")[0].lstrip("D")


def turn_to_session(
    ranked_turns: Sequence[str],
    gold_turns: Collection[str],
    k: int,
    session_of: Callable[[str], str] = strip_turn_suffix,
    corpus_turns: Sequence[str] | None = None,
) -> dict[str, float]:
    """Return session-level recall_any / recall_all / nDCG@k of a turn ranking (LongMemEval's turn2session).

    Mirrors `evaluate_retrieval_turn2session`: map every turn id to its session; grow the cutoff
    k' from k until the top k' turns cover k distinct sessions (or k' passes the corpus size);
    then recall_any / recall_all compare the gold sessions with the sessions in the top k' turns,
    and nDCG is computed over the top k' *turns*, each relevant if its session is gold, against an
    ideal of min(R, k') ones where R is the number of corpus turns in gold sessions.
    `corpus_turns` defaults to `ranked_turns` (upstream ranks the whole corpus). Returns
    recall_any, recall_all, ndcg_any_lme (LongMemEval's DCG), ndcg_any_std (standard DCG) and
    effective_k.
    """
    sessions = [session_of(t) for t in ranked_turns]
    corpus = [session_of(t) for t in (ranked_turns if corpus_turns is None else corpus_turns)]
    gold = {session_of(t) for t in gold_turns}
    effective_k = k
    while effective_k <= len(corpus) and len(set(sessions[:effective_k])) < k:
        effective_k += 1
    n_rel = sum(1 for s in corpus if s in gold)
    return {
        "recall_any": recall_any(sessions, gold, effective_k),
        "recall_all": recall_all(sessions, gold, effective_k),
        "ndcg_any_lme": ndcg_any(sessions, gold, effective_k, "longmemeval", n_rel),
        "ndcg_any_std": ndcg_any(sessions, gold, effective_k, "standard", n_rel),
        "effective_k": float(effective_k),
    }


def retrieval_scores(
    rankings: Mapping[str, Sequence[str] | Failed | None],
    gold: Mapping[str, Collection[str]],
    ks: Iterable[int] = (1, 3, 5, 10, 30, 50),
    session_of: Callable[[str], str] | None = None,
    corpora: Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Return per-question rows and macro means of the §2 retrieval metrics, each labelled by name.

    For each question in `gold` (its gold ids) and each k:
    * "frac_recall@k": LoCoMo's |gold ∩ top k| / |gold| (`fractional_recall`);
    * "recall_any@k", "recall_all@k": LongMemEval's (`recall_any`, `recall_all`);
    * "ndcg_any_lme@k": binary nDCG with LongMemEval's DCG (positions 1 and 2 weigh 1);
    * "ndcg_any_std@k": binary nDCG with the standard DCG (equals ir-measures' nDCG@k);
    * with `session_of`: "session_recall_any@k", "session_recall_all@k", "session_ndcg_any_lme@k",
      "session_ndcg_any_std@k" from the turn ranking collapsed to sessions (`turn_to_session`).
    The ideal DCG counts the gold ids that are in the question's corpus (`corpora[qid]`, default
    the ranking itself, which should then rank the whole corpus). A question whose ranking is
    missing or `Failed` is a row of zeros with its error; it is not dropped.
    """
    ks = list(ks)
    rows: list[dict[str, Any]] = []
    for qid, gold_ids in gold.items():
        ranked = rankings.get(qid)
        reason = _failed(ranked)
        row: dict[str, Any] = {"qid": qid}
        for k in ks:
            keys = ["frac_recall", "recall_any", "recall_all", "ndcg_any_lme", "ndcg_any_std"]
            if session_of is not None:
                keys += [
                    "session_recall_any",
                    "session_recall_all",
                    "session_ndcg_any_lme",
                    "session_ndcg_any_std",
                ]
            if reason:
                row.update({f"{key}@{k}": 0.0 for key in keys})
                continue
            ranked_list = list(ranked)
            corpus = list(corpora[qid]) if corpora and qid in corpora else ranked_list
            n_rel = sum(1 for d in set(corpus) if d in gold_ids)
            row[f"frac_recall@{k}"] = fractional_recall(ranked_list, gold_ids, k)
            row[f"recall_any@{k}"] = recall_any(ranked_list, gold_ids, k)
            row[f"recall_all@{k}"] = recall_all(ranked_list, gold_ids, k)
            row[f"ndcg_any_lme@{k}"] = ndcg_any(ranked_list, gold_ids, k, "longmemeval", n_rel)
            row[f"ndcg_any_std@{k}"] = ndcg_any(ranked_list, gold_ids, k, "standard", n_rel)
            if session_of is not None:
                s = turn_to_session(ranked_list, gold_ids, k, session_of, corpus)
                for key in ("recall_any", "recall_all", "ndcg_any_lme", "ndcg_any_std"):
                    row[f"session_{key}@{k}"] = s[key]
        row["error"] = reason
        rows.append(row)
    names = [c for c in (rows[0] if rows else {}) if c not in ("qid", "error")]
    return rows, {name: statistics.fmean(r[name] for r in rows) for name in names}


# Memory metrics -------------------------------------------------------------------------------


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def mentions(text: str, values: Iterable[str]) -> bool:
    """Return True if `text` contains any of `values` as a whole-word phrase, ignoring case and punctuation."""
    haystack = f" {_normalise(text)} "
    return any(f" {_normalise(v)} " in haystack for v in values if _normalise(v))


def is_stale(
    returned: Sequence[Hashable],
    stale: Collection[Hashable],
    current: Collection[Hashable],
    k: int | None = None,
) -> bool:
    """Return True if a stale item is presented as current in the top k of `returned` (BEAM's stale@k).

    Stale means: some stale item is in the top k and no current item is ranked above it (the
    superseded memory outranks its update, or is the only one returned).
    """
    top = list(returned[:k] if k is not None else returned)
    first_stale = next((i for i, x in enumerate(top) if x in stale), None)
    first_current = next((i for i, x in enumerate(top) if x in current), None)
    return first_stale is not None and (first_current is None or first_stale < first_current)


def stale_rate(
    returned: Sequence[Sequence[Hashable] | Failed | None],
    stale: Sequence[Collection[Hashable]],
    current: Sequence[Collection[Hashable]],
    k: int | None = None,
    qids: Sequence[str] | None = None,
) -> MetricResult:
    """Return the wrong-fact (stale) rate: the share of update probes where a superseded fact wins.

    Per question: 1 if `is_stale(returned, stale, current, k)` (a stale memory id or value is in
    the top k with no current one above it), else 0. Lower is better; a failed question counts 1.
    """
    n = _same_length(returned=returned, stale=stale, current=current)
    ids = _qids(qids, n)
    rows = []
    for qid, ret, st, cur in zip(ids, returned, stale, current, strict=True):
        reason = _failed(ret)
        rows.append(Row(qid, 1.0, reason) if reason else Row(qid, float(is_stale(ret, st, cur, k))))
    return MetricResult("stale_rate", rows, higher_is_better=False)


def stale_answer_rate(
    answers: Sequence[str | Failed | None],
    stale_values: Sequence[Iterable[str]],
    current_values: Sequence[Iterable[str]],
    qids: Sequence[str] | None = None,
) -> MetricResult:
    """Return the stale-answer rate: the share of answers that give an old value and not the new one.

    Per question: 1 if the answer `mentions` a stale value and none of the current values (as
    LongMemEval's judge, an answer naming the new value is right even if it also names old ones),
    else 0. Lower is better; a failed question counts 1.
    """
    n = _same_length(answers=answers, stale_values=stale_values, current_values=current_values)
    ids = _qids(qids, n)
    rows = []
    for qid, answer, old, new in zip(ids, answers, stale_values, current_values, strict=True):
        reason = _failed(answer)
        if reason:
            rows.append(Row(qid, 1.0, reason))
            continue
        rows.append(Row(qid, float(mentions(answer, old) and not mentions(answer, new))))
    return MetricResult("stale_answer_rate", rows, higher_is_better=False)


def context_recall(
    packed: Sequence[Collection[str] | Failed | None],
    gold: Sequence[Collection[str]],
    qids: Sequence[str] | None = None,
) -> MetricResult:
    """Return context recall: per question |gold ∩ packed| / |gold|, the share of gold ids in the pack.

    `packed` holds the ids (turn ids, or the dataset ids memories were mapped back to) of what
    recall placed in the context under its budget; order does not matter. Higher is better; a
    failed question counts 0. An empty gold set raises InvalidInput.
    """
    n = _same_length(packed=packed, gold=gold)
    ids = _qids(qids, n)
    rows = []
    for qid, got, want in zip(ids, packed, gold, strict=True):
        want_set = set(want)
        if not want_set:
            raise InvalidInput(f"question {qid!r} has no gold ids; drop it before scoring context recall")
        reason = _failed(got)
        rows.append(Row(qid, 0.0, reason) if reason else Row(qid, len(want_set & set(got)) / len(want_set)))
    return MetricResult("context_recall", rows)


def forgetting(
    forgotten: Sequence[Collection[str] | Failed | None],
    targets: Sequence[Collection[str]],
    keep: Sequence[Collection[str]],
    qids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """Return forgetting precision, recall and collateral, one row per case (a forget request or an update).

    Per case, with F the memory ids the system tombstoned (forgotten or superseded), T the ids it
    should have tombstoned and K the ids that must survive (T and K disjoint):
    * forgetting_precision = |F ∩ T| / |F|, 1 when F is empty (nothing wrongly forgotten);
    * forgetting_recall = |F ∩ T| / |T|, 1 when T is empty;
    * collateral = |F ∩ K| / |K|, the share of memories that should survive but were lost,
      0 when K is empty; lower is better.
    A failed case counts precision 0, recall 0, collateral 1.
    """
    n = _same_length(forgotten=forgotten, targets=targets, keep=keep)
    ids = _qids(qids, n)
    prec, rec, coll = [], [], []
    for qid, got, want, safe in zip(ids, forgotten, targets, keep, strict=True):
        t, k_ = set(want), set(safe)
        if t & k_:
            raise InvalidInput(f"case {qid!r}: ids {sorted(t & k_)} are both targets and must-keep")
        reason = _failed(got)
        if reason:
            prec.append(Row(qid, 0.0, reason))
            rec.append(Row(qid, 0.0, reason))
            coll.append(Row(qid, 1.0, reason))
            continue
        f = set(got)
        prec.append(Row(qid, len(f & t) / len(f) if f else 1.0))
        rec.append(Row(qid, len(f & t) / len(t) if t else 1.0))
        coll.append(Row(qid, len(f & k_) / len(k_) if k_ else 0.0))
    return {
        "forgetting_precision": MetricResult("forgetting_precision", prec),
        "forgetting_recall": MetricResult("forgetting_recall", rec),
        "collateral": MetricResult("collateral", coll, higher_is_better=False),
    }


# Phrases that mean "the record does not say": LoCoMo's category-5 rule plus common paraphrases.
_ABSTAIN = re.compile(
    r"no information|not mentioned|not (?:been )?(?:specified|stated|provided|available|in the record)"
    r"|(?:i )?(?:do not|don't) (?:know|have (?:that|this|any) information)|unknown|cannot (?:be )?answer"
    r"|can't answer|unable to (?:answer|determine)|there is no (?:record|mention)|uncertain|not sure"
)


def is_abstention(answer: str | None, confidence: str | None = None) -> bool:
    """Return True if an answer abstains: recall's confidence is "unknown", or the text says the record is silent.

    The text test is LoCoMo's category-5 rule ("no information available", "not mentioned")
    widened to common paraphrases ("I don't know", "not specified", "unknown", "uncertain", ...).
    """
    if confidence == "unknown":
        return True
    return bool(answer) and bool(_ABSTAIN.search(answer.lower()))


def abstention(
    abstained: Sequence[bool | Failed | None],
    should_abstain: Sequence[bool],
    qids: Sequence[str] | None = None,
) -> dict[str, MetricResult]:
    """Return abstention accuracy, abstain rate and false-abstain rate.

    * abstention_accuracy: over every question, 1 if the system abstained exactly when it should;
    * abstain_rate: over the unanswerable questions only, 1 if it abstained (higher is better);
    * false_abstain_rate: over the answerable questions only, 1 if it abstained (lower is better).
    A failed question counts 0 for accuracy and abstain rate and 1 for the false-abstain rate.
    """
    n = _same_length(abstained=abstained, should_abstain=should_abstain)
    ids = _qids(qids, n)
    acc, hit, false = [], [], []
    for qid, did, should in zip(ids, abstained, should_abstain, strict=True):
        reason = _failed(did)
        if reason:
            acc.append(Row(qid, 0.0, reason))
            (hit if should else false).append(Row(qid, 0.0 if should else 1.0, reason))
            continue
        acc.append(Row(qid, float(bool(did) == bool(should))))
        (hit if should else false).append(Row(qid, float(bool(did))))
    return {
        "abstention_accuracy": MetricResult("abstention_accuracy", acc),
        "abstain_rate": MetricResult("abstain_rate", hit),
        "false_abstain_rate": MetricResult("false_abstain_rate", false, higher_is_better=False),
    }


def tokens_packed(
    tokens: Sequence[int | Failed | None], budget: int | None = None, qids: Sequence[str] | None = None
) -> MetricResult:
    """Return the tokens of context each query used (mean, and quantiles through `MetricResult.quantile`).

    Per question: the number of tokens recall packed. Lower is better at equal recall; a failed
    question counts as the whole `budget` when one is given, else as the largest count observed
    (the worst the run did), never as 0.
    """
    ids = _qids(qids, len(tokens))
    observed = [float(t) for t in tokens if _failed(t) is None]
    worst = float(budget) if budget is not None else max(observed, default=0.0)
    rows = []
    for qid, t in zip(ids, tokens, strict=True):
        reason = _failed(t)
        rows.append(Row(qid, worst, reason) if reason else Row(qid, float(t)))
    return MetricResult("tokens_packed", rows, higher_is_better=False)


def real_pass_rate(
    before: Sequence[bool | Failed | None],
    after: Sequence[bool | Failed | None],
    qids: Sequence[str] | None = None,
) -> MetricResult:
    """Return MEME's real pass rate: an after-change pass counts only if the matching before-question passed.

    Per pair: 1 if both the before-question (the system knew the value) and the after-question
    (it deleted / cascaded / abstained correctly) passed, else 0; a pass after a failed
    before-question is "trivial" (a system that knows nothing passes Deletion). A failure counts 0.
    """
    n = _same_length(before=before, after=after)
    ids = _qids(qids, n)
    rows = []
    for qid, b, a in zip(ids, before, after, strict=True):
        reason = _failed(b) or _failed(a)
        rows.append(Row(qid, 0.0, reason) if reason else Row(qid, float(bool(b) and bool(a))))
    return MetricResult("real_pass_rate", rows)
