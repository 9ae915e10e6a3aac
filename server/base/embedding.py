"""Embeddings: what the core asks of a provider that embeds, and what it gets back.

A provider declares the capability by having `embed` (the Embedder protocol): the
OpenAI-compatible and simulated adapters do, Anthropic's and TGI's do not. A model
can create embeddings when at least one of its providers can; only those are tried.
`EMBEDDINGS` is the kind the operation run (server/base/operation.py) runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from server.base import tokens
from server.base.generation import RetryPolicy, TokenCounts
from server.base.operation import Measure

# One input: text, or token ids.
Input = str | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EmbeddingRequest:
    """Inputs are all text or all token-id lists, never mixed, none empty."""

    inputs: tuple[Input, ...]
    dimensions: int | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True)
class Embeddings:
    """One vector per input, in input order. `prompt_tokens` is None when the upstream
    reported no usage; the core then estimates it."""

    vectors: tuple[tuple[float, ...], ...]
    prompt_tokens: int | None = None


@runtime_checkable
class Embedder(Protocol):
    """A provider that creates embeddings. Failures are raised as UpstreamError."""

    retry_policy: RetryPolicy

    async def embed(self, request: EmbeddingRequest) -> Embeddings: ...


def estimate_tokens(request: EmbeddingRequest) -> int:
    """Input tokens: token ids count themselves, text is estimated."""
    return sum(len(i) if isinstance(i, tuple) else tokens.estimate(i) for i in request.inputs)


class Embedding:
    """Embeddings as an operation: billed by their input tokens, none generated."""

    name = "embeddings"

    def serves(self, provider: object) -> bool:
        return isinstance(provider, Embedder)

    async def call(self, provider: object, request: EmbeddingRequest) -> Embeddings:
        assert isinstance(provider, Embedder)
        return await provider.embed(request)

    def malformed(self, request: EmbeddingRequest, result: Embeddings) -> str | None:
        if len(result.vectors) != len(request.inputs):
            return f"{len(result.vectors)} vectors for {len(request.inputs)} inputs"
        return None

    def texts(self, request: EmbeddingRequest) -> tuple[Input, ...]:
        return request.inputs

    def with_texts(self, request: EmbeddingRequest, texts: tuple[Input, ...]) -> EmbeddingRequest:
        return EmbeddingRequest(texts, request.dimensions, request.user)

    def measure(self, request: EmbeddingRequest, result: Embeddings | None) -> Measure:
        """The upstream's count when it gave one, else an estimate; no output tokens."""
        reported = result.prompt_tokens if result is not None else None
        return Measure(TokenCounts(estimate_tokens(request) if reported is None else reported, 0))


EMBEDDINGS = Embedding()
