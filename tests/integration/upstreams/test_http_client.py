"""The pooled HTTP client every adapter shares, at its bounds: no more connections than
`max_connections`, a wait for a free one bounded by twice `connect_timeout_s`, a
connection that does not open given up after `connect_timeout_s`, no proxy taken from
the environment, compressed answers read, and no HTTP library named to the upstream."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from server.base.errors import UpstreamError
from tests.integration.upstreams.test_adapters import build, collect
from tests.integration.upstreams.test_answer_edges import REQUEST, replying
from tests.support.faults import RawRequest, http_response, raw_upstream

ANSWER = json.dumps({"generated_text": "Hi", "details": {"finish_reason": "eos_token"}})


def held(release: asyncio.Event, arrived: asyncio.Queue[None]) -> Any:
    """A handler that notes each request in `arrived` and answers once `release` is set."""

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        arrived.put_nowait(None)
        await release.wait()
        writer.write(http_response(ANSWER))

    return handler


async def test_no_more_connections_open_than_the_pool_holds():
    release, arrived = asyncio.Event(), asyncio.Queue[None]()
    async with raw_upstream(held(release, arrived)) as upstream:
        provider = build(
            "tgi", upstream.url, stream=False, api_key_env=None, max_connections=2, read_timeout_s=5
        )
        try:
            calls = [asyncio.create_task(collect(provider.generate(REQUEST))) for _ in range(4)]
            await arrived.get()
            await arrived.get()
            await asyncio.sleep(0.3)  # time enough for a third connection, were it allowed
            assert upstream.open_connections == 2 and len(upstream.requests) == 2
            release.set()
            answers = await asyncio.gather(*calls)
            assert [got.text for got in answers] == ["Hi"] * 4
        finally:
            await provider.aclose()


async def test_the_default_pool_holds_more_streams_than_the_http_librarys_own_100():
    release, arrived = asyncio.Event(), asyncio.Queue[None]()
    async with raw_upstream(held(release, arrived)) as upstream:
        provider = build("tgi", upstream.url, stream=False, api_key_env=None, read_timeout_s=30)
        try:
            calls = [asyncio.create_task(collect(provider.generate(REQUEST))) for _ in range(120)]
            for _ in range(120):  # every one in flight at once, none waiting for another
                await asyncio.wait_for(arrived.get(), 10)
            release.set()
            assert len(await asyncio.gather(*calls)) == 120
        finally:
            await provider.aclose()


async def test_a_wait_for_a_free_connection_ends_after_twice_the_connect_timeout():
    release, arrived = asyncio.Event(), asyncio.Queue[None]()
    async with raw_upstream(held(release, arrived)) as upstream:
        provider = build(
            "tgi",
            upstream.url,
            stream=False,
            api_key_env=None,
            max_connections=1,
            connect_timeout_s=0.5,
            read_timeout_s=5,
        )
        try:
            first = asyncio.create_task(collect(provider.generate(REQUEST)))
            await arrived.get()
            started = time.monotonic()
            with pytest.raises(UpstreamError, match="connect timed out"):
                await collect(provider.generate(REQUEST))
            assert 0.95 <= time.monotonic() - started < 3  # not the 5 s read timeout
            release.set()
            assert (await first).text == "Hi"
        finally:
            await provider.aclose()


@pytest.fixture
def unaccepting() -> Iterator[str]:
    """A listening socket whose accept queue is full: the kernel drops new SYNs, so a
    connection to it neither opens nor fails, as to a host that went silent."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    queued = []
    for _ in range(3):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        queued.append(client)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for client in queued:
            client.close()
        server.close()


async def test_a_connection_that_does_not_open_is_given_up_after_the_connect_timeout(
    unaccepting,
):
    provider = build("tgi", unaccepting, stream=False, api_key_env=None, connect_timeout_s=0.4)
    try:
        started = time.monotonic()
        with pytest.raises(UpstreamError, match="connect timed out"):
            await collect(provider.generate(REQUEST))
        assert 0.35 <= time.monotonic() - started < 2  # the connect timeout, not the OS's
    finally:
        await provider.aclose()


async def test_no_proxy_is_taken_from_the_environment(monkeypatch):
    # A proxy that refuses every connection: a client that used it could not answer.
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with raw_upstream(replying(ANSWER)) as upstream:
        provider = build("tgi", upstream.url, stream=False, api_key_env=None)
        try:
            assert (await collect(provider.generate(REQUEST))).text == "Hi"
        finally:
            await provider.aclose()


async def test_a_compressed_answer_is_read_and_no_http_library_is_named():
    async def gzipped(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        body = gzip.compress(ANSWER.encode())
        head, _, rest = http_response(body).partition(b"\r\n")
        writer.write(head + b"\r\ncontent-encoding: gzip" + b"\r\n" + rest)

    async with raw_upstream(gzipped) as upstream:
        provider = build("tgi", upstream.url, stream=False, api_key_env=None)
        try:
            assert (await collect(provider.generate(REQUEST))).text == "Hi"
        finally:
            await provider.aclose()
    sent = upstream.requests[0].headers
    assert "gzip" in sent["accept-encoding"]
    assert "user-agent" not in sent
