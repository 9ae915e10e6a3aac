"""Per-key request rate limits: an exact sliding window over the last minute."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    # Seconds until the window has room again (0 when it has room now).
    retry_after_s: float
    # Seconds until the window is entirely clear.
    reset_s: float

    def headers(self) -> dict[str, str]:
        """OpenAI-style rate-limit headers, as sent on every response."""
        return {
            "x-ratelimit-limit-requests": str(self.limit),
            "x-ratelimit-remaining-requests": str(self.remaining),
            "x-ratelimit-reset-requests": f"{math.ceil(self.reset_s)}s",
        }


class SlidingWindowLimiter:
    """Admits at most `limit` requests per key in any window of WINDOW_S seconds.

    Keeps one timestamp per admitted request, so memory is bounded by the limits."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}

    def hit(self, key: str, limit: int) -> Decision:
        now = self._clock()
        hits = self._hits.setdefault(key, deque())
        while hits and hits[0] <= now - WINDOW_S:
            hits.popleft()
        if len(hits) >= limit:
            retry_after = hits[-limit] + WINDOW_S - now
            return Decision(False, limit, 0, retry_after, hits[-1] + WINDOW_S - now)
        hits.append(now)
        return Decision(True, limit, limit - len(hits), 0.0, hits[0] + WINDOW_S - now)
