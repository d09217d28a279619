"""Per-key rate limits: at most N requests in any 60 seconds, counted in this process.

A sliding window of request times per key. With several worker processes each counts its
own requests, so a key may reach N per worker (docs/server.md says so); a limit shared by every
process would cost a database write per request.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class RateLimiter:
    """``allow(key)`` is 0 when a request may go ahead, else the seconds to wait."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> int:
        if self.per_minute <= 0:
            return 0
        now = self._clock()
        with self._lock:
            times = self._seen.setdefault(key, deque())
            while times and times[0] <= now - WINDOW_SECONDS:
                times.popleft()
            if len(times) >= self.per_minute:
                return max(1, math.ceil(times[0] + WINDOW_SECONDS - now))
            times.append(now)
            return 0


def parse_rate(text: str, source: str = "--rate-limit") -> int:
    """``"120/minute"`` or ``"120"`` -> 120; ``"0"`` turns the limit off. ``source`` (the
    option or environment variable the text came from) is named in the error."""
    from membot import ConfigError

    number, _, unit = text.strip().partition("/")
    if unit and unit.strip().lower() not in {"minute", "min", "m"}:
        raise ConfigError(f"{source} wants N/minute, got {text!r}")
    try:
        value = int(number)
    except ValueError:
        raise ConfigError(f"{source} wants N/minute, got {text!r}") from None
    if value < 0:
        raise ConfigError(f"{source} must be 0 (off) or more")
    return value
