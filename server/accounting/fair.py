"""Fair shares of a full level: the calls waiting for a slot of one capped account
(`max_in_flight`) on this instance, served by priority class first (`interactive`,
then `default`, then `batch`) and, within a class, by weighted fair share: the next
slot goes to the key that has been given the fewest slots for its weight (start-time
fair queuing), each key's own calls in order.

While the level is contended, a key holding its share of the slots (the cap times its
weight over the weights of the keys active in the last second) is not given another:
the slot stays free for the next call of a key under its share, which takes it at
once instead of queueing behind a flood. A key alone gets every slot; a key that
stays idle a second stops counting.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

CLASSES = ("interactive", "default", "batch")
# A key that sent nothing for this long no longer counts among those sharing the level.
ACTIVE_S = 1.0


class FairQueue:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        # Each key's calls holding a slot here, the key of each slot's ticket, and when
        # each key was last seen.
        self.running: dict[str, int] = {}
        self._holders: dict[str, str] = {}
        self._seen: dict[str, float] = {}
        # class -> key -> its waiters, oldest first.
        self._waiting: dict[str, dict[str, deque[asyncio.Future[None]]]] = {c: {} for c in CLASSES}
        # Each key's virtual time: the slots it was given over its weight.
        self._given: dict[str, float] = {}
        self._weights: dict[str, float] = {}

    def __len__(self) -> int:
        return sum(len(q) for keys in self._waiting.values() for q in keys.values())

    def seen(self, key: str, weight: float) -> None:
        self._seen[key] = time.monotonic()
        self._weights[key] = weight

    def under_share(self, key: str) -> bool:
        """Whether the key holds fewer slots than its share among the active keys."""
        now = time.monotonic()
        active = [k for k, at in self._seen.items() if now - at < ACTIVE_S or self.running.get(k)]
        total = sum(self._weights.get(k, 1.0) for k in active) or 1.0
        share = self.cap * self._weights.get(key, 1.0) / total
        return self.running.get(key, 0) < max(1.0, share)

    def took(self, key: str, ticket: str) -> None:
        self.running[key] = self.running.get(key, 0) + 1
        self._holders[ticket] = key

    def gave_back(self, ticket: str) -> None:
        key = self._holders.pop(ticket, None)
        if key is not None:
            left = self.running[key] = self.running[key] - 1
            if left <= 0:
                del self.running[key]

    def unused(self) -> bool:
        """Nothing waits or runs here, and no key was seen lately."""
        now = time.monotonic()
        return (
            self.idle()
            and not self.running
            and all(now - at >= ACTIVE_S for at in self._seen.values())
        )

    def join(self, priority: str, key: str, weight: float) -> asyncio.Future[None]:
        """A future done when this call may try for a slot."""
        keys = self._waiting[priority]
        if key not in keys:
            keys[key] = deque()
            # A key that starts waiting starts at the least virtual time of those
            # waiting: neither ahead of them for having been idle, nor behind.
            floor = min((self._given.get(k, 0.0) for k in keys if k != key), default=0.0)
            self._given[key] = max(self._given.get(key, 0.0), floor)
        self._weights[key] = weight
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys[key].append(future)
        return future

    def leave(self, priority: str, key: str, future: asyncio.Future[None]) -> None:
        """Takes a waiter out (it gave up or was served); a waiter woken but gone passes
        its turn on."""
        queue = self._waiting[priority].get(key)
        if queue is not None and future in queue:
            queue.remove(future)
            if not queue:
                del self._waiting[priority][key]
        if future.done() and not future.cancelled():
            return
        future.cancel()

    def wake(self) -> bool:
        """Lets the next waiter try for the slot just freed; False when none waits."""
        for priority in CLASSES:
            keys = self._waiting[priority]
            while keys:
                eligible = [k for k in keys if self.under_share(k)]
                if not eligible:
                    break  # the slot stays free for a key under its share
                key = min(eligible, key=lambda k: self._given.get(k, 0.0))
                queue = keys[key]
                future = queue.popleft()
                if not queue:
                    del keys[key]
                if future.done():  # gave up meanwhile
                    continue
                self._given[key] = self._given.get(key, 0.0) + 1 / self._weights.get(key, 1.0)
                future.set_result(None)
                return True
            if keys:
                return False  # a lower class waits for this one's turn
        return False

    def idle(self) -> bool:
        return not any(self._waiting.values())
