"""Tools, images and structured output through the gateway to fake OpenAI and Anthropic
upstreams that refuse any body the real API would refuse (tests/support/upstreams/shapes.py),
driven by the `openai` SDK and LangChain's ChatOpenAI."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.shapes import ARGUMENTS

TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Gets the weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAen63NgAAAAASUVORK5CYII="
FORMATS = ("openai", "anthropic")


class Env:
    def __init__(self, fakes: dict[str, FakeUpstream], sdk: openai.AsyncOpenAI, url: str) -> None:
        self.fakes, self.sdk, self.url = fakes, sdk, url

    def last(self, fmt: str) -> dict[str, Any]:
        return self.fakes[fmt].seen[-1].body


@pytest.fixture(scope="module")
async def env_module() -> AsyncIterator[Env]:
    async with serving(OpenAIWire()) as oa, serving(AnthropicWire()) as an:
        models = [
            model(f"{fmt}-{mode}", provider(f"{fmt}-{mode}-p", fmt, fake.url, stream=mode == "s"))
            for fmt, fake in (("openai", oa), ("anthropic", an))
            for mode in ("s", "u")
        ]
        async with running_gateway(with_models(*models)) as gw:
            url = f"http://127.0.0.1:{gw.http_port}/v1"
            sdk = openai.AsyncOpenAI(base_url=url, api_key="x", default_headers={"x-api-key": API_KEY}, max_retries=0)  # fmt: skip
            async with sdk:
                yield Env({"openai": oa, "anthropic": an}, sdk, url)


@pytest.fixture
def env(env_module: Env) -> Env:
    for fake in env_module.fakes.values():
        fake.seen.clear()
    yield env_module
    for name, fake in env_module.fakes.items():
        assert not fake.problems, f"{name} refused: {fake.problems}"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("upstream_stream", ["s", "u"])
async def test_tool_loop(env: Env, fmt: str, upstream_stream: str) -> None:
    name = f"{fmt}-{upstream_stream}"
    messages: list[Any] = [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    first = await env.sdk.chat.completions.create(model=name, messages=messages, tools=[TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == ARGUMENTS
    messages += [choice.message, {"role": "tool", "tool_call_id": call.id, "content": "21 C"}]
    second = await env.sdk.chat.completions.create(model=name, messages=messages, tools=[TOOL])
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Hello, world! This is a fake reply."
    sent = env.last(fmt)
    if fmt == "anthropic":
        assert sent["system"] == "Use tools."
        assert sent["tools"] == [{"name": "get_weather", "description": "Gets the weather of a city.",
                                  "input_schema": TOOL["function"]["parameters"]}]  # fmt: skip
        assistant, result = sent["messages"][1], sent["messages"][2]
        assert {"type": "tool_use", "id": call.id, "name": "get_weather",
                "input": ARGUMENTS} in assistant["content"]  # fmt: skip
        assert result == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": "21 C"}]}  # fmt: skip
    else:
        assert sent["tools"] == [TOOL]
        assert (
            sent["messages"][2]["tool_calls"][0]["function"]["arguments"] == call.function.arguments
        )
        assert sent["messages"][3] == {"role": "tool", "content": "21 C", "tool_call_id": call.id}


@pytest.mark.parametrize("fmt", FORMATS)
async def test_streamed_tool_call_accumulated_by_the_sdk(env: Env, fmt: str) -> None:
    async with env.sdk.chat.completions.stream(
        model=f"{fmt}-s",
        messages=[{"role": "user", "content": "Weather?"}],
        tools=[TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        parallel_tool_calls=False,
    ) as stream:
        final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert json.loads(call.function.arguments) == ARGUMENTS
    sent = env.last(fmt)
    if fmt == "anthropic":
        assert sent["tool_choice"] == {"type": "tool", "name": "get_weather",
                                       "disable_parallel_tool_use": True}  # fmt: skip
    else:
        assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
        assert sent["parallel_tool_calls"] is False


@pytest.mark.parametrize("fmt", FORMATS)
async def test_images(env: Env, fmt: str) -> None:
    content: Any = [
        {"type": "text", "text": "Compare."},
        {"type": "image_url", "image_url": {"url": PIXEL}},
        {"type": "image_url", "image_url": {"url": "https://example.com/b.jpg", "detail": "high"}},
    ]
    reply = await env.sdk.chat.completions.create(
        model=f"{fmt}-u", messages=[{"role": "user", "content": content}]
    )
    assert reply.choices[0].message.content
    (sent,) = env.last(fmt)["messages"]
    if fmt == "anthropic":
        assert sent["content"] == [
            {"type": "text", "text": "Compare."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PIXEL.split(",", 1)[1]}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/b.jpg"}},
        ]  # fmt: skip
    else:
        assert sent["content"] == content


class City(BaseModel):
    city: str


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("upstream_stream", ["s", "u"])
async def test_parse(env: Env, fmt: str, upstream_stream: str) -> None:
    name = f"{fmt}-{upstream_stream}"
    if fmt == "openai":
        # The fake OpenAI answers its fixed text; a real one follows the schema.
        env.fakes["openai"].text = ('{"city": ', '"Paris"}')
    try:
        reply = await env.sdk.chat.completions.parse(
            model=name, messages=[{"role": "user", "content": "Where?"}], response_format=City
        )
    finally:
        env.fakes["openai"].text = FakeUpstream(OpenAIWire()).text
    assert reply.choices[0].message.parsed == City(city="Paris")
    assert reply.choices[0].finish_reason == "stop"
    sent = env.last(fmt)
    if fmt == "anthropic":
        assert sent["tool_choice"] == {"type": "tool", "name": "City"}
        assert sent["tools"][0]["name"] == "City"
        assert sent["tools"][0]["input_schema"]["properties"] == {
            "city": {"title": "City", "type": "string"}
        }
    else:
        fmt_sent = sent["response_format"]
        assert fmt_sent["type"] == "json_schema" and fmt_sent["json_schema"]["name"] == "City"
        assert fmt_sent["json_schema"]["strict"] is True


async def test_openai_passes_the_rest_through(env: Env) -> None:
    await env.sdk.chat.completions.create(
        model="openai-u", messages=[{"role": "developer", "content": "x", "name": "d"}],
        n=1, seed=3, user="u", presence_penalty=1, frequency_penalty=1,
        logit_bias={"42": 5}, logprobs=True, top_logprobs=3, max_completion_tokens=9,
        reasoning_effort="low", metadata={"k": "v"}, stop="\n",
    )  # fmt: skip
    sent = env.last("openai")
    for key, value in {"seed": 3, "user": "u", "presence_penalty": 1, "frequency_penalty": 1,
                       "logit_bias": {"42": 5}, "logprobs": True, "top_logprobs": 3,
                       "max_tokens": 9, "reasoning_effort": "low", "metadata": {"k": "v"},
                       "stop": ["\n"]}.items():  # fmt: skip
        assert sent[key] == value, key
    assert sent["messages"] == [{"role": "developer", "content": "x", "name": "d"}]


async def test_anthropic_lacks_n_and_logprobs(env: Env) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await env.sdk.chat.completions.create(
            model="anthropic-u", messages=[{"role": "user", "content": "x"}], n=2
        )
    assert caught.value.code == "unsupported_capability" and caught.value.param == "n"
    assert "anthropic-u" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        await env.sdk.chat.completions.create(
            model="anthropic-u", messages=[{"role": "user", "content": "x"}], logprobs=True
        )
    assert caught.value.param == "logprobs"
    assert not env.fakes["anthropic"].seen


@pytest.mark.parametrize("fmt", FORMATS)
async def test_langchain_bind_tools(env: Env, fmt: str) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Gets the weather of a city."""
        return "21 C"

    llm = ChatOpenAI(
        model=f"{fmt}-s", base_url=env.url, api_key="x",  # type: ignore[arg-type]
        default_headers={"x-api-key": API_KEY}, max_retries=0,
    )  # fmt: skip
    bound = llm.bind_tools([get_weather])
    messages: list[Any] = [HumanMessage("Weather in Paris?")]
    asked = await bound.ainvoke(messages)
    (call,) = asked.tool_calls  # type: ignore[attr-defined]
    assert call["name"] == "get_weather" and call["args"] == ARGUMENTS
    messages += [asked, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    answered = await bound.ainvoke(messages)
    assert answered.content == "Hello, world! This is a fake reply."
    streamed = None
    async for piece in bound.astream([HumanMessage("Weather in Paris?")]):
        streamed = piece if streamed is None else streamed + piece
    assert streamed is not None and streamed.tool_calls[0]["args"] == ARGUMENTS  # type: ignore[attr-defined]


async def test_openai_text_completion_fields(env: Env) -> None:
    reply = await env.sdk.completions.create(
        model="openai-u", prompt="Once", n=1, logprobs=2, suffix="end", best_of=2, seed=5,
        echo=True, user="u", logit_bias={"7": 1}, presence_penalty=0.1,
    )  # fmt: skip
    sent = env.last("openai")
    for key, value in {"logprobs": 2, "suffix": "end", "best_of": 2, "seed": 5, "user": "u",
                       "logit_bias": {"7": 1}, "presence_penalty": 0.1}.items():  # fmt: skip
        assert sent[key] == value, key
    # The gateway echoes the prompt itself, so no upstream doubles it.
    assert "echo" not in sent
    assert reply.choices[0].text == "OnceHello, world! This is a fake reply."


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
async def test_langchain_structured_output(env: Env, method: str) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model="anthropic-s", base_url=env.url, api_key="x",  # type: ignore[arg-type]
        default_headers={"x-api-key": API_KEY}, max_retries=0,
    )  # fmt: skip
    structured = llm.with_structured_output(City, method=method)  # type: ignore[arg-type]
    assert await structured.ainvoke("Where?") == City(city="Paris")
    choice = env.last("anthropic")["tool_choice"]
    assert (choice["type"], choice["name"]) == ("tool", "City")
