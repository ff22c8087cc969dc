"""mnemo: long-term memory for LLM agents that forgets correctly and knows what it can trust."""

from .clock import SimulatedClock, WallClock
from .config import Config, recipe
from .errors import MnemoError
from .memory import Memory

__all__ = ["Config", "Memory", "MnemoError", "SimulatedClock", "WallClock", "recipe"]
__version__ = "0.1.0"
