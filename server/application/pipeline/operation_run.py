"""An operation in flight (any call that is not a text generation: embeddings, rerank,
moderation...): admission to the model, the guardrails, the reservation, dispatch with
failover, timing, and what it used in its unit.

It answers the ledger's questions (`started`, `counts`, `cost`, `billed`, `model`,
`provider_id`) as a generation's Run does, so the ledger, rate limits, budgets and
metrics treat every kind alike. A kind is an `Operation` (server/base/operation.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Generic, cast

from gateway.v1 import usage_pb2

from server.accounting.accounts import Accounts
from server.accounting.admission import check_model
from server.application.pipeline import dispatch
from server.application.pipeline.catalog import Upstream
from server.application.pipeline.state import Snapshot
from server.base import costs
from server.base.call import Call
from server.base.caller import Principal
from server.base.config import ModelConfig
from server.base.errors import InvalidArgument, UpstreamError
from server.base.generation import TokenCounts
from server.base.moderation import MODERATION, ModerationRequest, Moderations
from server.base.operation import Measure, Operation, RequestT, ResultT
from server.guardrails.moderation import Ask, moderate


def servers(
    kind: Operation[RequestT, ResultT], model: ModelConfig, upstreams: Sequence[Upstream]
) -> list[Upstream]:
    """The model's upstreams that serve `kind`; InvalidArgument naming `model` when the
    model does not declare it or none of its providers can."""
    able = [u for u in upstreams if kind.serves(u.provider)]
    if kind.name not in model.serves:
        reason = f"it declares {', '.join(model.serves) or 'none'} in its capabilities"
    elif not able:
        reason = f"none of its providers ({', '.join(u.id for u in upstreams)}) can"
    else:
        return able
    raise InvalidArgument(
        f"model {model.id!r} does not support {kind.name}: {reason}",
        {"field": "model", "model": model.id, "capability": kind.name},
    )


class OperationRun(Generic[RequestT, ResultT]):
    """One operation on the first upstream that answers; `result` once `open()` returned."""

    # Operations are not kept in the response cache.
    response_cached = False

    def __init__(
        self,
        kind: Operation[RequestT, ResultT],
        upstreams: Sequence[Upstream],
        request: RequestT,
        deadline: float | None,
    ) -> None:
        self.kind = kind
        self.request = request
        self._upstreams = upstreams
        self._deadline = deadline
        self._clock = costs.Stopwatch()
        self.upstream: Upstream | None = None
        self.result: ResultT | None = None
        # Upstreams given up on before one answered (the failovers, for metrics).
        self.causes: dispatch.Causes = []
        self.upstream_s = 0.0
        self._measure: Measure | None = None

    @property
    def model(self) -> ModelConfig:
        assert self.upstream is not None, "open() first"
        return self.upstream.model

    @property
    def provider_id(self) -> str:
        return self.upstream.id if self.upstream is not None else ""

    @property
    def started(self) -> bool:
        return self.upstream is not None

    async def aclose(self) -> None:
        """Nothing runs once open() has returned: its one answer is closed there."""

    async def open(self, subject: str) -> ResultT:
        """Runs the call on the first upstream that answers with a whole result."""
        started = time.perf_counter()
        try:
            self.upstream, answers = await dispatch.open_stream(
                self._upstreams, None, self._deadline, subject, self._start, self.causes
            )
            # dispatch types its streams as a generation's events; this one is the kind's.
            result = cast(ResultT, await anext(answers))
            await answers.aclose()
        finally:
            self.upstream_s += time.perf_counter() - started
        self.result = result
        self._clock.mark_first_token()
        return result

    def _start(self, upstream: Upstream) -> AsyncIterator[ResultT]:
        return self._one(upstream)

    async def _one(self, upstream: Upstream) -> AsyncIterator[ResultT]:
        """The call as a one-event stream, so dispatch fails over as for text."""
        result = await self.kind.call(upstream.provider, self.request)
        if (wrong := self.kind.malformed(self.request, result)) is not None:
            raise UpstreamError(
                f"{upstream.id}: malformed answer ({wrong})",
                {"provider": upstream.id},
                upstream_answered=True,
            )
        yield result

    def measure(self) -> Measure:
        """What the call used (the answer's report, else the kind's estimate)."""
        if self._measure is None:
            measured = self.kind.measure(self.request, self.result)
            if self.result is None:
                return measured
            self._measure = measured
        return self._measure

    def counts(self) -> TokenCounts:
        return self.measure().counts

    def cost(self, batch_factor: float | None = None) -> costs.Cost | None:
        return costs.billed(self.measure(), costs.batch_price(self.model.price, batch_factor)).cost

    def billed(self) -> tuple[str, float]:
        bill = costs.billed(self.measure(), self.model.price)
        return bill.unit, bill.quantity

    def ttft_ms(self) -> float | None:
        return None  # nothing streams: latency alone describes an operation

    def usage(self) -> usage_pb2.Usage:
        return costs.operation_usage(self.measure(), self.model.price, self._clock.elapsed_ms())


async def operate(
    accounts: Accounts,
    state: Snapshot,
    call: Call,
    principal: Principal,
    model_name: str,
    kind: Operation[RequestT, ResultT],
    request: RequestT,
) -> OperationRun[RequestT, ResultT]:
    """Runs one operation for an identified caller: the model's admission, its texts
    past the call's guardrails, its tokens and worst cost reserved against the key's
    limits and every level's budget, then the call on the model's first upstream that
    serves the kind and answers. The call's record meters it when the call ends."""
    call.record.asked_for(model_name)
    model = state.catalog.model(model_name)
    check_model(principal, model.id)
    upstreams = servers(kind, model, state.catalog.upstreams[model.id])
    guard = state.guardrails.guard(principal, [model], call.metadata, True, call.response_metadata)
    if guard is not None:
        call.record.guardrails = guard
        texts = kind.texts(request)
        if guard.slow:  # a model's scan: off the event loop
            scanned = await asyncio.to_thread(guard.texts, texts)
        else:
            scanned = guard.texts(texts)
        request = kind.with_texts(request, scanned)
        if guard.moderators and kind is not MODERATION:  # a moderation asks itself
            said = tuple(t for t in scanned if isinstance(t, str))
            await moderate(guard, said, moderation_of(state, call.deadline))
        guard.report()
    estimate = kind.measure(request, None)
    await accounts.reserve(
        call,
        estimate.counts.total_tokens,
        lambda: _worst(costs.billed(estimate, model.price).cost),
    )
    run = OperationRun(kind, upstreams, request, call.deadline)
    call.record.ran(run)
    await run.open(f"model {model.id}")
    return run


def moderation_of(state: Snapshot, deadline: float | None) -> Ask:
    """How a moderation guardrail asks its model (server/guardrails/moderation.py): on
    the model's providers that moderate, in order, within the guarded call's deadline.
    Neither admitted nor billed apart: it is part of the call it guards."""

    async def ask(model_id: str, request: ModerationRequest) -> Moderations:
        model = state.catalog.model(model_id)
        upstreams = servers(MODERATION, model, state.catalog.upstreams[model.id])
        return await OperationRun(MODERATION, upstreams, request, deadline).open(
            f"model {model.id}"
        )

    return ask


def _worst(cost: costs.Cost | None) -> float:
    return 0.0 if cost is None else cost.total_usd
