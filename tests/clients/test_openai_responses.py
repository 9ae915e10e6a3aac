"""/v1/responses through the `openai` SDK, as a user of the Responses API calls it:
create, stream, parse, retrieve, delete, input items, a function-tool round trip, and
a conversation by previous_response_id that moves between upstream kinds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.support.facade import MODES, set_params
from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

OTHER_KEY = "gw-test-other-api-key-0000"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def _config() -> dict[str, Any]:
    data = with_models()
    data["keys"].append({"name": "other", "kind": "api", "secret": OTHER_KEY})
    return data


def _client(url: str, key: str = API_KEY) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


@pytest.fixture(params=MODES)
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    data = _config()
    async with running_gateway(data) as gw:
        if request.param == "in_process":
            yield f"http://127.0.0.1:{gw.http_port}"
        else:
            async with running_gateway(data, grpc_target=f"127.0.0.1:{gw.grpc_port}") as edge:
                yield f"http://127.0.0.1:{edge.http_port}"


@pytest.fixture
async def sdk(url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    async with _client(url) as client:
        yield client


async def test_create(sdk: openai.AsyncOpenAI) -> None:
    response = await sdk.responses.create(
        model="sim-mini", input="Say hello.", instructions="Be brief.", metadata={"k": "v"}
    )
    assert response.id.startswith("resp_")
    assert response.object == "response"
    assert response.status == "completed"
    assert response.model == "sim-mini"
    assert response.instructions == "Be brief."
    assert response.metadata == {"k": "v"}
    assert response.output_text.startswith("(simulated)")
    (message,) = response.output
    assert message.type == "message" and message.role == "assistant"
    usage = response.usage
    assert usage is not None
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens > 0
    assert usage.input_tokens_details.cached_tokens == 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    extra = usage.model_extra or {}
    assert extra["total_cost_usd"] > 0 and extra["latency_ms"] >= 0


async def test_stream(sdk: openai.AsyncOpenAI) -> None:
    seen = []
    async with sdk.responses.stream(model="sim-mini", input="Say hello.") as stream:
        async for event in stream:
            seen.append(event)
        final = await stream.get_final_response()
    kinds = [e.type for e in seen]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    text = "".join(e.delta for e in seen if e.type == "response.output_text.delta")
    assert final.output_text == text and text.startswith("(simulated)")
    assert final.usage is not None and final.usage.output_tokens > 0


class Weather(BaseModel):
    city: str
    degrees: int


async def test_parse(sdk: openai.AsyncOpenAI) -> None:
    parsed = await sdk.responses.parse(model="sim-mini", input="Weather?", text_format=Weather)
    assert isinstance(parsed.output_parsed, Weather)


async def test_retrieve_list_and_delete(sdk: openai.AsyncOpenAI, url: str) -> None:
    created = await sdk.responses.create(
        model="sim-mini",
        input=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "Hello"}]},
        ],
    )
    fetched = await sdk.responses.retrieve(created.id)
    assert fetched.id == created.id and fetched.output_text == created.output_text
    items = [item async for item in sdk.responses.input_items.list(created.id, order="asc")]
    assert [i.role for i in items] == ["developer", "user"]  # type: ignore[union-attr]
    page = await sdk.responses.input_items.list(created.id, limit=1)
    assert len(page.data) == 1 and page.has_more
    async with _client(url, OTHER_KEY) as other:
        with pytest.raises(openai.NotFoundError):
            await other.responses.retrieve(created.id)
        with pytest.raises(openai.NotFoundError):
            await other.responses.delete(created.id)
    await sdk.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(created.id)


async def test_not_stored(sdk: openai.AsyncOpenAI) -> None:
    response = await sdk.responses.create(model="sim-mini", input="Hi", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.retrieve(response.id)


async def test_function_tool_round_trip(sdk: openai.AsyncOpenAI) -> None:
    first = await sdk.responses.create(
        model="sim-mini",
        input="Weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
    )
    (call,) = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert "city" in json.loads(call.arguments)
    second = await sdk.responses.create(
        model="sim-mini",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18C"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text.startswith("(simulated)")
    assert second.previous_response_id == first.id


async def test_every_field_the_sdk_types_allow_on_an_input_item(sdk: openai.AsyncOpenAI) -> None:
    """A turn replayed whole, each item with every field OpenAI's API takes on it (the
    SDK's ResponseInputItemParam types): Codex sends `name` on a function_call_output."""
    first = await sdk.responses.create(model="sim-mini", input="Weather in Paris?", tools=[WEATHER])  # type: ignore[list-item]
    (call,) = first.output
    assert call.type == "function_call"
    direct = {"type": "direct"}
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "Weather in Paris?", "phase": None},
        {"type": "reasoning", "id": "rs_1", "summary": [], "status": "completed",
         "content": [{"type": "reasoning_text", "text": "Look it up."}], "encrypted_content": None},
        {"type": "function_call", "id": call.id, "call_id": call.call_id, "name": call.name,
         "arguments": call.arguments, "status": "completed", "caller": direct},
        {"type": "function_call_output", "id": "fco_1", "call_id": call.call_id,
         "name": call.name, "output": "18C", "status": "completed", "caller": direct},
    ]  # fmt: skip
    second = await sdk.responses.create(model="sim-mini", input=items, tools=[WEATHER])  # type: ignore[list-item]
    assert second.output_text.startswith("(simulated)")
    listed = await sdk.responses.input_items.list(second.id, order="asc")
    output = next(i for i in listed.data if i.type == "function_call_output")
    assert output.model_dump()["name"] == call.name
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(
            model="sim-mini",
            input=[{**items[3], "arguments": "{}"}],
            tools=[WEATHER],  # type: ignore[list-item]
        )
    assert caught.value.body["param"] == "input[0].arguments"  # type: ignore[index]


async def test_streamed_function_call(sdk: openai.AsyncOpenAI) -> None:
    async with sdk.responses.stream(
        model="sim-mini",
        input="Weather?",
        tools=[WEATHER],  # type: ignore[list-item]
    ) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert kinds[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert final.output[0].type == "function_call"


async def test_bad_requests(sdk: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="sim-mini", input="x", extra_body={"frobnicate": 1})
    assert caught.value.body["param"] == "frobnicate"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="sim-mini", input="x", background=True)
    assert caught.value.body["param"] == "background"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk.responses.create(model="sim-mini", input="x", tools=[{"type": "web_search"}])
    assert caught.value.body["param"] == "tools[0].type"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        await sdk.responses.create(model="sim-mini", input="x", previous_response_id="resp_nope")


async def test_conversation_across_upstream_kinds() -> None:
    """One conversation by previous_response_id: a simulated model, then a model on an
    OpenAI-compatible upstream, then one on Anthropic: each gets the turns before."""
    async with serving(OpenAIWire()) as oai, serving(AnthropicWire()) as ant:
        data = with_models(
            model("oai", provider("oai-primary", "openai", oai.url)),
            model("ant", provider("ant-primary", "anthropic", ant.url)),
        )
        async with running_gateway(data) as gw, _client(f"http://127.0.0.1:{gw.http_port}") as sdk:
            first = await sdk.responses.create(model="sim-mini", input="My name is Ada.")
            second = await sdk.responses.create(
                model="oai", input="What is my name?", previous_response_id=first.id
            )
            assert second.output_text == "Hello, world! This is a fake reply."
            sent = oai.seen[-1].body["messages"]
            assert [m["role"] for m in sent] == ["user", "assistant", "user"]
            assert sent[0]["content"] == "My name is Ada."
            assert sent[1]["content"] == first.output_text
            async with sdk.responses.stream(
                model="ant",
                input="And again?",
                previous_response_id=second.id,
                instructions="Answer briefly.",
            ) as stream:
                third = await stream.get_final_response()
            assert third.output_text == "Hello, world! This is a fake reply."
            body = ant.seen[-1].body
            assert body["system"] == "Answer briefly."
            assert [m["role"] for m in body["messages"]] == ["user", "assistant"] * 2 + ["user"]


async def test_failure_mid_stream_is_response_failed(config_dict: dict[str, Any]) -> None:
    data = set_params(config_dict, "sim-mini", fail_after_tokens=3)
    for m in data["models"]:
        if m["id"] == "sim-mini":
            m["providers"] = m["providers"][:1]
    data["storage"] |= {"sqlite_path": ":memory:"}
    async with running_gateway(data) as gw, _client(f"http://127.0.0.1:{gw.http_port}") as sdk:
        stream = await sdk.responses.create(model="sim-mini", input="Hi", stream=True)
        kinds = []
        async for event in stream:
            kinds.append(event.type)
            if event.type == "response.failed":
                failed = event.response
        assert kinds[-1] == "response.failed"
        assert "response.completed" not in kinds
        assert failed.status == "failed" and failed.error is not None
        assert failed.error.code == "server_error"
        assert "stream cut" in failed.error.message
        assert gw.gateway is not None and gw.gateway.store is not None
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT status, error_reason, completion_tokens FROM usage_records "
            "WHERE method = 'StreamResponse'"
        )
        assert rows == [{"status": "UNAVAILABLE", "error_reason": "UPSTREAM_ERROR",
                         "completion_tokens": rows[0]["completion_tokens"]}]  # fmt: skip
        assert rows[0]["completion_tokens"] > 0


async def test_incomplete_when_cut_short(config_dict: dict[str, Any]) -> None:
    data = set_params(config_dict, "sim-mini", min_reply_tokens=40, max_reply_tokens=40)
    async with running_gateway(data) as gw, _client(f"http://127.0.0.1:{gw.http_port}") as sdk:
        response = await sdk.responses.create(model="sim-mini", input="Hi", max_output_tokens=16)
        assert response.status == "incomplete"
        assert response.incomplete_details is not None
        assert response.incomplete_details.reason == "max_output_tokens"
        assert response.usage is not None and response.usage.output_tokens == 16
        async with sdk.responses.stream(
            model="sim-mini", input="Hi", max_output_tokens=16
        ) as stream:
            kinds = [event.type async for event in stream]
        assert kinds[-1] == "response.incomplete"


async def test_routing_profile_as_model(sdk: openai.AsyncOpenAI) -> None:
    response = await sdk.responses.with_raw_response.create(model="economy", input="Hi")
    assert response.headers["x-gateway-route"].startswith("profile=economy")
    assert response.parse().model.startswith("sim-")


async def test_logprobs(sdk: openai.AsyncOpenAI) -> None:
    response = await sdk.responses.create(
        model="sim-mini", input="Hi", include=["message.output_text.logprobs"], top_logprobs=2
    )
    part = response.output[0].content[0]  # type: ignore[union-attr]
    assert part.logprobs and len(part.logprobs[0].top_logprobs) == 2
