"""Current before stale in text that was never reconciled, and pasted code kept as one note.

A long chat says a value many times in passing ("the main branch has now reached 165", "pushed
with 150 commits"); the claims stored from it fall under different keys, so reconciliation cannot
supersede one by the other. Recall then reads the question as the key: the memories that state a
value for what it asks (`evidence.stated`) form one group, and the one said last comes first
(`ranking.current_first`), or the one said first when the question asks for an earlier value.
The sentences here are written for these tests, not taken from any benchmark.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from mnemo import Memory
from mnemo.clock import SimulatedClock
from mnemo.extract.questions import ask
from mnemo.extract.turns import extract_offline, without_code
from mnemo.model import MemoryRecord, Scored
from mnemo.recall import evidence
from mnemo.recall.ranking import current_first

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


def said(mid: str, text: str, day: int, **kw) -> MemoryRecord:
    return MemoryRecord(id=mid, user="u", text=text, created_at=T0 + timedelta(days=day), **kw)


@pytest.mark.parametrize(("question", "asked"), [
    ("How many beehives does the user keep?", "beehives"),
    ("How many tomato plants are in my greenhouse?", "tomato plants"),
    ("How many hours of piano practice did I log?", "hours of piano practice"),
    ("Which train line do I take to work?", "train line"),
])
def test_a_question_names_the_thing_it_asks_for_or_counts(question, asked):
    assert ask(question).asked == asked


@pytest.mark.parametrize(("question", "earlier"), [
    ("What was my original rent?", True),
    ("Where did I live previously?", True),
    ("What did the plan say at first?", True),
    ("What is my rent?", False),
    ("What was my previous job?", True),
    # An ordinal names a thing; it does not ask for an earlier value of it, nor does a cue naming another thing.
    ("When is the deadline for the first chapter?", False),
    ("How should I schedule the work so that the initial phase of planting ends by May?", False),
])
def test_a_question_asks_for_an_earlier_value_only_by_a_cue_of_prior_time(question, earlier):
    assert ask(question).earlier is earlier


def test_a_memory_states_a_value_beside_what_the_question_asks():
    q = ask("How many tomato plants are in my greenhouse?")
    assert evidence.stated(q, said("a", "I now have 14 tomato plants after the spring sowing.", 0)) == {"14"}
    # The number must sit beside the thing asked: plants, not the greenhouse's width.
    assert evidence.stated(q, said("b", "The greenhouse is 4 metres wide.", 0)) == frozenset()
    # A date is no count: "my May 3 planting" states no number of plants.
    assert evidence.stated(q, said("c", "The tomato plants go out on May 3, 2025.", 0)) == frozenset()


def test_an_amount_of_money_answers_how_much_it_costs_and_not_how_old_or_how_many():
    cost = ask("How much does the yoga retreat cost?")
    assert evidence.stated(cost, said("a", "The yoga retreat is £420 for the week.", 0)) == {"420"}
    # A bare number beside the thing is no price: "the retreat runs 12-16 May" costs nothing said.
    assert evidence.stated(cost, said("b", "The yoga retreat runs 12-16 May in Devon.", 0)) == frozenset()
    old = ask("How old is the user's boiler?")
    assert evidence.stated(old, said("c", "The boiler cost £900 back then and the boiler is 12 now.", 0)) == {"12"}
    many = ask("How many hens does the user keep?")
    assert evidence.stated(many, said("d", "The user keeps 6 hens, feed is 30 dollars a sack.", 0)) == {"6"}
    # And a claim whose value is money does not answer a question for a number.
    kofi = ask("How old is Kofi?")
    pocket = said("e", "Kofi gets €5.", 0, subject="kofi", attribute="get", value="5 EUR",
                  meta={"value_type": "money"})
    assert evidence.fit(kofi, pocket, {}) == "entity"


def test_a_date_question_reads_the_dates_and_a_number_the_question_says_is_no_answer():
    q = ask("When is my dentist appointment for tooth 36 scheduled?")
    assert q.wants == "date"
    assert evidence.stated(q, said("a", "The dentist appointment for tooth 36 moved to June 9.", 0)) == {"june", "9"}


def scored(m: MemoryRecord, score: float) -> Scored:
    return Scored(m, score, {}, 10)


def test_the_value_said_last_ranks_first_whatever_keys_its_claims_have():
    q = ask("How many tomato plants are in my greenhouse?")
    old = scored(said("old", "The user planted 9 tomato plants in the greenhouse.", 0,
                      subject="user", attribute="plant", value="9 tomato plants"), 0.9)
    new = scored(said("new", "The greenhouse is now up to 14 tomato plants.", 30,
                      subject="greenhouse", attribute="be_up_to", value="14 tomato plants"), 0.5)
    other = scored(said("other", "The user waters the greenhouse daily.", 40), 0.7)
    assert [s.memory.id for s in current_first([old, new, other], q)] == ["new", "old", "other"]
    # Without the question's reading the two claims share no key, and nothing moves.
    assert [s.memory.id for s in current_first([old, other, new])] == ["old", "other", "new"]


def test_a_question_for_the_earlier_value_puts_the_value_said_first_first():
    q = ask("How many tomato plants did I originally have in my greenhouse?")
    old = scored(said("old", "I planted 9 tomato plants in the greenhouse.", 0), 0.4)
    new = scored(said("new", "The greenhouse is now up to 14 tomato plants.", 30), 0.9)
    assert [s.memory.id for s in current_first([new, old], q)] == ["old", "new"]


def test_statements_that_agree_are_left_in_their_order():
    q = ask("How many tomato plants are in my greenhouse?")
    a = scored(said("a", "I have 14 tomato plants in the greenhouse.", 0), 0.9)
    b = scored(said("b", "Still 14 tomato plants in the greenhouse.", 30), 0.5)
    assert [s.memory.id for s in current_first([a, b], q)] == ["a", "b"]


def test_recall_puts_the_count_said_last_first_in_an_unreconciled_chat():
    # Two turns of one afternoon state the count in different words and with no word of change: the claims
    # land under different keys (user/grow, greenhouse/hold), so both stay active ("now holds 14" would move
    # the 9: tests/test_reconcile.py). The older one matches the question's words better and, said the same
    # day, is as recent: only the question can tell they answer one thing.
    with Memory.open(":memory:", embedder="hash", clock=SimulatedClock(T0)) as mem:
        mem.remember("I grow 9 tomato plants in my greenhouse.", user="u", at=T0)
        mem.remember("After the second sowing and a wet week, the greenhouse holds 14 tomato plants beside "
                     "the basil and chillies.", user="u", at=T0 + timedelta(hours=2))
        mem.clock.advance(timedelta(days=1))
        r = mem.recall("How many tomato plants are in my greenhouse?", user="u", budget_tokens=400)
        texts = [p.memory.text for p in r.memories]
        assert len(texts) == 2 and "14" in texts[0] and "9 tomato" in texts[1], texts
        assert r.memories[0].scores.get("current_first") == 1.0


def test_pasted_code_is_one_note_not_claims():
    turn = ("I'm stuck on the importer.\n```python\nimport csv\nrows = list(csv.reader(open(path)))\n"
            "total = sum(int(r[2]) for r in rows)\n```\nI moved the job to the night shift last week.")
    prose, blocks = without_code(turn)
    assert blocks == [("python", "import csv\nrows = list(csv.reader(open(path)))\n"
                                 "total = sum(int(r[2]) for r in rows)\n")]
    assert "csv" not in prose and "night shift" in prose
    found = extract_offline(turn)
    code = [c for c in found if c.meta.get("rule") == "note.code"]
    assert [c.text for c in code] == ["The user shared python code: import csv rows = list(csv.reader(open(path))) "
                                      "total = sum(int(r[2]) for r in rows)"]
    assert code[0].meta["source_text"].startswith("import csv")
    # The code's lines give no claims of their own; the prose still does.
    assert not any("csv" in c.text or "sum(" in c.text for c in found if c not in code)
    long = extract_offline("My config:\n```yaml\n" + "key: value\n" * 200 + "```")
    assert [len(c.text) < 300 and c.text.endswith(" ...") for c in long if c.meta.get("rule") == "note.code"] == [True]
    assert any("night shift" in c.text for c in found)


def test_an_unclosed_fence_runs_to_the_end_of_the_turn():
    prose, blocks = without_code("Here it is:\n```\nSELECT * FROM orders;\nDELETE FROM orders;")
    assert blocks == [("", "SELECT * FROM orders;\nDELETE FROM orders;")] and "orders" not in prose
    # A fence with nothing inside is left as it is.
    assert without_code("an empty ``` fence") == ("an empty ``` fence", [])


def test_a_question_of_no_type_reads_dates_and_numbers_and_code_states_nothing():
    q = ask("What is the deadline for the grant report?")
    assert q.wants is None
    assert evidence.stated(q, said("a", "The grant report deadline moved to June 9, 2025.", 0)) == {"june", "9", "2025"}
    code = said("c", "The user shared python code: deadline = '2025-06-09' # grant report", 0,
                meta={"rule": "note.code"})
    assert evidence.stated(q, code) == frozenset()


def test_a_stated_value_answers_the_users_own_question_but_not_one_about_another_entity():
    own = ask("How many tomato plants do I have?")
    plants = said("p", "The greenhouse now holds 14 tomato plants.", 0, subject="greenhouse", attribute="hold")
    assert evidence.fit(own, plants, {}) == "answers"
    # About a particular entity, the memory must be about it: the mother-in-law's date is no answer for the mother.
    mother = ask("When is the birthday of the user's mother?")
    in_law = said("m", "The user's mother-in-law's birthday is on 3 August.", 0, subject="user's mother-in-law",
                  attribute="birthday")
    assert evidence.fit(mother, in_law, {}) != "answers"
    # Asking for a name wants a name: a month beside the words asked is no answer.
    firm = ask("What is the name of the user's audit firm?")
    assert firm.wants == "name"
    assert evidence.stated(firm, said("a", "Audit prep for the firm starts in February.", 0)) == frozenset()


@pytest.mark.parametrize(("question", "wants"), [
    ("How tall is the user's son?", "number"), ("How far is the user's commute?", "number"),
    ("How big is the user's garden?", "number"), ("How long is the drive?", "duration"),
    ("How often does the user swim?", "thing"),
])
def test_how_with_an_adjective_of_measure_asks_for_a_number(question, wants):
    assert ask(question).wants == wants


@pytest.mark.parametrize(("turn", "kept"), [
    ("I moved to Lisbon last month, can you recommend a gym nearby?", "moved to Lisbon"),
    ("My budget is 300 euros - what should I buy first?", "budget is 300 euros"),
    ("Since we adopted a second cat, how often should I clean the litter tray?", "adopted a second cat"),
    ("I only sold 4 paintings at the fair, is that a bad sign?", "sold 4 paintings"),
    # An inverted auxiliary before a subject that opens on a determiner starts a question too.
    ("I take my tablet with breakfast, does the timing matter much?", "with breakfast"),
])
def test_what_a_question_states_before_it_asks_is_remembered(turn, kept):
    texts = [c.text for c in extract_offline(turn)]
    assert any(kept in t for t in texts), texts
    # The question itself stores nothing.
    assert not any("?" in t or "recommend" in t or "should I" in t for t in texts), texts


@pytest.mark.parametrize("turn", [
    "If I move to Lisbon, can you recommend a gym nearby?",  # a supposition, not a statement
    "Where do you think I should live, Lisbon or Porto?",
    "Can you help me, please?",
])
def test_a_question_with_no_statement_before_it_stores_nothing(turn):
    assert extract_offline(turn) == []


def test_a_relative_clause_is_not_where_a_question_starts():
    texts = [c.text for c in extract_offline(
        "I rebuilt the shed roof, which has held through two storms, so can you suggest a gutter?")]
    assert any("held through two storms" in t or "rebuilt the shed roof" in t for t in texts), texts


def test_asking_which_things_is_not_answered_by_how_many_there_were():
    q = ask("What specific bugs were logged on the tracker?")
    assert q.wants == "thing"
    assert evidence.stated(q, said("a", "The user logged 3 bugs on the tracker.", 0)) == frozenset()
    counted = ask("How many bugs were logged on the tracker?")
    assert evidence.stated(counted, said("a", "The user logged 3 bugs on the tracker.", 0)) == {"3"}


def test_words_in_common_do_not_make_a_question_for_a_slot_certain():
    q = ask("Which lint rules did I enforce in the project?")
    assert q.slot or q.asked
    # High topical evidence, no packed memory holding the rules: hedged, not certain.
    assert evidence.verdict(q, ["entity"], 0.9, [], certain_at=0.6, vague_at=0.35)[0] == "vague"
    assert evidence.verdict(q, ["answers"], 0.9, [], certain_at=0.6, vague_at=0.35)[0] == "certain"
    # A question that names no slot or thing still rests on the evidence alone.
    open_q = ask("Tell me about my week")
    assert not (open_q.slot or open_q.asked)
    assert evidence.verdict(open_q, ["entity"], 0.9, [], certain_at=0.6, vague_at=0.35)[0] == "certain"
