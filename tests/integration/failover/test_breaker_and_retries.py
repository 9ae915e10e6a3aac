"""Circuit breakers and same-provider retries, unit-level and over gRPC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import provider_service_pb2 as providers

from server.application.pipeline.breaker import Breaker, State
from tests.support.gateways import eventually, running_gateway
from tests.support.grpc_stubs import API, Stubs
from tests.support.upstreams.base import TEXT, FakeUpstream, Fault, Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

BACKUP_TEXT = ("Backup", ".")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_after_consecutive_failures_and_probes_once():
    clock = Clock()
    b = Breaker(failure_threshold=3, cooldown_s=10, clock=clock)
    for _ in range(2):
        b.record_failure(b.try_acquire())  # type: ignore[arg-type]
    b.record_success(b.try_acquire())  # type: ignore[arg-type]
    for _ in range(2):
        b.record_failure(b.try_acquire())  # type: ignore[arg-type]
    assert b.state is State.CLOSED, "a success resets the count"
    b.record_failure(b.try_acquire())  # type: ignore[arg-type]
    assert b.state is State.OPEN and b.try_acquire() is None
    clock.now += 10
    assert b.state is State.HALF_OPEN
    probe = b.try_acquire()
    assert probe is not None and probe.probe
    assert b.try_acquire() is None, "one probe at a time"
    b.record_failure(probe)
    assert b.state is State.OPEN, "a failed probe opens again for a whole cool-down"
    clock.now += 10
    probe = b.try_acquire()
    assert probe is not None
    b.release(probe)  # the caller went away: says nothing, frees the probe slot
    assert b.state is State.HALF_OPEN
    probe = b.try_acquire()
    assert probe is not None
    b.record_success(probe)
    assert b.state is State.CLOSED and b.try_acquire() is not None


class Env:
    def __init__(self, primary: FakeUpstream, backup: FakeUpstream, stubs: Stubs) -> None:
        self.primary, self.backup, self.stubs = primary, backup, stubs

    async def ask(self, model_id: str, stream: bool = False) -> str:
        messages = [chat.ChatMessage(role="user", content="hi")]
        if not stream:
            answer = await self.stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model=model_id, messages=messages),
                metadata=API,
                timeout=5,
            )
            return answer.choices[0].message.content
        text = ""
        async for chunk in self.stubs.chat.StreamChatCompletion(
            chat.StreamChatCompletionRequest(model=model_id, messages=messages),
            metadata=API,
            timeout=5,
        ):
            text += chunk.choices[0].delta.content
        return text

    async def health(self, model_id: str) -> list[str]:
        answer = await self.stubs.providers.ListProviders(
            providers.ListProvidersRequest(model=model_id), metadata=API, timeout=5
        )
        return [p.health for p in answer.providers]


def _config(primary: str, backup: str) -> dict[str, Any]:
    def pair(name: str, breaker: dict[str, Any], **params: Any) -> dict[str, Any]:
        return model(
            name,
            provider(f"{name}-primary", "openai", primary, breaker=breaker, **params),
            provider(f"{name}-backup", "openai", backup, "backup"),
        )

    # Long enough that a loaded machine still asks within it; the test then waits for
    # the half-open state rather than for a fixed time.
    trip = {"failure_threshold": 2, "cooldown_s": 1.5}
    return with_models(
        pair("flaky", trip),
        pair("flaky-stream", trip),
        pair("picky", {"failure_threshold": 1, "cooldown_s": 30}),
        pair("patient", {"failure_threshold": 10}, max_retries=2, backoff_s=0.01),
        pair("impatient", {"failure_threshold": 10}, max_retries=2, max_retry_after_s=0.5),
        model(
            "lonely",
            provider("lonely-primary", "openai", primary, breaker={"failure_threshold": 1}),
        ),
        model(
            "half-off",
            provider("half-off-primary", "openai", primary, enabled=False),
            provider("half-off-backup", "openai", backup, "backup"),
        ),
    )


@pytest.fixture(scope="module")
async def module_env() -> AsyncIterator[Env]:
    async with (
        serving(OpenAIWire()) as primary,
        serving(OpenAIWire()) as backup,
        running_gateway(_config(primary.url, backup.url)) as running,
        grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel,
    ):
        yield Env(primary, backup, Stubs(channel))


@pytest.fixture
def env(module_env: Env) -> Env:
    for fake in (module_env.primary, module_env.backup):
        fake.faults, fake.default, fake.usage = [], Fault(), Usage()
        fake.seen.clear()
    module_env.backup.text = BACKUP_TEXT
    return module_env


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
async def test_circuit_opens_skips_then_half_opens_and_closes(env: Env, stream: bool):
    name = "flaky-stream" if stream else "flaky"
    env.primary.default = Fault("status", 500)
    for _ in range(2):
        assert await env.ask(name, stream) == "".join(BACKUP_TEXT)
    assert len(env.primary.seen) == 2
    assert await env.health(name) == ["open", "healthy"]
    assert await env.ask(name, stream) == "".join(BACKUP_TEXT)
    assert len(env.primary.seen) == 2, "an open circuit is skipped without a request"

    async def half_open() -> None:
        assert await env.health(name) == ["half_open", "healthy"]

    await eventually(half_open)
    env.primary.default = Fault()
    assert await env.ask(name, stream) == "".join(TEXT), "the probe succeeds"
    assert await env.health(name) == ["healthy", "healthy"]


async def test_request_refused_does_not_count_against_the_provider(env: Env):
    env.primary.default = Fault("status", 400)
    for _ in range(3):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await env.ask("picky")
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert await env.health("picky") == ["healthy", "healthy"]


async def test_everything_open_fails_at_once_saying_so(env: Env):
    env.primary.default = Fault("status", 502)
    with pytest.raises(grpc.aio.AioRpcError):
        await env.ask("lonely")
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await env.ask("lonely")
    assert loop.time() - started < 0.2
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "lonely-primary: skipped, circuit open" in info.value.details()


async def test_retries_on_the_same_provider_with_backoff(env: Env):
    env.primary.faults = [Fault("status", 500), Fault("status", 503)]
    assert await env.ask("patient") == "".join(TEXT)
    assert len(env.primary.seen) == 3 and env.backup.seen == []


async def test_retry_after_that_fits_is_waited_for(env: Env):
    env.primary.faults = [Fault("status", 429, retry_after="1")]
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await env.ask("patient") == "".join(TEXT)
    assert 0.9 < loop.time() - started < 2
    assert len(env.primary.seen) == 2 and env.backup.seen == []


async def test_retry_after_too_long_moves_on_at_once(env: Env):
    env.primary.faults = [Fault("status", 429, retry_after="7")]
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await env.ask("impatient") == "".join(BACKUP_TEXT)
    assert loop.time() - started < 0.5
    assert len(env.primary.seen) == 1


async def test_disabled_provider_is_listed_and_skipped(env: Env):
    assert await env.health("half-off") == ["disabled", "healthy"]
    assert await env.ask("half-off") == "".join(BACKUP_TEXT)
    assert env.primary.seen == []
