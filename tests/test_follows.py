"""`Store.follows`: the `follows` links recall reads, kept in process on DuckDB (store.cache) and read by SQL on PostgreSQL.

What it serves must be what the links table says: after inserts outside and inside
transactions, after a rollback, and in a fresh process's view of the store.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timezone

import numpy as np
import pytest

from mnemo.model import Link, MemoryRecord

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _add(store, ids: list[str]) -> None:
    recs = [MemoryRecord(id=i, user="u", text=f"turn {i}", created_at=T0, valid_from=T0) for i in ids]
    store.insert_memories(recs, np.eye(len(ids), store.dim, dtype=np.float32))


def _chain(ids: list[str]) -> list[Link]:
    return [Link(later, earlier, "follows", T0) for earlier, later in itertools.pairwise(ids)]


def _pairs(links: list[Link]) -> set[tuple[str, str]]:
    return {(x.src, x.dst) for x in links}


def test_follows_says_what_the_links_table_says(backend):
    store = backend.open()
    a, b = [f"a{k}" for k in range(4)], [f"b{k}" for k in range(3)]
    with store.transaction():
        _add(store, a)
        store.insert_links(_chain(a))
    assert _pairs(store.follows(["a1"])) == {("a1", "a0"), ("a2", "a1")}  # built here, at the first question
    _add(store, b)
    store.insert_links(_chain(b))  # after the first question: kept current by the insert
    assert _pairs(store.follows(["b1"])) == {("b1", "b0"), ("b2", "b1")}
    with pytest.raises(RuntimeError), store.transaction():
        _add(store, ["ghost"])
        store.insert_links([Link("ghost", "a3", "follows", T0)])
        raise RuntimeError("the write fails")  # rolled back: neither the memory nor its link ever was
    store.insert_links([Link("a3", "b0", "supersedes", T0)])  # another kind: not a neighbour
    every = a + b
    expected = {("a1", "a0"), ("a2", "a1"), ("a3", "a2"), ("b1", "b0"), ("b2", "b1")}
    assert _pairs(store.follows(every)) == _pairs(store.links(every, ("follows",))) == expected
    assert store.follows(["ghost", "nobody"]) == [] and store.follows([]) == []
    store.close()
    assert _pairs(backend.open().follows(every)) == expected  # a fresh view, built from the table
