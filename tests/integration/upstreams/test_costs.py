"""Costs from upstream usage over gRPC: cached and reasoning tokens, Anthropic's cache
convention, counted usage when an upstream reports none, unpriced models."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import streaming_pb2, usage_pb2

from server.base import tokens
from server.base.generation import GenerationRequest, Message
from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import API, Stubs
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import TEXT, FakeUpstream, Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.tgi import TgiWire

M = 1_000_000
PROMPT = "Say hello."


class Env:
    def __init__(self, fakes: dict[str, FakeUpstream], stubs: Stubs) -> None:
        self.fakes, self.stubs = fakes, stubs

    async def usage(self, model_id: str, stream: bool = False) -> usage_pb2.Usage:
        messages = [chat.ChatMessage(role="user", content=PROMPT)]
        if not stream:
            answer = await self.stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model=model_id, messages=messages),
                metadata=API,
                timeout=5,
            )
            return answer.usage
        chunks = [
            chunk
            async for chunk in self.stubs.chat.StreamChatCompletion(
                chat.StreamChatCompletionRequest(
                    model=model_id,
                    messages=messages,
                    stream_options=streaming_pb2.StreamOptions(include_usage=True),
                ),
                metadata=API,
                timeout=5,
            )
        ]
        return chunks[-1].usage


@pytest.fixture(scope="module")
async def env_module() -> AsyncIterator[Env]:
    async with (
        serving(OpenAIWire()) as openai,
        serving(AnthropicWire()) as anthropic,
        serving(TgiWire()) as tgi,
    ):
        data = with_models(
            model("oa", provider("oa-1", "openai", openai.url)),
            model("an", provider("an-1", "anthropic", anthropic.url)),
            model("tg", provider("tg-1", "tgi", tgi.url)),
            model("no-usage", provider("no-usage-1", "openai", openai.url, stream_usage=False)),
            model("unpriced", provider("unpriced-1", "openai", openai.url), price=None),
        )
        async with (
            running_gateway(data) as running,
            grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel,
        ):
            yield Env({"openai": openai, "anthropic": anthropic, "tgi": tgi}, Stubs(channel))


@pytest.fixture
def env(env_module: Env) -> Env:
    for fake in env_module.fakes.values():
        fake.usage = Usage()
    return env_module


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
async def test_openai_cached_and_reasoning_tokens_priced_apart(env: Env, stream: bool):
    env.fakes["openai"].usage = Usage(prompt_tokens=100, cached_tokens=60, reasoning_tokens=7)
    u = await env.usage("oa", stream)
    visible = len(TEXT)
    assert (u.prompt_tokens, u.completion_tokens) == (100, visible + 7)
    assert u.prompt_tokens_details.cached_tokens == 60
    assert u.completion_tokens_details.reasoning_tokens == 7
    # PRICE: input 1, cached_input 0.5, output 4, reasoning 8 (USD per million).
    assert u.input_cost_usd == pytest.approx(40 * 1 / M)
    assert u.cache_input_cost_usd == pytest.approx(60 * 0.5 / M)
    assert u.output_cost_usd == pytest.approx((visible * 4 + 7 * 8) / M)
    assert u.total_cost_usd == pytest.approx((40 + 30 + visible * 4 + 56) / M)


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
async def test_anthropic_cache_tokens_counted_once(env: Env, stream: bool):
    """Anthropic sends input_tokens=15 (cache excluded), cache reads 60, cache writes 25
    (10 of them for an hour): the gateway reports 100 prompt tokens, bills reads at the
    cached price, 5-minute writes at the cache-write price, hour-long ones at theirs and
    the other 15 at the input price; nothing twice."""
    env.fakes["anthropic"].usage = Usage(
        prompt_tokens=100, cached_tokens=60, cache_write_tokens=25, cache_write_1h_tokens=10
    )
    u = await env.usage("an", stream)
    assert u.prompt_tokens == 100 and u.prompt_tokens_details.cached_tokens == 60
    assert u.prompt_tokens_details.cache_write_tokens == 25
    assert u.prompt_tokens_details.cache_write_1h_tokens == 10
    assert u.input_cost_usd == pytest.approx(15 * 1 / M)
    assert u.cache_input_cost_usd == pytest.approx(60 * 0.5 / M)
    assert u.cache_write_cost_usd == pytest.approx((15 * 1.25 + 10 * 2.0) / M)
    assert u.output_cost_usd == pytest.approx(len(TEXT) * 4 / M)
    assert u.total_cost_usd == pytest.approx(
        u.input_cost_usd + u.cache_input_cost_usd + u.cache_write_cost_usd + u.output_cost_usd
    )


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
async def test_tgi_reported_counts(env: Env, stream: bool):
    env.fakes["tgi"].usage = Usage(prompt_tokens=33)
    u = await env.usage("tg", stream)
    assert (u.prompt_tokens, u.completion_tokens) == (33, len(TEXT))


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
async def test_usage_counted_when_upstream_reports_none(env: Env, stream: bool):
    u = await env.usage("no-usage", stream)
    # The provider streams from its upstream without asking for usage (stream_usage
    # false), for unary callers too: the gateway counts, about four bytes a token.
    request = GenerationRequest(messages=(Message("user", PROMPT),))
    assert u.prompt_tokens == tokens.estimate_prompt(request)
    assert u.completion_tokens == tokens.estimate("".join(TEXT))
    assert u.total_cost_usd == pytest.approx((u.prompt_tokens * 1 + u.completion_tokens * 4) / M)


async def test_unpriced_model_reports_costs_absent(env: Env):
    u = await env.usage("unpriced")
    assert u.prompt_tokens == 20
    for name in ("input_cost_usd", "output_cost_usd", "cache_input_cost_usd", "total_cost_usd"):
        assert not u.HasField(name), f"{name} must be absent, never $0"


async def test_unpriced_model_warned_at_start_up(caplog: pytest.LogCaptureFixture):
    async with serving(OpenAIWire()) as fake:
        data = with_models(model("free", provider("free-1", "openai", fake.url), price=None))
        with caplog.at_level(logging.WARNING, logger="server.application.pipeline.catalog"):
            async with running_gateway(data):
                pass
    assert any("free has no price" in r.getMessage() for r in caplog.records)
