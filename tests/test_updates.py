"""The fitted update decision: features, the model's arithmetic, its file, and what it decides in the write path."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import mnemo
from mnemo.errors import ConfigError
from mnemo.model import Candidate, MemoryRecord
from mnemo.updates import CLASSES, FEATURES, MODEL_FILE, UpdateModel, fit, pair_features

T0 = datetime(2025, 1, 6, 9, tzinfo=timezone.utc)


def _memory(text, **kw):
    return MemoryRecord(id="m1", user="u", text=text, **kw)


def test_features_are_general_and_in_order():
    c = Candidate(text="Ticket TK-2 is now closed.", subject="TK-2", attribute="status", value="closed",
                  record_id="TK-2", meta={"change_cue": True, "value_type": "thing"})
    m = _memory("Ticket TK-1 is open.", subject="TK-1", attribute="status", value="open", record_id="TK-1",
                meta={"value_type": "thing"})
    x = dict(zip(FEATURES, pair_features(c, m, sim=0.8, slot_sim=1.0, entity=None, slot="exact"), strict=True))
    assert len(x) == len(FEATURES)
    assert x["identifier_conflict"] == 1.0 and x["identifier_agree"] == 0.0
    assert x["slot_level"] == 1.0 and x["values_differ"] == 1.0 and x["change_cue"] == 1.0
    assert x["sentence_cosine"] == pytest.approx(0.8)


def test_a_fitted_model_gives_probabilities_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(90, len(FEATURES)))
    y = np.repeat([0, 1, 2], 30)
    x[y == 2, FEATURES.index("values_differ")] += 3
    model = fit(x, y)
    p = model.proba(x.tolist())
    assert p.shape == (90, 3) and np.allclose(p.sum(axis=1), 1.0)
    assert p[y == 2, CLASSES.index("update")].mean() > p[y != 2, CLASSES.index("update")].mean()
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model.to_json()))
    again = UpdateModel.load(path)
    assert np.allclose(again.proba(x.tolist()), p, atol=1e-4)


def test_a_model_fitted_on_other_features_is_refused(tmp_path):
    data = json.loads(MODEL_FILE.read_text()) if MODEL_FILE.is_file() else None
    if data is None:
        pytest.skip("no packaged update model")
    data["features"] = data["features"][:-1] + ["something_else"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="refit"):
        UpdateModel.load(path)


def test_the_packaged_model_records_what_it_was_fitted_and_reported_on():
    model = UpdateModel.load()
    assert model is not None, "mnemo/recipes/updates.json is missing: mnemo eval pairs --save it"
    assert model.info["fitted_on"] == "dev" and {"dev", "test"} <= set(model.info["figures"])
    assert 0 < model.update_at <= 1 and 0 < model.same_at <= 1


@pytest.fixture
def mem():
    with mnemo.Memory.open(":memory:", embedder="hash", clock=mnemo.SimulatedClock(T0)) as m:
        yield m


def _play(mem, *turns, user="kai"):
    reports = [mem.remember(t, user=user, at=T0 + timedelta(days=k)) for k, t in enumerate(turns)]
    return reports, [m.text for m in mem.memories(user)]


def test_the_write_path_uses_the_model_and_says_so(mem):
    assert mem.updates is not None
    reports, _ = _play(mem, "The Kestrel Bridge was designed by Ines Moura.", "The designer of the Kestrel Bridge is Karl Berg.")
    sup = reports[1].superseded
    assert sup and sup[0].evidence.get("match") == "fitted" and "fitted" in sup[0].evidence


def test_different_numbers_are_never_merged_by_the_model(mem):
    _, texts = _play(mem, "Pallet 31 goes to the Leeds depot.", "Pallet 32 goes to the Leeds depot.",
                     "Pallet 33 goes to the Leeds depot.")
    assert len(texts) == 3


def test_things_one_has_several_of_add_up(mem):
    _, texts = _play(mem, "I speak Welsh.", "I also speak Japanese.", "I have a tortoise called Gus.",
                     "I have a parrot too.")
    joined = " ".join(texts)
    assert all(w in joined for w in ("Welsh", "Japanese", "tortoise", "parrot"))


def test_the_audit_reads_an_update_the_slots_do_not_show():
    """Two active memories of one subject under two slot names, the newer a change: a contradiction."""
    from mnemo.audit import find_contradictions, fitted_contradictions
    from mnemo.config import WriteConfig

    old = MemoryRecord(id="m1", user="ops", text="The guest wifi password is tulip77.", subject="guest wifi",
                       attribute="password", value="tulip77", created_at=T0, meta={"value_type": "thing"})
    new = MemoryRecord(id="m2", user="ops", text="The guest wifi passcode changed to orchid42.", subject="guest wifi",
                       attribute="passcode", value="orchid42", created_at=T0 + timedelta(days=3),
                       meta={"value_type": "thing", "change_cue": True})
    vecs = np.asarray([[1.0, 0.0], [0.8, 0.6]], dtype=np.float32)
    assert find_contradictions([old, new]) == []  # the structured check sees two slots
    found = fitted_contradictions([old, new], vecs, UpdateModel.load(), WriteConfig())
    assert [tuple(m.id for m in c.memories) for c in found] == [("m1", "m2")]
    assert "update model" in found[0].recommendation["rationale"]
