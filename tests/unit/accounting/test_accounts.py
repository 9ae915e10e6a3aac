"""The handlers' accounting steps (identify, admit, check, reserve, budget_left) and the
settlements `close` starts, over the real limiter and budgets: what each step charges to
the key, and that a settlement which is slow or fails neither loses the ledger nor is
lost at shutdown."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from server.accounting.accounts import Accounts
from server.accounting.admission import Admission, KeyDirectory, KeyRing
from server.accounting.budget import MemoryBudgets, RedisBudgets
from server.accounting.ledger import Ledger
from server.accounting.ratelimit import BucketLimiter
from server.base.call import Call
from server.base.config import KeyConfig
from server.base.errors import BudgetExhausted, RateLimited, UpstreamError
from tests.support.faults import tcp_proxy

SECRET = "sk-accounts-test-0123456789"
RING = KeyRing(
    [
        KeyConfig(
            name="team-a", kind="api", secret=SECRET, requests_per_minute=2,
            tokens_per_minute=1000, budget_usd=1.0,
        ),
        KeyConfig(name="admin", kind="admin", secret="sk-admin-accounts-0123456789"),
    ]
)  # fmt: skip


async def nothing_spent(key_id: str, since: float) -> float:
    return 0.0


def accounts_over(budgets: MemoryBudgets | RedisBudgets) -> tuple[Accounts, BucketLimiter]:
    limiter = BucketLimiter()
    return Accounts(Admission(KeyDirectory(), limiter), Ledger(None), budgets), limiter


def call() -> Call:
    return Call({"authorization": f"Bearer {SECRET}"})


async def test_admit_and_check_count_a_request_and_no_tokens() -> None:
    accounts, limiter = accounts_over(MemoryBudgets(nothing_spent))
    first, second = call(), call()
    await accounts.admit(first, "api", RING)
    await accounts.check(second, "api", RING)
    # Both reported the key's limits to their caller: one request left after the first,
    # none after the second, and every token still there.
    assert first.response_metadata["x-ratelimit-remaining-requests"] == "1"
    assert second.response_metadata["x-ratelimit-remaining-requests"] == "0"
    assert second.response_metadata["x-ratelimit-remaining-tokens"] == "1000"
    # check() bills nothing: the call's record names nobody.
    assert first.record.principal is not None and second.record.principal is None
    with pytest.raises(RateLimited):
        await accounts.check(call(), "api", RING)


async def test_reserve_before_identify_is_a_programming_error() -> None:
    accounts, _ = accounts_over(MemoryBudgets(nothing_spent))
    with pytest.raises(RuntimeError, match=r"^reserve\(\) before the caller was identified$"):
        await accounts.reserve(call(), 10, lambda: 0.1)


async def test_budget_left_is_the_limit_less_spent_and_reserved() -> None:
    async def spent(key_id: str, since: float) -> float:
        return 0.25

    accounts, _ = accounts_over(MemoryBudgets(spent))
    open_call = call()
    principal = await accounts.identify(open_call, "api", RING)
    assert await accounts.budget_left(principal) == pytest.approx(0.75)
    await accounts.reserve(open_call, 10, lambda: 0.125)
    assert await accounts.budget_left(principal) == pytest.approx(0.625)
    unbudgeted = await accounts.identify(
        Call({"authorization": "Bearer sk-admin-accounts-0123456789"}), "admin", RING
    )
    assert await accounts.budget_left(unbudgeted) is None


async def test_close_settles_tokens_and_budget_in_the_background() -> None:
    accounts, limiter = accounts_over(MemoryBudgets(nothing_spent))
    open_call = call()
    principal = await accounts.identify(open_call, "api", RING)
    await accounts.reserve(open_call, 600, lambda: 0.5)
    assert await accounts.budget_left(principal) == pytest.approx(0.5)
    accounts.close(open_call, None)
    await accounts.aclose(1.0)
    # Nothing answered: the reservation settles to nothing, the 600 tokens come back.
    assert await accounts.budget_left(principal) == pytest.approx(1.0)
    assert limiter.hit(principal.key_id, None, 1000, 0).tokens_remaining == 1000
    assert not accounts._tasks  # settled tasks are not kept


@pytest.fixture
async def redis_budgets(redis_prefix: str) -> AsyncIterator[tuple[RedisBudgets, object]]:
    """Budgets in the real Redis, reached through a proxy the test can stall or cut."""
    async with tcp_proxy("127.0.0.1", 6379) as proxy:
        # No retries: a cut connection fails the settlement at once.
        client = Redis(
            host="127.0.0.1", port=proxy.port, socket_timeout=2, retry=Retry(NoBackoff(), 0)
        )
        yield (
            RedisBudgets(client, f"{redis_prefix}acc{uuid.uuid4().hex[:6]}:", nothing_spent),
            proxy,
        )
        await client.aclose()


async def test_shutdown_waits_for_a_slow_settlement(redis_budgets) -> None:  # type: ignore[no-untyped-def]
    budgets, proxy = redis_budgets
    accounts, _ = accounts_over(budgets)
    open_call = call()
    principal = await accounts.identify(open_call, "api", RING)
    await accounts.reserve(open_call, 10, lambda: 0.5)
    proxy.stall()
    accounts.close(open_call, None)
    asyncio.get_running_loop().call_later(0.3, proxy.resume)
    await accounts.aclose(1.0)
    assert await accounts.budget_left(principal) == pytest.approx(1.0)


async def test_a_failed_settlement_is_logged_and_does_not_stop_shutdown(
    redis_budgets, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    budgets, proxy = redis_budgets
    accounts, _ = accounts_over(budgets)
    ok_call, failing_call = call(), call()
    await accounts.identify(ok_call, "api", RING)
    await accounts.reserve(ok_call, 10, lambda: 0.1)
    with caplog.at_level(logging.WARNING, logger="server.accounting.accounts"):
        accounts.close(ok_call, None)
        await accounts.aclose(1.0)
        assert not [r for r in caplog.records if "settlement failed" in r.getMessage()]
        await accounts.identify(failing_call, "api", RING)
        await accounts.reserve(failing_call, 10, lambda: 0.1)
        proxy.down()
        accounts.close(failing_call, None)
        await accounts.aclose(1.0)  # does not raise the settlement's error
    failures = [r.getMessage() for r in caplog.records if "settlement failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].startswith("settlement failed: ")
    assert "ConnectionError" in failures[0]
    assert not accounts._tasks


async def test_close_writes_one_row_however_often_it_is_called(
    caplog: pytest.LogCaptureFixture,
) -> None:
    accounts, _ = accounts_over(MemoryBudgets(nothing_spent))
    open_call = call()
    await accounts.identify(open_call, "api", RING)
    await accounts.reserve(open_call, 10, lambda: 0.1)
    # A dialect that reports its failure in its own answer (a failed event) leaves it
    # on the record instead of raising it.
    open_call.record.failure = UpstreamError("the upstream went away", {})
    with caplog.at_level(logging.WARNING, logger="server.accounting.accounts"):
        accounts.close(open_call, None)
        row = open_call.record.usage
        accounts.close(open_call, None)
        await accounts.aclose(1.0)
    assert open_call.record.usage is row and row is not None
    assert (row.status, row.error_reason) == ("UNAVAILABLE", "UPSTREAM_ERROR")
    # Settled once: a second settlement of the same reservation would have failed.
    assert not caplog.records


async def test_a_rows_latency_is_the_calls_in_milliseconds_to_the_microsecond() -> None:
    accounts, _ = accounts_over(MemoryBudgets(nothing_spent))
    quick, slow = call(), call()
    for each in (quick, slow):
        each.record.open("CreateChatCompletion")
        await accounts.identify(each, "api", RING)
    slow.record.started = time.time() - 1.5
    accounts.close(slow, None)
    accounts.close(quick, None)
    assert slow.record.usage is not None and quick.record.usage is not None
    assert 1500 <= slow.record.usage.latency_ms < 1501
    # Sub-millisecond calls keep their microseconds.
    assert 0 < quick.record.usage.latency_ms < 50
    latency = quick.record.usage.latency_ms
    assert latency == round(latency, 3)


async def spent_90_cents(key_id: str, since: float) -> float:
    return 0.9


async def test_count_request_counts_the_request_once_and_reserve_then_only_its_tokens() -> None:
    accounts, _ = accounts_over(MemoryBudgets(nothing_spent))
    first = call()
    await accounts.identify(first, "api", RING)
    await accounts.count_request(first, 0.0)
    assert first.response_metadata["x-ratelimit-remaining-requests"] == "1"
    assert "x-ratelimit-remaining-tokens" not in first.response_metadata
    await accounts.reserve(first, 400, lambda: 0.01)
    # Its tokens taken, its request not a second time.
    assert first.response_metadata["x-ratelimit-remaining-requests"] == "1"
    assert first.response_metadata["x-ratelimit-remaining-tokens"] == "600"
    assert first.record.limited_tokens and first.record.reservations
    second = call()
    await accounts.identify(second, "api", RING)
    await accounts.count_request(second, 0.0)
    with pytest.raises(RateLimited, match="2 requests per minute"):
        third = call()
        await accounts.identify(third, "api", RING)
        await accounts.count_request(third, 0.0)


@pytest.mark.parametrize("least, refused", [(0.1, False), (0.1000001, True), (0.0, False)])
async def test_count_request_refuses_a_budget_that_cannot_cover_the_least_the_request_costs(
    least: float, refused: bool
) -> None:
    accounts, _ = accounts_over(MemoryBudgets(spent_90_cents))  # of a $1.00 budget
    one = call()
    await accounts.identify(one, "api", RING)
    if not refused:
        await accounts.count_request(one, least)
        return
    with pytest.raises(BudgetExhausted, match=r"cannot cover this request \(up to \$0\.1"):
        await accounts.count_request(one, least)


async def test_count_request_counts_what_requests_in_flight_reserved() -> None:
    accounts, _ = accounts_over(MemoryBudgets(spent_90_cents))
    held = call()
    await accounts.identify(held, "api", RING)
    await accounts.reserve(held, 0, lambda: 0.05)
    late = call()
    await accounts.identify(late, "api", RING)
    with pytest.raises(BudgetExhausted, match=r"\$0\.050000 reserved"):
        await accounts.count_request(late, 0.06)


async def test_count_request_refuses_a_spent_budget_whatever_the_request_costs() -> None:
    async def all_spent(key_id: str, since: float) -> float:
        return 1.0

    accounts, _ = accounts_over(MemoryBudgets(all_spent))
    one = call()
    await accounts.identify(one, "api", RING)
    with pytest.raises(BudgetExhausted, match="is exhausted"):
        await accounts.count_request(one, 0.0)


async def test_count_request_before_identify_is_a_programming_error() -> None:
    accounts, _ = accounts_over(MemoryBudgets(nothing_spent))
    with pytest.raises(RuntimeError, match=r"^count_request\(\) before the caller was identified$"):
        await accounts.count_request(call(), 0.0)


async def test_a_refund_settles_as_nothing_spent() -> None:
    budgets = MemoryBudgets(nothing_spent)
    accounts, _ = accounts_over(budgets)
    principal = await accounts.check(call(), "api", RING)
    held = await accounts.hold(principal, "t1", {}, 0.4)
    accounts.release(held, -5.0)  # a negative actual cost
    await accounts.settled()
    assert await budgets.status(held[0].spec) == (0.0, 0.0)


async def test_settled_waits_for_the_settlements_of_the_calls_answered_so_far() -> None:
    accounts, _ = accounts_over(MemoryBudgets(nothing_spent))
    await accounts.settled()  # none yet: at once
    open_call = call()
    principal = await accounts.identify(open_call, "api", RING)
    await accounts.reserve(open_call, 10, lambda: 0.5)
    accounts.close(open_call, None)
    assert accounts._tasks  # settling in the background
    await accounts.settled(0.5)  # less than a second is time enough
    assert not accounts._tasks
    assert await accounts.budget_left(principal) == pytest.approx(1.0)


async def test_settled_gives_up_on_a_slow_settlement_after_its_time(redis_budgets) -> None:  # type: ignore[no-untyped-def]
    budgets, proxy = redis_budgets
    accounts, _ = accounts_over(budgets)
    open_call = call()
    principal = await accounts.identify(open_call, "api", RING)
    await accounts.reserve(open_call, 10, lambda: 0.5)
    proxy.stall()  # Redis stops answering: the settlement waits on it
    accounts.close(open_call, None)
    await asyncio.wait_for(accounts.settled(0.2), 5)
    assert accounts._tasks  # still settling: shown reserved meanwhile
    proxy.resume()
    await asyncio.wait_for(accounts.settled(), 5)
    assert not accounts._tasks
    assert await accounts.budget_left(principal) == pytest.approx(1.0)
