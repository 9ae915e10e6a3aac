"""Rate limits, deadlines and simulated faults over gRPC."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import model_service_pb2 as models

from tests.support.gateways import running_gateway, wait_for
from tests.support.grpc_stubs import API, Stubs, details

HELLO = [chat.ChatMessage(role="user", content="hello")]


def _set_providers(config: dict, model: str, *params: dict) -> dict:
    entry = next(m for m in config["models"] if m["id"] == model)
    for provider, extra in zip(entry["providers"], params, strict=True):
        provider["params"].update(extra)
    return config


@asynccontextmanager
async def stubs_for(config: dict) -> AsyncIterator[Stubs]:
    """gRPC stubs on a gateway serving `config`, both closed on exit."""
    async with (
        running_gateway(config) as gateway,
        grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel,
    ):
        yield Stubs(channel)


async def test_rate_limit_exhausted_carries_retry_info(config_dict):
    config_dict["keys"][0]["requests_per_minute"] = 2
    config_dict["limits"] = {**config_dict.get("limits", {}), "count_listings": True}
    async with stubs_for(config_dict) as stubs:
        started = time.monotonic()
        call = stubs.models.ListModels(models.ListModelsRequest(), metadata=API)
        await call
        first_done = time.monotonic()
        headers = dict(await call.initial_metadata())
        assert headers["x-ratelimit-limit-requests"] == "2"
        assert headers["x-ratelimit-remaining-requests"] == "1"
        await stubs.models.ListModels(models.ListModelsRequest(), metadata=API)
        asked = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.models.ListModels(models.ListModelsRequest(), metadata=API)
        answered = time.monotonic()
        error = caught.value
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        retry_ms = details(error)["RetryInfo"].retry_delay.ToMilliseconds()
        # Two a minute: the bucket has a slot again 30 s after the first request, less
        # the time since, to the millisecond (rounded up).
        assert 30_000 - (answered - started) * 1000 - 1 <= retry_ms
        assert retry_ms <= 30_000 - (asked - first_done) * 1000 + 1
        trailers = dict(error.trailing_metadata())
        assert trailers["retry-after-ms"] == str(retry_ms)
        assert trailers["retry-after"] == str(math.ceil(retry_ms / 1000))
        assert trailers["x-ratelimit-remaining-requests"] == "0"


async def test_primary_failure_before_first_token_falls_back(config_dict):
    # The backup answers in three words, the primary never under twelve.
    backup = {"min_reply_tokens": 3, "max_reply_tokens": 3}
    _set_providers(config_dict, "sim-mini", {"error_rate": 1.0}, backup)
    async with stubs_for(config_dict) as stubs:
        unary = await stubs.chat.CreateChatCompletion(
            chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO), metadata=API
        )
        assert unary.choices[0].finish_reason == "stop"
        assert len(unary.choices[0].message.content.split()) == 3
        assert unary.usage.completion_tokens == 3
        request = chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO)
        chunks = [c async for c in stubs.chat.StreamChatCompletion(request, metadata=API)]
        assert chunks[-1].choices[0].finish_reason == "stop"
        text = "".join(c.choices[0].delta.content for c in chunks)
        assert text == unary.choices[0].message.content


async def test_every_provider_failing_names_each(config_dict):
    _set_providers(config_dict, "sim-mini", {"error_rate": 1.0}, {"error_rate": 1.0})
    async with stubs_for(config_dict) as stubs:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO), metadata=API
            )
        error = caught.value
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert "sim-mini-primary" in error.details() and "sim-mini-backup" in error.details()
        assert details(error)["ErrorInfo"].reason == "ALL_PROVIDERS_FAILED"


async def test_failure_after_first_token_ends_stream_with_error(config_dict):
    _set_providers(config_dict, "sim-mini", {"fail_after_tokens": 3}, {})
    async with stubs_for(config_dict) as stubs:
        request = chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO)
        received = []
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for chunk in stubs.chat.StreamChatCompletion(request, metadata=API):
                received.append(chunk)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "cut after 3 tokens" in caught.value.details()
        # The role chunk and three tokens' text (merged when ready together), never a
        # finish_reason.
        assert received[0].choices[0].delta.role == "assistant"
        text = "".join(c.choices[0].delta.content for c in received[1:])
        assert text.startswith("(simulated)") and len(text.split()) == 3
        assert not any(c.choices[0].HasField("finish_reason") for c in received)


async def test_client_deadline_bounds_a_slow_provider(config_dict):
    _set_providers(config_dict, "sim-pro", {"ttft_ms": 5000}, {"ttft_ms": 5000})
    async with stubs_for(config_dict) as stubs:
        started = time.perf_counter()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model="sim-pro", messages=HELLO),
                metadata=API,
                timeout=0.3,
            )
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.perf_counter() - started < 2


async def test_request_timeout_ends_a_stream_that_outlives_it(config_dict):
    # The first token comes at once, the second 2.5 s later: the deadline passes while
    # the stream waits on it, and ends the wait then.
    config_dict["server"]["request_timeout_s"] = 0.8
    slow = {"ttft_ms": 0, "tokens_per_second": 0.4, "min_reply_tokens": 5, "max_reply_tokens": 5}
    _set_providers(config_dict, "sim-pro", slow, slow)
    async with stubs_for(config_dict) as stubs:
        request = chat.StreamChatCompletionRequest(model="sim-pro", messages=HELLO)
        received = []
        started = time.perf_counter()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for chunk in stubs.chat.StreamChatCompletion(request, metadata=API):
                received.append(chunk)
        elapsed = time.perf_counter() - started
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "the request deadline passed while waiting on sim-pro" in caught.value.details()
    assert len(received) == 2  # the role chunk and the first token
    assert 0.7 < elapsed < 3  # the deadline, not the stream's end (room for a loaded machine)


async def test_configured_request_timeout_bounds_all_attempts(config_dict):
    config_dict["server"]["request_timeout_s"] = 0.3
    _set_providers(config_dict, "sim-pro", {"ttft_ms": 5000}, {"ttft_ms": 5000})
    async with stubs_for(config_dict) as stubs:
        started = time.perf_counter()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model="sim-pro", messages=HELLO), metadata=API
            )
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.perf_counter() - started < 2


async def test_simulated_pacing_is_measured_in_ttft_and_latency(config_dict):
    _set_providers(config_dict, "sim-mini", {"ttft_ms": 100, "tokens_per_second": 100}, {})
    async with stubs_for(config_dict) as stubs:
        response = await stubs.chat.CreateChatCompletion(
            chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO, max_tokens=11),
            metadata=API,
        )
        usage = response.usage
        assert 100 <= usage.ttft_ms < 400
        # Ten more tokens at 100 per second after the first one.
        assert usage.latency_ms >= usage.ttft_ms + 95


async def test_cached_input_is_priced_separately(config_dict):
    _set_providers(config_dict, "sim-standard", {"cached_ratio": 0.5}, {})
    async with stubs_for(config_dict) as stubs:
        long_prompt = [chat.ChatMessage(role="user", content="word " * 200)]
        usage = (
            await stubs.chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model="sim-standard", messages=long_prompt),
                metadata=API,
            )
        ).usage
        cached = usage.prompt_tokens_details.cached_tokens
        assert cached == usage.prompt_tokens // 2
        # sim-standard: $1 input, $0.50 cached input, $4 output per million.
        assert usage.input_cost_usd == pytest.approx((usage.prompt_tokens - cached) * 1e-6)
        assert usage.cache_input_cost_usd == pytest.approx(cached * 0.5e-6)
        assert usage.total_cost_usd == pytest.approx(
            usage.input_cost_usd + usage.cache_input_cost_usd + usage.completion_tokens * 4e-6
        )


async def test_cancelled_stream_stops_the_provider(config_dict):
    _set_providers(config_dict, "sim-mini", {"tokens_per_second": 20, "max_reply_tokens": 400,
                                             "min_reply_tokens": 400}, {})  # fmt: skip
    async with running_gateway(config_dict) as gateway:
        provider = gateway.gateway.live.current.catalog.upstreams["sim-mini"][0].provider
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
            request = chat.StreamChatCompletionRequest(model="sim-mini", messages=HELLO)
            call = Stubs(channel).chat.StreamChatCompletion(request, metadata=API)
            async for _ in call:
                break
            assert provider.in_flight == 1
            call.cancel()
            await wait_for(lambda: provider.in_flight == 0)
