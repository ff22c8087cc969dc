"""A correction is said against what is known: it carries the words of the memory it replaces.

"They've moved us to 8:15" names neither the dinner nor the anniversary; the memory it supersedes
does. The successor keeps its own words as said and gains the old memory's words, its values left
out (`write.corrected_words`), as context: both retrievers search them and recall reads them as what
it mentions and covers (`model.topic_of`). The sentences are written for these tests.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import mnemo
from mnemo.model import CORRECTS_KEY, MemoryRecord, topic_of
from mnemo.recall import evidence
from mnemo.write import corrected_words

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
