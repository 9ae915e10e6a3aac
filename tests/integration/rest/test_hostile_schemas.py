"""Schemas a caller sends (tool parameters, structured output) that would eat the machine
if walked naively: a keyword of the wrong type is a 400 naming its path, and a schema
that asks for a huge or endless value gets a bounded answer from the simulated model,
over REST and gRPC. What they cost in CPU and memory: bench/hostile_requests.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import chat_pb2
from gateway.v1 import chat_service_pb2 as chat
from google.protobuf import struct_pb2

from server.cli.serve import Running
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API, Stubs, details

HEADERS = {"x-api-key": API_KEY, "content-type": "application/json"}
HELLO = [{"role": "user", "content": "hi"}]
WHERE = "response_format.json_schema.schema"


def structured(schema: Any) -> dict[str, Any]:
    return {
        "model": "sim-mini",
        "messages": HELLO,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }


def with_tool(parameters: Any) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    return {"model": "sim-mini", "messages": HELLO, "tools": [tool], "tool_choice": "required"}


def responses_tool(parameters: Any) -> dict[str, Any]:
    tool = {"type": "function", "name": "f", "parameters": parameters}
    return {"model": "sim-mini", "input": "hi", "store": False, "tools": [tool],
            "tool_choice": "required"}  # fmt: skip


def responses_format(schema: Any) -> dict[str, Any]:
    fmt = {"type": "json_schema", "name": "x", "schema": schema}
    return {"model": "sim-mini", "input": "hi", "store": False, "text": {"format": fmt}}


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.fixture(scope="module")
async def gw() -> AsyncIterator[Running]:
    async with running_gateway(default_config_dict()) as running:
        yield running


@pytest.fixture
async def rest(gw: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c:
        yield c


@pytest.mark.parametrize(
    ("schema", "path", "why"),
    [
        (obj(x={"type": "integer", "minimum": "abc"}), ".properties.x.minimum", "finite number"),
        (obj(x={"type": "strin"}), ".properties.x.type", "must be one of"),
        (obj(x={"type": "string", "minLength": -1}), ".properties.x.minLength", "non-negative"),
        (obj(x={"type": "array", "maxItems": 1.5}), ".properties.x.maxItems", "non-negative"),
        ({"type": "object", "required": "x"}, ".required", "property names"),
        ({"type": "object", "properties": []}, ".properties", "object of schemas"),
        ({"anyOf": {"type": "string"}}, ".anyOf", "array of schemas"),
        ({"$defs": {"a": 3}, "$ref": "#/$defs/a"}, ".$defs.a", "JSON Schema object"),
        (obj(x={"$ref": 7}), ".properties.x.$ref", "must be a string"),
    ],
)
async def test_a_keyword_of_the_wrong_type_is_a_400_naming_its_path(
    rest: httpx.AsyncClient, schema: Any, path: str, why: str
) -> None:
    for url, body, where in (
        ("/v1/chat/completions", structured(schema), WHERE),
        ("/v1/chat/completions", with_tool(schema), "tools[0].function.parameters"),
        ("/v1/responses", responses_tool(schema), "tools[0].parameters"),
        ("/v1/responses", responses_format(schema), "text.format.schema"),
    ):
        reply = await rest.post(url, json=body, headers=HEADERS)
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["param"] == where + path
        assert why in error["message"]


async def test_a_number_beyond_a_double_is_a_400(rest: httpx.AsyncClient) -> None:
    raw = json.dumps(structured({"type": "number", "minimum": 1})).replace("1}", "1e309}")
    reply = await rest.post("/v1/chat/completions", content=raw, headers=HEADERS)
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == WHERE
    assert "not finite" in reply.json()["error"]["message"]


async def test_nesting_beyond_the_bound_is_a_400(rest: httpx.AsyncClient) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(60):
        deep = {"type": "array", "items": deep}
    reply = await rest.post("/v1/chat/completions", json=structured(deep), headers=HEADERS)
    assert reply.status_code == 400
    assert "nests too deeply" in reply.json()["error"]["message"]
    raw = '{"model": "sim-mini", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    reply = await rest.post("/v1/chat/completions", content=raw, headers=HEADERS)
    assert reply.status_code == 400
    assert "nests too deeply" in reply.json()["error"]["message"]


CYCLE_WIDE = {"type": "object", "properties": {f"p{i}": {"$ref": "#"} for i in range(2000)}}
CYCLE_DEEP = {
    "$defs": {"a": obj(x={"$ref": "#/$defs/a"}, y={"$ref": "#/$defs/a"}, z={"$ref": "#/$defs/a"})},
    "$ref": "#/$defs/a",
}
HUGE = [
    CYCLE_WIDE,
    CYCLE_DEEP,
    obj(s={"type": "string", "minLength": 200_000_000}),
    obj(a={"type": "array", "minItems": 10**9, "items": {"type": "string", "minLength": 10**6}}),
    {"anyOf": [{"$ref": "#"}] * 3000},
]


@pytest.mark.parametrize("schema", HUGE, ids=["cycle-wide", "cycle-deep", "min-length",
                                              "min-items", "any-of-self"])  # fmt: skip
async def test_a_schema_asking_for_too_much_gets_a_bounded_answer(
    rest: httpx.AsyncClient, schema: Any
) -> None:
    assert len(json.dumps(schema)) < 64 * 1024
    for body in (structured(schema), with_tool(schema)):
        reply = await rest.post("/v1/chat/completions", json=body, headers=HEADERS)
        assert reply.status_code == 200, reply.text[:300]
        assert len(reply.content) < 1_000_000
        message = reply.json()["choices"][0]["message"]
        produced = message["content"] or message["tool_calls"][0]["function"]["arguments"]
        json.loads(produced)  # cut short, but still JSON


async def test_grpc_carries_a_non_finite_number_and_gets_a_400(gw: Running) -> None:
    schema = struct_pb2.Struct()
    schema.update({"type": "number", "minimum": float("inf")})
    request = chat.CreateChatCompletionRequest(
        model="sim-mini",
        messages=[chat.ChatMessage(role="user", content="hi")],
        response_format=chat_pb2.ResponseFormat(
            type="json_schema", json_schema=chat_pb2.JsonSchemaFormat(name="x", schema=schema)
        ),
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await Stubs(channel).chat.CreateChatCompletion(request, metadata=API)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violation = details(raised.value)["BadRequest"].field_violations[0]  # type: ignore[attr-defined]
    assert violation.field == WHERE
