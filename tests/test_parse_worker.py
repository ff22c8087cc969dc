"""The parse worker: a second process parses ahead for `remember_many`; what it returns is the parse of this one.

Each test that needs a worker starts its own (the module's worker is reset around every test) and
waits for it to load its parser, so the worker, not the fallback, is what is checked.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timedelta

import pytest
from test_remember_many import snapshot

import mnemo.extract.parse_worker as pw
from mnemo.config import recipe
from mnemo.eval.scenarios import load_scenarios
from mnemo.extract.parser import _RECENT, keep, parse, parse_to_wire
from mnemo.memory import Memory

TEXTS = ["My ticket KT-40 is due on 3 March and the team lead is Dana Ruiz.",
         "I don't eat meat anymore, but my mother-in-law still cooks lamb every Sunday.",
         "We paid $1,200 for the flight to Lisbon last week; call me on 555-0142.",
         "Sprint 2 ends on April 20, two days after Caroline's birthday.",
         "Note to self: the lead time for INV-2024-17 is six weeks."]


def tokens(doc) -> list[tuple]:
    """Everything the extractor and the question reader read of a parse."""
    return ([(t.text, t.whitespace_, t.pos_, t.tag_, t.dep_, t.head.i, t.lemma_, t.norm_, t.ent_type_, t.ent_iob_,
              t.is_sent_start, str(t.morph), t.is_stop, t.like_num) for t in doc]
            + [(e.start, e.end, e.label_) for e in doc.ents] + [(s.start, s.end) for s in doc.sents]
            + [doc.has_annotation(a) for a in ("DEP", "TAG", "POS", "LEMMA", "ENT_IOB", "MORPH", "SENT_START")])


@pytest.fixture
def fresh(monkeypatch):
    """A worker of this test's own, ready; the module's worker state is put back afterwards."""
    monkeypatch.setattr(pw, "_WORKER", None)
    monkeypatch.setattr(pw, "RESTARTS", 3)
    w = pw.start_parse_worker()
    if w is None:
        pytest.skip("one core: no parse worker is started")
    deadline = time.monotonic() + 120
    while not w.ready and w.failed is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert w.ready and w.failed is None, w.failed
    yield w
    w.close()
    w.proc.wait(timeout=30)


def forget_parses(texts):
    for t in texts:
        _RECENT.pop(t, None)


def test_the_wire_carries_every_attribute_the_reader_reads():
    here = [tokens(d) for d in parse(TEXTS)]
    forget_parses(TEXTS)
    keep(TEXTS, parse_to_wire(TEXTS))
    assert [tokens(d) for d in parse(TEXTS)] == here


def test_odd_texts_cross_the_wire_as_they_are():
    odd = ["  leading and trailing  ", "emoji \U0001f389 party\u00a0nbsp", "tab\tand\nnewline", "", " ", "null\x00byte",
           "ZWJ \U0001f469\u200d\U0001f469\u200d\U0001f467 family", "long " * 800, "\u00dcn\u00efc\u00f6d\u00e9 caf\u00e9",
           "\u200b zero width"]
    here = [tokens(d) for d in parse(odd)]
    forget_parses(odd)
    keep(odd, parse_to_wire(odd))  # raises if a text came back otherwise
    assert [tokens(d) for d in parse(odd)] == here


def test_kept_parses_must_be_the_texts_asked_for():
    with pytest.raises(ValueError, match="do not match"):
        keep(TEXTS[:2], parse_to_wire(TEXTS[1:3]))


def test_the_worker_parses_as_this_process_does(fresh):
    here = [tokens(d) for d in parse(TEXTS)]
    forget_parses(TEXTS)
    later = pw.parse_later(TEXTS)
    time.sleep(0.5)  # let the worker take the chunk before the caller comes for it
    assert later.wait() == {"worker": len(TEXTS), "here": 0}
    kept = [_RECENT[t] for t in TEXTS]
    assert [d for d in parse(TEXTS)] == kept  # read from what was kept, not parsed again
    assert [tokens(d) for d in kept] == here


def test_chunks_the_worker_has_not_begun_are_parsed_here(fresh, monkeypatch):
    monkeypatch.setattr(pw, "CHUNK", 1)
    texts = [f"{t} ({k})" for k in range(8) for t in TEXTS]
    later = pw.parse_later(texts)
    where = later.wait()  # at once: the worker has at most begun a few
    assert where["here"] > 0 and where["here"] + where["worker"] == len(texts)
    assert all(t in _RECENT for t in texts[-64:])


def test_a_killed_worker_costs_a_parse_here_and_a_new_worker_is_started(fresh, caplog):
    fresh.proc.kill()
    fresh.proc.wait(timeout=30)
    texts = [f"{t} (after the kill)" for t in TEXTS]
    later = pw.parse_later(texts)
    assert sum(later.wait().values()) == len(texts)
    assert all(t in _RECENT for t in texts)
    deadline = time.monotonic() + 30
    while fresh.failed is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "exited" in fresh.failed
    again = pw.start_parse_worker()
    assert again is not None and again is not fresh and pw.RESTARTS == 2
    again.close()


def test_a_worker_error_is_answered_and_parsed_here(fresh, caplog):
    failing = fresh.submit([None])  # not a text: the worker's parser raises, and it says so
    with pytest.raises(RuntimeError, match="the parse worker failed"):
        failing.result(timeout=60)
    assert fresh.failed is None  # it goes on
    ok = fresh.submit(TEXTS[:1]).result(timeout=60)
    keep(TEXTS[:1], ok)


def test_a_worker_with_another_parser_is_refused(monkeypatch):
    monkeypatch.setattr(pw, "_WORKER", None)
    monkeypatch.setattr(pw, "parser_name", lambda: "spacy-0/another-model")
    w = pw.start_parse_worker()
    if w is None:
        pytest.skip("one core: no parse worker is started")
    deadline = time.monotonic() + 120
    while w.failed is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "not spacy-0/another-model" in w.failed
    assert pw.start_parse_worker() is None  # and parsing stays here
    assert sum(pw.parse_later(TEXTS).wait().values()) == len(TEXTS)


def test_one_core_parses_here(monkeypatch):
    monkeypatch.setattr(pw, "_WORKER", None)
    monkeypatch.setattr(pw, "cores", lambda: 1)
    assert pw.start_parse_worker() is None
    assert pw.parse_later(TEXTS).wait() == {"worker": 0, "here": len(TEXTS)}


def test_remember_many_with_the_worker_stores_what_it_stores_without(fresh, monkeypatch):
    """Every turn of the project's scenarios, in one call of several blocks: the same store either way."""
    monkeypatch.setattr(pw, "PARSED", {"worker": 0, "here": 0})
    monkeypatch.setattr("mnemo.write.AHEAD", 8)  # blocks of 8 texts: the scenarios' 56 turns make several
    start = datetime(2024, 3, 1, 9, 0)
    turns = [{"text": t.text, "at": start + timedelta(minutes=k)}
             for k, t in enumerate(t for s in load_scenarios() for t in s.steps if t.action == "turn")]
    stores = []
    for on in (False, True):
        cfg = recipe("default")
        cfg = dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, parse_worker=on))
        mem = Memory.open(":memory:", embedder="hash", llm="offline", config=cfg)
        mem.remember_many(turns, user="u", session="s")
        stores.append(snapshot(mem))
        mem.close()
    assert pw.PARSED["worker"] > 0  # the worker did parse part of it
    assert stores[1] == stores[0] and len(stores[0]) >= 40


def test_the_worker_ends_with_a_killed_process(tmp_path):
    """SIGKILL the process mid-parse: its worker sees its stdin close and exits, orphaned parses and all."""
    import os
    import signal
    import subprocess
    import sys

    if pw.cores() < 2:
        pytest.skip("one core: no parse worker is started")
    script = tmp_path / "killed.py"
    script.write_text("import os, time\n"
                      "import mnemo.extract.parse_worker as pw\n"
                      "w = pw.start_parse_worker()\n"
                      "while not w.ready: time.sleep(0.05)\n"
                      "print(w.proc.pid, flush=True)\n"
                      "pw.parse_later([f'I live in Lisbon, flat {i}.' for i in range(3000)])\n"
                      "time.sleep(0.3)\n"
                      "os.kill(os.getpid(), 9)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert done.returncode == -signal.SIGKILL
    child = int(done.stdout.strip())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":  # exited; only its parent (now init, which may not reap here) has not collected it
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the parse worker outlived its killed parent by a minute")


def test_no_process_to_start_means_parsing_here(monkeypatch, caplog):
    def refuse(*a, **kw):
        raise PermissionError("no new processes here")

    monkeypatch.setattr(pw, "_WORKER", None)
    monkeypatch.setattr(pw, "RESTARTS", 3)
    monkeypatch.setattr(pw, "_UNAVAILABLE", None)
    monkeypatch.setattr(pw.subprocess, "Popen", refuse)
    monkeypatch.setattr(pw, "cores", lambda: 2)
    assert pw.start_parse_worker() is None and "no parse worker" in caplog.text
    assert pw.start_parse_worker() is None  # not tried again
    assert pw.parse_later(TEXTS).wait() == {"worker": 0, "here": len(TEXTS)}


def test_what_the_worker_prints_does_not_reach_its_frames(tmp_path):
    """A library in the worker that prints (to sys.stdout, or to fd 1 itself) writes to stderr, not into a frame."""
    import subprocess
    import sys

    script = tmp_path / "noisy.py"
    script.write_text("import os\n"
                      "import mnemo.extract.parse_worker as pw\n"
                      "real = pw.parse_to_wire\n"
                      "def noisy(texts):\n"
                      "    print('a library says hello')\n"
                      "    os.write(1, b'and so does C code')\n"
                      "    return real(texts)\n"
                      "pw.parse_to_wire = noisy\n"
                      "pw.main()\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert pw._read(proc.stdout)[0] == b"R"
        pw._send(proc.stdin, b"T", b'["I live in Lisbon."]')
        tag, wire = pw._read(proc.stdout)
        assert tag == b"D"
        keep(["I live in Lisbon."], wire)
    finally:
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=30)
    assert b"a library says hello" in err and b"and so does C code" in err


def test_threads_sharing_the_worker_each_get_their_own_parses(fresh, monkeypatch):
    """A server's threads write at once: each waits for its own chunks, whoever parsed them."""
    import threading

    monkeypatch.setattr(pw, "CHUNK", 3)
    batches = [[f"{t} (thread {k}, {j})" for j in range(4) for t in TEXTS] for k in range(4)]
    here = {t: tokens(d) for batch in batches for t, d in zip(batch, parse(batch), strict=True)}
    for batch in batches:
        forget_parses(batch)
    errors: list[BaseException] = []

    def write(batch):
        try:
            later = pw.parse_later(batch)
            time.sleep(0.05)
            later.wait()
            assert [tokens(d) for d in parse(batch)] == [here[t] for t in batch]
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]
    assert fresh.failed is None


def test_a_model_that_extracts_needs_no_parse_worker(monkeypatch):
    """When a model, not the parser, extracts, nothing is parsed ahead and no worker is started."""
    from mnemo import write
    from mnemo.extract import Extractor, live

    asked = []
    started = []
    monkeypatch.setattr(write, "start_parse_worker", lambda: started.append(1))
    monkeypatch.setattr(write, "AHEAD", 1)  # a block a turn
    # The model's answer is replaced (no network here); what is tested is that the write path asks it, not the parser.
    monkeypatch.setattr(live, "_live", lambda llm, turn, context, cfg: asked.append(turn.text) or [])
    cfg = recipe("default")
    mem = Memory.open(":memory:", embedder="hash", llm="offline")
    turns = [write.new_turn(f"I live in city {k}.", user="u", session="s", agent=None,
                            at=datetime(2024, 3, 1, 9, k), cfg=cfg) for k in range(5)]
    model = Extractor(llm=object())
    assert not model.offline
    reports = write.remember_many(mem.store, mem.embedder, model, turns, cfg, judge=lambda c, m: {})
    assert len(reports) == 5 and started == [] and len(asked) == 5
    mem.close()


def test_a_contracted_is_the_model_read_as_a_possessive_is_parsed_as_the_verb():
    """"Standup's at 10 now": the small model makes "Standup" the root and "'s" its possessive; the sentence is
    parsed again with the verb written out, and that parse crosses the wire like any other."""
    texts = ["Standup's at 10 now.", "Tom's happy with it", "My brother's car is red."]
    docs = parse(texts)
    assert [t.text for t in docs[0]][:2] == ["Standup", "is"] and docs[0][0].dep_ == "nsubj"
    assert docs[1][1].lemma_ == "be" and docs[1][0].dep_ == "nsubj"
    assert [t.dep_ for t in docs[2]][2] == "case", "a real possessive stays one"
    here = [tokens(d) for d in docs]
    forget_parses(texts)
    keep(texts, parse_to_wire(texts))
    assert [tokens(d) for d in parse(texts)] == here


def test_a_second_parse_that_does_not_read_as_meant_is_not_kept():
    """The verb written out must take the word before it as its subject; otherwise the first parse stands."""
    (doc,) = parse(["weighed them both at the vet, Pumpkin's 4.6 kg and Pickle's 1.2"])
    assert doc.text == "weighed them both at the vet, Pumpkin's 4.6 kg and Pickle's 1.2"


def test_a_name_chat_writes_in_lower_case_after_a_noun_for_a_person_is_read_as_a_name():
    """"my manager brigitte is strict": read again capitalised, kept only where the model then reads a name."""
    (named, common) = parse(["my manager brigitte is sooo strict", "I have a dentist appointment on tuesday"])
    assert named[2].text == "Brigitte" and named[2].pos_ == "PROPN" and named[2].head.i == 1
    assert common.text == "I have a dentist appointment on tuesday", "a common noun stays as it was"
    texts = ["my landlord pete wants the rent by friday"]
    here = [tokens(d) for d in parse(texts)]
    forget_parses(texts)
    keep(texts, parse_to_wire(texts))
    assert [tokens(d) for d in parse(texts)] == here


def test_a_lower_case_place_after_a_change_verbs_to_is_read_as_a_place():
    """"we relocated to ghent in may": "to ghent" is no infinitive after a change verb; "moved to rent" is one."""
    (place, verb) = parse(["we relocated to ghent in may", "we moved to rent a bigger flat"])
    assert place[3].text == "Ghent" and place[3].dep_ == "pobj"
    assert verb.text == "we moved to rent a bigger flat" and verb[3].tag_ == "VB"
