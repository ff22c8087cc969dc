"""PostgreSQL addresses and connections for the store and the quota counter (split from postgres.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ExtensionUnavailable, InvalidInput, StoreError

DSN_PREFIXES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "mnemo"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def is_dsn(path: str | Path) -> bool:
    """Return True when `path` is a PostgreSQL URI rather than a DuckDB file."""
    return isinstance(path, str) and path.startswith(DSN_PREFIXES)


def split_dsn(dsn: str) -> tuple[str, str]:
    """Return (the DSN libpq understands, the store's schema) from a DSN that may carry ?schema=NAME."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.match(schema):
        raise InvalidInput(f"schema {schema!r} is not a plain lower-case identifier (letters, digits, _)")
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), schema


def redact(dsn: str) -> str:
    """Return `dsn` with any password replaced by ***, fit for logs and provenance."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def psycopg_module() -> Any:
    """Import psycopg and the pgvector adapter, or raise saying what to install."""
    try:
        import pgvector.psycopg  # noqa: F401
        import psycopg
    except ImportError as exc:
        raise StoreError("the PostgreSQL store needs psycopg and pgvector; run: pip install 'mnemo-ltm[postgres]'"
                         ) from exc
    return psycopg


def connect(dsn: str) -> Any:
    """Open an autocommit connection in UTC, turning an unreachable server into a StoreError."""
    psycopg = psycopg_module()
    conninfo, _ = split_dsn(dsn)
    try:
        con = psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as exc:
        raise StoreError(f"cannot connect to {redact(dsn)}: {str(exc).strip()}; start PostgreSQL "
                               "(in a checkout: bash .ci/services.sh start) or fix the DSN") from exc
    con.execute("SET TIME ZONE 'UTC'")
    return con


def vector_schema(con: Any, *, create: bool) -> str:
    """Return the schema holding the `vector` extension, creating the extension when allowed."""
    row = con.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                      "WHERE e.extname = 'vector'").fetchone()
    if row:
        return row[0]
    psycopg = psycopg_module()
    if create:
        try:
            # In public, not the store's schema: every store in the database shares the one type.
            con.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            return "public"
        except psycopg.Error as exc:
            raise ExtensionUnavailable(
                f"cannot create the pgvector extension ({str(exc).strip()}); install pgvector on the server and "
                "run CREATE EXTENSION vector as a superuser, or grant this role the right to") from exc
    raise ExtensionUnavailable("the pgvector extension is not installed in this database; "
                               "run CREATE EXTENSION vector as a superuser")
