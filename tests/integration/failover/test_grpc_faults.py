"""Failover over gRPC against fake upstreams on loopback: every fault, streamed and not.

For each fault injected in the primary: with a backup, the caller gets the backup's
whole answer; alone, the caller gets UNAVAILABLE naming the provider and the cause. A
request the upstream refuses is not failed over. A stream broken after its first token
ends with an error status, never with a finish_reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import completion_service_pb2 as completion
from gateway.v1 import provider_service_pb2 as providers

from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import API, Stubs, details
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import TEXT, Fault, Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.matrix import (
    BACKUP_TEXT,
    BEFORE_FIRST_TOKEN,
    Env,
    matrix_config,
)
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.tgi import TgiWire


def details_of(error: grpc.aio.AioRpcError) -> Any:
    """The ErrorInfo of an error."""
    return details(error)["ErrorInfo"]


def channel_to(running: Any) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}")


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[Env]:
    async with (
        serving(OpenAIWire()) as openai,
        serving(AnthropicWire()) as anthropic,
        serving(TgiWire()) as tgi,
        serving(OpenAIWire()) as backup,
    ):
        fakes = {"openai": openai, "anthropic": anthropic, "tgi": tgi, "backup": backup}
        async with running_gateway(matrix_config(fakes)) as running, channel_to(running) as channel:
            yield Env(fakes, Stubs(channel), running)


@pytest.fixture
def gw(env: Env) -> Env:
    env.reset()
    return env


async def ask(gw: Env, model_id: str, stream: bool, **fields: Any) -> tuple[str, str, list[Any]]:
    """Calls the chat RPC; returns the text, the finish reason and the stream chunks."""
    messages = [chat.ChatMessage(role="user", content="Say hello.")]
    if not stream:
        answer = await gw.client.chat.CreateChatCompletion(
            chat.CreateChatCompletionRequest(model=model_id, messages=messages, **fields),
            metadata=API,
            timeout=5,
        )
        return answer.choices[0].message.content, answer.choices[0].finish_reason, [answer]
    chunks = []
    call = gw.client.chat.StreamChatCompletion(
        chat.StreamChatCompletionRequest(model=model_id, messages=messages, **fields),
        metadata=API,
        timeout=5,
    )
    async for chunk in call:
        chunks.append(chunk)
    text = "".join(c.choices[0].delta.content for c in chunks if c.choices)
    return text, chunks[-1].choices[0].finish_reason, chunks


MODES = pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
FORMATS = pytest.mark.parametrize("fmt", ["openai", "anthropic", "tgi"])
FAULTS = pytest.mark.parametrize(
    "fault,cause", [f[1:] for f in BEFORE_FIRST_TOKEN], ids=[f[0] for f in BEFORE_FIRST_TOKEN]
)


@MODES
@FORMATS
@FAULTS
async def test_fault_before_first_token_fails_over(gw: Env, fmt, fault, cause, stream):
    gw.fakes[fmt].default = fault
    text, finish, _ = await ask(gw, f"{fmt}-failover", stream)
    assert (text, finish) == ("".join(BACKUP_TEXT), "stop")
    assert len(gw.fakes[fmt].seen) == 1, "no retry on the same provider by default"
    assert len(gw.fakes["backup"].seen) == 1


@MODES
@FORMATS
@FAULTS
async def test_fault_with_no_backup_is_unavailable_naming_the_cause(
    gw: Env, fmt, fault, cause, stream
):
    gw.fakes[fmt].default = fault
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await ask(gw, f"{fmt}-alone", stream)
    err = info.value
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    assert f"{fmt}-alone-primary" in err.details() and cause in err.details()
    found: dict[str, Any] = details(err)
    assert found["ErrorInfo"].reason == "ALL_PROVIDERS_FAILED"
    assert found["ErrorInfo"].metadata["tried"] == f"{fmt}-alone-primary"
    if fault.kind == "status" and fault.status == 429:
        assert found["RetryInfo"].retry_delay.seconds == 7


@MODES
async def test_connection_refused_fails_over_or_is_unavailable(gw: Env, stream):
    text, _, _ = await ask(gw, "refused-failover", stream)
    assert text == "".join(BACKUP_TEXT)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await ask(gw, "refused-alone", stream)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "refused-alone-primary: cannot connect" in info.value.details()


@MODES
@FORMATS
@pytest.mark.parametrize("status", [400, 422])
async def test_request_refused_by_upstream_is_not_failed_over(gw: Env, fmt, status, stream):
    gw.fakes[fmt].default = Fault("status", status)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await ask(gw, f"{fmt}-failover", stream)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details_of(info.value).reason == "UPSTREAM_REJECTED_REQUEST"
    assert gw.fakes["backup"].seen == [], "a request-caused 4xx does not fail over"


@FORMATS
@pytest.mark.parametrize("kind", ["cut", "abort", "malformed"])
async def test_stream_broken_after_first_token_ends_with_error(gw: Env, fmt, kind):
    """Tokens already sent stay sent; the stream then ends UNAVAILABLE, no finish."""
    gw.fakes[fmt].default = Fault(kind, after_tokens=3)
    chunks = []
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for chunk in gw.client.chat.StreamChatCompletion(
            chat.StreamChatCompletionRequest(
                model=f"{fmt}-failover", messages=[chat.ChatMessage(role="user", content="hi")]
            ),
            metadata=API,
            timeout=5,
        ):
            chunks.append(chunk)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert details_of(info.value).metadata["upstream_answered"] == "true"
    text = "".join(c.choices[0].delta.content for c in chunks)
    assert text == "".join(TEXT[:3])
    assert not any(c.choices[0].HasField("finish_reason") for c in chunks), "never a silent stop"
    assert gw.fakes["backup"].seen == [], "no failover once text was sent"


@FORMATS
async def test_stream_stalled_after_first_token_ends_with_error(gw: Env, fmt):
    gw.fakes[fmt].faults = [Fault("slow_body", delay_s=0.0)]
    gw.fakes[fmt].default = Fault("slow_body", delay_s=2)
    await ask(gw, f"{fmt}-failover", True)  # a zero-delay slow body is a whole answer
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await ask(gw, f"{fmt}-alone", True)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "timed out" in info.value.details()


async def test_text_completion_fails_over_and_counts_usage(gw: Env):
    gw.fakes["anthropic"].default = Fault("status", 529)
    gw.fakes["backup"].usage = Usage(prompt_tokens=11)
    answer = await gw.client.completions.CreateCompletion(
        completion.CreateCompletionRequest(model="anthropic-failover", prompt="Hi"),
        metadata=API,
        timeout=5,
    )
    assert answer.choices[0].text == "".join(BACKUP_TEXT)
    assert answer.usage.prompt_tokens == 11
    assert gw.fakes["backup"].seen[0].path == "/v1/completions"


async def test_providers_listed_with_health(gw: Env):
    answer = await gw.client.providers.ListProviders(
        providers.ListProvidersRequest(model="openai-failover"), metadata=API, timeout=5
    )
    assert [(p.id, p.type, p.adapter, p.health) for p in answer.providers] == [
        ("openai-primary", "primary", "openai", "healthy"),
        ("openai-backup", "backup", "openai", "healthy"),
    ]
    assert answer.providers[0].params["model"] == "gpt-fake"


async def test_deadline_bounds_every_attempt(gw: Env):
    """A hung primary with a long read timeout: the caller's deadline wins, and the
    error says what was being waited on."""
    slow = provider("slow-primary", "openai", gw.fakes["openai"].url, read_timeout_s=30)
    data = with_models(
        model("slow", slow, provider("slow-backup", "openai", gw.fakes["backup"].url, "backup")),
        request_timeout_s=0.4,
    )
    gw.fakes["openai"].default = Fault("hang")
    async with running_gateway(data) as running, channel_to(running) as channel:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await Stubs(channel).chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(
                    model="slow", messages=[chat.ChatMessage(role="user", content="hi")]
                ),
                metadata=API,
                timeout=5,
            )
        took = loop.time() - started
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "waiting on slow-primary" in info.value.details()
    assert took < 4  # the deadline, not the client's 5 s (room for a loaded machine)
