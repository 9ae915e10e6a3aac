"""JSON <-> proto mapping, derived from the descriptors."""

from __future__ import annotations

import json

import pytest
from gateway.v1 import (
    chat_service_pb2 as chat,
)
from gateway.v1 import (
    completion_service_pb2 as completion,
)
from gateway.v1 import (
    deployment_service_pb2 as deployment,
)
from gateway.v1 import (
    provider_service_pb2 as providers,
)
from gateway.v1 import (
    usage_pb2,
)

from http_facade.codec import from_dict, to_dict
from server.base.errors import InvalidArgument


def test_int64_is_a_json_number_and_plain_scalars_always_appear() -> None:
    chunk = chat.StreamChatCompletionResponse(
        id="c", object="chat.completion.chunk", created=1767225600, model="m",
        choices=[chat.ChatChunkChoice(index=0, delta=chat.ChatDelta(role="assistant"))],
    )  # fmt: skip
    out = to_dict(chunk)
    assert json.dumps(out).count('"created": 1767225600') == 1
    assert out["choices"] == [{"index": 0, "delta": {"role": "assistant"}}]
    assert out["usage"] is None  # null_when_unset
    assert out["system_fingerprint"] == ""  # a plain scalar appears even when empty


def test_set_empty_message_is_an_empty_object() -> None:
    choice = chat.ChatChunkChoice(index=0, delta=chat.ChatDelta(), finish_reason="stop")
    assert to_dict(choice) == {"index": 0, "delta": {}, "finish_reason": "stop"}


def test_optional_fields_absent_unless_set() -> None:
    usage = usage_pb2.Usage(prompt_tokens=3, completion_tokens=0, total_tokens=3, latency_ms=1.5)
    assert to_dict(usage) == {
        "prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3, "latency_ms": 1.5,
    }  # fmt: skip
    usage.ttft_ms = 0.0
    usage.total_cost_usd = 0.0
    assert to_dict(usage)["ttft_ms"] == 0.0
    assert to_dict(usage)["total_cost_usd"] == 0.0


def test_struct_is_a_json_object() -> None:
    provider = providers.Provider(id="p", type="primary", enabled=True)
    provider.params.update({"ttft_ms": 0, "rate": 0.5, "name": "x", "tags": [1, "a"]})
    out = to_dict(provider)
    assert out["params"] == {"ttft_ms": 0, "rate": 0.5, "name": "x", "tags": [1, "a"]}
    assert out["enabled"] is True
    empty = to_dict(providers.Provider(id="p"))
    assert "params" not in empty and empty["enabled"] is False


def test_from_dict_ignores_unknown_and_null() -> None:
    request = from_dict(
        {"model": "m", "n": 2, "user": "u", "temperature": None, "messages": [
            {"role": "user", "content": "hi", "name": "x"}]},
        chat.CreateChatCompletionRequest(),
    )  # fmt: skip
    assert isinstance(request, chat.CreateChatCompletionRequest)
    assert request.model == "m"
    assert not request.HasField("temperature")
    assert request.messages[0].content == "hi"


def test_from_dict_types() -> None:
    request = from_dict(
        {"model": "m", "prompt": "p", "max_tokens": 7.0, "temperature": 1, "stop": "\n",
         "stream": True, "stream_options": {"include_usage": True}},
        completion.CreateCompletionRequest(),
    )  # fmt: skip
    assert isinstance(request, completion.CreateCompletionRequest)
    assert request.max_tokens == 7
    assert request.temperature == 1.0
    assert list(request.stop) == ["\n"]
    assert request.stream_options.include_usage


@pytest.mark.parametrize(
    "body,param",
    [
        ({"prompt": 1}, "prompt"),
        ({"max_tokens": "5"}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 2**31}, "max_tokens"),
        ({"temperature": "0.5"}, "temperature"),
        ({"stream": 1}, "stream"),
        ({"stop": [1]}, "stop[0]"),
        ({"stop": ["a", None]}, "stop[1]"),
        ({"stream_options": []}, "stream_options"),
        ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
    ],
)
def test_from_dict_wrong_types_name_the_field(body: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        from_dict(body, completion.CreateCompletionRequest())
    assert caught.value.param == param


def test_nested_message_errors() -> None:
    with pytest.raises(InvalidArgument) as caught:
        from_dict({"parameters": {"max_new_tokens": "x"}}, deployment.InvokeDeploymentRequest())
    assert caught.value.param == "parameters.max_new_tokens"
    with pytest.raises(InvalidArgument) as caught:
        from_dict({"messages": [{"role": "user"}, "hi"]}, chat.CreateChatCompletionRequest())
    assert caught.value.param == "messages[1]"


def test_round_trip() -> None:
    body = {"deployment_id": "d", "inputs": "x", "parameters": {"max_new_tokens": 3, "stop": ["."]}}
    message = from_dict(body, deployment.InvokeDeploymentRequest())
    assert to_dict(message) == body


def test_content_is_a_string_or_an_array_of_parts() -> None:
    request = from_dict(
        {"model": "m", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"},
                                         {"type": "image_url", "image_url": {"url": "https://x"}}]},
            {"role": "assistant", "content": "b"}]},
        chat.CreateChatCompletionRequest(), strict=True,
    )  # fmt: skip
    first, second = request.messages
    assert [p.type for p in first.content_parts] == ["text", "image_url"] and not first.content
    assert second.content == "b" and not second.content_parts
    out = to_dict(request)
    assert out["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://x"},
    }
    # A message is written as a reply's is: refusal null and annotations [] included.
    assert out["messages"][1] == {
        "role": "assistant",
        "content": "b",
        "refusal": None,
        "annotations": [],
    }
    assert "content_parts" not in json.dumps(out) and "tools" not in out


def test_tool_choice_is_a_string_or_an_object() -> None:
    named = from_dict(
        {"tool_choice": {"type": "function", "function": {"name": "f"}}},
        chat.CreateChatCompletionRequest(),
    )
    assert named.tool_choice_function.function.name == "f" and not named.HasField("tool_choice")
    assert to_dict(named)["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    mode = from_dict({"tool_choice": "auto"}, chat.CreateChatCompletionRequest())
    assert mode.tool_choice == "auto" and to_dict(mode)["tool_choice"] == "auto"


def test_strict_refuses_unknown_keys_by_name() -> None:
    with pytest.raises(InvalidArgument) as caught:
        from_dict({"model": "m", "colour": "red"}, chat.CreateChatCompletionRequest(), strict=True)
    assert caught.value.param == "colour"
    with pytest.raises(InvalidArgument) as caught:
        from_dict({"messages": [{"role": "user", "content_parts": []}]},
                  chat.CreateChatCompletionRequest(), strict=True)  # fmt: skip
    assert caught.value.param == "messages[0].content_parts"
    # null is "not set", whatever the key.
    from_dict({"model": "m", "colour": None}, chat.CreateChatCompletionRequest(), strict=True)


def test_reply_message_shapes() -> None:
    from gateway.v1 import chat_pb2

    call = chat_pb2.ToolCall(id="c", type="function",
                             function=chat_pb2.FunctionCall(name="f", arguments='{"a": 1}'))  # fmt: skip
    message = chat.ChatMessage(role="assistant", content="", tool_calls=[call])
    out = to_dict(message)
    assert out["tool_calls"] == [{"id": "c", "type": "function",
                                  "function": {"name": "f", "arguments": '{"a": 1}'}}]  # fmt: skip
    assert "tool_calls" not in to_dict(chat.ChatMessage(role="assistant", content="x"))
