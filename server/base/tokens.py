"""Token estimates for when an upstream reports no usage.

No tokenizer ships for every model, so the gateway estimates as OpenAI's guidance does:
about four bytes of UTF-8 text per token, plus a small per-message overhead for chat.
Upstream-reported counts always win over these.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from google.protobuf.message import Message as ProtoMessage

from server.base.generation import GenerationRequest, Message, TokenCounts

BYTES_PER_TOKEN = 4
# Role markers and separators a chat template adds around each message.
TOKENS_PER_MESSAGE = 4
# The assistant-turn primer after the last message.
REPLY_PRIMER_TOKENS = 3
# An image part, whatever its size: OpenAI's cost of a 1024x1024 image at high detail.
IMAGE_TOKENS = 765


def estimate(text: str) -> int:
    """Estimates the tokens of `text`; non-empty text is at least one token."""
    return _of_bytes(len(text) if text.isascii() else len(text.encode()))


def _of_bytes(size: int) -> int:
    return max(1, (size + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN) if size else 0


def _json_size(value: Any) -> int:
    """The bytes of `value` as compact JSON (a schema's, as an upstream reads it)."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # orjson's refusal: an integer past 64 bits, which JSON allows
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def estimate_prompt(request: GenerationRequest) -> int:
    """Estimates the input tokens of a request, chat overhead included. Kept on the
    request once made: admission, routing, pricing and the usage checks all ask, and an
    agent's prompt with its tools' schemas takes a few hundred microseconds."""
    count = request.prompt_estimate
    if count is None:
        count = _estimate_prompt(request)
        # Frozen, but this field is derived from the others and never compared.
        object.__setattr__(request, "prompt_estimate", count)
    return count


def _estimate_prompt(request: GenerationRequest) -> int:
    if request.prompts:
        suffix = estimate(request.suffix or "")
        return sum(
            (len(p) if isinstance(p, tuple) else estimate(p)) + suffix for p in request.prompts
        )
    if request.prompt is not None:
        return estimate(request.prompt) + estimate(request.suffix or "")
    body = sum(_message(m) + TOKENS_PER_MESSAGE for m in request.messages)
    for tool in request.tools:
        body += estimate(tool.name) + estimate(tool.description or "")
        body += _of_bytes(_json_size(tool.parameters)) if tool.parameters else 0
    fmt = request.response_format
    if fmt is not None and fmt.schema is not None:
        body += _of_bytes(_json_size(fmt.schema))
    return body + REPLY_PRIMER_TOKENS


def _message(message: Message) -> int:
    """Every part of a message: its text, images, name and tool calls."""
    count = estimate(message.content) + IMAGE_TOKENS * len(message.images)
    # A PDF: its bytes, as text's (base64 holds three bytes in four characters).
    count += sum(len(d.data) * 3 // 4 // BYTES_PER_TOKEN for d in message.documents)
    count += estimate(message.name or "")
    for call in message.tool_calls:
        count += estimate(call.name) + estimate(call.arguments) + estimate(call.id)
    return count


# The most tokens any count may hold (the contract's counts are int32).
MAX_COUNT = 2**31 - 1
# Tokens a provider may add around a prompt (templates, hidden system text) and may
# generate past max_tokens (a closing token, a reasoning summary), before its report
# of them is implausible.
PROMPT_SLACK_TOKENS = 4096
COMPLETION_SLACK_TOKENS = 256


def implausible(counts: TokenCounts, request: GenerationRequest) -> str | None:
    """Why an upstream's token report cannot be true of `request`, or None when it may
    be: negative or oversized numbers, parts larger than their whole, more prompt
    tokens than the prompt has bytes (plus template slack), more completion tokens
    than max_tokens allowed (plus slack)."""
    parts = (
        counts.prompt_tokens, counts.completion_tokens, counts.cached_tokens,
        counts.reasoning_tokens, counts.cache_write_tokens, counts.cache_write_1h_tokens,
        counts.audio_input_tokens, counts.audio_output_tokens,
    )  # fmt: skip
    if any(not isinstance(n, int) or n < 0 or n > MAX_COUNT for n in parts):
        return "a count is negative or too large"
    if counts.total_tokens > MAX_COUNT:
        return "the total is too large"
    if counts.cached_tokens + counts.cache_write_tokens > counts.prompt_tokens:
        return "more cached prompt tokens than prompt tokens"
    if counts.cache_write_1h_tokens > counts.cache_write_tokens:
        return "more hour-long cache writes than cache writes"
    if counts.reasoning_tokens > counts.completion_tokens:
        return "more reasoning tokens than completion tokens"
    if counts.audio_input_tokens > counts.prompt_tokens:
        return "more audio prompt tokens than prompt tokens"
    if counts.audio_output_tokens > counts.completion_tokens:
        return "more audio completion tokens than completion tokens"
    prompt_bytes = estimate_prompt(request) * BYTES_PER_TOKEN
    native = request.native
    if native is not None and isinstance(native.request, ProtoMessage):
        # What the native form carries beyond the generic fields (server tool results).
        prompt_bytes = max(prompt_bytes, native.request.ByteSize())
    if counts.prompt_tokens > 2 * prompt_bytes + PROMPT_SLACK_TOKENS + request.input_audio_tokens:
        return f"{counts.prompt_tokens} prompt tokens for a prompt of about {prompt_bytes} bytes"
    limit = request.max_tokens
    # The simulated voice's audio tokens follow its text, which max_tokens bounds.
    written = counts.completion_tokens - counts.audio_output_tokens
    if limit is not None and written > limit + COMPLETION_SLACK_TOKENS:
        return f"{counts.completion_tokens} completion tokens with max_tokens {limit}"
    return None
