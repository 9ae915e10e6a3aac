"""What a guard makes of a request before any upstream sees it (Guard.request): each
place a request carries text (messages and their parts, tool calls' arguments, tool
results, a prompt or several, tools' descriptions and schemas, a native body and its
stored history), scanned in its own phase, and nothing else touched. On the guard
itself: the integration tests drive the same through gateways; these run in
milliseconds, for each mutant too."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from gateway.v1 import messages_service_pb2 as messages_service
from gateway.v1 import responses_service_pb2 as responses_service
from google.protobuf import json_format

from http_facade import codec
from server.base.config import GuardrailConfig
from server.base.generation import (
    GenerationRequest,
    ImagePart,
    Message,
    Native,
    TextPart,
    ToolCall,
    ToolSpec,
)
from server.guardrails.guard import HEADER, Guard, GuardrailBlocked, Rail

MAIL = "ann@example.com"
OTHER = "bob@example.org"


def guard(**config: Any) -> Guard:
    rail = GuardrailConfig(id="pii", detectors=["email"], **config)
    return Guard([Rail.of(rail)], unary=True)


def counted(g: Guard) -> dict[tuple[str, str], int]:
    """What the guard counted, by phase and action."""
    return {(phase, action): n for (_, _, phase, action), n in g.counts.items()}


def test_every_text_of_a_chat_is_redacted_in_its_phase_and_the_rest_kept():
    g = guard()
    call = ToolCall("call_1", "lookup", f'{{"who": "{MAIL}", "n": 2}}', signature="sig")
    image = ImagePart(f"https://img.example/{MAIL}.png")
    request = GenerationRequest(
        messages=(
            Message("system", f"Write to {MAIL}."),
            Message("user", f"Mail {MAIL} and {OTHER}",
                    parts=(TextPart(f"Mail {MAIL} and {OTHER}"), image), name="u1"),
            Message("assistant", "", tool_calls=(call,)),
            Message("tool", f"found {OTHER}", tool_call_id="call_1"),
        ),
        max_tokens=9,
    )  # fmt: skip
    out = g.request(request)
    assert out.messages == (
        Message("system", "Write to [EMAIL_1]."),
        Message("user", "Mail [EMAIL_1] and [EMAIL_2]",
                parts=(TextPart("Mail [EMAIL_1] and [EMAIL_2]"), image), name="u1"),
        Message("assistant", "", tool_calls=(
            dataclasses.replace(call, arguments='{"who": "[EMAIL_1]", "n": 2}'),)),
        Message("tool", "found [EMAIL_2]", tool_call_id="call_1"),
    )  # fmt: skip
    assert out.max_tokens == 9 and out.prompt is None and out.prompts == () and out.tools == ()
    # A message given as parts is counted once (its joined content is the same text).
    assert counted(g) == {("input", "redact"): 3, ("tool_calls", "redact"): 1,
                          ("tool_results", "redact"): 1}  # fmt: skip
    assert g.headers[HEADER] == (
        "input:redact:EMAIL=3; tool_calls:redact:EMAIL=1; tool_results:redact:EMAIL=1"
    )


def test_tool_results_follow_their_own_action():
    g = guard(on_tool_results="off", on_input="block")
    out = g.request(GenerationRequest(messages=(Message("tool", f"found {MAIL}"),)))
    assert out.messages == (Message("tool", f"found {MAIL}"),)
    assert g.counts == {} and HEADER not in g.headers
    with pytest.raises(GuardrailBlocked):
        guard(on_tool_results="block", on_input="off").request(
            GenerationRequest(messages=(Message("tool", f"found {MAIL}"),))
        )
    with pytest.raises(GuardrailBlocked):
        guard(on_input="block").request(GenerationRequest(messages=(Message("user", MAIL),)))


def test_a_prompt_and_several_prompts_are_input():
    g = guard(placeholder="type")
    out = g.request(GenerationRequest(prompt=f"to {MAIL}"))
    assert (out.prompt, out.prompts, out.messages) == ("to [EMAIL]", (), ())
    many = g.request(GenerationRequest(prompts=(f"a {MAIL}", (1, 2, 3), "plain")))
    assert many.prompts == ("a [EMAIL]", (1, 2, 3), "plain") and many.prompt is None
    assert counted(g) == {("input", "redact"): 2}
    assert g.request(GenerationRequest(prompt="")).prompt == ""


def test_tools_are_read_by_the_model_so_their_descriptions_and_schemas_are_input():
    g = guard()
    schema = {"type": "object", "properties": {"to": {"type": "string",
              "description": f"like {MAIL}"}, "name": {"enum": [OTHER]}}}  # fmt: skip
    tools = (
        ToolSpec(MAIL.replace("@", "_"), f"sends to {MAIL}", schema, strict=True),
        ToolSpec("bare"),
    )
    out = g.request(GenerationRequest(messages=(Message("user", "hi"),), tools=tools))
    assert out.tools == (
        ToolSpec(MAIL.replace("@", "_"), "sends to [EMAIL_1]",
                 {"type": "object", "properties": {"to": {"type": "string",
                  "description": "like [EMAIL_1]"}, "name": {"enum": ["[EMAIL_2]"]}}},
                 strict=True),
        ToolSpec("bare"),
    )  # fmt: skip
    # With input off, the tools go as they are (the same objects).
    off = guard(on_input="off").request(GenerationRequest(prompt="x", tools=tools))
    assert off.tools is tools


def test_a_reversible_guard_never_numbers_a_placeholder_the_caller_already_wrote():
    g = guard(reversible=True)
    request = GenerationRequest(
        messages=(Message("user", f"[EMAIL_1] is mine, {MAIL} is hers"),
                  Message("assistant", "", tool_calls=(ToolCall("c", "f", '{"x": "[EMAIL_2]"}'),)),
                  Message("user", f"and {OTHER}")),
        prompt="[EMAIL_3]",
    )  # fmt: skip
    out = g.request(request)
    assert out.messages[0].content == "[EMAIL_1] is mine, [EMAIL_4] is hers"
    assert out.messages[2].content == "and [EMAIL_5]"
    assert g.restore == {"[EMAIL_4]": MAIL, "[EMAIL_5]": OTHER}
    # Placeholders only count as taken for reversible guards.
    plain = guard()
    plain.request(GenerationRequest(messages=(Message("user", f"[EMAIL_1] and {MAIL}"),)))
    assert plain.restore == {} and plain._taken == set()


def messages_request(body: dict[str, Any]) -> messages_service.CreateMessageRequest:
    message = messages_service.CreateMessageRequest()
    codec.from_dict(body, message, strict=True)
    return message


def test_a_native_body_is_redacted_in_its_prose_only_and_the_callers_copy_kept():
    body = {
        "model": "claude-x", "max_tokens": 64, "system": f"Reply to {MAIL}",
        "stop_sequences": [f"bye {MAIL}", "end"],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": f"I am {MAIL}"},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                "data": f"doc by {MAIL}"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "aGk=" + MAIL}},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"toolu_{MAIL}", "name": "send",
                 "input": {"to": MAIL, "n": 3, "ok": True, "cc": [OTHER, 4, {"bcc": MAIL}],
                           "meta": {"from": OTHER}, "none": None}},
            ]},
        ],
        "metadata": {"user_id": "u-1"},
    }  # fmt: skip
    request = messages_request(body)
    before = request.SerializeToString()
    g = guard(placeholder="type")
    native = Native("messages", request, history=({"role": "user", "content": f"hi {MAIL}",
                                                   "id": MAIL},))  # fmt: skip
    out = g.request(GenerationRequest(messages=(Message("user", "x"),), native=native))
    assert request.SerializeToString() == before  # the caller's own message is not changed
    assert out.native is not None and out.native.dialect == "messages"
    assert out.native.history == ({"role": "user", "content": "hi [EMAIL]", "id": MAIL},)
    sent = json_format.MessageToDict(out.native.request, preserving_proto_field_name=True)
    expected = json_format.MessageToDict(request, preserving_proto_field_name=True)
    expected["system"] = "Reply to [EMAIL]"
    expected["stop_sequences"] = ["bye [EMAIL]", "end"]
    user, assistant = expected["messages"]
    user["content_blocks"][0]["text"] = "I am [EMAIL]"
    user["content_blocks"][1]["source"]["data"] = "doc by [EMAIL]"
    assistant["content_blocks"][0]["input"] = {"to": "[EMAIL]", "n": 3.0, "ok": True,
                                        "cc": ["[EMAIL]", 4.0, {"bcc": "[EMAIL]"}],
                                        "meta": {"from": "[EMAIL]"}, "none": None}  # fmt: skip
    assert sent == expected
    assert counted(g) == {("input", "redact"): 9}


def test_a_native_json_body_is_redacted_as_json_and_kept_when_input_is_off():
    body: dict[str, Any] = {"model": "m", "input": [{"role": "user", "content": f"to {MAIL}",
                                                     "id": MAIL}]}  # fmt: skip
    native = Native("responses", body)
    out = guard(placeholder="type").request(GenerationRequest(prompt="x", native=native))
    assert out.native is not None
    assert out.native.request == {"model": "m", "input": [
        {"role": "user", "content": "to [EMAIL]", "id": MAIL}]}  # fmt: skip
    assert body["input"][0]["content"] == f"to {MAIL}"
    off = guard(on_input="off", on_tool_results="block")
    assert off.request(GenerationRequest(prompt=MAIL, native=native)).native is native


def test_a_native_bodys_maps_are_kept_and_the_fields_after_them_still_redacted():
    request = responses_service.CreateResponseRequest()
    body = {"model": "m", "input": f"hi {MAIL}", "metadata": {"owner": MAIL}, "user": MAIL,
            "prompt_cache_key": f"key {OTHER}"}  # fmt: skip
    codec.from_dict(body, request, strict=True)
    native = Native("responses", request)
    out = guard(placeholder="type").request(GenerationRequest(prompt="x", native=native))
    assert out.native is not None
    sent = json_format.MessageToDict(out.native.request, preserving_proto_field_name=True)
    assert sent == {"model": "m", "input": "hi [EMAIL]", "metadata": {"owner": MAIL},
                    "user": "[EMAIL]", "prompt_cache_key": "key [EMAIL]"}  # fmt: skip
