"""A circuit breaker per provider.

    closed ──N consecutive failures──▶ open ──cool-down passed──▶ half_open
      ▲                                  ▲                            │
      └──────────── probe succeeded ─────┼────── probe failed ◀───────┘

Closed lets every request through. Open skips the provider at once, without waiting
on it. Half-open lets exactly one probe through; the others keep skipping it until the
probe ends. Only failures that say something about the provider's health count
(connect errors, timeouts, 5xx, 429, broken answers); a request the upstream refused
as malformed, or a caller that went away, changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    CLOSED = "healthy"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Breaker:
    def __init__(
        self,
        failure_threshold: int = 5,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    @property
    def state(self) -> State:
        if self._opened_at is None:
            return State.CLOSED
        if self._clock() - self._opened_at < self.cooldown_s:
            return State.OPEN
        return State.HALF_OPEN

    def try_acquire(self) -> Permit | None:
        """A permit to call the provider now, or None to skip it. In half-open state
        only the single probe gets one. Every permit ends in exactly one record_* or
        release call."""
        state = self.state
        if state is State.CLOSED:
            return Permit(probe=False)
        if state is State.HALF_OPEN and not self._probing:
            self._probing = True
            return Permit(probe=True)
        return None

    def record_success(self, permit: Permit) -> None:
        self._failures = 0
        self._opened_at = None
        if permit.probe:
            self._probing = False

    def record_failure(self, permit: Permit) -> None:
        self._failures += 1
        if permit.probe or self._failures >= self.failure_threshold:
            self._opened_at = self._clock()
        if permit.probe:
            self._probing = False

    def release(self, permit: Permit) -> None:
        """Ends an attempt that says nothing about health (caller gone, request refused):
        a probe hands its slot back; the counts stay as they were."""
        if permit.probe:
            self._probing = False


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave to make one attempt; `probe` marks the single half-open attempt."""

    probe: bool
