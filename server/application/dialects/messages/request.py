"""A Messages request (Anthropic's format) -> the gateway's one GenerationRequest.

Every field is honoured, carried, or refused with a 400 naming it:

- `system` (a string or text blocks) becomes a system message; each turn's blocks
  become the generic parts: `text`, `image` (base64 as a data URL, or a URL),
  `document` (a base64 PDF as a document part, plain text as text), `tool_use` as
  the assistant's tool calls, `tool_result` as a `tool` message (text; its images
  follow in a user message, `is_error` prefixes "Error: ");
- `thinking` and `redacted_thinking` blocks of earlier turns are state of the
  provider that made them: they stay out of the generic request (Anthropic's docs
  let earlier thinking be left out) and reach only an Anthropic upstream, in the
  request's native form;
- tools, tool_choice (`disable_parallel_tool_use` as parallel_tool_calls false),
  stop_sequences, temperature, top_p, top_k, thinking, metadata.user_id as `user`,
  output_config's effort and its `json_schema` format (the gateway's structured output);
  `cache_control`, `service_tier`, `speed`, `output_config.task_budget` and a tool's
  `eager_input_streaming` are hints a provider may ignore;
- `thread` (a conversation the server would hold between turns) is refused as Anthropic
  refuses it where threads are off (400, `thread_unsupported_request`), on which the
  SDKs' tool runners send the whole conversation instead;
- what only Anthropic's own format carries (server tools, MCP servers, a container,
  context management, output_config keys other than effort and format, server tool
  blocks, documents by URL or file id...) sets the native request's `required_by`, so
  only an Anthropic provider of the model may take the request, and any other model
  answers a 400 naming the field.

The request itself rides along as a `Native` request of this dialect, which the
Anthropic adapter sends as it came (with `anthropic-beta`), so nothing is lost on an Anthropic upstream.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.v1 import messages_pb2 as pb
from gateway.v1 import messages_service_pb2 as service

from server.application.pipeline import cache_marks, schemas
from server.application.pipeline.fields import MAX_TOKENS_CEILING
from server.base import structs, urls
from server.base.errors import InvalidArgument, Unsupported
from server.base.generation import (
    GATEWAY_SIGNATURE,
    DocumentPart,
    GenerationRequest,
    ImagePart,
    Message,
    Native,
    Part,
    ResponseFormat,
    TextPart,
    Thinking,
    Thought,
    ToolCall,
    ToolSpec,
    unseal,
)

# The dialect's name where a request travels as it came (see generation.serves).
DIALECT = "messages"
# A thinking block whose signature starts with this carries the sealed signature of the
# tool call after it (ToolCall.signature): Messages has no field for it on the tool_use
# block, and clients give thinking blocks back unchanged.
TOOL_SIGNATURE = f"{GATEWAY_SIGNATURE}tool:"
GenerateRequest = service.CreateMessageRequest | service.StreamMessageRequest
AnyRequest = GenerateRequest | service.CountMessageTokensRequest

# The dialect's request header forwarded to Anthropic upstreams.
BETA_HEADER = "anthropic-beta"
# `system`: instructions mid-conversation (Anthropic's mid-conversation system turns).
ROLES = ("user", "assistant", "system")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MIN_THINKING_BUDGET = 1024
TOOL_CHOICES = ("auto", "any", "tool", "none")
THINKING_TYPES = ("enabled", "adaptive", "disabled")
# Custom-tool keys the gateway does not read: Anthropic upstreams only.
NATIVE_TOOL_KEYS = ("input_examples", "defer_loading", "allowed_callers")
# Custom-tool keys that only tune how Anthropic streams (the Vercel AI SDK sends
# eager_input_streaming by default): Anthropic upstreams get them, other kinds need none.
HINT_TOOL_KEYS = ("eager_input_streaming",)
# output_config keys that only advise the model (how many tokens an agent's whole task
# may take): Anthropic upstreams get them, other kinds serve the request without.
HINT_OUTPUT_KEYS = ("task_budget",)
SPEEDS = ("standard", "fast")
# Anthropic's answer to a server-side conversation (`thread`) it cannot hold, on which its
# SDKs' tool runners send the whole conversation instead.
THREAD_UNSUPPORTED = "thread_unsupported_request"
# Request fields only Anthropic's format carries.
NATIVE_FIELDS = ("container",)
# Context edits every provider honours: earlier thinking reaches no other kind anyway.
HONOURED_EDITS = ("clear_thinking_",)


class Reader:
    """Reads one request, noting the first field only the native format carries."""

    def __init__(self) -> None:
        self.native_only: str | None = None

    def native(self, where: str) -> None:
        if self.native_only is None:
            self.native_only = where

    def messages(self, request: AnyRequest) -> tuple[Message, ...]:
        out = list(self.system(request))
        if not request.messages:
            raise InvalidArgument.for_field("messages", "at least one message is required")
        for i, turn in enumerate(request.messages):
            where = f"messages[{i}]"
            out.extend(_marked(self.turn(turn, where), turn.content_blocks, f"{where}.content"))
        return tuple(out)

    def system(self, request: AnyRequest) -> tuple[Message, ...]:
        if request.system_blocks:
            system = [self.instructions(request.system_blocks, "system")]
            return tuple(_marked(system, request.system_blocks, "system"))
        if request.system:
            return (Message(role="system", content=request.system),)
        return ()

    def instructions(self, blocks: Sequence[pb.ContentBlock], where: str) -> Message:
        """Text blocks of system instructions, as one system message."""
        texts = []
        for j, block in enumerate(blocks):
            if block.type != "text":
                raise InvalidArgument.for_field(f"{where}[{j}].type", "must be `text`")
            texts.append(self.text(block, f"{where}[{j}]"))
        return Message(role="system", content="\n\n".join(texts))

    def turn(self, turn: pb.MessageParam, where: str) -> list[Message]:
        if turn.role not in ROLES:
            raise InvalidArgument.for_field(
                f"{where}.role", "must be `user`, `assistant` or `system`"
            )
        if not turn.content_blocks:
            return [Message(role=turn.role, content=turn.content)]
        if turn.role == "system":
            return [self.instructions(turn.content_blocks, f"{where}.content")]
        if turn.role == "assistant":
            return [self.assistant(turn.content_blocks, where)]
        return self.user(turn.content_blocks, where)

    def assistant(self, blocks: Sequence[pb.ContentBlock], where: str) -> Message:
        texts: list[str] = []
        calls: list[ToolCall] = []
        thoughts: list[Thought] = []
        signature: str | None = None  # of the next tool call (TOOL_SIGNATURE)
        for j, block in enumerate(blocks):
            at = f"{where}.content[{j}]"
            if block.type == "text":
                texts.append(self.text(block, at))
            elif block.type == "tool_use":
                call = self.tool_use(block, at)
                calls.append(dataclasses.replace(call, signature=signature))
                signature = None
            elif block.type in ("thinking", "redacted_thinking"):
                self.thinking_block(block, at)
                if block.signature.startswith(TOOL_SIGNATURE):
                    signature = block.signature.removeprefix(TOOL_SIGNATURE)
                elif block.signature.startswith(GATEWAY_SIGNATURE):
                    sealed = block.signature.removeprefix(GATEWAY_SIGNATURE)
                    if unseal(sealed) is not None:
                        thoughts.append(Thought(block.thinking, sealed))
            elif block.type in ("image", "document", "tool_result"):
                raise InvalidArgument.for_field(f"{at}.type", f"{block.type} is not allowed here")
            else:
                self.native(at)  # a server tool's block, for Anthropic upstreams
        return Message(
            role="assistant", content="".join(texts), tool_calls=tuple(calls),
            thoughts=tuple(thoughts),
        )  # fmt: skip

    def user(self, blocks: Sequence[pb.ContentBlock], where: str) -> list[Message]:
        """Tool results first (each a `tool` message answering the call before), then
        the turn's other parts as user messages, with mid-conversation system
        instructions (`mid_conv_system` blocks) where they stand."""
        results: list[Message] = []
        rest: list[Message] = []
        parts: list[Part] = []
        for j, block in enumerate(blocks):
            at = f"{where}.content[{j}]"
            if block.type == "tool_result":
                result, images = self.tool_result(block, at)
                results.append(result)
                if images:
                    results.append(_user(images))
            elif block.type == "mid_conv_system":
                _plain(block, at)
                rest += [_user(parts)] if parts else []
                parts = []
                rest.append(self.instructions(block.content_blocks, f"{at}.content"))
            elif block.type in ("tool_use", "thinking", "redacted_thinking"):
                raise InvalidArgument.for_field(f"{at}.type", f"{block.type} is not allowed here")
            else:
                part = self.part(block, at)
                if part is not None:
                    parts.append(part)
        return results + rest + ([_user(parts)] if parts else [])

    def part(self, block: pb.ContentBlock, at: str) -> Part | None:
        if block.type == "text":
            return TextPart(self.text(block, at))
        if block.type == "image":
            return self.image(block, at)
        if block.type == "document":
            return self.document(block, at)
        self.native(at)
        return None

    def text(self, block: pb.ContentBlock, at: str) -> str:
        _plain(block, at)
        if not block.HasField("text"):
            raise InvalidArgument.for_field(f"{at}.text", "is required")
        return block.text

    def image(self, block: pb.ContentBlock, at: str) -> ImagePart | None:
        _plain(block, at)
        source = block.source
        if not block.HasField("source"):
            raise InvalidArgument.for_field(f"{at}.source", "is required")
        if source.type == "base64":
            if source.media_type not in IMAGE_TYPES:
                raise InvalidArgument.for_field(
                    f"{at}.source.media_type", f"must be one of {', '.join(IMAGE_TYPES)}"
                )
            if not source.data:
                raise InvalidArgument.for_field(f"{at}.source.data", "is required")
            return ImagePart(f"data:{source.media_type};base64,{source.data}")
        if source.type == "url":
            return ImagePart(urls.check(source.url, f"{at}.source.url"))
        if source.type == "file":
            self.native(f"{at}.source")
            return None
        raise InvalidArgument.for_field(f"{at}.source.type", "must be base64, url or file")

    def document(self, block: pb.ContentBlock, at: str) -> Part | None:
        _plain(block, at)
        source = block.source
        title = block.title if block.HasField("title") else None
        if block.HasField("citations_config") and block.citations_config.enabled:
            self.native(f"{at}.citations")
        if source.type == "base64":
            if source.media_type != "application/pdf":
                raise InvalidArgument.for_field(
                    f"{at}.source.media_type", "must be application/pdf"
                )
            if not source.data:
                raise InvalidArgument.for_field(f"{at}.source.data", "is required")
            return DocumentPart(source.media_type, source.data, title)
        if source.type == "text":
            heading = "\n".join(x for x in (title, block.context) if x)
            return TextPart(f"{heading}\n\n{source.data}" if heading else source.data)
        if source.type in ("url", "file", "content"):
            if source.type == "url":  # fetched by the upstream that serves it
                urls.check(source.url, f"{at}.source.url")
            self.native(f"{at}.source")
            return None
        raise InvalidArgument.for_field(
            f"{at}.source.type", "must be base64, text, content, url or file"
        )

    def tool_use(self, block: pb.ContentBlock, at: str) -> ToolCall:
        _plain(block, at)
        for name in ("id", "name"):
            if not getattr(block, name):
                raise InvalidArgument.for_field(f"{at}.{name}", "is required")
        arguments = (
            json.dumps(structs.read(block.input, f"{at}.input"))
            if block.HasField("input")
            else "{}"
        )
        return ToolCall(block.id, block.name, arguments)

    def tool_result(self, block: pb.ContentBlock, at: str) -> tuple[Message, list[Part]]:
        _plain(block, at)
        if not block.tool_use_id:
            raise InvalidArgument.for_field(f"{at}.tool_use_id", "is required")
        texts: list[str] = [block.content] if block.HasField("content") else []
        images: list[Part] = []
        for k, inner in enumerate(block.content_blocks):
            where = f"{at}.content[{k}]"
            if inner.type == "text":
                texts.append(self.text(inner, where))
            elif inner.type == "image":
                image = self.image(inner, where)
                if image is not None:
                    images.append(image)
            else:
                self.native(where)
        if block.HasField("content_object"):
            self.native(f"{at}.content")
        text = "\n".join(texts)
        if block.is_error:
            text = f"Error: {text}"
        return Message(role="tool", content=text, tool_call_id=block.tool_use_id), images

    def thinking_block(self, block: pb.ContentBlock, at: str) -> None:
        """Checks an earlier turn's thinking; the generic request keeps only what one of
        the gateway's providers signed (Thought), for that provider."""
        _plain(block, at)
        if block.type == "thinking" and not block.HasField("signature"):
            raise InvalidArgument.for_field(f"{at}.signature", "is required")
        if block.type == "redacted_thinking" and not block.HasField("data"):
            raise InvalidArgument.for_field(f"{at}.data", "is required")

    def tools(self, request: AnyRequest) -> tuple[ToolSpec, ...]:
        specs: list[ToolSpec] = []
        for i, tool in enumerate(request.tools):
            at = f"tools[{i}]"
            if tool.HasField("type") and tool.type == "mcp_toolset":
                continue  # an MCP server's tools, which the gateway runs (mcp.py)
            if tool.HasField("type") and tool.type != "custom":
                self.native(at)  # one of Anthropic's own tools, by its versioned type
                continue
            if not NAME.match(tool.name):
                raise InvalidArgument.for_field(
                    f"{at}.name", "must be 1-128 letters, digits, `_` or `-`"
                )
            if not tool.HasField("input_schema"):
                raise InvalidArgument.for_field(f"{at}.input_schema", "is required")
            schema = schemas.read(tool.input_schema, f"{at}.input_schema")
            for key in tool.other.fields:
                if key in HINT_TOOL_KEYS:
                    continue
                if key not in NATIVE_TOOL_KEYS:
                    raise InvalidArgument.for_field(f"{at}.{key}", "is not a known parameter")
                self.native(f"{at}.{key}")
            specs.append(
                ToolSpec(
                    tool.name,
                    tool.description if tool.HasField("description") else None,
                    schema,
                    tool.strict if tool.HasField("strict") else None,
                    cache_marks.mark(tool, at),
                )
            )
        return tuple(specs)


def _marked(
    messages: list[Message], blocks: Sequence[pb.ContentBlock], where: str
) -> list[Message]:
    """The messages of a turn, the last carrying the blocks' cache_control marks."""
    cache = cache_marks.marks(blocks, where)
    if cache is None or not messages:
        return messages
    return [*messages[:-1], dataclasses.replace(messages[-1], cache=cache)]


def _plain(block: pb.ContentBlock, at: str) -> None:
    """A block the gateway reads may hold only its documented keys."""
    for key in block.other.fields:
        raise InvalidArgument.for_field(f"{at}.{key}", "is not a known parameter")


def _user(parts: Sequence[Part]) -> Message:
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    if len(texts) == len(parts):
        return Message(role="user", content="\n\n".join(texts))
    return Message(role="user", content="".join(texts), parts=tuple(parts))


def _choice(request: AnyRequest, names: set[str]) -> dict[str, Any]:
    if not request.HasField("tool_choice"):
        return {}
    choice = request.tool_choice
    if choice.type not in TOOL_CHOICES:
        raise InvalidArgument.for_field(
            "tool_choice.type", f"must be one of {', '.join(TOOL_CHOICES)}"
        )
    out: dict[str, Any] = {}
    if choice.type == "tool":
        if not choice.name:
            raise InvalidArgument.for_field("tool_choice.name", "is required for `tool`")
        if choice.name not in names:
            raise InvalidArgument.for_field("tool_choice.name", f"names no tool: {choice.name!r}")
        out["forced_tool"] = choice.name
    elif choice.HasField("name"):
        raise InvalidArgument.for_field("tool_choice.name", "goes only with type `tool`")
    else:
        out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
    if choice.disable_parallel_tool_use:
        out["parallel_tool_calls"] = False
    return out


def _thinking(request: AnyRequest, max_tokens: int | None, effort: str | None) -> Thinking | None:
    if not request.HasField("thinking"):
        return Thinking("disabled", effort=effort) if effort else None
    config = request.thinking
    if config.type not in THINKING_TYPES:
        raise InvalidArgument.for_field(
            "thinking.type", f"must be one of {', '.join(THINKING_TYPES)}"
        )
    if config.HasField("display") and config.display not in ("summarized", "omitted"):
        raise InvalidArgument.for_field("thinking.display", "must be summarized or omitted")
    if config.type == "disabled":
        return Thinking("disabled", effort=effort) if effort else None
    if config.type == "adaptive":
        return Thinking("adaptive", effort=effort)
    if not config.HasField("budget_tokens"):
        raise InvalidArgument.for_field("thinking.budget_tokens", "is required for `enabled`")
    budget = config.budget_tokens
    if budget < MIN_THINKING_BUDGET:
        raise InvalidArgument.for_field(
            "thinking.budget_tokens", f"must be at least {MIN_THINKING_BUDGET}"
        )
    if max_tokens is not None and budget >= max_tokens:
        raise InvalidArgument.for_field("thinking.budget_tokens", "must be less than max_tokens")
    return Thinking("enabled", budget, effort)


def _output_config(request: AnyRequest, reader: Reader) -> tuple[str | None, ResponseFormat | None]:
    """output_config's effort and its `json_schema` format, which every model serves
    (as the gateway's structured output); any other key only Anthropic reads."""
    if not request.HasField("output_config"):
        return None, None
    config = structs.read(request.output_config, "output_config")
    for key in config:
        if key not in ("effort", "format", *HINT_OUTPUT_KEYS):
            reader.native(f"output_config.{key}")
    effort = config.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise InvalidArgument.for_field(
            "output_config.effort", f"must be one of {', '.join(EFFORTS)}"
        )
    fmt = config.get("format")
    return effort, None if fmt is None else _format(fmt, "output_config.format")


def _format(fmt: Any, at: str) -> ResponseFormat:
    """Anthropic's output format, `{"type": "json_schema", "schema": {...}}`."""
    if not isinstance(fmt, dict):
        raise InvalidArgument.for_field(at, "must be an object")
    if fmt.get("type") != "json_schema":
        raise InvalidArgument.for_field(f"{at}.type", "must be json_schema")
    for key in fmt:
        if key not in ("type", "schema"):
            raise InvalidArgument.for_field(f"{at}.{key}", "is not a known parameter")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise InvalidArgument.for_field(f"{at}.schema", "is required, a JSON Schema object")
    schemas.check(schema, f"{at}.schema")
    return ResponseFormat("json_schema", name="output", schema=schema)


def _context_edits(request: AnyRequest, reader: Reader) -> None:
    """Clearing earlier thinking is what every other provider gets anyway; any other
    context edit only Anthropic makes."""
    if not request.HasField("context_management"):
        return
    config = structs.read(request.context_management, "context_management")
    edits = config.get("edits")
    if set(config) - {"edits"} or not isinstance(edits, list):
        reader.native("context_management")
        return
    for i, edit in enumerate(edits):
        kind = edit.get("type", "") if isinstance(edit, dict) else ""
        if not kind.startswith(HONOURED_EDITS):
            reader.native(f"context_management.edits[{i}]")


def _sampling(request: GenerateRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not request.HasField("max_tokens"):
        raise InvalidArgument.for_field("max_tokens", "is required")
    if not 1 <= request.max_tokens <= MAX_TOKENS_CEILING:
        raise InvalidArgument.for_field("max_tokens", f"must be between 1 and {MAX_TOKENS_CEILING}")
    out["max_tokens"] = request.max_tokens
    for name in ("temperature", "top_p"):
        if request.HasField(name):
            value = getattr(request, name)
            if not 0 <= value <= 1:
                raise InvalidArgument.for_field(name, "must be between 0 and 1")
            out[name] = value
    if request.HasField("top_k"):
        if request.top_k < 1:
            raise InvalidArgument.for_field("top_k", "must be at least 1")
        out["top_k"] = request.top_k
    if any(not s for s in request.stop_sequences):
        raise InvalidArgument.for_field("stop_sequences", "sequences must not be empty")
    out["stop"] = tuple(request.stop_sequences)
    if request.HasField("service_tier") and request.service_tier not in ("auto", "standard_only"):
        raise InvalidArgument.for_field("service_tier", "must be auto or standard_only")
    if request.HasField("speed") and request.speed not in SPEEDS:
        raise InvalidArgument.for_field("speed", f"must be one of {', '.join(SPEEDS)}")
    if request.HasField("thread"):
        raise Unsupported(
            "thread: the gateway does not hold conversations between turns; send the whole "
            "conversation without `thread`",
            {"field": "thread", "error_code": THREAD_UNSUPPORTED},
        )
    if request.metadata.HasField("user_id"):
        out["user"] = request.metadata.user_id
    return out


def generation(request: AnyRequest, headers: tuple[tuple[str, str], ...] = ()) -> GenerationRequest:
    """Validates a Messages request and translates it; every failure names its field."""
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    reader = Reader()
    messages = reader.messages(request)
    tools = reader.tools(request)
    names = {t.name for t in request.tools}
    fields = request.DESCRIPTOR.fields_by_name
    for name in NATIVE_FIELDS:
        if name in fields and request.HasField(name):
            reader.native(name)
    effort, response_format = _output_config(request, reader)
    _context_edits(request, reader)
    counting = isinstance(request, service.CountMessageTokensRequest)
    sampling = {} if counting else _sampling(request)
    return GenerationRequest(
        messages=messages,
        tools=tools,
        **_choice(request, names),
        **sampling,
        thinking=_thinking(request, sampling.get("max_tokens"), effort),
        response_format=response_format,
        native=Native(DIALECT, request, headers, reader.native_only),
    )


def native_headers(metadata: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The call's headers that go to Anthropic upstreams with its request."""
    beta = metadata.get(BETA_HEADER)
    return ((BETA_HEADER, beta),) if beta else ()
