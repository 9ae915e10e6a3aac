"""The classes calls wait in for a full capped level: a batch job's lines wait behind
every live call of the same key, whatever class the key's live calls have."""

from __future__ import annotations

import asyncio

from server.accounting.traffic import MemoryInFlight, Traffic
from server.base.caller import Principal
from server.base.config import TrafficConfig, TrafficRule
from tests.support.gateways import eventually

KEY = Principal("key-1", "search-ui", "api")


def traffic() -> Traffic:
    config = TrafficConfig(
        keys={"search-ui": TrafficRule(priority="interactive")},
        models={"m": TrafficRule(max_in_flight=1, max_wait_s=30)},
    )
    return Traffic(MemoryInFlight(), lambda: config)


def test_a_batch_line_is_in_the_batch_class_whatever_its_key_says() -> None:
    t = traffic()
    assert t.class_of(KEY) == ("interactive", 1.0)
    assert t.class_of(KEY, batch=True) == ("batch", 1.0)


async def test_a_freed_slot_goes_to_the_live_call_before_the_batch_line() -> None:
    t = traffic()
    first, _ = await t.enter(KEY, "m", "t0")
    order: list[str] = []

    async def wait(ticket: str, batch: bool) -> None:
        holds, _ = await t.enter(KEY, "m", ticket, batch=batch)
        order.append(ticket)
        await t.leave(holds, ticket)

    async def waiting(count: int) -> None:
        assert t.waiting == count

    line = asyncio.create_task(wait("line", batch=True))
    await eventually(lambda: waiting(1), timeout_s=5)
    live = asyncio.create_task(wait("live", batch=False))  # sent after the line
    await eventually(lambda: waiting(2), timeout_s=5)
    await t.leave(first, "t0")
    await asyncio.wait_for(asyncio.gather(line, live), 10)
    assert order == ["live", "line"]
