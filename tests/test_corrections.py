"""A correction is said against what is known: it carries the words of the memory it replaces.

"They've moved us to 8:15" names neither the dinner nor the anniversary; the memory it supersedes
does. The successor keeps its own words as said and gains the old memory's words, its values left
out (`write.corrected_words`), as context: both retrievers search them and recall reads them as what
it mentions and covers (`model.topic_of`). The sentences are written for these tests.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import mnemo
from mnemo.corrections import corrected_words, remainder, without
from mnemo.extract import extract_offline
from mnemo.model import CORRECTS_KEY, Candidate, MemoryRecord, topic_of
from mnemo.recall import evidence

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


def test_the_words_of_a_corrected_memory_leave_out_the_values_it_held():
    old = MemoryRecord(id="m1", user="u", text="The GP put me on ramipril 5mg on 3 June for my blood pressure.",
                       value="5mg", created_at=T0, meta={CORRECTS_KEY: "I take ramipril daily since March"})
    words = corrected_words(old)
    assert {"ramipril", "blood", "pressure", "daily"} <= set(words.split())
    assert not {"5mg", "3", "June", "March"} & set(words.split()), words
    # A chain of corrections stays bounded.
    long = MemoryRecord(id="m2", user="u", text="word " * 500, created_at=T0)
    assert len(corrected_words(long)) <= 400


def test_a_correction_in_other_words_is_found_and_answers_by_what_it_replaced():
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        for day, turn in enumerate(["I booked the Lantern for our anniversary dinner at 7:30 on Friday.",
                                    "My sister Hana is visiting in June.", "I need a new bike helmet.",
                                    "The Lantern rang, they've moved us to 8:15."]):
            report = m.remember(turn, user="u", at=T0 + timedelta(days=day))
        [change] = report.superseded
        assert "7:30" in change.old.text and change.new.text.endswith("moved us to 8:15.")
        new = change.new
        assert "anniversary dinner" in new.meta[CORRECTS_KEY] and "7:30" not in new.meta[CORRECTS_KEY]
        assert "anniversary dinner" in new.meta["context"]  # searched by both retrievers, never shown
        r = m.recall("What time is my anniversary dinner?", user="u")
        assert r.memories[0].id == new.id and r.confidence != "unknown", r.provenance["confidence_why"]
        assert r.memories[0].text == new.text  # shown as said


def test_recall_reads_a_correction_as_mentioning_what_it_replaced():
    plain = MemoryRecord(id="a", user="u", text="They've moved us to 8:15.", created_at=T0)
    corrected = MemoryRecord(id="b", user="u", text=plain.text, created_at=T0,
                             meta={CORRECTS_KEY: "I booked the Lantern for our anniversary dinner at"})
    assert topic_of(plain.text, plain.meta) == plain.text
    assert {"anniversary", "dinner"} <= evidence.mentions(corrected)
    assert not {"anniversary", "dinner"} & evidence.mentions(plain)


def test_a_structured_add_that_supersedes_carries_what_it_replaced():
    """`Memory.add` reconciles as `remember` does, so its correction carries the old words too."""
    with mnemo.Memory.open(":memory:", embedder="hash", clock=mnemo.SimulatedClock(T0)) as m:
        m.add("The office wifi password is tulip-88.", user="u", subject="office wifi", attribute="password",
              value="tulip-88", kind="semantic", category="fact")
        new = m.add("Changed to heron-41.", user="u", subject="office wifi", attribute="password", value="heron-41",
                    kind="semantic", category="fact")
        assert [r.status for r in m.memories("u", include_inactive=True)].count("superseded") == 1
        assert "office wifi password" in new.meta[CORRECTS_KEY] and "tulip-88" not in new.meta[CORRECTS_KEY]


def _old(text: str, **kw) -> MemoryRecord:
    return MemoryRecord(id="old", user="u", text=text, created_at=T0, **kw)


def _claim(turn: str) -> Candidate:
    return next(c for c in extract_offline(turn) if c.value)


@pytest.mark.parametrize("old, turn, kept", [
    # The value the correction says it replaces ("71B, not 17B"), the rest of the sentence kept.
    ("Our locker is 17B at the Eastgate pool, £12 a month.", "Sorry, it's locker 71B, not 17B.",
     "Our locker is 71B at the Eastgate pool, £12 a month."),
    # The one value of the new value's type: the time moves, the date and the place stay.
    ("Booked the ferry, Oban to Mull on 14 May, leaves 09:50.", "The ferry leaves at 10:20 now.",
     "Booked the ferry, Oban to Mull on 14 May, leaves 10:20."),
    # Two times: the one after the correction's subject ("Leo at 5:15").
    ("Mia's lesson is at 4:30 and Leo at 5:15 on Tuesdays.", "We've moved Leo's lesson to 5:45.",
     "Mia's lesson is at 4:30 and Leo at 5:45 on Tuesdays."),
])
def test_what_a_corrected_memory_said_besides_the_value_is_kept_with_the_new_value(old, turn, kept):
    r = remainder(_old(old), _claim(turn))
    assert r is not None and r.text == kept and r.source == "derived" and r.meta["remainder_of"] == "old"


@pytest.mark.parametrize("old, turn", [
    ("My gate code is 4471.", "The gate code is 8812 now."),                      # said nothing else
    ("Swimming is at 4:30 and tennis at 5:15.", "It's at 5:45 now."),            # which time moved is unsure
    ("The rent is £950 a month.", "I no longer pay rent."),                      # a retraction replaces nothing
])
def test_no_remainder_when_nothing_else_was_said_or_the_word_is_unsure(old, turn):
    claims = [c for c in extract_offline(turn)]
    assert all(remainder(_old(old), c) is None for c in claims)


def test_a_later_correction_moves_the_correction_and_the_remainder_alike():
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        turns = ["Our locker at the Eastgate pool is number 17B, £12 a month.", "I swim on Mondays.",
                 "Sorry, it's locker 71B, not 17B.", "They moved us again, it's locker 44C now."]
        for day, turn in enumerate(turns):
            report = m.remember(turn, user="u", at=T0 + timedelta(days=day))
            if day == 2:
                [kept] = [r for r in report.added if r.meta.get("remainder_of")]
                assert "71B" in kept.text and "£12" in kept.text
                assert {x.kind for x in m.store.links([kept.id])} == {"supersedes"}
        active = [r.text for r in m.memories("u")]
        assert not any("71B" in t or "17B" in t for t in active), active
        assert any("44C" in t and "£12" in t for t in active), active


def test_values_said_together_are_kept_in_their_words_and_one_taken_back_leaves_the_rest():
    """ "I play the oboe and the mandolin" is one sentence holding two claims: each is a key of a memory that
    keeps the sentence as said; taking one back leaves the other, still in the speaker's words."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        first = m.remember("I play the oboe and the mandolin.", user="u", at=T0).added
        assert {r.value for r in first} == {"oboe", "mandolin"}
        assert all(r.text == "The user plays the oboe and the mandolin." for r in first)
        m.remember("I don't play the mandolin any more.", user="u", at=T0 + timedelta(days=1))
        active = [r for r in m.memories("u")]
        assert not any("mandolin" in r.text and not r.meta.get("negated") and "n't" not in r.text for r in active)
        [oboe] = [r for r in active if "oboe" in r.text]
        assert oboe.text == "The user plays the oboe." and oboe.source == "derived" and oboe.value == "oboe"


@pytest.mark.parametrize("text, value, left", [
    ("The user plays the oboe and the mandolin.", "mandolin", "The user plays the oboe."),
    ("The user plays the oboe and the mandolin.", "oboe", "The user plays the mandolin."),
    ("The user reads thrillers, memoirs and poetry.", "memoirs", "The user reads thrillers and poetry."),
    ("The user keeps goats, three nannies behind the barn.", "three nannies", "The user keeps goats behind the barn."),
    ("The user reads thrillers.", "poetry", None),
])
def test_a_conjunct_is_taken_out_with_the_word_that_joined_it(text, value, left):
    assert without(text, value) == left


def test_a_move_to_another_numbered_thing_moves_the_sentence_that_said_the_old_one():
    """ "They've moved us to room 118" names a room by its number, as "room 214" did in a sentence that said
    the place and the dates too: that sentence's claims (one text) are superseded together, kept with room 118."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("Booked the holiday! Seaview Lodge in Whitby, room 214, 3-7 June", user="u", at=T0)
        m.remember("any tips for rainy days on the coast with kids?", user="u", at=T0)
        m.remember("the lodge rang, they've moved us to room 118 because 214's got a leak", user="u",
                   at=T0 + timedelta(days=30))
        active = [r.text for r in m.memories("u")]
        assert not any("room 214" in t for t in active), active
        assert "Booked the holiday. Seaview Lodge in Whitby, room 118, 3-7 June." in active, active


@pytest.mark.parametrize("old, turn, kept", [
    ("Seaview Lodge in Whitby, room 214, 3-7 June.", "They've moved us to room 118.",
     "Seaview Lodge in Whitby, room 118, 3-7 June."),
    ("Bus 42 from stop 7 at 8:10.", "It's from stop 9 now.", "Bus 42 from stop 9 at 8:10."),
])
def test_of_two_numbers_the_one_said_with_the_same_noun_is_the_one_replaced(old, turn, kept):
    claim = next(c for c in extract_offline(turn) if c.value and any(ch.isdigit() for ch in c.value))
    r = remainder(_old(old), claim)
    assert r is not None and r.text == kept


def test_a_figure_said_to_be_new_replaces_the_old_one():
    """ "she's on 07700 900222, new phone": a number said with "new" is a change, though no verb says one."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("our cleaner Dorota comes on fridays, her number is 07700 900111", user="u", at=T0)
        m.remember("any tips for getting red wine out of a rug?", user="u", at=T0 + timedelta(days=1))
        m.remember("Dorota texted, she's on 07700 900222, new phone", user="u", at=T0 + timedelta(days=2))
        active = [r.text for r in m.memories("u")]
        assert not any("900111" in t for t in active), active
        assert any("900222" in t for t in active) and any("fridays" in t for t in active), active


@pytest.mark.parametrize(("old", "turn", "stale", "new"), [
    # "change X to Y": the object is what changed, the "to" phrase its new value (a word with a digit is no verb).
    ("The router password is sunflower12.", "I changed the router password to otter4412.", "sunflower12",
     "otter4412"),
    ("I take 20mg of citalopram.", "The doctor upped my citalopram to 40mg.", "20mg", "40mg"),
    # "from next week" says when the change holds, not the value it had.
    ("My son's judo classes are on Mondays.", "Judo's moved to Wednesdays from next week.", "Mondays", "Wednesdays"),
    # "moved to" selects a place, whatever entity type the tagger gave the name.
    ("I live in Glasgow.", "I moved to Bristol in October.", "Glasgow", "Bristol"),
    # A name the tagger reads as an adjective is still the value of a favourite.
    ("My favourite band is Radiohead.", "These days my favourite band is Big Thief.", "Radiohead", "Big Thief"),
    # "now" makes "report to" a change, but its relation stays the one the slot table knows (manager).
    ("My manager is Helga.", "I now report to Farid.", "Helga", "Farid"),
    # "New" opening a sentence is the adjective, not part of a name.
    ("The side gate code is 4471.", "New side gate code is 9902.", "4471", "9902"),
    # "actually" is the discourse adverb of a correction.
    ("Our choir practises on the second tuesday of the month.", "Sorry, actually it's the second wednesday.",
     "tuesday", "wednesday"),
    # The one memory of the order that says a date is what a change of its date moves.
    ("Order #5120 is two pallets of tiles, due on the 3rd.", "The supplier emailed, 5120 got pushed back to the 9th.",
     "3rd", "9th"),
])
def test_a_change_said_in_ordinary_words_supersedes_the_old_value(old, turn, stale, new):
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember(old, user="u", at=T0)
        m.remember(turn, user="u", at=T0 + timedelta(days=2))
        active = [x.text for x in m.memories("u")]
        assert not [t for t in active if stale in t and new not in t], active
        assert any(new in t for t in active), active


def test_two_places_said_by_name_never_update_each_other():
    """"The official language of Japan" and "of Romania": one value each, never one superseding the other, while a
    second value said of one of them replaces its first (a singular attribute said with "is" holds one value)."""
    with mnemo.Memory.open(":memory:", embedder="hash", clock=mnemo.SimulatedClock(T0)) as m:
        for k, turn in enumerate(["Japanese is the official language of Japan.",
                                  "Romanian is the official language of Romania.",
                                  "Korean is the official language of South Korea.",
                                  "Romania's official language is Hungarian."]):
            m.remember(turn, user="u", at=T0 + timedelta(minutes=k))
        held = {x.text: x.status for x in m.memories("u", include_inactive=True)}
        assert held["Japanese is the official language of Japan."] == "active", held
        assert held["Korean is the official language of South Korea."] == "active", held
        assert held["Romanian is the official language of Romania."] == "superseded", held


@pytest.mark.parametrize(("old", "turn"), [
    ("I ride a green Vespa to work.", "Sold the Vespa last month, I cycle now."),  # the chat's dropped "I"
    ("I have a season ticket for the Lyceum.", "I cancelled my season ticket for the Lyceum."),
])
def test_selling_or_cancelling_what_was_held_retires_it(old, turn):
    """"Sold the X" (no subject: the speaker did it) and "cancelled my X" end what the object names."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        first = m.remember(old, user="u", at=T0).added
        m.remember(turn, user="u", at=T0 + timedelta(days=2))
        held = {x.id: x.status for x in m.memories("u", include_inactive=True)}
        assert first and all(held[x.id] == "superseded" for x in first), held


def test_instead_says_the_new_value_takes_the_old_ones_place():
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("We're going to Crete in June.", user="u", at=T0)
        m.remember("Change of plan, we're going to Sicily instead.", user="u", at=T0 + timedelta(days=2))
        active = [x.text for x in m.memories("u")]
        assert not [t for t in active if "Crete" in t] and any("Sicily" in t for t in active), active


def test_a_pronoun_in_the_next_turn_fills_the_attribute_named_before():
    """"My dad's number is X" then "Dad got a new phone, it's Y": "it" is the number, which Y replaces."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("My dad's number is 07700 900333.", user="u", session="s", at=T0)
        m.remember("Dad got a new phone, it's 07700 900444.", user="u", session="s", at=T0 + timedelta(days=1))
        active = [x.text for x in m.memories("u")]
        assert not [t for t in active if "900333" in t], active
        assert any("900444" in t for t in active), active


def test_a_day_said_bare_is_the_events_value_as_on_a_day_is():
    """"The electrician is coming on Monday", then "he's coming Wednesday": the bare day replaces the day."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("The electrician is coming on Monday.", user="u", at=T0)
        m.remember("The electrician can't make Monday, he's coming Wednesday.", user="u", at=T0 + timedelta(hours=2))
        active = [x for x in m.memories("u") if x.subject == "electrician" and x.attribute == "come"]
        assert len(active) == 1 and "Wednesday" in active[0].text, [(x.text, x.value) for x in m.memories("u")]


def test_a_change_to_one_order_leaves_the_next_order_alone():
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("Order #5120 is two pallets of tiles, due on the 3rd.", user="u", at=T0)
        m.remember("Order #5121 is grout, due on the 6th.", user="u", at=T0)
        m.remember("The supplier emailed, 5120 got pushed back to the 9th.", user="u", at=T0 + timedelta(days=1))
        active = [x.text for x in m.memories("u")]
        assert any("6th" in t for t in active) and not any("3rd" in t for t in active), active


def test_a_weekday_change_keeps_the_person_the_sentence_also_named():
    """A weekday moves as one word does, and the person the old sentence named is no part of the change."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("our walking group meets on the first monday of the month, led by my friend anika", user="u", at=T0)
        m.remember("sorry, actually it's the first tuesday", user="u", at=T0 + timedelta(minutes=1))
        active = [x.text for x in m.memories("u")]
        assert not [t for t in active if "monday" in t.lower()], active
        assert [t for t in active if "anika" in t.lower() and "tuesday" in t.lower()], active


def test_the_same_number_said_again_with_a_time_cue_is_no_change():
    """"roughly 8 km both directions" restates "about 8 km each way": nothing a count reads has changed."""
    with mnemo.Memory.open(":memory:", embedder="minilm", clock=mnemo.SimulatedClock(T0)) as m:
        m.remember("i cycle to work, it's about 8 km each way", user="u", at=T0)
        m.remember("getting cold on the bike now, the ride in is roughly 8 km both directions", user="u",
                   at=T0 + timedelta(days=30))
        active = [x.text for x in m.memories("u")]
        assert any("each way" in t for t in active) and any("cycles to work" in t for t in active), active
