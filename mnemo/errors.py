"""The exception hierarchy: one root, a few subclasses, messages that say what to do next."""


class MnemoError(Exception):
    """Root of every error mnemo raises on purpose."""


class ConfigError(MnemoError):
    """A configuration value or parameter name is invalid."""


class StoreError(MnemoError):
    """The store cannot be opened, read or written as asked."""


class StoreLocked(StoreError):
    """Another process holds the store file (or a server holds the store folder)."""


class StoreUnavailable(StoreError):
    """The database does not answer now (a restart, a failover, a dropped connection); retrying later may succeed."""

    retry_after = 2.0  # seconds a client should wait before retrying (HTTP sends it as Retry-After)


class EmbedderMismatch(StoreError):
    """The store was written with a different embedder (name or dimension)."""


class ExtensionUnavailable(StoreError):
    """A DuckDB extension (fts, vss) cannot be loaded without network."""


class NotFound(MnemoError):
    """A memory, turn or record id does not exist."""


class InvalidInput(MnemoError):
    """Input text or arguments cannot be stored or processed as given."""


class LLMUnavailable(MnemoError):
    """A live model was asked for and cannot be reached or is not configured."""


class LLMResponseError(MnemoError):
    """A model answered with something the parser cannot use."""


class CassetteMiss(LLMUnavailable):
    """Replay mode met a request that is not in the cassette."""


class DatasetError(ConfigError):
    """A benchmark file is missing, malformed or fails its checksum."""
