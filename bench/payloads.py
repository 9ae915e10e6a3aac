"""The requests the benches send, the same generation in each dialect: a one-line
hello, or a coding agent's turn as Claude Code and Codex send one (about 80 KB: a long
system prompt, 20 tools with JSON Schemas, 20 rounds of tool calls and their results).
"""

from __future__ import annotations

import json
from typing import Any

KINDS = ("hello", "agent")
TOOLS = 20
ROUNDS = 20

_SCHEMA = {
    "type": "object",
    "properties": {
        f"arg_{i}": {"type": "string", "description": "What the tool reads or changes. " * 4}
        for i in range(8)
    },
    "required": ["arg_0", "arg_1"],
    "additionalProperties": False,
}
_SYSTEM = "You are a coding agent working in the user's repository. " * 170
_TASK = "The test suite fails after the last change; find the cause and fix it. " * 10
_RESULT = "    def handle(self, request):  # a line of the file the tool read\n" * 18
_THOUGHT = "Let me look at the next file the failure points to. " * 4


def _call(i: int) -> tuple[str, str, dict[str, str]]:
    return f"call_{i:04d}", f"tool_{i % TOOLS}", {"arg_0": f"src/module_{i}.py", "arg_1": "read"}


def chat(kind: str, model: str, stream: bool) -> dict[str, Any]:
    if kind == "hello":
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Say hello"}]
        payload: dict[str, Any] = {"model": model, "messages": messages}
    else:
        messages = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _TASK}]
        for i in range(ROUNDS):
            call_id, name, args = _call(i)
            function = {"name": name, "arguments": json.dumps(args)}
            messages.append({"role": "assistant", "content": _THOUGHT,
                             "tool_calls": [{"id": call_id, "type": "function", "function": function}]})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _RESULT})
        tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": _THOUGHT,
                                                   "parameters": _SCHEMA}} for i in range(TOOLS)]  # fmt: skip
        payload = {"model": model, "messages": messages, "tools": tools, "max_tokens": 1024}
    if stream:
        payload["stream"] = True
    return payload


def messages(kind: str, model: str, stream: bool) -> dict[str, Any]:
    if kind == "hello":
        payload: dict[str, Any] = {"model": model, "max_tokens": 64,
                                   "messages": [{"role": "user", "content": "Say hello"}]}  # fmt: skip
    else:
        turns: list[dict[str, Any]] = [{"role": "user", "content": _TASK}]
        for i in range(ROUNDS):
            call_id, name, args = _call(i)
            turns.append({"role": "assistant", "content": [
                {"type": "text", "text": _THOUGHT},
                {"type": "tool_use", "id": call_id, "name": name, "input": args}]})  # fmt: skip
            turns.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": _RESULT}]})  # fmt: skip
        tools = [{"name": f"tool_{i}", "description": _THOUGHT, "input_schema": _SCHEMA}
                 for i in range(TOOLS)]  # fmt: skip
        system = [{"type": "text", "text": _SYSTEM, "cache_control": {"type": "ephemeral"}}]
        payload = {"model": model, "max_tokens": 1024, "system": system, "tools": tools,
                   "messages": turns}  # fmt: skip
    if stream:
        payload["stream"] = True
    return payload


def responses(kind: str, model: str, stream: bool, store: bool) -> dict[str, Any]:
    if kind == "hello":
        payload: dict[str, Any] = {"model": model, "input": "Say hello", "store": store}
    else:
        items: list[dict[str, Any]] = [{"role": "user", "content": _TASK}]
        for i in range(ROUNDS):
            call_id, name, args = _call(i)
            items.append({"role": "assistant", "content": _THOUGHT})
            items.append({"type": "function_call", "call_id": call_id, "name": name,
                          "arguments": json.dumps(args)})  # fmt: skip
            items.append({"type": "function_call_output", "call_id": call_id, "output": _RESULT})
        tools = [{"type": "function", "name": f"tool_{i}", "description": _THOUGHT,
                  "parameters": _SCHEMA} for i in range(TOOLS)]  # fmt: skip
        payload = {"model": model, "instructions": _SYSTEM, "input": items, "tools": tools,
                   "max_output_tokens": 1024, "store": store}  # fmt: skip
    if stream:
        payload["stream"] = True
    return payload


def gemini(kind: str) -> dict[str, Any]:
    """The Gemini API's body (the model and streaming are in its path)."""
    if kind == "hello":
        return {"contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
                "generationConfig": {"maxOutputTokens": 64}}  # fmt: skip
    turns: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": _TASK}]}]
    for i in range(ROUNDS):
        call_id, name, args = _call(i)
        turns.append({"role": "model", "parts": [
            {"text": _THOUGHT}, {"functionCall": {"id": call_id, "name": name, "args": args}}]})  # fmt: skip
        turns.append({"role": "user", "parts": [{"functionResponse": {
            "id": call_id, "name": name, "response": {"output": _RESULT}}}]})  # fmt: skip
    declarations = [{"name": f"tool_{i}", "description": _THOUGHT, "parametersJsonSchema": _SCHEMA}
                    for i in range(TOOLS)]  # fmt: skip
    return {"systemInstruction": {"parts": [{"text": _SYSTEM}]}, "contents": turns,
            "tools": [{"functionDeclarations": declarations}],
            "generationConfig": {"maxOutputTokens": 1024}}  # fmt: skip
