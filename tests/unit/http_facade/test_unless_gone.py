"""`unless_gone`: a request's work stops when its connection is lost, and only then."""

from __future__ import annotations

import asyncio

import pytest

from http_facade.protocol import CONNECTION_GONE, unless_gone
from server.base.errors import Cancelled


async def test_a_lost_connection_cancels_the_work_and_says_so():
    gone = asyncio.get_running_loop().create_future()
    stopped = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            stopped.set()

    asyncio.get_running_loop().call_later(0.01, gone.set_result, None)
    with pytest.raises(Cancelled, match="^the client closed the request$"):
        await unless_gone({CONNECTION_GONE: gone}, work())
    assert stopped.is_set()
    await asyncio.sleep(0)  # this task is not cancelled any more


async def test_a_loss_seen_as_the_work_ends_cancels_nothing_after_it():
    gone = asyncio.get_running_loop().create_future()

    async def work() -> str:
        gone.set_result(None)  # the callback is scheduled; the work ends before it runs
        return "done"

    assert await unless_gone({CONNECTION_GONE: gone}, work()) == "done"
    await asyncio.sleep(0)  # the scheduled callback runs: it must not cancel this task
    await asyncio.sleep(0)


async def test_another_cancel_stays_a_cancel_and_without_the_future_work_runs_to_its_end():
    gone = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(unless_gone({CONNECTION_GONE: gone}, asyncio.sleep(30)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not gone.done()
    assert await unless_gone({}, asyncio.sleep(0, "whole")) == "whole"
