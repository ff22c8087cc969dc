"""Injectable clocks: the wall clock by default, a simulated clock for long-clock runs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol


def utc(dt: datetime) -> datetime:
    """Return `dt` as an aware UTC datetime (naive values are taken to be UTC)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


class Clock(Protocol):
    def now(self) -> datetime: ...


class WallClock:
    """The real time, in UTC."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def __repr__(self) -> str:
        return "WallClock()"


class SimulatedClock:
    """A clock that only moves when told to: `advance(timedelta(days=30))`."""

    def __init__(self, start: datetime | str | None = None):
        if start is None:
            start = datetime(2025, 1, 1, tzinfo=timezone.utc)
        elif isinstance(start, str):
            start = datetime.fromisoformat(start)
        self._now = utc(start)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move the clock forward by `delta` (or `days=`, `hours=`, ...) and return the new time."""
        step = delta if delta is not None else timedelta(**kwargs)
        if step < timedelta(0):
            from .errors import ConfigError

            raise ConfigError("a simulated clock only moves forward; use a new clock to go back")
        self._now = self._now + step
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to `when` (which may not be earlier than now)."""
        self.advance(utc(when) - self._now)

    def __repr__(self) -> str:
        return f"SimulatedClock({self._now.isoformat()})"
