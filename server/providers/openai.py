"""OpenAI-compatible adapter: /chat/completions and /completions, streamed or not.

Serves OpenAI and every server speaking its wire format (vLLM, Ollama, llama.cpp
server, TGI's OpenAI route, Groq, Together...), and /embeddings for embedding models. `base_url` includes the version prefix
(`https://api.openai.com/v1`, `http://localhost:11434/v1`). Streams ask for usage with
`stream_options.include_usage`; usage carries `prompt_tokens_details.cached_tokens`
and `completion_tokens_details.reasoning_tokens`, both kept. A stream that ends
without `data: [DONE]`, or without a finish_reason, is a failure, never a "stop".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import Field

from server.core.embedding import EmbeddingRequest, Embeddings
from server.core.errors import UpstreamError
from server.core.generation import Event, Finished, GenerationRequest, TextDelta, TokenCounts
from server.providers.http import (
    HttpParams,
    ProtocolViolation,
    bearer,
    check_status,
    make_client,
    read_api_key,
    read_json,
    sse_events,
    upstream_errors,
)


class OpenAIParams(HttpParams):
    # Stream from the upstream (true) or make one unary request per generation.
    stream: bool = True
    # Ask for usage in streams; turn off for old servers that refuse stream_options.
    stream_usage: bool = True
    # OpenAI's reasoning models take max_completion_tokens instead of max_tokens.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # Extra JSON fields merged into every request body (e.g. {"seed": 1}).
    extra_body: dict[str, Any] = Field(default_factory=dict)


class OpenAIProvider:
    def __init__(self, provider_id: str, params: OpenAIParams, where: str) -> None:
        self.id = provider_id
        self.params = params
        self.retry_policy = params.retry_policy
        self._client = make_client(params, bearer(read_api_key(params, where)))

    def body(self, request: GenerationRequest, stream: bool) -> dict[str, Any]:
        p = self.params
        body: dict[str, Any] = {**p.extra_body, "model": p.model}
        if request.is_chat:
            body["messages"] = [{"role": m.role, "content": m.content} for m in request.messages]
        else:
            body["prompt"] = request.prompt
        if request.max_tokens is not None:
            body[p.max_tokens_field if request.is_chat else "max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if stream:
            body["stream"] = True
            if p.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        path = "/chat/completions" if request.is_chat else "/completions"
        stream = self.params.stream
        with upstream_errors(self.id):
            async with self._client.stream("POST", path, json=self.body(request, stream)) as r:
                await check_status(r, self.id)
                if not stream:
                    answer = await read_json(r)
                    choice = _first_choice(answer)
                    text = _text(choice, request.is_chat, "message")
                    if text:
                        yield TextDelta(text)
                    yield Finished(_finish(choice), counts(answer.get("usage")))
                    return
                finish: str | None = None
                usage: TokenCounts | None = None
                async for event in sse_events(r):
                    if event.data == "[DONE]":
                        if finish is None:
                            raise ProtocolViolation("stream ended without a finish_reason")
                        yield Finished(finish, usage)
                        return
                    chunk = json.loads(event.data)
                    if chunk.get("error"):
                        raise UpstreamError(
                            f"{self.id}: upstream failed mid-stream: {_error_text(chunk['error'])}",
                            {"provider": self.id},
                            upstream_answered=True,
                        )
                    if chunk.get("usage"):
                        usage = counts(chunk["usage"])
                    for choice in chunk.get("choices") or ():
                        if choice.get("index", 0) != 0:
                            continue
                        text = _text(choice, request.is_chat, "delta")
                        if text:
                            yield TextDelta(text)
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                raise ProtocolViolation("stream ended without data: [DONE]")

    async def embed(self, request: EmbeddingRequest) -> Embeddings:
        """POST /embeddings; vectors are asked as floats, which every compatible server
        writes (base64 for the caller is the gateway's own encoding)."""
        body: dict[str, Any] = {
            "model": self.params.model,
            "input": [i if isinstance(i, str) else list(i) for i in request.inputs],
            "encoding_format": "float",
        }
        if request.dimensions is not None:
            body["dimensions"] = request.dimensions
        if request.user is not None:
            body["user"] = request.user
        with upstream_errors(self.id):
            async with self._client.stream("POST", "/embeddings", json=body) as r:
                await check_status(r, self.id)
                answer = await read_json(r)
            return _embeddings(answer, len(request.inputs))

    async def aclose(self) -> None:
        await self._client.aclose()


def _embeddings(answer: Any, expected: int) -> Embeddings:
    """OpenAI's embedding list -> vectors in input order (by `index`)."""
    items = sorted(answer["data"], key=lambda item: int(item["index"]))
    if [int(item["index"]) for item in items] != list(range(expected)):
        raise ProtocolViolation(f"expected {expected} embeddings indexed from 0")
    vectors = []
    for item in items:
        vector = item["embedding"]
        if not isinstance(vector, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            raise ProtocolViolation("an embedding is not a list of numbers")
        vectors.append(tuple(float(x) for x in vector))
    usage = answer.get("usage") or {}
    prompt = usage.get("prompt_tokens")
    return Embeddings(tuple(vectors), int(prompt) if prompt is not None else None)


def counts(usage: Any) -> TokenCounts | None:
    """OpenAI usage -> TokenCounts (same convention: prompt includes cached)."""
    if not isinstance(usage, dict) or usage.get("prompt_tokens") is None:
        return None
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return TokenCounts(
        prompt_tokens=int(usage["prompt_tokens"]),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(prompt_details.get("cached_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


def _first_choice(answer: Any) -> dict[str, Any]:
    choices = answer["choices"]
    if not choices:
        raise ProtocolViolation("no choices")
    choice: dict[str, Any] = choices[0]
    return choice


def _text(choice: dict[str, Any], chat: bool, key: str) -> str:
    if not chat:
        return str(choice.get("text") or "")
    content = (choice.get(key) or {}).get("content")
    return content if isinstance(content, str) else ""


def _finish(choice: dict[str, Any]) -> str:
    finish = choice.get("finish_reason")
    if not finish:
        raise ProtocolViolation("answer without a finish_reason")
    return str(finish)


def _error_text(error: Any) -> str:
    message = error.get("message") if isinstance(error, dict) else error
    return str(message)[:200]
