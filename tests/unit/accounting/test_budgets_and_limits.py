"""Budgets and rate limiters without a gateway around them: every backend of each (in
memory, in the real Redis, and the workers' parent process over its Unix socket) gives
the same answers, to the cent and the token: what is reserved, what a settlement frees,
when a refusal says to come back, and what the refusal says."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from server.accounting import budget
from server.accounting.budget import MemoryBudgets, RedisBudgets, exhausted, period_bounds
from server.accounting.ratelimit import BucketLimiter, Decision, RedisLimiter, duration
from server.accounting.shared import SharedBudgets, SharedLimiter, StateClient, StateServer
from server.base.caller import BudgetSpec
from server.base.errors import BudgetExhausted
from server.storage.redis_topology import client_for
from tests.support.shared_state import REDIS_URL

DAY = 86400


class Ledger:
    """What the usage ledger says each key spent, and how often it was asked."""

    def __init__(self, spent: float = 0.0) -> None:
        self.spent = spent
        self.asked: list[tuple[str, float]] = []

    async def __call__(self, key_id: str, since: float) -> float:
        self.asked.append((key_id, since))
        return self.spent


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    yield client
    await client.aclose()


class Parents:
    """State servers as `gateway serve --workers N` runs one in its parent, each with
    a client as a worker holds; all closed at the end."""

    def __init__(self) -> None:
        self.servers: list[StateServer] = []
        self.clients: list[StateClient] = []

    async def client(self, load_spent: Any = None, window_s: float = 60) -> StateClient:
        path = f"{tempfile.mkdtemp(prefix='gw-state-')}/state.sock"  # short: a Unix path
        server = StateServer(path, load_spent or Ledger(), window_s)
        await server.start()
        self.servers.append(server)
        return self.worker(path)

    def worker(self, path: str) -> StateClient:
        self.clients.append(StateClient(path))
        return self.clients[-1]

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()
        for server in self.servers:
            await server.aclose()
            shutil.rmtree(server.path.rpartition("/")[0], ignore_errors=True)


@pytest.fixture(params=["memory", "redis", "shared", "cluster"])
async def budgets(
    request: pytest.FixtureRequest, redis_prefix: str, parents: Parents
) -> AsyncIterator[Any]:
    """A factory of budgets on one backend, each over its own ledger."""
    clients: list[Any] = []

    async def make(ledger: Ledger) -> Any:
        if request.param == "memory":
            return MemoryBudgets(ledger)
        if request.param == "shared":
            return SharedBudgets(await parents.client(ledger))
        url = REDIS_URL
        if request.param == "cluster":
            url = request.getfixturevalue("redis_cluster_url")
        client = client_for(url, 10, 8)
        clients.append(client)
        return RedisBudgets(client, f"{redis_prefix}ub{uuid.uuid4().hex[:6]}:", ledger)

    yield make
    for client in clients:
        await client.aclose()


def spec(limit: float, period: str = "monthly", key: str | None = None) -> BudgetSpec:
    return BudgetSpec(key or uuid.uuid4().hex, "team-a", limit, period)


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The machine's local time zone five hours off UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_periods_are_utc_whatever_the_machines_zone(new_york):  # type: ignore[no-untyped-def]
    # 2026-02-14 02:00 UTC is still the 13th in New York.
    now = 1_771_034_400
    assert period_bounds("daily", now) == (1_771_027_200, 1_771_027_200 + DAY)
    # 2026-03-01 02:00 UTC is still February there.
    assert period_bounds("monthly", 1_772_330_400) == (1_772_323_200, 1_772_323_200 + 31 * DAY)


def test_period_bounds():
    # 2026-02-13 12:26:40 UTC
    now = 1_771_000_000
    assert period_bounds("daily", now) == (1_770_940_800, 1_770_940_800 + DAY)
    assert period_bounds("monthly", now) == (1_769_904_000, 1_769_904_000 + 28 * DAY)
    # A 31-day month, and the first second of a month belongs to it.
    assert period_bounds("monthly", 1_767_225_600) == (1_767_225_600, 1_767_225_600 + 31 * DAY)
    assert period_bounds("none", now) == (0.0, None)
    start, end = period_bounds("daily")
    assert start <= time.time() < end  # type: ignore[operator]


async def test_a_reservation_counts_until_settled_to_what_was_spent(budgets):
    ledger = Ledger(spent=0.25)
    b, key = await budgets(ledger), spec(1.0)
    first = await b.reserve(key, 0.5)
    assert first.amount == 0.5 and first.spec == key
    assert await b.status(key) == (pytest.approx(0.25), pytest.approx(0.5))
    with pytest.raises(BudgetExhausted) as refused:
        await b.reserve(key, 0.3)  # 0.25 spent + 0.5 reserved + 0.3 > 1
    assert refused.value.metadata["spent_usd"] == "0.250000"
    assert "cannot cover this request (up to $0.300000; $0.250000 spent, $0.500000 reserved" in (
        refused.value.message
    )
    # A settlement says the spend after it.
    assert await b.settle(first, 0.125) == pytest.approx(0.375)
    assert await b.status(key) == (pytest.approx(0.375), 0)
    second = await b.reserve(key, 0.625)  # exactly what is left fits
    assert await b.settle(second, 0.625) == pytest.approx(1.0)
    assert await b.status(key) == (pytest.approx(1.0), 0)
    with pytest.raises(BudgetExhausted) as spent:
        await b.reserve(key, 0.0)
    assert spent.value.message == "the monthly budget of $1 of key 'team-a' is exhausted"
    # The ledger was read once, the first time the key was seen, from the month's start.
    assert ledger.asked == [(key.key_id, period_bounds("monthly")[0])]


async def test_a_budget_already_spent_refuses_even_a_free_request(budgets):
    ledger = Ledger(spent=2.0)
    b, key = await budgets(ledger), spec(2.0, "daily")
    start, end = period_bounds("daily")
    before = time.time()
    with pytest.raises(BudgetExhausted) as refused:
        await b.reserve(key, 0)
    after = time.time()
    error = refused.value
    # The spend of the day so far, read from the ledger since the day began.
    assert ledger.asked == [(key.key_id, start)]
    assert error.message == "the daily budget of $2 of key 'team-a' is exhausted"
    assert error.metadata == {"key": "team-a", "budget_usd": "2", "budget_period": "daily",
                              "spent_usd": "2.000000"}  # fmt: skip
    # Whole seconds to the end of the day, and one more.
    assert error.retry_after_s in {int(end - before) + 1, int(end - after) + 1}  # type: ignore[operator]


async def test_a_lifetime_budget_has_no_retry_after(budgets):
    b, key = await budgets(Ledger(spent=5.0)), spec(5.0, "none")
    with pytest.raises(BudgetExhausted) as refused:
        await b.reserve(key, 0.01)
    assert refused.value.retry_after_s is None
    assert refused.value.message.startswith("the lifetime budget of $5")


async def test_reservations_of_two_keys_do_not_mix(budgets):
    b = await budgets(Ledger())
    one, two = spec(1.0), spec(1.0)
    await b.reserve(one, 0.9)
    await b.reserve(two, 0.9)
    assert await b.status(one) == (0, pytest.approx(0.9))


async def test_a_settlement_from_another_period_is_ignored(budgets):
    b, key = await budgets(Ledger()), spec(1.0)
    held = await b.reserve(key, 0.4)
    stale = budget.Reservation(key, held.period_start - 31 * DAY, 0.4, held.ticket)
    assert await b.settle(stale, 0.9) is None  # no spend known for that period
    assert await b.status(key) == (0, pytest.approx(0.4))


def test_exhausted_names_the_request_when_budget_remains():
    error = exhausted(spec(3.0, "monthly"), 1.0, 0.5, 2.0)
    assert error.message == (
        "the monthly budget of $3 of key 'team-a' cannot cover this request "
        "(up to $2.000000; $1.000000 spent, $0.500000 reserved by requests in flight)"
    )
    assert isinstance(error, BudgetExhausted) and error.retry_after_s is not None
    assert error.retry_after_s >= 1


async def test_redis_budget_reservations_lapse(redis, redis_prefix):
    b = RedisBudgets(redis, f"{redis_prefix}lapse{uuid.uuid4().hex[:6]}:", Ledger())
    key = spec(1.0)
    before = time.time()
    await b.reserve(key, 0.9)
    after = time.time()
    # An instance died holding it: once its time is up, it frees its room.
    acct, res = b._keys(key, period_bounds("monthly")[0])
    (ticket,) = await redis.hkeys(res)
    # A reservation lapses RESERVATION_TTL_S after it was made.
    amount, expiry = (await redis.hget(res, ticket)).decode().split(":")
    assert amount == "0.9"
    lapse_ms = budget.RESERVATION_TTL_S * 1000
    assert before * 1000 + lapse_ms - 5 <= int(expiry) <= after * 1000 + lapse_ms + 5
    # The account and its reservations outlive their period by a day, then go (the
    # reservations' hash too, though its first reservation made it).
    _, end = period_bounds("monthly")
    expected = {int(end - before) + DAY, int(end - after) + DAY}  # type: ignore[operator]
    assert await redis.ttl(acct) in expected | {min(expected) - 1}
    assert await redis.ttl(res) in expected | {min(expected) - 1}
    await redis.hset(res, ticket, f"0.9:{int(time.time() * 1000) - 1}")
    assert await b.status(key) == (0, 0)
    # A lifetime budget's account never expires.
    forever = spec(1.0, "none")
    await b.reserve(forever, 0.1)
    acct, res = b._keys(forever, 0)
    assert await redis.ttl(acct) == -1 and await redis.ttl(res) == -1


async def test_redis_status_reads_the_account_and_leaves_nothing_behind(redis, redis_prefix):
    b = RedisBudgets(redis, f"{redis_prefix}status{uuid.uuid4().hex[:6]}:", Ledger(spent=0.5))
    key = spec(1.0)
    held = await b.reserve(key, 0.25)
    _, res = b._keys(key, held.period_start)
    assert await b.status(key) == (0.5, 0.25)  # room left: its probe was reserved
    await b.settle(held, 0.5)
    assert await b.status(key) == (1.0, 0)  # spent: its probe was refused
    assert await redis.hkeys(res) == []
    assert await b.status(key) == (1.0, 0)


# -- rate limiters --------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


async def made(kind: str, window_s: float, redis, redis_prefix, parents) -> Any:  # type: ignore[no-untyped-def]
    if kind == "memory":
        return BucketLimiter(window_s=window_s)
    if kind == "shared":
        return SharedLimiter(await parents.client(window_s=window_s))
    return RedisLimiter(redis, f"{redis_prefix}ul{uuid.uuid4().hex[:6]}:", window_s=window_s)


@pytest.fixture(params=["memory", "redis", "shared"])
async def limiter(request: pytest.FixtureRequest, redis, redis_prefix, parents) -> Any:  # type: ignore[no-untyped-def]
    return await made(request.param, 2, redis, redis_prefix, parents)


@pytest.fixture(params=["memory", "redis", "shared"])
async def hour_limiter(request: pytest.FixtureRequest, redis, redis_prefix, parents) -> Any:  # type: ignore[no-untyped-def]
    """A limiter whose tokens refill over an hour: a loaded machine's pauses refill none."""
    return await made(request.param, 3600, redis, redis_prefix, parents)


async def test_tokens_taken_then_settled(hour_limiter):
    # 100 tokens an hour refill at one every 36 seconds.
    limiter = hour_limiter
    key = uuid.uuid4().hex
    first = await limiter.acquire(key, None, 100, 60, "a")
    assert first.allowed and (first.tokens_limit, first.tokens_remaining) == (100, 40)
    assert first.requests_limit is None and first.retry_after_s == 0
    # A limit the key does not have reads as nothing left and nothing to wait for.
    assert (first.requests_remaining, first.reset_requests_s) == (0, 0)
    refused = await limiter.acquire(key, None, 100, 50, "b")
    assert not refused.allowed and refused.tokens_remaining == 40
    # 10 more tokens are needed: a tenth of the hour's refill, not the window.
    assert 355 < refused.retry_after_s <= 360
    await limiter.settle(key, "a", 10)  # it used 10 of the 60 it took: 50 come back
    second = await limiter.acquire(key, None, 100, 50, "b")
    assert second.allowed and second.tokens_remaining == 40
    # A request wanting more than the whole limit takes the whole limit.
    big = await limiter.acquire(uuid.uuid4().hex, None, 100, 500, "c")
    assert big.allowed and big.tokens_remaining == 0
    # Settling an unknown ticket, a ticket twice, or a key never seen, changes nothing.
    await limiter.settle(key, "nobody", 99)
    await limiter.settle(key, "a", 0)
    await limiter.settle(uuid.uuid4().hex, "nobody", 99)
    assert (await limiter.acquire(key, None, 100, 20, "d")).tokens_remaining == 20


async def test_requests_counted_and_the_next_slot_named(limiter):
    key = uuid.uuid4().hex
    decisions = [await limiter.acquire(key, 3, None, 0, f"t{i}") for i in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.requests_remaining for d in decisions] == [2, 1, 0, 0]
    assert decisions[-1].requests_limit == 3 and decisions[-1].tokens_limit is None
    # Three a window of two seconds: one slot every 2/3 s; the bucket full after 2 s.
    assert 0.6 < decisions[-1].retry_after_s <= 2 / 3
    assert 1.9 < decisions[-1].reset_requests_s <= 2 and decisions[-1].reset_tokens_s == 0
    # Without a token limit, tokens are never refused, however many.
    tokens_free = uuid.uuid4().hex
    for i in range(3):
        unlimited = await limiter.acquire(tokens_free, 5, None, 10_000, f"u{i}")
        assert unlimited.allowed and unlimited.reset_requests_s > 0


async def test_both_limits_at_once(limiter):
    key = uuid.uuid4().hex
    assert (await limiter.acquire(key, 2, 100, 30, "a")).allowed
    by_tokens = await limiter.acquire(key, 2, 100, 80, "b")
    assert not by_tokens.allowed and by_tokens.requests_remaining == 1
    assert (await limiter.acquire(key, 2, 100, 30, "c")).allowed
    by_requests = await limiter.acquire(key, 2, 100, 1, "d")
    assert not by_requests.allowed and by_requests.requests_remaining == 0


def test_the_buckets_refill_continuously():
    clock = Clock()
    limiter = BucketLimiter(clock, window_s=60)
    limiter.hit("k", 60, 600, 300, "a")
    limiter.hit("k", 60, 600, 200, "b")
    refused = limiter.hit("k", 60, 600, 200, "c")
    # 100 left of 600, refilling at 10 a second: 100 more in 10 s.
    assert not refused.allowed and refused.retry_after_s == pytest.approx(10)
    assert refused.reset_tokens_s == pytest.approx(50) and refused.reset_requests_s == 2
    clock.now += 10
    allowed = limiter.hit("k", 60, 600, 200, "c")
    assert allowed.allowed and allowed.tokens_remaining == 0
    # A spent request bucket: the next slot is a sixtieth of a minute away.
    burst = [limiter.hit("r", 60, None) for _ in range(61)]
    assert [d.allowed for d in burst].count(True) == 60
    assert burst[-1].retry_after_s == pytest.approx(1)
    clock.now += 1
    assert limiter.hit("r", 60, None).allowed
    # A ticket older than the window is forgotten: settling it changes nothing.
    clock.now += 61
    asyncio.run(limiter.settle("k", "b", 1000))
    assert limiter.hit("k", None, 600, 600, "d").allowed


def test_decision_headers():
    both = Decision(True, 10, 3, 1000, 250, 0.0, 12.2, 0.0104)
    assert both.headers() == {
        "x-ratelimit-limit-requests": "10",
        "x-ratelimit-remaining-requests": "3",
        "x-ratelimit-reset-requests": "12.2s",
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "250",
        "x-ratelimit-reset-tokens": "11ms",
    }
    over = Decision(False, 10, -1, None, 0, 5.0, 360.0, 0.0)
    assert over.headers() == {
        "x-ratelimit-limit-requests": "10",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6m0s",
    }
    assert Decision(True, None, 0, None, 0, 0, 0, 0).headers() == {}
    # Tokens spent to nothing (or past it, by a settlement): none remaining, due now.
    spent = Decision(False, None, 0, 100, -5, 1.0, 0.0, 0.0)
    assert spent.headers() == {
        "x-ratelimit-limit-tokens": "100",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "0ms",
    }


@pytest.mark.parametrize(
    "seconds, written",
    [(0, "0ms"), (0.0004, "1ms"), (0.999, "999ms"), (0.9991, "1s"), (1.0, "1s"),
     (1.0004, "1.001s"), (59.9999, "1m0s"), (60, "1m0s"), (61.5, "1m1.5s"), (-3, "0ms")],
)  # fmt: skip
def test_waits_are_written_as_openai_writes_them(seconds: float, written: str) -> None:
    assert duration(seconds) == written


async def test_redis_limiters_of_two_prefixes_count_apart(redis, redis_prefix):
    run = uuid.uuid4().hex[:6]
    one = RedisLimiter(redis, f"{redis_prefix}one{run}:", window_s=2)
    two = RedisLimiter(redis, f"{redis_prefix}two{run}:", window_s=2)
    assert (await one.acquire("k", 1, None, 0, "a")).allowed
    assert (await two.acquire("k", 1, None, 0, "b")).allowed
    assert not (await one.acquire("k", 1, None, 0, "c")).allowed
    assert await redis.exists(f"{redis_prefix}one{run}:rl:{{k}}:b") == 1


def test_a_ticket_exactly_a_window_old_is_forgotten():
    clock = Clock()
    limiter = BucketLimiter(clock, window_s=60)
    assert limiter.hit("k", None, 600, 600, "a").allowed
    clock.now += 60
    # Settled a window later, even for more than it took, it takes nothing more.
    asyncio.run(limiter.settle("k", "a", 1200))
    assert limiter.hit("k", None, 600, 600, "b").allowed


async def test_redis_waits_follow_the_window(redis, redis_prefix):
    # A 1000-second window of one request: the next slot is a whole window away.
    limiter = RedisLimiter(redis, f"{redis_prefix}long{uuid.uuid4().hex[:6]}:", window_s=1000)
    key = uuid.uuid4().hex
    assert (await limiter.acquire(key, 1, None, 0, "a")).allowed
    refused = await limiter.acquire(key, 1, None, 0, "b")
    assert not refused.allowed and 999.9 < refused.retry_after_s <= 1000


def level(limit: float, level_name: str, slot: str, period: str = "monthly") -> BudgetSpec:
    level_id = uuid.uuid4().hex[:8]
    account = level_id if level_name == "key" else f"{level_name}:{level_id}"
    return BudgetSpec(account, f"the {level_name}", limit, period, level_name, level_id, slot)


class Levels(Ledger):
    """The ledger's spend of each account: what it says each level spent."""

    def __init__(self, spent: dict[str, float]) -> None:
        super().__init__()
        self.by_account = spent

    async def __call__(self, key_id: str, since: float) -> float:
        self.asked.append((key_id, since))
        return self.by_account.get(key_id, 0.0)


async def test_one_reservation_holds_every_level_or_none(budgets):
    slot = f"org:{uuid.uuid4().hex[:6]}"
    org, team = level(1.0, "org", slot), level(5.0, "team", slot, "daily")
    key = level(10.0, "key", slot, "none")
    ledger = Levels({org.key_id: 0.25, team.key_id: 0.5})
    b = await budgets(ledger)
    held = await b.reserve_all([org, team, key], 0.5)
    assert [r.spec for r in held] == [org, team, key] and {r.amount for r in held} == {0.5}
    # Each level's account loaded once, from its own period's start.
    assert sorted(ledger.asked) == sorted([
        (org.key_id, period_bounds("monthly")[0]), (team.key_id, period_bounds("daily")[0]),
        (key.key_id, 0.0),
    ])  # fmt: skip
    for spec_, spent in ((org, 0.25), (team, 0.5), (key, 0.0)):
        assert await b.status(spec_) == (pytest.approx(spent), pytest.approx(0.5))
    # The organisation is the tightest: 0.25 + 0.5 + 0.3 > 1. Refused, naming it, and
    # nothing held at any level.
    with pytest.raises(BudgetExhausted) as refused:
        await b.reserve_all([org, team, key], 0.3)
    assert refused.value.metadata["level"] == "org"
    assert refused.value.metadata["org"] == org.level_id
    assert f"of organisation 'the org' ({org.level_id}) cannot cover" in refused.value.message
    for spec_ in (org, team, key):
        assert (await b.status(spec_))[1] == pytest.approx(0.5)
    # Exactly what the tightest level has left fits.
    more = await b.reserve_all([org, team, key], 0.25)
    # Every level of one call, settled at once: each level's spend after it.
    assert await b.settle_all(held, 0.5) == [
        pytest.approx(0.75),
        pytest.approx(1.0),
        pytest.approx(0.5),
    ]
    # One level's alone, then one by one.
    assert await b.settle_all(more[:1], more[0].amount) == [pytest.approx(1.0)]
    for reservation in more[1:]:
        await b.settle(reservation, reservation.amount)
    assert await b.status(org) == (pytest.approx(1.0), 0)
    assert await b.status(team) == (pytest.approx(1.25), 0)
    assert await b.status(key) == (pytest.approx(0.75), 0)
    with pytest.raises(BudgetExhausted) as spent:
        await b.reserve_all([team, org], 0.0)  # spent: refused even for nothing
    assert spent.value.message == (
        f"the monthly budget of $1 of organisation 'the org' ({org.level_id}) is exhausted"
    )


async def test_a_level_below_refuses_when_its_own_budget_is_tighter(budgets):
    slot = f"org:{uuid.uuid4().hex[:6]}"
    org, team = level(100.0, "org", slot), level(0.5, "team", slot)
    b = await budgets(Levels({}))
    await b.reserve_all([org, team], 0.5)
    with pytest.raises(BudgetExhausted) as refused:
        await b.reserve_all([org, team], 0.01)
    assert refused.value.metadata == {
        "level": "team", "team": team.level_id, "name": "the team", "budget_usd": "0.5",
        "budget_period": "monthly", "spent_usd": "0.000000",
    }  # fmt: skip
    assert (await b.status(org))[1] == pytest.approx(0.5)  # the refusal held nothing


async def test_concurrent_reservations_of_two_keys_share_their_team_exactly(budgets):
    slot = f"org:{uuid.uuid4().hex[:6]}"
    team = level(1.0, "team", slot)
    keys = [level(10.0, "key", slot), level(10.0, "key", slot)]
    b = await budgets(Levels({}))

    async def attempt(i: int) -> bool:
        try:
            await b.reserve_all([team, keys[i % 2]], 0.1)
        except BudgetExhausted:
            return False
        return True

    results = await asyncio.gather(*(attempt(i) for i in range(30)))
    assert sum(results) == 10  # exactly the team's room, whichever key asked
    assert (await b.status(team))[1] == pytest.approx(1.0)


async def test_redis_levels_lapse_and_expire_as_one_key_does(redis, redis_prefix):
    b = RedisBudgets(redis, f"{redis_prefix}lvl{uuid.uuid4().hex[:6]}:", Levels({}))
    slot = f"org:{uuid.uuid4().hex[:6]}"
    monthly, daily = level(1.0, "org", slot), level(1.0, "team", slot, "daily")
    forever = level(1.0, "key", slot, "none")
    before = time.time()
    held = await b.reserve_all([monthly, daily, forever], 0.5)
    after = time.time()
    assert len({r.ticket for r in held}) == 1  # one ticket: settled at once
    lapse_ms = budget.RESERVATION_TTL_S * 1000
    for spec_, period in ((monthly, "monthly"), (daily, "daily")):
        acct, res = b._keys(spec_, period_bounds(period)[0])
        amount, expiry = (await redis.hget(res, held[0].ticket)).decode().split(":")
        assert amount == "0.5"
        assert before * 1000 + lapse_ms - 5 <= int(expiry) <= after * 1000 + lapse_ms + 5
        _, end = period_bounds(period)
        expected = {int(end - before) + DAY, int(end - after) + DAY}  # type: ignore[operator]
        assert await redis.ttl(acct) in expected | {min(expected) - 1}
        assert await redis.ttl(res) in expected | {min(expected) - 1}
    acct, res = b._keys(forever, 0)
    assert await redis.ttl(acct) == -1 and await redis.ttl(res) == -1


async def test_redis_keys_share_one_hash_tag_and_a_key_alone_keeps_its_names(redis, redis_prefix):
    prefix = f"{redis_prefix}tag{uuid.uuid4().hex[:6]}:"
    b = RedisBudgets(redis, prefix, Levels({}))
    start = int(period_bounds("monthly")[0])
    # A key of no team: the names earlier versions wrote, so a rolling upgrade keeps
    # the counters it finds.
    alone = spec(1.0)
    await b.reserve(alone, 0.1)
    names = {k.decode() async for k in redis.scan_iter(match=f"{prefix}*")}
    assert names == {f"{prefix}budget:{{{alone.key_id}}}:{start}",
                     f"{prefix}budget:{{{alone.key_id}}}:{start}:reserved"}  # fmt: skip
    # One call's levels: every key under the organisation's hash tag (one Redis Cluster
    # slot, as one script needs), each level's account its own.
    slot = f"org:{uuid.uuid4().hex[:6]}"
    org, team = level(1.0, "org", slot), level(1.0, "team", slot)
    await b.reserve_all([org, team], 0.1)
    tagged = {k.decode() async for k in redis.scan_iter(match=f"{prefix}budget:{{{slot}}}*")}
    assert tagged == {
        f"{prefix}budget:{{{slot}}}:{org.key_id}:{start}",
        f"{prefix}budget:{{{slot}}}:{org.key_id}:{start}:reserved",
        f"{prefix}budget:{{{slot}}}:{team.key_id}:{start}",
        f"{prefix}budget:{{{slot}}}:{team.key_id}:{start}:reserved",
    }
