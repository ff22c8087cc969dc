"""`Memory.remember_many`: the outcomes of `remember` turn by turn, in one call.

Every scenario is played twice through the harness: once turn by turn, once with its turns
buffered and written by `remember_many` (flushed before a forget call, a decay pass or a probe,
so a batch spans sessions). The stores and every write report must say the same thing, memory
ids aside: which memories exist with what status, reason and successor, and what each turn did.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mnemo.clock import SimulatedClock
from mnemo.config import recipe
from mnemo.errors import InvalidInput
from mnemo.eval.harness import MnemoSystem, play
from mnemo.eval.scenarios import load_scenarios
from mnemo.memory import Memory

START = datetime(2024, 3, 1, 9, 0)


class Sequential(MnemoSystem):
    """Turn by turn, keeping each turn's report."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.reports: list[Any] = []

    def ingest(self, text: str, *, user: str, session: str, at: datetime) -> None:
        self._at(at)
        self.reports.append(self.mem.remember(text, user=user, session=session, at=at))


class Batched(Sequential):
    """Turns buffered and written by one `remember_many` before anything else reads or changes the store."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.pending: list[dict[str, Any]] = []

    def ingest(self, text: str, *, user: str, session: str, at: datetime) -> None:
        self.pending.append({"text": text, "user": user, "session": session, "at": at})

    def flush(self) -> None:
        if self.pending:
            self._at(max(p["at"] for p in self.pending))
            self.reports += self.mem.remember_many(self.pending, user=self.pending[0]["user"])
            self.pending = []

    def forget(self, *a: Any, **kw: Any) -> None:
        self.flush()
        super().forget(*a, **kw)

    def decay(self, *a: Any, **kw: Any) -> None:
        self.flush()
        super().decay(*a, **kw)

    def context(self, *a: Any, **kw: Any) -> Any:
        self.flush()
        return super().context(*a, **kw)


def snapshot(mem: Memory) -> list[tuple]:
    """Return every memory, ids replaced by texts, as a sorted list: what the store holds."""
    rows = mem.memories(include_inactive=True)
    text_of = {m.id: m.text for m in rows}
    turn_text = {t.id: t.text for t in mem.store.turns()}
    return sorted(tuple(map(str, (m.user, m.text, m.kind, m.category, m.subject, m.attribute, m.value, m.status,
                                  m.status_reason, text_of.get(m.successor_id or ""), m.corroborations,
                                  round(m.importance, 6), m.pinned, m.created_at, m.expires_at,
                                  turn_text.get(m.turn_id or ""),
                                  sorted((k, text_of.get(v, v) if isinstance(v, str) else v)
                                         for k, v in m.meta.items())))) for m in rows)


def outcome(report: Any) -> tuple:
    """Return what one write did, ids replaced by texts."""
    return ([m.text for m in report.added], [(s.old.text, s.new.text, s.reason) for s in report.superseded],
            [m.text for m, _ in report.corroborated], [m.text for m, _ in report.duplicates],
            [(m.text, why) for m, why in report.forgotten], [(c.text if c else None, why) for c, why in report.ignored])


def scenario_sets() -> list[Any]:
    """The project's scenarios, and the independent ones when MNEMO_DATA_DIR holds them."""
    out = [pytest.param(s, id=s.name) for s in load_scenarios()]
    dev = Path(os.environ.get("MNEMO_DATA_DIR", "/nonexistent")) / "scenarios-dev"
    if dev.is_dir():
        out += [pytest.param(s, id=f"dev-{s.name}") for s in load_scenarios(dev)]
    else:
        out.append(pytest.param(None, id="scenarios-dev", marks=pytest.mark.skip(
            reason="MNEMO_DATA_DIR/scenarios-dev is absent: the independent scenarios were not compared")))
    return out


@pytest.mark.parametrize("scenario", scenario_sets())
def test_remember_many_has_the_outcomes_of_remember_turn_by_turn(scenario):
    one, many = (cls(scenario, recipe("default"), "hash", "offline") for cls in (Sequential, Batched))
    try:
        seen_one, seen_many = play(scenario, one), play(scenario, many)
        assert len(many.reports) == len(one.reports) > 0
        assert [outcome(r) for r in many.reports] == [outcome(r) for r in one.reports]
        assert snapshot(many.mem) == snapshot(one.mem)
        for a, b in zip(seen_one, seen_many, strict=True):
            # Packs hold the same memories; their order may differ where scores and words tie (then random ids decide).
            assert sorted(i.text for i in b.context.items) == sorted(i.text for i in a.context.items)
            assert b.context.confidence == a.context.confidence
    finally:
        one.close()
        many.close()


def test_a_later_turn_supersedes_an_earlier_turn_of_the_same_batch():
    with Memory.open(":memory:", embedder="hash", clock=SimulatedClock(START)) as mem:
        reports = mem.remember_many(["Hi there!", "I'm thinking about dinner.", "I live in Berlin.",
                                     "The weather is nice.", "Actually I moved to Lisbon last month."],
                                    user="alice", session="s1")
        assert len(reports) == 5
        assert [s.old.text for s in reports[4].superseded] == [reports[2].added[0].text]
        live = [m.text for m in mem.memories("alice")]
        assert any("Lisbon" in t for t in live) and not any("Berlin" in t for t in live)
        old = reports[2].added[0]
        assert mem.get(old.id).status == "superseded" and mem.get(old.id).successor_id == reports[4].superseded[0].new.id


def test_a_save_this_reads_the_previous_turn_of_the_batch_as_its_context():
    turns = ["My locker code is 4471.", "Please remember that."]
    with Memory.open(":memory:", embedder="hash", clock=SimulatedClock(START)) as one, \
            Memory.open(":memory:", embedder="hash", clock=SimulatedClock(START)) as many:
        for t in turns:
            one.remember(t, user="u", session="s")
        reports = many.remember_many(turns, user="u", session="s")
        assert snapshot(many) == snapshot(one)
        # "that" is read from the first turn of the batch: its memory is corroborated, not a note about "that".
        assert [m.text for m, _ in reports[1].corroborated] == [m.text for m in reports[0].added]
        assert not reports[1].added


def test_the_turns_are_recorded_even_when_extraction_fails(monkeypatch):
    class Broken:  # an extractor that fails on every turn
        offline = True

        def __call__(self, *a: Any, **kw: Any) -> None:
            raise RuntimeError("extractor down")

    with Memory.open(":memory:", embedder="hash", clock=SimulatedClock(START)) as mem:
        mem.remember("I live in Berlin.", user="u", session="s")
        monkeypatch.setattr(mem, "extractor", Broken())
        with pytest.raises(RuntimeError):
            mem.remember_many(["I work at Acme.", "My sister is Ana."], user="u", session="s")
        assert sorted(t.text for t in mem.store.turns("u")) == ["I live in Berlin.", "I work at Acme.", "My sister is Ana."]
        # The memory transaction rolled back whole: nothing half-written, the earlier memory intact.
        assert [m.text for m in mem.memories("u", include_inactive=True)] == [
            m.text for m in mem.memories("u")] and len(mem.memories("u")) == 1
        assert mem.store.search_dense(mem.embedder.embed(["Berlin"])[0], 5, user="u")


def test_a_bad_turn_is_refused_before_anything_is_recorded():
    with Memory.open(":memory:", embedder="hash") as mem:
        with pytest.raises(InvalidInput, match="empty"):
            mem.remember_many(["I live in Berlin.", "   "], user="u")
        with pytest.raises(InvalidInput, match="unknown keys"):
            mem.remember_many([{"text": "hi", "speaker": "x"}], user="u")
        assert mem.store.turns("u") == [] and mem.memories("u") == []
        assert mem.remember_many([], user="u") == []


def test_remember_many_on_a_file_store_survives_reopening(tmp_path):
    path = tmp_path / "m.duckdb"
    with Memory.open(path, embedder="hash", clock=SimulatedClock(START)) as mem:
        mem.remember_many(["I live in Berlin.", "I moved to Lisbon."], user="u", session="s")
    with Memory.open(path, clock=SimulatedClock(START)) as mem:
        live = [m.text for m in mem.memories("u")]
        assert any("Lisbon" in t for t in live) and not any("Berlin" in t for t in live)
        assert mem.recall("Where does u live?", user="u").memories


def test_context_follows_the_stores_order_when_times_run_backwards():
    from datetime import timedelta

    turns = [("My locker code is 4471.", 5), ("My bike is red.", 1), ("Please remember that.", 3),
             ("I live in Berlin.", 0), ("Save this.", 4), ("Forget that.", 2)]
    with Memory.open(":memory:", embedder="hash", clock=SimulatedClock(START)) as one, \
            Memory.open(":memory:", embedder="hash", clock=SimulatedClock(START)) as many:
        for mem in (one, many):
            mem.remember("My desk is on floor 3.", user="u", session="s", at=START + timedelta(minutes=2))
        reports = [one.remember(t, user="u", session="s", at=START + timedelta(minutes=m)) for t, m in turns]
        batched = many.remember_many([{"text": t, "at": START + timedelta(minutes=m)} for t, m in turns],
                                     user="u", session="s")
        assert [outcome(r) for r in batched] == [outcome(r) for r in reports]
        assert snapshot(many) == snapshot(one)


def test_a_blocks_subject_reads_answer_as_the_store_does_as_turns_write():
    from mnemo.write import SubjectReads

    mem = Memory.open(":memory:", embedder="hash", clock=SimulatedClock(START))
    mem.remember("I live in Lisbon. My sister Ana is a nurse.", user="u", at=START)
    mem.remember("I live in Paris.", user="v", at=START)
    store = mem.store
    subjects = {m.subject for m in store.memories("u")} | {"nothing yet"}
    reads = SubjectReads(store, [("u", s) for s in subjects])
    assert reads.active_for("u", subjects) == store.active_for("u", subjects)
    for n, text in enumerate(["Actually I moved to Porto last month.", "Ana is a teacher now.",
                              "Forget that my sister is a teacher."]):
        report = mem.remember(text, user="u", at=START.replace(day=2 + n))
        reads.written([*report.added, *(s.new for s in report.superseded)])
        subjects |= {m.subject for m in report.added}
        for asked in [subjects, {"user"}, {"nothing yet"}]:
            assert reads.active_for("u", asked) == store.active_for("u", asked)
    assert reads.active_for("v", {"user"}) == store.active_for("v", {"user"})  # not read for the block: asked
    mem.close()
