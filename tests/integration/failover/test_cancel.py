"""A caller that cancels a stream cancels its upstream request, promptly.

Measured from the gRPC client's cancel to the fake upstream seeing its connection
closed (bench/cancel_latency.py prints the full table).
"""

from __future__ import annotations

from bench.cancel_latency import measure

# Loopback, one process: the measured figure is about a millisecond; the bound leaves
# room for a loaded machine (an upstream that never saw the cancel fails the wait).
BOUND_S = 1.0


async def test_cancel_reaches_the_upstream_mid_stream_and_before_first_token():
    results = await measure(runs=5)
    for scenario, seconds in results.items():
        assert len(seconds) == 5
        assert max(seconds) < BOUND_S, (scenario, seconds)
