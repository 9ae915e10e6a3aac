"""The Anthropic Messages wire format: POST /v1/messages, JSON or SSE events.

Every request is checked as the Messages API checks it (`refusal`): the key in
`x-api-key` (an `Authorization: Bearer` header is no key to it), the `anthropic-version`
header, the top-level fields of anthropic-sdk-python's `MessageCreateParams` (an unknown
one is the 400 "<field>: Extra inputs are not permitted"), each field's type and range,
and the shapes of messages, content blocks, tools and tool_choice (shapes.py). A refused
request gets the API's status and error body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.upstreams import shapes
from tests.support.upstreams.base import Reply, sse
from tests.support.upstreams.checks import (
    BOOL,
    KEY,
    LIST,
    OBJECT,
    STRING,
    Check,
    Refusal,
    first_problem,
    integer,
    number,
    of_type,
    one_of,
    strings,
)

STOP = {"stop": "end_turn", "length": "max_tokens"}
# MessageCreateParams' body fields (anthropic-sdk-python, src/anthropic/types/
# message_create_params.py; `user_profile_id` is a header there, not a field).
FIELDS = frozenset({
    "max_tokens", "messages", "model", "cache_control", "container", "inference_geo",
    "metadata", "output_config", "service_tier", "stop_sequences", "stream", "system",
    "temperature", "thinking", "tool_choice", "tools", "top_k", "top_p",
})  # fmt: skip
REQUIRED = ("model", "max_tokens", "messages")
# MessageCountTokensParams' body fields: the request without its sampling and stream.
COUNT_FIELDS = frozenset({
    "messages", "model", "cache_control", "output_config", "system", "thinking",
    "tool_choice", "tools",
})  # fmt: skip
COUNT_REQUIRED = ("model", "messages")
# Fields of beta features, taken when an anthropic-beta header names one.
BETA_FIELDS = frozenset({"context_management", "mcp_servers", "container", "speed"})
CHECKS: dict[str, Check] = {
    "model": STRING,
    "max_tokens": integer(1),
    "messages": LIST,
    "metadata": OBJECT,
    "service_tier": one_of("auto", "standard_only"),
    "stop_sequences": strings(),
    "stream": BOOL,
    "system": of_type(str, list, word="a string or an array of text blocks"),
    "temperature": number(0, 1),
    "thinking": OBJECT,
    "tool_choice": OBJECT,
    "tools": LIST,
    "top_k": integer(0),
    "top_p": number(0, 1),
}
VERSIONS = ("2023-06-01", "2023-01-01")


def error(kind: str, message: str) -> Any:
    return {"type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_fake"}  # fmt: skip


def invalid(message: str) -> Refusal:
    return Refusal(400, error("invalid_request_error", message), message)


@dataclass
class AnthropicWire:
    """Answers as Anthropic does; with thinking asked for, a signed thinking block comes
    first, and with the web search tool offered a server tool call and its result."""

    # The key the fake expects in x-api-key; None: any or none.
    key: str | None = KEY

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        if self.key is not None:
            given = headers.get("x-api-key")
            if given is None:
                message = "x-api-key header is required"
                return Refusal(401, error("authentication_error", message), message)
            if given != self.key:
                message = "invalid x-api-key"
                return Refusal(401, error("authentication_error", message), message)
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return Refusal(404, error("not_found_error", "Not Found"), f"unknown path {path}")
        version = headers.get("anthropic-version")
        if version is None:
            return invalid("anthropic-version: header is required")
        if version not in VERSIONS:
            return invalid(f"anthropic-version: invalid version {version!r}")
        counting = path.endswith("/count_tokens")
        fields, required = (COUNT_FIELDS, COUNT_REQUIRED) if counting else (FIELDS, REQUIRED)
        if headers.get("anthropic-beta"):
            fields = fields | BETA_FIELDS
        if extra := sorted(set(body) - fields):
            return invalid(f"{extra[0]}: Extra inputs are not permitted")
        for name in required:
            if name not in body:
                return invalid(f"{name}: Field required")
        if (found := first_problem(body, CHECKS, nullable=False)) is not None:
            name, problem = found
            return invalid(f"{name}: {problem}")
        if set(body.get("metadata") or {}) - {"user_id"}:
            extra = sorted(set(body["metadata"]) - {"user_id"})
            return invalid(f"metadata.{extra[0]}: Extra inputs are not permitted")
        if not isinstance((body.get("metadata") or {}).get("user_id", ""), str | None):
            return invalid("metadata.user_id: Input should be a valid string")
        if problems := shapes.anthropic_messages(body, counting=counting):
            return invalid("; ".join(problems))
        return _cache_controls(body)

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return body.get("max_tokens")

    def usage(self, reply: Reply, output_tokens: int) -> dict[str, Any]:
        u = reply.usage
        return {
            # Anthropic's input_tokens exclude cache reads and cache writes.
            "input_tokens": u.prompt_tokens - u.cached_tokens - u.cache_write_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
            "cache_read_input_tokens": u.cached_tokens,
            # The writes by lifetime, as the API has reported them since 1-hour caching.
            "cache_creation": {
                "ephemeral_5m_input_tokens": u.cache_write_tokens - u.cache_write_1h_tokens,
                "ephemeral_1h_input_tokens": u.cache_write_1h_tokens,
            },
            "output_tokens": output_tokens,
        }

    def message(self, body: dict[str, Any], content: list[Any], stop: str | None) -> Any:
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
        }

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        if path.endswith("/count_tokens"):
            return {}, {"input_tokens": COUNTED}
        text: dict[str, Any] = {"type": "text", "text": "".join(reply.tokens)}
        if _searches(body):
            text["citations"] = [CITATION]
        content: list[Any] = [*_leading(body), text]
        stop = STOP[reply.finish]
        tool = shapes.tool_to_call(body, anthropic=True)
        if tool is not None:
            content = [*_leading(body), {"type": "text", "text": "Let me check."},
                       {"type": "tool_use", "id": "toolu_fake", "name": tool,
                        "input": shapes.ARGUMENTS}]  # fmt: skip
            stop = "tool_use"
        answer = self.message(body, content, stop)
        answer["usage"] = self.usage(reply, len(reply.tokens)) | _searched(body)
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        start = self.message(body, [], None)
        start["usage"] = self.usage(reply, 1)
        leading = _leading_frames(body)
        k = len(_leading(body))  # the text block's index
        text_start = [
            sse({"type": "content_block_start", "index": k,
                 "content_block": {"type": "text", "text": ""}}, "content_block_start"),
        ]  # fmt: skip
        if _searches(body):
            text_start.append(_delta(k, {"type": "citations_delta", "citation": CITATION}))
        before = [
            sse({"type": "message_start", "message": start}, "message_start"),
            *leading,
            *text_start,
            sse({"type": "ping"}, "ping"),
        ]
        per_token = [_delta(k, {"type": "text_delta", "text": t}) for t in reply.tokens]
        stop = STOP[reply.finish]
        tool = shapes.tool_to_call(body, anthropic=True)
        tool_frames = []
        if tool is not None:
            stop = "tool_use"
            tool_frames = [
                sse({"type": "content_block_stop", "index": k}, "content_block_stop"),
                sse({"type": "content_block_start", "index": k + 1, "content_block": {
                    "type": "tool_use", "id": "toolu_fake", "name": tool, "input": {}}},
                    "content_block_start"),
                *(_delta(k + 1, {"type": "input_json_delta", "partial_json": f})
                  for f in shapes.ARGUMENT_FRAGMENTS),
            ]  # fmt: skip
        after = [
            *tool_frames,
            sse(
                {"type": "content_block_stop", "index": k + 1 if tool else k}, "content_block_stop"
            ),
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": len(reply.tokens), **_searched(body)},
                },
                "message_delta",
            ),  # fmt: skip
            sse({"type": "message_stop"}, "message_stop"),
        ]
        return before, per_token, after

    def error(self, status: int) -> Any:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"fake upstream {status}"}}


COUNTED = 42
THINKING = {"type": "thinking", "thinking": "Let me think.", "signature": shapes.SIGNATURE + "1"}
SEARCH = [
    {"type": "server_tool_use", "id": "srvtoolu_fake", "name": "web_search",
     "input": {"query": "fake"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_fake", "content": [
        {"type": "web_search_result", "url": "https://example.com", "title": "Example",
         "encrypted_content": "enc-fake", "page_age": None}]},
]  # fmt: skip
CITATION = {"type": "web_search_result_location", "url": "https://example.com",
            "title": "Example", "encrypted_index": "ei-fake", "cited_text": "fake"}  # fmt: skip


def _searched(body: dict[str, Any]) -> dict[str, Any]:
    """What Anthropic adds to a usage report when its web search ran."""
    return {"server_tool_use": {"web_search_requests": 1}} if _searches(body) else {}


def _thinks(body: dict[str, Any]) -> bool:
    return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")


def _searches(body: dict[str, Any]) -> bool:
    return any(t.get("type") == "web_search_20250305" for t in body.get("tools") or [])


def _leading(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The blocks before the text: thinking, then a web search and its result."""
    return [*([THINKING] if _thinks(body) else []), *(SEARCH if _searches(body) else [])]


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse({"type": "content_block_delta", "index": index, "delta": delta},
               "content_block_delta")  # fmt: skip


def _leading_frames(body: dict[str, Any]) -> list[bytes]:
    frames = []
    for index, block in enumerate(_leading(body)):
        if block["type"] == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            frames += [
                sse({"type": "content_block_start", "index": index, "content_block": empty},
                    "content_block_start"),
                _delta(index, {"type": "thinking_delta", "thinking": block["thinking"]}),
                _delta(index, {"type": "signature_delta", "signature": block["signature"]}),
            ]  # fmt: skip
        else:
            frames.append(sse({"type": "content_block_start", "index": index,
                               "content_block": block}, "content_block_start"))  # fmt: skip
        frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    return frames


def _cache_controls(body: dict[str, Any]) -> Refusal | None:
    """Breakpoints as the API takes them: ephemeral, 5m or 1h, at most four."""
    system = body.get("system")
    blocks = [
        *(system if isinstance(system, list) else ()),
        *(body.get("tools") or ()),
        *(b for m in body["messages"] if isinstance(m.get("content"), list) for b in m["content"]),
    ]
    marks = [b["cache_control"] for b in blocks if isinstance(b, dict) and "cache_control" in b]
    for mark in marks:
        if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
            return invalid("cache_control.type: Input should be 'ephemeral'")
        if mark.get("ttl", "5m") not in ("5m", "1h"):
            return invalid("cache_control.ttl: Input should be '5m' or '1h'")
    if len(marks) > 4:
        return invalid(
            f"A maximum of 4 blocks with cache_control may be provided. Found {len(marks)}."
        )
    return None
