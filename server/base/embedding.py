"""Embeddings: what the core asks of a provider that embeds, and what it gets back.

A provider declares the capability by having `embed` (the Embedder protocol): the
OpenAI-compatible and simulated adapters do, Anthropic's and TGI's do not. A model
can create embeddings when at least one of its providers can; only those are tried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from server.base import tokens
from server.base.config import ModelConfig
from server.base.errors import InvalidArgument
from server.base.generation import RetryPolicy

if TYPE_CHECKING:
    # Only for types: the catalog builds the providers, which import this module.
    from server.application.catalog import Upstream

CAPABILITY = "embeddings"
ENCODINGS = ("float", "base64")
# OpenAI's limit on inputs per request.
MAX_INPUTS = 2048
MAX_DIMENSIONS = 65_536

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


def embedders(model: ModelConfig, upstreams: Sequence[Upstream]) -> list[Upstream]:
    """The model's upstreams that can embed; InvalidArgument naming the capability and
    the model when none can."""
    able = [u for u in upstreams if isinstance(u.provider, Embedder)]
    if not able:
        raise InvalidArgument(
            f"model {model.id!r} does not support {CAPABILITY}: none of its providers "
            f"({', '.join(u.id for u in upstreams)}) can create them",
            {"field": "model", "model": model.id, "capability": CAPABILITY},
        )
    return able


def validate(request: Any) -> tuple[EmbeddingRequest, str]:
    """Validates a CreateEmbeddingsRequest; returns it and the encoding format asked."""
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    encoding = request.encoding_format if request.HasField("encoding_format") else "float"
    if encoding not in ENCODINGS:
        raise InvalidArgument.for_field("encoding_format", "must be float or base64")
    dimensions = request.dimensions if request.HasField("dimensions") else None
    if dimensions is not None and not 1 <= dimensions <= MAX_DIMENSIONS:
        raise InvalidArgument.for_field("dimensions", f"must be between 1 and {MAX_DIMENSIONS}")
    user = request.user if request.HasField("user") else None
    inputs = _inputs(request.input if request.HasField("input") else None)
    return EmbeddingRequest(inputs, dimensions, user), encoding


def _inputs(value: Any) -> tuple[Input, ...]:
    """A Value holding a string, strings, token ids, or token-id lists."""
    kind = value.WhichOneof("kind") if value is not None else None
    if kind is None or kind == "null_value":
        raise InvalidArgument.for_field("input", "is required")
    if kind == "string_value":
        return (_text(value.string_value, "input"),)
    if kind != "list_value":
        raise InvalidArgument.for_field(
            "input", "must be a string, an array of strings, or an array of token ids"
        )
    items = value.list_value.values
    if not items:
        raise InvalidArgument.for_field("input", "must not be empty")
    kinds = {item.WhichOneof("kind") for item in items}
    if kinds == {"number_value"}:
        return (_token_ids(items, "input"),)
    if len(items) > MAX_INPUTS:
        raise InvalidArgument.for_field("input", f"at most {MAX_INPUTS} inputs")
    if kinds == {"string_value"}:
        return tuple(_text(item.string_value, f"input[{i}]") for i, item in enumerate(items))
    if kinds == {"list_value"}:
        return tuple(
            _token_ids(item.list_value.values, f"input[{i}]") for i, item in enumerate(items)
        )
    raise InvalidArgument.for_field(
        "input", "must be all strings or all token-id arrays, not a mix"
    )


def _text(text: str, field: str) -> str:
    if not text:
        raise InvalidArgument.for_field(field, "must not be empty")
    return text


def _token_ids(values: Any, field: str) -> tuple[int, ...]:
    if not values:
        raise InvalidArgument.for_field(field, "must not be empty")
    ids = []
    for value in values:
        number = value.number_value if value.WhichOneof("kind") == "number_value" else -1.0
        if number < 0 or not number.is_integer() or number >= 2**31:
            raise InvalidArgument.for_field(field, "token ids must be non-negative integers")
        ids.append(int(number))
    return tuple(ids)
