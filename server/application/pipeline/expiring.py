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
    """At most `max_entries` keys holding at most `max_bytes` of values (keys and
    values counted), the least recently used dropped first."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._max = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._clock = clock

    @property
    def size_bytes(self) -> int:
        return self._bytes

    async def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry[0]

    async def put(self, key: str, value: bytes, ttl_s: float) -> None:
        if key in self._entries:
            self._drop(key)
        if self._max_bytes is not None and len(key) + len(value) > self._max_bytes:
            return  # larger than the whole store: not kept
        self._entries[key] = (value, self._clock() + ttl_s)
        self._bytes += len(key) + len(value)
        while len(self._entries) > self._max or (
            self._max_bytes is not None and self._bytes > self._max_bytes
        ):
            self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        value, _ = self._entries.pop(key)
        self._bytes -= len(key) + len(value)


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
