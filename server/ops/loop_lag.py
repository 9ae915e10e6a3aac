"""How far behind the event loop runs: the sign that a worker is saturated.

A timer due every PERIOD_S measures how late it fires. Every WINDOW_S the gauge takes
the worst lag of the window, so a scrape sees the spikes between scrapes as well as a
loop that stays behind. When it stays above a few tens of milliseconds the worker
cannot keep up with its streams: add workers (`--workers N`, one per core).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

PERIOD_S = 0.1
WINDOW_S = 1.0


class Settable(Protocol):
    def set(self, value: float) -> None: ...


async def watch_lag(
    gauge: Settable, period_s: float = PERIOD_S, window_s: float = WINDOW_S
) -> None:
    """Runs until cancelled, setting `gauge` to the worst lag (seconds) of each window."""
    loop = asyncio.get_running_loop()
    worst = 0.0
    window_ends = loop.time() + window_s
    while True:
        due = loop.time() + period_s
        await asyncio.sleep(period_s)
        now = loop.time()
        worst = max(worst, now - due)
        if now >= window_ends:
            gauge.set(worst)
            worst = 0.0
            window_ends = now + window_s
