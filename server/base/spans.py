"""The tracer and the spans the layers below the pipeline open: upstream attempts
(dispatch) and the trace context sent upstream (the providers' HTTP client).

Tracing is off until `enable()` is given a tracer provider (server/ops/tracing.py does
it from the OTLP variables); off, `span()` and `attempt()` return one shared no-op
context manager and `inject()` does nothing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from opentelemetry import propagate
from opentelemetry.trace import Tracer

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

_tracer: Tracer | None = None
_NOTHING = contextlib.nullcontext()


def tracer() -> Tracer | None:
    return _tracer


def enabled() -> bool:
    return _tracer is not None


def enable(provider: TracerProvider | None) -> None:
    """Turns tracing on with `provider` (off with None). Gateways started afterwards
    are traced."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("model-gateway")


def span(name: str, **attributes: Any) -> contextlib.AbstractContextManager[Any]:
    """A child span of the current one, or nothing when tracing is off."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(name, attributes=attributes)


def attempt(provider: str, number: int) -> contextlib.AbstractContextManager[Any]:
    """One upstream attempt's span, up to its first event (or its failure)."""
    if _tracer is None:
        return _NOTHING
    attributes: dict[str, Any] = {"gen_ai.provider.name": provider, "gateway.attempt": number}
    return _tracer.start_as_current_span("gateway.upstream.attempt", attributes=attributes)


def inject(headers: Any) -> None:
    """Writes the current trace context (traceparent) into outgoing HTTP headers."""
    if _tracer is not None:
        propagate.inject(headers)


async def inject_into_request(request: Any) -> None:
    """An httpx request hook: upstream calls carry the current attempt's context."""
    inject(request.headers)
