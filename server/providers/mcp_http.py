"""A client of one MCP server over streamable HTTP: each request a POST to the server's
URL, answered with one JSON message or an event stream carrying it.

The client asks `server/discover` first: a server that speaks 2026-07-28 is then
spoken to statelessly (every request carrying its envelope in `params._meta` and the
`Mcp-Method` and `Mcp-Name` headers). Any other answer means the hand-shake
generation: `initialize` opens a session (its `Mcp-Session-Id` sent with every
request after), and when the server forgets it (404) the client shakes hands again
and retries once. Configured headers take their values from the environment when the
client is built; a client made for one request may add that request's own headers.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from server.base import spans
from server.base.config import McpServerConfig
from server.base.tools import UPSTREAM_PROTOCOL_VERSION, ToolServerError, ToolTooLarge
from server.providers import mcp_client
from server.providers.http import ProtocolViolation, sse_events
from server.providers.http1 import Answer, Pool, TransportError

CONNECT_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 32
MODERN_VERSION = "2026-07-28"
# What an event-stream line holds besides its message: the field and a CR.
DATA_LINE = "data: \r"
# The stateless generation's envelope, in every request's params._meta.
# The methods whose target the stateless generation mirrors in Mcp-Name: its param.
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": mcp_client.CLIENT_INFO,
}


class SessionLost(Exception):
    """The server no longer knows the session: shake hands again."""


class HttpMcpClient(mcp_client.McpClient):
    def __init__(
        self,
        config: McpServerConfig,
        max_result_bytes: int,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(config.id, config.timeout_s, max_result_bytes)
        assert config.url is not None
        self.url = config.url
        self.headers = {name.lower(): os.environ[env] for name, env in config.headers.items()}
        # A request's own headers for this server (a model call's MCP tool), over them.
        self.headers.update({name.lower(): value for name, value in (extra_headers or {}).items()})
        self._pool: Pool | None = None
        self._session: str | None = None
        self._version: str | None = None
        self._handshake: asyncio.Lock | None = None
        self._modern = False
        self._ids = 0

    def _open(self) -> Pool:
        if self._pool is None:
            self._pool = Pool(self.url, MAX_CONNECTIONS, CONNECT_TIMEOUT_S, self.timeout_s + 1)
        return self._pool

    async def exchange(self, method: str, params: dict[str, Any] | None) -> tuple[Any, int]:
        for attempt in range(2):
            await self._ready()
            try:
                return await self._post(method, params)
            except SessionLost:
                self._version = None
                if attempt:
                    break
        raise ToolServerError(f"{self.server}: the server keeps losing its session")

    async def _ready(self) -> None:
        if self._version is not None:
            return
        if self._handshake is None:
            self._handshake = asyncio.Lock()
        async with self._handshake:
            if self._version is not None:
                return
            self._session = None
            if await self._discover():
                return
            message, _ = await self._post("initialize", mcp_client.initialize_params())
            result = mcp_client.result_of(self.server, message)
            version = result.get("protocolVersion")
            self._version = version if isinstance(version, str) else UPSTREAM_PROTOCOL_VERSION
            await self._send(mcp_client.notification("notifications/initialized"), None)

    async def _discover(self) -> bool:
        """Whether the server speaks the stateless generation (then spoken so)."""
        self._modern, self._version = True, MODERN_VERSION
        try:
            message, _ = await self._post("server/discover", {})
            result = mcp_client.result_of(self.server, message)
        except ToolServerError:
            result = {}
        versions = result.get("supportedVersions")
        self._modern = isinstance(versions, list) and MODERN_VERSION in versions
        self._version = MODERN_VERSION if self._modern else None
        return self._modern

    async def _post(self, method: str, params: dict[str, Any] | None) -> tuple[Any, int]:
        self._ids += 1
        request_id = self._ids
        headers: dict[str, str] = {}
        if self._modern:
            params = {**(params or {}), "_meta": ENVELOPE}
            headers["mcp-method"] = method
            if method in NAMED:  # what the request acts on, mirrored for routing
                headers["mcp-name"] = str(params[NAMED[method]])
        message = mcp_client.request(request_id, method, params)
        return await self._send(message, request_id, headers)

    def _head(self, extra: dict[str, str]) -> bytes:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **self.headers,
            **extra,
        }
        if self._version is not None:
            headers["mcp-protocol-version"] = self._version
        if self._session is not None:
            headers["mcp-session-id"] = self._session
        spans.inject(headers)
        return "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")

    async def _send(
        self, body: bytes, request_id: int | None, headers: dict[str, str] | None = None
    ) -> tuple[Any, int]:
        """Posts one message; for a request (`request_id`), returns its response."""
        pool = self._open()
        target = "" if pool.base_path else "/"
        try:
            answer = await pool.request("POST", target, self._head(headers or {}), body)
            try:
                return await self._read(answer, request_id)
            finally:
                answer.release()
        except TransportError as exc:
            raise ToolServerError(f"{self.server}: {type(exc).__name__}: {exc}") from None

    async def _read(self, answer: Answer, request_id: int | None) -> tuple[Any, int]:
        status = answer.status_code
        if status == 404 and self._session is not None:
            raise SessionLost
        if status >= 400:
            raise ToolServerError(f"{self.server}: the server answered HTTP {status}")
        session = answer.headers.get("mcp-session-id")
        if session:
            self._session = session
        if request_id is None:
            async for _ in answer.aiter_bytes():
                pass
            return None, 0
        limit = self.max_result_bytes  # the whole message, envelope and all
        kind = answer.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            return await self._from_events(answer, request_id, limit)
        body = bytearray()
        async for chunk in answer.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise self._too_large()
        return mcp_client.parse(self.server, bytes(body)), len(body)

    async def _from_events(self, answer: Answer, request_id: int, limit: int) -> tuple[Any, int]:
        try:  # a line holds `data: ` and a CR besides the message
            async for event in sse_events(answer, max_line_bytes=limit + len(DATA_LINE)):
                data = event.data.encode()
                if len(data) > limit:
                    raise self._too_large()
                message = mcp_client.parse(self.server, data)
                if (
                    isinstance(message, dict)
                    and message.get("id") == request_id
                    and ("result" in message or "error" in message)
                ):
                    return message, len(data)
        except ProtocolViolation:
            raise self._too_large() from None
        raise ToolServerError(f"{self.server}: the event stream ended without an answer")

    def _too_large(self) -> ToolTooLarge:
        return ToolTooLarge(
            f"{self.server}: the result exceeds mcp.max_result_bytes ({self.max_result_bytes})"
        )

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.aclose()
            self._pool = None
