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
        version = headers.get("anthropic-version")
        if version is None:
            return invalid("anthropic-version: header is required")
        if version not in VERSIONS:
            return invalid(f"anthropic-version: invalid version {version!r}")
        if extra := sorted(set(body) - FIELDS):
            return invalid(f"{extra[0]}: Extra inputs are not permitted")
        for name in REQUIRED:
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
        if problems := shapes.anthropic_messages(body):
            return invalid("; ".join(problems))
        return None

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
        content: list[Any] = [{"type": "text", "text": "".join(reply.tokens)}]
        stop = STOP[reply.finish]
        tool = shapes.tool_to_call(body, anthropic=True)
        if tool is not None:
            content = [{"type": "text", "text": "Let me check."},
                       {"type": "tool_use", "id": "toolu_fake", "name": tool,
                        "input": shapes.ARGUMENTS}]  # fmt: skip
            stop = "tool_use"
        answer = self.message(body, content, stop)
        answer["usage"] = self.usage(reply, len(reply.tokens))
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        start = self.message(body, [], None)
        start["usage"] = self.usage(reply, 1)
        before = [
            sse({"type": "message_start", "message": start}, "message_start"),
            sse(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
                "content_block_start",
            ),  # fmt: skip
            sse({"type": "ping"}, "ping"),
        ]
        per_token = [
            sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": t},
                },
                "content_block_delta",
            )  # fmt: skip
            for t in reply.tokens
        ]
        stop = STOP[reply.finish]
        tool = shapes.tool_to_call(body, anthropic=True)
        tool_frames = []
        if tool is not None:
            stop = "tool_use"
            tool_frames = [
                sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
                sse({"type": "content_block_start", "index": 1, "content_block": {
                    "type": "tool_use", "id": "toolu_fake", "name": tool, "input": {}}},
                    "content_block_start"),
                *(sse({"type": "content_block_delta", "index": 1, "delta": {
                    "type": "input_json_delta", "partial_json": f}}, "content_block_delta")
                  for f in shapes.ARGUMENT_FRAGMENTS),
            ]  # fmt: skip
        after = [
            *tool_frames,
            sse({"type": "content_block_stop", "index": 1 if tool else 0}, "content_block_stop"),
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": len(reply.tokens)},
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
