"""What the core asks of a provider, and what a provider streams back.

Transport-neutral: adapters turn these into their wire format, and the core turns the
events into proto responses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from server.core.errors import UpstreamError


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One generation: a chat (`messages`) or a plain-text `prompt`, never both."""

    messages: tuple[Message, ...] = ()
    prompt: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()

    @property
    def is_chat(self) -> bool:
        return self.prompt is None


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """Tokens of one generation. prompt_tokens includes cached_tokens and
    cache_write_tokens, and completion_tokens includes reasoning_tokens (OpenAI's
    convention; adapters of other wire formats convert)."""

    prompt_tokens: int
    completion_tokens: int
    # Input tokens read from a prompt cache.
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    # Input tokens written to a prompt cache (priced at Price.cache_write).
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A fragment of generated text."""

    text: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of a generation. `counts` is None when the upstream reported no usage;
    the core then counts the tokens itself."""

    finish_reason: str
    counts: TokenCounts | None = None


Event = TextDelta | Finished


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts on one provider; dispatch applies it within the request deadline."""

    max_retries: int = 0
    backoff_s: float = 0.25
    max_retry_after_s: float = 5

    def pause(self, attempt: int, error: UpstreamError) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based), None for no retry."""
        if attempt > self.max_retries:
            return None
        if error.retry_after_s is not None:
            return error.retry_after_s if error.retry_after_s <= self.max_retry_after_s else None
        return self.backoff_s * 2 ** (attempt - 1)


NO_RETRY = RetryPolicy(max_retries=0)


class Provider(Protocol):
    """An upstream that generates text. Failures are raised as `errors.UpstreamError`
    (retryable when another provider may succeed); any other exception is a bug."""

    # How often dispatch may retry this provider before failing over.
    retry_policy: RetryPolicy

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        """Streams TextDelta events, then exactly one Finished event."""
        ...

    async def aclose(self) -> None:
        """Releases pooled connections."""
        ...


@dataclass
class Collected:
    """A whole generation, gathered from its events."""

    text_parts: list[str] = field(default_factory=list)
    finished: Finished | None = None

    @property
    def text(self) -> str:
        return "".join(self.text_parts)
