"""The least a Python relay can cost per streamed event: a TCP proxy on uvloop that
reads each event from the upstream and writes it to the caller, and does nothing else
(no HTTP, no SSE, no JSON). `python -m bench.long_streams --floor` loads it beside the
gateway, so a relayed event's cost can be read against what the event loop and the two
socket operations alone cost.

    python -m bench.relay_floor LISTEN_PORT UPSTREAM_PORT
"""

from __future__ import annotations

import asyncio
import sys
from typing import cast

import uvloop


class _Upstream(asyncio.Protocol):
    def __init__(self, caller: asyncio.Transport) -> None:
        self.caller = caller

    def data_received(self, data: bytes) -> None:
        self.caller.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.caller.close()


class _Caller(asyncio.Protocol):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.upstream: asyncio.Transport | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's subclasses none
        asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            upstream, _ = await loop.create_connection(
                lambda: _Upstream(self.transport), "127.0.0.1", self.upstream_port
            )
        except OSError:
            self.transport.close()
            return
        self.upstream = upstream
        for data in self.early:
            upstream.write(data)

    def data_received(self, data: bytes) -> None:
        if self.upstream is None:
            self.early.append(data)
        else:
            self.upstream.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


async def serve(port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Caller(upstream_port), "127.0.0.1", port, backlog=4096
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1]), int(sys.argv[2])))
