"""Rerank: documents ordered by their relevance to a query, what the core asks of a
provider that reranks (the Reranker protocol) and the operation that runs it.

Billed per search unit (Cohere's: a query over up to 100 documents) when the model's
price names one, else by tokens: the upstream's count, or an estimate of what a
cross-encoder reads (the query beside each document), so a self-hosted reranker that
reports nothing is never free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from server.base import tokens
from server.base.generation import RetryPolicy, TokenCounts
from server.base.operation import Measure

# Documents per search unit.
DOCUMENTS_PER_SEARCH_UNIT = 100


@dataclass(frozen=True, slots=True)
class RerankRequest:
    query: str
    documents: tuple[str, ...]
    # The most relevant this many only; None: every document.
    top_n: int | None = None
    max_tokens_per_doc: int | None = None


@dataclass(frozen=True, slots=True)
class Ranking:
    """(document index, relevance score) pairs, most relevant first; what the upstream
    reported it used (None when it did not)."""

    results: tuple[tuple[int, float], ...]
    tokens: int | None = None
    search_units: float | None = None


@runtime_checkable
class Reranker(Protocol):
    """A provider that reranks. Failures are raised as UpstreamError."""

    retry_policy: RetryPolicy

    async def rerank(self, request: RerankRequest) -> Ranking: ...


def estimate_tokens(request: RerankRequest) -> int:
    """What a cross-encoder reads: the query beside each document."""
    query = tokens.estimate(request.query)
    return sum(query + tokens.estimate(d) for d in request.documents)


class Rerank:
    """Rerank as an operation."""

    name = "rerank"

    def serves(self, provider: object) -> bool:
        return isinstance(provider, Reranker)

    async def call(self, provider: object, request: RerankRequest) -> Ranking:
        assert isinstance(provider, Reranker)
        return await provider.rerank(request)

    def malformed(self, request: RerankRequest, result: Ranking) -> str | None:
        indexes = [i for i, _ in result.results]
        wanted = len(request.documents) if request.top_n is None else request.top_n
        if len(set(indexes)) != len(indexes) or len(indexes) > len(request.documents):
            return "a document ranked twice"
        if any(not 0 <= i < len(request.documents) for i in indexes):
            return "a document index out of range"
        if len(indexes) < min(wanted, len(request.documents)):
            return f"{len(indexes)} results for {min(wanted, len(request.documents))}"
        if any(not math.isfinite(score) for _, score in result.results):
            return "a score that is not a number"
        return None

    def texts(self, request: RerankRequest) -> tuple[str, ...]:
        return (request.query, *request.documents)

    def with_texts(
        self, request: RerankRequest, texts: tuple[str | tuple[int, ...], ...]
    ) -> RerankRequest:
        query, *documents = (str(t) for t in texts)
        return RerankRequest(query, tuple(documents), request.top_n, request.max_tokens_per_doc)

    def measure(self, request: RerankRequest, result: Ranking | None) -> Measure:
        reported = result.tokens if result is not None else None
        used = estimate_tokens(request) if reported is None else reported
        units = result.search_units if result is not None else None
        if units is None:
            units = math.ceil(len(request.documents) / DOCUMENTS_PER_SEARCH_UNIT)
        return Measure(TokenCounts(used, 0), {"search_units": units})


RERANK = Rerank()
