"""OpenAI's Responses API -> the gateway's one generation request.

The request's input (a string, or items: messages with `input_text`/`input_image`
parts, `function_call`, `function_call_output`, `reasoning`, `item_reference`), after
the stored conversation it continues, becomes chat messages: `instructions` a system
message, function calls an assistant message's tool calls, their outputs `tool`
messages. Reasoning items have no place in a chat: they reach only an upstream that
serves the Responses API natively, and only the one that made them (`seal`). A
`namespace` tool's functions become tools named `{namespace}__{name}` (`namespaced`),
and calls of them are written back with their `namespace`.

Every field is honoured, passed on, or refused with a 400 naming it. What only an
upstream serving the Responses API can honour (built-in tools, `input_file` parts,
`truncation: auto`, a summary other than `auto`...) makes the request need that
capability, so only such upstreams are tried, or the 400 names the field.

Items are kept as JSON objects in OpenAI's shape (what is stored, listed and sent to
native upstreams); the proto `InputItem` is only how they arrive.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from gateway.v1 import responses_pb2 as rpb
from gateway.v1 import responses_service_pb2 as rs
from google.protobuf import json_format, struct_pb2

from server.application.pipeline import fields, schemas
from server.application.pipeline.fields import MAX_TOKENS_CEILING
from server.base import structs, urls
from server.base.config import exposed_tool_name
from server.base.errors import InvalidArgument, NotFound
from server.base.generation import (
    GenerationRequest,
    ImagePart,
    Message,
    Native,
    Part,
    ResponseFormat,
    TextPart,
    ToolCall,
    ToolSpec,
    namespaced,
    unseal,
)

# The items of MCP tools the gateway runs (dialects/responses/mcp.py).
MCP_ITEMS = ("mcp_list_tools", "mcp_call", "mcp_approval_request", "mcp_approval_response")
# The dialect's name where a request travels as it came (see generation.serves).
DIALECT = "responses"
ResponsesRequest = rs.CreateResponseRequest | rs.StreamResponseRequest
Item = dict[str, Any]

# OpenAI's floor on max_output_tokens.
MIN_OUTPUT_TOKENS = 16
ROLES = ("user", "assistant", "system", "developer")
ITEM_TYPES = (
    "message", "function_call", "function_call_output", "reasoning", "item_reference",
    *MCP_ITEMS,
)  # fmt: skip
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
SUMMARIES = ("auto", "concise", "detailed")
VERBOSITIES = ("low", "medium", "high")
TRUNCATIONS = ("disabled", "auto")
# Service tiers every model serves as asked (the gateway has one tier).
PLAIN_TIERS = ("auto", "default")
ENCRYPTED_REASONING = "reasoning.encrypted_content"
LOGPROBS = "message.output_text.logprobs"
# `include` values that only upstreams serving the Responses API produce.
NATIVE_INCLUDES = frozenset(
    {
        "web_search_call.action.sources", "web_search_call.results",
        "code_interpreter_call.outputs", "computer_call_output.output.image_url",
        "file_search_call.results", "message.input_image.image_url",
    }
)  # fmt: skip
# OpenAI's built-in tools: passed to upstreams serving the Responses API, refused elsewhere.
BUILT_IN_TOOLS = frozenset(
    {
        "web_search", "web_search_preview", "web_search_2025_08_26",
        "web_search_preview_2025_03_11", "file_search", "computer_use_preview", "computer",
        "code_interpreter", "image_generation", "local_shell", "shell", "mcp", "custom",
        "apply_patch", "tool_search",
    }
)  # fmt: skip
FUNCTION_TOOL_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
NAMESPACE_KEYS = frozenset({"type", "name", "description", "tools"})


@dataclass(frozen=True)
class Previous:
    """The stored response a request continues: its whole conversation, and where it
    was made (the provider, and that provider's own id when it stored it natively)."""

    id: str
    context: tuple[Item, ...]
    provider: str = ""
    upstream_id: str = ""


@dataclass(frozen=True)
class Translated:
    generation: GenerationRequest
    # The request's own input items, in OpenAI's shape, each with its id, as stored:
    # an `item_reference` stays a reference (see `resolve`).
    input_items: tuple[Item, ...]
    # The conversation it continues, as stored.
    history: tuple[Item, ...]
    # What the response hands out beyond the defaults.
    include_encrypted: bool
    include_logprobs: bool
    # The request's namespaced functions: each one's tool name -> (namespace, name).
    namespaces: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    # The request's `mcp` tools, each with where it is (`tools[i]`): the gateway runs
    # them (dialects/responses/mcp.py).
    mcp_tools: tuple[tuple[str, dict[str, Any]], ...] = ()


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


ITEM_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
    "mcp_approval_response": "mcpr",
}


# Request fields a plain text request may set (model, a text input, storage, stream).
PLAIN_FIELDS = frozenset({"model", "input", "store", "stream"})


def translate(request: ResponsesRequest, previous: Previous | None) -> Translated:
    """Validates a Create/StreamResponseRequest; every failure names its field."""
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    given = request.ListFields()
    if previous is None and all(f.name in PLAIN_FIELDS for f, _ in given) and request.input:
        return _plain(request)  # a text and nothing else: the common case, kept cheap
    _refusals(request)
    native_only: list[str] = []
    context = previous.context if previous is not None else ()
    items = _input(request, context, native_only)
    # The conversation as the upstream reads it: each reference the item it names (the
    # same object, not a copy; the prompt's bound then counts every use of it).
    whole = resolve((*context, *items))
    resolved_context, resolved_items = whole[: len(context)], whole[len(context) :]
    messages: list[Message] = []
    if request.HasField("instructions") and request.instructions:
        messages.append(Message("system", request.instructions))
    messages.extend(_messages(whole))
    if not any(m.role != "system" for m in messages):
        raise InvalidArgument.for_field("input", "is required")
    sampling = _sampling(request)
    if len(request.tools) > fields.MAX_TOOLS:
        raise InvalidArgument.for_field("tools", f"at most {fields.MAX_TOOLS} tools")
    tool_objects = [_read_tool(tool, f"tools[{i}]") for i, tool in enumerate(request.tools)]
    namespaces: dict[str, tuple[str, str]] = {}
    mcp_tools: list[tuple[str, dict[str, Any]]] = []
    tools, forced, choice = _tools(request, tool_objects, native_only, namespaces, mcp_tools)
    include = _include(request, native_only)
    reasoning = request.reasoning if request.HasField("reasoning") else None
    effort = None
    if reasoning is not None:
        effort = _one_of(reasoning, "effort", EFFORTS, "reasoning.effort")
        summary = _one_of(reasoning, "summary", SUMMARIES, "reasoning.summary")
        if summary not in (None, "auto"):
            native_only.append("reasoning.summary")
    fmt = _text_format(request, native_only)
    truncation = _one_of(request, "truncation", TRUNCATIONS, "truncation")
    if truncation == "auto":
        native_only.append("truncation")
    if request.HasField("service_tier") and request.service_tier not in PLAIN_TIERS:
        native_only.append("service_tier")
    top = fields.between(request, "top_logprobs", 0, fields.MAX_TOP_LOGPROBS)
    user = request.user if request.HasField("user") else None
    if request.HasField("safety_identifier"):
        if len(request.safety_identifier) > 64:
            raise InvalidArgument.for_field("safety_identifier", "at most 64 characters")
        user = user or request.safety_identifier
    if mcp_tools and native_only:
        # The gateway runs the rounds: no upstream gets the request as it came.
        raise InvalidArgument.for_field(
            native_only[0], f"cannot be combined with the MCP tool of {mcp_tools[0][0]}"
        )
    native = Native(
        DIALECT,
        {**_native_body(request, tool_objects), "input": tuple(resolved_items)},
        history=tuple(resolved_context),
        previous=(previous.provider, previous.upstream_id)
        if previous is not None and previous.upstream_id
        else None,
        required_by=native_only[0] if native_only else None,
    )
    generation = GenerationRequest(
        messages=tuple(messages),
        **sampling,
        user=user,
        logprobs=top is not None or LOGPROBS in include,
        top_logprobs=top,
        tools=tools,
        tool_choice=choice,
        forced_tool=forced,
        parallel_tool_calls=request.parallel_tool_calls
        if request.HasField("parallel_tool_calls")
        else None,
        response_format=fmt,
        reasoning_effort=effort,
        metadata=fields.metadata(request),
        prompt_cache_key=request.prompt_cache_key if request.HasField("prompt_cache_key") else None,
        prompt_cache_retention=fields.one_of(
            request, "prompt_cache_retention", fields.CACHE_RETENTIONS
        ),
        native=native,
        input_audio_tokens=request.realtime_audio.input_audio_tokens,
        output_audio=request.realtime_audio.output_audio,
    )
    return Translated(
        generation,
        tuple(items),
        context,
        ENCRYPTED_REASONING in include,
        LOGPROBS in include,
        namespaces,
        tuple(mcp_tools),
    )


def _plain(request: ResponsesRequest) -> Translated:
    """A request of one text input and no options, translated without the general
    walk (the same result, with less work per request)."""
    text = {"type": "input_text", "text": request.input}
    item = {"id": new_id("msg"), "type": "message", "role": "user", "content": [text],
            "status": "completed"}  # fmt: skip
    stored = {"store": request.store} if request.HasField("store") else {}
    native = Native(DIALECT, {**stored, "input": (item,)})
    generation = GenerationRequest(messages=(Message("user", request.input),), native=native)
    return Translated(generation, (item,), (), False, False)


def _refusals(request: ResponsesRequest) -> None:
    if request.HasField("background") and request.background:
        raise InvalidArgument.for_field("background", "background mode is not served")
    options = request.stream_options
    if request.HasField("stream_options") and options.include_obfuscation:
        raise InvalidArgument.for_field(
            "stream_options.include_obfuscation", "obfuscation is not served"
        )


def _sampling(request: ResponsesRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if request.HasField("max_output_tokens"):
        value = request.max_output_tokens
        if not MIN_OUTPUT_TOKENS <= value <= MAX_TOKENS_CEILING:
            raise InvalidArgument.for_field(
                "max_output_tokens", f"must be between {MIN_OUTPUT_TOKENS} and {MAX_TOKENS_CEILING}"
            )
        out["max_tokens"] = value
    if request.HasField("temperature"):
        if not 0 <= request.temperature <= 2:
            raise InvalidArgument.for_field("temperature", "must be between 0 and 2")
        out["temperature"] = request.temperature
    if request.HasField("top_p"):
        if not 0 <= request.top_p <= 1:
            raise InvalidArgument.for_field("top_p", "must be between 0 and 1")
        out["top_p"] = request.top_p
    return out


def _one_of(message: Any, name: str, allowed: Sequence[str], where: str) -> str | None:
    if not message.HasField(name):
        return None
    value: str = getattr(message, name)
    if value not in allowed:
        raise InvalidArgument.for_field(where, f"must be one of {', '.join(allowed)}")
    return value


# -- input items ----------------------------------------------------------------------


def _input(
    request: ResponsesRequest, context: Sequence[Item], native_only: list[str]
) -> list[Item]:
    """The request's input as items in OpenAI's shape, each with an id, references
    resolved against the conversation it continues."""
    if request.HasField("input"):
        if not request.input:
            raise InvalidArgument.for_field("input", "must not be empty")
        if request.input_items:
            raise InvalidArgument.for_field("input", "a text or items, not both")
        text = {"type": "input_text", "text": request.input}
        return [
            {"id": new_id("msg"), "type": "message", "role": "user", "content": [text],
             "status": "completed"}
        ]  # fmt: skip
    known = {str(item["id"]) for item in context if item.get("id")}
    items = []
    ids: set[str] = set()
    for i, given in enumerate(request.input_items):
        item = _item(given, f"input[{i}]", known, native_only)
        # An id names one item of the input: listed input items page by their ids.
        if item["id"] in ids:
            raise InvalidArgument.for_field(
                f"input[{i}].id", f"duplicate item {item['id']!r}: an item appears once"
            )
        ids.add(item["id"])
        items.append(item)
    return items


def resolve(items: Sequence[Item]) -> list[Item]:
    """The items with each `item_reference` replaced by the item before it that it
    names. What is stored keeps the reference, so a conversation grows by what each
    request sends, never by copies of what it points at."""
    known: dict[str, Item] = {}
    out = []
    for item in items:
        if item.get("type") == "item_reference":
            out.append(known.get(str(item.get("id")), item))
            continue
        if item.get("id"):
            known[str(item["id"])] = item
        out.append(item)
    return out


def items_of(given: Sequence[rpb.InputItem], where: str, known: Sequence[Item] = ()) -> list[Item]:
    """Items as a conversation keeps them (OpenAI's shape, each with an id; a reference
    kept as one, see `resolve`), references checked against `known`; every failure names
    the item's field."""
    ids = {str(item["id"]) for item in known if item.get("id")}
    return [_item(item, f"{where}[{i}]", ids, []) for i, item in enumerate(given)]


def _item(item: rpb.InputItem, where: str, known: Set[str], native_only: list[str]) -> Item:
    kind = item.type if item.HasField("type") else "message"
    if kind not in ITEM_TYPES:
        raise InvalidArgument.for_field(f"{where}.type", f"must be one of {', '.join(ITEM_TYPES)}")
    given = {f.name for f, _ in item.ListFields()} - {"type"}
    allowed = _ITEM_FIELDS[kind]
    if extra := sorted(given - allowed):
        name = {"content_parts": "content", "output_parts": "output"}.get(extra[0], extra[0])
        raise InvalidArgument.for_field(f"{where}.{name}", f"is not a field of a {kind} item")
    out: Item = {"id": item.id if item.HasField("id") else new_id(ITEM_PREFIX.get(kind, "item"))}
    if kind == "message":
        role = item.role if item.HasField("role") else ""
        if role not in ROLES:
            raise InvalidArgument.for_field(f"{where}.role", f"must be one of {', '.join(ROLES)}")
        out.update(type="message", role=role, content=_content(item, where, role, native_only))
        if item.HasField("phase"):
            out["phase"] = item.phase
        out["status"] = "completed"
    elif kind == "function_call":
        out.update(
            type="function_call",
            call_id=_required(item, "call_id", where),
            name=_required(item, "name", where),
            arguments=item.arguments if item.HasField("arguments") else "",
            status="completed",
        )
        out.update(_call_context(item, where))
    elif kind == "function_call_output":
        out.update(type="function_call_output", call_id=_required(item, "call_id", where))
        out.update(_call_context(item, where))
        if item.HasField("name"):
            out["name"] = item.name
        if item.output_parts:
            parts = [_part(p, f"{where}.output[{j}]", "tool", native_only)
                     for j, p in enumerate(item.output_parts)]  # fmt: skip
            out["output"] = parts
        elif item.HasField("output"):
            out["output"] = item.output
        else:
            raise InvalidArgument.for_field(f"{where}.output", "is required")
        out["status"] = "completed"
    elif kind == "reasoning":
        _required(item, "id", where)
        out.update(
            type="reasoning",
            summary=[{"type": "summary_text", "text": s.text} for s in item.summary],
        )
        if item.HasField("encrypted_content"):
            out["encrypted_content"] = item.encrypted_content
    elif kind in MCP_ITEMS:
        out.update(_mcp_item(item, kind, where))
    else:  # item_reference
        ref = _required(item, "id", where)
        if ref not in known:
            raise InvalidArgument.for_field(f"{where}.id", f"no item {ref!r} in the conversation")
        return {"type": "item_reference", "id": ref}
    return out


_ITEM_FIELDS = {
    "message": {"id", "role", "content", "content_parts", "status", "phase"},
    "function_call": {"id", "call_id", "name", "arguments", "status", "namespace", "caller"},
    "function_call_output": {"id", "call_id", "output", "output_parts", "status", "namespace",
                             "name", "caller"},
    "reasoning": {"id", "summary", "encrypted_content", "content_parts", "status"},
    "item_reference": {"id"},
    "mcp_list_tools": {"id", "server_label", "tools", "error", "status"},
    "mcp_call": {"id", "server_label", "name", "arguments", "output", "error", "status",
                 "approval_request_id"},
    "mcp_approval_request": {"id", "server_label", "name", "arguments", "status"},
    "mcp_approval_response": {"id", "approval_request_id", "approve", "reason", "status"},
}  # fmt: skip


def _call_context(item: rpb.InputItem, where: str) -> Item:
    """A call's namespace and caller, carried as given."""
    out: Item = {}
    if item.HasField("namespace"):
        out["namespace"] = item.namespace
    if item.HasField("caller"):
        out["caller"] = structs.read(item.caller, f"{where}.caller")
    return out


def _mcp_item(item: rpb.InputItem, kind: str, where: str) -> Item:
    """An MCP item as a response wrote it (or a caller's approval response)."""
    if kind == "mcp_approval_response":
        if not item.HasField("approve"):
            raise InvalidArgument.for_field(f"{where}.approve", "is required")
        out: Item = {
            "type": kind, "approval_request_id": _required(item, "approval_request_id", where),
            "approve": item.approve,
        }  # fmt: skip
        if item.HasField("reason"):
            out["reason"] = item.reason
        return out
    out = {"type": kind, "server_label": _required(item, "server_label", where)}
    if kind == "mcp_list_tools":
        out["tools"] = [structs.to_dict(t) for t in item.tools]
    else:
        out["name"] = _required(item, "name", where)
        out["arguments"] = item.arguments if item.HasField("arguments") else ""
    if kind == "mcp_call":
        if item.HasField("output"):
            out["output"] = item.output
        if item.HasField("approval_request_id"):
            out["approval_request_id"] = item.approval_request_id
    if item.HasField("error"):
        out["error"] = structs.to_python(item.error)
    return out


def _required(item: rpb.InputItem, name: str, where: str) -> str:
    value: str = getattr(item, name) if item.HasField(name) else ""
    if not value:
        raise InvalidArgument.for_field(f"{where}.{name}", "is required")
    return value


def _content(
    item: rpb.InputItem, where: str, role: str, native_only: list[str]
) -> list[dict[str, Any]]:
    if item.content_parts:
        return [_part(p, f"{where}.content[{j}]", role, native_only)
                for j, p in enumerate(item.content_parts)]  # fmt: skip
    if not item.HasField("content"):
        raise InvalidArgument.for_field(f"{where}.content", "is required")
    kind = "output_text" if role == "assistant" else "input_text"
    part: dict[str, Any] = {"type": kind, "text": item.content}
    if kind == "output_text":
        part["annotations"] = []
    return [part]


PART_TYPES = ("input_text", "input_image", "input_file", "output_text", "refusal")


def _part(part: rpb.InputContent, where: str, role: str, native_only: list[str]) -> dict[str, Any]:
    kind = part.type
    if kind in ("input_text", "output_text"):
        if not part.HasField("text"):
            raise InvalidArgument.for_field(f"{where}.text", "is required")
        out: dict[str, Any] = {"type": kind, "text": part.text}
        if kind == "output_text":
            out["annotations"] = [
                structs.read(a, f"{where}.annotations[{j}]") for j, a in enumerate(part.annotations)
            ]
        return out
    if kind == "refusal":
        return {"type": "refusal", "refusal": part.refusal}
    if kind == "input_image":
        if role not in ("user", "tool"):
            raise InvalidArgument.for_field(f"{where}.type", "images are allowed in user input")
        out = {"type": "input_image", "detail": part.detail if part.HasField("detail") else "auto"}
        if part.HasField("file_id"):
            native_only.append(f"{where}.file_id")
            out["file_id"] = part.file_id
            return out
        url = fields.image_url(part.image_url if part.HasField("image_url") else "",
                               f"{where}.image_url")  # fmt: skip
        if out["detail"] not in ("auto", "low", "high", "original"):
            raise InvalidArgument.for_field(f"{where}.detail", "must be one of auto, low, high")
        out["image_url"] = url
        return out
    if kind == "input_file":
        native_only.append(f"{where}.type")
        out = {"type": "input_file"}
        for name in ("file_id", "file_data", "file_url", "filename"):
            if part.HasField(name):
                out[name] = getattr(part, name)
        if "file_url" in out:
            urls.check(out["file_url"], f"{where}.file_url")
        return out
    raise InvalidArgument.for_field(f"{where}.type", f"must be one of {', '.join(PART_TYPES)}")


# -- items -> chat messages ------------------------------------------------------------


def _messages(items: Sequence[Item]) -> list[Message]:
    """Chat messages of a conversation's items: consecutive function calls join one
    assistant message (with the text before them); reasoning and native items of
    built-in tools stay out, except a reasoning item's encrypted content, which is the
    signature of the function call after it (see ToolCall)."""
    out: list[Message] = []
    signature: str | None = None
    asked: dict[str, Item] = {}  # approval requests by id
    for item in items:
        kind = item.get("type", "message")
        if kind == "mcp_approval_request":
            asked[str(item.get("id"))] = item
        elif kind == "mcp_call" or kind == "mcp_approval_response":
            # A call that ran, or one the caller refused: the model reads it as a call
            # of the function it was offered as, and its result.
            ran = item if kind == "mcp_call" else asked.get(str(item["approval_request_id"]))
            if ran is None or (kind == "mcp_approval_response" and item.get("approve")):
                continue
            out.extend(_mcp_messages(ran, item))
        elif kind == "reasoning":
            sealed = item.get("encrypted_content")
            signature = sealed if isinstance(sealed, str) and unseal(sealed) else None
        elif kind == "message":
            role = str(item["role"])
            parts = tuple(_chat_part(p) for p in item["content"])
            kept = tuple(p for p in parts if p is not None)
            text = "".join(p.text for p in kept if isinstance(p, TextPart))
            images = any(isinstance(p, ImagePart) for p in kept)
            out.append(Message(role, text, kept if images else ()))
        elif kind == "function_call":
            name = str(item["name"])
            if isinstance(namespace := item.get("namespace"), str):
                name = namespaced(namespace, name)
            call = ToolCall(str(item["call_id"]), name, str(item["arguments"]), signature)
            signature = None
            last = out[-1] if out else None
            if last is not None and last.role == "assistant" and not last.parts:
                out[-1] = Message("assistant", last.content, (), None, (*last.tool_calls, call))
            else:
                out.append(Message("assistant", "", (), None, (call,)))
        elif kind == "function_call_output":
            output = item["output"]
            if isinstance(output, str):
                out.append(Message("tool", output, tool_call_id=str(item["call_id"])))
            else:
                parts = tuple(p for p in (_chat_part(x) for x in output) if p is not None)
                text = "".join(p.text for p in parts if isinstance(p, TextPart))
                out.append(Message("tool", text, tool_call_id=str(item["call_id"])))
    return out


def _mcp_messages(call: Item, item: Item) -> tuple[Message, Message]:
    """An MCP call and its end as an assistant's call and the tool's result."""
    call_id = f"call_{item.get('id') or call.get('id')}"
    name = exposed_tool_name(str(call["server_label"]), str(call["name"]))
    made = Message("assistant", "", (), None, (ToolCall(call_id, name, str(call["arguments"])),))
    if item.get("type") == "mcp_approval_response":
        reason = item.get("reason")
        result = "The user did not approve this call" + (f": {reason}" if reason else ".")
    elif item.get("error") is not None:
        error = item["error"]
        message = error.get("message") if isinstance(error, dict) else error
        result = f"Error: {message if message is not None else error}"
    else:
        result = str(item.get("output") or "")
    return made, Message("tool", result, tool_call_id=call_id)


def _chat_part(part: Mapping[str, Any]) -> Part | None:
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return TextPart(str(part["text"]))
    if kind == "refusal":
        return TextPart(str(part.get("refusal", "")))
    if kind == "input_image" and "image_url" in part:
        detail = part.get("detail")
        return ImagePart(str(part["image_url"]), None if detail == "auto" else detail)
    return None  # a file (native upstreams only)


# -- tools, formats, include -----------------------------------------------------------


def _check_tool(tool: dict[str, Any], where: str) -> None:
    parameters = tool.get("parameters")
    if tool.get("type") == "function" and isinstance(parameters, dict):
        schemas.check(parameters, f"{where}.parameters")


_kept_tools = structs.Kept()


def _read_tool(value: struct_pb2.Struct, where: str) -> dict[str, Any]:
    return schemas.read_kept(_kept_tools, value, where, lambda tool: _check_tool(tool, where))


def _tools(
    request: ResponsesRequest,
    tool_objects: list[dict[str, Any]],
    native_only: list[str],
    namespaces: dict[str, tuple[str, str]],
    mcp_tools: list[tuple[str, dict[str, Any]]],
) -> tuple[tuple[ToolSpec, ...], str | None, str | None]:
    specs = []
    for i, tool in enumerate(tool_objects):
        where = f"tools[{i}]"
        kind = tool.get("type")
        if kind == "mcp":
            mcp_tools.append((where, tool))
        elif kind in BUILT_IN_TOOLS:
            native_only.append(f"{where}.type")
        elif kind == "namespace":
            specs.extend(_namespace(tool, where, native_only, namespaces))
        elif kind == "function":
            specs.append(_function(tool, where))
        else:
            raise InvalidArgument.for_field(f"{where}.type", "must be function or a built-in tool")
    choice = None
    forced = None
    if request.HasField("tool_choice"):
        choice = request.tool_choice
        if choice not in fields.TOOL_CHOICES:
            raise InvalidArgument.for_field(
                "tool_choice", f"must be one of {', '.join(fields.TOOL_CHOICES)} or an object"
            )
    elif request.HasField("tool_choice_object"):
        named = structs.read(request.tool_choice_object, "tool_choice")
        if named.get("type") != "function":
            native_only.append("tool_choice.type")
        else:
            forced = named.get("name")
            if forced not in {t.name for t in specs}:
                raise InvalidArgument.for_field(
                    "tool_choice.name", f"names no function tool of the request ({forced!r})"
                )
    if (choice not in (None, "none") or forced is not None) and not request.tools:
        raise InvalidArgument.for_field("tool_choice", "is allowed only with tools")
    return tuple(specs), forced, choice


def _function(tool: dict[str, Any], where: str) -> ToolSpec:
    if extra := sorted(set(tool) - FUNCTION_TOOL_KEYS):
        raise InvalidArgument.for_field(f"{where}.{extra[0]}", "is not a field of a function tool")
    name = tool.get("name")
    if not isinstance(name, str) or not fields.NAME.match(name):
        raise InvalidArgument.for_field(f"{where}.name", "must be 1 to 64 letters, digits, _ or -")
    parameters = tool.get("parameters")
    if parameters is not None and (
        not isinstance(parameters, dict) or parameters.get("type", "object") != "object"
    ):
        raise InvalidArgument.for_field(
            f"{where}.parameters", "must be a JSON Schema of type object"
        )
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidArgument.for_field(f"{where}.description", "must be a string")
    strict = tool.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidArgument.for_field(f"{where}.strict", "must be a boolean")
    return ToolSpec(name, description, parameters, strict)


def _namespace(
    tool: dict[str, Any],
    where: str,
    native_only: list[str],
    namespaces: dict[str, tuple[str, str]],
) -> list[ToolSpec]:
    """A namespace tool's functions, each a tool named `{namespace}__{name}`; its other
    tools (custom ones) only upstreams serving the Responses API take."""
    if extra := sorted(set(tool) - NAMESPACE_KEYS):
        raise InvalidArgument.for_field(f"{where}.{extra[0]}", "is not a field of a namespace")
    name = tool.get("name")
    if not isinstance(name, str) or not fields.NAME.match(name):
        raise InvalidArgument.for_field(f"{where}.name", "must be 1 to 64 letters, digits, _ or -")
    inner = tool.get("tools")
    if not isinstance(inner, list) or not inner:
        raise InvalidArgument.for_field(f"{where}.tools", "must list the namespace's tools")
    specs = []
    for j, member in enumerate(inner):
        at = f"{where}.tools[{j}]"
        if not isinstance(member, dict) or member.get("type") != "function":
            native_only.append(f"{at}.type")
            continue
        spec = _function(member, at)
        flat = namespaced(name, spec.name)
        if not fields.NAME.match(flat):
            raise InvalidArgument.for_field(
                f"{at}.name", "with its namespace, must be at most 64 characters"
            )
        namespaces[flat] = (name, spec.name)
        specs.append(dataclasses.replace(spec, name=flat))
    return specs


def _text_format(request: ResponsesRequest, native_only: list[str]) -> ResponseFormat | None:
    if not request.HasField("text"):
        return None
    text = request.text
    verbosity = _one_of(text, "verbosity", VERBOSITIES, "text.verbosity")
    if verbosity not in (None, "medium"):
        native_only.append("text.verbosity")
    if not text.HasField("format"):
        return None
    fmt = text.format
    if fmt.type not in fields.RESPONSE_FORMATS:
        raise InvalidArgument.for_field(
            "text.format.type", f"must be one of {', '.join(fields.RESPONSE_FORMATS)}"
        )
    if fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return ResponseFormat("json_object")
    name = fmt.name if fmt.HasField("name") else ""
    if not fields.NAME.match(name):
        raise InvalidArgument.for_field(
            "text.format.name", "must be 1 to 64 letters, digits, _ or -"
        )
    if not fmt.HasField("schema"):
        raise InvalidArgument.for_field("text.format.schema", "is required with json_schema")
    return ResponseFormat(
        "json_schema",
        name,
        schemas.read(fmt.schema, "text.format.schema"),
        fmt.description if fmt.HasField("description") else None,
        fmt.strict if fmt.HasField("strict") else None,
    )


def _include(request: ResponsesRequest, native_only: list[str]) -> frozenset[str]:
    for i, value in enumerate(request.include):
        if value in NATIVE_INCLUDES:
            native_only.append(f"include[{i}]")
        elif value not in (ENCRYPTED_REASONING, LOGPROBS):
            raise InvalidArgument.for_field(f"include[{i}]", f"{value!r} is not a known value")
    return frozenset(request.include)


# The request fields a native upstream gets as they came (input, model, stream
# and the continuation it is sent apart).
_NOT_NATIVE = frozenset(
    {"model", "input", "input_items", "stream", "previous_response_id", "background",
     "stream_options", "tool_choice_object"}
)  # fmt: skip


def _native_body(request: ResponsesRequest, tools: list[dict[str, Any]]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for field, value in request.ListFields():
        name = field.name
        if name in _NOT_NATIVE:
            continue
        if field.message_type is None:
            body[name] = list(value) if field.is_repeated else value
        elif field.message_type.GetOptions().map_entry:
            body[name] = dict(value)
        elif name == "tools":
            body[name] = tools
        elif field.is_repeated:
            body[name] = [structs.to_dict(v) for v in value]
        else:
            body[name] = structs.tidy(
                json_format.MessageToDict(value, preserving_proto_field_name=True)
            )
    if request.HasField("tool_choice_object"):
        body["tool_choice"] = structs.to_dict(request.tool_choice_object)
    return body


def missing_previous(response_id: str) -> NotFound:
    return NotFound(
        f"previous_response_id: no stored response {response_id!r}",
        {"field": "previous_response_id", "response_id": response_id},
    )
