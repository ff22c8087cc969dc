"""The scenario harness: play each scenario through mnemo's recipes and the baselines, score every probe.

    rows, aggregates, provenance = run_scenarios(load_scenarios(), recipes=["default"])
    write_results("out/", benchmark="scenarios", rows=rows, aggregates=aggregates, ...)

Every system gets the same turns at the same simulated times, the same budget per scenario and
the same tokenizer (`mnemo.tokens.count_many`). Each probe of each scenario gives one row per
system; a system that raises is recorded as failed rows (the error is kept), scored at the worst
value of every metric, never dropped from an average.

The metrics are the functions of `mnemo.eval.metrics`, whose docstrings define them. What the
harness feeds them, per probe (only probes that check something get a value for it):

* **context recall** (`metrics.context_recall`): gold = the probe's `expect` values; found = the
  values that some current item of the context mentions (`metrics.mentions`: whole words,
  ignoring case and punctuation). History shown as "not current" does not count.
* **wrong-fact (stale) rate** (`metrics.stale_rate`, BEAM's stale@k with k = the whole context):
  an item is *stale* when it mentions a `forbid` value, mentions no `expect` value and is not a
  retraction (a negated memory, or text like "no longer", "used to", "not anymore"); an item is
  *current* when it mentions an `expect` value. The probe is stale when a stale item is shown
  with no current item before it. For the chronological baselines "before" means earlier in the
  transcript; for mnemo and naive RAG it means ranked higher.
* **forgetting precision / recall / collateral** (`metrics.forgetting`), for probes naming
  `forgets` or `survivors`: F = every record of the probe's user that is tombstoned (forgotten,
  superseded or decayed) at probe time; T = the records whose text mentions a `forgets` phrase,
  except those that state the change itself and must stay (a retraction: a negated memory or
  retraction wording, "I've quit pottery"; or a record that mentions an `expect` value, "Thursday,
  not Tuesday"), as the stale rule excepts them, plus one phantom id per phrase that matches no record at all (so a target that was never
  stored cannot be "forgotten" by default); K = the records mentioning a `survivors` phrase, minus T,
  plus, for mnemo (not for the baselines, which keep every turn verbatim), one phantom per survivor
  phrase that matches no record, which also counts in F: a fact that was never stored did not
  survive (before, such a phrase passed silently). F counts every tombstone
  of the user, so a probe's `forgets` must list everything that should be gone by then
  (data/scenarios/README.md).
  Baselines keep raw turns and tombstone nothing: precision 1, recall 0 (when T is not empty),
  collateral 0 (see `mnemo.eval.baselines`).
* **abstention accuracy** (`metrics.abstention`) over the probes that check it (`Probe.should_abstain`
  is not None: an explicit `abstain`, or `expect` values, which must not be abstained on): mnemo
  abstains when recall's confidence is "unknown"; a baseline when its context is empty.
* **tokens packed** (`metrics.tokens_packed`): the tokens of everything shown (history included);
  a failed probe counts the whole budget.
* **ranking** (`metrics.ranking_metrics`, ir-measures: R@k and nDCG@k for k in 1 and 5, and RR)
  for probes with `expect`: the documents are the expected values; a value's rank is the
  position of the first context item that mentions it.

A probe *passes* when every check it makes holds: context recall 1, not stale, abstention right,
and (if it checks forgetting) precision 1, recall 1, collateral 0.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from mnemo.clock import SimulatedClock
from mnemo.config import Config, recipe
from mnemo.eval import metrics
from mnemo.eval.baselines import BASELINES, Context, Item, Record, System, make_baseline
from mnemo.eval.scenarios import Probe, Scenario
from mnemo.provenance import git_commit

Progress = Callable[[int, int, str], None]
# Words that withdraw a value instead of asserting it (applied to every system's items alike).
RETRACTION = re.compile(r"\b(?:no longer|not anymore|any ?more|used to|previously|formerly|instead of|"
                        r"moved (?:away )?from|changed from|switched from|corrected from|was wrong|not current)\b", re.I)
RANK_KS = (1, 5)


class MnemoSystem:
    """mnemo under one recipe, driven like a baseline: remember turns, forget on request, recall a pack."""

    def __init__(self, scenario: Scenario, config: Config, embedder: Any, llm: Any):
        from mnemo.memory import Memory

        self.name = f"mnemo:{config.recipe}"
        self.clock = SimulatedClock(scenario.start)
        self.mem = Memory.open(":memory:", embedder=embedder, llm=llm, clock=self.clock, config=config)

    def _at(self, at: datetime) -> None:
        if at > self.clock.now():
            self.clock.set(at)

    def ingest(self, text: str, *, user: str, session: str, at: datetime) -> None:
        """Remember the turn: extraction and reconciliation decide what it changes."""
        self._at(at)
        self.mem.remember(text, user=user, session=session, at=at)

    def forget(self, query: str, *, user: str, at: datetime) -> None:
        """Forget exactly what the query names (the API call, not a turn)."""
        self._at(at)
        self.mem.forget(query=query, user=user, reason="scenario: user asked")

    def decay(self, at: datetime) -> None:
        """Run a decay pass at `at`."""
        self._at(at)
        self.mem.decay(at=at)

    def context(self, question: str, *, user: str, budget: int, at: datetime) -> Context:
        """Return recall's pack as a Context: current memories best first, history apart."""
        self._at(at)
        r = self.mem.recall(question, user=user, budget_tokens=budget, at=at)
        items = [Item(p.id, p.text, p.tokens, bool(p.memory.meta.get("negated"))) for p in r.memories]
        history = [Item(h.id, f"{h.text} [{h.note}]", h.tokens, True) for h in r.history]
        return Context(items, r.tokens_used, r.confidence == "unknown", history, r.confidence)

    def records(self, user: str) -> dict[str, Record]:
        """Return {memory id: Record(text, active, retracted)} for every memory of `user`, tombstones included."""
        return {m.id: Record(m.text, m.active, bool(m.meta.get("negated")))
                for m in self.mem.memories(user, include_inactive=True)}

    def provenance(self) -> dict[str, Any]:
        """Return the memory's provenance (embedder, model client, tokenizer, recipe)."""
        return self.mem.provenance()

    def close(self) -> None:
        """Close the store."""
        self.mem.close()


@dataclass
class Observation:
    """What one system showed for one probe, before scoring (a `metrics.Failed` when it raised)."""

    scenario: Scenario
    probe: Probe
    system: str
    context: Context | metrics.Failed
    records: dict[str, tuple[str, bool]]
    verbatim: bool = False  # the system keeps turns as said (the baselines): nothing said goes missing

    @property
    def qid(self) -> str:
        return f"{self.scenario.name}/{self.probe.id}/{self.system}"


def _moment(scenario: Scenario, day: float, index: int) -> datetime:
    # Turns of one session are a minute apart so that "newer" is never a tie.
    return scenario.start + timedelta(days=day, minutes=index)


def play(scenario: Scenario, system: System) -> list[Observation]:
    """Play `scenario` through `system` and return one Observation per probe.

    Steps run in order at start + day (+ one minute per step); a session with `decay: true` is
    followed by a decay pass; then the clock moves `advance_days` past the last session, an
    optional decay pass runs, and each probe asks its question. An exception anywhere turns
    every probe of this scenario into a failed observation carrying the error.
    """
    at = scenario.start
    try:
        for session in scenario.sessions:
            for i, step in enumerate(session.steps):
                at = _moment(scenario, session.day, i)
                if step.action == "forget":
                    system.forget(step.text, user=step.user, at=at)
                else:
                    system.ingest(step.text, user=step.user, session=session.id, at=at)
            if session.decay:
                at += timedelta(minutes=1)
                system.decay(at)
        at = max(at + timedelta(minutes=1), _moment(scenario, scenario.probe_day, 0))
        if scenario.decay:
            system.decay(at)
            at += timedelta(minutes=1)
        out = []
        for probe in scenario.probes:
            ctx = system.context(probe.question, user=probe.user, budget=scenario.budget_tokens, at=at)
            out.append(Observation(scenario, probe, system.name, ctx, system.records(probe.user),
                                   getattr(system, "verbatim", False)))
        return out
    # The harness is a runner boundary: a system that raises becomes failed rows, never a lost scenario.
    except Exception as exc:  # noqa: BLE001
        failed = metrics.Failed(f"{type(exc).__name__}: {exc}")
        return [Observation(scenario, p, system.name, failed, {}) for p in scenario.probes]


def _classify(ctx: Context, probe: Probe) -> tuple[list[str], set[str], set[str]]:
    """Return the item ids in order, the stale ones and the current ones (see the module docstring)."""
    stale, current = set(), set()
    for item in ctx.items:
        has_current = metrics.mentions(item.text, probe.expect)
        if has_current:
            current.add(item.id)
        elif metrics.mentions(item.text, probe.forbid) and not (item.retracted or RETRACTION.search(item.text)):
            stale.add(item.id)
    return [i.id for i in ctx.items], stale, current


def _forget_sets(obs: Observation) -> tuple[set[str], set[str], set[str]]:
    """Return (F tombstoned, T targets with phantoms, K survivors) for a forgetting probe."""
    records = {rid: Record(*r) for rid, r in obs.records.items()}
    tombstoned = {rid for rid, r in records.items() if not r.active}
    # What states the change is not its target: a retraction ("I've quit pottery") or a record that says a
    # current value ("Thursday, not Tuesday") mentions the old value and must stay, as the stale rule says.
    stays = {rid for rid, r in records.items()
             if r.retracted or RETRACTION.search(r.text) or metrics.mentions(r.text, obs.probe.expect)}
    targets: set[str] = set()
    for phrase in obs.probe.forgets:
        hits = {rid for rid, r in records.items() if metrics.mentions(r.text, [phrase])}
        targets |= (hits - stays) or ({f"missing:{phrase}"} if not hits else set())
    keep: set[str] = set()
    for phrase in obs.probe.survivors:
        hits = {rid for rid, r in records.items() if metrics.mentions(r.text, [phrase])}
        if hits or obs.verbatim:
            keep |= hits
            continue
        # A survivor that no memory holds at all was never kept: it counts as lost, like a tombstone.
        keep.add(f"missing:{phrase}")
        tombstoned.add(f"missing:{phrase}")
    return tombstoned, targets, keep - targets


def _nan_row(obs: Observation) -> dict[str, Any]:
    ctx = obs.context
    ok = isinstance(ctx, Context)
    return {
        "qid": obs.qid, "scenario": obs.scenario.name, "probe": obs.probe.id, "system": obs.system,
        "question": obs.probe.question, "budget": obs.scenario.budget_tokens,
        "confidence": ctx.confidence if ok else None, "n_items": len(ctx.items) if ok else 0,
        "context": " | ".join(i.text for i in ctx.items) if ok else "",
        "history": " | ".join(i.text for i in ctx.history) if ok else "",
        "expect": "; ".join(obs.probe.expect), "forbid": "; ".join(obs.probe.forbid),
        "should_abstain": obs.probe.should_abstain, "error": None if ok else ctx.reason,
        **dict.fromkeys(["context_recall", "stale", "forgetting_precision", "forgetting_recall", "collateral",
                         "abstention_correct", "abstained", "tokens"], math.nan),
        **{f"R@{k}": math.nan for k in RANK_KS}, **{f"nDCG@{k}": math.nan for k in RANK_KS}, "RR": math.nan,
    }


def score(observations: Sequence[Observation]) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Return one row per observation and, per system, the mean of every metric over its applicable rows."""
    rows = {o.qid: _nan_row(o) for o in observations}
    aggregates: dict[str, dict[str, float]] = {}
    for system in dict.fromkeys(o.system for o in observations):
        mine = [o for o in observations if o.system == system]
        agg: dict[str, float] = {"probes": float(len(mine))}
        results = _metrics_of(mine)
        for name, result in results.items():
            for r in result.rows:
                rows[r.qid][name] = r.value
            agg[name] = result.mean
        ranked, means = _ranking_of(mine)
        for r in ranked:
            rows[r["qid"]].update({k: v for k, v in r.items() if k not in ("qid", "error")})
        agg.update(means)
        for o in mine:
            row = rows[o.qid]
            row["passed"] = _passed(row, o.probe)
        agg["pass_rate"] = sum(rows[o.qid]["passed"] for o in mine) / len(mine)
        agg["errors"] = float(sum(rows[o.qid]["error"] is not None for o in mine))
        aggregates[system] = agg
    return list(rows.values()), aggregates


def _metrics_of(obs: list[Observation]) -> dict[str, metrics.MetricResult]:
    """Return every per-probe memory metric of one system's observations (see the module docstring)."""
    out: dict[str, metrics.MetricResult] = {}

    expecting = [o for o in obs if o.probe.expect]
    if expecting:
        found = [c if isinstance(c := o.context, metrics.Failed) else
                 [v for v in o.probe.expect if any(metrics.mentions(i.text, [v]) for i in c.items)] for o in expecting]
        out["context_recall"] = metrics.context_recall(found, [o.probe.expect for o in expecting],
                                                       [o.qid for o in expecting])
    forbidding = [o for o in obs if o.probe.forbid]
    if forbidding:
        parts = [_classify(o.context, o.probe) if isinstance(o.context, Context) else (o.context, set(), set())
                 for o in forbidding]
        out["stale"] = metrics.stale_rate([p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts],
                                          qids=[o.qid for o in forbidding])
    forgetting = [o for o in obs if o.probe.forgetting]
    if forgetting:
        sets = [_forget_sets(o) for o in forgetting]
        got = [o.context if isinstance(o.context, metrics.Failed) else s[0] for o, s in zip(forgetting, sets, strict=True)]
        res = metrics.forgetting(got, [s[1] for s in sets], [s[2] for s in sets], [o.qid for o in forgetting])
        out.update(res)
    checked = [o for o in obs if o.probe.should_abstain is not None]
    if checked:
        abst = metrics.abstention([o.context if isinstance(o.context, metrics.Failed) else o.context.abstained
                                   for o in checked], [bool(o.probe.should_abstain) for o in checked],
                                  [o.qid for o in checked])
        out["abstention_correct"] = abst["abstention_accuracy"]
    out["abstained"] = metrics.per_question("abstained", [
        float(o.context.abstained) if isinstance(o.context, Context) else o.context for o in obs],
        [o.qid for o in obs])
    # tokens_packed counts a failure as the whole budget; budgets differ by scenario, so pass it per row.
    out["tokens"] = metrics.tokens_packed([o.context.tokens if isinstance(o.context, Context)
                                           else o.scenario.budget_tokens for o in obs], qids=[o.qid for o in obs])
    return out


def _ranking_of(obs: list[Observation]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Return ir-measures rows (R@k, nDCG@k, RR) for probes with expected values, documents = the values."""
    qrels, run = {}, {}
    for o in obs:
        if not o.probe.expect:
            continue
        qrels[o.qid] = dict.fromkeys(o.probe.expect, 1)
        if isinstance(o.context, metrics.Failed):
            run[o.qid] = o.context
            continue
        ranks = {}
        for pos, item in enumerate(o.context.items):
            for v in o.probe.expect:
                if v not in ranks and metrics.mentions(item.text, [v]):
                    # Distinct scores: ir-measures breaks ties by id, which would hide the real order.
                    ranks[v] = 1.0 / (pos + 1) - 1e-6 * len(ranks)
        run[o.qid] = ranks
    if not qrels:
        return [], {}
    return metrics.ranking_metrics(run, qrels, ks=RANK_KS)


def _passed(row: dict[str, Any], probe: Probe) -> bool:
    """Return True when every check the probe makes holds (see the module docstring)."""
    if row["error"] is not None:
        return False
    checks = [] if probe.should_abstain is None else [row["abstention_correct"] == 1.0]
    if probe.expect:
        checks.append(row["context_recall"] == 1.0)
    if probe.forbid:
        checks.append(row["stale"] == 0.0)
    if probe.forgetting:
        checks += [row["forgetting_precision"] == 1.0, row["forgetting_recall"] == 1.0, row["collateral"] == 0.0]
    return all(checks)


def run_scenarios(scenarios: Sequence[Scenario], recipes: Iterable[str] = ("default",),
                  baselines: Iterable[str] = BASELINES, *, embedder: Any = "auto", llm: Any = "offline",
                  rag_k: int = 5, progress: Progress | None = None
                  ) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]], dict[str, Any]]:
    """Return (rows, aggregates, provenance) of every scenario played through the recipes and baselines.

    One embedder and one model client are shared by every system (naive RAG embeds with the same
    embedder as mnemo). Provenance holds each system's, keyed by system name.
    """
    from mnemo.embed import make_embedder
    from mnemo.llm import connect

    emb, client = make_embedder(embedder), connect(llm)
    configs = [recipe(r) for r in recipes]
    factories: list[Callable[[Scenario], Any]] = [
        (lambda s, c=c: MnemoSystem(s, c, emb, client)) for c in configs]
    factories += [(lambda s, b=b: make_baseline(b, emb, rag_k)) for b in baselines]
    observations, provenance = [], {}
    total, done = len(scenarios) * len(factories), 0
    for scenario in scenarios:
        for factory in factories:
            system = factory(scenario)
            try:
                observations += play(scenario, system)
                provenance.setdefault(system.name, system.provenance())
            finally:
                system.close()
            done += 1
            if progress:
                progress(done, total, f"{scenario.name} / {system.name}")
    rows, aggregates = score(observations)
    return rows, aggregates, provenance


# Results ------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def write_results(out: str | Path, *, benchmark: str, rows: list[dict[str, Any]],
                  aggregates: dict[str, Any], configs: dict[str, Config], provenance: dict[str, Any],
                  checksums: dict[str, str] | None = None, params: dict[str, Any] | None = None,
                  started: float | None = None) -> tuple[Path, Path]:
    """Write `results.json` (config, git commit, data checksums, provenance, rows, aggregates) and `rows.parquet`.

    Returns the two paths. NaN (a metric that does not apply to a row) is written as null in JSON.
    """
    import pandas as pd

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": benchmark,
        "created": datetime.now().astimezone().isoformat(timespec="seconds"),
        "runtime_s": round(time.time() - started, 2) if started else None,
        "git_commit": git_commit(),
        "config": {name: cfg.to_dict() for name, cfg in configs.items()},
        "params": params or {},
        "data_checksums": checksums or {},
        "provenance": provenance,
        "aggregates": aggregates,
        "rows": rows,
    }
    json_path, parquet_path = folder / "results.json", folder / "rows.parquet"
    json_path.write_text(json.dumps(_jsonable(payload), indent=1, ensure_ascii=False), encoding="utf-8")
    frame = pd.DataFrame([{k: (json.dumps(_jsonable(v)) if isinstance(v, (list, dict, tuple)) else v)
                           for k, v in r.items()} for r in rows])
    frame.to_parquet(parquet_path, index=False)
    return json_path, parquet_path

