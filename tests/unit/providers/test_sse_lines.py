"""The upstream client's event-stream reading: line ends across read boundaries, the
bounds on a line and an event, and the WHATWG rules for events (names, multi-line data,
comments, a last event without its blank line)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from server.providers.http import (
    MAX_BODY_BYTES,
    Lines,
    ProtocolViolation,
    SseEvent,
    count,
    sse_events,
)


async def feed(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def lines(*chunks: bytes, limit: int = MAX_BODY_BYTES) -> list[str]:
    """The lines of a body read in `chunks`: a line end after the last one ends it."""
    splitter = Lines(limit)
    out = [line for chunk in chunks for line in splitter.feed(chunk)]
    return out + (splitter.feed(b"\n") if splitter.rest else [])


class Body:
    """What sse_events reads of an answer: its body, in the reads given."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return feed(*self.chunks)


async def events(*chunks: bytes, limit: int = 1 << 20) -> list[SseEvent]:
    return [e async for e in sse_events(Body(*chunks), limit)]  # type: ignore[arg-type]


def test_lf_crlf_and_lone_cr_across_reads():
    assert lines(b"data: a\r", b"\n\r\ndata: b\n", b"\ndata: c\rdata: d\r\n") == [
        "data: a", "", "data: b", "", "data: c", "data: d",
    ]  # fmt: skip
    assert lines(b"data: x", b"yz") == ["data: xyz"]
    assert lines(b"data: \xc3", b"\xa9\n") == ["data: \u00e9"]
    assert lines(b"data: \xff\n") == ["data: \ufffd"]
    assert lines(b"data: last\r") == ["data: last"]
    assert lines(b"data: \xff") == ["data: \ufffd"]
    assert lines(b"a\r\r") == ["a", ""]
    assert lines(b"a\rb") == ["a", "b"]
    assert lines() == []


def test_a_line_is_bounded_to_the_byte():
    assert lines(b"x" * 16 + b"\n", limit=16) == ["x" * 16]
    assert lines(b"x" * 16, limit=16) == ["x" * 16]
    # The bound is per line, not per read: a read of several full-length lines passes.
    assert lines(b"x" * 16 + b"\n" + b"y" * 16 + b"\r\n", limit=16) == ["x" * 16, "y" * 16]
    assert lines(b"x" * 16 + b"\r" + b"y" * 16 + b"\n", limit=16) == ["x" * 16, "y" * 16]
    with pytest.raises(ProtocolViolation, match="^an event-stream line exceeds 16 bytes$"):
        lines(b"x" * 16 + b"\r" + b"y" * 17 + b"\n", limit=16)
    with pytest.raises(ProtocolViolation, match="^an event-stream line exceeds 16 bytes$"):
        lines(b"x" * 17, limit=16)
    with pytest.raises(ProtocolViolation, match="^an event-stream line exceeds 16 bytes$"):
        lines(b"x" * 17 + b"\n", limit=16)
    with pytest.raises(ProtocolViolation):
        lines(b"data: " + b"x" * MAX_BODY_BYTES, b"x")


async def test_events_by_the_whatwg_rules():
    stream = (
        b': a comment\nevent: delta\ndata: {"a":\n',
        b"data: 1}\n\n"
        b"data:no space\n\n"
        b"event: ignored\n\n"  # no data: no event, and the name does not carry over
        b"data: last",
    )
    assert await events(*stream) == [
        SseEvent("delta", '{"a":\n1}'),
        SseEvent("message", "no space"),
        SseEvent("message", "last"),
    ]
    assert await events(b"event: done\ndata: x") == [SseEvent("done", "x")]
    assert await events(b"data: a\ndata: b") == [SseEvent("message", "a\nb")]
    # A bare colon is a comment too (a keep-alive some servers send).
    assert await events(b":\n\ndata: x\n:\n\n") == [SseEvent("message", "x")]


async def test_an_event_is_bounded_across_its_lines():
    line = b"data: " + b"x" * (1 << 19) + b"\n"
    many = line * (MAX_BODY_BYTES // (1 << 19))
    assert len(await events(many + b"\n", limit=1 << 20)) == 1  # exactly the bound
    # The count starts again at each event.
    assert len(await events(b"data: x\n\n" + many + b"\n", limit=1 << 20)) == 2
    with pytest.raises(ProtocolViolation, match="^stream event too large$"):
        await events(many + b"data: x\n\n", limit=1 << 20)


def test_a_token_count_is_a_json_integer_in_range():
    assert count(12, "n") == 12 and count(12.0, "n") == 12 and count(2**31 - 1, "n") == 2**31 - 1
    for bad in (2**31, -1, 12.5, float("inf"), float("nan"), "12", True, None):
        with pytest.raises(ProtocolViolation, match="^n is not a token count: "):
            count(bad, "n")
    with pytest.raises(ProtocolViolation) as long:
        count("9" * 50, "n")
    assert str(long.value) == "n is not a token count: " + "9" * 40
