"""Per-key rate limits: requests and tokens per window (a minute), as token buckets
that refill continuously (a full limit per window), held in memory on one node or in
Redis when several instances share them. As OpenAI's limits do: a key of 60 requests a
minute that spent its bucket in a burst gets its next request a second later, and its
refusal says so (`retry_after_s`), rather than after a whole window.

An admitted request takes, under a ticket, the tokens it may use (prompt estimate plus
max_tokens); when it ends, `settle` gives back what it did not use (or takes what it used
beyond). Both limiters give the same answers; the Redis one does each check in one Lua
script, so concurrent checks from every instance are serialised and the limit holds
exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    requests_limit: int | None
    requests_remaining: int
    tokens_limit: int | None
    tokens_remaining: int
    # Seconds until the buckets hold enough for this request (0 when allowed).
    retry_after_s: float
    # Seconds until each bucket is full again.
    reset_requests_s: float
    reset_tokens_s: float

    def headers(self) -> dict[str, str]:
        """OpenAI-style rate-limit headers, as sent on every response."""
        out = {}
        if self.requests_limit is not None:
            out["x-ratelimit-limit-requests"] = str(self.requests_limit)
            out["x-ratelimit-remaining-requests"] = str(max(0, self.requests_remaining))
            out["x-ratelimit-reset-requests"] = duration(self.reset_requests_s)
        if self.tokens_limit is not None:
            out["x-ratelimit-limit-tokens"] = str(self.tokens_limit)
            out["x-ratelimit-remaining-tokens"] = str(max(0, self.tokens_remaining))
            out["x-ratelimit-reset-tokens"] = duration(self.reset_tokens_s)
        return out


def duration(seconds: float) -> str:
    """A wait as OpenAI writes it: `120ms`, `1.5s`, `6m0s` (rounded up to the millisecond)."""
    ms = max(0, math.ceil(seconds * 1000 - 1e-6))
    if ms < 1000:
        return f"{ms}ms"
    minutes, rest = divmod(ms, 60_000)
    text = f"{rest / 1000:g}s"
    return f"{minutes}m{text}" if minutes else text


class Limiter(Protocol):
    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision: ...

    async def settle(self, key: str, ticket: str, tokens: int) -> None: ...

    async def aclose(self) -> None: ...


class _Buckets:
    """One key's buckets: what is available now (a request costs 1 of `rpm`, its tokens
    of `tpm`), as of `at`, and the tokens each ticket still in the window took."""

    __slots__ = ("requests", "tokens", "at", "tickets")

    def __init__(self, now: float) -> None:
        # None until the key has such a limit: the bucket then starts full.
        self.requests: float | None = None
        self.tokens: float | None = None
        self.at = now
        # ticket -> [taken at, tokens taken, the key's tpm then]; oldest first.
        self.tickets: dict[str, list[Any]] = {}


class BucketLimiter:
    """The single-node limiter: token buckets that refill continuously, a full limit per
    window, so a burst that spends a bucket waits only for the next slot (a sixtieth of
    a minute at 60 requests per minute), not for the window to pass. Memory is one entry
    per key plus one per ticket taken in the last window."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._keys: dict[str, _Buckets] = {}

    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision:
        return self.hit(key, rpm, tpm, tokens, ticket)

    def hit(
        self, key: str, rpm: int | None, tpm: int | None = None, tokens: int = 0, ticket: str = ""
    ) -> Decision:
        now = self._clock()
        b = self._keys.get(key)
        if b is None:
            b = self._keys[key] = _Buckets(now)
        elapsed = max(0.0, now - b.at)
        window = self.window_s
        requests = tokens_left = 0.0
        if rpm:
            start = rpm if b.requests is None else b.requests
            requests = b.requests = min(float(rpm), start + elapsed * rpm / window)
        if tpm:
            start = tpm if b.tokens is None else b.tokens
            tokens_left = b.tokens = min(float(tpm), start + elapsed * tpm / window)
        b.at = now
        while b.tickets:
            oldest = next(iter(b.tickets))
            if b.tickets[oldest][0] > now - window:
                break
            del b.tickets[oldest]
        want = min(tokens, tpm) if tpm else tokens
        retry = 0.0
        if rpm and requests < 1:
            retry = (1 - requests) * window / rpm
        if tpm and tokens_left < want:
            retry = max(retry, (want - tokens_left) * window / tpm)
        allowed = retry == 0.0
        if allowed:
            if rpm:
                requests = b.requests = requests - 1
            if tpm:
                tokens_left = b.tokens = tokens_left - want
                if ticket:
                    b.tickets[ticket] = [now, want, tpm]
        return _decision(allowed, rpm, tpm, requests, tokens_left, retry, window)

    async def settle(self, key: str, ticket: str, tokens: int) -> None:
        """Gives back what a request took beyond what it used (or takes the excess)."""
        b = self._keys.get(key)
        entry = b.tickets.pop(ticket, None) if b is not None else None
        # A ticket a window old is forgotten: its bucket has refilled since.
        if (
            b is not None
            and b.tokens is not None
            and entry is not None
            and entry[0] > self._clock() - self.window_s
        ):
            b.tokens = min(float(entry[2]), b.tokens + entry[1] - tokens)

    async def aclose(self) -> None:
        return None


def _decision(
    allowed: bool,
    rpm: int | None,
    tpm: int | None,
    requests: float,
    tokens: float,
    retry: float,
    window: float,
) -> Decision:
    """The decision from the buckets' levels after it (0 for a limit the key does not
    have: no backend fills its level)."""
    return Decision(
        allowed,
        rpm,
        math.floor(requests),
        tpm,
        math.floor(tokens),
        retry,
        (rpm - requests) * window / rpm if rpm else 0.0,
        (tpm - tokens) * window / tpm if tpm else 0.0,
    )


# KEYS: the key's buckets (hash: r, t, at), its tickets (hash: ticket -> "tokens:tpm:at").
# ARGV: window ms, rpm (0: none), tpm (0: none), tokens wanted, ticket.
# Time comes from the Redis server, so instances need no synchronised clocks. A bucket
# left alone for a window is full again: its keys expire then.
ACQUIRE = """
local b, tk = KEYS[1], KEYS[2]
local window = tonumber(ARGV[1])
local rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3])
local want, ticket = tonumber(ARGV[4]), ARGV[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local s = redis.call('HMGET', b, 'r', 't', 'at')
-- A level not stored yet (a limit the key did not have) starts full.
local r, k = tonumber(s[1]) or rpm, tonumber(s[2]) or tpm
local elapsed = math.max(0, now - (tonumber(s[3]) or now))
if rpm > 0 then r = math.min(rpm, r + elapsed * rpm / window) end
if tpm > 0 then k = math.min(tpm, k + elapsed * tpm / window) end
if tpm > 0 and want > tpm then want = tpm end
local retry = 0
if rpm > 0 and r < 1 then retry = (1 - r) * window / rpm end
if tpm > 0 and k < want then retry = math.max(retry, (want - k) * window / tpm) end
if retry == 0 then
  if rpm > 0 then r = r - 1 end
  if tpm > 0 then
    k = k - want
    if ticket ~= '' then
      redis.call('HSET', tk, ticket, want .. ':' .. tpm .. ':' .. now)
      redis.call('PEXPIRE', tk, math.ceil(window))
    end
  end
end
if rpm > 0 then redis.call('HSET', b, 'r', tostring(r)) end
if tpm > 0 then redis.call('HSET', b, 't', tostring(k)) end
redis.call('HSET', b, 'at', tostring(now))
redis.call('PEXPIRE', b, math.ceil(window))
return {retry == 0 and 1 or 0, tostring(r), tostring(k), tostring(retry)}
"""

# Gives back what a ticket took beyond what it used (or takes the excess), once.
SETTLE = """
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
local want, tpm, at = string.match(v, '([^:]+):([^:]+):([^:]+)')
want, tpm = tonumber(want), tonumber(tpm)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local k = tonumber(redis.call('HGET', KEYS[1], 't'))
-- A ticket a window old is forgotten: its bucket has refilled since.
if k and now - tonumber(at) < tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 't', tostring(math.min(tpm, k + want - tonumber(ARGV[2]))))
end
return 0
"""


class RedisLimiter:
    """The shared limiter: every instance pointing at one Redis sees one pair of buckets
    per key, changed only by the scripts above (so concurrent checks are serialised and
    the limit holds exactly)."""

    def __init__(self, redis: Any, prefix: str, window_s: float = WINDOW_S) -> None:
        self.prefix = prefix
        self.window_s = window_s
        self._acquire = redis.register_script(ACQUIRE)
        self._settle = redis.register_script(SETTLE)

    def _keys(self, key: str) -> list[str]:
        # The hash tag keeps one key's entries on one Redis Cluster slot.
        base = f"{self.prefix}rl:{{{key}}}"
        return [f"{base}:b", f"{base}:tk"]

    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision:
        args = [self.window_s * 1000, rpm or 0, tpm or 0, tokens, ticket]
        allowed, requests, left, retry_ms = await self._acquire(keys=self._keys(key), args=args)
        return _decision(
            bool(allowed), rpm, tpm, float(requests), float(left), float(retry_ms) / 1000,
            self.window_s,
        )  # fmt: skip

    async def settle(self, key: str, ticket: str, tokens: int) -> None:
        await self._settle(keys=self._keys(key), args=[ticket, tokens, self.window_s * 1000])

    async def aclose(self) -> None:
        return None
