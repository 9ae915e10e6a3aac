"""Readers of request fields that several dialects share, with the limits they share.
Every failure is InvalidArgument naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from google.protobuf import struct_pb2
from google.protobuf.message import Message

from server.base import urls
from server.base.errors import InvalidArgument
from server.routing.tags import MAX_TAGS, TAG_CHARS

MAX_STOP_SEQUENCES = 4
MAX_TOKENS_CEILING = 1_000_000
# OpenAI's ranges and names, which its chat and Responses formats share.
MAX_TOOLS = 128
MAX_TOP_LOGPROBS = 20
MAX_METADATA_PAIRS = 16
TOOL_CHOICES = ("none", "auto", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
CACHE_RETENTIONS = ("in_memory", "24h")
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DATA_URL = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")


def image_url(url: str, field: str) -> str:
    """An image's URL as OpenAI's formats take it: a base64 data URL of a png, jpeg, gif
    or webp image, or a URL an upstream may fetch (server/base/urls.py)."""
    if url.startswith("data:"):
        if not DATA_URL.match(url):
            raise InvalidArgument.for_field(
                field, "must be a base64 data URL of a png, jpeg, gif or webp image"
            )
        return url
    return urls.check(url, field)


class HasMetadata(Protocol):
    @property
    def metadata(self) -> Any: ...


def present(message: Message, field: str) -> bool:
    return message.HasField(field)


def read_sampling(
    message: Message, max_temperature: float, prefix: str = "", max_tokens_field: str = "max_tokens"
) -> dict[str, Any]:
    """Reads max_tokens, temperature and top_p, checking each one's range."""
    out: dict[str, Any] = {}
    if present(message, max_tokens_field):
        value = getattr(message, max_tokens_field)
        if not 1 <= value <= MAX_TOKENS_CEILING:
            raise InvalidArgument.for_field(
                prefix + max_tokens_field, f"must be between 1 and {MAX_TOKENS_CEILING}"
            )
        out["max_tokens"] = value
    if present(message, "temperature"):
        if not 0 <= message.temperature <= max_temperature:
            raise InvalidArgument.for_field(
                prefix + "temperature", f"must be between 0 and {max_temperature:g}"
            )
        out["temperature"] = message.temperature
    if present(message, "top_p"):
        if not 0 <= message.top_p <= 1:
            raise InvalidArgument.for_field(prefix + "top_p", "must be between 0 and 1")
        out["top_p"] = message.top_p
    return out


def stop_sequences(stop: Sequence[str], field: str = "stop") -> tuple[str, ...]:
    if len(stop) > MAX_STOP_SEQUENCES:
        raise InvalidArgument.for_field(field, f"at most {MAX_STOP_SEQUENCES} sequences")
    if any(not s for s in stop):
        raise InvalidArgument.for_field(field, "sequences must not be empty")
    return tuple(stop)


def required(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument.for_field(field, "is required")
    return value


def non_empty(text: str, field: str) -> str:
    if not text:
        raise InvalidArgument.for_field(field, "must not be empty")
    return text


def token_ids(values: Sequence[struct_pb2.Value], field: str) -> tuple[int, ...]:
    if not values:
        raise InvalidArgument.for_field(field, "must not be empty")
    ids = []
    for value in values:
        number = value.number_value if value.WhichOneof("kind") == "number_value" else -1.0
        if number < 0 or not number.is_integer() or number >= 2**31:
            raise InvalidArgument.for_field(field, "token ids must be non-negative integers")
        ids.append(int(number))
    return tuple(ids)


def between(message: Message, field: str, low: float, high: float) -> Any:
    """The field's value when set (None otherwise), checked against [low, high]."""
    if not present(message, field):
        return None
    value = getattr(message, field)
    if not low <= value <= high:
        raise InvalidArgument.for_field(field, f"must be between {low:g} and {high:g}")
    return value


def one_of(message: Message, field: str, allowed: tuple[str, ...]) -> str | None:
    if not present(message, field):
        return None
    value: str = getattr(message, field)
    if value not in allowed:
        raise InvalidArgument.for_field(field, f"must be one of {', '.join(allowed)}")
    return value


def metadata(request: HasMetadata) -> tuple[tuple[str, str], ...]:
    if len(request.metadata) > MAX_METADATA_PAIRS:
        raise InvalidArgument.for_field("metadata", f"at most {MAX_METADATA_PAIRS} pairs")
    for key, value in request.metadata.items():
        if len(key) > 64:
            raise InvalidArgument.for_field(f"metadata.{key}", "keys are at most 64 characters")
        if len(value) > 512:
            raise InvalidArgument.for_field(f"metadata.{key}", "values are at most 512 characters")
    return tuple(sorted(request.metadata.items()))


# Where a request of a model path may carry its tags, comma-separated, when its
# dialect has no `metadata.tags` (or the caller prefers a header).
TAGS_HEADER = "x-gateway-tags"


def tags(values: Sequence[str], field: str) -> tuple[str, ...]:
    """A request's tags, each once, in order: at most MAX_TAGS of 1 to TAG_CHARS
    characters."""
    if len(values) > MAX_TAGS:
        raise InvalidArgument.for_field(field, f"at most {MAX_TAGS} tags")
    for index, tag in enumerate(values):
        if not 1 <= len(tag) <= TAG_CHARS:
            raise InvalidArgument.for_field(
                f"{field}[{index}]", f"must be 1 to {TAG_CHARS} characters"
            )
    return tuple(dict.fromkeys(values))


def listed_tags(metadata: Sequence[tuple[str, str]], headers: Mapping[str, str]) -> tuple[str, ...]:
    """The tags of a model path's request: its `metadata.tags`, else the TAGS_HEADER
    header, comma-separated."""
    listed = dict(metadata).get("tags")
    field = "metadata.tags"
    if listed is None:
        listed, field = headers.get(TAGS_HEADER), TAGS_HEADER
    if listed is None:
        return ()
    return tags([tag.strip() for tag in listed.split(",")], field)
