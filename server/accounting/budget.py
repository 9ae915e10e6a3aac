"""Budgets: reserve a request's maximum cost before the call, settle to its real cost
after, atomically, so concurrent requests cannot overrun a budget.

A call is reserved against every level that has a budget at once (its organisation,
its team, its owner as a member of the team, its key: `reserve_all`): either every
level takes the reservation or none does, so no level is overrun and a refusal leaves
nothing held anywhere. Each level is an account (`server.base.caller.account_of`).

The check is `spent + reserved + this request's maximum <= budget`; a request is let
in only when even its worst case fits, so the budget holds as long as no request costs
more than it reserved (one without max_tokens reserves `limits.default_max_tokens`).

On one node the counters live in memory (the event loop makes check-and-reserve
atomic); with Redis, in one hash per key and period, changed only by Lua scripts.
Either way a key's spend so far in the period is loaded from the usage ledger the
first time it is needed, so a restart does not reset budgets.
"""

from __future__ import annotations

import calendar
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from server.base.caller import BudgetSpec, Reservation
from server.base.errors import BudgetExhausted

# A reservation left by an instance that died before settling it lapses after this.
RESERVATION_TTL_S = 15 * 60

# Loads what a key has spent since a time (Unix seconds), from the ledger.
SpentLoader = Callable[[str, float], Awaitable[float]]


def period_bounds(period: str, now: float | None = None) -> tuple[float, float | None]:
    """The start and end (Unix seconds, UTC) of the period holding `now`."""
    if period == "none":
        return 0.0, None
    day = datetime.fromtimestamp(now if now is not None else time.time(), UTC)
    if period == "daily":
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        return start.timestamp(), start.timestamp() + 86400
    start = datetime(day.year, day.month, 1, tzinfo=UTC)
    days = calendar.monthrange(day.year, day.month)[1]
    return start.timestamp(), start.timestamp() + days * 86400


class Budgets(Protocol):
    async def reserve(self, spec: BudgetSpec, amount: float) -> Reservation: ...
    async def reserve_all(
        self, specs: Sequence[BudgetSpec], amount: float
    ) -> list[Reservation]: ...
    # Both give each account's spend after the settlement (None where it is not known:
    # an account not held for that period), so that alerts need not read it again.
    async def settle(self, reservation: Reservation, actual: float) -> float | None: ...
    async def settle_all(
        self, reservations: Sequence[Reservation], actual: float
    ) -> list[float | None]: ...
    async def status(self, spec: BudgetSpec) -> tuple[float, float]: ...
    async def aclose(self) -> None: ...


# How a refusal names each level.
LEVEL_WORDS = {"org": "organisation", "team": "team", "member": "member", "key": "key"}


def exhausted(spec: BudgetSpec, spent: float, reserved: float, amount: float) -> BudgetExhausted:
    """The refusal of `spec`'s level, naming the level and its id."""
    _, end = period_bounds(spec.period)
    period = "lifetime" if spec.period == "none" else spec.period
    whose = f"{LEVEL_WORDS.get(spec.level, spec.level)} {spec.key_name!r}"
    if spec.level != "key":
        whose += f" ({spec.level_id})"
    if spent >= spec.limit_usd:
        what = f"the {period} budget of ${spec.limit_usd:g} of {whose} is exhausted"
    else:
        what = (
            f"the {period} budget of ${spec.limit_usd:g} of {whose} cannot cover "
            f"this request (up to ${amount:.6f}; ${spent:.6f} spent, ${reserved:.6f} reserved "
            "by requests in flight)"
        )
    retry = None if end is None else max(1, int(end - time.time()) + 1)
    metadata = {
        "key": spec.key_name,
        "budget_usd": f"{spec.limit_usd:g}",
        "budget_period": spec.period,
        "spent_usd": f"{spent:.6f}",
    }
    if spec.level != "key":  # the level and its id; `key` then names the level's name
        metadata = {"level": spec.level, spec.level: spec.level_id, "name": spec.key_name} | {
            k: v for k, v in metadata.items() if k != "key"
        }
    return BudgetExhausted(what, metadata, retry_after_s=retry)


@dataclass(slots=True)
class _Account:
    period_start: float
    spent: float
    reservations: dict[str, float] = field(default_factory=dict)


class MemoryBudgets:
    """The single-node budgets. Check-and-reserve runs without an await in between,
    so on one event loop it is atomic."""

    def __init__(self, load_spent: SpentLoader) -> None:
        self._load = load_spent
        self._accounts: dict[str, _Account] = {}

    async def _account(self, spec: BudgetSpec) -> _Account:
        start, _ = period_bounds(spec.period)
        account = self._accounts.get(spec.key_id)
        if account is None or account.period_start != start:
            spent = await self._load(spec.key_id, start)
            # Another request may have loaded it while this one waited.
            account = self._accounts.get(spec.key_id)
            if account is None or account.period_start != start:
                account = self._accounts[spec.key_id] = _Account(start, spent)
        return account

    async def reserve(self, spec: BudgetSpec, amount: float) -> Reservation:
        account = await self._account(spec)
        reserved = sum(account.reservations.values())
        if account.spent + reserved + amount > spec.limit_usd or account.spent >= spec.limit_usd:
            raise exhausted(spec, account.spent, reserved, amount)
        reservation = Reservation(spec, account.period_start, amount)
        account.reservations[reservation.ticket] = amount
        return reservation

    async def reserve_all(self, specs: Sequence[BudgetSpec], amount: float) -> list[Reservation]:
        """Reserves `amount` against every spec, or against none: every account is
        loaded first, then checked and charged with no await in between."""
        while True:
            accounts = [await self._account(spec) for spec in specs]
            # A period that turned while a later account loaded: load again.
            if all(
                self._accounts.get(spec.key_id) is account
                for spec, account in zip(specs, accounts, strict=True)
            ):
                break
        # No await from here: the check and the charge of every level are one step.
        for spec, account in zip(specs, accounts, strict=True):
            reserved = sum(account.reservations.values())
            if (
                account.spent + reserved + amount > spec.limit_usd
                or account.spent >= spec.limit_usd
            ):
                raise exhausted(spec, account.spent, reserved, amount)
        held = []
        for spec, account in zip(specs, accounts, strict=True):
            reservation = Reservation(spec, account.period_start, amount)
            account.reservations[reservation.ticket] = amount
            held.append(reservation)
        return held

    async def settle(self, reservation: Reservation, actual: float) -> float | None:
        return self._settle_one(reservation, actual)

    async def settle_all(
        self, reservations: Sequence[Reservation], actual: float
    ) -> list[float | None]:
        return [self._settle_one(reservation, actual) for reservation in reservations]

    def _settle_one(self, reservation: Reservation, actual: float) -> float | None:
        account = self._accounts.get(reservation.spec.key_id)
        if account is None or account.period_start != reservation.period_start:
            return None
        account.reservations.pop(reservation.ticket, None)
        account.spent += actual
        return account.spent

    async def status(self, spec: BudgetSpec) -> tuple[float, float]:
        account = await self._account(spec)
        return account.spent, sum(account.reservations.values())

    async def aclose(self) -> None:
        return None


# KEYS: the account hash (field `spent`), the reservations hash (ticket -> "amount:expiry ms").
# ARGV: limit, amount, ticket, reservation ttl ms, spent to start from ('' when unknown),
#       account ttl s (0: none).
# Returns {1, spent, reserved} when reserved, {0, spent, reserved} when refused, and
# {-1} when the account is not in Redis yet and must be loaded from the ledger.
RESERVE = """
local acct, res = KEYS[1], KEYS[2]
local limit, amount = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HEXISTS', acct, 'spent') == 0 then
  if ARGV[5] == '' then return {-1} end
  redis.call('HSET', acct, 'spent', ARGV[5])
end
local spent = tonumber(redis.call('HGET', acct, 'spent'))
local reserved = 0
local all = redis.call('HGETALL', res)
for i = 1, #all, 2 do
  local sep = string.find(all[i + 1], ':', 1, true)
  local value, expiry = tonumber(string.sub(all[i + 1], 1, sep - 1)), tonumber(string.sub(all[i + 1], sep + 1))
  if expiry < now then redis.call('HDEL', res, all[i]) else reserved = reserved + value end
end
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  redis.call('EXPIRE', acct, ttl)
  redis.call('EXPIRE', res, ttl)
end
if spent >= limit or spent + reserved + amount > limit then
  return {0, tostring(spent), tostring(reserved)}
end
redis.call('HSET', res, ARGV[3], ARGV[2] .. ':' .. tostring(now + tonumber(ARGV[4])))
-- After the write too: a reservations hash made by it gets its expiry.
if ttl > 0 then redis.call('EXPIRE', res, ttl) end
return {1, tostring(spent), tostring(reserved + amount)}
"""

# KEYS: the account hash, the reservations hash. ARGV: ticket, actual cost.
# Returns the spend after it, '' when the account is not in Redis.
SETTLE = """
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('HEXISTS', KEYS[1], 'spent') == 1 then
  return redis.call('HINCRBYFLOAT', KEYS[1], 'spent', ARGV[2])
end
return ''
"""


# Every account of one call at once. KEYS: per account, its hash and its reservations.
# ARGV: amount, ticket, reservation ttl ms, then per account: limit, spent to start from
# ('' when unknown), account ttl s (0: none).
# Returns {1} when every account took the reservation, {0, i, spent, reserved} when the
# i-th (from 1) refused it (none took it), and {-1, i} when the i-th is not in Redis yet
# and must be loaded from the ledger (nothing changed).
RESERVE_ALL = """
local amount, ticket = tonumber(ARGV[1]), ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS / 2
for i = 1, n do
  if redis.call('HEXISTS', KEYS[2 * i - 1], 'spent') == 0 and ARGV[3 + 3 * i - 1] == '' then
    return {-1, i}
  end
end
local totals = {}
for i = 1, n do
  local acct, res = KEYS[2 * i - 1], KEYS[2 * i]
  local limit, start, ttl = tonumber(ARGV[3 + 3 * i - 2]), ARGV[3 + 3 * i - 1], tonumber(ARGV[3 + 3 * i])
  if redis.call('HEXISTS', acct, 'spent') == 0 then redis.call('HSET', acct, 'spent', start) end
  local spent = tonumber(redis.call('HGET', acct, 'spent'))
  local reserved = 0
  local all = redis.call('HGETALL', res)
  for j = 1, #all, 2 do
    local sep = string.find(all[j + 1], ':', 1, true)
    local value, expiry = tonumber(string.sub(all[j + 1], 1, sep - 1)), tonumber(string.sub(all[j + 1], sep + 1))
    if expiry < now then redis.call('HDEL', res, all[j]) else reserved = reserved + value end
  end
  if ttl > 0 then redis.call('EXPIRE', acct, ttl) end
  if spent >= limit or spent + reserved + amount > limit then
    return {0, i, tostring(spent), tostring(reserved)}
  end
end
local entry = ARGV[1] .. ':' .. tostring(now + tonumber(ARGV[3]))
for i = 1, n do
  redis.call('HSET', KEYS[2 * i], ticket, entry)
  -- After the write: a hash made by it gets its expiry too.
  local ttl = tonumber(ARGV[3 + 3 * i])
  if ttl > 0 then redis.call('EXPIRE', KEYS[2 * i], ttl) end
end
return {1}
"""


# Every level of one call settled at once. KEYS: per account, its hash and its
# reservations. ARGV: ticket, actual cost. Returns each account's spend after it, as
# SETTLE does.
SETTLE_ALL = """
local spent = {}
for i = 1, #KEYS / 2 do
  redis.call('HDEL', KEYS[2 * i], ARGV[1])
  spent[i] = ''
  if redis.call('HEXISTS', KEYS[2 * i - 1], 'spent') == 1 then
    spent[i] = redis.call('HINCRBYFLOAT', KEYS[2 * i - 1], 'spent', ARGV[2])
  end
end
return spent
"""


class RedisBudgets:
    """Budgets shared by every instance using one Redis."""

    def __init__(self, redis: Any, prefix: str, load_spent: SpentLoader) -> None:
        self.prefix = prefix
        self._load = load_spent
        self._reserve = redis.register_script(RESERVE)
        self._reserve_all = redis.register_script(RESERVE_ALL)
        self._settle = redis.register_script(SETTLE)
        self._settle_all = redis.register_script(SETTLE_ALL)

    def _keys(self, spec: BudgetSpec, period_start: float) -> list[str]:
        # The hash tag keeps one call's accounts on one Redis Cluster slot: the key's
        # own (as before levels) or its organisation's.
        slot = spec.slot or spec.key_id
        name = "" if slot == spec.key_id else f"{spec.key_id}:"
        base = f"{self.prefix}budget:{{{slot}}}:{name}{int(period_start)}"
        return [base, base + ":reserved"]

    async def _run(self, spec: BudgetSpec, amount: float, ticket: str) -> tuple[Any, float]:
        start, end = period_bounds(spec.period)
        keys = self._keys(spec, start)
        ttl = 0 if end is None else int(end - time.time()) + 86400
        args: list[Any] = [spec.limit_usd, repr(amount), ticket, RESERVATION_TTL_S * 1000, "", ttl]
        result = await self._reserve(keys=keys, args=args)
        if int(result[0]) == -1:
            args[4] = repr(await self._load(spec.key_id, start))
            result = await self._reserve(keys=keys, args=args)
        return result, start

    async def reserve(self, spec: BudgetSpec, amount: float) -> Reservation:
        reservation = Reservation(spec, 0.0, amount)
        result, reservation.period_start = await self._run(spec, amount, reservation.ticket)
        if int(result[0]) != 1:
            raise exhausted(spec, float(result[1]), float(result[2]), amount)
        return reservation

    async def reserve_all(self, specs: Sequence[BudgetSpec], amount: float) -> list[Reservation]:
        if len(specs) == 1:
            return [await self.reserve(specs[0], amount)]
        held = [Reservation(spec, period_bounds(spec.period)[0], amount) for spec in specs]
        ticket = held[0].ticket
        keys: list[str] = []
        args: list[Any] = [repr(amount), ticket, RESERVATION_TTL_S * 1000]
        for reservation in held:
            reservation.ticket = ticket
            spec = reservation.spec
            _, end = period_bounds(spec.period)
            keys += self._keys(spec, reservation.period_start)
            args += [spec.limit_usd, "", 0 if end is None else int(end - time.time()) + 86400]
        # Each pass loads at most one account the script has not seen; then it decides.
        for _ in range(len(specs) + 1):
            result = await self._reserve_all(keys=keys, args=args)
            if int(result[0]) != -1:
                break
            i = int(result[1]) - 1
            args[3 + 3 * i + 1] = repr(await self._load(specs[i].key_id, held[i].period_start))
        if int(result[0]) != 1:
            i = int(result[1]) - 1
            raise exhausted(specs[i], float(result[2]), float(result[3]), amount)
        return held

    async def settle(self, reservation: Reservation, actual: float) -> float | None:
        keys = self._keys(reservation.spec, reservation.period_start)
        return _spent(await self._settle(keys=keys, args=[reservation.ticket, repr(actual)]))

    async def settle_all(
        self, reservations: Sequence[Reservation], actual: float
    ) -> list[float | None]:
        """Settles the reservations of one `reserve_all` (one ticket) in one script."""
        tickets = {r.ticket for r in reservations}
        if len(reservations) < 2 or len(tickets) != 1:
            return [await self.settle(reservation, actual) for reservation in reservations]
        keys = [k for r in reservations for k in self._keys(r.spec, r.period_start)]
        spent = await self._settle_all(keys=keys, args=[reservations[0].ticket, repr(actual)])
        return [_spent(s) for s in spent]

    async def status(self, spec: BudgetSpec) -> tuple[float, float]:
        # A reservation of nothing, given back at once: reads the account, changes nothing.
        ticket = uuid.uuid4().hex
        result, start = await self._run(spec, 0.0, ticket)
        if int(result[0]) == 1:
            await self._settle(keys=self._keys(spec, start), args=[ticket, "0"])
        return float(result[1]), float(result[2])

    async def aclose(self) -> None:
        return None


def _spent(answer: bytes | str) -> float | None:
    """A settlement script's spend after it ('' when the account is not in Redis)."""
    return float(answer) if answer else None
