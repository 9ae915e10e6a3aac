"""Dispatch: tries upstreams in order until one starts answering.

Failover happens only before the first event, for unary and streaming calls alike:
after it, the caller has text in hand and a failure ends the stream with an error
(never a silent stop). Before it, a retryable error (connect error, timeout, 429, 5xx,
a broken answer) may be retried on the same provider when its retry policy allows and
the pause (backoff, or the upstream's Retry-After) fits the deadline; otherwise the next
provider is tried. A request the upstream refused as malformed (UpstreamRejected) is
raised at once. A provider whose circuit is open is skipped without waiting.

One deadline bounds every attempt and pause together. When every provider fails, the
error lists each one with its cause, in the order tried.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

from server.application.pipeline.breaker import Permit
from server.application.pipeline.catalog import Upstream
from server.base import spans
from server.base.errors import AllProvidersFailed, DeadlineExceeded, GatewayError, UpstreamError
from server.base.generation import Event, Finished, GenerationRequest

Causes = list[tuple[str, GatewayError]]
# Starts one attempt on an upstream: its event stream (by default, a generation).
Start = Callable[[Upstream], AsyncIterator[Any]]


async def open_stream(
    upstreams: Sequence[Upstream],
    request: GenerationRequest | None,
    deadline: float | None,
    subject: str,
    start: Start | None = None,
    causes: Causes | None = None,
) -> tuple[Upstream, AsyncGenerator[Event, None]]:
    """Returns the first upstream that produced an event, with its whole event stream.
    `start` replaces the generation of `request` (an embedding call is a one-event
    stream).

    Raises the upstream's own error when it is not retryable (the request is at fault),
    DeadlineExceeded when the deadline passes, and AllProvidersFailed otherwise. Each
    upstream given up on is appended to `causes` (the failovers, for metrics)."""

    def generate(upstream: Upstream) -> AsyncIterator[Any]:
        assert request is not None
        return upstream.provider.generate(request)

    begin = start or generate
    causes = [] if causes is None else causes
    for upstream in upstreams:
        if not upstream.config.enabled:
            continue
        opened = await _attempts(upstream, begin, deadline, causes)
        if opened is not None:
            return upstream, opened
    failure = AllProvidersFailed.of(subject, causes)
    # The soonest Retry-After among the causes, so the caller learns when to come back.
    waits = [e.retry_after_s for _, e in causes if e.retry_after_s is not None]
    failure.retry_after_s = min(waits) if waits else None
    raise failure


async def _attempts(
    upstream: Upstream,
    start: Start,
    deadline: float | None,
    causes: Causes,
) -> AsyncGenerator[Event, None] | None:
    """Tries one upstream, retrying as its policy allows; None (a cause appended) when
    the next upstream should be tried."""
    attempt = 0
    while True:
        permit = upstream.breaker.try_acquire()
        if permit is None:
            causes.append((upstream.id, _skipped(upstream)))
            return None
        started = asyncio.get_running_loop().time()
        events = aiter(start(upstream))
        # One timer for the attempt's whole stream, its first event's wait included.
        watch = _Watch(deadline)
        try:
            with spans.attempt(upstream.id, attempt + 1):
                first = await _next(events, watch, upstream.id, causes)
        except UpstreamError as exc:
            watch.close()
            await _close(events)
            if not exc.retryable:
                upstream.breaker.release(permit)
                raise
            upstream.breaker.record_failure(permit)
            attempt += 1
            pause = upstream.retry_policy.pause(attempt, exc)
            if pause is None or not _fits(deadline, pause):
                causes.append((upstream.id, exc))
                return None
            await asyncio.sleep(pause)
            continue
        except BaseException:
            # Deadline passed, or the caller went away: nothing said about health.
            watch.close()
            await _close(events)
            upstream.breaker.release(permit)
            raise
        upstream.breaker.record_success(permit)
        upstream.ttft_ms.observe((asyncio.get_running_loop().time() - started) * 1000)
        return _chain(first, events, watch, upstream)


def _skipped(upstream: Upstream) -> UpstreamError:
    return UpstreamError(
        f"{upstream.id}: skipped, circuit {upstream.breaker.state.value}",
        {"provider": upstream.id},
    )


def _fits(deadline: float | None, pause: float) -> bool:
    return deadline is None or asyncio.get_running_loop().time() + pause < deadline


class _Watch:
    """The deadline of a stream's later events: one timer for the whole stream, which
    cancels the wait it finds under way (a timeout around each event costs a timer per
    event, a tenth of what relaying one costs)."""

    __slots__ = ("expired", "_waiting", "_timer")

    def __init__(self, deadline: float | None) -> None:
        self.expired = False
        self._waiting: asyncio.Task[Any] | None = None
        loop = asyncio.get_running_loop()
        self._timer = None if deadline is None else loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self.expired = True
        if self._waiting is not None:
            self._waiting.cancel()

    async def next(self, events: AsyncIterator[Event]) -> Event:
        if self.expired:
            raise TimeoutError
        task = self._waiting = asyncio.current_task()
        try:
            return await anext(events)
        except asyncio.CancelledError:
            # Ours when the deadline fired and nobody else cancelled too (as asyncio.timeout).
            if self.expired and task is not None and task.uncancel() == 0:
                raise TimeoutError from None
            raise
        finally:
            self._waiting = None

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


async def _next(
    events: AsyncIterator[Event], watch: _Watch, provider: str, causes: Causes
) -> Event:
    """A stream's first event, by the request's deadline."""
    try:
        return await watch.next(events)
    except TimeoutError:
        raise _deadline_passed(provider, causes) from None
    except StopAsyncIteration:
        raise _ended_early(provider) from None


def _deadline_passed(provider: str, causes: Causes) -> DeadlineExceeded:
    earlier = "; ".join(f"{name}: {err.message}" for name, err in causes)
    return DeadlineExceeded(
        f"the request deadline passed while waiting on {provider}"
        + (f" (tried before: {earlier})" if earlier else ""),
        {"provider": provider, "tried": ",".join([*(n for n, _ in causes), provider])},
    )


def _ended_early(provider: str) -> UpstreamError:
    return UpstreamError(
        f"{provider}: the stream ended without a finish",
        {"provider": provider},
        upstream_answered=True,
    )


async def _chain(
    first: Event, events: AsyncIterator[Event], watch: _Watch, upstream: Upstream
) -> AsyncGenerator[Event, None]:
    try:
        event = first
        while True:
            yield event
            if isinstance(event, Finished):
                return
            try:
                try:
                    event = await watch.next(events)
                except TimeoutError:
                    raise _deadline_passed(upstream.id, []) from None
                except StopAsyncIteration:
                    raise _ended_early(upstream.id) from None
            except UpstreamError as exc:
                # A stream broken after its first token counts against the provider.
                if exc.retryable:
                    upstream.breaker.record_failure(Permit(probe=False))
                raise
    finally:
        watch.close()
        # Closing the provider's generator cancels its upstream request.
        await _close(events)


async def _close(events: AsyncIterator[Event]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()
