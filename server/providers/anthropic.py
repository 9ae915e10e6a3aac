"""Anthropic Messages adapter: POST /v1/messages, streamed or not.

System messages become the top-level `system` field; a text completion (`prompt`) is
sent as one user message, as the Messages API has no text-completion endpoint.
Streams are read event by event (message_start, content_block_delta, message_delta,
message_stop; ping ignored; error raised); a stream without message_stop is a failure.

Usage conversion: Anthropic's `input_tokens` EXCLUDE cached tokens, while the gateway
counts as OpenAI does, so prompt_tokens = input_tokens + cache_read_input_tokens +
cache_creation_input_tokens, cached_tokens = cache_read_input_tokens (priced at
Price.cached_input) and cache_write_tokens = cache_creation_input_tokens (priced at
Price.cache_write, which defaults to the input price).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from pydantic import Field

from server.core.errors import UpstreamError
from server.core.generation import Event, Finished, GenerationRequest, TextDelta, TokenCounts
from server.providers.http import (
    HttpParams,
    ProtocolViolation,
    check_status,
    make_client,
    read_api_key,
    read_json,
    sse_events,
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


class AnthropicProvider:
    def __init__(self, provider_id: str, params: AnthropicParams, where: str) -> None:
        self.id = provider_id
        self.params = params
        self.retry_policy = params.retry_policy
        key = read_api_key(params, where)
        headers = {"anthropic-version": params.version, **({"x-api-key": key} if key else {})}
        self._client = make_client(params, headers)

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        p = self.params
        if request.is_chat:
            system = "\n\n".join(m.content for m in request.messages if m.role == "system")
            messages = [
                {"role": m.role, "content": m.content}
                for m in request.messages
                if m.role != "system"
            ]
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
        if p.stream:
            body["stream"] = True
        return body

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        with upstream_errors(self.id):
            async with self._client.stream("POST", "/v1/messages", json=self.body(request)) as r:
                await check_status(r, self.id)
                if not self.params.stream:
                    answer = await read_json(r)
                    text = "".join(
                        block["text"] for block in answer["content"] if block["type"] == "text"
                    )
                    if text:
                        yield TextDelta(text)
                    yield Finished(_finish(answer.get("stop_reason")), counts(answer["usage"]))
                    return
                usage: dict[str, Any] = {}
                stop_reason: str | None = None
                async for event in sse_events(r):
                    data = json.loads(event.data)
                    kind = data.get("type", event.event)
                    if kind == "content_block_delta":
                        delta = data["delta"]
                        if delta.get("type") == "text_delta" and delta.get("text"):
                            yield TextDelta(delta["text"])
                    elif kind == "message_start":
                        usage.update(data["message"].get("usage") or {})
                    elif kind == "message_delta":
                        stop_reason = data.get("delta", {}).get("stop_reason") or stop_reason
                        # Cumulative counts: later values replace earlier ones.
                        usage.update(
                            {k: v for k, v in (data.get("usage") or {}).items() if v is not None}
                        )
                    elif kind == "message_stop":
                        yield Finished(_finish(stop_reason), counts(usage))
                        return
                    elif kind == "error":
                        error = data.get("error") or {}
                        raise UpstreamError(
                            f"{self.id}: upstream failed mid-stream: "
                            f"{error.get('type', 'error')}: {str(error.get('message'))[:200]}",
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
    cache_read = int(usage.get("cache_read_input_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    return TokenCounts(
        prompt_tokens=int(usage["input_tokens"]) + cache_read + cache_write,
        completion_tokens=int(usage.get("output_tokens") or 0),
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _finish(stop_reason: str | None) -> str:
    if not stop_reason:
        raise ProtocolViolation("answer without a stop_reason")
    return STOP_REASONS.get(stop_reason, stop_reason)
