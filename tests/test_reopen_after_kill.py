"""A memory written by a process that was killed (no close) is found by id when the store is opened again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mnemo.memory import Memory

ROOT = Path(__file__).resolve().parents[1]


def test_a_memory_written_by_a_killed_process_is_found_by_id_after_reopening(tmp_path):
    # DuckDB 1.5.5 lost the id index entries of a replayed log when the first connection after the kill only
    # read store_meta (Memory.open with no embedder) and closed: memories() listed the row, get() did not find it.
    path = tmp_path / "m.duckdb"
    with Memory.open(path, embedder="hash:32") as mem:
        mem.insert_many([f"memory {i} about cats" for i in range(30)], user="u")
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from mnemo.memory import Memory\n"
            f"mem = Memory.open({str(path)!r})\n"
            "print(mem.add('The zebra lives in the garden shed', user='u').id)\n"
            "os._exit(0)\n")
    mid = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    with Memory.open(path) as mem:
        assert mem.get(mid).text == "The zebra lives in the garden shed"
        assert mid in mem.store.get_many([mid])
    with Memory.open(path) as mem:
        assert mem.get(mid).active


def test_a_store_open_for_writing_in_this_process_can_be_opened_again_without_naming_its_embedder(tmp_path):
    path = tmp_path / "m.duckdb"
    with Memory.open(path, embedder="hash:32") as first:
        first.insert_many(["x y"], user="u")
        again = Memory.open(path)
        assert again.embedder.name == "hash-bow-32"
        again.close()
