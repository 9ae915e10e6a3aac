"""A batch's input, read and checked whole: a batch runs every line or none.

Each line is one JSON object, `{"custom_id", "method": "POST", "url", "body"}`, as
OpenAI's Batch API takes it. A refusal names the line (from 1) and its field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from server.base import tokens
from server.base.errors import InvalidArgument

# The endpoints a batch may run, as OpenAI names them.
ENDPOINTS = (
    "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses",
    "/v1/messages",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Line:
    number: int
    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Input:
    lines: list[Line]
    model: str
    # The most tokens the lines may take: their prompts' estimate and their max_tokens.
    tokens: int


def read(data: bytes, endpoint: str, max_lines: int, max_line_bytes: int) -> Input:
    """Every line of `data`, checked against `endpoint` and the limits."""
    lines: list[Line] = []
    seen: set[str] = set()
    model = ""
    worst = 0
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"line {number}"
        if len(raw) > max_line_bytes:
            raise _refused(where, "", f"is longer than {max_line_bytes} bytes")
        if len(lines) >= max_lines:
            raise _refused(where, "", f"is past the limit of {max_lines} lines")
        try:
            item = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _refused(where, "", "is not JSON") from None
        if not isinstance(item, dict):
            raise _refused(where, "", "is not a JSON object")
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            raise _refused(where, "custom_id", "is required (a string)")
        if custom_id in seen:
            raise _refused(where, "custom_id", f"{custom_id!r} is used by an earlier line")
        seen.add(custom_id)
        if item.get("method", "POST") != "POST":
            raise _refused(where, "method", "must be POST")
        if item.get("url") != endpoint:
            raise _refused(where, "url", f"must be the batch's endpoint {endpoint}")
        body = item.get("body")
        if not isinstance(body, dict):
            raise _refused(where, "body", "is required (a JSON object)")
        if body.get("stream"):
            raise _refused(where, "body.stream", "must not be true: a batch line cannot stream")
        named = body.get("model")
        if not isinstance(named, str) or not named:
            raise _refused(where, "body.model", "is required")
        if model and named != model:
            raise _refused(where, "body.model", f"is {named!r}; earlier lines use {model!r}")
        model = named
        worst += _worst_tokens(body, raw)
        lines.append(Line(number, custom_id, body))
    if not lines:
        raise InvalidArgument.for_field("input_file_id", "the file holds no request lines")
    return Input(lines, model, worst)


def from_requests(requests: Any, max_lines: int, max_line_bytes: int) -> Input:
    """An Anthropic batch's `requests[{custom_id, params}]`, as lines to /v1/messages."""
    if not isinstance(requests, list) or not requests:
        raise InvalidArgument.for_field("requests", "is required (a non-empty list)")
    if len(requests) > max_lines:
        raise InvalidArgument.for_field("requests", f"holds more than {max_lines} requests")
    data = bytearray()
    for i, one in enumerate(requests):
        if not isinstance(one, dict):
            raise InvalidArgument.for_field(f"requests[{i}]", "is not an object")
        line = {"custom_id": one.get("custom_id"), "url": "/v1/messages", "body": one.get("params")}
        data += orjson.dumps(line) + b"\n"
    try:
        return read(bytes(data), "/v1/messages", max_lines, max_line_bytes)
    except InvalidArgument as refused:
        # Named by the request's place in `requests`, not by a file's line.
        number = int(refused.metadata["line"].removeprefix("line ")) - 1
        field = refused.metadata["field"].replace("body", "params", 1)
        name = f"requests[{number}]" + ("" if field == "input_file_id" else f".{field}")
        why = refused.metadata["why"]
        raise InvalidArgument.for_field(name, why) from None


def _worst_tokens(body: dict[str, Any], raw: bytes) -> int:
    """A line's prompt estimate (from its size) and the most it may generate."""
    most = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return tokens.estimate(raw.decode(errors="replace")) + (most if isinstance(most, int) else 0)


def _refused(where: str, field: str, why: str) -> InvalidArgument:
    name = f"{where}: {field}" if field else where
    return InvalidArgument(
        f"{name} {why}", {"field": field or "input_file_id", "line": where, "why": why}
    )
