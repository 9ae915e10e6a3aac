"""The simulated provider: a built-in stand-in model for demos, tests and benchmarks.

It calls no network. Its reply is deterministic placeholder text derived from a hash
of the prompt, always starting with "(simulated)", paced by a configurable time to
first token and tokens per second. max_tokens and stop sequences are honoured as a real
model would. Faults can be injected: a share of requests failing before the first
token, or every stream cut after N tokens.

It also creates embeddings: deterministic unit vectors seeded by each input, of
`embedding_dimensions` values, shortened to a request's `dimensions` as OpenAI's
models do (the leading values, normalised again). They carry no meaning.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
from collections.abc import AsyncIterator

from pydantic import BaseModel, ConfigDict, Field

from server.accounting import tokens
from server.core.embedding import EmbeddingRequest, Embeddings, Input, estimate_tokens
from server.core.errors import UpstreamError, UpstreamRejected
from server.core.generation import (
    NO_RETRY,
    Event,
    Finished,
    GenerationRequest,
    TextDelta,
    TokenCounts,
)

PHRASE = (
    "the gateway routes each request to a model that fits its budget and answers with "
    "text usage cost and timing so every caller knows what a call was worth while "
    "providers fail over quietly behind one stable interface for many teams"
)
WORDS = tuple(PHRASE.split())
LABEL = "(simulated)"


class SimulatedParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_ms: float = Field(default=50, ge=0)
    # 0 streams every token at once.
    tokens_per_second: float = Field(default=100, ge=0)
    # Generated tokens when neither max_tokens nor a stop sequence ends the reply
    # earlier; the reply's natural length varies between the two by prompt.
    min_reply_tokens: int = Field(default=12, ge=1)
    max_reply_tokens: int = Field(default=48, ge=1)
    # Share of requests that fail before their first token, 0 to 1.
    error_rate: float = Field(default=0, ge=0, le=1)
    # Cuts every stream after this many tokens with an upstream error.
    fail_after_tokens: int | None = Field(default=None, ge=0)
    # Share of prompt tokens reported as read from a prompt cache, 0 to 1.
    cached_ratio: float = Field(default=0, ge=0, le=1)
    # Values in each embedding vector (a request's `dimensions` may ask for fewer).
    embedding_dimensions: int = Field(default=256, ge=1, le=8192)


class SimulatedProvider:
    def __init__(self, provider_id: str, params: SimulatedParams) -> None:
        self.id = provider_id
        self.params = params
        # A simulated failure is injected on purpose: fail over at once, never retry.
        self.retry_policy = NO_RETRY
        self._random = random.Random()
        # Generations running now; a cancelled caller must bring this back down.
        self.in_flight = 0

    def reply_tokens(self, request: GenerationRequest) -> tuple[list[str], str]:
        """Returns the reply's tokens and finish reason, limits and stops applied."""
        seed = hashlib.blake2b(_prompt_text(request).encode(), digest_size=8).digest()
        rng = random.Random(seed)
        p = self.params
        natural = rng.randint(p.min_reply_tokens, max(p.min_reply_tokens, p.max_reply_tokens))
        words = [LABEL] + [rng.choice(WORDS) for _ in range(natural - 1)]
        pieces = [words[0]] + [" " + w for w in words[1:]]
        finish = "stop"
        if request.max_tokens is not None and request.max_tokens < len(pieces):
            pieces, finish = pieces[: request.max_tokens], "length"
        return _apply_stop(pieces, request.stop, finish)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        p = self.params
        pieces, finish = self.reply_tokens(request)
        if p.error_rate and self._random.random() < p.error_rate:
            raise UpstreamError(
                f"{self.id}: simulated failure before the first token",
                {"provider": self.id},
                upstream_answered=True,
            )
        self.in_flight += 1
        try:
            await asyncio.sleep(p.ttft_ms / 1000)
            interval = 1 / p.tokens_per_second if p.tokens_per_second else 0
            for sent, piece in enumerate(pieces):
                if p.fail_after_tokens is not None and sent >= p.fail_after_tokens:
                    raise UpstreamError(
                        f"{self.id}: simulated stream cut after {sent} tokens",
                        {"provider": self.id},
                        upstream_answered=True,
                    )
                if sent and interval:
                    await asyncio.sleep(interval)
                yield TextDelta(piece)
        finally:
            self.in_flight -= 1
        prompt_tokens = tokens.estimate_prompt(request)
        cached = int(prompt_tokens * p.cached_ratio)
        yield Finished(finish, TokenCounts(prompt_tokens, len(pieces), cached_tokens=cached))

    async def embed(self, request: EmbeddingRequest) -> Embeddings:
        p = self.params
        size = request.dimensions or p.embedding_dimensions
        if size > p.embedding_dimensions:
            raise UpstreamRejected(
                f"{self.id}: dimensions must be at most {p.embedding_dimensions}",
                {"provider": self.id},
            )
        if p.error_rate and self._random.random() < p.error_rate:
            raise UpstreamError(
                f"{self.id}: simulated failure", {"provider": self.id}, upstream_answered=True
            )
        await asyncio.sleep(p.ttft_ms / 1000)
        vectors = tuple(unit_vector(i, p.embedding_dimensions, size) for i in request.inputs)
        return Embeddings(vectors, estimate_tokens(request))

    async def aclose(self) -> None:
        return None


def unit_vector(value: Input, full: int, size: int) -> tuple[float, ...]:
    """The first `size` of `full` pseudo-random values seeded by `value`, scaled to
    length 1."""
    seed = value.encode() if isinstance(value, str) else b"\0" + bytes(str(list(value)), "ascii")
    rng = random.Random(hashlib.blake2b(seed, digest_size=8).digest())
    raw = [rng.gauss(0.0, 1.0) for _ in range(full)][:size]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return tuple(x / norm for x in raw)


def _prompt_text(request: GenerationRequest) -> str:
    if request.prompt is not None:
        return request.prompt
    return "\n".join(f"{m.role}: {m.content}" for m in request.messages)


def _apply_stop(pieces: list[str], stops: tuple[str, ...], finish: str) -> tuple[list[str], str]:
    """Cuts the reply before the earliest stop sequence, which is not part of it."""
    text = "".join(pieces)
    cut = min((i for s in stops if s and (i := text.find(s)) >= 0), default=-1)
    if cut < 0:
        return pieces, finish
    kept: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > cut:
            if cut > used:
                kept.append(piece[: cut - used])
            break
        kept.append(piece)
        used += len(piece)
    return kept, "stop"
