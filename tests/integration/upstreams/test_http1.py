"""The gateway's own HTTP/1.1 client against raw servers on loopback: connections kept
alive and reused, given up when an answer is left unread or the upstream closes them,
bodies framed every way HTTP/1.1 frames them, the read timeout, reading paused while a
body waits unread, TLS verified, and no header able to smuggle another in."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.base.errors import UpstreamError
from server.providers.http import Client, HttpParams, read_json, upstream_errors
from server.providers.http1 import HIGH_WATER
from tests.support.gateways import wait_for

ANSWER = b'{"ok": true}'


@dataclass
class Seen:
    """What a server saw: connections accepted and each request's head lines."""

    connections: int = 0
    heads: list[list[str]] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)


Reply = Callable[[int, asyncio.StreamWriter], Awaitable[None]]


def answer(body: bytes = ANSWER, head: str = "") -> bytes:
    return (f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n{head}\r\n").encode() + body


async def plain(number: int, writer: asyncio.StreamWriter) -> None:
    writer.write(answer())


@asynccontextmanager
async def server(
    reply: Reply = plain, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[str, Seen]]:
    """A keep-alive server: each request read on a connection is answered by `reply`
    (given the request's number on that connection) until the client closes it."""
    seen = Seen()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        try:
            for number in range(1_000):
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                seen.heads.append(head)
                length = next(
                    (int(h.split(":")[1]) for h in head if h.startswith("content-length")), 0
                )
                await reader.readexactly(length)
                await reply(number, writer)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            seen.closed.set()
        finally:
            writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    port = listener.sockets[0].getsockname()[1]
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{port}/base", seen
    finally:
        listener.close()


def client(url: str, **params: object) -> Client:
    return Client(HttpParams(base_url=url, model="m", **params), {})  # type: ignore[arg-type]


@asynccontextmanager
async def opened(url: str, **params: object) -> AsyncIterator[Client]:
    c = client(url, **params)
    try:
        yield c
    finally:
        await c.aclose()


async def refused(c: Client, reason: str) -> None:
    """A request that fails, as the adapters report it."""
    with pytest.raises(UpstreamError, match=f"p: {reason}"), upstream_errors("p"):
        await ask(c)


async def ask(c: Client, path: str = "/ask", **kwargs: object) -> bytes:
    async with c.stream("POST", path, json={"q": 1}, **kwargs) as r:  # type: ignore[arg-type]
        return b"".join([chunk async for chunk in r.aiter_bytes()])


async def test_one_connection_carries_one_request_after_another():
    async with server() as (url, seen), opened(url) as c:
        assert [await ask(c) for _ in range(3)] == [ANSWER] * 3
    assert seen.connections == 1 and len(seen.heads) == 3
    assert seen.heads[0][0] == "POST /base/ask HTTP/1.1"
    assert "host: 127.0.0.1:" + url.split(":")[2].split("/")[0] in seen.heads[0]


async def test_an_answer_left_unread_closes_its_connection():
    async def large(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(answer(b"x" * 1_000_000))

    async with server(large) as (url, seen), opened(url) as c:
        async with c.stream("POST", "/ask", json={}) as r:
            assert r.status_code == 200  # the body is never read
        await asyncio.wait_for(seen.closed.wait(), 5)
        assert len(await ask(c)) == 1_000_000
    assert seen.connections == 2


async def test_bodies_in_chunks_and_bodies_ended_by_the_connection_are_read_whole():
    async def chunked(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for part in (b"hel", b"lo ", b"world"):
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")

    async def unframed(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
        await writer.drain()
        raise OSError  # the server closes: the body ends there

    async with server(chunked) as (url, seen):
        async with opened(url) as c:
            assert [await ask(c), await ask(c)] == [b"hello world"] * 2
        assert seen.connections == 1
    async with server(unframed) as (url, seen):
        async with opened(url) as c:
            assert [await ask(c), await ask(c)] == [b"until the end"] * 2
        assert seen.connections == 2


async def test_an_answer_cut_short_is_an_upstream_error():
    async def cut(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        await writer.drain()
        raise OSError

    async with server(cut) as (url, _), opened(url) as c:
        await refused(c, "upstream closed the connection mid-answer")


async def test_a_connection_the_upstream_closed_or_spoke_on_unasked_is_not_reused():
    async def then_close(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(answer())
        await writer.drain()
        raise OSError  # closed after answering, without saying so

    async def then_speak(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(answer())
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\n\r\n")  # unasked

    async def two_at_once(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(answer() + answer(b'{"ok": false}'))  # the second one unasked

    for reply in (then_close, then_speak, two_at_once):
        async with server(reply) as (url, seen), opened(url) as c:
            assert await ask(c) == ANSWER
            pool = c._pool
            assert pool is not None
            await wait_for(lambda p=pool: not p._idle and p._open == 0)  # let go once seen
            assert await ask(c) == ANSWER
        assert seen.connections == 2, reply.__name__


async def test_a_request_on_a_connection_closed_as_it_lay_idle_is_sent_again_on_a_new_one():
    async def once(number: int, writer: asyncio.StreamWriter) -> None:
        if number > 0:
            raise OSError  # the second request: closed without a byte, as at a keep-alive timeout
        writer.write(answer())

    async with server(once) as (url, seen), opened(url) as c:
        assert [await ask(c), await ask(c)] == [ANSWER] * 2
    assert seen.connections == 2 and len(seen.heads) == 3


async def test_a_new_connection_closed_without_an_answer_is_an_upstream_error():
    async def never(number: int, writer: asyncio.StreamWriter) -> None:
        raise OSError

    async with server(never) as (url, seen), opened(url) as c:
        await refused(c, "upstream closed the connection mid-answer")
    assert seen.connections == 1


async def test_a_request_waiting_for_the_pool_takes_the_slot_of_a_connection_closed():
    async def slow(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf ")
        await writer.drain()
        await asyncio.sleep(0.3)
        writer.write(b"done.")

    async with server(slow) as (url, seen), opened(url, max_connections=1) as c:
        async with c.stream("POST", "/ask", json={}) as r:
            waiting = asyncio.create_task(ask(c))
            await asyncio.sleep(0.1)
            assert not waiting.done() and r.status_code == 200  # left mid-answer: closed
        assert await asyncio.wait_for(waiting, 5) == b"half done."
    assert seen.connections == 2


async def test_a_connection_handed_to_a_wait_cancelled_that_moment_goes_back_to_the_pool():
    async with server() as (url, seen), opened(url, max_connections=1) as c:
        async with c.stream("POST", "/ask", json={}) as r:
            waiting = asyncio.create_task(ask(c))
            await asyncio.sleep(0.1)
            assert await read_json(r) == {"ok": True}
        waiting.cancel()  # the connection was handed to it as its answer ended
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert await asyncio.wait_for(ask(c), 5) == ANSWER
    assert seen.connections == 1


async def test_waits_for_a_connection_that_time_out_leave_nothing_behind():
    # The first connection opens within the timeout even on a loaded machine; the waits
    # for a second one run out.
    async with server() as (url, _), opened(url, max_connections=1, connect_timeout_s=0.5) as c:
        async with c.stream("POST", "/ask", json={}) as r:
            for _ in range(3):
                await refused(c, "connect timed out")
            pool = c._pool
            assert pool is not None and not pool._waiting and pool._open == 1
            await read_json(r)
        assert await ask(c) == ANSWER


async def test_an_interim_answer_is_passed_over():
    async def interim(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + answer())

    async with server(interim) as (url, _), opened(url) as c:
        assert await ask(c) == ANSWER
        assert await ask(c) == ANSWER


async def test_an_upstream_silent_after_its_headers_times_out_after_one_read_timeout():
    async def silent(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf")
        await asyncio.sleep(5)

    async with server(silent) as (url, _), opened(url, read_timeout_s=0.4) as c:
        started = time.monotonic()
        await refused(c, "upstream timed out")
        assert 0.4 <= time.monotonic() - started < 0.8  # one read timeout, not two


async def test_a_body_read_slower_than_it_arrives_pauses_the_reading():
    body = bytes(range(256)) * 32_768  # 8 MiB

    async def large(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(answer(body))

    async with server(large) as (url, _), opened(url) as c:
        async with c.stream("POST", "/ask", json={}) as r:
            chunks = []
            async for chunk in r.aiter_bytes():
                chunks.append(chunk)
                await asyncio.sleep(0.05)  # far slower than loopback delivers
        assert b"".join(chunks) == body
        # Each read takes what waited: unpaused, the first slow read would take it all.
        assert max(len(chunk) for chunk in chunks) <= 2 * HIGH_WATER


async def test_a_json_answer_and_the_request_as_sent():
    async def twice(number: int, writer: asyncio.StreamWriter) -> None:
        writer.write(answer(head="x-seen: 1\r\nX-Seen: 2\r\n"))

    async with server(twice) as (url, seen):
        c = Client(
            HttpParams(base_url=url, model="m", headers={"X-Team": "a"}),
            {"Authorization": "Bearer k"},
        )
        try:
            async with c.stream(
                "POST", "/ask", json={"q": 1}, extra_headers=[("x-team", "b")]
            ) as r:
                assert await read_json(r) == {"ok": True}
                assert r.headers["Content-Length"] == str(len(ANSWER))
                assert dict(r.headers) == {"content-length": "12", "x-seen": "1, 2"}
        finally:
            await c.aclose()
    head = seen.heads[0]
    assert "x-team: b" in head and "x-team: a" not in head  # replaced, not repeated
    assert "authorization: Bearer k" in head
    assert "content-length: 7" in head and "content-type: application/json" in head


async def test_paths_are_escaped_unless_they_hold_escapes_already():
    async with server() as (url, seen), opened(url) as c:
        await ask(c, "/models/a b:stream?alt=sse")
        await ask(c, "/models/a%2Fb")
    assert [head[0] for head in seen.heads] == [
        "POST /base/models/a%20b:stream?alt=sse HTTP/1.1",
        "POST /base/models/a%2Fb HTTP/1.1",
    ]


async def test_no_header_smuggles_another_in():
    async with server() as (url, seen), opened(url) as c:
        for value in ("1\r\nx-b: 2", "1\nx-b: 2", "1\rx-b: 2"):
            with pytest.raises(ValueError, match="line break"):
                await ask(c, extra_headers=[("x-a", value)])
    assert seen.heads == []
    for headers in ({"x-a": "1\r\nx-b: 2"}, {"x-a: b": "1"}, {"": "1"}):
        with pytest.raises(ValidationError, match="a header is a name without"):
            HttpParams(base_url=url, model="m", headers=headers)
    with pytest.raises(ValidationError, match="must not hold credentials"):
        HttpParams(base_url="https://user:secret@example.com/v1", model="m")
    assert HttpParams(base_url="https://example.com/v1/a@b", model="m")  # an @ in the path


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A self-signed certificate for 127.0.0.1 (key and certificate in one file)."""
    where = tmp_path_factory.mktemp("tls") / "server.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(where), "-out", str(where)],
        check=True, capture_output=True,
    )  # fmt: skip
    return where


async def test_tls_is_verified_against_the_trusted_certificates(certificate, monkeypatch):
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificate)
    async with server(tls=tls) as (url, seen):
        async with opened(url) as untrusting:
            await refused(untrusting, "cannot connect")
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
        async with opened(url) as trusting:
            assert json.loads(await ask(trusting)) == {"ok": True}
    assert len(seen.heads) == 1
