"""Core pieces of the OpenAI request surface, without a transport: schema instances,
token estimates and reservations of every part, capability filtering."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from server.application.pipeline.catalog import Catalog
from server.application.pipeline.engine import capable
from server.base import costs, tokens
from server.base.config import Config, Price
from server.base.errors import Unsupported
from server.base.generation import (
    Capability,
    GenerationRequest,
    ImagePart,
    Message,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolSpec,
)
from server.providers import registry
from server.providers.schema_instance import instance
from tests.support.gateways import default_config_dict

SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {
                "sku": {"type": "string", "minLength": 20},
                "qty": {"type": "integer", "minimum": 3, "maximum": 5},
            },  # fmt: skip
            "required": ["sku", "qty"],
        }
    },
    "properties": {
        "kind": {"enum": ["a", "b"]},
        "fixed": {"const": 42},
        "when": {"type": "string", "format": "date-time"},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 3},
        "maybe": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
        "either": {"type": ["null", "integer"]},
        "merged": {
            "allOf": [
                {"properties": {"x": {"type": "string"}}, "required": ["x"]},
                {"properties": {"y": {"type": "integer"}}},
            ]
        },  # fmt: skip
        "short": {"type": "string", "maxLength": 4},
    },
    "required": ["kind", "items"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", range(20))
def test_schema_instance_is_valid(seed: int) -> None:
    value = instance(SCHEMA, seed)
    assert set(value) == set(SCHEMA["properties"])
    assert value["kind"] in ("a", "b") and value["fixed"] == 42
    assert value["when"] == "2026-01-01T00:00:00Z"
    assert 0 < value["ratio"] < 1
    assert len(value["items"]) >= 3
    for item in value["items"]:
        assert len(item["sku"]) >= 20 and 3 <= item["qty"] <= 5
    assert isinstance(value["maybe"], bool) and isinstance(value["either"], int)
    assert isinstance(value["merged"]["x"], str) and isinstance(value["merged"]["y"], int)
    assert len(value["short"]) <= 4
    assert instance(SCHEMA, seed) == value  # deterministic


# Codex's exec_command tool types its counts as `number` and reads them into integers.
EXEC_COMMAND: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cmd": {"type": "string"},
        "yield_time_ms": {"type": "number"},
        "max_output_tokens": {"type": "number"},
        "timeout_s": {"type": "number", "minimum": 1.5, "maximum": 30},
    },
    "required": ["cmd"],
}


@pytest.mark.parametrize("seed", range(20))
def test_a_number_is_whole_where_its_bounds_allow(seed: int) -> None:
    value = instance(EXEC_COMMAND, seed)
    assert all(type(value[k]) is int for k in ("yield_time_ms", "max_output_tokens"))
    assert type(value["timeout_s"]) is int and 2 <= value["timeout_s"] <= 30
    between = instance({"type": "number", "minimum": 0.25, "maximum": 0.75}, seed)
    assert type(between) is float and 0.25 <= between <= 0.75


def test_schema_instance_defaults_to_an_object() -> None:
    assert instance(None) == {} and instance({}) == {}


def test_prompt_estimate_counts_every_part() -> None:
    text = GenerationRequest(messages=(Message("user", "look"),))
    image = ImagePart("https://example.com/a.png")
    with_images = GenerationRequest(
        messages=(Message("user", "look", (TextPart("look"), image, image)),)
    )
    assert tokens.estimate_prompt(with_images) == tokens.estimate_prompt(text) + 2 * 765
    call = ToolCall("call_1", "search", '{"query": "weather in paris"}')
    with_call = GenerationRequest(
        messages=(Message("user", "look"), Message("assistant", "", tool_calls=(call,)))
    )
    assert tokens.estimate_prompt(with_call) > tokens.estimate_prompt(text) + 4
    tool = ToolSpec(
        "search", "Searches the web.", {"type": "object", "properties": {"q": {"type": "string"}}}
    )
    fmt = ResponseFormat(
        "json_schema", "S", {"type": "object", "properties": {"a": {"type": "string"}}}
    )
    assert (
        tokens.estimate_prompt(GenerationRequest(messages=text.messages, tools=(tool,)))
        > tokens.estimate_prompt(text) + 10
    )
    assert (
        tokens.estimate_prompt(GenerationRequest(messages=text.messages, response_format=fmt))
        > tokens.estimate_prompt(text) + 5
    )


def test_prompt_estimate_counts_bytes_and_takes_any_json_schema() -> None:
    def prompt_of(text: str, tools: tuple[ToolSpec, ...] = ()) -> int:
        return tokens.estimate_prompt(
            GenerationRequest(messages=(Message("user", text),), tools=tools)
        )

    assert prompt_of("é" * 40) == prompt_of("e" * 80)  # UTF-8 bytes, not characters
    # JSON allows any integer; the estimate still counts the schema that holds one.
    huge = ToolSpec("pick", None, {"type": "integer", "maximum": 10**30})
    compact = '{"type":"integer","maximum":1' + "0" * 30 + "}"  # 60 bytes: 15 tokens
    assert prompt_of("hi", (huge,)) == prompt_of("hi", (ToolSpec("pick"),)) + len(compact) // 4


def test_a_request_keeps_its_estimate_and_a_changed_copy_makes_its_own() -> None:
    request = GenerationRequest(messages=(Message("user", "a" * 400),))
    first = tokens.estimate_prompt(request)
    assert tokens.estimate_prompt(request) == first == request.prompt_estimate
    changed = dataclasses.replace(request, messages=(Message("user", "a" * 800),))
    assert tokens.estimate_prompt(changed) == first + 100
    assert request == GenerationRequest(messages=request.messages)  # not part of equality


def test_budget_reservation_counts_images_and_choices() -> None:
    price = Price(input=1_000_000, output=0)  # $1 per input token
    plain = GenerationRequest(messages=(Message("user", "x"),), max_tokens=1)
    image = GenerationRequest(
        messages=(Message("user", "x", (TextPart("x"), ImagePart("https://e.com/a.png"))),),
        max_tokens=1,
    )
    assert costs.max_cost([price], image, 1) == costs.max_cost([price], plain, 1) + 765
    output = Price(input=0, output=1_000_000)
    many = GenerationRequest(messages=plain.messages, max_tokens=10, n=3)
    assert costs.max_cost([output], many, 1) == 30


def test_capable_skips_providers_and_names_what_none_has() -> None:
    data = default_config_dict()
    first = data["models"][0]
    first["providers"][0]["capabilities"] = ["n"]
    config = Config.model_validate(data)
    upstreams = Catalog(config, registry.build).upstreams[first["id"]]
    tools = GenerationRequest(messages=(Message("user", "x"),), tools=(ToolSpec("f"),))
    assert [u.id for u in capable(upstreams, tools, "m")] == [upstreams[1].id]
    assert capable(upstreams, GenerationRequest(messages=tools.messages), "m") == upstreams
    for p in first["providers"]:
        p["capabilities"] = [Capability.N.value]
    narrowed = Catalog(Config.model_validate(data), registry.build).upstreams[first["id"]]
    with pytest.raises(Unsupported) as caught:
        capable(narrowed, tools, f"model {first['id']}")
    assert caught.value.param == "tools" and caught.value.metadata["capability"] == "tools"
    assert first["id"] in caught.value.message
