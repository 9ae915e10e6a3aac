"""A schema reaches the upstream as the same bytes whatever process serves it: keys
sorted, a schema's properties in the order its `required` lists them (the caller's
order, as schema generators write both), from chat completions, the Messages API and
the Responses API. A Struct is a map whose own order changed from process to process,
so the same tools differed by worker and missed the upstream's prompt cache.
A number no double holds is a 400 naming the schema, not a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

HEADERS = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
SCHEMA = {
    "type": "object",
    "required": ["zeta", "alpha"],
    "properties": {
        "mid": {"type": "integer", "maximum": 10},
        "zeta": {"type": "string", "enum": ["b", "a"]},
        "alpha": {"type": "object", "properties": {"y": {}, "x": {}}, "required": ["y"]},
    },
    "additionalProperties": False,
}
KEYS = ["additionalProperties", "properties", "required", "type"]
PROPERTIES = ["zeta", "alpha", "mid"]


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, FakeUpstream]]]:
    async with serving(OpenAIWire()) as oa, serving(AnthropicWire()) as an:
        models = [model("oa", provider("oa-p", "openai", oa.url)),
                  model("an", provider("an-p", "anthropic", an.url))]  # fmt: skip
        async with (
            running_gateway(with_models(*models)) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as http,
        ):
            yield http, {"oa": oa, "an": an}


def chat(schema: Any) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "pick", "parameters": schema}}
    return {"model": "oa", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}


def assert_ordered(schema: dict[str, Any]) -> None:
    assert list(schema) == KEYS
    assert list(schema["properties"]) == PROPERTIES
    assert list(schema["properties"]["alpha"]["properties"]) == ["y", "x"]
    assert schema["properties"]["zeta"]["enum"] == ["b", "a"]  # arrays keep their order
    assert schema["properties"]["mid"]["maximum"] == 10 and schema == SCHEMA


async def test_chat_tools_and_formats_reach_the_upstream_in_one_order(env) -> None:
    http, fakes = env
    fmt = {"type": "json_schema", "json_schema": {"name": "out", "schema": SCHEMA}}
    body = {**chat(SCHEMA), "response_format": fmt}
    reply = await http.post("/v1/chat/completions", json=body, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    sent = fakes["oa"].seen[-1].body
    assert_ordered(sent["tools"][0]["function"]["parameters"])
    assert_ordered(sent["response_format"]["json_schema"]["schema"])


async def test_messages_tools_reach_the_upstream_in_one_order(env) -> None:
    http, fakes = env
    body = {"model": "an", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "pick", "input_schema": SCHEMA}]}  # fmt: skip
    reply = await http.post("/v1/messages", json=body, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    assert_ordered(fakes["an"].seen[-1].body["tools"][0]["input_schema"])


async def test_responses_tools_reach_the_upstream_in_one_order(env) -> None:
    http, fakes = env
    body = {"model": "oa", "input": "hi", "store": False,
            "tools": [{"type": "function", "name": "pick", "parameters": SCHEMA}]}  # fmt: skip
    reply = await http.post("/v1/responses", json=body, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    assert_ordered(fakes["oa"].seen[-1].body["tools"][0]["function"]["parameters"])


async def test_a_number_no_double_holds_is_a_400_naming_the_schema(env) -> None:
    http, _ = env
    huge = "1" + "0" * 400  # JSON allows it; a double does not
    for path, raw, param in (
        ("/v1/chat/completions",
         '{"model":"oa","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function",'
         '"function":{"name":"f","parameters":{"type":"integer","maximum":' + huge + "}}}]}",
         "tools[0].function.parameters"),
        ("/v1/messages",
         '{"model":"an","max_tokens":5,"messages":[{"role":"user","content":"hi"}],'
         '"tools":[{"name":"f","input_schema":{"type":"integer","maximum":-' + huge + "}}]}",
         "tools[0].input_schema"),
    ):  # fmt: skip
        reply = await http.post(
            path, content=raw, headers={**HEADERS, "content-type": "application/json"}
        )
        assert reply.status_code == 400, reply.text
        assert "not finite" in reply.text and param in reply.text
