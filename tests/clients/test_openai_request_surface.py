"""The OpenAI request surface through the `openai` SDK against the simulated default:
tools (the whole loop, streamed calls accumulated by the SDK), structured output with
`parse`, image parts, n, logprobs, and every other field honoured or refused by name."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.support.facade import MODES, client, facade
from tests.support.gateways import API_KEY

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Gets the weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "where": {
                    "type": "object",
                    "properties": {
                        "lat": {"type": "number"},
                        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    },
                    "required": ["lat", "tags"],
                },
            },
            "required": ["city", "unit", "days", "where"],
            "additionalProperties": False,
        },
    },
}
A = {"x-api-key": API_KEY}
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@pytest.fixture(params=MODES)
async def sdk(request: pytest.FixtureRequest) -> AsyncIterator[openai.AsyncOpenAI]:
    async with facade(request.param) as url:
        sdk = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key="unused", default_headers=A, max_retries=0
        )
        async with sdk:
            yield sdk


def _valid_weather(arguments: dict[str, Any]) -> None:
    assert isinstance(arguments["city"], str)
    assert arguments["unit"] in ("celsius", "fahrenheit")
    assert isinstance(arguments["days"], int) and 1 <= arguments["days"] <= 7
    assert isinstance(arguments["where"]["lat"], float | int)
    assert arguments["where"]["tags"] and all(
        isinstance(t, str) for t in arguments["where"]["tags"]
    )
    assert set(arguments) == {"city", "unit", "days", "where"}


async def test_tool_loop(sdk: openai.AsyncOpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    first = await sdk.chat.completions.create(
        model="sim-mini", messages=messages, tools=[WEATHER_TOOL]
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    _valid_weather(json.loads(call.function.arguments))
    messages.append(choice.message)
    messages.append({"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'})
    second = await sdk.chat.completions.create(
        model="sim-mini", messages=messages, tools=[WEATHER_TOOL]
    )
    answer = second.choices[0]
    assert answer.finish_reason == "stop"
    assert not answer.message.tool_calls
    assert (answer.message.content or "").startswith("(simulated)")
    # The same call again is the same call: the simulated model is deterministic.
    again = await sdk.chat.completions.create(
        model="sim-mini", messages=messages[:1], tools=[WEATHER_TOOL]
    )
    assert again.choices[0].message.tool_calls == choice.message.tool_calls


async def test_tool_choice_none_and_forced(sdk: openai.AsyncOpenAI) -> None:
    other = {"type": "function", "function": {"name": "noop"}}
    messages: Any = [{"role": "user", "content": "hi"}]
    plain = await sdk.chat.completions.create(
        model="sim-mini", messages=messages, tools=[WEATHER_TOOL, other], tool_choice="none"
    )
    assert plain.choices[0].finish_reason == "stop" and not plain.choices[0].message.tool_calls
    forced = await sdk.chat.completions.create(
        model="sim-mini", messages=messages, tools=[WEATHER_TOOL, other],
        tool_choice={"type": "function", "function": {"name": "noop"}},
        parallel_tool_calls=False,
    )  # fmt: skip
    (call,) = forced.choices[0].message.tool_calls or []
    assert call.function.name == "noop" and json.loads(call.function.arguments) == {}


async def test_streamed_tool_call_accumulated_by_the_sdk(sdk: openai.AsyncOpenAI) -> None:
    async with sdk.chat.completions.stream(
        model="sim-mini",
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        tools=[WEATHER_TOOL],
    ) as stream:
        fragments = 0
        async for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                fragments += 1
        final = await stream.get_final_completion()
    assert fragments > 1
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"
    _valid_weather(json.loads(call.function.arguments))


async def test_streamed_tool_call_framing() -> None:
    """Chunks as OpenAI frames them: index, id, type and name first (empty arguments),
    then only index and argument fragments; the last chunk says tool_calls."""
    async with client(MODES[0]) as c:
        r = await c.post(
            "/v1/chat/completions",
            headers=A,
            json={"model": "sim-mini", "stream": True, "tools": [WEATHER_TOOL],
                  "messages": [{"role": "user", "content": "x"}]},
        )  # fmt: skip
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant"}
    head = deltas[1]["tool_calls"][0]
    assert set(head) == {"index", "id", "type", "function"}
    assert head["index"] == 0 and head["type"] == "function"
    assert head["function"] == {"name": "get_weather", "arguments": ""}
    rest = [d["tool_calls"][0] for d in deltas[2:-1]]
    assert rest and all(set(d) == {"index", "function"} and set(d["function"]) == {"arguments"}
                        for d in rest)  # fmt: skip
    _valid_weather(json.loads("".join(d["function"]["arguments"] for d in rest)))
    assert deltas[-1] == {} and chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


class Step(BaseModel):
    explanation: str
    output: str


class Solution(BaseModel):
    steps: list[Step]
    final_answer: str
    confidence: float | None
    kind: int


async def test_parse_with_a_pydantic_model(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.chat.completions.parse(
        model="sim-mini",
        messages=[{"role": "user", "content": "Solve 8x + 7 = -23"}],
        response_format=Solution,
    )
    parsed = reply.choices[0].message.parsed
    assert isinstance(parsed, Solution)
    assert parsed.steps and parsed.final_answer.startswith("(simulated)")


async def test_json_object(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.chat.completions.create(
        model="sim-mini",
        messages=[{"role": "user", "content": "Answer in JSON."}],
        response_format={"type": "json_object"},
    )
    value = json.loads(reply.choices[0].message.content or "")
    assert isinstance(value, dict) and value["text"].startswith("(simulated)")


async def test_image_parts_and_roles(sdk: openai.AsyncOpenAI) -> None:
    messages: Any = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "name": "ann", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        ]},
    ]  # fmt: skip
    reply = await sdk.chat.completions.create(model="sim-mini", messages=messages)
    text_only = await sdk.chat.completions.create(
        model="sim-mini",
        messages=[messages[0], {"role": "user", "content": "What is in this picture?"}],
    )
    assert reply.usage and text_only.usage
    # Each image counts (a fixed estimate) in the prompt tokens.
    assert reply.usage.prompt_tokens >= text_only.usage.prompt_tokens + 2 * 765


async def test_n_choices_and_logprobs(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.chat.completions.create(
        model="sim-mini", messages=[{"role": "user", "content": "hi"}], n=3,
        logprobs=True, top_logprobs=2, seed=7, user="u-1", presence_penalty=0.5,
        frequency_penalty=-0.5, logit_bias={"50256": -100}, max_completion_tokens=5,
        stop=["zzz"], reasoning_effort="low", metadata={"team": "a"},
    )  # fmt: skip
    assert [c.index for c in reply.choices] == [0, 1, 2]
    texts = [c.message.content for c in reply.choices]
    assert len(set(texts)) == 3
    for c in reply.choices:
        assert c.finish_reason == "length"
        assert c.logprobs and c.logprobs.content and len(c.logprobs.content) == 5
        entry = c.logprobs.content[0]
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 2
        assert entry.bytes == list(entry.token.encode())
    plain = await sdk.chat.completions.create(
        model="sim-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert plain.choices[0].logprobs is None


async def test_n_choices_streamed(sdk: openai.AsyncOpenAI) -> None:
    stream = await sdk.chat.completions.create(
        model="sim-mini", messages=[{"role": "user", "content": "hi"}], n=2, stream=True
    )
    texts = {0: "", 1: ""}
    finishes = {}
    async for chunk in stream:
        for c in chunk.choices:
            texts[c.index] += c.delta.content or ""
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    assert texts[0] != texts[1] and all(t.startswith("(simulated)") for t in texts.values())
    assert finishes == {0: "stop", 1: "stop"}


async def test_completions_fields(sdk: openai.AsyncOpenAI) -> None:
    reply = await sdk.completions.create(
        model="sim-mini", prompt="Once upon a time", n=2, echo=True, logprobs=2, seed=1,
        max_tokens=4, best_of=3, user="u", suffix="The end.", logit_bias={"1": 1},
    )  # fmt: skip
    assert [c.index for c in reply.choices] == [0, 1]
    for c in reply.choices:
        assert c.text.startswith("Once upon a time(simulated)")
        assert c.logprobs and len(c.logprobs.tokens or []) == 4
        assert all(len(t) == 2 for t in c.logprobs.top_logprobs or [])


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"frobnicate": 1}, "frobnicate"),
        ({"messages": [{"role": "user", "content": "x", "mood": "happy"}]}, "messages[0].mood"),
        ({"tools": [{**WEATHER_TOOL, "extra": 1}]}, "tools[0].extra"),
        ({"audio": {"voice": "alloy", "format": "mp3"}}, "audio"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"n": 0}, "n"),
        ({"n": 129}, "n"),
        ({"presence_penalty": 2.5}, "presence_penalty"),
        ({"frequency_penalty": -3}, "frequency_penalty"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"logit_bias": {"7": 101}}, "logit_bias.7"),
        ({"logit_bias": {"word": 1}}, "logit_bias.word"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"tools": [WEATHER_TOOL], "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "function",
          "function": {"name": "nope"}}}, "tool_choice.function.name"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": [{"type": "audio"}]}]},
         "messages[0].content[0].type"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url",
          "image_url": {"url": "http://example.com/a.png"}}]}]},
         "messages[0].content[0].image_url.url"),
        ({"messages": [{"role": "system", "content": [{"type": "image_url",
          "image_url": {"url": PIXEL}}]}]}, "messages[0].content[0].type"),
    ],
)  # fmt: skip
async def test_refused_by_name(body: dict[str, Any], param: str) -> None:
    async with client(MODES[0]) as c:
        request = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}], **body}
        r = await c.post("/v1/chat/completions", headers=A, json=request)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert param.split(".")[0].split("[")[0] in error["message"]


async def test_unknown_completion_field_and_prompt_array() -> None:
    async with client(MODES[0]) as c:
        r = await c.post("/v1/completions", headers=A,
                         json={"model": "sim-mini", "prompt": "x", "messages": []})  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
        assert r.json()["error"]["code"] == "unknown_parameter"
        r = await c.post("/v1/completions", headers=A,
                         json={"model": "sim-mini", "prompt": "x", "best_of": 1, "n": 2})  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["param"] == "best_of"
        r = await c.post("/v1/completions", headers=A,
                         json={"model": "sim-mini", "prompt": "x", "logprobs": 6})  # fmt: skip
        assert r.status_code == 400 and r.json()["error"]["param"] == "logprobs"


async def test_response_json_shapes() -> None:
    """Content is a string (never an array) in replies, tool_calls absent without
    calls, arguments a JSON string."""
    async with client(MODES[0]) as c:
        plain = await c.post("/v1/chat/completions", headers=A, json={
            "model": "sim-mini", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi"}]}]})  # fmt: skip
        called = await c.post("/v1/chat/completions", headers=A, json={
            "model": "sim-mini", "tools": [WEATHER_TOOL],
            "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
    message = plain.json()["choices"][0]["message"]
    assert set(message) == {"role", "content", "refusal", "annotations"}
    assert isinstance(message["content"], str)
    assert plain.json()["choices"][0]["logprobs"] is None  # as OpenAI writes it
    message = called.json()["choices"][0]["message"]
    assert message["content"] is None  # as OpenAI writes a reply that is only tool calls
    assert isinstance(message["tool_calls"][0]["function"]["arguments"], str)


async def test_capability_missing_on_every_provider_is_400() -> None:
    """A provider whose config narrows its capabilities: requests that need what it
    lacks get 400 naming the capability and the model."""
    from tests.support.gateways import default_config_dict

    data = default_config_dict()
    data["models"][0]["providers"] = [
        {**p, "capabilities": ["n"]} for p in data["models"][0]["providers"]
    ]
    model = data["models"][0]["id"]
    async with client(MODES[0], data) as c:
        r = await c.post("/v1/chat/completions", headers=A, json={
            "model": model, "tools": [WEATHER_TOOL],
            "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["code"] == "unsupported_capability" and error["param"] == "tools"
        assert "tools" in error["message"] and model in error["message"]
        ok = await c.post("/v1/chat/completions", headers=A, json={
            "model": model, "n": 2, "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert ok.status_code == 200 and len(ok.json()["choices"]) == 2
        listed = await c.get(f"/v1/providers?model={model}", headers=A)
        assert {tuple(p["capabilities"]) for p in listed.json()["providers"]} == {("n",)}
        default = await c.get("/v1/providers?model=sim-pro", headers=A)
        assert "tools" in default.json()["providers"][0]["capabilities"]
