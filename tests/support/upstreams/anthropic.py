"""The Anthropic Messages wire format: POST /v1/messages, JSON or SSE events."""

from __future__ import annotations

from typing import Any

from tests.support.upstreams import shapes
from tests.support.upstreams.base import Reply, sse

STOP = {"stop": "end_turn", "length": "max_tokens"}


class AnthropicWire:
    def check(self, path: str, body: dict[str, Any]) -> list[str]:
        return shapes.anthropic_messages(body)

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
