"""The Messages API through Anthropic's own SDK, async and sync, in both facade modes:
whole and streamed replies, tool use, thinking, images, stop reasons, count_tokens, and
each error class the SDK raises for the status and body the gateway writes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import httpx2
import pydantic
import pytest

from tests.support.facade import MODES, facade, set_params
from tests.support.gateways import API_KEY, default_config_dict
from tests.support.upstreams.base import refused_url
from tests.support.upstreams.config import model, provider, with_models

HELLO: Any = [{"role": "user", "content": "Say hello."}]
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAen63NgAAAAASUVORK5CYII="
)
WEATHER: Any = {
    "name": "get_weather",
    "description": "Gets the weather of a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def client(url: str, **options: Any) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=url, api_key=API_KEY, max_retries=0, **options)


@pytest.fixture(params=MODES)
async def sdk(request: pytest.FixtureRequest) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with facade(request.param) as url, client(url) as sdk:
        yield sdk


async def test_create(sdk: anthropic.AsyncAnthropic) -> None:
    reply = await sdk.messages.create(model="sim-mini", max_tokens=100, messages=HELLO)
    assert reply.id.startswith("msg_")
    assert (reply.type, reply.role, reply.model) == ("message", "assistant", "sim-mini")
    (block,) = reply.content
    assert block.type == "text" and block.text.startswith("(simulated)")
    assert reply.stop_reason == "end_turn" and reply.stop_sequence is None
    usage = reply.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.cache_creation_input_tokens == 0 and usage.cache_read_input_tokens == 0
    extra = usage.model_extra or {}
    assert extra["total_cost_usd"] == pytest.approx(
        extra["input_cost_usd"] + extra["output_cost_usd"]
    )
    assert extra["latency_ms"] >= 0 and extra["ttft_ms"] >= 0


async def test_stream_text_and_final_message(sdk: anthropic.AsyncAnthropic) -> None:
    whole = await sdk.messages.create(model="sim-mini", max_tokens=100, messages=HELLO)
    pieces = []
    async with sdk.messages.stream(model="sim-mini", max_tokens=100, messages=HELLO) as stream:
        async for text in stream.text_stream:
            pieces.append(text)
        final = await stream.get_final_message()
    assert len(pieces) > 1
    assert "".join(pieces) == final.content[0].text == whole.content[0].text  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert final.usage.output_tokens == whole.usage.output_tokens


async def test_raw_stream_events(sdk: anthropic.AsyncAnthropic) -> None:
    stream = await sdk.messages.create(
        model="sim-mini", max_tokens=100, messages=HELLO, stream=True
    )
    kinds = [event.type async for event in stream]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and kinds[-3] == "content_block_stop"
    assert set(kinds[2:-3]) == {"content_block_delta"}


async def test_tool_use_round_trip(sdk: anthropic.AsyncAnthropic) -> None:
    messages: Any = [{"role": "user", "content": "Weather in Paris?"}]
    first = await sdk.messages.create(
        model="sim-mini", max_tokens=200, messages=messages, tools=[WEATHER]
    )
    assert first.stop_reason == "tool_use"
    (call,) = [b for b in first.content if b.type == "tool_use"]
    assert call.name == "get_weather" and isinstance(call.input, dict)
    assert isinstance(call.input["city"], str)  # type: ignore[index]
    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": "18°C, sunny"}]},
    ]  # fmt: skip
    second = await sdk.messages.create(
        model="sim-mini", max_tokens=200, messages=messages, tools=[WEATHER]
    )
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "text"


async def test_streamed_tool_use(sdk: anthropic.AsyncAnthropic) -> None:
    async with sdk.messages.stream(
        model="sim-mini", max_tokens=200, messages=HELLO, tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
    ) as stream:  # fmt: skip
        final = await stream.get_final_message()
    (call,) = final.content
    assert call.type == "tool_use" and set(call.input) == {"city"}  # type: ignore[arg-type]
    assert final.stop_reason == "tool_use"


async def test_thinking_is_shown_signed_and_taken_back(sdk: anthropic.AsyncAnthropic) -> None:
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    reply = await sdk.messages.create(
        model="sim-mini", max_tokens=2000, messages=HELLO, thinking=thinking
    )
    first, text = reply.content
    assert first.type == "thinking" and first.thinking and first.signature
    assert text.type == "text"
    async with sdk.messages.stream(
        model="sim-mini", max_tokens=2000, messages=HELLO, thinking=thinking
    ) as stream:
        streamed = await stream.get_final_message()
    assert streamed.content[0] == first
    follow_up: Any = [*HELLO, {"role": "assistant", "content": reply.content},
                      {"role": "user", "content": "And then?"}]  # fmt: skip
    again = await sdk.messages.create(
        model="sim-mini", max_tokens=2000, messages=follow_up, thinking=thinking
    )
    assert again.content[-1].type == "text"


async def test_image_and_system_blocks(sdk: anthropic.AsyncAnthropic) -> None:
    reply = await sdk.messages.create(
        model="sim-mini",
        max_tokens=50,
        system=[{"type": "text", "text": "Describe.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PIXEL}},
            {"type": "text", "text": "What is this?"}]}],
    )  # fmt: skip
    assert reply.content[0].type == "text"
    # An image counts as an image does in estimates, far above its few bytes.
    assert reply.usage.input_tokens > 700


async def test_stop_reasons(sdk: anthropic.AsyncAnthropic) -> None:
    whole = await sdk.messages.create(model="sim-mini", max_tokens=100, messages=HELLO)
    words = whole.content[0].text.split()  # type: ignore[union-attr]
    stop = " " + words[2]
    cut = await sdk.messages.create(
        model="sim-mini", max_tokens=100, messages=HELLO, stop_sequences=[stop]
    )
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    assert stop not in cut.content[0].text  # type: ignore[union-attr]
    short = await sdk.messages.create(model="sim-mini", max_tokens=2, messages=HELLO)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 2


async def test_count_tokens(sdk: anthropic.AsyncAnthropic) -> None:
    counted = await sdk.messages.count_tokens(model="sim-mini", messages=HELLO, tools=[WEATHER])
    reply = await sdk.messages.create(
        model="sim-mini",
        max_tokens=50,
        messages=HELLO,
        tools=[WEATHER],
        tool_choice={"type": "none"},
    )
    assert counted.input_tokens == reply.usage.input_tokens
    assert (counted.model_extra or {})["method"] == "estimate"


async def test_bearer_key() -> None:
    async with (
        facade("in_process") as url,
        anthropic.AsyncAnthropic(base_url=url, auth_token=API_KEY, max_retries=0) as sdk,
    ):
        reply = await sdk.messages.create(model="sim-mini", max_tokens=10, messages=HELLO)
    assert reply.content


def test_sync_client() -> None:
    async def run() -> None:
        async with facade("in_process") as url:
            await asyncio.to_thread(_sync_calls, url)

    asyncio.run(run())


def _sync_calls(url: str) -> None:
    with anthropic.Anthropic(base_url=url, api_key=API_KEY, max_retries=0) as sdk:
        reply = sdk.messages.create(model="sim-mini", max_tokens=50, messages=HELLO)
        with sdk.messages.stream(model="sim-mini", max_tokens=50, messages=HELLO) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text == reply.content[0].text == final.content[0].text  # type: ignore[union-attr]
        assert sdk.messages.count_tokens(model="sim-mini", messages=HELLO).input_tokens > 0
        with pytest.raises(anthropic.NotFoundError):
            sdk.messages.create(model="no-such-model", max_tokens=5, messages=HELLO)


def _errors_config() -> dict[str, Any]:
    data = with_models(
        model("gone", provider("gone-p", "openai", refused_url())),
    )
    set_params(data, "sim-standard", error_rate=1)
    set_params(data, "sim-pro", ttft_ms=3000)
    data["server"]["request_timeout_s"] = 0.5
    return data


@pytest.fixture(scope="module")
async def erring_url() -> AsyncIterator[str]:
    async with facade("in_process", _errors_config()) as url:
        yield url


@pytest.mark.parametrize(
    ("kwargs", "error", "status", "kind"),
    [
        ({"extra_body": {"best_of": 2}}, anthropic.BadRequestError, 400, "invalid_request_error"),
        ({"max_tokens": 0}, anthropic.BadRequestError, 400, "invalid_request_error"),
        ({"model": "no-such-model"}, anthropic.NotFoundError, 404, "not_found_error"),
        ({"model": "gone"}, anthropic.OverloadedError, 529, "overloaded_error"),
        ({"model": "sim-standard"}, anthropic.InternalServerError, 502, "api_error"),
        ({"model": "sim-pro"}, anthropic.GatewayTimeoutError, 504, "timeout_error"),
    ],
)
async def test_error_classes(
    erring_url: str, kwargs: dict[str, Any], error: type[Exception], status: int, kind: str
) -> None:
    request: Any = {"model": "sim-mini", "max_tokens": 10, "messages": HELLO, **kwargs}
    async with client(erring_url) as sdk:
        with pytest.raises(error) as raised:
            await sdk.messages.create(**request)
    assert isinstance(raised.value, anthropic.APIStatusError)
    assert raised.value.status_code == status
    body: Any = raised.value.body
    assert body["type"] == "error" and body["error"]["type"] == kind
    assert "Traceback" not in body["error"]["message"]


async def test_authentication_and_rate_limit_errors() -> None:
    data = default_config_dict()
    data["keys"][0]["requests_per_minute"] = 1
    async with facade("in_process", data) as url:
        async with anthropic.AsyncAnthropic(base_url=url, api_key="wrong", max_retries=0) as bad:
            with pytest.raises(anthropic.AuthenticationError) as denied:
                await bad.messages.create(model="sim-mini", max_tokens=5, messages=HELLO)
        assert denied.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
        async with client(url) as sdk:
            await sdk.messages.create(model="sim-mini", max_tokens=5, messages=HELLO)
            with pytest.raises(anthropic.RateLimitError) as limited:
                await sdk.messages.create(model="sim-mini", max_tokens=5, messages=HELLO)
    assert int(limited.value.response.headers["retry-after"]) >= 1


async def test_models_in_anthropic_shape(sdk: anthropic.AsyncAnthropic) -> None:
    page = await sdk.models.list(limit=2)
    assert [m.id for m in page.data] == ["sim-mini", "sim-standard"]
    assert page.has_more and page.first_id == "sim-mini" and page.last_id == "sim-standard"
    everything = [m.id async for m in sdk.models.list(limit=2)]  # the SDK follows the cursor
    assert everything == [
        "sim-mini",
        "sim-standard",
        "sim-pro",
        "sim-embed",
        "sim-rerank",
        "sim-moderation",
        "sim-audio",
        "sim-image",
    ]
    one = await sdk.models.retrieve("sim-pro")
    assert (one.type, one.id, one.display_name) == ("model", "sim-pro", "sim-pro")
    assert one.created_at.year >= 2026
    with pytest.raises(anthropic.NotFoundError):
        await sdk.models.retrieve("no-such-model")


async def test_models_without_anthropic_version_keep_the_gateway_shape() -> None:
    async with facade("in_process") as url, httpx.AsyncClient(base_url=url) as c:
        plain = (await c.get("/v1/models", headers={"x-api-key": API_KEY})).json()
        assert plain["object"] == "list" and "has_more" not in plain
        assert set(plain["data"][0]) == {"id", "object", "created", "owned_by"}
        raw = (
            await c.get(
                "/v1/models", headers={"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
            )
        ).json()
    assert set(raw) == {"data", "has_more", "first_id", "last_id"}
    assert raw["data"][0] == {"type": "model", "id": "sim-mini", "display_name": "sim-mini",
                              "created_at": "2026-01-01T00:00:00Z"}  # fmt: skip


async def test_aliases_and_routing_profiles_as_the_model() -> None:
    data = default_config_dict()
    data["models"][0]["aliases"] = ["claude-sonnet-4-6"]
    async with facade("in_process", data) as url, client(url) as sdk:
        aliased = await sdk.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=HELLO
        )
        assert aliased.model == "sim-mini"
        raw = await sdk.messages.with_raw_response.create(
            model="economy", max_tokens=10, messages=HELLO
        )
        routed = await raw.parse()
    assert routed.model in ("sim-mini", "sim-standard")
    decision = raw.headers["x-gateway-route"]
    assert decision.startswith("profile=economy; model=") and f"model={routed.model};" in decision


class Person(pydantic.BaseModel):
    name: str
    age: int
    languages: list[str]


async def test_parse_gives_a_typed_answer_on_any_model(sdk: anthropic.AsyncAnthropic) -> None:
    """messages.parse sends output_config.format (json_schema), which every model serves."""
    ask: Any = [{"role": "user", "content": "Ada, 36, speaks English and French."}]
    for name in ("sim-mini", "sim-pro"):
        reply = await sdk.messages.parse(
            model=name, max_tokens=300, messages=ask, output_format=Person
        )
        assert isinstance(reply.parsed_output, Person), reply.content
        async with sdk.messages.stream(
            model=name, max_tokens=300, messages=ask, output_format=Person
        ) as stream:
            streamed = await stream.get_final_message()
        assert streamed.parsed_output == reply.parsed_output


async def test_the_tool_runner_falls_back_to_sending_the_conversation(
    sdk: anthropic.AsyncAnthropic,
) -> None:
    """The runner asks for a server-held thread first; the gateway answers as Anthropic
    does where threads are off, and the runner carries on with the whole conversation."""
    sent: list[dict[str, Any]] = []

    async def note(request: httpx2.Request) -> None:
        sent.append(json.loads(request.content))

    @anthropic.beta_async_tool
    async def get_weather(city: str) -> str:
        """Gets the weather of a city."""
        return f"18°C in {city}"

    watched = sdk.with_options(http_client=httpx2.AsyncClient(event_hooks={"request": [note]}))
    runner = watched.beta.messages.tool_runner(
        model="sim-mini", max_tokens=300, tools=[get_weather],
        messages=[{"role": "user", "content": "Weather in Paris?"}],
    )  # fmt: skip
    replies = [message async for message in runner]
    assert [r.stop_reason for r in replies] == ["tool_use", "end_turn"]
    assert "thread" in sent[0] and not any("thread" in body for body in sent[1:])
    last = sent[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert last[-1]["content"][0]["type"] == "tool_result"
