"""The OpenAI request fields beyond the spec's, checked against OpenAI's ranges: content
parts and roles, tool definitions and calls, tool_choice, response formats, choices,
penalties, logit_bias, metadata. Every failure is InvalidArgument naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.v1 import chat_pb2
from gateway.v1 import chat_service_pb2 as chat_pb
from gateway.v1 import completion_service_pb2 as completion_pb
from google.protobuf.message import Message as Message_

from server.application.pipeline import cache_marks, schemas
from server.base.errors import InvalidArgument
from server.base.generation import (
    ImagePart,
    Message,
    Part,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolSpec,
)

ChatRequest = chat_pb.CreateChatCompletionRequest | chat_pb.StreamChatCompletionRequest
CompletionRequest = completion_pb.CreateCompletionRequest | completion_pb.StreamCompletionRequest

ROLES = ("system", "developer", "user", "assistant", "tool")
# OpenAI's ranges.
MAX_CHOICES = 128
MAX_TOOLS = 128
MAX_TOP_LOGPROBS = 20
MAX_COMPLETION_LOGPROBS = 5
MAX_BEST_OF = 20
MAX_METADATA_PAIRS = 16
TOOL_CHOICES = ("none", "auto", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
IMAGE_DETAILS = ("auto", "low", "high", "original")
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DATA_URL = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")


def _present(message: Message_, field: str) -> bool:
    return bool(message.HasField(field))


def _required(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument.for_field(field, "is required")
    return value


def between(message: Message_, field: str, low: float, high: float) -> Any:
    """The field's value when set (None otherwise), checked against [low, high]."""
    if not _present(message, field):
        return None
    value = getattr(message, field)
    if not low <= value <= high:
        raise InvalidArgument.for_field(field, f"must be between {low:g} and {high:g}")
    return value


def one_of(message: Message_, field: str, allowed: tuple[str, ...]) -> str | None:
    if not _present(message, field):
        return None
    value: str = getattr(message, field)
    if value not in allowed:
        raise InvalidArgument.for_field(field, f"must be one of {', '.join(allowed)}")
    return value


def common(request: ChatRequest | CompletionRequest) -> dict[str, Any]:
    """The request fields chat and text completions share, ranges checked."""
    out: dict[str, Any] = {}
    n = between(request, "n", 1, MAX_CHOICES)
    if n is not None:
        out["n"] = n
    if _present(request, "seed"):
        out["seed"] = request.seed
    if _present(request, "user"):
        out["user"] = request.user
    out["presence_penalty"] = between(request, "presence_penalty", -2, 2)
    out["frequency_penalty"] = between(request, "frequency_penalty", -2, 2)
    bias = []
    for token, value in sorted(request.logit_bias.items()):
        if not token.isdigit():
            raise InvalidArgument.for_field(f"logit_bias.{token}", "keys must be token ids")
        if not -100 <= value <= 100:
            raise InvalidArgument.for_field(f"logit_bias.{token}", "must be between -100 and 100")
        bias.append((token, value))
    out["logit_bias"] = tuple(bias)
    return out


def _part(part: chat_pb2.ContentPart, where: str, role: str) -> Part:
    if part.type == "text":
        if not _present(part, "text"):
            raise InvalidArgument.for_field(f"{where}.text", "is required for a text part")
        return TextPart(part.text)
    if part.type == "image_url":
        if role != "user":
            raise InvalidArgument.for_field(f"{where}.type", "images are allowed in user messages")
        url = part.image_url.url
        if not (url.startswith("https://") or DATA_URL.match(url)):
            raise InvalidArgument.for_field(
                f"{where}.image_url.url",
                "must be an https URL or a base64 data URL of a png, jpeg, gif or webp image",
            )
        detail = part.image_url.detail if _present(part.image_url, "detail") else None
        if detail is not None and detail not in IMAGE_DETAILS:
            raise InvalidArgument.for_field(
                f"{where}.image_url.detail", f"must be one of {', '.join(IMAGE_DETAILS)}"
            )
        return ImagePart(url, detail)
    raise InvalidArgument.for_field(f"{where}.type", "must be one of text, image_url")


# Roles a message of only role and text may have (a tool message needs its call id).
PLAIN_ROLES = frozenset({"system", "developer", "user", "assistant"})
# ChatMessage fields up to this number are role (1) and content (2).
PLAIN_FIELD = 2
# Request fields beyond the spec's; a request with none of them takes the plain path.
CHAT_EXTRAS = frozenset(
    {
        "max_completion_tokens", "n", "seed", "user", "presence_penalty",
        "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "tools",
        "tool_choice", "tool_choice_function", "parallel_tool_calls", "response_format",
        "reasoning_effort", "metadata", "store", "service_tier", "prompt_cache_key",
        "safety_identifier", "prompt_cache_retention",
    }
)  # fmt: skip
SERVICE_TIERS = ("auto", "default", "flex", "priority", "scale")
CACHE_RETENTIONS = ("in_memory", "24h")


def upstream_hints(request: ChatRequest) -> dict[str, Any]:
    """Fields that change nothing in the answer, for upstreams that take them."""
    out: dict[str, Any] = {}
    if _present(request, "store"):
        out["store"] = request.store
    out["service_tier"] = one_of(request, "service_tier", SERVICE_TIERS)
    out["prompt_cache_retention"] = one_of(request, "prompt_cache_retention", CACHE_RETENTIONS)
    for name in ("prompt_cache_key", "safety_identifier"):
        if _present(request, name):
            value = getattr(request, name)
            if len(value) > 512:
                raise InvalidArgument.for_field(name, "must be at most 512 characters")
            out[name] = value
    return out


def extras(request: ChatRequest) -> bool:
    """Whether the request sets any field beyond the spec's (one C call)."""
    return any(f.name in CHAT_EXTRAS for f, _ in request.ListFields())


def message(m: chat_pb.ChatMessage, i: int) -> Message:
    if m.role in PLAIN_ROLES and all(f.number <= PLAIN_FIELD for f, _ in m.ListFields()):
        return Message(m.role, m.content)  # role and text only: the common case
    where = f"messages[{i}]"
    if m.role not in ROLES:
        raise InvalidArgument.for_field(f"{where}.role", f"must be one of {', '.join(ROLES)}")
    if m.content and m.content_parts:
        raise InvalidArgument.for_field(f"{where}.content", "send a text or parts, not both")
    parts = tuple(_part(p, f"{where}.content[{j}]", m.role) for j, p in enumerate(m.content_parts))
    text = "".join(p.text for p in parts if isinstance(p, TextPart)) if parts else m.content
    calls = []
    for j, call in enumerate(m.tool_calls):
        at = f"{where}.tool_calls[{j}]"
        if m.role != "assistant":
            raise InvalidArgument.for_field(at, "only assistant messages carry tool calls")
        if call.type != "function":
            raise InvalidArgument.for_field(f"{at}.type", "must be function")
        _required(call.id, f"{at}.id")
        _required(call.function.name, f"{at}.function.name")
        signature = call.extra_content.google.thought_signature or None
        calls.append(ToolCall(call.id, call.function.name, call.function.arguments, signature))
    call_id = m.tool_call_id if _present(m, "tool_call_id") else None
    if m.role == "tool" and not call_id:
        raise InvalidArgument.for_field(f"{where}.tool_call_id", "is required on tool messages")
    if m.role != "tool" and call_id is not None:
        raise InvalidArgument.for_field(f"{where}.tool_call_id", "goes only on tool messages")
    name = m.name if _present(m, "name") else None
    cache = cache_marks.marks(m.content_parts, f"{where}.content")
    return Message(m.role, text, parts, name, tuple(calls), call_id, cache)


def tools(request: ChatRequest) -> dict[str, Any]:
    if len(request.tools) > MAX_TOOLS:
        raise InvalidArgument.for_field("tools", f"at most {MAX_TOOLS} tools")
    tools = []
    for i, tool in enumerate(request.tools):
        if tool.type != "function":
            raise InvalidArgument.for_field(f"tools[{i}].type", "must be function")
        f = tool.function
        if not NAME.match(f.name):
            raise InvalidArgument.for_field(
                f"tools[{i}].function.name", "must be 1 to 64 letters, digits, _ or -"
            )
        where = f"tools[{i}].function.parameters"
        parameters = schemas.read(f.parameters, where) if f.HasField("parameters") else None
        if parameters is not None and parameters.get("type", "object") != "object":
            raise InvalidArgument.for_field(
                f"tools[{i}].function.parameters", "must be a JSON Schema of type object"
            )
        tools.append(
            ToolSpec(
                f.name,
                f.description if f.HasField("description") else None,
                parameters,
                f.strict if f.HasField("strict") else None,
                cache_marks.mark(tool, f"tools[{i}]"),
            )
        )
    choice = one_of(request, "tool_choice", TOOL_CHOICES)
    forced = None
    if request.HasField("tool_choice_function"):
        if choice is not None:
            raise InvalidArgument.for_field("tool_choice", "a mode or a function, not both")
        named = request.tool_choice_function
        if named.type != "function":
            raise InvalidArgument.for_field("tool_choice.type", "must be function")
        forced = named.function.name
        if forced not in {t.name for t in tools}:
            raise InvalidArgument.for_field(
                "tool_choice.function.name", f"names no tool of the request ({forced!r})"
            )
    if (choice is not None or forced is not None) and not tools:
        raise InvalidArgument.for_field("tool_choice", "is allowed only with tools")
    parallel = request.parallel_tool_calls if _present(request, "parallel_tool_calls") else None
    return dict(
        tools=tuple(tools), tool_choice=choice, forced_tool=forced, parallel_tool_calls=parallel
    )


def response_format(request: ChatRequest) -> ResponseFormat | None:
    if not request.HasField("response_format"):
        return None
    fmt = request.response_format
    if fmt.type not in RESPONSE_FORMATS:
        raise InvalidArgument.for_field(
            "response_format.type", f"must be one of {', '.join(RESPONSE_FORMATS)}"
        )
    if fmt.type != "json_schema":
        if fmt.HasField("json_schema"):
            raise InvalidArgument.for_field(
                "response_format.json_schema", "goes only with type json_schema"
            )
        return None if fmt.type == "text" else ResponseFormat(fmt.type)
    if not fmt.HasField("json_schema"):
        raise InvalidArgument.for_field(
            "response_format.json_schema", "is required with type json_schema"
        )
    spec = fmt.json_schema
    if not NAME.match(spec.name):
        raise InvalidArgument.for_field(
            "response_format.json_schema.name", "must be 1 to 64 letters, digits, _ or -"
        )
    where = "response_format.json_schema.schema"
    schema = schemas.read(spec.schema, where) if spec.HasField("schema") else None
    return ResponseFormat(
        "json_schema",
        spec.name,
        schema,
        spec.description if spec.HasField("description") else None,
        spec.strict if spec.HasField("strict") else None,
    )


def metadata(request: ChatRequest) -> tuple[tuple[str, str], ...]:
    if len(request.metadata) > MAX_METADATA_PAIRS:
        raise InvalidArgument.for_field("metadata", f"at most {MAX_METADATA_PAIRS} pairs")
    for key, value in request.metadata.items():
        if len(key) > 64:
            raise InvalidArgument.for_field(f"metadata.{key}", "keys are at most 64 characters")
        if len(value) > 512:
            raise InvalidArgument.for_field(f"metadata.{key}", "values are at most 512 characters")
    return tuple(sorted(request.metadata.items()))
