"""Messages requests -> the generic generation request, and generic fragments back to
Anthropic's blocks; what reaches an Anthropic upstream in the native form."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gateway.v1 import messages_service_pb2 as service

from http_facade import codec
from server.application.dialects.messages.reply import Reply
from server.application.dialects.messages.request import generation
from server.base.errors import InvalidArgument
from server.base.generation import (
    Capability,
    DocumentPart,
    ImagePart,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    serves,
)
from server.providers.anthropic import native_body

PNG = "iVBORw0KGgo="
USER = {"role": "user", "content": "Hi"}


def request(**fields: Any) -> service.CreateMessageRequest:
    body = {"model": "m", "max_tokens": 100, "messages": [USER], **fields}
    message = service.CreateMessageRequest()
    codec.from_dict(body, message, strict=True)
    return message


def test_turns_become_generic_messages() -> None:
    generic = generation(request(
        system=[{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
        metadata={"user_id": "u1"},
        messages=[
            USER,
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "c1", "name": "f", "input": {"n": 2}}]},
            {"role": "user", "content": [
                {"type": "text", "text": "Here."},
                {"type": "tool_result", "tool_use_id": "c1", "is_error": True, "content": [
                    {"type": "text", "text": "bad"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": PNG}}]},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                "data": "JVBERi0="}, "title": "T"}]},
        ],
    ))  # fmt: skip
    roles = [m.role for m in generic.messages]
    assert roles == ["system", "user", "assistant", "tool", "user", "user"]
    system, _, assistant, tool, images, rest = generic.messages
    assert system.content == "A\n\nB"
    assert assistant.content == "Calling."  # thinking stays out of the generic request
    assert assistant.tool_calls[0].id == "c1" and json.loads(assistant.tool_calls[0].arguments) == {
        "n": 2
    }
    assert (tool.tool_call_id, tool.content) == ("c1", "Error: bad")
    assert images.parts == (ImagePart(f"data:image/png;base64,{PNG}"),)
    assert rest.documents == (DocumentPart("application/pdf", "JVBERi0=", "T"),)
    assert generic.user == "u1" and generic.max_tokens == 100
    assert generic.needs().keys() == {Capability.TOOLS, Capability.IMAGES, Capability.DOCUMENTS}
    assert generic.native is not None and generic.native.required_by is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_tokens": None}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": 1.5}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "foo": 1}]}]},
         "messages[0].content[0].foo"),
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
            "type": "base64", "media_type": "image/tiff", "data": "x"}}]}]},
         "messages[0].content[0].source.media_type"),
        ({"thinking": {"type": "enabled", "budget_tokens": 512}}, "thinking.budget_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "thinking.budget_tokens"),
        ({"tools": [{"name": "f", "input_schema": {"type": "object"}}],
          "tool_choice": {"type": "tool", "name": "g"}}, "tool_choice.name"),
        ({"tools": [{"name": "f"}]}, "tools[0].input_schema"),
        ({"tools": [{"name": "f", "input_schema": {"type": "object", "properties": {
            "n": {"type": "integer", "minimum": "one"}}}}]},
         "tools[0].input_schema.properties.n.minimum"),
        ({"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral",
                                                                    "ttl": "2h"}}]},
         "system[0].cache_control.ttl"),
        ({"service_tier": "priority"}, "service_tier"),
    ],
)  # fmt: skip
def test_refusals_name_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        generation(request(**fields))
    assert refused.value.param == field


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0]"),
        ({"container": "c1"}, "container"),
        ({"messages": [{"role": "user", "content": [{"type": "document", "source": {
            "type": "url", "url": "https://docs.example.com/a.pdf"}}]}]}, "messages[0].content[0].source"),
        ({"messages": [USER, {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]}]},
         "messages[1].content[0]"),
    ],
)  # fmt: skip
def test_what_only_anthropic_carries_needs_its_adapter(fields: dict[str, Any], field: str) -> None:
    generic = generation(request(**fields))
    assert generic.native is not None and generic.native.required_by == field
    assert generic.needs()[serves("messages")] == field


def test_native_body_is_the_request_as_written() -> None:
    tools = [{"name": "f", "input_schema": {"type": "object", "properties": {
        "other": {"type": "integer", "maximum": 3}, "content_blocks": {"type": "string"}}}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]  # fmt: skip
    mine = {"type": "thinking", "thinking": "x", "signature": "gateway-signature:simulated:1"}
    theirs = {"type": "thinking", "thinking": "y", "signature": "EqQB"}
    fields = {
        "tools": tools, "stream": True, "temperature": 1,
        "messages": [USER, {"role": "assistant", "content": [mine, theirs]},
                     {"role": "user", "content": [{"type": "text", "text": "k",
                                                   "cache_control": {"type": "ephemeral"}}]}],
    }  # fmt: skip
    generic = generation(request(**fields))
    assert generic.native is not None
    body = native_body(generic.native)
    assert body == {
        "model": "m", "max_tokens": 100, "tools": tools, "temperature": 1,
        "messages": [USER, {"role": "assistant", "content": [theirs]}, fields["messages"][2]],
    }  # fmt: skip


def test_generic_fragments_become_blocks() -> None:
    reply = Reply(emit=True)
    fragments = [
        ReasoningDelta("think"), ReasoningDelta(signature="sig"), TextDelta("Hel"),
        TextDelta("lo"), ToolCallDelta(0, "c1", "f", ""), ToolCallDelta(0, arguments='{"a":'),
        ToolCallDelta(0, arguments=" 1}"),
    ]  # fmt: skip
    events = [e for f in fragments for e in reply.feed(f)] + reply.close()
    assert [(e.type, e.index) for e in events if e.type != "content_block_delta"] == [
        ("content_block_start", 0), ("content_block_stop", 0), ("content_block_start", 1),
        ("content_block_stop", 1), ("content_block_start", 2), ("content_block_stop", 2),
    ]  # fmt: skip
    whole = Reply(emit=False)
    for fragment in fragments:
        assert whole.feed(fragment) == []
    blocks = [codec.to_dict(b) for b in whole.content()]
    assert blocks == [
        {"type": "thinking", "thinking": "think", "signature": "sig"},
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}},
    ]


def test_system_instructions_mid_conversation() -> None:
    generic = generation(request(messages=[
        USER,
        {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "a"},
            {"type": "mid_conv_system", "content": [{"type": "text", "text": "Now formal."}]},
            {"type": "text", "text": "b"}]},
    ]))  # fmt: skip
    assert [(m.role, m.content) for m in generic.messages] == [
        ("user", "Hi"), ("system", "Be terse."), ("user", "a"), ("system", "Now formal."),
        ("user", "b"),
    ]  # fmt: skip
