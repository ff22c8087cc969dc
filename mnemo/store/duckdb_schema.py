"""The DuckDB store's schema and SQL dialect: its migrations, and how its queries test a column against a list.

`duckdb.DuckDBStore` runs `migrations` when it opens a file for writing and renders the shared
SQL of `store.sql` in `DUCKDB`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .rows import MIGRATED
from .sql import Dialect


def migrations(dim: int) -> list[tuple[int, list[str]]]:
    """Ordered schema migrations: (version, statements). Append, never edit a shipped one.

    Memories and events carry no PRIMARY KEY: ids are random 64-bit values minted
    here (imports check for clashes themselves), and a uniqueness check would cost
    every insert. Version 2 adds a plain ART index on memories.id: point reads and
    updates (get, set_status, a recall's candidates) stop scanning the table, for
    about a quarter more time per bulk insert (benchmarks/README.md). It also drops
    the fts index that version 1 stores built (BM25 is served in process now).
    """
    return [
        (
            1,
            [
                """CREATE TABLE turns (id VARCHAR PRIMARY KEY, user_id VARCHAR NOT NULL, session VARCHAR,
                   agent VARCHAR, role VARCHAR, text VARCHAR NOT NULL, ts TIMESTAMP NOT NULL, meta VARCHAR)""",
                f"""CREATE TABLE memories (id VARCHAR NOT NULL, user_id VARCHAR NOT NULL, text VARCHAR NOT NULL,
                   kind VARCHAR, category VARCHAR, subject VARCHAR, attribute VARCHAR, value VARCHAR,
                   record_id VARCHAR, refs VARCHAR[], importance DOUBLE, pinned BOOLEAN, single_valued BOOLEAN,
                   agent VARCHAR, session VARCHAR, turn_id VARCHAR, source VARCHAR, created_at TIMESTAMP,
                   valid_from TIMESTAMP, last_accessed TIMESTAMP, expires_at TIMESTAMP, access_count INTEGER,
                   corroborations INTEGER, status VARCHAR, status_reason VARCHAR, status_at TIMESTAMP,
                   successor_id VARCHAR, meta VARCHAR, embedding FLOAT[{dim}])""",
                """CREATE TABLE events (id VARCHAR NOT NULL, memory_id VARCHAR NOT NULL, ts TIMESTAMP NOT NULL,
                   action VARCHAR NOT NULL, status_from VARCHAR, status_to VARCHAR, reason VARCHAR,
                   evidence VARCHAR, other_id VARCHAR)""",
                """CREATE TABLE links (src VARCHAR NOT NULL, dst VARCHAR NOT NULL, kind VARCHAR NOT NULL,
                   ts TIMESTAMP)""",
            ],
        ),
        (
            2,
            [
                "DROP SCHEMA IF EXISTS fts_main_memories CASCADE",
                "CREATE INDEX IF NOT EXISTS memories_id ON memories (id)",
            ],
        ),
        # Each memory's token count (store.counts), filled for existing rows when the store opens.
        (3, ["ALTER TABLE memories ADD COLUMN tokens INTEGER"]),
        # What became of each turn (mnemo.recover): a turn with no row was recorded and never processed.
        (4, ["""CREATE TABLE turn_outcomes (turn_id VARCHAR NOT NULL, ts TIMESTAMP NOT NULL, outcome VARCHAR NOT NULL,
                detail VARCHAR)""",
             f"INSERT INTO turn_outcomes SELECT id, ts, 'migrated', '{MIGRATED}' FROM turns"]),
        # Lexical search reads a memory's context beside its text (rows.searched_text): the postings live in
        # process and are rebuilt from the table (persist.FORMAT 2 refuses the old saved ones), so no statement.
        (5, []),
    ]


_PROBE_MAX = 2_000  # past this many ids a literal IN list costs more than one scan


def in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """Return ("column IN (...)", params): a literal list, which DuckDB pushes into the scan (zone maps) and
    answers from the ART index on id; a list parameter (list_contains) is tested row by row. For very many
    values, one semi-join."""
    if not values:
        return "FALSE", []
    if len(values) > _PROBE_MAX:
        return f"{column} IN (SELECT unnest(?))", [list(values)]
    return f"{column} IN ({', '.join('?' * len(values))})", list(values)


DUCKDB = Dialect(
    name="duckdb", mark="?", text_mark="?", seq="rowid", for_update="", any_of=in_list,
    meta_eq=lambda key, value: ("json_extract_string(meta, ?) = ?", [f"$.{key}", value]),
    number=lambda x: f"CAST({x!r} AS DOUBLE)", log2=lambda x: f"log2({x})",
    seconds=lambda a, b: f"epoch({b}::TIMESTAMP - {a})",
)
