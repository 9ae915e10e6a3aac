"""Per-key rate limits: requests and tokens per window (a minute), as exact sliding
windows, held in memory on one node or in Redis when several instances share them.

An admitted request is logged under a ticket with the tokens it may use (prompt
estimate plus max_tokens); when it ends, `settle` replaces that with its real count.
Both limiters give the same answers; the Redis one does each check in one Lua script,
so concurrent checks from every instance are serialised and the limit holds exactly.
"""

from __future__ import annotations

import math
import time
from collections import deque
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
    # Seconds until the window has room for this request again (0 when allowed).
    retry_after_s: float
    # Seconds until the window is entirely clear.
    reset_s: float

    @property
    def remaining(self) -> int:
        return self.requests_remaining

    def headers(self) -> dict[str, str]:
        """OpenAI-style rate-limit headers, as sent on every response."""
        out = {}
        reset = f"{math.ceil(self.reset_s)}s"
        if self.requests_limit is not None:
            out["x-ratelimit-limit-requests"] = str(self.requests_limit)
            out["x-ratelimit-remaining-requests"] = str(max(0, self.requests_remaining))
            out["x-ratelimit-reset-requests"] = reset
        if self.tokens_limit is not None:
            out["x-ratelimit-limit-tokens"] = str(self.tokens_limit)
            out["x-ratelimit-remaining-tokens"] = str(max(0, self.tokens_remaining))
            out["x-ratelimit-reset-tokens"] = reset
        return out


class Limiter(Protocol):
    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision: ...

    async def settle(self, key: str, ticket: str, tokens: int) -> None: ...

    async def aclose(self) -> None: ...


def _decision(
    allowed: bool,
    rpm: int | None,
    tpm: int | None,
    count: int,
    used: int,
    retry: float,
    reset: float,
) -> Decision:
    return Decision(
        allowed,
        rpm,
        (rpm - count) if rpm else 0,
        tpm,
        (tpm - used) if tpm else 0,
        retry,
        reset,
    )


class _Window:
    __slots__ = ("entries", "tickets", "used")

    def __init__(self) -> None:
        # [admitted at, tokens, ticket], oldest first.
        self.entries: deque[list[Any]] = deque()
        self.tickets: dict[str, list[Any]] = {}
        self.used = 0


class SlidingWindowLimiter:
    """The single-node limiter. Memory is bounded by the limits: one entry per
    request admitted in the last window."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S
    ) -> None:
        self.window_s = window_s
        self._clock = clock
        self._windows: dict[str, _Window] = {}

    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision:
        return self.hit(key, rpm, tpm, tokens, ticket)

    def hit(
        self, key: str, rpm: int | None, tpm: int | None = None, tokens: int = 0, ticket: str = ""
    ) -> Decision:
        now = self._clock()
        w = self._windows.setdefault(key, _Window())
        while w.entries and w.entries[0][0] <= now - self.window_s:
            old = w.entries.popleft()
            w.used -= old[1]
            w.tickets.pop(old[2], None)
        count = len(w.entries)
        want = min(tokens, tpm) if tpm else tokens
        retry = 0.0
        denied = False
        if rpm and count >= rpm:
            denied = True
            retry = w.entries[count - rpm][0] + self.window_s - now
        if tpm and w.used + want > tpm:
            denied = True
            need, freed = w.used + want - tpm, 0
            for entry in w.entries:
                freed += entry[1]
                if freed >= need:
                    retry = max(retry, entry[0] + self.window_s - now)
                    break
        if not denied:
            entry = [now, want, ticket]
            w.entries.append(entry)
            if ticket:
                w.tickets[ticket] = entry
            w.used += want
            count += 1
        reset = w.entries[-1][0] + self.window_s - now if w.entries else 0.0
        return _decision(not denied, rpm, tpm, count, w.used, retry, reset)

    async def settle(self, key: str, ticket: str, tokens: int) -> None:
        w = self._windows.get(key)
        entry = w.tickets.pop(ticket, None) if w else None
        if w is not None and entry is not None:
            w.used += tokens - entry[1]
            entry[1] = tokens

    async def aclose(self) -> None:
        return None


# KEYS: request log (zset ticket -> admitted ms), token hash (ticket -> tokens), token sum.
# ARGV: window ms, rpm (0: none), tpm (0: none), tokens wanted, ticket.
# Time comes from the Redis server, so instances need no synchronised clocks.
ACQUIRE = """
local log, tok, sum = KEYS[1], KEYS[2], KEYS[3]
local window = tonumber(ARGV[1])
local rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3])
local want, ticket = tonumber(ARGV[4]), ARGV[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - window)
if #old > 0 then
  local freed = 0
  for i = 1, #old do
    freed = freed + tonumber(redis.call('HGET', tok, old[i]) or '0')
    redis.call('HDEL', tok, old[i])
  end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window)
  redis.call('DECRBY', sum, freed)
end
local count = redis.call('ZCARD', log)
local used = tonumber(redis.call('GET', sum) or '0')
if tpm > 0 and want > tpm then want = tpm end
local denied, retry = false, 0
if rpm > 0 and count >= rpm then
  denied = true
  local e = redis.call('ZRANGE', log, count - rpm, count - rpm, 'WITHSCORES')
  retry = tonumber(e[2]) + window - now
end
if tpm > 0 and used + want > tpm then
  denied = true
  local need, freed = used + want - tpm, 0
  local entries = redis.call('ZRANGE', log, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    freed = freed + tonumber(redis.call('HGET', tok, entries[i]) or '0')
    if freed >= need then
      retry = math.max(retry, tonumber(entries[i + 1]) + window - now)
      break
    end
  end
end
if not denied then
  redis.call('ZADD', log, now, ticket)
  redis.call('HSET', tok, ticket, want)
  used = redis.call('INCRBY', sum, want)
  count = count + 1
end
local reset = 0
local last = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
if #last > 0 then
  reset = tonumber(last[2]) + window - now
  redis.call('PEXPIRE', log, reset)
  redis.call('PEXPIRE', tok, reset)
  redis.call('PEXPIRE', sum, reset)
end
return {denied and 0 or 1, count, used, retry, reset}
"""

# Replaces a ticket's reserved tokens with its real count, while it is in the window.
SETTLE = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('INCRBY', KEYS[2], tonumber(ARGV[2]) - tonumber(v))
end
return 0
"""


class RedisLimiter:
    """The shared limiter: every instance pointing at one Redis sees one window per key."""

    def __init__(self, redis: Any, prefix: str, window_s: float = WINDOW_S) -> None:
        self.redis = redis
        self.prefix = prefix
        self.window_ms = int(window_s * 1000)
        self._acquire = redis.register_script(ACQUIRE)
        self._settle = redis.register_script(SETTLE)

    def _keys(self, key: str) -> list[str]:
        # The hash tag keeps one key's three entries on one Redis Cluster slot.
        base = f"{self.prefix}rl:{{{key}}}"
        return [f"{base}:log", f"{base}:tok", f"{base}:sum"]

    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision:
        args = [self.window_ms, rpm or 0, tpm or 0, tokens, ticket]
        allowed, count, used, retry, reset = await self._acquire(keys=self._keys(key), args=args)
        return _decision(
            bool(allowed), rpm, tpm, int(count), int(used), int(retry) / 1000, int(reset) / 1000
        )

    async def settle(self, key: str, ticket: str, tokens: int) -> None:
        keys = self._keys(key)
        await self._settle(keys=[keys[1], keys[2]], args=[ticket, tokens])

    async def aclose(self) -> None:
        return None
