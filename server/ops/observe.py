"""The observing middleware: one `Outcome` per call, handed to the metrics, the request
log and the admin page's recent-routing feed.

It wraps outside the accounting middleware, so when a call ends its record is closed and
its ledger row built: the tokens, cost and status it reports are the ledger's own,
which is what lets the metrics reconcile with the ledger.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.v1.router_service_pb2 import RouteDecision
from google.protobuf.descriptor import MethodDescriptor

from server.application.pipeline.engine import Run
from server.application.pipeline.operation_run import OperationRun
from server.base.call import Call
from server.base.errors import Code, GatewayError, status_of
from server.base.pipeline import Middleware, StreamHandler, UnaryHandler
from server.base.record import GuardrailReport

log = logging.getLogger(__name__)
REQUEST_ID = "x-request-id"


@dataclass(slots=True)
class Outcome:
    """What one call did, as every observer reports it."""

    rpc: str
    request_id: str
    key_id: str
    model: str
    provider: str
    status: str
    reason: str
    # Whether an upstream answered: only then are tokens, ttft and cost meaningful.
    generated: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float
    ttft_s: float | None
    # Seconds spent waiting on upstreams; latency_s minus this is the gateway's own.
    upstream_s: float
    # (provider, cause) of each upstream given up on before one answered.
    failovers: list[tuple[str, str]] = field(default_factory=list)
    # (profile, model) when the router chose the model (Infer, StreamInfer).
    route: tuple[str, str] | None = None
    # Prompt tokens read from and written to the upstream's prompt cache.
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    # Cache affinity's outcome (hit, moved, miss), when it applied.
    affinity: str | None = None
    # The response cache's outcome (hit, miss), when it applied.
    response_cache: str | None = None
    # Prompt and completion, only when the operator asked for them in the log.
    prompt: Any = None
    completion: str | None = None
    # What the call's guardrails found and did, when any applied.
    guardrails: GuardrailReport | None = None
    # What the call is billed in and how many (the ledger's unit and units).
    unit: str = "tokens"
    units: float = 0.0

    @property
    def overhead_s(self) -> float:
        return max(0.0, self.latency_s - self.upstream_s)


Sink = Callable[[Outcome], None]


class Observer(Middleware):
    """Measures every call and hands its Outcome to each sink, in order. A sink that
    fails is logged and never fails the call."""

    def __init__(self, sinks: Sequence[Sink], with_text: Callable[[], bool] = lambda: False):
        self.sinks = list(sinks)
        self.with_text = with_text
        self.in_flight = 0

    def wrap_unary(self, method: MethodDescriptor, handler: UnaryHandler) -> UnaryHandler:
        name = method.name
        routed = "route" in method.output_type.fields_by_name

        async def unary(request: Any, call: Call) -> Any:
            started = time.perf_counter()
            # The id the log line carries goes back to the caller (gRPC metadata; the
            # REST facade sends it as the x-request-id header).
            call.response_metadata[REQUEST_ID] = call.request_id
            self.in_flight += 1
            error: BaseException | None = None
            route = None
            try:
                response = await handler(request, call)
                if routed and response.HasField("route"):
                    route = response.route
                return response
            except BaseException as exc:
                error = exc
                raise
            finally:
                self.in_flight -= 1
                # After the answer is out (the loop's next turn), off its latency; after
                # the record closes (the accounting middleware below queued it first).
                asyncio.get_running_loop().call_soon(self._emit, name, call, error, started, route)

        return unary

    def round_ended(self, call: Call) -> None:
        """Observes a model round that ended before its call did (a chain of rounds
        with MCP tool calls between them): its ledger row, as a call of its own."""
        elapsed = time.time() - call.record.started
        self._emit(call.record.method, call, None, time.perf_counter() - elapsed, None)

    def wrap_stream(self, method: MethodDescriptor, handler: StreamHandler) -> StreamHandler:
        name = method.name
        routed = "route" in method.output_type.fields_by_name

        async def stream(request: Any, call: Call) -> AsyncGenerator[Any, None]:
            started = time.perf_counter()
            call.response_metadata[REQUEST_ID] = call.request_id
            self.in_flight += 1
            error: BaseException | None = None
            route = None
            chunks = handler(request, call)
            try:
                async for chunk in chunks:
                    if routed and route is None and chunk.HasField("route"):
                        route = chunk.route
                    yield chunk
            except BaseException as exc:
                error = exc
                raise
            finally:
                # Closing the inner generator first closes the record (its ledger row).
                await chunks.aclose()
                self.in_flight -= 1
                # After the answer is out (the loop's next turn), off its latency; after
                # the record closes (the accounting middleware below queued it first).
                asyncio.get_running_loop().call_soon(self._emit, name, call, error, started, route)

        return stream

    def _emit(
        self,
        rpc: str,
        call: Call,
        error: BaseException | None,
        started: float,
        route: RouteDecision | None,
    ) -> None:
        try:
            outcome = self._outcome(rpc, call, error, time.perf_counter() - started, route)
            for sink in self.sinks:
                sink(outcome)
        except Exception:
            log.exception("observing request %s failed", call.request_id)

    def _outcome(
        self,
        rpc: str,
        call: Call,
        error: BaseException | None,
        elapsed: float,
        route: RouteDecision | None,
    ) -> Outcome:
        record = call.record.usage
        run = call.record.run
        started = run is not None and run.started
        if record is not None:
            status, reason = record.status, record.error_reason
        else:
            status, reason = status_of(error)
        outcome = Outcome(
            rpc=rpc,
            request_id=call.request_id,
            key_id=record.key_id if record is not None else "",
            model=record.model if record is not None else call.record.model,
            provider=record.provider if record is not None else "",
            status=status,
            reason=reason,
            generated=started,
            prompt_tokens=record.prompt_tokens if record is not None else 0,
            completion_tokens=record.completion_tokens if record is not None else 0,
            cost_usd=record.total_cost_usd if record is not None else None,
            latency_s=elapsed,
            ttft_s=(
                record.ttft_ms / 1000 if record is not None and record.ttft_ms is not None else None
            ),
            upstream_s=run.upstream_s if run is not None else 0.0,
            failovers=(
                [(p, cause(e)) for p, e in run.causes]
                if isinstance(run, Run | OperationRun)
                else []
            ),
            route=(route.profile, route.model) if route is not None else None,
            guardrails=call.record.guardrails,
            unit=record.unit if record is not None else "tokens",
            units=(record.units or 0.0) if record is not None else 0.0,
        )
        if isinstance(run, Run):
            outcome.affinity = run.affinity
            outcome.response_cache = run.response_cache
            if started and not run.response_cached:
                counts = run.counts()
                outcome.cached_tokens = counts.cached_tokens
                outcome.cache_write_tokens = counts.cache_write_tokens
        if isinstance(run, Run) and self.with_text():
            request = run.request
            outcome.prompt = (
                request.prompt
                if request.prompt is not None
                else [{"role": m.role, "content": m.content} for m in request.messages]
            )
            outcome.completion = run.generated_text if started else None
        return outcome


def cause(error: GatewayError) -> str:
    """Why an upstream was given up on, as a short label: circuit_open, timeout,
    connect, http_429, http_5xx, bad_answer, or the error's reason."""
    meta = error.metadata
    status = meta.get("upstream_status", "")
    if status == "429":
        return "http_429"
    if status.startswith("5"):
        return "http_5xx"
    if status:
        return "http_" + status
    message = error.message
    if "skipped, circuit" in message:
        return "circuit_open"
    if "timed out" in message or error.code is Code.DEADLINE_EXCEEDED:
        return "timeout"
    if "connect" in message:
        return "connect"
    if error.upstream_answered:
        return "bad_answer"
    return error.reason.lower()
