"""One request's account, opened and closed by the accounting middleware.

A `Tab` holds who is calling, what the request reserved (tokens against the rate
limit, cost against the budget) and the generation it ran; when the request ends,
however it ends, the tab settles the reservations and writes one ledger record.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import AsyncGenerator, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from google.protobuf.descriptor import MethodDescriptor

from server.accounting.ledger import Ledger
from server.base.call import Call
from server.base.errors import status_of
from server.base.pipeline import Middleware, StreamHandler, UnaryHandler
from server.storage.usage import UsageRecord

if TYPE_CHECKING:
    from server.accounting.admission import Principal
    from server.accounting.budget import Budgets, Reservation
    from server.accounting.ratelimit import Limiter
    from server.application.catalog import Upstream
    from server.base.config import ModelConfig
    from server.base.costs import Cost
    from server.base.generation import TokenCounts

log = logging.getLogger(__name__)
# Rate-limit tickets: unique across processes (sharing one limiter) without a uuid each.
_TICKET_PREFIX = os.urandom(8).hex() + "-"
_tickets = itertools.count()


class Metered(Protocol):
    """What a tab reads from the work a call ran: a generation's Run or an
    EmbeddingRun."""

    upstream: Upstream | None

    @property
    def started(self) -> bool: ...

    @property
    def model(self) -> ModelConfig: ...

    def counts(self) -> TokenCounts: ...

    def cost(self) -> Cost | None: ...

    def ttft_ms(self) -> float | None: ...

    async def aclose(self) -> None:
        """Stops whatever still runs upstream."""
        ...


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
        self.ticket = f"{_TICKET_PREFIX}{next(_tickets):x}"
        self.principal: Principal | None = None
        self.model = ""
        self.run: Metered | None = None
        self.limited_tokens = False
        self.reservation: Reservation | None = None
        # Set for routed requests; `prompt` only when the operator records prompts.
        self.route_profile = ""
        self.difficulty: float | None = None
        self.prompt: str | None = None
        # The ledger record, once closed (None for a call never admitted): what the
        # metrics and the request log report, so they agree with the ledger.
        self.record: UsageRecord | None = None
        self._closed = False

    def close(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        principal = self.principal
        if principal is None:
            return  # never admitted: nothing reserved, nobody to bill
        run = self.run if self.run is not None and self.run.started else None
        counts = run.counts() if run is not None else None
        cost = run.cost() if run is not None else None
        tokens = counts.total_tokens if counts is not None else 0
        if self.limited_tokens:
            self.accounts.spawn(self.accounts.limiter.settle(principal.key_id, self.ticket, tokens))
        if self.reservation is not None:
            total = cost.total_usd if cost is not None else 0.0
            self.accounts.spawn(self.accounts.budgets.settle(self.reservation, total))
        status, reason = status_of(error)
        ttft = run.ttft_ms() if run is not None else None
        self.accounts.ledger.record(
            record := UsageRecord(
                ts=self.started,
                request_id=self.request_id,
                key_id=principal.key_id,
                key_name=principal.name,
                method=self.method,
                model=run.model.id if run is not None else self.model,
                provider=run.upstream.id if run is not None and run.upstream else "",
                prompt_tokens=counts.prompt_tokens if counts is not None else 0,
                completion_tokens=counts.completion_tokens if counts is not None else 0,
                total_tokens=tokens,
                input_cost_usd=cost.input_usd if cost is not None else None,
                output_cost_usd=cost.output_usd if cost is not None else None,
                cache_input_cost_usd=cost.cache_input_usd if cost is not None else None,
                total_cost_usd=cost.total_usd if cost is not None else None,
                latency_ms=round((time.time() - self.started) * 1000, 3),
                ttft_ms=None if ttft is None else round(ttft, 3),
                status=status,
                error_reason=reason,
                route_profile=self.route_profile,
                difficulty=self.difficulty,
                prompt=self.prompt,
            )
        )
        self.record = record


class Accounting(Middleware):
    """Opens a Tab for every call (`call.tab`) and closes it when the call ends, however
    it ends: the tab settles what the call reserved and writes its ledger record."""

    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    def wrap_unary(self, method: MethodDescriptor, handler: UnaryHandler) -> UnaryHandler:
        name = method.name

        async def unary(request: Any, call: Call) -> Any:
            tab = call.tab = self.accounts.open(call.request_id, name)
            try:
                response = await handler(request, call)
            except BaseException as exc:
                tab.close(exc)
                raise
            tab.close(None)
            return response

        return unary

    def wrap_stream(self, method: MethodDescriptor, handler: StreamHandler) -> StreamHandler:
        name = method.name

        async def stream(request: Any, call: Call) -> AsyncGenerator[Any, None]:
            tab = call.tab = self.accounts.open(call.request_id, name)
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
                    if tab.run is not None:
                        await tab.run.aclose()
                finally:
                    tab.close(error)

        return stream
