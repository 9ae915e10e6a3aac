"""Moderation: inputs classified against OpenAI's harm categories, what the core asks of
a provider that moderates (the Moderator protocol) and the operation that runs it.

A request is a list of string inputs (a verdict each) or one list of text and image
parts (one verdict for all). Billed by input tokens at the model's input price.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from server.base import tokens
from server.base.generation import RetryPolicy, TokenCounts
from server.base.operation import Measure

# OpenAI's categories (omni-moderation), in its order.
CATEGORIES = (
    "harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
    "illicit/violent", "self-harm", "self-harm/intent", "self-harm/instructions", "sexual",
    "sexual/minors", "violence", "violence/graphic",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Part:
    """A text part, or an image part by URL (`image_url`: https or a data URL)."""

    text: str | None = None
    image_url: str | None = None


@dataclass(frozen=True, slots=True)
class ModerationRequest:
    """`inputs`: strings, a verdict each; or `parts` (set instead), one verdict for all."""

    inputs: tuple[str, ...] = ()
    parts: tuple[Part, ...] = ()

    @property
    def verdicts(self) -> int:
        return len(self.inputs) if self.inputs else 1


@dataclass(frozen=True, slots=True)
class Verdict:
    flagged: bool
    categories: Mapping[str, bool]
    scores: Mapping[str, float]
    # The input types each category's score applies to (`text`, `image`).
    applied: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Moderations:
    """One verdict per string input (one for a list of parts); the upstream's input
    tokens (None when it reported none)."""

    verdicts: tuple[Verdict, ...]
    tokens: int | None = None


@runtime_checkable
class Moderator(Protocol):
    """A provider that moderates. Failures are raised as UpstreamError."""

    retry_policy: RetryPolicy

    async def moderate(self, request: ModerationRequest) -> Moderations: ...


def estimate_tokens(request: ModerationRequest) -> int:
    """The texts' tokens; an image counts as a text's worth of a small image."""
    texts = request.inputs or tuple(p.text or "" for p in request.parts)
    images = sum(1 for p in request.parts if p.image_url is not None)
    return sum(tokens.estimate(t) for t in texts) + images * IMAGE_TOKENS


# What an image adds to the estimate (a low-detail image's tokens).
IMAGE_TOKENS = 85


class Moderation:
    """Moderation as an operation."""

    name = "moderation"

    def serves(self, provider: object) -> bool:
        return isinstance(provider, Moderator)

    async def call(self, provider: object, request: ModerationRequest) -> Moderations:
        assert isinstance(provider, Moderator)
        return await provider.moderate(request)

    def malformed(self, request: ModerationRequest, result: Moderations) -> str | None:
        if len(result.verdicts) != request.verdicts:
            return f"{len(result.verdicts)} results for {request.verdicts} inputs"
        return None

    def texts(self, request: ModerationRequest) -> tuple[str, ...]:
        if request.inputs:
            return request.inputs
        return tuple(p.text for p in request.parts if p.text is not None)

    def with_texts(
        self, request: ModerationRequest, texts: tuple[str | tuple[int, ...], ...]
    ) -> ModerationRequest:
        scanned = iter(str(t) for t in texts)
        if request.inputs:
            return ModerationRequest(inputs=tuple(scanned))
        parts = tuple(Part(text=next(scanned)) if p.text is not None else p for p in request.parts)
        return ModerationRequest(parts=parts)

    def measure(self, request: ModerationRequest, result: Moderations | None) -> Measure:
        reported = result.tokens if result is not None else None
        return Measure(TokenCounts(estimate_tokens(request) if reported is None else reported, 0))


MODERATION = Moderation()
