"""The facade through the `openai` SDK, in both modes (in-process and edge)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest

from tests.support.facade import MODES, facade
from tests.support.gateways import API_KEY

MESSAGES = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(params=MODES)
async def sdk(request: pytest.FixtureRequest) -> AsyncIterator[openai.AsyncOpenAI]:
    async with facade(request.param) as url:
        client = openai.AsyncOpenAI(
            base_url=f"{url}/v1",
            api_key="unused",
            default_headers={"x-api-key": API_KEY},
            max_retries=0,
        )
        async with client:
            yield client


async def test_chat(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.chat.completions.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
    assert reply.id.startswith("chatcmpl-")
    assert reply.object == "chat.completion"
    assert isinstance(reply.created, int)
    assert reply.model == "sim-mini"
    (choice,) = reply.choices
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert choice.message.content and choice.message.content.startswith("(simulated)")
    assert choice.finish_reason == "stop"
    usage = reply.usage
    assert usage is not None
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    extra = usage.model_extra or {}
    assert extra["total_cost_usd"] == pytest.approx(
        extra["input_cost_usd"] + extra["output_cost_usd"]
    )
    assert extra["total_cost_usd"] > 0
    assert extra["latency_ms"] >= 0 and extra["ttft_ms"] >= 0
    assert "cache_input_cost_usd" not in extra


async def test_streamed_chat_with_usage(sdk: openai.AsyncOpenAI) -> None:
    whole = await sdk.chat.completions.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
    stream = await sdk.chat.completions.create(
        model="sim-mini",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == whole.choices[0].message.content
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert last.usage is not None
    assert last.usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]
    assert (last.usage.model_extra or {})["total_cost_usd"] > 0
    assert all(c.usage is None for c in chunks[:-1])


async def test_streamed_chat_without_usage(sdk: openai.AsyncOpenAI) -> None:
    stream = await sdk.chat.completions.create(
        model="sim-mini",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.usage is None for c in chunks)


async def test_completion(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.completions.create(
        model="sim-standard", prompt="Once upon a time", max_tokens=5
    )
    assert reply.object == "text_completion"
    assert reply.id.startswith("cmpl-")
    assert isinstance(reply.created, int)
    assert reply.choices[0].text.startswith("(simulated)")
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 5
    extra = reply.usage.model_extra or {}
    assert "ttft_ms" not in extra  # absent on unary text completions (SPEC 2)
    assert extra["total_cost_usd"] > 0


async def test_streamed_completion(sdk: openai.AsyncOpenAI) -> None:
    whole = await sdk.completions.create(model="sim-mini", prompt="Once upon a time")
    stream = await sdk.completions.create(model="sim-mini", prompt="Once upon a time", stream=True)
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_models_list(sdk: openai.AsyncOpenAI) -> None:
    page = await sdk.models.list()
    assert [m.id for m in page.data] == ["sim-mini", "sim-standard", "sim-pro", "sim-embed"]
    for m in page.data:
        assert m.object == "model"
        assert isinstance(m.created, int)
        assert m.owned_by == "simulated"


async def test_sdk_error_classes(sdk: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as not_found:
        await sdk.chat.completions.create(model="no-such-model", messages=MESSAGES)  # type: ignore[arg-type]
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        await sdk.chat.completions.create(model="sim-mini", messages=MESSAGES, temperature=3)  # type: ignore[arg-type]
    assert bad.value.param == "temperature"
    anonymous = sdk.with_options(default_headers={"x-api-key": "wrong-key-000000000000"})
    with pytest.raises(openai.AuthenticationError):
        await anonymous.models.list()
