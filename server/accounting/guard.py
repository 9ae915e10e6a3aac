"""Storage on the request path, bounded: every call to the key store, the ledger's
spend query or Redis gets its own short timeout (`storage.timeout_s`, inside the
request's deadline) and fails as StorageUnavailable, an error that names storage,
instead of holding the request until its deadline and blaming the provider.

`GuardedLimiter` and `GuardedBudgets` wrap the shared (Redis) counters; with
`limits.fail_open`, a rate-limit check that cannot reach Redis lets the request in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from server.accounting.budget import Budgets
from server.accounting.ratelimit import Decision, Limiter
from server.base.caller import BudgetSpec, Reservation
from server.base.errors import GatewayError, StorageUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")
# Seconds between two warnings about the same storage being unavailable.
WARN_EVERY_S = 10.0
_warned: dict[str, float] = {}


async def bounded(what: str, work: Awaitable[T], timeout_s: float) -> T:
    """Awaits `work` for at most `timeout_s`; any failure of the storage behind it
    (a timeout, a refused connection, a driver error) becomes StorageUnavailable."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except BaseException:
        _abandon(task)
        raise
    if not done:
        # Not awaited: a driver cleaning up after a cancelled call on a hung connection
        # (asyncpg resetting it, say) may itself hang; the request does not wait for it.
        _abandon(task)
        raise unavailable(what, f"did not answer within {timeout_s:g}s")
    try:
        return task.result()
    except GatewayError:
        raise
    except Exception as exc:
        raise unavailable(what, f"failed ({type(exc).__name__})") from exc


def _abandon(task: asyncio.Future[Any]) -> None:
    task.cancel()
    task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def unavailable(what: str, why: str) -> StorageUnavailable:
    now = time.monotonic()
    if now - _warned.get(what, -WARN_EVERY_S) >= WARN_EVERY_S:
        _warned[what] = now
        log.warning("storage: the %s %s", what, why)
    return StorageUnavailable(
        f"the {what} is unavailable: it {why}", {"storage": what}, retry_after_s=1
    )


class GuardedLimiter:
    """A Limiter whose every call is bounded; fails open or closed as configured."""

    def __init__(self, inner: Limiter, timeout_s: float, fail_open: bool = False) -> None:
        self.inner = inner
        self.timeout_s = timeout_s
        self.fail_open = fail_open

    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision:
        try:
            return await bounded(
                "rate-limit store",
                self.inner.acquire(key, rpm, tpm, tokens, ticket),
                self.timeout_s,
            )
        except StorageUnavailable:
            if not self.fail_open:
                raise
            return Decision(True, rpm, rpm or 0, tpm, tpm or 0, 0.0, 0.0, 0.0)

    async def settle(self, key: str, ticket: str, tokens: int) -> None:
        await bounded("rate-limit store", self.inner.settle(key, ticket, tokens), self.timeout_s)

    async def aclose(self) -> None:
        await self.inner.aclose()


class GuardedBudgets:
    """Budgets whose every call is bounded (budgets always fail closed: money)."""

    def __init__(self, inner: Budgets, timeout_s: float) -> None:
        self.inner = inner
        self.timeout_s = timeout_s

    async def reserve(self, spec: BudgetSpec, amount: float) -> Reservation:
        return await bounded("budget store", self.inner.reserve(spec, amount), self.timeout_s)

    async def reserve_all(self, specs: Sequence[BudgetSpec], amount: float) -> list[Reservation]:
        return await bounded("budget store", self.inner.reserve_all(specs, amount), self.timeout_s)

    async def settle(self, reservation: Reservation, actual: float) -> float | None:
        return await bounded("budget store", self.inner.settle(reservation, actual), self.timeout_s)

    async def settle_all(
        self, reservations: Sequence[Reservation], actual: float
    ) -> list[float | None]:
        return await bounded(
            "budget store", self.inner.settle_all(reservations, actual), self.timeout_s
        )

    async def status(self, spec: BudgetSpec) -> tuple[float, float]:
        return await bounded("budget store", self.inner.status(spec), self.timeout_s)

    async def aclose(self) -> None:
        await self.inner.aclose()
