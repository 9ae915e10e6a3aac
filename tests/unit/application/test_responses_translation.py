"""Responses API requests -> the generation request: what each field becomes, and the
400 naming the field for what is wrong or only a native upstream can honour."""

from __future__ import annotations

from typing import Any

import pytest
from gateway.v1 import responses_service_pb2 as rs

from http_facade import codec
from server.application.dialects.responses.request import Previous, translate
from server.base.errors import InvalidArgument
from server.base.generation import ImagePart, seal, serves, unseal


def request(**body: Any) -> rs.CreateResponseRequest:
    message = rs.CreateResponseRequest()
    codec.from_dict({"model": "m", **body}, message, strict=True)
    return message


def test_items_become_chat_messages() -> None:
    done = translate(
        request(
            instructions="Be brief.",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Look"},
                        {"type": "input_image", "image_url": "https://example.com/a.png"},
                    ],
                },
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
                {
                    "type": "function_call_output",
                    "call_id": "c2",
                    "output": [{"type": "input_text", "text": "two"}],
                },
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
            ],
            tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            tool_choice={"type": "function", "name": "f"},
            text={"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}},
            reasoning={"effort": "low", "summary": "auto"},
            max_output_tokens=64,
        ),  # fmt: skip
        None,
    )
    g = done.generation
    assert [m.role for m in g.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert isinstance(g.messages[1].parts[1], ImagePart)
    assert [c.id for c in g.messages[2].tool_calls] == ["c1", "c2"]
    assert g.messages[4].content == "two"
    assert g.forced_tool == "f" and g.reasoning_effort == "low" and g.max_tokens == 64
    assert g.response_format is not None and g.response_format.name == "s"
    assert serves("responses") not in g.needs()
    assert (
        g.native is not None and [i["type"] for i in g.native.request["input"]][-1] == "reasoning"
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": "x", "max_output_tokens": 8}, "max_output_tokens"),
        ({"input": "x", "temperature": 3}, "temperature"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        ({"input": [{"type": "item_reference", "id": "nope"}]}, "input[0].id"),
        ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "output": "x"}]},
         "input[0].output"),
        ({"input": "x", "tools": [{"type": "function", "name": "f", "extra": 1}]}, "tools[0].extra"),
        ({"input": "x", "tools": [{"type": "gadget"}]}, "tools[0].type"),
        ({"input": "x", "include": ["everything"]}, "include[0]"),
        ({"input": "x", "reasoning": {"effort": "max"}}, "reasoning.effort"),
        ({"input": "x", "text": {"format": {"type": "json_schema", "name": "s"}}},
         "text.format.schema"),
        ({"input": "x", "tool_choice": "required"}, "tool_choice"),
        ({"input": "x", "background": True}, "background"),
        ({"input": ""}, "input"),
    ],
)  # fmt: skip
def test_bad_fields_are_named(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        translate(request(**body), None)
    assert caught.value.param == field


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"truncation": "auto"}, "truncation"),
        ({"reasoning": {"summary": "detailed"}}, "reasoning.summary"),
        ({"text": {"verbosity": "low"}}, "text.verbosity"),
        ({"service_tier": "flex"}, "service_tier"),
        ({"include": ["file_search_call.results"]}, "include[0]"),
        ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
         "input[0].content[0].type"),
    ],
)  # fmt: skip
def test_what_only_native_upstreams_honour(body: dict[str, Any], field: str) -> None:
    g = translate(request(**{"input": "x", **body}), None).generation
    assert g.needs()[serves("responses")] == field


def test_continuation_replays_the_stored_conversation() -> None:
    context = (
        {"id": "msg_1", "type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Hi"}]},
        {"id": "msg_2", "type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Hello", "annotations": []}]},
    )  # fmt: skip
    previous = Previous("resp_1", context, "p", "up_1")
    done = translate(
        request(input=[{"type": "item_reference", "id": "msg_1"}], previous_response_id="resp_1"),
        previous,
    )
    g = done.generation
    assert [(m.role, m.content) for m in g.messages] == [
        ("user", "Hi"), ("assistant", "Hello"), ("user", "Hi")
    ]  # fmt: skip
    assert g.native is not None and g.native.previous == ("p", "up_1")


def test_seal_round_trip() -> None:
    assert unseal(seal("provider-a", "opaque:content")) == ("provider-a", "opaque:content")
    assert unseal("opaque") is None and unseal("gwr1:99:x") is None


def test_logprobs_asked_by_include_or_top_logprobs() -> None:
    plain = translate(request(input="x"), None).generation
    assert not plain.logprobs
    included = translate(request(input="x", include=["message.output_text.logprobs"]), None)
    assert included.generation.logprobs and included.include_logprobs
    top = translate(request(input="x", top_logprobs=3), None).generation
    assert top.logprobs and top.top_logprobs == 3
