"""This instance's recent traffic, in memory, for the admin page: each provider's last
calls, requests and spend per minute over the last hour, the latest routing decisions.
Bounded: a fixed number of entries each, whatever the traffic."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from server.ops.observe import Outcome

PER_PROVIDER = 200
MINUTES = 60
ROUTES = 50


@dataclass(slots=True)
class Minute:
    start: int
    requests: int = 0
    errors: int = 0
    cost_usd: float = 0.0


class Recent:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        # provider id -> (ok, latency in seconds or None) of its last calls
        self.calls: dict[str, deque[tuple[bool, float | None]]] = {}
        self.minutes: deque[Minute] = deque(maxlen=MINUTES)
        # (time, request id, profile, model), newest last
        self.routes: deque[tuple[float, str, str, str]] = deque(maxlen=ROUTES)

    def observe(self, o: Outcome) -> None:
        now = self._clock()
        for provider, _ in o.failovers:
            self._call(provider, False, None)
        if o.provider:
            self._call(o.provider, o.status == "OK", o.latency_s)
        start = int(now // 60 * 60)
        if not self.minutes or self.minutes[-1].start != start:
            self.minutes.append(Minute(start))
        minute = self.minutes[-1]
        minute.requests += 1
        minute.errors += o.status != "OK"
        minute.cost_usd += o.cost_usd or 0.0
        if o.route is not None:
            self.routes.append((now, o.request_id, *o.route))

    def _call(self, provider: str, ok: bool, latency: float | None) -> None:
        calls = self.calls.get(provider)
        if calls is None:
            calls = self.calls[provider] = deque(maxlen=PER_PROVIDER)
        calls.append((ok, latency))

    def provider(self, provider_id: str) -> tuple[int, int, float | None]:
        """Recent calls, errors, and the mean latency (s) of the answered ones."""
        calls = self.calls.get(provider_id, ())
        errors = sum(1 for ok, _ in calls if not ok)
        latencies = [lat for ok, lat in calls if ok and lat is not None]
        mean = sum(latencies) / len(latencies) if latencies else None
        return len(calls), errors, mean

    def last_hour(self) -> list[Minute]:
        """One entry per minute of the last hour, oldest first, empty minutes included."""
        now = int(self._clock() // 60 * 60)
        seen = {m.start: m for m in self.minutes}
        return [seen.get(t, Minute(t)) for t in range(now - (MINUTES - 1) * 60, now + 60, 60)]
