"""OpenTelemetry tracing: off by default; on when an OTLP endpoint is configured with the
standard variables (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
with OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME... as the SDK reads them).

One span per call (`gateway.v1.ChatService/StreamChatCompletion`), a child of the
caller's W3C trace context (`traceparent` in HTTP headers or gRPC metadata; the facade
forwards it), with children for admission, routing, each upstream attempt and the
ledger write. Upstream HTTP calls carry the attempt's `traceparent`.

Off, nothing is wrapped: the middleware leaves the handlers as they are, and the spans
of the layers below (server/base/spans.py) are one shared no-op context manager.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from google.protobuf.descriptor import MethodDescriptor
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from server.base import spans
from server.base.call import Call
from server.base.pipeline import Middleware, StreamHandler, UnaryHandler

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

_provider: TracerProvider | None = None
enable = spans.enable
enabled = spans.enabled
span = spans.span


def configure_from_env() -> bool:
    """Turns tracing on when the standard OTLP variables name an endpoint."""
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if not (
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME", "model-gateway")}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    enable(provider)
    global _provider
    _provider = provider
    return True


def shutdown() -> None:
    """Sends the spans still batched (at exit)."""
    if _provider is not None:
        _provider.shutdown()


class Tracing(Middleware):
    """Opens the call's span, as a child of the caller's trace context."""

    def wrap_unary(self, method: MethodDescriptor, handler: UnaryHandler) -> UnaryHandler:
        tracer = spans.tracer()
        if tracer is None:
            return handler
        name = _span_name(method)

        async def unary(request: Any, call: Call) -> Any:
            span = _start(tracer, name, method, request, call)
            error: BaseException | None = None
            try:
                with trace.use_span(span, end_on_exit=False):
                    return await handler(request, call)
            except BaseException as exc:
                error = exc
                raise
            finally:
                # After the record closes, which the accounting middleware queued.
                asyncio.get_running_loop().call_soon(_finish, span, call, error)

        return unary

    def wrap_stream(self, method: MethodDescriptor, handler: StreamHandler) -> StreamHandler:
        tracer = spans.tracer()
        if tracer is None:
            return handler
        name = _span_name(method)

        async def stream(request: Any, call: Call) -> AsyncGenerator[Any, None]:
            span = _start(tracer, name, method, request, call)
            current = trace.set_span_in_context(span)
            chunks = handler(request, call)
            error: BaseException | None = None
            try:
                while True:
                    # The span is current only while the handler runs, never across a
                    # yield: the consumer may be another task.
                    token = otel_context.attach(current)
                    try:
                        chunk = await anext(chunks)
                    except StopAsyncIteration:
                        break
                    finally:
                        otel_context.detach(token)
                    yield chunk
            except BaseException as exc:
                error = exc
                raise
            finally:
                token = otel_context.attach(current)
                try:
                    await chunks.aclose()
                finally:
                    otel_context.detach(token)
                # After the record closes, which the accounting middleware queued.
                asyncio.get_running_loop().call_soon(_finish, span, call, error)

        return stream


def _span_name(method: MethodDescriptor) -> str:
    return f"{method.containing_service.full_name}/{method.name}"


def _start(tracer: Tracer, name: str, method: MethodDescriptor, request: Any, call: Call) -> Any:
    parent = propagate.extract(call.metadata)
    attributes: dict[str, Any] = {
        "rpc.system": "grpc",
        "rpc.service": method.containing_service.full_name,
        "rpc.method": method.name,
        "gateway.request_id": call.request_id,
    }
    model = getattr(request, "model", "")
    if model:
        attributes["gen_ai.request.model"] = model
    return tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes)


def _finish(span: Any, call: Call, error: BaseException | None) -> None:
    record = call.record.usage
    if record is not None:
        span.set_attribute("gateway.key_id", record.key_id)
        if record.provider:
            span.set_attribute("gen_ai.provider.name", record.provider)
            span.set_attribute("gen_ai.response.model", record.model)
            span.set_attribute("gen_ai.usage.input_tokens", record.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", record.completion_tokens)
        if record.total_cost_usd is not None:
            span.set_attribute("gateway.cost_usd", record.total_cost_usd)
    if error is not None:
        reason = getattr(error, "reason", type(error).__name__)
        span.set_attribute("error.type", reason)
        span.set_status(Status(StatusCode.ERROR, reason))
    span.end()
