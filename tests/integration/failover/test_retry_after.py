"""When every provider fails and several said when to come back, the caller is told the
soonest: two upstreams answering 429 with different Retry-After values, over REST (the
Retry-After and retry_after headers) and gRPC (RetryInfo and retry-after)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat

from tests.support.gateways import API_KEY, running_gateway
from tests.support.grpc_stubs import API, Stubs, details
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

# The circuits stay closed: every request reaches both upstreams and hears their waits.
NO_TRIP = {"failure_threshold": 1000}
BODY = {"model": "both-busy", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[tuple[Any, FakeUpstream, FakeUpstream]]:
    async with serving(OpenAIWire()) as first, serving(AnthropicWire()) as second:
        data = with_models(
            model(
                "both-busy",
                provider("busy-first", "openai", first.url, breaker=NO_TRIP),
                provider("busy-second", "anthropic", second.url, "backup", breaker=NO_TRIP),
            )
        )
        async with running_gateway(data) as running:
            yield running, first, second


@pytest.mark.parametrize(
    "first_wait, second_wait", [("7", "3"), ("3", "7"), ("2", "60")], ids=["later-first",
                                                                          "sooner-first", "far"]
)  # fmt: skip
async def test_all_providers_failed_tells_the_soonest_retry_after(env, first_wait, second_wait):
    running, first, second = env
    soonest = str(min(int(first_wait), int(second_wait)))
    first.default = Fault("status", 429, retry_after=first_wait)
    second.default = Fault("status", 429, retry_after=second_wait)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.http_port}") as http:
            response = await http.post(
                "/v1/chat/completions", json=BODY, headers={"x-api-key": API_KEY}
            )
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "all_providers_failed"
        assert (response.headers["retry-after"], response.headers["retry_after"]) == (
            soonest,
            soonest,
        )
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await Stubs(channel).chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(
                        model="both-busy", messages=[chat.ChatMessage(role="user", content="hi")]
                    ),
                    metadata=API,
                )
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        assert details(failed.value)["RetryInfo"].retry_delay.seconds == int(soonest)  # type: ignore[attr-defined]
        assert "busy-first" in failed.value.details() and "busy-second" in failed.value.details()
    finally:
        first.default = second.default = Fault()
