"""The upstream client's line splitting (SSE): line ends across read boundaries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from server.providers.http import MAX_BODY_BYTES, ProtocolViolation, _lines


async def feed(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def lines(*chunks: bytes) -> list[str]:
    return [line async for line in _lines(feed(*chunks))]


async def test_lf_crlf_and_lone_cr_across_reads():
    assert await lines(b"data: a\r", b"\n\r\ndata: b\n", b"\ndata: c\rdata: d\r\n") == [
        "data: a", "", "data: b", "", "data: c", "data: d",
    ]  # fmt: skip
    assert await lines(b"data: x", b"yz") == ["data: xyz"]
    assert await lines(b"data: \xc3", b"\xa9\n") == ["data: \u00e9"]


async def test_a_line_without_end_is_bounded():
    with pytest.raises(ProtocolViolation):
        await lines(b"data: " + b"x" * MAX_BODY_BYTES, b"x")
