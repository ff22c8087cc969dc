"""An entity the question names by one name and the record files under another.

"The user's mechanic is called Ferris" joins two keys: what is said of the mechanic is filed under
"user's mechanic", what is said of Ferris under "ferris". A question naming one side is about both
(`evidence.namesakes`): recall adds what is filed under the other side to its candidates
(`recall.candidates.namesakes`), and reads those memories as about the entity asked
(`evidence.about`, both directions). The sentences are written for these tests.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from mnemo import Memory
from mnemo.clock import SimulatedClock
from mnemo.config import Config
from mnemo.model import MemoryRecord
from mnemo.recall import evidence

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)


def name_claim(subject: str, value: str) -> MemoryRecord:
    return MemoryRecord(id=f"m-{value}", user="u", text=f"The {subject} is called {value}.", subject=subject,
                        attribute="name", value=value, created_at=T0)


@pytest.mark.parametrize(("question", "keys"), [
    ("How much does Ferris charge now?", ["user's mechanic"]),       # by name: what is filed under the role
    ("What does my mechanic charge?", ["ferris"]),                   # by role: what is filed under the name
    ("Where is Okafor's practice?", ["user's dentist"]),             # one word of "Dr Okafor" names her
    ("Is my mechanic Ferris still in Leith?", []),                   # both said: nothing to add
    ("What is the weather like?", []),
])
def test_a_name_claim_joins_the_two_keys_a_question_may_use(question, keys):
    claims = [name_claim("user's mechanic", "Ferris"), name_claim("user's dentist", "Dr Okafor")]
    assert evidence.namesakes(question, claims) == keys


def test_the_users_own_name_adds_nothing():
    own = MemoryRecord(id="m-1", user="u", text="The user is called Ada.", subject="user", attribute="name",
                       value="Ada", created_at=T0)
    assert evidence.namesakes("What does Ada do for work?", [own]) == []


def test_a_memory_under_the_role_is_about_the_name_asked():
    names = evidence.aliases([name_claim("user's mechanic", "Ferris")])
    rate = MemoryRecord(id="m-2", user="u", text="The user's mechanic put his rate up to 60 GBP an hour.",
                        subject="user's mechanic", attribute="rate", value="60 GBP an hour", created_at=T0)
    assert evidence.about("ferris", rate, names)
    assert not evidence.about("ferris", rate, {})


def _store(mem: Memory) -> None:
    rng = random.Random(1)
    things = ["garden", "car", "bike", "laptop", "kitchen", "boiler", "roof", "piano", "dog", "cat"]
    filler = [f"I spent {rng.randint(2, 90)} pounds on the {rng.choice(things)} "
              f"{rng.choice(['repair', 'service', 'parts', 'cleaning'])} in week {i}." for i in range(200)]
    mem.remember_many(["My mechanic is called Ferris.", "My mechanic put his rate up to 60 GBP an hour.",
                       *filler], user="u")


def test_recall_finds_what_is_filed_under_the_role_when_the_question_uses_the_name(monkeypatch):
    # Ten candidates a retriever: the rate is far down the dense list, and BM25 has no word of it.
    cfg = Config(recall=replace(Config().recall, candidates=10))
    with Memory.open(":memory:", clock=SimulatedClock(T0), config=cfg) as mem:
        _store(mem)
        r = mem.recall("How much does Ferris charge now?", user="u", budget_tokens=60)
        assert any("60 GBP" in p.memory.text for p in r.memories)
        assert r.confidence == "certain"
        # Without the name claim's other key, neither retriever reaches the rate through "Ferris".
        monkeypatch.setattr(evidence, "namesakes", lambda question, memories: [])
        r = mem.recall("How much does Ferris charge now?", user="u", budget_tokens=60)
        assert not any("60 GBP" in p.memory.text for p in r.memories)


def test_a_filtered_recall_keeps_to_its_filter():
    with Memory.open(":memory:", clock=SimulatedClock(T0)) as mem:
        _store(mem)
        r = mem.recall("How much does Ferris charge now?", user="u", budget_tokens=60,
                       filters={"kinds": ["episodic"]})
        assert all(p.memory.kind == "episodic" for p in r.memories)
