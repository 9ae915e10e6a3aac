"""An upstream MCP server built with the official `mcp` SDK, run as its own process:

    python -m tests.support.mcp.server stdio
    python -m tests.support.mcp.server http PORT [--handshake-only]

It offers a resource, a resource template and a prompt. Its tools cover what a
gateway must relay unchanged or survive: a plain answer with
whole numbers and structured content, a slow tool, a tool that reports its own failure
(`isError`), a 5 MiB result, and a tool that kills its own process mid-call. With
`--handshake-only` it answers a 2026-07-28 request as a server of the hand-shake
generation does (400, -32022 naming its versions), so clients fall back to
`initialize`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent

NAME = os.environ.get("MCP_TEST_NAME", "tests")
server = MCPServer(NAME)
BIG_BYTES = 5 * 1024 * 1024


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Adds two whole numbers."""
    return {"sum": a + b}


@server.tool()
def echo(text: str) -> str:
    """Says the text back, with the server's name and pid."""
    return f"{NAME}:{os.getpid()}:{text}"


@server.tool()
def record(name: str, data: str) -> dict[str, str]:
    """Gives back a record of its arguments as structured content, under keys that
    name no prose (`id`, `url`)."""
    return {"name": name, "data": data, "id": name, "url": data}


@server.tool()
def whoami() -> str:
    """The variables of the server's environment whose names start with MCP_ or GW_."""
    seen = {k: v for k, v in os.environ.items() if k.startswith(("MCP_", "GW_"))}
    return repr(sorted(seen.items()))


@server.tool()
def headers(ctx: Context) -> dict[str, str]:
    """The HTTP headers the call came with (none over stdio)."""
    return dict(ctx.headers or {})


@server.tool()
def hidden() -> str:
    """A tool the gateway's config denies."""
    return "you should not see this"


@server.tool()
async def slow(seconds: float) -> str:
    """Waits, then answers."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def fail(reason: str) -> CallToolResult:
    """Reports its own failure as a result."""
    return CallToolResult(content=[TextContent(type="text", text=reason)], is_error=True)


@server.tool()
def big() -> str:
    """A 5 MiB answer."""
    return "x" * BIG_BYTES


@server.tool()
def die() -> str:
    """Kills its own process mid-call."""
    os._exit(17)


@server.resource("note://readme", name="readme", mime_type="text/plain")
def readme() -> str:
    """A fixed text resource."""
    return f"{NAME}: read me"


@server.resource("note://{note_id}", name="note", mime_type="text/plain")
def note(note_id: str) -> str:
    """One note of many, by id: a resource template."""
    return f"{NAME}: note {note_id}"


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Hello, {name}, from {NAME}."


def handshake_only(app):
    """`app` as a server that predates the stateless generation."""

    async def serve(scope, receive, send):
        headers = dict(scope.get("headers") or ())
        if headers.get(b"mcp-protocol-version") == b"2026-07-28":
            error = {"code": -32022, "message": "Unsupported protocol version",
                     "data": {"supported": ["2025-11-25"], "requested": "2026-07-28"}}  # fmt: skip
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return serve


def main() -> None:
    if sys.argv[1] == "stdio":
        server.run("stdio")
    elif "--handshake-only" in sys.argv:
        import uvicorn

        app = handshake_only(server.streamable_http_app())
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))


if __name__ == "__main__":
    main()
