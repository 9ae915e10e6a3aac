"""Operations: every call that is not a text generation (embeddings, rerank, moderation,
audio, images), as the one operation run sees them.

Each kind is an `Operation` (its request and result types beside its provider protocol
in a module of its own: `embedding.py`, `rerank.py`...): which providers serve it, the
call itself, what makes an answer malformed, the text the guardrails scan, and what the
call used, as a `Measure`. The run (server/application/pipeline/operation_run.py) does
the rest alike for all of them: admission, reservation, failover, timing, the ledger
row and the metrics. A new kind is an Operation, an adapter method and a contract
service, never another run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from server.base.generation import TokenCounts

# What a call is billed in. Tokens are counted for every call (rate limits read them);
# the others are the provider's own units: seconds of audio, input characters, images
# (by size and quality), search units (a query over up to 100 documents).
Unit = Literal["tokens", "seconds", "characters", "images", "search_units"]
UNITS: tuple[Unit, ...] = ("tokens", "seconds", "characters", "images", "search_units")

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True, slots=True)
class Measure:
    """What one operation used: its tokens (the upstream's count, else an estimate) and
    its quantity in each other unit known for it. Which unit it is billed in is the
    price's choice (costs.billed): the first of `units` the model prices, else tokens."""

    counts: TokenCounts
    units: Mapping[Unit, float] = field(default_factory=dict)
    # What sets an image's price beside its count: `<quality>/<size>` (or `<size>`).
    variant: str = ""


class Operation(Protocol[RequestT, ResultT]):
    """One kind of call that is not a text generation."""

    # The capability a model declares to serve it (config `capabilities`), e.g. `rerank`.
    @property
    def name(self) -> str: ...

    def serves(self, provider: object) -> bool:
        """Whether a provider's adapter can make this call."""
        ...

    async def call(self, provider: object, request: RequestT) -> ResultT:
        """Makes the call on a provider that serves it; failures are UpstreamError."""
        ...

    def malformed(self, request: RequestT, result: ResultT) -> str | None:
        """What is wrong with an answer that cannot be the request's (the next provider
        is then tried); None when it is whole."""
        ...

    def texts(self, request: RequestT) -> tuple[str | tuple[int, ...], ...]:
        """The request's inputs the guardrails scan (token ids pass as they are)."""
        ...

    def with_texts(self, request: RequestT, texts: tuple[str | tuple[int, ...], ...]) -> RequestT:
        """The request with its inputs replaced by the guardrails' versions."""
        ...

    def measure(self, request: RequestT, result: ResultT | None) -> Measure:
        """What the call used: from the answer when there is one, else the estimate a
        reservation holds before the call."""
        ...
