"""The Hugging Face TGI native wire format: /generate and /generate_stream."""

from __future__ import annotations

from typing import Any

from tests.support.upstreams.base import Reply, sse

FINISH = {"stop": "eos_token", "length": "length"}


class TgiWire:
    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return path == "/generate_stream"

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return (body.get("parameters") or {}).get("max_new_tokens")

    def token(self, i: int, text: str) -> dict[str, Any]:
        return {"id": 1000 + i, "text": text, "logprob": -0.25, "special": False}

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        answer = {
            "generated_text": "".join(reply.tokens),
            "details": {
                "finish_reason": FINISH[reply.finish],
                "generated_tokens": len(reply.tokens),
                "seed": None,
                "prefill": [],
                "tokens": [self.token(i, t) for i, t in enumerate(reply.tokens)],
            },
        }
        headers = {
            "x-prompt-tokens": str(reply.usage.prompt_tokens),
            "x-generated-tokens": str(len(reply.tokens)),
        }
        return headers, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        per_token = [
            sse(
                {
                    "index": i + 1,
                    "token": self.token(i, t),
                    "top_tokens": None,
                    "generated_text": None,
                    "details": None,
                }
            )  # fmt: skip
            for i, t in enumerate(reply.tokens)
        ]
        # The final event carries an end-of-sequence token plus the whole text.
        n = len(reply.tokens)
        final = {
            "index": n + 1,
            "token": {"id": 2, "text": "</s>", "logprob": -0.01, "special": True},
            "top_tokens": None,
            "generated_text": "".join(reply.tokens),
            "details": {
                "finish_reason": FINISH[reply.finish],
                "generated_tokens": n,
                "seed": None,
                "input_length": reply.usage.prompt_tokens,
            },
        }
        return [], per_token, [sse(final)]

    def error(self, status: int) -> Any:
        kind = {422: "validation", 429: "overloaded"}.get(status, "generation")
        return {"error": f"fake upstream error {status}", "error_type": kind}
