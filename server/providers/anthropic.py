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

from pydantic import Field

from server.base.errors import UpstreamError
from server.base.generation import (
    Capability,
    Event,
    Finished,
    GenerationRequest,
    ImagePart,
    Message,
    TextDelta,
    TokenCounts,
    ToolCallDelta,
)
from server.providers.http import (
    HttpParams,
    ProtocolViolation,
    check_status,
    count,
    make_client,
    plausible,
    read_api_key,
    read_json,
    redact,
    sse_events,
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


CAPABILITIES = frozenset({Capability.TOOLS, Capability.IMAGES, Capability.STRUCTURED_OUTPUT})
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

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        p = self.params
        if request.is_chat:
            system = "\n\n".join(
                m.content for m in request.messages if m.role in ("system", "developer")
            )
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
        with upstream_errors(self.id):
            async with self._client.stream("POST", "/v1/messages", json=self.body(request)) as r:
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
                        error = data.get("error") or {}
                        raise UpstreamError(
                            f"{self.id}: upstream failed mid-stream: "
                            f"{error.get('type', 'error')}: {redact(str(error.get('message'))[:200])}",
                            {"provider": self.id},
                            upstream_answered=True,
                        )
                raise ProtocolViolation("stream ended without message_stop")

    async def aclose(self) -> None:
        await self._client.aclose()


def counts(usage: Any) -> TokenCounts | None:
    """Anthropic usage -> TokenCounts in OpenAI's convention (see the module doc)."""
    if not isinstance(usage, dict) or usage.get("input_tokens") is None:
        return None
    cache_read = count(usage.get("cache_read_input_tokens") or 0, "cache_read_input_tokens")
    cache_write = count(
        usage.get("cache_creation_input_tokens") or 0, "cache_creation_input_tokens"
    )
    return TokenCounts(
        prompt_tokens=count(usage["input_tokens"], "usage.input_tokens") + cache_read + cache_write,
        completion_tokens=count(usage.get("output_tokens") or 0, "usage.output_tokens"),
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
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
        plain = m.role in ("user", "assistant") and not m.parts and not m.tool_calls
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
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}]
    blocks: list[dict[str, Any]] = []
    if m.parts:
        for part in m.parts:
            if isinstance(part, ImagePart):
                blocks.append({"type": "image", "source": _image_source(part.url)})
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


def _image_source(url: str) -> dict[str, Any]:
    match = DATA_URL.match(url)
    if match is None:
        return {"type": "url", "url": url}
    return {"type": "base64", "media_type": match.group(1), "data": match.group(2)}


def _tools(request: GenerationRequest, body: dict[str, Any]) -> None:
    """Tools, tool_choice and structured output, in the Messages API's terms."""
    tools = [
        {
            "name": t.name,
            **({"description": t.description} if t.description else {}),
            "input_schema": t.parameters or {"type": "object", "properties": {}},
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
