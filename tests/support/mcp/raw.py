"""An MCP server written on a raw socket, that keeps every request it receives exactly as
it came: its request line, each header line and its body. A header a client should
never have sent (one a CR or LF injected, a request smuggled inside another) is in
`requests` for a test to see, where a server built on an HTTP library would have
refused or folded it.

It serves the hand-shake generation over HTTP/1.1 (JSON answers, or one event per
answer with `sse=True`), and the same over stdio (`python -m tests.support.mcp.raw
stdio`). Its tools: `echo` (its text back) and `sized` (an answer whose whole JSON-RPC
message is exactly `bytes` long, for the result bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

TOOLS = [
    {"name": "echo", "description": "Says the text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "sized", "description": "An answer of exactly `bytes` bytes.",
     "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}},
                     "required": ["bytes"]}},
]  # fmt: skip


def compact(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def sized(request_id: Any, size: int) -> bytes:
    """A tools/call answer of exactly `size` bytes (one-byte padding in its text)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id,
                               "result": {"content": [{"type": "text", "text": ""}]}}  # fmt: skip
    padding = size - len(compact(message))
    message["result"]["content"][0]["text"] = "x" * padding
    return compact(message)


def answer(message: Any) -> bytes | None:
    """The answer to one JSON-RPC message (None for a notification)."""
    if not isinstance(message, dict) or "id" not in message:
        return None
    request_id, method = message["id"], message.get("method")
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {"protocolVersion": "2025-11-25",
                                  "capabilities": {"tools": {}},
                                  "serverInfo": {"name": "raw", "version": "1"}}  # fmt: skip
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") == "sized":
        return sized(request_id, int(params["arguments"]["bytes"]))
    elif method == "tools/call":
        text = f"raw:{params.get('arguments', {}).get('text', '')}"
        result = {"content": [{"type": "text", "text": text}]}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return compact({"jsonrpc": "2.0", "id": request_id, "error": error})
    return compact({"jsonrpc": "2.0", "id": request_id, "result": result})


@dataclass
class Received:
    """One request as it came: its request line, its header lines (split at every LF,
    as a lenient server would), and its body."""

    line: str
    headers: list[tuple[str, str]]
    body: bytes

    def values(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n.lower() == name.lower()]


@dataclass
class RawMcpServer:
    sse: bool = False
    requests: list[Received] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def header_values(self) -> list[str]:
        """Every header value of every request received."""
        return [v for r in self.requests for _, v in r.headers]

    async def start(self) -> RawMcpServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *lines = head.decode("latin-1").rstrip("\r\n").split("\n")
                headers = [
                    (n.strip(), v.strip())
                    for n, _, v in (raw.rstrip("\r").partition(":") for raw in lines)
                ]
                received = Received(line.rstrip("\r"), headers, b"")
                self.requests.append(received)
                length = received.values("content-length")
                received.body = await reader.readexactly(int(length[-1]) if length else 0)
                writer.write(self._reply(received.body))
                await writer.drain()
        writer.close()

    def _reply(self, body: bytes) -> bytes:
        try:
            out = answer(json.loads(body))
        except ValueError:
            out = None
        if out is None:
            return b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
        kind = "application/json"
        if self.sse:
            kind, out = "text/event-stream", b"event: message\ndata: " + out + b"\n\n"
        head = (f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\nmcp-session-id: raw-session\r\n"
                f"content-length: {len(out)}\r\n\r\n")  # fmt: skip
        return head.encode() + out


@contextlib.asynccontextmanager
async def raw_mcp_server(sse: bool = False):  # type: ignore[no-untyped-def]
    server = await RawMcpServer(sse=sse).start()
    try:
        yield server
    finally:
        await server.aclose()


def stdio() -> None:
    """The same server on stdin and stdout, one message a line."""
    for line in sys.stdin.buffer:
        if line.strip() and (out := answer(json.loads(line))) is not None:
            sys.stdout.buffer.write(out + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    stdio()
