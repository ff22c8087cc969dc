"""The write-path benchmark: its renderings, its scorers on hand-made outcomes, the builder on the data, a small run.

Scorer tests build the store's final state by hand (`Held` values), so each verdict is checked
without any extractor: every family has an outcome that must score 1 and one that must score 0.
The data-backed tests read $MNEMO_DATA_DIR (skip when unset, fail when set but incomplete).
"""

from __future__ import annotations

import math

import pytest
from conftest import require_data

from mnemo.eval import bench, metrics
from mnemo.eval.bench import writes as bench_writes
from mnemo.eval.bench.writes import Held
from mnemo.eval.datasets import writes as dw
from mnemo.eval.datasets.writes import Step, WriteExample

# Renderings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "template"), [
    ("Who performed {}?", "{v} performed {s}."),
    ("Who is the author of {}?", "{v} is the author of {s}."),
    ("Which city was {} born in?", "{s} was born in {v}."),
    ("What position does {} play?", "{s} plays {v}."),
    ("Which city did {} die in?", "{s} died in {v}."),
    ("Who is {}'s child?", "{v} is {s}'s child."),
    ("Who is {} married to?", "{s} is married to {v}."),
    ("What kind of work does {} do?", None),
    ("Which city is the headquarter of {} located in?", None),
])
def test_declarative_puts_the_value_where_the_wh_word_asks(question, template):
    assert dw.declarative(question) == template


@pytest.mark.parametrize(("question", "label", "np"), [
    ("What is the capital of {}?", "capital", "capital"),
    ("Who is the director of {}?", "director / manager", "director"),
    ("Which city was {} born in?", "place of birth", "place of birth"),
    ("What position does {} play?", "position played on team / speciality", "position"),
    ("Who founded {}?", "founded by", None),
])
def test_noun_phrase_from_question_then_label_then_wh_phrase(question, label, np):
    assert dw.noun_phrase(question, label) == np


def test_relation_templates_are_distinct_and_render_both_slots():
    rel = dw.relation_templates("P36", "The capital of {} is", "What is the capital of {}?", "capital")
    assert rel.templates == ("The capital of {s} is {v}.", "{v} is the capital of {s}.", "{s}'s capital is {v}.")
    assert dw.render(rel.templates[1], "France", "Paris") == "Paris is the capital of France."


def test_content_terms_drop_stopwords_and_names_and_plurals():
    assert dw.content_terms("Melanie painted two lakes at sunrise", ["Melanie"]) == {"painted", "lake", "sunrise"}
    assert dw.coverage("Melanie has cats", "I have a cat", ["Melanie"]) == 1.0
    assert dw.coverage("Melanie has dogs", "I have a cat", ["Melanie"]) == 0.0


# Scorers on hand-made outcomes ------------------------------------------------------------------


def ex(family: str, expect: dict, keys: list[str], text: str = "") -> WriteExample:
    return WriteExample(f"{family}/t", family, "test", "unit:t", tuple(Step(k, text or k) for k in keys), expect)


def h(i: int, step: str | None, text: str, status: str = "active", negated: bool = False) -> Held:
    return Held(f"m{i}", step, text, status, negated)


def test_distinct_counts_only_active_memories_from_each_statement():
    e = ex("duplicate_distinct", {"keys": ["4411", "4412", "4413"]}, ["fact-0", "fact-1", "fact-2"])
    good = [h(0, "fact-0", "Order 4411 went to Lisbon."), h(1, "fact-1", "Order 4412 went to Porto."),
            h(2, "fact-2", "Order 4413 went to Cork.")]
    assert bench_writes.score_distinct(e, good)["duplicate_precision"] == 1.0
    merged = [h(0, "fact-0", "Order 4411 went to Lisbon.", "superseded"), h(1, "fact-1", "Order 4412 went to Porto.")]
    assert bench_writes.score_distinct(e, merged) == {"given": 3.0, "stored_distinct": 1.0, "duplicate_precision": 1 / 3}
    assert bench_writes.score_distinct(e, [])["duplicate_precision"] == 0.0


def test_paraphrase_stored_once_or_corroborated_never_superseding():
    e = ex("duplicate_paraphrase", {"value": "Paris"}, ["original", "paraphrase"])
    once = [h(0, "original", "The capital of France is Paris.")]
    assert bench_writes.score_paraphrase(e, once) == {"paraphrase_handled": 1.0, "paraphrase_superseded_original": 0.0}
    twice = once + [h(1, "paraphrase", "Paris is the capital of France.")]
    assert bench_writes.score_paraphrase(e, twice)["paraphrase_handled"] == 0.0
    replaced = [h(0, "original", "The capital of France is Paris.", "superseded"),
                h(1, "paraphrase", "Paris is the capital of France.")]
    assert bench_writes.score_paraphrase(e, replaced) == {"paraphrase_handled": 0.0,
                                                           "paraphrase_superseded_original": 1.0}


def test_correction_needs_the_old_superseded_and_the_new_active():
    e = ex("correction", {"old": "Paris", "new": "Lyon"}, ["old", "new"])
    done = [h(0, "old", "The capital of France is Paris.", "superseded"), h(1, "new", "France's capital is Lyon.")]
    assert bench_writes.score_correction(e, done) == {"correction_recall": 1.0, "sup_correct": 1.0, "sup_wrong": 0.0}
    both = [h(0, "old", "The capital of France is Paris."), h(1, "new", "France's capital is Lyon.")]
    assert bench_writes.score_correction(e, both)["correction_recall"] == 0.0
    backwards = [h(0, "old", "The capital of France is Paris."), h(1, "new", "France's capital is Lyon.", "superseded")]
    assert bench_writes.score_correction(e, backwards) == {"correction_recall": 0.0, "sup_correct": 0.0,
                                                           "sup_wrong": 1.0}


def test_negative_supersession_is_a_false_positive():
    e = ex("correction_negative", {"first": "Paris", "second": "Lyon"}, ["first", "second"])
    kept = [h(0, "first", "The capital of France is Paris."), h(1, "second", "Spain's capital is Lyon.")]
    assert bench_writes.score_negative(e, kept) == {"negative_kept": 1.0, "sup_correct": 0.0, "sup_wrong": 0.0}
    wrong = [h(0, "first", "The capital of France is Paris.", "superseded"), h(1, "second", "Spain's capital is Lyon.")]
    assert bench_writes.score_negative(e, wrong) == {"negative_kept": 0.0, "sup_correct": 0.0, "sup_wrong": 1.0}


def test_correction_precision_is_micro_over_supersessions_across_both_families():
    rows = [{"family": "correction", "split": "test", "error": None, "sup_correct": 3.0, "sup_wrong": 0.0,
             "correction_recall": 1.0},
            {"family": "correction_negative", "split": "test", "error": None, "sup_correct": 0.0, "sup_wrong": 1.0,
             "negative_kept": 0.0}]
    head = bench_writes.headline(rows)
    assert head["correction_precision"] == 0.75 and head["supersessions"] == 4.0
    assert math.isnan(bench_writes.headline(rows[:0] + [dict(rows[0], sup_correct=0.0)])["correction_precision"])


def test_negation_retires_the_positive_and_leaves_no_positive_memory():
    e = ex("negation", {"value": "India"}, ["positive", "negation"])
    handled = [h(0, "positive", "Modi is a citizen of India.", "superseded"),
               h(1, "negation", "It is not true that Modi is a citizen of India.")]
    assert bench_writes.score_negation(e, handled)["negation_handled"] == 1.0
    flagged = [h(0, "positive", "Modi is a citizen of India.", "forgotten"),
               h(1, "negation", "Modi: citizen of India", negated=True)]
    assert bench_writes.score_negation(e, flagged)["negation_handled"] == 1.0
    kept = [h(0, "positive", "Modi is a citizen of India."),
            h(1, "negation", "It is not true that Modi is a citizen of India.")]
    assert bench_writes.score_negation(e, kept)["negation_handled"] == 0.0
    restated = [h(0, "positive", "Modi is a citizen of India.", "superseded"),
                h(1, "negation", "Modi is a citizen of India.")]
    assert bench_writes.score_negation(e, restated)["negation_handled"] == 0.0


def test_forget_scores_the_target_and_the_collateral():
    e = ex("forget", {"target": "Paris", "keep": ["Europe", "French"]}, ["target", "fact-1", "fact-2", "request"])
    exact = [h(0, "target", "The capital of France is Paris.", "forgotten"), h(1, "fact-1", "France is in Europe."),
             h(2, "fact-2", "France speaks French."), h(3, "request", "Please forget the capital of France.")]
    assert bench_writes.score_forget(e, exact) == {"forget_precision": 1.0, "forget_recall": 1.0, "collateral": 0.0}
    sweeping = [h(0, "target", "The capital of France is Paris.", "forgotten"),
                h(1, "fact-1", "France is in Europe.", "forgotten"), h(2, "fact-2", "France speaks French.")]
    assert bench_writes.score_forget(e, sweeping) == {"forget_precision": 0.5, "forget_recall": 1.0,
                                                      "collateral": 0.5}
    missed = [h(1, "fact-1", "France is in Europe.", "forgotten")]
    assert bench_writes.score_forget(e, missed) == {"forget_precision": 0.0, "forget_recall": 0.0, "collateral": 1.0}


def test_extraction_counts_facts_covered_by_the_turns_memories():
    e = WriteExample("extraction/t", "extraction", "test", "locomo:t",
                     (Step("turn", "I painted a lake sunrise last year and we adopted two cats."),),
                     {"facts": ["Melanie painted a lake sunrise last year.", "Melanie adopted two cats."],
                      "speaker": "Melanie"})
    full = [h(0, "turn", "The user painted a lake sunrise last year."), h(1, "turn", "The user adopted two cats.")]
    assert bench_writes.score_extraction(e, full)["extraction_recall"] == 1.0
    nothing = [h(0, None, "The user painted a lake sunrise last year.")]
    assert bench_writes.score_extraction(e, nothing)["extraction_recall"] == 0.0
    assert bench_writes.score_extraction(e, full[:1])["facts_found"] == 1.0


def test_a_failed_example_is_a_row_at_the_worst_values():
    e = ex("forget", {"target": "Paris", "keep": []}, ["target"])
    row = bench_writes.score(e, RuntimeError("boom"))
    assert row["error"] == "RuntimeError: boom"
    assert (row["forget_precision"], row["forget_recall"], row["collateral"]) == (0.0, 0.0, 1.0)


# The builder --------------------------------------------------------------------------------------


def test_synthetic_family_is_deterministic_and_distinct():
    a, b = dw.synthetic_examples(), dw.synthetic_examples()
    assert a == b
    tickets = next(e for e in a if e.id == "duplicate_distinct/tickets-300")
    assert len(tickets.steps) == 300 and len(set(tickets.expect["keys"])) == 300
    assert {e.split for e in a if e.unit == "synthetic:tickets"} == {"dev"}
    for e in a:
        if e.family == "correction":
            assert e.expect["old"] != e.expect["new"]
    _keys_are_in_their_statements(a)


def _keys_are_in_their_statements(examples: list[WriteExample]) -> None:
    """Every value a scorer looks for is written, whole, in the statement it belongs to."""
    for e in examples:
        steps = {s.key: s.text for s in e.steps}
        wanted = {f"fact-{i}": k for i, k in enumerate(e.expect.get("keys", []))}
        wanted |= {k: e.expect[k] for k in ("old", "new", "first", "second") if k in e.expect}
        for key, value in wanted.items():
            assert metrics.mentions(steps[key], [value]), (e.id, steps[key], value)


@pytest.fixture(scope="module")
def built() -> dw.WriteSet:
    require_data("mquake_hard", "locomo")
    return dw.build()


def test_builder_is_deterministic(built):
    again = dw.build()
    assert again.examples == built.examples and again.dropped == built.dropped


def test_splits_are_disjoint_by_source_unit(built):
    units = {}
    for e in built.examples:
        units.setdefault(e.unit, set()).add(e.split)
    assert all(len(s) == 1 for s in units.values()), [u for u, s in units.items() if len(s) > 1]
    # A fact is stated in one split only: MQuAKE examples draw only on subjects of their own split.
    subjects = {s: dw.split_of(f"mquake:{s}") for e in built.examples if e.family == "duplicate_distinct"
                for s in e.meta.get("subjects", [])}
    for e in built.examples:
        if e.family == "duplicate_distinct" and "subjects" in e.meta:
            assert {subjects[s] for s in e.meta["subjects"]} == {e.split}
        if "other_subject" in e.meta:
            assert dw.split_of(f"mquake:{e.meta['other_subject']}") == e.split
    assert {e.unit for e in built.examples if e.family == "extraction" and e.split == "dev"} == {
        f"locomo:{c}" for c in dw.LOCOMO_DEV}


def test_at_least_1000_examples_every_family_in_both_splits(built):
    n = dw.counts(built.examples)
    assert sum(n.values()) >= 1000
    assert set(n) == {(f, s) for f in dw.FAMILIES for s in dw.SPLITS}
    assert all(e.id.startswith(e.family + "/") for e in built.examples)
    assert len({e.id for e in built.examples}) == len(built.examples)
    _keys_are_in_their_statements(built.examples)


# A small run end to end -------------------------------------------------------------------------


def test_end_to_end_on_a_handful_of_examples():
    examples = [
        WriteExample("correction/i", "correction", "test", "synthetic:t",
                     (Step("old", "Invoice 5521 is for 340 euros."), Step("new", "Invoice 5521 is for 360 euros.")),
                     {"old": "340", "new": "360"}),
        WriteExample("forget/f", "forget", "test", "mquake:France",
                     (Step("target", "The capital of France is Paris."),
                      Step("fact-1", "France is located in the continent of Europe."),
                      Step("request", "the capital of France", "forget")), {"target": "Paris", "keep": ["Europe"]}),
        # An API forget with an empty query raises in the library: it must come back as a failed row.
        WriteExample("forget/bad", "forget", "test", "mquake:Nowhere",
                     (Step("target", "The capital of Nowhere is Paris."), Step("request", "", "forget")),
                     {"target": "Paris", "keep": []}),
    ]
    res = bench_writes.run_writes(split="test", embedder="hash", examples=dw.WriteSet(examples, {}, {}))
    by = {r["id"]: r for r in res.rows}
    assert len(res.rows) == 3 and by["forget/bad"]["error"] is not None
    assert by["forget/bad"]["collateral"] == 1.0
    assert by["correction/i"]["error"] is None and by["forget/f"]["error"] is None
    assert by["forget/f"]["collateral"] in (0.0, 1.0)
    head = res.aggregates["default | test"]
    assert head["errors"] == 1.0 and head["n forget"] == 2.0
    assert all(0.0 <= head[k] <= 1.0 for k in ("correction_recall", "forget_precision", "forget_recall"))
    assert "offline" in str(res.provenance["default"]["llm"]) and res.provenance["default"]["extractors"]
    header, rows = bench.summary("writes", res.aggregates)
    assert header[:2] == ["metric", "family"] and len(rows) == len(bench_writes.HEADLINE) + 2
