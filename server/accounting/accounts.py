"""Each call's account: the explicit steps a handler takes (admit, reserve) and the
accounting middleware that opens and closes the call's record.

A handler admits its caller (`identify` or `admit`) and, before it runs anything that
costs, reserves it (`reserve`: tokens against the rate limit, the worst-case cost against
the budget). When the call ends, however it ends, the middleware closes the record: the
reservations settle to what the call really used and the ledger gets one row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from google.protobuf.descriptor import MethodDescriptor

from server.accounting.admission import Admission, KeyRing
from server.accounting.alerts import BudgetAlerts
from server.accounting.budget import Budgets, exhausted
from server.accounting.ledger import Ledger
from server.accounting.traffic import MemoryInFlight, Traffic
from server.base.call import Call
from server.base.caller import Principal, Reservation
from server.base.config import BudgetAlertsConfig, KeyKind, ModelConfig, TrafficConfig
from server.base.costs import Cost
from server.base.errors import (
    Cancelled,
    GatewayError,
    RateLimited,
    ShuttingDown,
    StorageUnavailable,
    UpstreamError,
    UpstreamRejected,
    status_of,
)
from server.base.generation import TokenCounts
from server.base.pipeline import Middleware, StreamHandler, UnaryHandler
from server.base.record import UsageRecord

log = logging.getLogger(__name__)
# The counts of a call no upstream answered.
NO_TOKENS = TokenCounts(0, 0)
# The response header saying how long the call waited for room (limits, slots).
QUEUE_HEADER = "x-gateway-queue-ms"
# How long a read of spend waits for the settlements of the calls answered before it.
SETTLED_TIMEOUT_S = 2.0


class Accounts:
    """Admission, rate limits, budgets and the ledger, as the handlers and the
    accounting middleware use them. Settlements finish in the background."""

    def __init__(
        self,
        admission: Admission,
        ledger: Ledger,
        budgets: Budgets,
        traffic: Traffic | None = None,
        alerts: BudgetAlerts | None = None,
    ) -> None:
        self.admission = admission
        self.limiter = admission.limiter
        self.ledger = ledger
        self.budgets = budgets
        self.traffic = traffic or Traffic(MemoryInFlight(), TrafficConfig)
        self.alerts = alerts or BudgetAlerts(budgets, BudgetAlertsConfig)
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- the handlers' steps ---------------------------------------------------------

    async def identify(self, call: Call, kind: KeyKind, keys: KeyRing) -> Principal:
        """Authenticates the caller with a key of `kind` and records who it is. A batch
        line runs as its batch's key, which the batch worker found by its id."""
        if call.record.batch_id and call.record.principal is not None:
            return call.record.principal
        principal = await self.admission.identify(call.metadata, kind, keys)
        call.record.principal = principal
        return principal

    async def admit(self, call: Call, kind: KeyKind, keys: KeyRing) -> Principal:
        """Authenticates and counts a request that generates nothing."""
        principal = await self.identify(call, kind, keys)
        await self.admission.limit(principal, 0, call.record.ticket, call.response_metadata)
        return principal

    async def check(self, call: Call, kind: KeyKind, keys: KeyRing) -> Principal:
        """Authenticates and counts a request without billing it to the key: it leaves
        no ledger row (key management, usage reports)."""
        principal = await self.admission.identify(call.metadata, kind, keys)
        await self.admission.limit(principal, 0, call.record.ticket, call.response_metadata)
        return principal

    async def count_request(self, call: Call, least_cost: float) -> None:
        """Counts the identified caller's request against its request limit and checks
        that its budget can cover `least_cost` (what the request costs whatever stored
        state it brings in), before the handler reads that state on its behalf: a key
        refused costs no storage read. `reserve` then counts only the tokens."""
        record = call.record
        principal = _identified(record.principal, "count_request")
        await self._limit(call, principal, 0, (True, False))
        record.request_counted = True
        for spec in principal.budgets:
            spent, reserved = await self.budgets.status(spec)
            if spent >= spec.limit_usd or spent + reserved + least_cost > spec.limit_usd:
                raise exhausted(spec, spent, reserved, least_cost)

    async def reserve(self, call: Call, tokens: int, max_cost: Callable[[], float]) -> None:
        """Counts `tokens` against the identified caller's rate limits and reserves
        `max_cost()` against the budget of every level above it and its own, in one step
        (computed only when some level has a budget)."""
        record = call.record
        principal = _identified(record.principal, "reserve")
        count = (not record.request_counted, True)
        await self._limit(call, principal, tokens, count)
        record.limited_tokens = any(limit[4] for limit in principal.rate_limits)
        record.holds, waited = await self.traffic.enter(
            principal, record.model, record.ticket, call.deadline, batch=bool(record.batch_id)
        )
        record.queue_s += waited
        if record.queue_s:
            call.response_metadata[QUEUE_HEADER] = str(round(record.queue_s * 1000))
        if specs := principal.budgets:
            record.reservations = await self.budgets.reserve_all(specs, max_cost())

    async def _limit(
        self, call: Call, principal: Principal, tokens: int, count: tuple[bool, bool]
    ) -> None:
        """Counts the call against its rate limits, waiting for room when its key, team or
        model sets `max_wait_s` (the wait is recorded in `queue_ms`)."""
        record = call.record

        async def attempt() -> None:
            await self.admission.limit(
                principal, tokens, record.ticket, call.response_metadata, count
            )

        record.queue_s += await self.traffic.wait_out(
            attempt, principal, record.model, call.deadline
        )

    async def hold(
        self, principal: Principal, ticket: str, response_metadata: dict[str, str], cost: float
    ) -> list[Reservation]:
        """Counts one request of work that is not a generation (an MCP tool call) against
        the principal's rate limits and reserves its `cost` against every level's budget
        (none when no level has one). Settle it with `release`."""
        await self.admission.limit(principal, 0, ticket, response_metadata)
        if specs := principal.budgets:
            return await self.budgets.reserve_all(specs, cost)
        return []

    def release(self, reservations: list[Reservation], actual: float) -> None:
        """Settles what `hold` reserved to what the work cost, in the background."""
        if reservations:
            self._spawn(self.budgets.settle_all(reservations, max(0.0, actual)))

    async def budget_left(self, principal: Principal) -> float | None:
        """What the key may still spend this period, the tightest level's room; None
        when no level has a budget."""
        left = None
        for spec in principal.budgets:
            spent, reserved = await self.budgets.status(spec)
            room = spec.limit_usd - spent - reserved
            left = room if left is None else min(left, room)
        return left

    # -- the middleware's ------------------------------------------------------------

    def close(self, call: Call, error: BaseException | None) -> None:
        """Settles what the call reserved and writes its ledger row, exactly once."""
        record = call.record
        if record.closed:
            return
        record.closed = True
        principal = record.principal
        if principal is None:
            return  # never admitted: nothing reserved, nobody to bill
        run = record.answered
        counts = run.counts() if run is not None else NO_TOKENS
        factor = record.price_factor if record.batch_id else None
        cost = run.cost(factor) if run is not None else None
        if record.limited_tokens:
            for _, account, _, _, tpm in principal.rate_limits:
                if tpm:
                    self._spawn(self.limiter.settle(account, record.ticket, counts.total_tokens))
        if record.holds:
            self._spawn(self.traffic.leave(record.holds, record.ticket))
        if record.reservations:
            total = cost.total_usd if cost is not None else 0.0
            self._spawn(self._settle(principal, record.reservations, total))
        if record.batch_id and run is None and passing(error):
            return  # the batch runs the line again: one row per line, when it ends
        status, reason = status_of(error if error is not None else record.failure)
        ttft = run.ttft_ms() if run is not None else None
        unit, units = run.billed() if run is not None else ("tokens", None)
        record.usage = UsageRecord(
            ts=record.started,
            request_id=call.request_id,
            key_id=principal.key_id,
            key_name=principal.name,
            method=record.method,
            model=run.model.id if run is not None else record.model,
            provider=run.provider_id if run is not None else "",
            prompt_tokens=counts.prompt_tokens,
            completion_tokens=counts.completion_tokens,
            total_tokens=counts.total_tokens,
            input_cost_usd=cost.input_usd if cost is not None else None,
            output_cost_usd=cost.output_usd if cost is not None else None,
            cache_input_cost_usd=cost.cache_input_usd if cost is not None else None,
            total_cost_usd=cost.total_usd if cost is not None else None,
            latency_ms=round((time.time() - record.started) * 1000, 3),
            ttft_ms=None if ttft is None else round(ttft, 3),
            status=status,
            error_reason=reason,
            route_profile=record.route_profile,
            difficulty=record.difficulty,
            prompt=record.prompt,
            tags=",".join(record.tags),
            cached_tokens=counts.cached_tokens,
            cache_write_tokens=counts.cache_write_tokens,
            cache_write_1h_tokens=counts.cache_write_1h_tokens,
            reasoning_tokens=counts.reasoning_tokens,
            cache_write_cost_usd=cost.cache_write_usd if cost is not None else None,
            response_cached=run is not None and run.response_cached,
            response_id=record.response_id,
            team_id=principal.team_id,
            org_id=principal.org_id,
            user_id=principal.user_id,
            unit=unit,
            units=units,
            queue_ms=round(record.queue_s * 1000, 3),
            batch_id=record.batch_id,
            custom_id=record.custom_id,
            audio_input_tokens=counts.audio_input_tokens,
            audio_output_tokens=counts.audio_output_tokens,
            audio_input_cost_usd=cost.audio_input_usd if cost is not None else None,
            audio_output_cost_usd=cost.audio_output_usd if cost is not None else None,
            cached_audio_tokens=counts.cached_audio_tokens,
        )
        self.ledger.record(record.usage)
        for hook in record.after_close:
            hook()

    async def bill_handed_line(
        self, principal: Principal, batch_id: str, custom_id: str, model: ModelConfig,
        provider_id: str, method: str, counts: TokenCounts | None, cost: Cost | None,
        status_code: int, request_id: str,
    ) -> None:  # fmt: skip
        """The ledger row of a line a provider's batch API ran (a batch handed over),
        and its cost charged to every level's budget. The database takes one row per
        line: a second, after a crash, is refused."""
        used = counts or NO_TOKENS
        total = cost.total_usd if cost is not None else None
        # The budgets' accounts are loaded before the row is written: an account loaded
        # after would count the row (the ledger's buffer is read) and its charge again.
        held: list[Reservation] = []
        if total and principal.budgets:
            with contextlib.suppress(GatewayError):  # spent past the budget: still billed
                held = await self.budgets.reserve_all(principal.budgets, 0.0)
        self.ledger.record(UsageRecord(
            ts=time.time(), request_id=request_id, key_id=principal.key_id,
            key_name=principal.name, method=method, model=model.id, provider=provider_id,
            prompt_tokens=used.prompt_tokens, completion_tokens=used.completion_tokens,
            total_tokens=used.total_tokens,
            input_cost_usd=cost.input_usd if cost is not None else None,
            output_cost_usd=cost.output_usd if cost is not None else None,
            cache_input_cost_usd=cost.cache_input_usd if cost is not None else None,
            total_cost_usd=total, latency_ms=0.0, ttft_ms=None,
            status=_grpc_status(status_code),
            cached_tokens=used.cached_tokens, cache_write_tokens=used.cache_write_tokens,
            cache_write_1h_tokens=used.cache_write_1h_tokens,
            reasoning_tokens=used.reasoning_tokens,
            cache_write_cost_usd=cost.cache_write_usd if cost is not None else None,
            team_id=principal.team_id, org_id=principal.org_id, user_id=principal.user_id,
            units=float(used.total_tokens) if counts is not None else None,
            batch_id=batch_id, custom_id=custom_id,
        ))  # fmt: skip
        if held and total:
            await self._settle(principal, held, total)

    async def _settle(
        self, principal: Principal, reservations: list[Reservation], total: float
    ) -> None:
        """Settles a call's reservations, then checks its budgets' alert thresholds
        (in a task of the alerts' own: reads of spend do not wait for it)."""
        spent = await self.budgets.settle_all(reservations, max(0.0, total))
        self.alerts.after(principal, [r.spec for r in reservations], spent)

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("settlement failed: %r", task.exception())

    async def settled(self, timeout_s: float = SETTLED_TIMEOUT_S) -> None:
        """Returns once the settlements of every call answered so far have run, so a
        read of spend or reservations that follows an answer sees it; or after
        `timeout_s`, when a store is slow (the read then shows them reserved)."""
        deadline = time.monotonic() + timeout_s
        while self._tasks and (left := deadline - time.monotonic()) > 0:
            # asyncio.wait: a caller gone does not cancel the settlements.
            await asyncio.wait(list(self._tasks), timeout=left)

    async def aclose(self, drain_timeout_s: float) -> None:
        """Waits for settlements still running, then drains the ledger."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.alerts.aclose()
        await self.ledger.aclose(drain_timeout_s)


def passing(error: BaseException | None) -> bool:
    """Whether a failure passes if the work is tried again later (a rate limit, an
    upstream or storage away, a gateway stopping), as a batch line is."""
    if isinstance(error, RateLimited | StorageUnavailable | ShuttingDown | Cancelled):
        return True
    return isinstance(error, UpstreamError) and not isinstance(error, UpstreamRejected)


def _identified(principal: Principal | None, step: str) -> Principal:
    if principal is None:
        raise RuntimeError(f"{step}() before the caller was identified")
    return principal


class Accounting(Middleware):
    """Opens every call's record and closes it when the call ends, however it ends.

    With a spool the row is on disk before the answer goes out (a worker that dies
    after answering loses no row), so the record closes before the handler returns.
    Without one, nothing needs it before the answer: the record closes in the loop's
    next turn, just after the answer is written, off the call's latency."""

    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    def _closer(self) -> Callable[[Call, BaseException | None], None]:
        close = self.accounts.close
        if self.accounts.ledger.spool is not None:
            return close

        def after_the_answer(call: Call, error: BaseException | None) -> None:
            asyncio.get_running_loop().call_soon(close, call, error)

        return after_the_answer

    def wrap_unary(self, method: MethodDescriptor, handler: UnaryHandler) -> UnaryHandler:
        name = method.name
        close = self._closer()

        async def unary(request: Any, call: Call) -> Any:
            call.record.open(name)
            try:
                response = await handler(request, call)
            except BaseException as exc:
                close(call, exc)
                raise
            close(call, None)
            return response

        return unary

    def wrap_stream(self, method: MethodDescriptor, handler: StreamHandler) -> StreamHandler:
        name = method.name
        close = self._closer()

        async def stream(request: Any, call: Call) -> AsyncGenerator[Any, None]:
            call.record.open(name, streaming=True)
            error: BaseException | None = None
            chunks = handler(request, call)
            try:
                async for chunk in chunks:
                    yield chunk
            except BaseException as exc:
                error = exc
                raise
            finally:
                # A caller gone between chunks closes this generator; close the ones
                # below it and the upstream call now, not when the collector finds them.
                try:
                    await chunks.aclose()
                    # The call's latest record: a chain of rounds has one per round.
                    if (run := call.record.run) is not None:
                        await run.aclose()
                finally:
                    close(call, error)

        return stream


def _grpc_status(http_status: int) -> str:
    """A line's HTTP status as the ledger names outcomes."""
    if http_status == 200:
        return "OK"
    return "INVALID_ARGUMENT" if 400 <= http_status < 500 else "UNAVAILABLE"
