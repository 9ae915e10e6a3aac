"""Storage on the request path, bounded: the real Redis limiter and budgets behind the
guards, reached through a proxy the test stalls or cuts. A stall or a failure becomes
StorageUnavailable naming the store, within the bound; the limiter fails open only when
told to, and then lets the request in with the key's limits; warnings are not repeated."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from server.accounting import guard
from server.accounting.budget import RedisBudgets
from server.accounting.guard import GuardedBudgets, GuardedLimiter, bounded
from server.accounting.ratelimit import RedisLimiter
from server.base.caller import BudgetSpec
from server.base.errors import BudgetExhausted, StorageUnavailable
from tests.support.faults import TcpProxy, tcp_proxy

BOUND_S = 0.2


async def nothing_spent(key_id: str, since: float) -> float:
    return 0.0


@pytest.fixture
async def redis(redis_prefix: str) -> AsyncIterator[tuple[Redis, TcpProxy, str]]:
    async with tcp_proxy("127.0.0.1", 6379) as proxy:
        client = Redis(host="127.0.0.1", port=proxy.port, retry=Retry(NoBackoff(), 0))
        yield client, proxy, f"{redis_prefix}guard{uuid.uuid4().hex[:6]}:"
        proxy.resume()
        await client.aclose()


@pytest.fixture(autouse=True)
def fresh_warnings() -> None:
    guard._warned.clear()


async def test_a_stall_is_storage_unavailable_within_the_bound(redis, caplog) -> None:  # type: ignore[no-untyped-def]
    client, proxy, prefix = redis
    limiter = GuardedLimiter(RedisLimiter(client, prefix), BOUND_S)
    assert (await limiter.acquire("k", 5, None, 0, "t1")).allowed
    proxy.stall()
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="server.accounting.guard"):
        with pytest.raises(StorageUnavailable) as refused:
            await limiter.acquire("k", 5, None, 0, "t2")
        with pytest.raises(StorageUnavailable):
            await limiter.settle("k", "t1", 0)
    assert time.perf_counter() - started < 2 * BOUND_S + 1  # room for a loaded machine
    error = refused.value
    assert error.message == "the rate-limit store is unavailable: it did not answer within 0.2s"
    assert error.metadata == {"storage": "rate-limit store"} and error.retry_after_s == 1
    # One warning per store and period, however many calls fail.
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["storage: the rate-limit store did not answer within 0.2s"]


async def test_a_failure_names_its_kind_and_fails_closed_by_default(redis) -> None:  # type: ignore[no-untyped-def]
    client, proxy, prefix = redis
    closed = GuardedLimiter(RedisLimiter(client, prefix), BOUND_S)
    opened = GuardedLimiter(RedisLimiter(client, prefix), BOUND_S, fail_open=True)
    proxy.down()
    with pytest.raises(StorageUnavailable, match=r"^the rate-limit store is unavailable: it "
                       r"failed \(ConnectionError\)$"):  # fmt: skip
        await closed.acquire("k", 5, 100, 10, "t1")
    decision = await opened.acquire("k", 5, 100, 10, "t2")
    # Let in, with the key's limits and nothing known to be used.
    assert (decision.allowed, decision.requests_limit, decision.requests_remaining) == (True, 5, 5)
    assert (decision.tokens_limit, decision.tokens_remaining) == (100, 100)
    assert (decision.retry_after_s, decision.reset_requests_s, decision.reset_tokens_s) == (0, 0, 0)
    unlimited = await opened.acquire("k", None, None, 10, "t3")
    assert (unlimited.requests_remaining, unlimited.tokens_remaining) == (0, 0)


async def test_budgets_always_fail_closed(redis) -> None:  # type: ignore[no-untyped-def]
    client, proxy, prefix = redis
    budgets = GuardedBudgets(RedisBudgets(client, prefix, nothing_spent), BOUND_S)
    spec = BudgetSpec(uuid.uuid4().hex, "team", 1.0, "monthly")
    second = await budgets.reserve(spec, 0.9)
    with pytest.raises(BudgetExhausted):  # the gateway's own answer passes unchanged
        await budgets.reserve(spec, 0.5)
    proxy.stall()
    for call in (budgets.reserve(spec, 0.1), budgets.settle(second, 0.1), budgets.status(spec)):
        started = time.perf_counter()
        with pytest.raises(StorageUnavailable) as refused:
            await call
        # Within the bound, not whenever the driver gives up on its own.
        assert time.perf_counter() - started < BOUND_S + 1  # room for a loaded machine
        assert (
            refused.value.message
            == "the budget store is unavailable: it did not answer within 0.2s"
        )


async def test_a_caller_cancelled_while_waiting_abandons_the_storage_call() -> None:
    started = asyncio.Event()
    finished: list[str] = []

    async def hung() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        finally:
            finished.append("cleaned up")

    waiting = asyncio.ensure_future(bounded("key store", hung(), 5.0))
    await started.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.sleep(0)
    assert finished == ["cleaned up"]


async def test_a_result_comes_back_unchanged() -> None:
    async def answer() -> Any:
        return {"spent": 0.25}

    assert await bounded("budget store", answer(), 1.0) == {"spent": 0.25}
