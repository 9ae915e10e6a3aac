"""MCP tools as every layer speaks of them: what an upstream MCP server lists and
answers, the protocol its clients implement, and the ways a call to it fails.

    ToolServerError        upstream_error  the server failed, broke the protocol or is down
    ├── ToolTimeout        timeout         no answer within the server's timeout_s
    ├── ToolTooLarge       too_large       the answer exceeds mcp.max_result_bytes
    └── ToolRefused        upstream_error  the server answered the call with a JSON-RPC error

A tool's own failure (`isError: true` in its result) is not an error here: it is a
result, relayed as it came.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

# A tool's definition as its server listed it (name, description, inputSchema...).
Tool = dict[str, Any]

# The protocol revision the gateway speaks to upstream servers: the handshake's newest,
# which every server of that generation or the next answers.
UPSTREAM_PROTOCOL_VERSION = "2025-11-25"


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """A `tools/call` result as the server sent it, and its size on the wire."""

    result: dict[str, Any]
    size: int
    # What the gateway charged for the call, in USD.
    cost_usd: float = 0.0

    @property
    def is_error(self) -> bool:
        """Whether the tool reported its own failure (still a result)."""
        return self.result.get("isError") is True


@dataclass(frozen=True, slots=True)
class ExposedTool:
    """A tool as a key sees it: its exposed name (`{server}__{tool}`), its server, its
    name there, and its definition as the server listed it, under the exposed name."""

    name: str
    server: str
    upstream_name: str
    definition: Tool


class ToolServerError(Exception):
    """A call the server did not answer with a result. The message names the server."""

    outcome: ClassVar[str] = "upstream_error"


class ToolTimeout(ToolServerError):
    outcome = "timeout"


class ToolTooLarge(ToolServerError):
    outcome = "too_large"


class ToolRefused(ToolServerError):
    """The server answered with a JSON-RPC error (its code kept)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class ToolServer(Protocol):
    """A client of one upstream MCP server (streamable HTTP or a stdio child)."""

    @property
    def up(self) -> bool:
        """Whether the last exchange with the server succeeded."""
        ...

    async def list_tools(self) -> list[Tool]:
        """Every tool the server lists (all pages)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """Calls `name` with `arguments`, bounded by the server's timeout_s."""
        ...

    async def list_all(self, method: str, key: str, field: str) -> list[dict[str, Any]]:
        """Every entry of a list method (`resources/list`, `prompts/list`...), all pages."""
        ...

    async def ask(self, method: str, params: dict[str, Any]) -> ToolAnswer:
        """One request's result as the server sent it (`resources/read`, `prompts/get`)."""
        ...

    async def aclose(self) -> None:
        """Closes connections; stops and reaps a child process."""
        ...
