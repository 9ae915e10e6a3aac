"""Expiring key-value stores for what the gateway remembers between requests (cache
affinity's providers, the response cache's answers): a bounded LRU per process, or
Redis shared by every instance. A value is bytes; a store that fails or stalls answers
`None` (a miss) and logs, never raising: what it holds only saves money and time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from server.base.throttle import warn_throttled

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)


class Store(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes, ttl_s: float) -> None: ...


class MemoryStore:
    """At most `max_entries` keys, the least recently used dropped first."""

    def __init__(self, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._max = max_entries
        self._clock = clock

    async def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[0]

    async def put(self, key: str, value: bytes, ttl_s: float) -> None:
        self._entries[key] = (value, self._clock() + ttl_s)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)


class RedisStore:
    """One string key each (`{prefix}{kind}:{key}`), expiring with its entry; every call
    bounded by `timeout_s`."""

    def __init__(self, client: Redis, prefix: str, kind: str, timeout_s: float) -> None:
        self._client = client
        self._prefix = f"{prefix}{kind}:"
        self._kind = kind
        self._timeout_s = timeout_s

    async def get(self, key: str) -> bytes | None:
        found = await self._bounded(self._client.get(self._prefix + key))
        return found if isinstance(found, bytes) else None

    async def put(self, key: str, value: bytes, ttl_s: float) -> None:
        await self._bounded(self._client.set(self._prefix + key, value, px=int(ttl_s * 1000)))

    async def _bounded(self, command: Any) -> Any:
        try:
            return await asyncio.wait_for(command, self._timeout_s)
        except Exception as exc:  # a miss costs money or time, never the request
            warn_throttled(log, self._kind, f"{self._kind} store unavailable ({exc!r})")
            return None
