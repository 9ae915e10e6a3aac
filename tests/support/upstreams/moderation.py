"""A fake of OpenAI's `/v1/moderations`, refusing what OpenAI refuses: another key,
another path, an unknown field, an input that is not a string, a list of strings or a
list of text and image_url parts.

It flags `violence` in every input that holds "attack" (score 0.9) and reports
`usage.prompt_tokens`, so the gateway's answer shows whose verdict it relays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from server.base.moderation import CATEGORIES
from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.openai import bad_request, credential_refusal, error_body


@dataclass
class ModerationWire:
    key: str | None = KEY
    tokens: int = 11
    refused: list[dict[str, Any]] = field(default_factory=list)

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        refused = credential_refusal(headers, self.key)
        if refused is None and not path.endswith("/moderations"):
            refused = Refusal(404, error_body(f"Invalid URL (POST {path})"), "path")
        if refused is None and (problem := self._problem(body)) is not None:
            refused = bad_request(problem)
        if refused is not None:
            self.refused.append(body)
        return refused

    def _problem(self, body: dict[str, Any]) -> str | None:
        if extra := sorted(set(body) - {"model", "input"}):
            return f"Unrecognized request argument supplied: {extra[0]}"
        given = body.get("input")
        if isinstance(given, str):
            return None
        if not isinstance(given, list) or not given:
            return "input must be a string or a non-empty array"
        if all(isinstance(i, str) for i in given):
            return None
        for part in given:
            if not isinstance(part, dict) or part.get("type") not in ("text", "image_url"):
                return "each part must be a text or image_url object"
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                return "a text part needs its text"
            if part["type"] == "image_url" and not isinstance(
                (part.get("image_url") or {}).get("url"), str
            ):
                return "an image_url part needs its url"
        return None

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return False

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return None

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        given = body["input"]
        if isinstance(given, str):
            texts = [given]
        elif all(isinstance(i, str) for i in given):
            texts = given
        else:
            texts = [" ".join(p.get("text", "") for p in given)]
        results = []
        for text in texts:
            hit = "attack" in text
            results.append({
                "flagged": hit,
                "categories": {c: hit and c == "violence" for c in CATEGORIES},
                "category_scores": {c: 0.9 if hit and c == "violence" else 0.01
                                    for c in CATEGORIES},
                "category_applied_input_types": {c: ["text"] for c in CATEGORIES},
            })  # fmt: skip
        answer = {"id": "modr-1", "model": body["model"], "results": results,
                  "usage": {"prompt_tokens": self.tokens, "total_tokens": self.tokens}}  # fmt: skip
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        raise AssertionError("moderations do not stream")

    def error(self, status: int) -> Any:
        return error_body(f"fake failure {status}")
