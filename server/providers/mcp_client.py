"""What the gateway's two MCP clients (streamable HTTP and stdio) share: the JSON-RPC
messages they send, the hand-shake they open with, listing every page of tools (or
resources, templates, prompts), and
reading an answer into a result or one of the errors of server/base/tools.py.

Upstream, the gateway speaks the hand-shake generation (`initialize`, then requests),
which servers of both generations answer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson

from server.base.tools import (
    UPSTREAM_PROTOCOL_VERSION,
    Tool,
    ToolAnswer,
    ToolRefused,
    ToolServerError,
    ToolTimeout,
    ToolTooLarge,
)

# Pages of tools/list read at most: a server whose cursor never ends is cut there.
MAX_PAGES = 100
CLIENT_INFO = {"name": "model-gateway", "version": "0.1.0"}


def initialize_params() -> dict[str, Any]:
    return {
        "protocolVersion": UPSTREAM_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": CLIENT_INFO,
    }


def request(request_id: int, method: str, params: dict[str, Any] | None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)


def parse(server: str, body: bytes) -> Any:
    """A message from the server; ToolServerError when it is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # what the fast parser refuses but JSON allows (1e309)
            return json.loads(body)
        except ValueError:
            raise ToolServerError(f"{server}: the server sent something that is not JSON") from None


def result_of(server: str, message: Any) -> dict[str, Any]:
    """The result of a response message; ToolRefused for a JSON-RPC error, and
    ToolServerError for anything that is neither."""
    if not isinstance(message, dict):
        raise ToolServerError(f"{server}: the server's answer is not a JSON-RPC response")
    error = message.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        text = str(error.get("message", ""))[:300]
        raise ToolRefused(
            f"{server}: the server refused the call: {text}", code if isinstance(code, int) else 0
        )
    result = message.get("result")
    if not isinstance(result, dict):
        raise ToolServerError(f"{server}: the server's answer has no result object")
    return result


class McpClient:
    """The part of a client both transports share; `exchange` sends one request and
    returns the response message and its size in bytes."""

    def __init__(self, server: str, timeout_s: float, max_result_bytes: int) -> None:
        self.server = server
        self.timeout_s = timeout_s
        self.max_result_bytes = max_result_bytes
        self.up = True

    async def exchange(self, method: str, params: dict[str, Any] | None) -> tuple[Any, int]:
        raise NotImplementedError

    async def _call(self, method: str, params: dict[str, Any] | None) -> tuple[dict[str, Any], int]:
        try:
            async with asyncio.timeout(self.timeout_s):
                message, size = await self.exchange(method, params)
        except TimeoutError:
            self.up = False
            raise ToolTimeout(f"{self.server}: no answer within {self.timeout_s:g}s") from None
        except (ToolTooLarge, ToolRefused):
            raise  # the server answered: it is up
        except ToolServerError:
            self.up = False
            raise
        self.up = True
        return result_of(self.server, message), size

    async def list_tools(self) -> list[Tool]:
        return await self.list_all("tools/list", "tools", "name")

    async def list_all(self, method: str, key: str, field: str) -> list[dict[str, Any]]:
        """Every page of a list method's `key` list, keeping the entries with a string
        `field` (a tool's or prompt's name, a resource's uri)."""
        entries: list[dict[str, Any]] = []
        params: dict[str, Any] | None = None
        for _ in range(MAX_PAGES):
            result, _ = await self._call(method, params)
            page = result.get(key)
            if not isinstance(page, list):
                raise ToolServerError(f"{self.server}: {method} answered without a {key} list")
            entries.extend(e for e in page if isinstance(e, dict) and isinstance(e.get(field), str))
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
            params = {"cursor": cursor}
        return entries

    async def ask(self, method: str, params: dict[str, Any]) -> ToolAnswer:
        """One request's result as the server sent it (resources/read, prompts/get)."""
        result, size = await self._call(method, params)
        return ToolAnswer(result, size)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        result, size = await self._call("tools/call", {"name": name, "arguments": arguments})
        return ToolAnswer(result, size)
