"""What a stored response and a conversation keep when guardrails redact: the text as
the call's redacting guardrails left it (what the upstream read), never the caller's
raw values, nor those a reversible guardrail put back in the answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gateway.v1 import responses_pb2 as rpb
from google.protobuf import json_format

from server.application.dialects.responses.request import Item
from server.guardrails.guard import OPAQUE, Guard


def items(guard: Guard, given: Sequence[Item], phase: str) -> tuple[Item, ...]:
    """Items (the request's, `input`; the answer's, `output`) as they are kept."""
    return tuple(_value(guard, item, phase) for item in given)


def response(guard: Guard, answer: rpb.Response) -> rpb.Response:
    """A copy of the response as it is kept: its instructions and output."""
    kept = rpb.Response()
    kept.CopyFrom(answer)
    if kept.HasField("instructions"):
        kept.instructions = guard.at_rest(kept.instructions, "input")
    for item in kept.output:
        plain = json_format.MessageToDict(item, preserving_proto_field_name=True)
        item.Clear()
        json_format.ParseDict(_value(guard, plain, "output"), item)
    return kept


def _value(guard: Guard, value: Any, phase: str, key: str = "") -> Any:
    if isinstance(value, str):
        if key in OPAQUE:
            return value
        if key == "arguments":  # a tool call's JSON arguments
            return _arguments(guard, value)
        return guard.at_rest(value, phase)
    if isinstance(value, list):
        return [_value(guard, v, phase, key) for v in value]
    if isinstance(value, dict):
        # A tool's output is what the guardrails of tool results saw.
        return {
            k: _value(guard, v, "tool_results" if k == "output" else phase, k)
            for k, v in value.items()
        }
    return value


def _arguments(guard: Guard, arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return guard.at_rest(arguments, "tool_calls")
    return json.dumps(_value(guard, parsed, "tool_calls"))
