"""Dispatch without a transport: upstreams tried in order, retries and their pauses
within the deadline, circuit breakers told exactly what each attempt said about its
provider, and the error a caller gets when every upstream failed.

The providers are scripted stand-ins of the Provider protocol (what an adapter does
over HTTP is tested against fake upstreams elsewhere): each attempt plays the next
script, a list of events with, optionally, an error raised before or after them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from server.application.pipeline import dispatch
from server.application.pipeline.breaker import Breaker, State
from server.application.pipeline.catalog import Upstream
from server.base.config import ModelConfig, ProviderConfig
from server.base.errors import (
    AllProvidersFailed,
    DeadlineExceeded,
    GatewayError,
    UpstreamError,
    UpstreamRejected,
)
from server.base.generation import (
    NO_RETRY,
    Event,
    Finished,
    GenerationRequest,
    Message,
    RetryPolicy,
    TextDelta,
)

REQUEST = GenerationRequest(messages=(Message("user", "hi"),))
MODEL = ModelConfig(
    id="m",
    owned_by="test",
    created=0,
    providers=[ProviderConfig(id="p", type="primary", adapter="simulated")],
)
DONE = Finished("stop")


@dataclass
class Attempt:
    events: list[Event] = field(default_factory=list)
    # Raised after `events` (before the first one when `events` is empty).
    error: BaseException | None = None
    # Seconds to wait before each event.
    delay_s: float = 0.0


@dataclass
class Scripted:
    """A provider that plays one Attempt per call, and notes how each call ended."""

    scripts: list[Attempt]
    retry_policy: RetryPolicy = NO_RETRY
    capabilities: frozenset[Any] = frozenset()
    calls: int = 0
    closed: int = 0
    requests: list[GenerationRequest] = field(default_factory=list)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        attempt = self.scripts[min(self.calls, len(self.scripts) - 1)]
        self.calls += 1
        self.requests.append(request)
        try:
            for event in attempt.events:
                if attempt.delay_s:
                    await asyncio.sleep(attempt.delay_s)
                yield event
            if attempt.error is not None:
                if attempt.delay_s:
                    await asyncio.sleep(attempt.delay_s)
                raise attempt.error
        finally:
            self.closed += 1

    async def aclose(self) -> None:
        return None


def upstream(name: str, *scripts: Attempt, enabled: bool = True, threshold: int = 3,
             policy: RetryPolicy = NO_RETRY) -> Upstream:  # fmt: skip
    config = ProviderConfig(id=name, type="primary", adapter="simulated", enabled=enabled)
    provider = Scripted(list(scripts), retry_policy=policy)
    return Upstream(config, provider, MODEL, Breaker(failure_threshold=threshold, cooldown_s=60))


def fails(message: str = "down", **kw: Any) -> Attempt:
    return Attempt(error=UpstreamError(message, {"provider": "x"}, **kw))


def answers(*texts: str) -> Attempt:
    return Attempt([*(TextDelta(t) for t in texts), DONE])


def scripted(u: Upstream) -> Scripted:
    assert isinstance(u.provider, Scripted)
    return u.provider


async def run(upstreams: list[Upstream], deadline_in: float | None = 5.0,
              causes: list[Any] | None = None) -> tuple[Upstream, list[Event]]:  # fmt: skip
    loop = asyncio.get_running_loop()
    deadline = None if deadline_in is None else loop.time() + deadline_in
    chosen, events = await dispatch.open_stream(upstreams, REQUEST, deadline, "model m",
                                                causes=causes)  # fmt: skip
    return chosen, [e async for e in events]


async def test_the_first_upstream_that_answers_is_used_and_its_health_recorded():
    a = upstream("a", answers("x", "y"))
    b = upstream("b", answers("other"))
    a.breaker.record_failure(a.breaker.try_acquire())  # type: ignore[arg-type]
    chosen, events = await run([a, b])
    assert chosen is a and events == [TextDelta("x"), TextDelta("y"), DONE]
    assert scripted(b).calls == 0
    assert a.breaker._failures == 0, "a success resets the failure count"
    assert a.observed_ttft_ms is not None and a.observed_ttft_ms >= 0
    assert scripted(a).closed == 1
    assert scripted(a).requests == [REQUEST], "the caller's request, as it came"


async def test_time_to_first_token_is_measured_from_the_attempts_start():
    a = upstream("a", Attempt([TextDelta("x"), DONE], delay_s=0.05))
    await run([a])
    assert a.observed_ttft_ms is not None and 50 <= a.observed_ttft_ms < 90


async def test_a_retryable_failure_moves_on_and_counts_against_the_provider():
    a, b = upstream("a", fails("a broke")), upstream("b", answers("from b"))
    causes: list[Any] = []
    chosen, events = await run([a, b], causes=causes)
    assert chosen is b and events == [TextDelta("from b"), DONE]
    assert [(name, err.message) for name, err in causes] == [("a", "a broke")]
    assert a.breaker._failures == 1 and b.breaker._failures == 0
    assert scripted(a).closed == 1, "the failed attempt's generator is closed"


async def test_a_request_the_upstream_refused_is_raised_at_once_and_counts_for_nothing():
    refused = UpstreamRejected("bad request", {"provider": "a"})
    a, b = upstream("a", Attempt(error=refused), threshold=1), upstream("b", answers("b"))
    with pytest.raises(UpstreamRejected) as raised:
        await run([a, b])
    assert raised.value is refused
    assert scripted(b).calls == 0
    assert a.breaker.state is State.CLOSED and a.breaker._failures == 0


async def test_a_disabled_upstream_is_skipped_without_a_cause():
    a, b = upstream("a", answers("a"), enabled=False), upstream("b", answers("b"))
    causes: list[Any] = []
    chosen, _ = await run([a, b], causes=causes)
    assert chosen is b and scripted(a).calls == 0 and causes == []


async def test_an_open_circuit_is_skipped_with_a_cause_naming_it():
    a, b = upstream("a", answers("a"), threshold=1), upstream("b", answers("b"))
    a.breaker.record_failure(a.breaker.try_acquire())  # type: ignore[arg-type]
    causes: list[Any] = []
    chosen, _ = await run([a, b], causes=causes)
    assert chosen is b and scripted(a).calls == 0
    ((name, error),) = causes
    assert name == "a" and isinstance(error, UpstreamError)
    assert error.message == "a: skipped, circuit open"
    assert error.metadata == {"provider": "a"} and error.retryable


async def test_every_upstream_failing_lists_each_in_order_with_the_soonest_retry_after():
    a = upstream("a", fails("a: HTTP 429", retry_after_s=30))
    b = upstream("b", fails("b: HTTP 500", upstream_answered=True))
    c = upstream("c", fails("c: HTTP 429", retry_after_s=4))
    with pytest.raises(AllProvidersFailed) as raised:
        await run([a, b, c])
    error = raised.value
    assert [name for name, _ in error.causes] == ["a", "b", "c"]
    assert error.message == (
        "all providers of model m failed (a: HTTP 429; b: HTTP 500; c: HTTP 429)"
    )
    assert error.metadata == {"subject": "model m", "tried": "a,b,c"}
    assert error.retry_after_s == 4
    assert error.upstream_answered and not error.retryable
    with pytest.raises(AllProvidersFailed) as none_said:
        await run([upstream("d", fails()), upstream("e", fails())])
    assert none_said.value.retry_after_s is None
    # An error that does not name its provider is named by it.
    assert none_said.value.message == "all providers of model m failed (d: down; e: down)"
    assert not none_said.value.upstream_answered
    with pytest.raises(AllProvidersFailed) as nothing:
        await run([])
    assert nothing.value.message == "all providers of model m failed (none available)"


async def test_retries_on_the_same_provider_until_its_policy_is_spent():
    policy = RetryPolicy(max_retries=2, backoff_s=0.001)
    a = upstream("a", fails(), fails(), answers("third time"), policy=policy, threshold=10)
    b = upstream("b", answers("b"))
    chosen, events = await run([a, b])
    assert chosen is a and events[0] == TextDelta("third time")
    assert scripted(a).calls == 3 and scripted(b).calls == 0
    # Each failed attempt counted, then the success reset the count.
    assert a.breaker._failures == 0
    spent = upstream("s", fails(), fails(), fails(), answers("late"), policy=policy,
                     threshold=10)  # fmt: skip
    chosen, _ = await run([spent, upstream("t", answers("t"))])
    assert chosen.id == "t" and scripted(spent).calls == 3


async def test_an_upstreams_retry_after_is_waited_for_when_it_fits():
    policy = RetryPolicy(max_retries=1, backoff_s=0, max_retry_after_s=1)
    a = upstream("a", fails(retry_after_s=0.3), answers("a"), policy=policy)
    loop = asyncio.get_running_loop()
    started = loop.time()
    chosen, _ = await run([a, upstream("b", answers("b"))])
    assert chosen is a and 0.3 <= loop.time() - started < 0.6


async def test_a_pause_that_would_pass_the_deadline_moves_on_at_once():
    policy = RetryPolicy(max_retries=1, backoff_s=0, max_retry_after_s=10)
    a = upstream("a", fails(retry_after_s=2), answers("a"), policy=policy)
    b = upstream("b", answers("b"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    chosen, _ = await run([a, b], deadline_in=1.0)
    assert chosen is b and loop.time() - started < 0.5 and scripted(a).calls == 1
    # Without a deadline every pause fits.
    c = upstream("c", fails(retry_after_s=0.05), answers("c"), policy=policy)
    chosen, _ = await run([c], deadline_in=None)
    assert chosen is c and scripted(c).calls == 2


def test_fits_is_strictly_before_the_deadline():
    async def check() -> None:
        now = asyncio.get_running_loop().time()
        assert dispatch._fits(None, 1e9)
        assert dispatch._fits(now + 10, 1)
        assert not dispatch._fits(now + 1, 5)
        assert not dispatch._fits(now - 1, 0)

    asyncio.run(check())


async def test_the_deadline_passing_before_a_first_event_names_what_was_tried():
    slow = Attempt([DONE], delay_s=5)
    a, z = upstream("a", fails("a: cannot connect")), upstream("z", fails("z: HTTP 503"))
    b = upstream("b", slow)
    with pytest.raises(DeadlineExceeded) as raised:
        await run([a, z, b], deadline_in=0.2)
    error = raised.value
    assert error.message == (
        "the request deadline passed while waiting on b"
        " (tried before: a: a: cannot connect; z: z: HTTP 503)"
    )
    assert error.metadata == {"provider": "b", "tried": "a,z,b"}
    # The deadline says nothing about b's health.
    assert b.breaker._failures == 0 and scripted(b).closed == 1
    with pytest.raises(DeadlineExceeded) as alone:
        await run([upstream("c", slow)], deadline_in=0.1)
    assert alone.value.message == "the request deadline passed while waiting on c"


async def test_a_stream_ending_before_any_event_is_a_broken_answer():
    a, b = upstream("a", Attempt([])), upstream("b", answers("b"))
    causes: list[Any] = []
    chosen, _ = await run([a, b], causes=causes)
    ((name, error),) = causes
    assert chosen is b and name == "a"
    assert error.message == "a: the stream ended without a finish"
    assert error.upstream_answered and error.metadata == {"provider": "a"}


async def test_a_stream_broken_after_its_first_event_fails_and_counts_against_it():
    a = upstream("a", Attempt([TextDelta("partial")], error=UpstreamError("cut", {})))
    chosen, events = await dispatch.open_stream([a, upstream("b", answers("b"))], REQUEST,
                                                None, "m")  # fmt: skip
    assert chosen is a
    assert await anext(events) == TextDelta("partial")
    with pytest.raises(UpstreamError, match="cut"):
        await anext(events)
    assert a.breaker._failures == 1 and scripted(a).closed == 1


async def test_a_stream_ending_after_its_first_event_without_a_finish_names_its_provider():
    a = upstream("a", Attempt([TextDelta("partial")]))
    _, events = await dispatch.open_stream([a], REQUEST, None, "m")
    assert await anext(events) == TextDelta("partial")
    with pytest.raises(UpstreamError) as raised:
        await anext(events)
    assert raised.value.message == "a: the stream ended without a finish"
    assert raised.value.upstream_answered and raised.value.metadata == {"provider": "a"}
    # A broken answer counts against the provider that gave it.
    assert a.breaker._failures == 1


async def test_a_refusal_after_the_first_event_does_not_count_against_the_provider():
    a = upstream("a", Attempt([TextDelta("p")], error=UpstreamRejected("no", {})))
    _, events = await dispatch.open_stream([a], REQUEST, None, "m")
    assert await anext(events) == TextDelta("p")
    with pytest.raises(UpstreamRejected):
        await anext(events)
    assert a.breaker._failures == 0


async def test_a_stream_slower_than_the_deadline_after_its_first_event():
    a = upstream("a", Attempt([TextDelta("p"), TextDelta("q"), DONE], delay_s=0.3))
    loop = asyncio.get_running_loop()
    _, events = await dispatch.open_stream([a], REQUEST, loop.time() + 0.45, "m")
    assert await anext(events) == TextDelta("p")
    with pytest.raises(DeadlineExceeded, match="while waiting on a"):
        await anext(events)


async def test_nothing_is_read_after_the_finish_and_the_provider_is_closed():
    a = upstream("a", Attempt([TextDelta("p"), DONE, TextDelta("after the end")]))
    _, events = await dispatch.open_stream([a], REQUEST, None, "m")
    assert [e async for e in events] == [TextDelta("p"), DONE]
    assert scripted(a).closed == 1


async def test_a_caller_going_away_frees_a_half_open_probe():
    clock = [0.0]
    a = upstream("a", Attempt([DONE], delay_s=5))
    a.breaker = Breaker(failure_threshold=1, cooldown_s=1, clock=lambda: clock[0])
    a.breaker.record_failure(a.breaker.try_acquire())  # type: ignore[arg-type]
    clock[0] = 2.0
    assert a.breaker.state is State.HALF_OPEN
    task = asyncio.ensure_future(run([a]))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert scripted(a).closed == 1
    # The probe slot is free again; the circuit stays half-open (nothing was learned).
    assert a.breaker.state is State.HALF_OPEN and a.breaker.try_acquire() is not None


async def test_a_custom_start_replaces_the_generation():
    seen: list[str] = []

    async def start(u: Upstream) -> AsyncIterator[Any]:
        seen.append(u.id)
        yield "vectors"

    a = upstream("a", fails())
    chosen, events = await dispatch.open_stream([a], None, None, "m", start=start)
    assert chosen is a and seen == ["a"] and scripted(a).calls == 0
    assert await anext(events) == "vectors"


def test_causes_keep_the_gateway_errors_themselves():
    error = GatewayError("x")
    failure = AllProvidersFailed.of("s", [("p", error)])
    assert failure.causes == [("p", error)]


def test_a_circuit_closed_by_its_probe_can_probe_again_after_opening_again():
    clock = [0.0]
    b = Breaker(failure_threshold=1, cooldown_s=1, clock=lambda: clock[0])
    for _ in range(2):
        b.record_failure(b.try_acquire())  # type: ignore[arg-type]
        assert b.state is State.OPEN
        clock[0] += 1
        probe = b.try_acquire()
        assert probe is not None and probe.probe
        b.record_success(probe)
        assert b.state is State.CLOSED
        assert b.try_acquire() == b.try_acquire(), "closed: a permit for everyone"


def test_breaker_defaults_and_state_names():
    b = Breaker()
    assert (b.failure_threshold, b.cooldown_s) == (5, 30.0)
    # The names ListProviders reports as a provider's health.
    assert [s.value for s in State] == ["healthy", "open", "half_open"]
