"""Traffic control: how many calls a key, team or model holds at once (`max_in_flight`),
and waiting for room instead of being refused by a rate limit (`max_wait_s`).

In-flight calls are counted per account (`key_…`, `team:…`, `model:…`) as a set of
tickets: in memory on one process, in the parent process for `--workers N`, in a Redis
sorted set (scored by entry time) across instances. An entry a dead instance left
lapses after `traffic.lease_s`, so a crash cannot hold a slot for ever.

A call a rate limit refuses, whose key, team or model sets `max_wait_s`, waits (an
asyncio sleep: no CPU, no upstream connection) until the bucket can hold it, behind the
calls of the same account already waiting on this instance (a FIFO lock), and is
refused with the usual 429 only when the wait it would need ends past its `max_wait_s`
or its deadline. A caller that goes away cancels its wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from server.accounting.fair import ACTIVE_S, FairQueue
from server.base.caller import Principal, account_of
from server.base.config import TrafficConfig, TrafficRule
from server.base.errors import ConcurrencyLimited, RateLimited

# Reports an account's in-flight count: (level, name, count).
Report = Callable[[str, str, int], None]
# Seconds kept free of a call's deadline when deciding whether it may wait: the call
# still has to be served after its wait.
DEADLINE_MARGIN_S = 0.5
# How often a call waiting for a slot tries again on its own (a slot freed on another
# instance wakes nobody here).
POLL_S = 1.0


class InFlight(Protocol):
    async def enter(self, account: str, cap: int, ticket: str, weight: float = 1.0) -> int | None:
        """Counts `ticket` (`<key>|<call>`) in `account` when fewer than `cap` are and,
        while other keys are active, its key is under its share or the slots other
        active keys are short of their shares stay free; the count after it, or None."""
        ...

    async def leave(self, account: str, ticket: str) -> int:
        """Removes `ticket`; the count after it."""
        ...

    async def count(self, account: str) -> int:
        """The calls in flight in `account` now."""
        ...


def _fits(
    cap: int, held: int, running: dict[str, int], weights: dict[str, float], key: str
) -> bool:
    """Whether one more call of `key` fits: a free slot that no other active key under
    its share needs (`weights`: the active keys'; shares: the cap over the weights, at
    least one slot each)."""
    if held >= cap:
        return False
    total = sum(weights.values()) or 1.0
    mine = running.get(key, 0)
    if mine < max(1.0, cap * weights.get(key, 1.0) / total):
        return True
    short = sum(
        max(0.0, max(1.0, cap * w / total) - running.get(k, 0))
        for k, w in weights.items()
        if k != key
    )
    return held < cap - math.ceil(short - 1e-9)


class MemoryInFlight:
    """The in-flight sets of one process (or of the parent of `--workers N`)."""

    def __init__(self, lease_s: float = 900.0, clock: Callable[[], float] = time.monotonic):
        self.lease_s = lease_s
        self._clock = clock
        self._accounts: dict[str, dict[str, float]] = {}
        # Per account, each key seen lately: (when, its weight).
        self._seen: dict[str, dict[str, tuple[float, float]]] = {}

    async def enter(self, account: str, cap: int, ticket: str, weight: float = 1.0) -> int | None:
        now = self._clock()
        held = self._accounts.setdefault(account, {})
        for old, at in list(held.items()):
            if at <= now - self.lease_s:
                del held[old]
        key = ticket.partition("|")[0]
        running: dict[str, int] = {}
        for member in held:
            owner = member.partition("|")[0]
            running[owner] = running.get(owner, 0) + 1
        seen = self._seen.setdefault(account, {})
        seen[key] = (now, weight)
        for other, (at, _) in list(seen.items()):
            if now - at >= ACTIVE_S and not running.get(other):
                del seen[other]
        weights = {k: w for k, (_, w) in seen.items()}
        if not _fits(cap, len(held), running, weights, key):
            return None
        held[ticket] = now
        return len(held)

    async def count(self, account: str) -> int:
        now = self._clock()
        return sum(1 for at in self._accounts.get(account, {}).values() if at > now - self.lease_s)

    async def leave(self, account: str, ticket: str) -> int:
        held = self._accounts.get(account)
        if held is None:
            return 0
        held.pop(ticket, None)
        if not held:
            del self._accounts[account]
        return len(held)


# KEYS: the account's sorted set (members `<key>|<call>`, scored by entry time) and its
# keys seen lately (hash: key -> "ms:weight"). ARGV: cap, member, lease ms, weight,
# active ms. Redis's clock scores the entries, so instances need no synchronised
# clocks. The share rule is _fits's.
ENTER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap, member, lease = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local weight, active = tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - lease)
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local held = #members
local key = string.match(member, '^([^|]*)')
local running = {}
for _, m in ipairs(members) do
  local owner = string.match(m, '^([^|]*)')
  running[owner] = (running[owner] or 0) + 1
end
redis.call('HSET', KEYS[2], key, now .. ':' .. weight)
redis.call('PEXPIRE', KEYS[2], lease)
local weights, total = {}, 0
local seen = redis.call('HGETALL', KEYS[2])
for i = 1, #seen, 2 do
  local at, w = string.match(seen[i + 1], '^([^:]+):(.+)$')
  if now - tonumber(at) < active or running[seen[i]] then
    weights[seen[i]] = tonumber(w)
    total = total + tonumber(w)
  else
    redis.call('HDEL', KEYS[2], seen[i])
  end
end
if held >= cap then return -1 end
if total == 0 then total = 1 end
local mine = running[key] or 0
if mine >= math.max(1, cap * weight / total) then
  local short = 0
  for k, w in pairs(weights) do
    if k ~= key then
      short = short + math.max(0, math.max(1, cap * w / total) - (running[k] or 0))
    end
  end
  if held >= cap - math.ceil(short - 1e-9) then return -1 end
end
redis.call('ZADD', KEYS[1], now, member)
redis.call('PEXPIRE', KEYS[1], lease)
return held + 1
"""

LEAVE = """
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('ZCARD', KEYS[1])
"""

# KEYS: the account's sorted set. ARGV: lease ms. The entries not lapsed.
COUNT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')
"""


class RedisInFlight:
    """In-flight sets shared by every instance on one Redis."""

    def __init__(self, redis: Any, prefix: str, lease_s: float = 900.0) -> None:
        self.prefix = prefix
        self.lease_ms = int(lease_s * 1000)
        self._enter = redis.register_script(ENTER)
        self._leave = redis.register_script(LEAVE)
        self._count = redis.register_script(COUNT)

    def _key(self, account: str) -> str:
        return f"{self.prefix}inflight:{{{account}}}"

    async def enter(self, account: str, cap: int, ticket: str, weight: float = 1.0) -> int | None:
        key = self._key(account)
        args = [cap, ticket, self.lease_ms, weight, int(ACTIVE_S * 1000)]
        n = int(await self._enter(keys=[key, f"{key}:seen"], args=args))
        return None if n < 0 else n

    async def leave(self, account: str, ticket: str) -> int:
        return int(await self._leave(keys=[self._key(account)], args=[ticket]))

    async def count(self, account: str) -> int:
        return int(await self._count(keys=[self._key(account)], args=[self.lease_ms]))


@dataclass(frozen=True, slots=True)
class Hold:
    """One level's in-flight cap that a call counts against."""

    level: str
    account: str
    name: str
    cap: int
    # The call's entry in the account: `<key>|<ticket>`.
    member: str = ""


def _rule(rules: dict[str, TrafficRule], *names: str) -> TrafficRule | None:
    return next((rules[n] for n in names if n and n in rules), None)


def rules_for(
    config: TrafficConfig, principal: Principal, model: str
) -> list[tuple[str, str, str, TrafficRule]]:
    """(level, account, name, rule) of every level with a traffic rule for this call:
    the key's own, its team's, the model's."""
    out = []
    if rule := _rule(config.keys, principal.key_id, principal.name):
        out.append(("key", principal.key_id, principal.name, rule))
    for lv in principal.levels:
        if lv.level == "team" and (rule := _rule(config.teams, lv.id, lv.name)):
            out.append(("team", lv.account, lv.name, rule))
    if model and (rule := config.models.get(model)):
        out.append(("model", account_of("model", model), model, rule))
    return out


class Traffic:
    """Concurrency caps and waiting queues, as the accounts use them."""

    def __init__(
        self,
        in_flight: InFlight,
        config: Callable[[], TrafficConfig],
        guard: Callable[[str, Awaitable[Any]], Awaitable[Any]] | None = None,
    ) -> None:
        self.in_flight = in_flight
        self.config = config
        # Bounds each store call (storage.timeout_s) when the store is remote.
        self._guard = guard
        self.report: Report = lambda level, name, count: None
        self.report_waiting: Callable[[int], None] = lambda count: None
        # Waiting calls on this instance: in all, and per account.
        self.waiting = 0
        self._waiting: dict[str, int] = {}
        self._queues: dict[str, asyncio.Lock] = {}
        # Calls waiting for a slot of a full capped account, by account.
        self._fair: dict[str, FairQueue] = {}
        # The account of each capped (level, name) seen, for reports: a rule may name a
        # key or team by its name.
        self._named: dict[tuple[str, str], str] = {}

    async def _store(self, work: Awaitable[Any]) -> Any:
        if self._guard is None:
            return await work
        return await self._guard("in-flight store", work)

    async def levels(self) -> list[tuple[str, str, TrafficRule, int]]:
        """(level, name, rule, calls in flight now) of every key, team and model with a
        traffic rule; stored keys and teams counted by the id they are named by."""
        config = self.config()
        out = []
        for level, rules in (("key", config.keys), ("team", config.teams),
                             ("model", config.models)):  # fmt: skip
            for name, rule in rules.items():
                count = 0
                if rule.max_in_flight:
                    account = self._named.get((level, name)) or (
                        name if level == "key" else account_of(level, name)
                    )
                    count = await self._store(self.in_flight.count(account))
                out.append((level, name, rule, count))
        return out

    # -- concurrency caps -------------------------------------------------------------

    def class_of(self, principal: Principal, batch: bool = False) -> tuple[str, float]:
        """The priority class and weight of the key's calls: its own rule's, else its
        team's, else `default` and 1. A batch job's lines are always in `batch`, the
        lowest: a key's interactive class does not lift its offline work."""
        config = self.config()
        rules = [_rule(config.keys, principal.key_id, principal.name)]
        rules += [
            _rule(config.teams, lv.id, lv.name) for lv in principal.levels if lv.level == "team"
        ]
        priority = next((r.priority for r in rules if r is not None and r.priority), None)
        weight = next((r.weight for r in rules if r is not None), 1.0)
        return "batch" if batch else priority or "default", weight

    def _until(
        self, principal: Principal, model: str, deadline: float | None
    ) -> tuple[float, int] | None:
        """When a call that may wait (`max_wait_s`) stops waiting (monotonic) and how
        many of its level may wait; None when it may not wait."""
        found = self.wait_rule(principal, model)
        if found is None:
            return None
        until = time.monotonic() + (found[1].max_wait_s or 0.0)
        if deadline is not None:  # on the event loop's clock
            left = deadline - asyncio.get_running_loop().time()
            until = min(until, time.monotonic() + left - DEADLINE_MARGIN_S)
        return until, found[1].max_waiting

    def until(self, principal: Principal, model: str, deadline: float | None) -> float | None:
        """When a call of this key and model that starts waiting now must stop
        (monotonic); None when it may not wait."""
        found = self._until(principal, model, deadline)
        if found is None or self.waiting >= self.config().max_waiting:
            return None
        return found[0]

    async def sleep(self, seconds: float) -> float:
        """Waits out an upstream's Retry-After (counted among the calls waiting);
        returns the seconds waited."""
        started = time.monotonic()
        self.waiting += 1
        self.report_waiting(self.waiting)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.waiting -= 1
            self.report_waiting(self.waiting)
        return time.monotonic() - started

    async def enter(
        self,
        principal: Principal,
        model: str,
        ticket: str,
        deadline: float | None = None,
        batch: bool = False,
    ) -> tuple[list[Hold], float]:
        """Counts the call against every level's `max_in_flight`, waiting for a slot
        (by class and fair share) when the call may wait; ConcurrencyLimited naming the
        first level that stays full (the levels entered before it are left). Returns
        the levels entered and the seconds waited for their slots."""
        holds = [
            Hold(level, account, name, rule.max_in_flight, f"{principal.key_id}|{ticket}")
            for level, account, name, rule in rules_for(self.config(), principal, model)
            if rule.max_in_flight
        ]
        entered: list[Hold] = []
        waited = 0.0
        wait = self._until(principal, model, deadline) if holds else None
        for hold in holds:
            count, took = await self._enter_one(hold, ticket, principal, wait, batch)
            waited += took
            if count is None:
                for earlier in entered:
                    await self._leave(earlier, ticket)
                whose = f"{hold.level} {hold.name!r}"
                raise ConcurrencyLimited(
                    f"{whose} has {hold.cap} calls in flight, its max_in_flight; retry when "
                    "one ends",
                    {"level": hold.level, hold.level: hold.name, "limit": str(hold.cap)},
                    retry_after_s=1,
                )
            self.report(hold.level, hold.name, count)
            if len(self._named) < 100_000:
                self._named[(hold.level, hold.name)] = hold.account
            entered.append(hold)
        return entered, waited

    async def _enter_one(
        self,
        hold: Hold,
        ticket: str,
        principal: Principal,
        wait: tuple[float, int] | None,
        batch: bool,
    ) -> tuple[int | None, float]:
        """The count after entering `hold` (None: full) and the seconds waited."""
        key = principal.key_id
        queue = self._fair.get(hold.account)
        if queue is None:
            queue = self._fair[hold.account] = FairQueue(hold.cap)
        priority, weight = self.class_of(principal, batch)
        queue.seen(key, weight)
        # Nobody waits, or this key is under its share: try at once.
        if queue.idle() or (wait is not None and queue.under_share(key)):
            count = await self._store(
                self.in_flight.enter(hold.account, hold.cap, hold.member, weight)
            )
            if count is not None:
                queue.took(key, ticket)
                return count, 0.0
        if wait is None:
            return None, 0.0
        until, most = wait
        if len(queue) >= most or self.waiting >= self.config().max_waiting:
            return None, 0.0
        started = time.monotonic()
        self.waiting += 1
        self.report_waiting(self.waiting)
        try:
            while (left := until - time.monotonic()) > 0:
                turn = queue.join(priority, key, weight)
                try:
                    # Woken when a slot here frees; a slot freed on another instance is
                    # found by trying again every POLL_S.
                    await asyncio.wait_for(asyncio.shield(turn), min(left, POLL_S))
                except TimeoutError:
                    pass
                except asyncio.CancelledError:
                    if turn.done() and not turn.cancelled():
                        queue.wake()  # the caller went away: its turn passes on
                    raise
                finally:
                    queue.leave(priority, key, turn)
                queue.seen(key, weight)
                count = await self._store(
                    self.in_flight.enter(hold.account, hold.cap, hold.member, weight)
                )
                if count is not None:
                    queue.took(key, ticket)
                    return count, time.monotonic() - started
            return None, time.monotonic() - started
        finally:
            self.waiting -= 1
            self.report_waiting(self.waiting)

    async def _leave(self, hold: Hold, ticket: str) -> None:
        count = await self._store(self.in_flight.leave(hold.account, hold.member or ticket))
        self.report(hold.level, hold.name, count)
        queue = self._fair.get(hold.account)
        if queue is not None:
            queue.gave_back(ticket)
            if not queue.wake() and queue.unused():
                del self._fair[hold.account]

    async def leave(self, holds: list[Hold], ticket: str) -> None:
        for hold in holds:
            await self._leave(hold, ticket)

    # -- waiting instead of refusing ---------------------------------------------------

    def wait_rule(self, principal: Principal, model: str) -> tuple[str, TrafficRule] | None:
        """The (account, rule) whose `max_wait_s` a refused call of this key waits by:
        the most specific level that sets one (key, then team, then model)."""
        for _, account, _, rule in rules_for(self.config(), principal, model):
            if rule.max_wait_s:
                return account, rule
        return None

    def queued(self, account: str) -> bool:
        """Whether calls of `account` wait on this instance (a new one goes behind)."""
        return self._waiting.get(account, 0) > 0

    @contextlib.asynccontextmanager
    async def queue(
        self, account: str, rule: TrafficRule, refusal: RateLimited, within_s: float
    ) -> AsyncIterator[bool]:
        """Holds the call's place in `account`'s line on this instance; yields True once
        it is at the head of the line, False when `within_s` passed first. `refusal` at
        once when the line or the instance is full."""
        if (
            self._waiting.get(account, 0) >= rule.max_waiting
            or self.waiting >= self.config().max_waiting
        ):
            raise refusal
        self._waiting[account] = self._waiting.get(account, 0) + 1
        self.waiting += 1
        self.report_waiting(self.waiting)
        lock = self._queues.setdefault(account, asyncio.Lock())
        head = False
        try:
            # asyncio.Lock wakes its waiters first come, first served.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, within_s)):
                    head = await lock.acquire()
            yield head
        finally:
            if head:
                lock.release()
            self.waiting -= 1
            self.report_waiting(self.waiting)
            left = self._waiting[account] = self._waiting[account] - 1
            if left == 0:
                del self._waiting[account]
                if not lock.locked():
                    self._queues.pop(account, None)

    async def wait_out(
        self,
        attempt: Callable[[], Awaitable[None]],
        principal: Principal,
        model: str,
        deadline: float | None,
    ) -> float:
        """Runs `attempt` (a rate-limit check raising RateLimited), waiting for room when
        the key, team or model sets `max_wait_s`. Returns the seconds waited."""
        found = self.wait_rule(principal, model)
        if found is None:
            await attempt()
            return 0.0
        account, rule = found
        started = time.monotonic()
        until = started + (rule.max_wait_s or 0.0)
        if deadline is not None:  # on the event loop's clock
            left = deadline - asyncio.get_running_loop().time()
            until = min(until, started + left - DEADLINE_MARGIN_S)
        if not self.queued(account):
            try:
                await attempt()
                return 0.0
            except RateLimited as refusal:
                if refusal.retry_after_s is None or started + refusal.retry_after_s > until:
                    raise
                first: RateLimited | None = refusal
        else:
            first = None
        within = until - time.monotonic()
        async with self.queue(account, rule, first or _busy(principal), within) as head:
            while True:
                try:
                    await attempt()
                    return time.monotonic() - started
                except RateLimited as refusal:
                    wait = refusal.retry_after_s or 0.0
                    # Out of time in the line, or at its head with no room in time: the
                    # refusal says when the bucket holds one more call.
                    if not head or time.monotonic() + wait > until:
                        raise
                    # A little past the refill, so the bucket surely holds the call.
                    await asyncio.sleep(wait + 0.001)


def _busy(principal: Principal) -> RateLimited:
    """The refusal of a call that finds its line full before trying."""
    return RateLimited(
        f"too many calls of key {principal.name!r} are waiting for its rate limit; retry after 1s",
        {"key": principal.name},
        retry_after_s=1,
    )


def retry_headers(retry_after_s: float) -> dict[str, str]:
    return {
        "retry-after": str(max(1, math.ceil(retry_after_s))),
        "retry-after-ms": str(math.ceil(retry_after_s * 1000)),
    }
