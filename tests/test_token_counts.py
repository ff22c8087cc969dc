"""store.counts: each memory's token count is stored with it, filled for older stores, and handed to recall.

Tests taking `backend` run against DuckDB and PostgreSQL (see conftest.py).
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

import mnemo
from mnemo import tokens
from mnemo.model import MemoryRecord
from mnemo.store import SCHEMA_VERSION, new_id
from mnemo.store.counts import COUNTER_KEY

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
TEXTS = ["I live in Lisbon.", "The warranty of KT-40 lasts 24 months.", "Café crème, s'il vous plaît — 3,50 €.",
         "x" * 150 + " is a blob", "My sister's name is Ana and she teaches maths in Porto."]


def _records(texts: list[str]) -> list[MemoryRecord]:
    return [MemoryRecord(id=new_id(), user="alice", text=t, created_at=T0, valid_from=T0) for t in texts]


def _vecs(n: int) -> np.ndarray:
    v = np.random.default_rng(0).normal(size=(n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _stored(store) -> dict[str, int | None]:
    return dict(store._run("SELECT text, tokens FROM memories").fetchall())


def _write(store, texts: list[str]) -> None:
    with store.transaction():
        store.insert_memories(_records(texts), _vecs(len(texts)))


def test_each_memory_stores_the_tokenizers_count_of_its_text(backend):
    store = backend.open()
    _write(store, TEXTS)
    assert _stored(store) == dict(zip(TEXTS, tokens.count_many(TEXTS, cache=False), strict=True))
    assert store.schema_version == SCHEMA_VERSION >= 3  # token counts came with schema 3


def test_a_store_of_schema_version_2_opens_migrated_with_every_count_filled(backend):
    store = backend.open()
    _write(store, TEXTS)
    # Put the store back to what version 2 left: no tokens column, no counter named.
    with store.transaction():
        if backend.name == "duckdb":  # DuckDB drops a column only from a table with no index on it
            store._run("DROP INDEX memories_id")
        store._run("ALTER TABLE memories DROP COLUMN tokens")
        if backend.name == "duckdb":
            store._run("CREATE INDEX memories_id ON memories (id)")
        store._run("DROP TABLE turn_outcomes")  # version 4's
        store._run("UPDATE store_meta SET value = '2' WHERE key = 'schema_version'")
        store._run(f"DELETE FROM store_meta WHERE key = '{COUNTER_KEY}'")
    store.close()
    store = backend.open()
    assert store.schema_version == SCHEMA_VERSION
    assert _stored(store) == dict(zip(TEXTS, tokens.count_many(TEXTS, cache=False), strict=True))
    assert store._meta()[COUNTER_KEY] == tokens.tokenizer_name()


def test_counts_made_by_another_counter_are_made_again_at_open(backend):
    store = backend.open()
    _write(store, TEXTS)
    with store.transaction():
        store._run("UPDATE memories SET tokens = 999")
        store._run(f"UPDATE store_meta SET value = 'regex-estimate-elsewhere' WHERE key = '{COUNTER_KEY}'")
    store.close()
    store = backend.open()
    assert _stored(store) == dict(zip(TEXTS, tokens.count_many(TEXTS, cache=False), strict=True))


def test_reading_memories_hands_their_stored_counts_to_the_tokenizer_cache(backend):
    store = backend.open()
    _write(store, ["A memory whose count was stored when it was written."])
    with store.transaction():
        store._run("UPDATE memories SET tokens = 77")  # a stored count the tokenizer would not give
    tokens._cache.clear()
    [m] = store.memories("alice")
    assert tokens.count_many([m.text]) == [77]  # the stored count, not a fresh encoding
    tokens._cache.clear()


def test_a_read_only_store_whose_counts_another_counter_made_hands_none_over(tmp_path):
    path = tmp_path / "s.duckdb"
    from mnemo.store import DuckDBStore

    store = DuckDBStore(path, embedder="test", dim=8)
    _write(store, ["Counted by some other counter."])
    with store.transaction():
        store._run("UPDATE memories SET tokens = 77")
        store._run(f"UPDATE store_meta SET value = 'another' WHERE key = '{COUNTER_KEY}'")
    store.close()
    ro = DuckDBStore(path, embedder="test", dim=8, read_only=True)
    tokens._cache.clear()
    [m] = ro.memories("alice")
    assert tokens.count_many([m.text]) == tokens.count_many([m.text], cache=False) != [77]
    ro.close()


def test_a_correction_stores_the_count_of_the_new_memorys_text(tmp_path):
    mem = mnemo.Memory.open(str(tmp_path / "m.duckdb"), embedder="hash")
    mem.remember("I live in Lisbon.", user="u", at=T0)
    mem.remember("Actually I moved to Porto last month.", user="u", at=datetime(2025, 2, 1, tzinfo=timezone.utc))
    rows = mem.store.con.execute("SELECT text, tokens, status FROM memories").fetchall()
    assert {r[2] for r in rows} >= {"active", "superseded"}
    assert all(n == tokens.count_many([t], cache=False)[0] for t, n, _ in rows)
    mem.close()
