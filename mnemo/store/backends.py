"""Which store engine serves a location: a postgresql:// DSN is PostgreSQL, anything else a DuckDB file."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInput
from .duckdb import DuckDBStore
from .pg_connect import is_dsn, redact
from .postgres import PgStore


def store_class(path: str | Path, backend: str | None = None) -> type[DuckDBStore] | type[PgStore]:
    """Return the store class for `path`: `PgStore` for a postgresql:// DSN, else `DuckDBStore`."""
    chosen = backend or ("postgres" if is_dsn(path) else "duckdb")
    if chosen not in ("duckdb", "postgres"):
        raise InvalidInput(f"unknown backend {backend!r}; use 'duckdb' or 'postgres'")
    if (chosen == "postgres") != is_dsn(path):
        raise InvalidInput(f"backend {chosen!r} does not match {redact(str(path))!r}: the postgres backend takes "
                           "a postgresql:// DSN, the duckdb backend a file path or ':memory:'")
    return PgStore if chosen == "postgres" else DuckDBStore


def recorded_embedder(path: str | Path) -> str | None:
    """Return the embedder name the store at `path` was written with (None for a new store)."""
    return store_class(path).recorded_embedder(path)
