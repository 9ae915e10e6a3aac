"""A stream's deadline timer: it ends the wait under way when it fires, makes the next
wait fail at once when it fired between waits, and never disturbs the loop when it
fires with nothing waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from server.application.pipeline.dispatch import _Watch


async def slow(pause_s: float) -> AsyncIterator[int]:
    for i in range(3):
        await asyncio.sleep(pause_s)
        yield i


def loop_errors() -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(context))
    return errors


async def test_the_deadline_ends_the_wait_under_way() -> None:
    loop = asyncio.get_running_loop()
    watch = _Watch(loop.time() + 0.05)
    started = loop.time()
    with pytest.raises(TimeoutError):
        await watch.next(slow(5))  # type: ignore[arg-type]
    assert loop.time() - started < 1
    watch.close()


async def test_a_deadline_passed_between_waits_fails_the_next_at_once() -> None:
    errors = loop_errors()
    loop = asyncio.get_running_loop()
    watch = _Watch(loop.time() + 0.05)
    events = slow(0)
    assert await watch.next(events) == 0  # type: ignore[arg-type]
    await asyncio.sleep(0.1)  # the deadline fires while nothing waits
    assert watch.expired
    with pytest.raises(TimeoutError):
        await watch.next(events)  # type: ignore[arg-type]
    assert errors == []


async def test_a_deadline_before_any_wait_disturbs_nothing() -> None:
    errors = loop_errors()
    loop = asyncio.get_running_loop()
    watch = _Watch(loop.time() + 0.01)
    await asyncio.sleep(0.05)
    assert watch.expired and errors == []


async def test_someone_elses_cancellation_stays_a_cancellation() -> None:
    loop = asyncio.get_running_loop()
    watch = _Watch(loop.time() + 30)
    waiting = asyncio.ensure_future(watch.next(slow(5)))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    watch.close()
    assert not watch.expired
