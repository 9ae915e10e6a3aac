"""The facade through the `openai` SDK, in both modes (in-process and edge)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from tests.support.facade import MODES, facade
from tests.support.gateways import API_KEY, default_config_dict, running_gateway

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


async def test_what_openai_always_sends_is_sent_and_a_reply_goes_back_as_history(
    sdk: openai.AsyncOpenAI,
) -> None:
    raw = await sdk.chat.completions.with_raw_response.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
    body = json.loads(raw.text)
    # The keys of OpenAI's API reference example ("Create chat completion").
    assert {"id", "object", "created", "model", "choices", "usage", "system_fingerprint",
            "service_tier"} <= set(body)  # fmt: skip
    assert body["service_tier"] == "default" and body["system_fingerprint"].startswith("fp_")
    (choice,) = body["choices"]
    assert choice["logprobs"] is None
    assert choice["message"]["refusal"] is None and choice["message"]["annotations"] == []
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 0, "audio_tokens": 0}
    assert body["usage"]["completion_tokens_details"] == {
        "reasoning_tokens": 0, "audio_tokens": 0,
        "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
    }  # fmt: skip
    reply = raw.parse()
    # The SDK's own reply object appended to the history, as OpenAI's guides do: its
    # refusal and annotations go back and are taken.
    again = await sdk.chat.completions.create(
        model="sim-mini",
        messages=[*MESSAGES, reply.choices[0].message, {"role": "user", "content": "Again."}],  # type: ignore[list-item]
    )
    assert again.system_fingerprint == reply.system_fingerprint


async def test_streamed_chat_with_usage(sdk: openai.AsyncOpenAI) -> None:
    whole = await sdk.chat.completions.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
    stream = await sdk.chat.completions.create(
        model="sim-mini",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage, finish = "", None, None
    chunks = []
    # The loop of OpenAI's own docs: usage comes on a last chunk with no choices.
    async for chunk in stream:
        chunks.append(chunk)
        if not chunk.choices:
            usage = chunk.usage
            continue
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert text == whole.choices[0].message.content and finish == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-2])
    assert usage is not None and usage is chunks[-1].usage
    assert usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]
    assert (usage.model_extra or {})["total_cost_usd"] > 0
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
    assert all(c.system_fingerprint == whole.system_fingerprint for c in chunks)


async def test_streamed_completion_with_usage(sdk: openai.AsyncOpenAI) -> None:
    stream = await sdk.completions.create(
        model="sim-mini", prompt="Once upon a time", max_tokens=3, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = [chunk async for chunk in stream]
    *text, finish, last = chunks
    assert finish.choices[0].finish_reason == "length" and finish.usage is None
    assert not last.choices and last.usage is not None and last.usage.completion_tokens == 3


async def test_models_list(sdk: openai.AsyncOpenAI) -> None:
    page = await sdk.models.list()
    assert [m.id for m in page.data] == [
        "sim-mini",
        "sim-standard",
        "sim-pro",
        "sim-embed",
        "sim-rerank",
        "sim-moderation",
        "sim-audio",
        "sim-image",
    ]
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


async def test_completion_of_several_prompts(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.completions.create(
        model="sim-mini", prompt=["Once upon a time", "Twice"], n=2, max_tokens=3
    )
    # n choices per prompt, numbered prompt by prompt, as OpenAI numbers them.
    assert [c.index for c in reply.choices] == [0, 1, 2, 3]
    alone = await sdk.completions.create(model="sim-mini", prompt="Twice", max_tokens=3)
    assert reply.choices[2].text == alone.choices[0].text
    assert reply.usage is not None and reply.usage.completion_tokens == 12
    tokens = await sdk.completions.create(model="sim-mini", prompt=[[1, 2, 3], [4]], max_tokens=2)
    assert len(tokens.choices) == 2 and tokens.usage is not None
    assert tokens.usage.prompt_tokens == 4  # token ids count themselves


async def test_a_rate_limited_request_is_retried_after_the_next_slot_not_the_window() -> None:
    data = default_config_dict()
    # Three requests a six-second window: a slot every two seconds once the bucket is
    # spent (time enough for the three on a loaded machine).
    data["limits"] = {**data.get("limits", {}), "window_s": 6}
    data["keys"][0]["requests_per_minute"] = 3
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=2)
        async with client, httpx.AsyncClient(base_url=base) as http:
            before_first = time.monotonic()
            for _ in range(3):
                await client.chat.completions.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
            sent = time.monotonic()
            refused = await http.post("/v1/chat/completions", headers={"x-api-key": API_KEY},
                                      json={"model": "sim-mini", "messages": MESSAGES})  # fmt: skip
            longest = time.monotonic() - before_first
            assert refused.status_code == 429 and refused.headers["retry-after"] == "2"
            assert refused.headers["x-should-retry"] == "true"
            # The next slot: two seconds after the first request, less what has passed since.
            delay_s = int(refused.headers["retry-after-ms"]) / 1000
            assert 2 - longest - 0.001 <= delay_s <= 2
            started = time.monotonic()
            # The SDK reads retry-after-ms, waits that long (not a window), and succeeds.
            await client.chat.completions.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
            done = time.monotonic()
    # Not before the slot, which opens delay_s after the refusal (itself after `sent`;
    # the SDK's own first attempt, later, is told a shorter wait), and long before the
    # six-second window.
    assert done - sent > delay_s - 0.01
    assert done - started < 5.9
