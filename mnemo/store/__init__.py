"""Memory stores: the `Store` protocol every caller uses, and its two engines.

    from mnemo.store import Store, store_class
    store: Store = store_class(path)(path, embedder=emb.name, dim=emb.dim)

`protocol.Store` is the contract (`Batching` and `Archiving` the optional capabilities); `sql` holds
the SQL both engines share, written once over a `Dialect`, in the base class `SQLStore`;
`duckdb.DuckDBStore` and `postgres.PgStore` hold what differs; `rows` converts between rows and
model values. Beyond that an engine is made of parts, each an object with its own state held as an
attribute of the store. DuckDB's: `index` (`index`, `ann`), `lexical` (`duckdb_lexical`), `cache`
(`cache`), `held` (`held`), `touches` (`touches`) and `archive` (`parquet`); its schema is
`duckdb_schema`, its vectors load through `duckdb_load`. PostgreSQL's one part is `archive`
(`pg_archive`). `meter` counts the service's quotas in PostgreSQL.
"""

from ..model import new_id
from .backends import recorded_embedder, store_class
from .duckdb import ENGINE_VERSION, MEMORY_LIMIT_ENV, DuckDBStore, extension_path
from .duckdb_schema import DUCKDB
from .pg_connect import is_dsn, split_dsn
from .postgres import POSTGRES, PgStore
from .protocol import Archiving, Batching, Store
from .rows import SCHEMA_VERSION
from .sql import Dialect, where

__all__ = ["DUCKDB", "ENGINE_VERSION", "MEMORY_LIMIT_ENV", "POSTGRES", "SCHEMA_VERSION", "Archiving", "Batching", "Dialect",
           "DuckDBStore", "PgStore", "Store",
           "extension_path", "is_dsn", "new_id", "recorded_embedder", "split_dsn", "store_class", "where"]
