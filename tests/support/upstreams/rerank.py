"""A fake reranking upstream: Cohere's `/v2/rerank` shape (Jina's, vLLM's, Infinity's)
or Voyage's (`top_k` in, `data[]` out), refusing what those APIs refuse: another key,
another path, an unknown field, an empty query or document list, a document that is
not a string, a `top_n`/`top_k` below 1.

It scores the documents so that the later one is the more relevant (document i of n
scores (i + 1) / n), which no word overlap would give, and reports usage as its API
does: Cohere's search units when `search_units` is set, else `usage.total_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.openai import bad_request, credential_refusal, error_body

FIELDS = {
    "cohere": {"model", "query", "documents", "top_n", "max_tokens_per_doc", "return_documents"},
    "voyage": {"model", "query", "documents", "top_k", "truncation", "return_documents"},
}
TOP = {"cohere": "top_n", "voyage": "top_k"}


@dataclass
class RerankWire:
    shape: str = "cohere"
    key: str | None = KEY
    # Cohere's billed search units in each answer; None: token usage instead.
    search_units: float | None = None
    tokens: int = 37
    refused: list[dict[str, Any]] = field(default_factory=list)

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        refused = credential_refusal(headers, self.key)
        if refused is None and not path.endswith("/rerank"):
            refused = Refusal(404, error_body(f"Invalid URL (POST {path})"), "path")
        if refused is None and (problem := self._problem(body)) is not None:
            refused = bad_request(problem)
        if refused is not None:
            self.refused.append(body)
        return refused

    def _problem(self, body: dict[str, Any]) -> str | None:
        if extra := sorted(set(body) - FIELDS[self.shape]):
            return f"unknown field: {extra[0]}"
        if not isinstance(body.get("model"), str):
            return "model is required"
        if not isinstance(body.get("query"), str) or not body["query"]:
            return "query must be a non-empty string"
        documents = body.get("documents")
        if not isinstance(documents, list) or not documents:
            return "documents must be a non-empty list"
        if not all(isinstance(d, str) for d in documents):
            return "documents must be strings"
        top = body.get(TOP[self.shape])
        if top is not None and (not isinstance(top, int) or top < 1):
            return f"{TOP[self.shape]} must be a positive integer"
        return None

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return False

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return None

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        n = len(body["documents"])
        ranked = sorted(range(n), key=lambda i: -(i + 1))
        top = body.get(TOP[self.shape])
        items = [{"index": i, "relevance_score": (i + 1) / n} for i in ranked[:top]]
        if self.shape == "voyage":
            return {}, {"object": "list", "data": items, "model": body["model"],
                        "usage": {"total_tokens": self.tokens}}  # fmt: skip
        answer: dict[str, Any] = {"id": "rr-1", "results": items}
        if self.search_units is not None:
            answer["meta"] = {"billed_units": {"search_units": self.search_units}}
        else:
            answer["usage"] = {"total_tokens": self.tokens}
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        raise AssertionError("rerank does not stream")

    def error(self, status: int) -> Any:
        return error_body(f"fake failure {status}")
