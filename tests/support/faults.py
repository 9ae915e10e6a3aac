"""Fault injection for tests: a TCP proxy the test controls, to stall or cut the
connections between the gateway and a real service (PostgreSQL, Redis, an upstream)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target`. `stall()` stops moving bytes both ways
    (connections stay open and silent, like a hung server) and makes new connections
    hang the same way; `resume()` lets them flow again; `cut()` resets every
    connection open now. `down()` is a server gone away: every connection reset, and
    each new one closed as soon as it opens, until `up()`. `cut_on(marker)` resets
    every connection the first time a client sends bytes holding `marker` (those bytes
    never reach the server): an outage that strikes in the middle of a given request."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._down = False
        self._marker: bytes | None = None
        # Connections closed at once while down, and cuts made by a marker.
        self.refused = 0
        self.marker_cuts = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def down(self) -> None:
        self._down = True
        self.cut()

    def up(self) -> None:
        self._down = False

    def cut_on(self, marker: bytes) -> None:
        self._marker = marker

    def cut(self) -> None:
        for writer in list(self._writers):
            transport = writer.transport
            if isinstance(transport, asyncio.WriteTransport):
                transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._down:
            self.refused += 1
            transport = writer.transport
            if isinstance(transport, asyncio.WriteTransport):
                transport.abort()
            return
        self._writers.add(writer)
        try:
            await self._flowing.wait()
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer, from_client=True)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
            self._tasks.discard(task)
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, from_client: bool = False
    ) -> None:
        seen = b""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                if from_client and self._marker is not None:
                    # The tail of the previous read too: a marker split between reads.
                    seen = seen[-len(self._marker) :] + data
                    if self._marker in seen:
                        self._marker = None
                        self.marker_cuts += 1
                        self.cut()
                        return
                writer.write(data)
                await writer.drain()

    async def aclose(self) -> None:
        self.resume()
        self.cut()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@asynccontextmanager
async def tcp_proxy(host: str, port: int) -> AsyncIterator[TcpProxy]:
    proxy = await TcpProxy(host, port).start()
    try:
        yield proxy
    finally:
        await proxy.aclose()


@dataclass
class RawRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


# Answers one request by writing whatever bytes it likes to `writer` (status line
# included); the connection is closed when it returns.
RawHandler = Callable[[RawRequest, asyncio.StreamWriter], Awaitable[None]]


class RawUpstream:
    """An HTTP/1.1 server on loopback that hands each request to a handler writing raw
    bytes: for upstreams that misbehave in ways a well-behaved server library refuses
    to (impossible numbers, endless lines, bodies larger than any reader wants). It
    notes when a client goes away (`closed`) and how many connections are open."""

    def __init__(self, handler: RawHandler) -> None:
        self.handler = handler
        self.port = 0
        self.requests: list[RawRequest] = []
        self.open_connections = 0
        self.closed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> RawUpstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.open_connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = RawRequest(method, path, headers, body)
            self.requests.append(request)
            await self.handler(request, writer)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self.open_connections -= 1
            self.closed.set()
            self._tasks.discard(task)
            writer.close()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@asynccontextmanager
async def raw_upstream(handler: RawHandler) -> AsyncIterator[RawUpstream]:
    upstream = await RawUpstream(handler).start()
    try:
        yield upstream
    finally:
        await upstream.aclose()


def http_response(
    body: bytes | str, status: int = 200, content_type: str = "application/json"
) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    head = (
        f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(data)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + data


SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


def sse_upstream(frames: list[bytes], seen: list[RawRequest], pause_s: float = 0) -> RawHandler:
    """An upstream answering each request (noted in `seen`) with the event stream
    `frames`: in one write, or with `pause_s`, a write each that far apart (a read each)."""

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        seen.append(request)
        writer.write(SSE_HEAD)
        for frame in frames if pause_s else [b"".join(frames)]:
            writer.write(frame)
            await writer.drain()
            await asyncio.sleep(pause_s)

    return handler
