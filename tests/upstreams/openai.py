"""The OpenAI wire format: /v1/chat/completions and /v1/completions, JSON or SSE."""

from __future__ import annotations

import json
from typing import Any

from tests.upstreams import shapes
from tests.upstreams.base import Reply, sse

CREATED = 1767225600


class OpenAIWire:
    def check(self, path: str, body: dict[str, Any]) -> list[str]:
        return shapes.openai_chat(body) if path.endswith("/chat/completions") else []

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return body.get("max_completion_tokens") or body.get("max_tokens")

    def usage(self, reply: Reply) -> dict[str, Any]:
        u = reply.usage
        completion = len(reply.tokens) + u.reasoning_tokens
        return {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": u.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        }

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        text = "".join(reply.tokens)
        tool = shapes.tool_to_call(body, anthropic=False)
        if path.endswith("/chat/completions") and tool is not None:
            call = {
                "id": "call_fake",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(shapes.ARGUMENTS)},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "message": message, "logprobs": None,
                      "finish_reason": "tool_calls"}  # fmt: skip
            kind = "chat.completion"
        elif path.endswith("/chat/completions"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": reply.finish,
            }
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reply.finish}
            kind = "text_completion"
        answer = {
            "id": "cmpl-fake",
            "object": kind,
            "created": CREATED,
            "model": body.get("model"),
            "choices": [choice],
            "usage": self.usage(reply),
        }
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        chat = path.endswith("/chat/completions")
        head = {
            "id": "chatcmpl-fake" if chat else "cmpl-fake",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": CREATED,
            "model": body.get("model"),
        }
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta_or_text: Any, finish: str | None = None) -> bytes:
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
            if chat:
                choice["delta"] = delta_or_text
            else:
                choice["text"] = delta_or_text
            data: dict[str, Any] = {**head, "choices": [choice]}
            if include_usage:
                data["usage"] = None
            return sse(data)

        before = [chunk({"role": "assistant", "content": ""})] if chat else []
        per_token = [chunk({"content": t} if chat else t) for t in reply.tokens]
        after = [chunk({} if chat else "", reply.finish)]
        tool = shapes.tool_to_call(body, anthropic=False) if chat else None
        if tool is not None:
            # OpenAI's framing: id, type and name first, then argument fragments.
            head_call = {"index": 0, "id": "call_fake", "type": "function",
                         "function": {"name": tool, "arguments": ""}}  # fmt: skip
            per_token = [chunk({"tool_calls": [head_call]})] + [
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})
                for f in shapes.ARGUMENT_FRAGMENTS
            ]
            after = [chunk({}, "tool_calls")]
        if include_usage:
            after.append(sse({**head, "choices": [], "usage": self.usage(reply)}))
        after.append(b"data: [DONE]\n\n")
        return before, per_token, after

    def error(self, status: int) -> Any:
        kind = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(status, "server_error")
        return {
            "error": {
                "message": f"fake upstream error {status}",
                "type": "invalid_request_error" if status < 500 else "server_error",
                "param": None,
                "code": kind,
            }
        }
