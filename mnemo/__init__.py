"""mnemo: long-term memory for LLM agents that forgets correctly and knows what it can trust."""

from .clock import SimulatedClock, WallClock
from .config import Config, recipe
from .errors import (
    CassetteMiss,
    ConfigError,
    EmbedderMismatch,
    InvalidInput,
    LLMResponseError,
    LLMUnavailable,
    MnemoError,
    NotFound,
    StoreError,
    StoreLocked,
)
from .memory import Memory
from .model import (
    Citation,
    Event,
    Forgetting,
    MemoryRecord,
    Packed,
    Recall,
    Supersession,
    TraceEntry,
    WriteReport,
)

__all__ = [
    "CassetteMiss", "Citation", "Config", "ConfigError", "EmbedderMismatch", "Event", "Forgetting", "InvalidInput",
    "LLMResponseError", "LLMUnavailable", "Memory", "MemoryRecord", "MnemoError", "NotFound", "Packed", "Recall",
    "SimulatedClock", "StoreError", "StoreLocked", "Supersession", "TraceEntry", "WallClock", "WriteReport", "recipe",
]
__version__ = "0.1.0"
