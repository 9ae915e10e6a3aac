"""Dispatch: tries upstreams in order until one starts answering.

Failover happens only before the first event, for unary and streaming calls alike:
after it, the caller has text in hand and a failure ends the stream with an error.
One deadline bounds every attempt together.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from server.catalog import Upstream
from server.errors import AllProvidersFailed, DeadlineExceeded, GatewayError, UpstreamError
from server.generation import Event, GenerationRequest, TextDelta


async def open_stream(
    upstreams: Sequence[Upstream],
    request: GenerationRequest,
    deadline: float | None,
    subject: str,
) -> tuple[Upstream, AsyncIterator[Event]]:
    """Returns the first upstream that produced an event, with its whole event stream.

    Raises the upstream's own error when it is not retryable (the request is at fault),
    DeadlineExceeded when the deadline passes, and AllProvidersFailed otherwise."""
    causes: list[tuple[str, GatewayError]] = []
    for upstream in upstreams:
        if not upstream.config.enabled:
            continue
        events = aiter(upstream.provider.generate(request))
        try:
            first = await _next(events, deadline, upstream.id)
        except UpstreamError as exc:
            await _close(events)
            if not exc.retryable:
                raise
            causes.append((upstream.id, exc))
            continue
        except BaseException:
            await _close(events)
            raise
        return upstream, _chain(first, events, deadline, upstream.id)
    raise AllProvidersFailed.of(subject, causes)


async def _next(events: AsyncIterator[Event], deadline: float | None, provider: str) -> Event:
    try:
        async with asyncio.timeout_at(deadline):
            return await anext(events)
    except TimeoutError:
        raise DeadlineExceeded(
            f"the request deadline passed while waiting on {provider}", {"provider": provider}
        ) from None
    except StopAsyncIteration:
        raise UpstreamError(
            f"{provider}: the stream ended without a finish", {"provider": provider}
        ) from None


async def _chain(
    first: Event, events: AsyncIterator[Event], deadline: float | None, provider: str
) -> AsyncIterator[Event]:
    try:
        event = first
        while True:
            yield event
            if not isinstance(event, TextDelta):
                return
            event = await _next(events, deadline, provider)
    finally:
        # Closing the provider's generator cancels its upstream request.
        await _close(events)


async def _close(events: AsyncIterator[Event]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()

