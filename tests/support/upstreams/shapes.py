"""What OpenAI's and Anthropic's APIs accept, checked on every request a fake receives.

Each check returns the problems found (empty: the body is one the real API takes), for
the shapes the gateway translates: messages with content parts and images, tool
definitions, tool calls and results, tool_choice and response_format.
"""

from __future__ import annotations

import json
from typing import Any

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool"}


def openai_chat(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for i, m in enumerate(body.get("messages") or []):
        at = f"messages[{i}]"
        role = m.get("role")
        if role not in OPENAI_ROLES:
            problems.append(f"{at}.role {role!r}")
        content = m.get("content")
        if isinstance(content, list):
            for j, part in enumerate(content):
                kind = part.get("type")
                if kind == "text" and not isinstance(part.get("text"), str):
                    problems.append(f"{at}.content[{j}].text")
                elif kind == "image_url" and not isinstance(
                    (part.get("image_url") or {}).get("url"), str
                ):
                    problems.append(f"{at}.content[{j}].image_url.url")
                elif kind == "file" and (problem := _openai_file(part.get("file"))):
                    problems.append(f"{at}.content[{j}].file{problem}")
                elif kind not in ("text", "image_url", "file"):
                    problems.append(f"{at}.content[{j}].type {kind!r}")
        elif content is None and not (role == "assistant" and m.get("tool_calls")):
            problems.append(f"{at}.content missing")
        elif content is not None and not isinstance(content, str):
            problems.append(f"{at}.content type")
        for j, call in enumerate(m.get("tool_calls") or []):
            fn = call.get("function") or {}
            if call.get("type") != "function" or not call.get("id") or not fn.get("name"):
                problems.append(f"{at}.tool_calls[{j}]")
            if not isinstance(fn.get("arguments"), str):
                problems.append(f"{at}.tool_calls[{j}].function.arguments must be a string")
        if role == "tool" and not isinstance(m.get("tool_call_id"), str):
            problems.append(f"{at}.tool_call_id")
    for i, tool in enumerate(body.get("tools") or []):
        fn = tool.get("function") or {}
        if tool.get("type") != "function" or not fn.get("name"):
            problems.append(f"tools[{i}]")
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            problems.append(f"tools[{i}].function.parameters")
    choice = body.get("tool_choice")
    named = isinstance(choice, dict) and (choice.get("function") or {}).get("name")
    if choice is not None and choice not in ("none", "auto", "required") and not named:
        problems.append("tool_choice")
    fmt = body.get("response_format")
    if fmt is not None:
        if fmt.get("type") not in ("text", "json_object", "json_schema"):
            problems.append("response_format.type")
        if fmt.get("type") == "json_schema":
            spec = fmt.get("json_schema") or {}
            if not spec.get("name") or not isinstance(spec.get("schema", {}), dict):
                problems.append("response_format.json_schema")
    return problems


def _openai_file(file: Any) -> str | None:
    """A file part's problem (the SDK's FileFile: a data URL or an uploaded file's id,
    and its name), or None."""
    if not isinstance(file, dict) or set(file) - {"file_data", "file_id", "filename"}:
        return " fields"
    data = file.get("file_data")
    if data is None and not isinstance(file.get("file_id"), str):
        return " without file_data or file_id"
    if data is not None and not (isinstance(data, str) and data.startswith("data:")):
        return ".file_data is not a data URL"
    if not isinstance(file.get("filename", ""), str):
        return ".filename"
    return None


def anthropic_messages(body: dict[str, Any], counting: bool = False) -> list[str]:
    """`counting`: a count_tokens body, which has no max_tokens."""
    problems: list[str] = []
    if not counting and not isinstance(body.get("max_tokens"), int):
        problems.append("max_tokens")
    if "system" in body and not isinstance(body["system"], str | list):
        problems.append("system")
    tool_uses: set[str] = set()
    previous = None
    for i, m in enumerate(body.get("messages") or []):
        at = f"messages[{i}]"
        role = m.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{at}.role {role!r}")
        if role == previous:
            problems.append(f"{at}: roles must alternate")
        previous = role
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or not blocks:
            problems.append(f"{at}.content")
            continue
        for j, block in enumerate(blocks):
            problems += _anthropic_block(block, f"{at}.content[{j}]", role, tool_uses)
    for i, tool in enumerate(body.get("tools") or []):
        if tool.get("type") in SERVER_TOOLS:
            continue  # one of Anthropic's own tools: name and settings, no schema
        schema = tool.get("input_schema")
        if not tool.get("name") or not isinstance(schema, dict) or schema.get("type") != "object":
            problems.append(f"tools[{i}]")
        if "function" in tool or "type" in tool and tool["type"] != "custom":
            problems.append(f"tools[{i}] is in OpenAI's shape")
    thinking = body.get("thinking")
    if thinking is not None and thinking.get("type") not in ("enabled", "adaptive", "disabled"):
        problems.append("thinking.type")
    choice = body.get("tool_choice")
    if choice is not None:
        if choice.get("type") not in ("auto", "any", "tool", "none"):
            problems.append("tool_choice.type")
        if choice.get("type") == "tool" and not choice.get("name"):
            problems.append("tool_choice.name")
    for key in ("response_format", "n", "logprobs", "tool_calls"):
        if key in body:
            problems.append(f"{key} is not a Messages API field")
    return problems


def _anthropic_block(block: Any, at: str, role: str, tool_uses: set[str]) -> list[str]:
    kind = block.get("type")
    if kind == "text":
        return [] if isinstance(block.get("text"), str) and block["text"] else [f"{at}.text"]
    if kind == "image":
        source = block.get("source") or {}
        if role != "user":
            return [f"{at}: images only in user turns"]
        if source.get("type") == "base64":
            ok = source.get("media_type", "").startswith("image/") and source.get("data")
            return [] if ok else [f"{at}.source"]
        if source.get("type") == "url":
            return [] if str(source.get("url", "")).startswith("https://") else [f"{at}.source"]
        return [f"{at}.source.type"]
    if kind == "tool_use":
        if role != "assistant" or not block.get("id") or not block.get("name"):
            return [f"{at}"]
        tool_uses.add(block["id"])
        return [] if isinstance(block.get("input"), dict) else [f"{at}.input must be an object"]
    if kind == "tool_result":
        if role != "user" or block.get("tool_use_id") not in tool_uses:
            return [f"{at}.tool_use_id answers no earlier tool_use"]
        return []
    if kind == "thinking":
        # Anthropic checks the signature: one it did not make is refused.
        signature = str(block.get("signature", ""))
        ok = role == "assistant" and signature.startswith(SIGNATURE)
        return [] if ok else [f"{at}.signature was not made by this upstream"]
    if kind == "redacted_thinking":
        return [] if role == "assistant" and block.get("data") else [f"{at}.data"]
    if kind == "document":
        source = block.get("source") or {}
        return (
            []
            if source.get("type") in ("base64", "text", "url", "content", "file")
            else [f"{at}.source.type"]
        )
    if kind in ("server_tool_use", "web_search_tool_result"):
        return [] if role == "assistant" else [f"{at}: only in assistant turns"]
    return [f"{at}.type {kind!r}"]


# Anthropic's own tools the fake knows, and the signature its thinking blocks carry.
SERVER_TOOLS = ("web_search_20250305", "bash_20250124", "text_editor_20250728")
SIGNATURE = "sig-fake-"


def tool_to_call(body: dict[str, Any], anthropic: bool) -> str | None:
    """The tool a model would call now: the forced one, else the first one offered,
    unless the conversation ends with a tool result or tools are turned off."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if anthropic:
        tools = [t for t in tools if t.get("type") not in SERVER_TOOLS]  # run by the API itself
    if not tools:
        return None
    if anthropic:
        if isinstance(choice, dict) and choice.get("type") == "tool":
            return str(choice["name"])
        last = (body.get("messages") or [{}])[-1]
        blocks = last.get("content") if isinstance(last.get("content"), list) else []
        if choice and choice.get("type") == "none":
            return None
        if any(b.get("type") == "tool_result" for b in blocks):
            return None
        return str(tools[0]["name"])
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    if choice == "none" or (body.get("messages") or [{}])[-1].get("role") == "tool":
        return None
    return str(tools[0]["function"]["name"])


ARGUMENTS = {"city": "Paris"}
ARGUMENT_FRAGMENTS = ('{"city', '": "Pa', 'ris"}')
assert "".join(ARGUMENT_FRAGMENTS) == json.dumps(ARGUMENTS)
