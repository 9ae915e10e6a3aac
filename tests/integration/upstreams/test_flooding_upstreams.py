"""Upstreams that flood the gateway's own HTTP client, as real loopback servers: endless
headers, too many of them, one too long, a gzip bomb whole or streamed. Each is a 502
naming the upstream's fault, or a failover to the next provider while nothing has been
relayed; nothing is buffered or inflated past its bound."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import Awaitable, Callable

import httpx
import pytest

from server.providers import http1
from tests.support.faults import RawRequest, raw_upstream
from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.config import model, provider, with_models

HEADERS = {"x-api-key": API_KEY}
ASK = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
Handler = Callable[[RawRequest, asyncio.StreamWriter], Awaitable[None]]
ANSWER = json.dumps({"id": "x", "object": "chat.completion", "choices": [{"index": 0,
    "message": {"role": "assistant", "content": "Honest"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()  # fmt: skip


def _bomb() -> bytes:
    """About 200 KB of gzip that inflates to 200 MB of spaces."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [squeeze.compress(b" " * (1 << 20)) for _ in range(200)]
    return b"".join(out) + squeeze.flush()


BOMB = _bomb()


async def _endless_headers(request: RawRequest, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
    for i in range(100_000):  # 800 MB of headers, unless the reader lets go first
        writer.write(b"x-flood-%d: %s\r\n" % (i, b"y" * 8000))
        await writer.drain()


async def _many_headers(request: RawRequest, writer: asyncio.StreamWriter) -> None:
    head = b"".join(b"x-h%d: v\r\n" % i for i in range(http1.MAX_HEADERS + 1))
    writer.write(b"HTTP/1.1 200 OK\r\n" + head + b"content-length: %d\r\n\r\n" % len(ANSWER))
    writer.write(ANSWER)


async def _long_header(request: RawRequest, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nx-long: " + b"z" * (http1.MAX_HEADER_BYTES + 10) + b"\r\n")
    writer.write(b"content-length: %d\r\n\r\n" % len(ANSWER) + ANSWER)


async def _bomb_whole(request: RawRequest, writer: asyncio.StreamWriter) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
        b"content-length: %d\r\n\r\n" % len(BOMB) + BOMB
    )


async def _bomb_stream(request: RawRequest, writer: asyncio.StreamWriter) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
        b"content-length: %d\r\n\r\n" % len(BOMB) + BOMB
    )


async def _honest(request: RawRequest, writer: asyncio.StreamWriter) -> None:
    body = gzip.compress(ANSWER)  # a compressed answer within bounds is read as ever
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
        b"content-length: %d\r\n\r\n" % len(body) + body
    )


FLOODS: dict[str, tuple[Handler, bool, str]] = {
    "endless headers": (_endless_headers, False, "an answer head larger than 65536 bytes"),
    "too many headers": (_many_headers, False, "an answer with more than 128 headers"),
    "one header too long": (_long_header, False, "an answer header larger than 16384 bytes"),
    "a gzip bomb": (_bomb_whole, False, "inflating more than 200 times"),
    "a streamed gzip bomb": (_bomb_stream, True, "inflating more than 200 times"),
}


@pytest.mark.parametrize("flood", FLOODS)
async def test_a_flooding_upstream_is_a_502_naming_its_fault(flood: str) -> None:
    handler, stream, said = FLOODS[flood]
    async with raw_upstream(handler) as flooding:
        data = with_models(model("m", provider("flooding", "openai", flooding.url, stream=stream)))
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c,
        ):
            reply = await c.post("/v1/chat/completions", headers=HEADERS, json=ASK)
            assert reply.status_code == 502, reply.text
            message = reply.json()["error"]["message"]
            assert "flooding" in message and said in message, message
            # The gateway still serves (its loop was never held by the flood).
            assert (await c.get("/v1/models", headers=HEADERS)).status_code == 200


@pytest.mark.parametrize("flood", FLOODS)
async def test_a_flooding_upstream_fails_over_before_anything_is_relayed(flood: str) -> None:
    handler, stream, _ = FLOODS[flood]
    async with raw_upstream(handler) as flooding, raw_upstream(_honest) as honest:
        data = with_models(model(
            "m",
            provider("flooding", "openai", flooding.url, stream=stream),
            provider("honest", "openai", honest.url, "backup", stream=False),
        ))  # fmt: skip
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c,
        ):
            reply = await c.post("/v1/chat/completions", headers=HEADERS, json=ASK)
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"] == "Honest"
