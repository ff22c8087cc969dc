"""Calibration examples built from the research wing: scenarios, LoCoMo, the trust set.

The calibration notebook (notebooks/30_calibration.ipynb) builds its labelled examples here and
fits them with the library (`mnemo.lab.calibrate`, `mnemo.lab.fitting`), which takes values only:

* `play_scenarios` / `scenario_examples` (the harness's scenarios played by mnemo) and
  `locomo_examples` (LoCoMo questions recalled from a `BenchStore`): the top recall evidence
  that certain_at and vague_at cut, one row a question;
* `trust_examples` (the trust set's pack trust, which act_threshold cuts) and `trust_at` (the
  trust metrics at a threshold).

Splits are `calibrate.stable_split` of the conversation or scenario name, so fitting never sees
the held-out examples.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from mnemo.clock import SimulatedClock
from mnemo.config import Config, recipe
from mnemo.embed import make_embedder
from mnemo.eval import datasets, metrics, trust_eval
from mnemo.eval.bench.common import BenchStore, CachedEmbedder, add_turns, session_times
from mnemo.eval.harness import MnemoSystem, play, score
from mnemo.eval.scenarios import load_scenarios
from mnemo.eval.trust_eval import trust_metrics
from mnemo.lab.calibrate import OPEN_BANDS, decision, stable_split, top_evidence
from mnemo.llm import connect
from mnemo.memory import Memory


def play_scenarios(config: Config | str | None = None, scenarios: Sequence[Any] | None = None,
                   embedder: Any = "auto", llm: str = "offline", *, examples: bool = False
                   ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Return (rows, aggregates) of the scenarios played by mnemo under `config` (`harness.play` + `score`).

    `harness.run_scenarios` takes recipe names; this plays a Config (a sweep point) the same way.
    With `examples`, rows are instead one per probe that says whether it is answerable (see
    `scenario_examples`) and the aggregates are empty.
    """
    emb, client = make_embedder(embedder), connect(llm)
    cfg = config if isinstance(config, Config) else recipe(config)
    observations, rows = [], []
    for s in scenarios if scenarios is not None else load_scenarios():
        system = MnemoSystem(s, cfg, emb, client)
        try:
            observations += play(s, system)
            for probe in s.probes if examples else ():
                if probe.should_abstain is None:
                    continue
                r = system.mem.recall(probe.question, user=probe.user, budget_tokens=s.budget_tokens)
                rows.append({"source": "scenarios", "group": s.name, "id": f"{s.name}/{probe.id}",
                             "kind": "never_said" if probe.should_abstain else "answerable",
                             "split": stable_split(s.name), "evidence": round(top_evidence(r), 4),
                             "decision": round(decision(r), 4),
                             "answerable": int(not probe.should_abstain),
                             "gold_packed": int(any(metrics.mentions(p.text, probe.expect) for p in r.memories))})
        finally:
            system.close()
    if examples or not observations:
        return rows, {}
    scored, aggregates = score(observations)
    return scored, next(iter(aggregates.values()))


def scenario_examples(scenarios: Sequence[Any] | None = None, embedder: Any = "auto",
                      llm: str = "offline") -> list[dict[str, Any]]:
    """Return one example per scenario probe that says whether it is answerable (expect or abstain).

    Each scenario is played by the harness under the default recipe with open bands; each
    probe is then recalled again to read its top evidence. `answerable` is 1 for probes
    expecting values, 0 for probes that must abstain; `gold_packed` is 1 when a packed memory
    mentions an expected value. Split by scenario name.
    """
    return play_scenarios(Config.from_params("default", **OPEN_BANDS), scenarios, embedder, llm, examples=True)[0]


def locomo_examples(limit: int | None = None, embedder: Any = "minilm", budget: int = 512,
                    questions_per_conversation: int | None = None, foreign: int = 30) -> list[dict[str, Any]]:
    """Return one example per LoCoMo question: top evidence, and whether the record can answer it.

    Every turn is stored as an episodic memory with its dia_id (`add_turns`, as `bench.dialog.run_dialog` does),
    in a store that does not record accesses, so questions stay independent; each question is
    recalled with `budget` tokens and open bands. `kind` is "answerable" (categories 1-4),
    "adversarial" (category 5: a premise the conversation never states) or "foreign" (the
    first `foreign` answerable questions of the next conversation, about people this one never
    mentions: never said). `gold_packed` is 1 when an evidence turn is packed. Split by
    conversation; the data's own held-out conversations are never loaded.
    """
    rows: list[dict[str, Any]] = []
    if limit == 0:
        return rows
    ds = datasets.load("locomo")
    emb, client = CachedEmbedder(make_embedder(embedder)), connect("offline")
    config = Config.from_params("default", **OPEN_BANDS)
    convs = ds.conversations[:limit] if limit else ds.conversations
    for ci, conv in enumerate(convs):
        nxt = ds.conversations[(ci + 1) % len(ds.conversations)].id
        others = [q for q in ds.questions if q.conversation_id == nxt and q.category != 5][:foreign]
        # Sessions without a date follow the previous one by a day, as in the benchmark runner.
        times = session_times(conv)
        clock = SimulatedClock(max(times) + timedelta(days=1))
        mem = Memory(BenchStore(":memory:", embedder=emb.name, dim=emb.dim), emb, client, clock, config)
        add_turns(mem, conv, times, emb.embed([t.document for t in conv.turns]))
        own = [q for q in ds.questions if q.conversation_id == conv.id][:questions_per_conversation]
        for q in own + (others if conv.id != nxt else []):
            r = mem.recall(q.question, user=conv.id, budget_tokens=budget)
            packed = {p.memory.meta.get("dia_id") for p in r.memories}
            kind = "foreign" if q.conversation_id != conv.id else "adversarial" if q.category == 5 else "answerable"
            rows.append({"source": "locomo", "group": conv.id, "id": f"{conv.id}/{q.id}", "kind": kind,
                         "split": stable_split(conv.id), "category": q.category, "evidence": round(top_evidence(r), 4),
                         "decision": round(decision(r), 4),
                         "answerable": int(kind == "answerable"),
                         "gold_packed": int(kind == "answerable" and bool(packed & set(q.evidence)))})
        mem.close()
    return rows


# Trust (act threshold) --------------------------------------------------------------------------

def trust_examples(rows: Sequence[dict[str, Any]] | None = None, path: str | Path | None = None
                   ) -> list[dict[str, Any]]:
    """Return the trust set's rows with `act_ok`: 1 when acting is right (safe, or unsafe but re-grounded to gold).

    `rows` defaults to a fresh `trust_eval.run_trust(path)` (default data/trust/cases.jsonl);
    ladder rungs keep their ladder in `family` and are split like the decisive cases.
    """
    rows = rows if rows is not None else trust_eval.run_trust(path or trust_eval.TRUST_CASES)["rows"]
    out = []
    for r in rows:
        fixed = bool(r.get("regrounded") and r.get("agrees_with_gold"))
        out.append({**r, "act_ok": int(r["label"] == "safe" or fixed), "trust": float(r.get("trust") or 0.0),
                    "family": (r.get("ladder") or {}).get("name", r.get("family"))})
    return out


def trust_at(rows: Sequence[dict[str, Any]], act_threshold: float) -> dict[str, Any]:
    """Return `trust_eval.trust_metrics` of the rows with their verdicts re-decided at `act_threshold`.

    Pack trust does not depend on the threshold (only `assess.decide` does), so one run of the
    trust set serves every threshold; a row whose harness failed stays failed.
    """
    decided = [{**r, "verdict": None if r.get("error") else ("act" if r["trust"] >= act_threshold else "escalate")}
               for r in rows]
    return trust_metrics(decided)
