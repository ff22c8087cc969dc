"""Portable memory: lossless JSON round trips (a property test), Markdown for people, refusals that say why."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo import Memory, SimulatedClock
from mnemo.errors import ConfigError, EmbedderMismatch, InvalidInput
from mnemo.model import LINK_KINDS, STATUSES, Event, Link, MemoryRecord, Turn
from mnemo.portable import FORMAT_VERSION, json_lines, load, read_header

DIM = 16
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)

# Text the store accepts: anything but NUL and lone surrogates (refused with InvalidInput on write).
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=40)
KEYS = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False,
                                                                               allow_infinity=False) | TEXT
JSONS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                     max_leaves=8)
METAS = st.dictionaries(KEYS, JSONS, max_size=4)
TIMES = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc))
OPT = st.none() | TEXT


@st.composite
def stores(draw):
    """Draw turns, memories (tombstones with successors), events and links that refer to each other."""
    n = draw(st.integers(1, 6))
    users = draw(st.lists(TEXT, min_size=1, max_size=3))
    turns = [Turn(id=f"t-{k}", user=draw(st.sampled_from(users)), text=draw(TEXT), at=draw(TIMES),
                  session=draw(OPT), agent=draw(OPT), role=draw(st.sampled_from(["user", "api", "assistant"])),
                  meta=draw(METAS)) for k in range(draw(st.integers(0, 3)))]
    ids = [f"m-{k:04d}" for k in range(n)]
    memories = []
    for mid in ids:
        status = draw(st.sampled_from(STATUSES))
        memories.append(MemoryRecord(
            id=mid, user=draw(st.sampled_from(users)), text=draw(TEXT), kind=draw(st.sampled_from(["semantic",
            "procedural", "episodic"])), category=draw(st.sampled_from(["fact", "preference", "event"])),
            subject=draw(OPT), attribute=draw(OPT), value=draw(OPT), record_id=draw(OPT),
            references=tuple(draw(st.lists(TEXT, max_size=2))), importance=draw(st.floats(0, 1)),
            pinned=draw(st.booleans()), single_valued=draw(st.booleans()), agent=draw(OPT), session=draw(OPT),
            turn_id=draw(st.none() | st.sampled_from([t.id for t in turns] or ["t-x"])),
            source=draw(st.sampled_from(["user", "tool", "structured", "derived"])),
            created_at=draw(st.none() | TIMES), valid_from=draw(st.none() | TIMES),
            last_accessed=draw(st.none() | TIMES), expires_at=draw(st.none() | TIMES),
            access_count=draw(st.integers(0, 2**31 - 1)), corroborations=draw(st.integers(0, 1000)),
            status=status, status_reason=None if status == "active" else draw(TEXT),
            status_at=None if status == "active" else draw(TIMES),
            successor_id=draw(st.sampled_from(ids)) if status == "superseded" else None, meta=draw(METAS)))
    vectors = np.asarray(draw(st.lists(st.lists(st.floats(-1, 1, width=32), min_size=DIM, max_size=DIM),
                                       min_size=n, max_size=n)), dtype=np.float32)
    events = [Event(id=f"e-{k}", memory_id=draw(st.sampled_from(ids)), at=draw(TIMES),
                    action=draw(st.sampled_from(["created", "superseded", "forgotten", "corroborated"])),
                    status_from=draw(st.none() | st.sampled_from(STATUSES)),
                    status_to=draw(st.none() | st.sampled_from(STATUSES)), reason=draw(OPT),
                    evidence=draw(METAS), other_id=draw(st.none() | st.sampled_from(ids)))
              for k in range(draw(st.integers(0, 6)))]
    links = draw(st.lists(st.builds(Link, st.sampled_from(ids), st.sampled_from(ids), st.sampled_from(LINK_KINDS),
                                    st.none() | TIMES), max_size=4, unique_by=lambda lk: (lk.src, lk.dst, lk.kind)))
    return turns, memories, vectors, events, links


def _open(path=":memory:", embedder=f"hash:{DIM}"):
    return Memory.open(path, embedder=embedder, clock=SimulatedClock(T0))


def _fill(mem, turns, memories, vectors, events, links):
    with mem.store.transaction():
        mem.store.insert_turns(turns)
        mem.store.insert_memories(memories, vectors)
        mem.store.insert_events(events)
        mem.store.insert_links(links)


def _everything(mem):
    """Return every row of the store as values, vectors as bytes, from the store's own dump."""
    out = {"turns": [], "memories": [], "events": [], "links": []}
    for section, batch in mem.store.dump():
        out[section] += [(r, v.tobytes()) for r, v in batch] if section == "memories" else batch
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(stores())
def test_export_import_export_is_identical_and_lossless(data):
    with tempfile.TemporaryDirectory() as tmp, _open() as mem:
        _fill(mem, *data)
        first, second = Path(tmp) / "a.json", Path(tmp) / "b.json"
        mem.export(first)
        with Memory.import_(first) as copy:
            assert copy.embedder.name == mem.embedder.name
            copy.export(second)
            assert first.read_bytes() == second.read_bytes()
            assert _everything(copy) == _everything(mem)
            assert copy.memories(include_inactive=True) == mem.memories(include_inactive=True)


def test_round_trip_keeps_fields_tombstones_links_and_vectors(tmp_path):
    turns = [Turn("t-1", "ålice", "I moved to Lisbon 🏖\u2028 from Berlin", T0, session="s\n1", meta={"k": [1, 2.5]})]
    old = MemoryRecord("m-old", "ålice", "Lives in Berlin", subject="user", attribute="city", value="Berlin",
                       created_at=T0, status="superseded", status_reason="moved", status_at=T0 + timedelta(days=1),
                       successor_id="m-new", meta={"src": "chat", "n": {"deep": [None, True]}})
    new = MemoryRecord("m-new", "ålice", "Lives in Lisbon", subject="user", attribute="city", value="Lisbon",
                       references=("m-old",), created_at=T0 + timedelta(days=1), turn_id="t-1")
    events = [Event("e-1", "m-old", T0 + timedelta(days=1), "superseded", "active", "superseded", "moved",
                    {"score": 0.93}, "m-new")]
    links = [Link("m-new", "m-old", "supersedes", T0 + timedelta(days=1)), Link("m-new", "m-old", "because", None)]
    vecs = np.random.default_rng(0).normal(size=(2, DIM)).astype(np.float32)
    with _open() as mem:
        _fill(mem, turns, [old, new], vecs, events, links)
        mem.export(tmp_path / "x.json")
    with Memory.import_(tmp_path / "x.json", tmp_path / "copy.duckdb") as copy:
        assert copy.get("m-old") == old and copy.get("m-new") == new
        assert copy.history("m-old") == events
        assert copy.store.turn("t-1") == turns[0]
        assert copy.store.links(["m-new"]) == links
        assert np.array_equal(_everything(copy)["memories"][0][1], vecs[0].tobytes())
        # Only the active memory is searchable: the vector index follows the imported statuses.
        assert [mid for mid, _ in copy.store.search_dense(vecs[1], 5, user="ålice")] == ["m-new"]


def test_history_order_within_one_instant_survives_the_round_trip(tmp_path):
    # Inserted z-first: history follows insertion order, not ids, and an import must replay it that way.
    events = [Event("e-z", "m-1", T0, "created", None, "active", "novel"),
              Event("e-a", "m-1", T0, "corroborated", "active", "active", "said again")]
    with _open() as mem:
        _fill(mem, [Turn("t-z", "u", "second id, first said", T0), Turn("t-a", "u", "first id", T0)],
              [MemoryRecord("m-1", "u", "A fact", created_at=T0)], np.ones((1, DIM), np.float32), events, [])
        assert mem.history("m-1") == events
        mem.export(tmp_path / "a.json")
    with Memory.import_(tmp_path / "a.json") as copy:
        assert copy.history("m-1") == events
        assert [t.id for t in copy.store.recent_turns("u", None, 5)] == ["t-z", "t-a"]


def test_export_of_one_user_holds_only_their_rows(tmp_path):
    vecs = np.ones((2, DIM), np.float32)
    with _open() as mem:
        _fill(mem, [Turn("t-a", "a", "hi", T0), Turn("t-b", "b", "yo", T0)],
              [MemoryRecord("m-a", "a", "A fact"), MemoryRecord("m-b", "b", "B fact")], vecs,
              [Event("e-a", "m-a", T0, "created", None, "active"), Event("e-b", "m-b", T0, "created", None, "active")],
              [Link("m-b", "m-b", "refers_to", T0)])
        mem.export(tmp_path / "a.json", user="a")
    lines = [json.loads(x) for x in (tmp_path / "a.json").read_text().splitlines()]
    assert lines[0]["user"] == "a"
    assert {(x["type"], x.get("id")) for x in lines[1:-1]} == {("turn", "t-a"), ("memory", "m-a"), ("event", "e-a")}
    assert lines[-1]["counts"] == {"turn": 1, "memory": 1, "event": 1, "link": 0}


def test_json_export_streams_in_batches_from_one_snapshot():
    with _open() as mem:
        recs = [MemoryRecord(f"m-{k:03d}", "u", f"fact {k}", created_at=T0) for k in range(50)]
        _fill(mem, [], recs, np.ones((50, DIM), np.float32), [], [])
        stream = json_lines(mem.store, batch_size=10)
        head = next(stream)
        first = next(stream)
        # A write after the dump started is not in it: the dump reads one snapshot.
        with mem.store.transaction():
            mem.store.insert_memories([MemoryRecord("m-late", "u", "late", created_at=T0)], np.ones((1, DIM)))
        rest = list(stream)
    assert json.loads(head)["version"] == FORMAT_VERSION
    assert first.count(b"\n") == 10 and len(rest) == 5  # four more batches and the end line
    assert json.loads(rest[-1])["counts"]["memory"] == 50


def test_markdown_groups_by_status_and_kind_with_history(tmp_path):
    old = MemoryRecord("m-old", "alice", "Lives in *Berlin*", created_at=T0, status="superseded",
                       status_reason="moved to Lisbon", status_at=T0 + timedelta(days=1), successor_id="m-new")
    new = MemoryRecord("m-new", "alice", "Lives in Lisbon", created_at=T0 + timedelta(days=1))
    ep = MemoryRecord("m-ep", "alice", "Had a call\nabout AX-7", kind="episodic", category="event", created_at=T0)
    with _open() as mem:
        _fill(mem, [], [old, new, ep], np.ones((3, DIM), np.float32),
              [Event("e-1", "m-old", T0 + timedelta(days=1), "superseded", "active", "superseded", "moved to Lisbon",
                     {}, "m-new")], [])
        text = mem.export(tmp_path / "a.md", fmt="markdown").read_text()
    assert text.index("### Active") < text.index("#### episodic") < text.index("#### semantic") < \
        text.index("### Superseded")
    assert "~~Lives in \\*Berlin\\*~~" in text
    assert "superseded by `m-new` on 2025-01-02 00:00: moved to Lisbon" in text
    assert "superseded (m-new): moved to Lisbon" in text
    assert "Had a call about AX-7" in text
    with pytest.raises(InvalidInput, match="Markdown export"):
        Memory.import_(tmp_path / "a.md")


def _exported(tmp_path, n=3) -> Path:
    with _open() as mem:
        _fill(mem, [Turn("t-1", "u", "hello", T0)], [MemoryRecord(f"m-{k}", "u", f"fact {k}") for k in range(n)],
              np.ones((n, DIM), np.float32), [Event("e-1", "m-0", T0, "created", None, "active")],
              [Link("m-1", "m-0", "refers_to", T0)])
        return mem.export(tmp_path / "x.json")


def test_newer_format_version_and_foreign_files_are_refused(tmp_path):
    path = _exported(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**head, "version": FORMAT_VERSION + 1}) + "\n" + "".join(lines[1:]))
    with pytest.raises(InvalidInput, match=f"version {FORMAT_VERSION + 1}, newer .*upgrade mnemo"):
        Memory.import_(newer)
    (tmp_path / "other.json").write_text('{"hello": 1}\n')
    with pytest.raises(InvalidInput, match="not a mnemo export"):
        read_header(tmp_path / "other.json")


def test_embedder_mismatch_is_a_clear_error(tmp_path):
    path = _exported(tmp_path)
    with pytest.raises(EmbedderMismatch, match=r"hash-bow-16.*hash-bow-32"):
        Memory.import_(path, embedder="hash:32")
    with _open(tmp_path / "other.duckdb", embedder="hash:32"):
        pass
    # An existing store keeps its own embedder; the import refuses to mix vectors.
    with pytest.raises(EmbedderMismatch, match="hash-bow-32"):
        Memory.import_(path, tmp_path / "other.duckdb")


def test_existing_ids_are_refused_or_skipped_explicitly(tmp_path):
    path = _exported(tmp_path)
    target = tmp_path / "t.duckdb"
    Memory.import_(path, target).close()
    with pytest.raises(InvalidInput, match="already exists in the target store; nothing was imported"):
        Memory.import_(path, target)
    with _open(target) as mem:
        assert mem.stats()["memories"] == 3 and mem.stats()["turns"] == 1
        report = load(mem.store, path, on_conflict="skip")
        assert report.added == {"turn": 0, "memory": 0, "event": 0, "link": 0}
        assert sorted(report.skipped["memory"]) == ["m-0", "m-1", "m-2"] and len(report.skipped["link"]) == 1
        assert mem.stats()["memories"] == 3 and mem.stats()["links"] == 1
        with pytest.raises(ConfigError, match="on_conflict"):
            load(mem.store, path, on_conflict="overwrite")


@pytest.mark.parametrize("damage", ["truncate", "edit", "bad_line", "duplicate"])
def test_a_damaged_file_imports_nothing(tmp_path, damage):
    path = _exported(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    if damage == "truncate":
        lines = lines[:-2]
    elif damage == "edit":
        lines[2] = lines[2].replace("fact", "FACT")
    elif damage == "bad_line":
        lines[2] = '{"type": "memory", "id": 3}\n'
    else:
        lines.insert(3, lines[2])
    path.write_text("".join(lines))
    with _open() as mem, pytest.raises(InvalidInput, match=r"truncated|edited|x\.json:\d+|already exists"):
        load(mem.store, path)
    with _open() as mem:
        with pytest.raises(InvalidInput):
            load(mem.store, path)
        assert mem.stats()["memories"] == 0 and mem.stats()["turns"] == 0 and len(mem.store.index) == 0


def test_unknown_format_is_refused(tmp_path):
    with _open() as mem, pytest.raises(ConfigError, match="markdown"):
        mem.export(tmp_path / "x.csv", fmt="csv")
    assert not (tmp_path / "x.csv").exists()


def test_a_real_write_history_round_trips(tmp_path):
    with _open() as mem:
        mem.add("Lead time for AX-7 is 14 days", user="ops", subject="AX-7", attribute="lead_time", value="14 days",
                meta={"src": "erp"})
        mem.clock.advance(days=3)
        mem.add("Lead time for AX-7 is 21 days", user="ops", subject="AX-7", attribute="lead_time", value="21 days")
        mem.remember("I moved from Berlin to Lisbon last week.", user="alice", session="s2")
        mem.export(tmp_path / "a.json")
        before = _everything(mem)
    assert any(m.status == "superseded" and m.successor_id for m, _ in before["memories"])
    with Memory.import_(tmp_path / "a.json") as copy:
        assert _everything(copy) == before
        copy.export(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
