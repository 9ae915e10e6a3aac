"""Anthropic Messages adapter: POST /v1/messages, streamed or not.

System messages become the top-level `system` field; a text completion (`prompt`) is
sent as one user message, as the Messages API has no text-completion endpoint.
Streams are read event by event (message_start, content_block_delta, message_delta,
message_stop; ping ignored; error raised); a stream without message_stop is a failure.

Translation, both ways: system and developer messages join into `system`; content parts
become text and image blocks (a data URL as a base64 source, an https URL as a url
source); assistant tool calls become `tool_use` blocks and `tool` messages user turns of
`tool_result` blocks (consecutive turns of one role merge, as the API wants them
alternating); tools become `input_schema` tools and tool_choice auto/required/none/named
becomes auto/any/none/tool (parallel_tool_calls false: disable_parallel_tool_use).
Replies: `tool_use` blocks (streamed as content_block_start + input_json_delta) become
tool calls, stop_reason tool_use becomes `tool_calls`. Structured output is a forced
tool named after the schema (`json_object`: any object) whose input is the reply's
text. `user` goes as metadata.user_id.

A Messages request (a `Native` request of the `messages` dialect) is sent as the
caller wrote it, only `model` and `stream` set by the adapter, with its `anthropic-beta`
header:
thinking blocks and signatures, cache_control, documents, citations, server tools and
beta fields reach the upstream untouched, except thinking blocks the gateway's own
providers signed (GATEWAY_SIGNATURE), which Anthropic would refuse. Its events come
back as native events, untouched too (ping dropped: the gateway sends its own); a
unary answer comes back as the events that would have streamed it.
`count_tokens` asks the upstream's POST /v1/messages/count_tokens.

Usage conversion: Anthropic's `input_tokens` EXCLUDE cached tokens, while the gateway
counts as OpenAI does, so prompt_tokens = input_tokens + cache_read_input_tokens +
cache_creation_input_tokens, cached_tokens = cache_read_input_tokens (priced at
Price.cached_input) and cache_write_tokens = cache_creation_input_tokens (priced at
Price.cache_write, which defaults to the input price).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from gateway.v1 import json_mapping_pb2
from google.protobuf import struct_pb2
from google.protobuf.message import Message as ProtoMessage
from pydantic import Field

from server.base import structs, urls
from server.base.errors import UpstreamError
from server.base.generation import (
    GATEWAY_SIGNATURE,
    Capability,
    DocumentPart,
    Event,
    Finished,
    GenerationRequest,
    ImagePart,
    Message,
    Native,
    NativeEvent,
    Relayed,
    TextDelta,
    TokenCounts,
    ToolCallDelta,
    serves,
)
from server.providers.http import (
    HttpParams,
    ProtocolViolation,
    SseEvent,
    check_status,
    count,
    make_client,
    plausible,
    read_api_key,
    read_json,
    redact,
    sse_events,
    sse_reads,
    streamed_counts,
    upstream_errors,
)

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


class AnthropicParams(HttpParams):
    base_url: str = "https://api.anthropic.com"
    # The anthropic-version header.
    version: str = "2023-06-01"
    # max_tokens is required by the Messages API: sent when the caller gives none.
    default_max_tokens: int = Field(default=1024, ge=1)
    stream: bool = True


# The ingress dialect this wire format serves natively (a value: see generation.serves).
DIALECT = "messages"
CAPABILITIES: frozenset[str] = frozenset(
    {Capability.TOOLS, Capability.IMAGES, Capability.STRUCTURED_OUTPUT, Capability.THINKING,
     Capability.DOCUMENTS, Capability.TOP_K, serves(DIALECT)}
)  # fmt: skip
# The request keys count_tokens takes.
COUNT_KEYS = ("model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers",
              "context_management", "output_config")  # fmt: skip
DATA_URL = re.compile(r"^data:(image/[a-z]+);base64,(.*)$", re.DOTALL)


class AnthropicProvider:
    def __init__(self, provider_id: str, params: AnthropicParams, where: str) -> None:
        self.id = provider_id
        self.params = params
        self.retry_policy = params.retry_policy
        self.capabilities = CAPABILITIES
        key = read_api_key(params, where)
        headers = {"anthropic-version": params.version, **({"x-api-key": key} if key else {})}
        self._client = make_client(params, headers)

    def messages_path(self) -> str:
        return "/v1/messages"

    def count_path(self) -> str:
        return "/v1/messages/count_tokens"

    def wire(self, body: dict[str, Any]) -> dict[str, Any]:
        """A Messages body as this upstream takes it (Vertex moves the model out)."""
        return body

    async def request_headers(self) -> tuple[tuple[str, str], ...]:
        """Headers of one request besides the client's own (a fresh token)."""
        return ()

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        p = self.params
        system: str | list[dict[str, Any]]
        if request.is_chat:
            system = _system([m for m in request.messages if m.role in ("system", "developer")])
            messages = _turns(request.messages)
        else:
            system, messages = "", [{"role": "user", "content": request.prompt or ""}]
        body: dict[str, Any] = {
            "model": p.model,
            "max_tokens": request.max_tokens or p.default_max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if request.user is not None:
            body["metadata"] = {"user_id": request.user}
        _tools(request, body)
        if p.stream:
            body["stream"] = True
        return body

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        native = request.native
        if native is not None and native.dialect == DIALECT:
            relay = request.relay == DIALECT and self.params.stream
            async for native_event in self._native(native, relay):
                yield native_event
            return
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", self.messages_path(), json=self.wire(self.body(request)),
                extra_headers=await self.request_headers(),
            ) as r:  # fmt: skip
                await check_status(r, self.id)
                formatted = request.response_format is not None
                if not self.params.stream:
                    answer = await read_json(r)
                    reported = plausible(counts(answer["usage"]), request)
                    calls = 0
                    for block in answer["content"]:
                        if block["type"] == "text" and block["text"] and not formatted:
                            yield TextDelta(block["text"])
                        elif block["type"] == "tool_use" and formatted:
                            yield TextDelta(json.dumps(block["input"]))
                        elif block["type"] == "tool_use":
                            arguments = json.dumps(block["input"])
                            yield ToolCallDelta(calls, block["id"], block["name"], arguments)
                            calls += 1
                    stop = _finish(answer.get("stop_reason"), formatted)
                    yield Finished(stop, reported)
                    return
                # Content block index -> tool call number, for input_json_delta.
                tool_blocks: dict[int, int] = {}
                usage: dict[str, Any] = {}
                stop_reason: str | None = None
                async for event in sse_events(r, self.params.max_line_bytes):
                    data = json.loads(event.data)
                    kind = data.get("type", event.event)
                    if kind == "content_block_delta":
                        delta = data["delta"]
                        kind = delta.get("type")
                        if kind == "text_delta" and delta.get("text") and not formatted:
                            yield TextDelta(delta["text"])
                        elif kind == "input_json_delta" and delta.get("partial_json"):
                            piece = delta["partial_json"]
                            number = tool_blocks.get(data.get("index", 0))
                            if formatted:
                                yield TextDelta(piece)
                            elif number is not None:
                                yield ToolCallDelta(number, arguments=piece)
                    elif kind == "content_block_start":
                        block = data.get("content_block") or {}
                        if block.get("type") == "tool_use" and not formatted:
                            number = tool_blocks[data.get("index", 0)] = len(tool_blocks)
                            yield ToolCallDelta(number, block.get("id"), block.get("name"), "")
                    elif kind == "message_start":
                        usage.update(data["message"].get("usage") or {})
                    elif kind == "message_delta":
                        stop_reason = data.get("delta", {}).get("stop_reason") or stop_reason
                        # Cumulative counts: later values replace earlier ones.
                        usage.update(
                            {k: v for k, v in (data.get("usage") or {}).items() if v is not None}
                        )
                    elif kind == "message_stop":
                        final = streamed_counts(lambda: counts(usage), self.id)
                        yield Finished(_finish(stop_reason, formatted), final)
                        return
                    elif kind == "error":
                        raise self._failed(data)
                raise ProtocolViolation("stream ended without message_stop")

    async def _native(self, native: Native, relay: bool) -> AsyncIterator[Event]:
        """The request as the caller wrote it; the upstream's events, untouched. With
        `relay` (a stream its caller asked in this format), the content blocks' events
        of each read go on together as they were written (`Relayed`)."""
        body = {**native_body(native), "model": self.params.model}
        if self.params.stream:
            body["stream"] = True
        usage: dict[str, Any] = {}
        stop: dict[str, Any] = {}
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", self.messages_path(), json=self.wire(body),
                extra_headers=(*native.headers, *await self.request_headers()),
            ) as r:  # fmt: skip
                await check_status(r, self.id)
                if self.params.stream:
                    reads = self._stream_reads(r)
                else:
                    reads = _one_read(_as_events(await read_json(r)))
                async for read in reads:
                    batch = _Batch()
                    for data, event in read:
                        kind = data.get("type")
                        if relay and kind in _BLOCK_EVENTS:
                            batch.add(kind, data, event)
                            continue
                        if batch.events:
                            yield batch.relayed()
                            batch = _Batch()
                        if kind == "message_start":
                            usage.update((data.get("message") or {}).get("usage") or {})
                        elif kind == "message_delta":
                            stop.update(data.get("delta") or {})
                            usage.update(
                                {
                                    k: v
                                    for k, v in (data.get("usage") or {}).items()
                                    if v is not None
                                }
                            )
                        elif kind == "message_stop":
                            reason = stop.get("stop_reason")
                            yield Finished(
                                _finish(reason),
                                streamed_counts(lambda: counts(usage), self.id),
                                stop_sequence=stop.get("stop_sequence"),
                            )
                            return
                        if kind != "ping":
                            yield _native_event(data)
                    if batch.events:
                        yield batch.relayed()
                raise ProtocolViolation("stream ended without message_stop")

    async def _stream_reads(self, r: Any) -> AsyncIterator[list[tuple[dict[str, Any], SseEvent]]]:
        """The events of each read, parsed; those before a failed event are passed on
        before its error."""
        async for events in sse_reads(r, self.params.max_line_bytes):
            read = []
            for event in events:
                try:
                    read.append((self._parsed(event), event))
                except Exception:
                    if read:
                        yield read
                    raise
            yield read

    def _parsed(self, event: SseEvent) -> dict[str, Any]:
        """One event's JSON, or the error it reports."""
        data = json.loads(event.data)
        if not isinstance(data, dict):
            raise ProtocolViolation("an event that is not a JSON object")
        if data.get("type", event.event) == "error":
            raise self._failed(data)
        return data

    def _failed(self, data: dict[str, Any]) -> UpstreamError:
        """The error an `error` event reports, its message redacted."""
        error = data.get("error") or {}
        return UpstreamError(
            f"{self.id}: upstream failed mid-stream: "
            f"{error.get('type', 'error')}: {redact(str(error.get('message'))[:200])}",
            {"provider": self.id},
            upstream_answered=True,
        )

    async def count_tokens(self, request: GenerationRequest) -> int:
        """The upstream's own count of a Messages request's input tokens."""
        native = request.native
        if native is None or native.dialect != DIALECT:
            raise UpstreamError(f"{self.id}: counts only Messages requests", {"provider": self.id})
        whole = {**native_body(native), "model": self.params.model}
        body = {k: v for k, v in whole.items() if k in COUNT_KEYS}
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", self.count_path(), json=body,
                extra_headers=(*native.headers, *await self.request_headers()),
            ) as r:  # fmt: skip
                await check_status(r, self.id)
                answer = await read_json(r)
            return count(answer.get("input_tokens"), "input_tokens")

    async def aclose(self) -> None:
        await self._client.aclose()


def native_body(native: Native) -> dict[str, Any]:
    """A Messages request of the contract as Anthropic's JSON, without the thinking
    blocks the gateway's own providers signed."""
    assert isinstance(native.request, ProtoMessage)  # a Messages request travels as its message
    body = _proto_json(native.request)
    body.pop("stream", None)
    for turn in body.get("messages") or ():
        blocks = turn.get("content")
        if isinstance(blocks, list):
            turn["content"] = [b for b in blocks if not _gateway_signed(b)]
    return body


def _proto_json(message: ProtoMessage) -> dict[str, Any]:
    """The set fields of a contract message as the Messages JSON writes them: a
    field sharing a key (json_key) under that key, an `other_keys` Struct's keys
    beside the fields, whole numbers of a Struct as integers."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        options = field.GetOptions()
        if options.Extensions[json_mapping_pb2.other_keys]:
            out.update(structs.to_dict(value))
            continue
        key = options.Extensions[json_mapping_pb2.json_key] or field.name
        if field.message_type is None:
            out[key] = list(value) if field.is_repeated else value
        elif field.is_repeated:
            out[key] = [_message_json(v) for v in value]
        else:
            out[key] = _message_json(value)
    return out


def _message_json(message: ProtoMessage) -> Any:
    if isinstance(message, struct_pb2.Struct):
        return structs.to_dict(message)
    if isinstance(message, struct_pb2.Value):
        return structs.to_python(message)
    return _proto_json(message)


def _gateway_signed(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "thinking"
        and str(block.get("signature", "")).startswith(GATEWAY_SIGNATURE)
    )


# The events of a content block: relayed as written when the caller's format is this.
_BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})
# A content block delta's generated text: the answer's, and the rest (counted alike).
_DELTA_TEXT = {"text": True, "thinking": False, "partial_json": False}


class _Batch:
    """The content blocks' events of one read, relayed together, and their text."""

    __slots__ = ("events", "text", "other")

    def __init__(self) -> None:
        self.events: list[SseEvent] = []
        self.text: list[str] = []
        self.other: list[str] = []

    def add(self, kind: str, data: dict[str, Any], event: SseEvent) -> None:
        event.event = kind  # the name it goes out under, whatever the upstream's line said
        self.events.append(event)
        _generated(data, self.text, self.other)

    def relayed(self) -> Relayed:
        return Relayed.gathered(self.events, self.text, self.other, _decoded)


def _decoded(events: list[SseEvent]) -> list[Event]:
    """Relayed events as the native events they stand for."""
    return [_native_event(json.loads(event.data)) for event in events]


def _native_event(data: dict[str, Any]) -> NativeEvent:
    """One of the upstream's events, with the text it generated (counted when no usage
    comes)."""
    text: list[str] = []
    other: list[str] = []
    _generated(data, text, other)
    return NativeEvent(DIALECT, data, "".join(text), "".join(other))


def _generated(data: dict[str, Any], text: list[str], other: list[str]) -> None:
    """Adds the text an event generated to `text` (the answer's) and `other` (thinking,
    a tool's input): a delta's, or a block's that comes whole (a whole answer's)."""
    kind = data.get("type")
    piece = data.get("delta" if kind == "content_block_delta" else "content_block")
    if kind not in ("content_block_delta", "content_block_start") or not isinstance(piece, dict):
        return
    for key, answer in _DELTA_TEXT.items():
        if isinstance(value := piece.get(key), str) and value:
            (text if answer else other).append(value)
    if kind == "content_block_start" and isinstance(piece.get("input"), dict) and piece["input"]:
        other.append(json.dumps(piece["input"]))


async def _one_read(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[list[Any]]:
    """A whole answer's events as one read."""
    yield [(data, None) async for data in events]


async def _as_events(answer: Any) -> AsyncIterator[dict[str, Any]]:
    """A whole answer as the events that would have streamed it."""
    if not isinstance(answer, dict) or not isinstance(answer.get("content"), list):
        raise ProtocolViolation("an answer without content")
    start = {
        k: v for k, v in answer.items() if k not in ("content", "stop_reason", "stop_sequence")
    }
    yield {"type": "message_start", "message": {**start, "content": [], "stop_reason": None}}
    for index, block in enumerate(answer["content"]):
        yield {"type": "content_block_start", "index": index, "content_block": block}
        yield {"type": "content_block_stop", "index": index}
    delta = {k: answer.get(k) for k in ("stop_reason", "stop_sequence")}
    yield {"type": "message_delta", "delta": delta, "usage": answer.get("usage") or {}}
    yield {"type": "message_stop"}


def counts(usage: Any) -> TokenCounts | None:
    """Anthropic usage -> TokenCounts in OpenAI's convention (see the module doc)."""
    if not isinstance(usage, dict) or usage.get("input_tokens") is None:
        return None
    cache_read = count(usage.get("cache_read_input_tokens") or 0, "cache_read_input_tokens")
    cache_write = count(
        usage.get("cache_creation_input_tokens") or 0, "cache_creation_input_tokens"
    )
    tiers = usage.get("cache_creation")
    hour = tiers.get("ephemeral_1h_input_tokens") if isinstance(tiers, dict) else None
    return TokenCounts(
        prompt_tokens=count(usage["input_tokens"], "usage.input_tokens") + cache_read + cache_write,
        completion_tokens=count(usage.get("output_tokens") or 0, "usage.output_tokens"),
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
        cache_write_1h_tokens=min(cache_write, count(hour or 0, "cache_creation.ephemeral_1h")),
    )


def _finish(stop_reason: str | None, formatted: bool = False) -> str:
    if not stop_reason:
        raise ProtocolViolation("answer without a stop_reason")
    if formatted and stop_reason == "tool_use":
        return "stop"  # the forced format tool is the answer itself
    return STOP_REASONS.get(stop_reason, stop_reason)


def _turns(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Non-system messages as alternating Messages API turns of content blocks."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role in ("system", "developer"):
            continue
        role = "assistant" if m.role == "assistant" else "user"
        plain = m.role in ("user", "assistant") and not (m.parts or m.tool_calls or m.cache)
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            if isinstance(previous, str):
                previous = [{"type": "text", "text": previous}] if previous else []
            turns[-1]["content"] = previous + _blocks(m)
        else:
            # A plain text message keeps the simple string form.
            turns.append({"role": role, "content": m.content if plain else _blocks(m)})
    return turns


def _blocks(m: Message) -> list[dict[str, Any]]:
    blocks = _content(m)
    if m.cache and blocks:
        blocks[-1] = {**blocks[-1], "cache_control": _cache_control(m.cache)}
    return blocks


def _content(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}]
    blocks: list[dict[str, Any]] = []
    if m.parts:
        for part in m.parts:
            if isinstance(part, ImagePart):
                blocks.append({"type": "image", "source": _image_source(part.url)})
            elif isinstance(part, DocumentPart):
                source = {"type": "base64", "media_type": part.media_type, "data": part.data}
                blocks.append({"type": "document", "source": source})
            elif part.text:
                blocks.append({"type": "text", "text": part.text})
    elif m.content:
        blocks.append({"type": "text", "text": m.content})
    for call in m.tool_calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = {}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def _system(messages: list[Message]) -> str | list[dict[str, Any]]:
    """System and developer messages as `system`: one text, or text blocks when one of
    them marks a cache breakpoint."""
    if not any(m.cache for m in messages):
        return "\n\n".join(m.content for m in messages)
    return [
        {"type": "text", "text": m.content,
         **({"cache_control": _cache_control(m.cache)} if m.cache else {})}
        for m in messages
        if m.content
    ]  # fmt: skip


def _cache_control(lifetime: str) -> dict[str, str]:
    """5 minutes is the default lifetime, written as Anthropic's API has always taken it."""
    return {"type": "ephemeral", **({"ttl": "1h"} if lifetime == "1h" else {})}


def _image_source(url: str) -> dict[str, Any]:
    match = DATA_URL.match(url)
    if match is None:
        return {"type": "url", "url": urls.check(url, "image_url")}
    return {"type": "base64", "media_type": match.group(1), "data": match.group(2)}


def _tools(request: GenerationRequest, body: dict[str, Any]) -> None:
    """Tools, tool_choice and structured output, in the Messages API's terms."""
    tools = [
        {
            "name": t.name,
            **({"description": t.description} if t.description else {}),
            "input_schema": t.parameters or {"type": "object", "properties": {}},
            **({"cache_control": _cache_control(t.cache)} if t.cache else {}),
        }
        for t in request.tools
    ]
    choice: dict[str, Any] | None = None
    if request.forced_tool is not None:
        choice = {"type": "tool", "name": request.forced_tool}
    elif request.tool_choice is not None:
        kind = {"auto": "auto", "required": "any", "none": "none"}[request.tool_choice]
        choice = {"type": kind}
    fmt = request.response_format
    if fmt is not None:
        name = fmt.name or "json_object"
        schema = fmt.schema if fmt.type == "json_schema" else None
        tools.append(
            {
                "name": name,
                "description": fmt.description or "Answers in this JSON shape.",
                "input_schema": schema or {"type": "object"},
            }
        )
        choice = {"type": "tool", "name": name}
    if request.parallel_tool_calls is False and tools:
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if tools:
        body["tools"] = tools
    if choice is not None:
        body["tool_choice"] = choice
