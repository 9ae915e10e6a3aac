"""The OpenAI wire format: /v1/chat/completions and /v1/completions, JSON or SSE, and
/v1/embeddings (whose requests are checked against OpenAI's API: a wrong one gets the
400 OpenAI gives, and is kept in `refused`)."""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass, field
from typing import Any

from tests.support.upstreams import shapes
from tests.support.upstreams.base import Reply, sse

CREATED = 1767225600
EMBEDDING_FIELDS = {"model", "input", "encoding_format", "dimensions", "user"}
# Dimensions of the fake's vectors when the request does not shorten them.
EMBEDDING_SIZE = 8


def embedding_problem(body: dict[str, Any]) -> str | None:
    """What OpenAI would refuse in an /embeddings request body, or None."""
    if extra := set(body) - EMBEDDING_FIELDS:
        return f"Unrecognized request argument supplied: {', '.join(sorted(extra))}"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: required string"
    value = body.get("input")
    if isinstance(value, str):
        ok = bool(value)
    elif isinstance(value, list) and 0 < len(value) <= 2048:
        ok = (
            all(isinstance(x, str) and x for x in value)
            or all(_is_token(x) for x in value)
            or all(isinstance(x, list) and x and all(_is_token(t) for t in x) for x in value)
        )
    else:
        ok = False
    if not ok:
        return "input: a non-empty string, strings, token ids or token-id arrays"
    if body.get("encoding_format", "float") not in ("float", "base64"):
        return "encoding_format: float or base64"
    dims = body.get("dimensions")
    if dims is not None and (not _is_token(dims) or dims < 1):
        return "dimensions: a positive integer"
    if not isinstance(body.get("user", ""), str):
        return "user: a string"
    return None


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def fake_vector(index: int, size: int) -> list[float]:
    """A recognisable vector: input i's values are i + k/10."""
    return [index + k / 10 for k in range(size)]


@dataclass
class OpenAIWire:
    # Embedding request bodies refused as OpenAI would refuse them.
    refused: list[dict[str, Any]] = field(default_factory=list)

    def refusal(self, path: str, body: dict[str, Any]) -> Any | None:
        if not path.endswith("/embeddings"):
            return None
        problem = embedding_problem(body)
        if problem is None:
            return None
        self.refused.append(body)
        error = {"message": problem, "type": "invalid_request_error", "param": None, "code": None}
        return {"error": error}

    def embeddings(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        inputs = body["input"]
        count = len(inputs) if isinstance(inputs, list) and not _is_token(inputs[0]) else 1
        size = body.get("dimensions") or EMBEDDING_SIZE
        data = []
        for i in range(count):
            vector: Any = fake_vector(i, size)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(struct.pack(f"<{size}f", *vector)).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        prompt = reply.usage.prompt_tokens
        usage = {"prompt_tokens": prompt, "total_tokens": prompt}
        return {"object": "list", "data": data, "model": body["model"], "usage": usage}

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
        if path.endswith("/embeddings"):
            return {}, self.embeddings(body, reply)
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
