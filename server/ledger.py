"""The usage ledger: one record per request, success or failure, written in batches
off the request path.

A request only appends its record to a bounded in-memory buffer; a background task
writes the buffer to the database every `ledger.flush_interval_s` or as soon as a
batch fills. A slow or unavailable database therefore never slows a request: the
buffer grows (up to `ledger.max_buffered`, then the oldest records are dropped and
counted in the log) and failed batches are retried. A graceful shutdown drains it.

`Tab` is one request's open account: the key, what it reserved (tokens against the
rate limit, cost against the budget), and, when the request ends, its settlement and
its ledger record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import grpc

from server.errors import GatewayError
from server.store.usage import UsageRecord, UsageStore

if TYPE_CHECKING:
    from server.auth import Principal
    from server.budget import Budgets, Reservation
    from server.engine import Run
    from server.ratelimit import Limiter

log = logging.getLogger(__name__)
RETRY_MAX_S = 5.0


class Ledger:
    def __init__(
        self,
        store: UsageStore | None,
        batch_size: int = 500,
        flush_interval_s: float = 0.5,
        max_buffered: int = 100_000,
    ) -> None:
        self.store = store
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_buffered = max_buffered
        self._buffer: deque[UsageRecord] = deque()
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.written = 0
        self.dropped = 0

    def start(self) -> None:
        if self.store is not None and self._task is None:
            self._task = asyncio.create_task(self._run(), name="ledger-flusher")

    def record(self, row: UsageRecord) -> None:
        """Buffers one record; never waits."""
        if self.store is None:
            return
        if len(self._buffer) >= self.max_buffered:
            self._buffer.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.error("ledger buffer full: %d records dropped so far", self.dropped)
        self._buffer.append(row)
        if len(self._buffer) >= self.batch_size:
            self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def pending_cost(self, key_id: str, since: float) -> float:
        """The cost of a key's records still in the buffer, since `since`."""
        return sum(
            r.total_cost_usd or 0.0 for r in self._buffer if r.key_id == key_id and r.ts >= since
        )

    async def flush(self) -> None:
        """Writes everything buffered now; raises when the database refuses."""
        async with self._flushing:
            while self._buffer:
                batch = [
                    self._buffer.popleft() for _ in range(min(self.batch_size, len(self._buffer)))
                ]
                try:
                    assert self.store is not None
                    await self.store.insert(batch)
                except BaseException:
                    self._buffer.extendleft(reversed(batch))
                    raise
                self.written += len(batch)

    async def _run(self) -> None:
        backoff = self.flush_interval_s
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), backoff)
            self._wake.clear()
            try:
                await self.flush()
            except Exception as exc:
                backoff = min(RETRY_MAX_S, backoff * 2)
                log.warning(
                    "ledger: cannot write %d records (%s); retrying in %.1fs",
                    len(self._buffer), type(exc).__name__, backoff,
                )  # fmt: skip
            else:
                backoff = self.flush_interval_s

    async def aclose(self, timeout_s: float = 15.0) -> None:
        """Stops the flusher and drains the buffer, retrying until `timeout_s`."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.store is None:
            return
        deadline = time.monotonic() + timeout_s
        delay = 0.1
        while self._buffer:
            try:
                await asyncio.wait_for(self.flush(), max(0.1, deadline - time.monotonic()))
            except Exception as exc:
                if time.monotonic() + delay >= deadline:
                    log.error("ledger: %d records lost at shutdown (%s)", len(self._buffer), exc)
                    return
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)
        log.info("ledger: drained; %d records written", self.written)


class Accounts:
    """Opens a Tab per request and finishes its settlements in the background."""

    def __init__(self, ledger: Ledger, limiter: Limiter, budgets: Budgets) -> None:
        self.ledger = ledger
        self.limiter = limiter
        self.budgets = budgets
        self._tasks: set[asyncio.Task[Any]] = set()

    def open(self, request_id: str, method: str) -> Tab:
        return Tab(self, request_id, method)

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("settlement failed: %r", task.exception())

    async def aclose(self) -> None:
        """Waits for settlements still running (before the ledger drains)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


class Tab:
    """One request's account, closed exactly once by `close`."""

    def __init__(self, accounts: Accounts, request_id: str, method: str) -> None:
        self.accounts = accounts
        self.request_id = request_id
        self.method = method
        self.started = time.time()
        self.ticket = uuid.uuid4().hex
        self.principal: Principal | None = None
        self.model = ""
        self.run: Run | None = None
        self.limited_tokens = False
        self.reservation: Reservation | None = None
        self._closed = False

    def close(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        usage = self.run.final_usage() if self.run is not None else None
        tokens = usage.total_tokens if usage is not None else 0
        cost = (
            usage.total_cost_usd if usage is not None and usage.HasField("total_cost_usd") else None
        )
        principal = self.principal
        if principal is None:
            return
        if self.limited_tokens:
            self.accounts.spawn(self.accounts.limiter.settle(principal.key_id, self.ticket, tokens))
        if self.reservation is not None:
            self.accounts.spawn(self.accounts.budgets.settle(self.reservation, cost or 0.0))
        status, reason = _status(error)
        run = self.run
        self.accounts.ledger.record(
            UsageRecord(
                ts=self.started,
                request_id=self.request_id,
                key_id=principal.key_id,
                key_name=principal.name,
                method=self.method,
                model=run.model.id if run is not None and run.upstream is not None else self.model,
                provider=run.upstream.id if run is not None and run.upstream is not None else "",
                prompt_tokens=usage.prompt_tokens if usage is not None else 0,
                completion_tokens=usage.completion_tokens if usage is not None else 0,
                total_tokens=tokens,
                input_cost_usd=_opt(usage, "input_cost_usd"),
                output_cost_usd=_opt(usage, "output_cost_usd"),
                cache_input_cost_usd=_opt(usage, "cache_input_cost_usd"),
                total_cost_usd=cost,
                latency_ms=round((time.time() - self.started) * 1000, 3),
                ttft_ms=_opt(usage, "ttft_ms"),
                status=status,
                error_reason=reason,
            )
        )


def _opt(usage: Any, name: str) -> float | None:
    return getattr(usage, name) if usage is not None and usage.HasField(name) else None


def _status(error: BaseException | None) -> tuple[str, str]:
    if error is None:
        return "OK", ""
    if isinstance(error, GatewayError):
        return error.code.name, error.reason
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED.name, "CANCELLED"
    return grpc.StatusCode.INTERNAL.name, "INTERNAL"
