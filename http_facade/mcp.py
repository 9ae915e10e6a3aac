"""`/mcp` and `/mcp/{server}`: the MCP gateway's HTTP transport, a small JSON-RPC layer
over the core (`server/application/mcp/tools.py`), in both protocol generations.

- 2026-07-28, stateless: every request a POST carrying its protocol version, client
  capabilities and info in `params._meta`, mirrored by the `MCP-Protocol-Version`,
  `Mcp-Method` and (for tools/call) `Mcp-Name` headers; `server/discover` instead of a
  hand-shake; no session.
- The hand-shake generation (2024-11-05 to 2025-11-25): `initialize` opens a session
  whose id is signed (`mcp_sessions.py`), so any worker or replica continues it; every
  later request carries `Mcp-Session-Id`. GET (a stream that carries nothing but
  keep-alives: the gateway sends no notifications) and DELETE are only for them.

Refusals, in the order they are checked: an Origin not allowed 403; no or a wrong key
401; `Accept` without both JSON and event streams 406; an unsupported protocol version
400 (listing the supported ones); a body over the limit 413; bad JSON -32700; not one
JSON-RPC 2.0 request -32600; headers that do not mirror the body 400 (-32020); an
unknown `/mcp/{server}` 404; a session that is not one of this key's 404. Answers are
JSON; a JSON-RPC error's HTTP status is 200 in the hand-shake generation and follows
the 2026-07-28 table (400 for -32600/-32602, 404 for -32601) in the stateless one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from http_facade.context import exchange_for
from http_facade.endpoint import read_body
from http_facade.mcp_oauth import (
    INSUFFICIENT_SCOPE,
    WELL_KNOWN,
    InsufficientScope,
    OAuth,
    looks_like_jwt,
)
from http_facade.mcp_sessions import Sessions
from http_facade.protocol import unless_gone
from server.accounting.admission import AUTHORIZATION, Admission, presented
from server.application.mcp.catalog import Catalog
from server.application.mcp.tools import Tools
from server.application.pipeline.state import Live
from server.base.caller import Principal
from server.base.errors import (
    BudgetExhausted,
    Cancelled,
    DeadlineExceeded,
    GatewayError,
    NotFound,
    RateLimited,
    TooLarge,
    ToolNotFound,
    Unauthenticated,
    UpstreamError,
)
from server.base.tools import ToolAnswer

log = logging.getLogger(__name__)

MODERN = ("2026-07-28",)
HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SUPPORTED = (*HANDSHAKE, *MODERN)
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "model-gateway", "version": "0.1.0"}
CAPABILITIES = {"tools": {"listChanged": False}, "prompts": {"listChanged": False},
                "resources": {"listChanged": False, "subscribe": False}}  # fmt: skip
SESSION_HEADER = "mcp-session-id"
# JSON-RPC error codes: the standard ones, then those of the MCP revisions.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR = -32603
# The gateway's own refusals (rate limit, budget, key, session), an HTTP status beside.
REFUSED = -32000
HEADER_MISMATCH, UNSUPPORTED_VERSION = -32020, -32022
# The HTTP status of a JSON-RPC error in the stateless generation.
MODERN_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400,
                 HEADER_MISMATCH: 400, UNSUPPORTED_VERSION: 400, METHOD_NOT_FOUND: 404}  # fmt: skip
KEEPALIVE_S = 15.0
# The list methods of what the gateway's servers offer besides tools: each result's key.
LISTS = {"resources/list": "resources", "resources/templates/list": "resourceTemplates",
         "prompts/list": "prompts"}  # fmt: skip
RESOURCE_NOT_FOUND = -32002


@dataclass
class RpcError(Exception):
    """A JSON-RPC error answer, with the HTTP status and headers it goes out with (a
    status of None: the generation's own)."""

    code: int
    message: str
    data: Any = None
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One POST: who sent it, its id and method, and which generation it speaks."""

    principal: Principal
    request_id: Any
    method: str
    params: dict[str, Any]
    modern: bool
    server: str | None
    headers: dict[str, str]


def _error_body(request_id: Any, error: RpcError) -> bytes:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": body})


def _unsupported(requested: Any) -> RpcError:
    return RpcError(
        UNSUPPORTED_VERSION, "Unsupported protocol version",
        {"supported": list(SUPPORTED), "requested": requested}, status=400,
    )  # fmt: skip


class McpEndpoint:
    def __init__(
        self,
        live: Live,
        admission: Admission,
        tools: Tools,
        sessions: Sessions,
        max_body_bytes: int,
    ) -> None:
        self.live = live
        self.admission = admission
        self.tools = tools
        self.catalog = Catalog(tools)
        self.sessions = sessions
        self.max_body_bytes = max_body_bytes
        self._oauth: OAuth | None = None

    # -- what every method checks first --------------------------------------------

    def oauth(self) -> OAuth | None:
        """The resource-server mode of the current config (None when off)."""
        config = self.live.current.config.mcp.oauth
        if config is None:
            self._oauth = None
        elif self._oauth is None or self._oauth.config != config:
            self._oauth = OAuth(config)
        return self._oauth

    def _origin(self, request: Request) -> None:
        origin = request.headers.get("origin")
        allowed = self.live.current.config.mcp.allowed_origins
        if origin is not None and origin not in allowed and "*" not in allowed:
            raise RpcError(REFUSED, f"origin {origin[:100]!r} is not allowed", status=403)

    async def _principal(self, request: Request) -> Principal:
        state = self.live.current
        oauth = self.oauth()
        try:
            header, token = presented(request.headers, "api")
            if oauth is not None and header == AUTHORIZATION and looks_like_jwt(token):
                key_id = await oauth.subject(token)
                return await self.admission.keys.by_id(key_id, "api", state.keys)
            return await self.admission.identify(request.headers, "api", state.keys)
        except Unauthenticated as exc:
            headers = {"www-authenticate": "Bearer"}
            if oauth is not None:
                headers["www-authenticate"] = oauth.challenge(oauth.config.audience)
            raise RpcError(REFUSED, exc.message, status=401, headers=headers) from None
        except InsufficientScope as exc:
            assert oauth is not None  # only a token it checked lacks a scope
            challenge = oauth.challenge(oauth.config.audience, INSUFFICIENT_SCOPE)
            raise RpcError(
                REFUSED, exc.message, status=403, headers={"www-authenticate": challenge}
            ) from None

    def _server(self, server: str | None) -> None:
        if server is not None and self.live.current.config.mcp.server(server) is None:
            raise RpcError(REFUSED, f"MCP server {server[:40]!r} not found", status=404)

    # -- POST ------------------------------------------------------------------------

    async def post(self, request: Request) -> Response:
        server = request.path_params.get("server")
        request_id: Any = None
        modern = False
        try:
            self._origin(request)
            principal = await self._principal(request)
            _accepts(request, "application/json", "text/event-stream")
            version = request.headers.get("mcp-protocol-version")
            if version is not None and version not in SUPPORTED:
                raise _unsupported(version)
            message = await self._message(request)
            request_id = message.get("id")
            self._server(server)
            params = message.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            modern = version in MODERN or (isinstance(meta, dict) and VERSION_META in meta)
            if "id" not in message:
                return Response(status_code=202)  # a notification: nothing to answer
            exchange = Exchange(principal, request_id, message["method"], params or {},
                                modern, server, dict(request.headers))  # fmt: skip
            if modern:
                _check_envelope(exchange, version)
                headers: dict[str, str] = {}
                result = await self._modern(exchange, request)
            else:
                result, headers = await self._handshake(exchange, request)
            body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
            return Response(body, media_type="application/json", headers=headers)
        except RpcError as error:
            status = error.status or (MODERN_STATUS.get(error.code, 200) if modern else 200)
            return Response(_error_body(request_id, error), status_code=status,
                            media_type="application/json", headers=error.headers)  # fmt: skip

    async def _message(self, request: Request) -> dict[str, Any]:
        try:
            raw = await read_body(request, self.max_body_bytes)
        except TooLarge as exc:
            raise RpcError(REFUSED, exc.message, status=413) from None
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise RpcError(PARSE_ERROR, "Parse error: the body is not JSON", status=400) from None
        if not isinstance(message, dict):
            what = "a batch" if isinstance(message, list) else "not an object"
            raise RpcError(INVALID_REQUEST, f"Invalid request: {what}; send one JSON-RPC "
                           "2.0 request", status=400)  # fmt: skip
        problem = _envelope_problem(message)
        if problem:
            raise RpcError(INVALID_REQUEST, f"Invalid request: {problem}", status=400)
        return message

    async def _handshake(
        self, exchange: Exchange, request: Request
    ) -> tuple[dict[str, Any], dict[str, str]]:
        _check_mirrors(exchange)
        if exchange.method == "initialize":
            asked = exchange.params.get("protocolVersion")
            version = asked if asked in HANDSHAKE else HANDSHAKE[-1]
            session = self.sessions.open(exchange.principal.key_id, version)
            result = {"protocolVersion": version, "capabilities": CAPABILITIES,
                      "serverInfo": SERVER_INFO}  # fmt: skip
            return result, {SESSION_HEADER: session}
        self._session(exchange, request)
        return await self._tools(exchange, request), {}

    def _session(self, exchange: Exchange, request: Request) -> str:
        session = request.headers.get(SESSION_HEADER)
        if not session:
            raise RpcError(REFUSED, "Bad Request: the Mcp-Session-Id header is required "
                           "(send initialize first)", status=400)  # fmt: skip
        version = self.sessions.version(session, exchange.principal.key_id)
        if version is None:
            raise RpcError(REFUSED, "session not found", status=404)
        return version

    async def _modern(self, exchange: Exchange, request: Request) -> dict[str, Any]:
        if exchange.method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": list(MODERN), "capabilities":
                                      CAPABILITIES, "cacheScope": "private", "ttlMs": 0}  # fmt: skip
        else:
            result = await self._tools(exchange, request)
        extra = {"resultType": "complete", "_meta": {SERVER_INFO_META: SERVER_INFO}}
        return {**extra, **result}

    async def _tools(self, exchange: Exchange, request: Request) -> dict[str, Any]:
        # Every method either generation defines is answered alike in both.
        if exchange.method == "ping":
            return {}
        if exchange.method in LISTS:
            key = LISTS[exchange.method]
            found = await self.catalog.listed(exchange.principal, key, exchange.server)
            listed: dict[str, Any] = {key: found}
            return {**listed, "cacheScope": "private", "ttlMs": 0} if exchange.modern else listed
        if exchange.method in ("resources/read", "prompts/get"):
            return await self._catalog(exchange, request)
        if exchange.method == "tools/list":
            found = await self.tools.list_tools(exchange.principal, exchange.server)
            result: dict[str, Any] = {"tools": [t.definition for t in found]}
            if exchange.modern:  # each key sees its own list; no caching across keys
                result.update(cacheScope="private", ttlMs=0)
            return result
        if exchange.method == "tools/call":
            return await self._call(exchange, request)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {exchange.method[:100]}")

    async def _call(self, exchange: Exchange, request: Request) -> dict[str, Any]:
        name = exchange.params.get("name")
        arguments = exchange.params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "Invalid params: name must be a tool's name")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        context = exchange_for(request.scope)
        call = self.tools.call_tool(
            exchange.principal, name, arguments, request_id=context.request_id,
            response_metadata=context.response_headers, server=exchange.server,
        )  # fmt: skip
        return await self._answer(call, request, INVALID_PARAMS, f"Unknown tool: {name[:100]}")

    async def _catalog(self, exchange: Exchange, request: Request) -> dict[str, Any]:
        """resources/read or prompts/get, on the server that owns the URI or name."""
        context = exchange_for(request.scope)
        ids, server = context.request_id, exchange.server
        if exchange.method == "resources/read":
            uri = exchange.params.get("uri")
            if not isinstance(uri, str) or not uri:
                raise RpcError(INVALID_PARAMS, "Invalid params: uri must be a resource's URI")
            read = self.catalog.read_resource(
                exchange.principal, uri, request_id=ids, server=server,
                response_metadata=context.response_headers,
            )  # fmt: skip
            contents = await self._answer(read, request, RESOURCE_NOT_FOUND,
                                          f"Resource not found: {uri[:200]}")  # fmt: skip
            # The stateless generation's read result is cacheable, so it must say how;
            # what a key may read is its own.
            return (
                {**contents, "cacheScope": "private", "ttlMs": 0} if exchange.modern else contents
            )
        name = exchange.params.get("name")
        arguments = exchange.params.get("arguments") or {}
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "Invalid params: name must be a prompt's name")
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        got = self.catalog.get_prompt(
            exchange.principal, name, arguments, request_id=ids, server=server,
            response_metadata=context.response_headers,
        )  # fmt: skip
        return await self._answer(got, request, INVALID_PARAMS, f"Unknown prompt: {name[:100]}")

    async def _answer(
        self, work: Awaitable[ToolAnswer], request: Request, missing_code: int, missing: str
    ) -> dict[str, Any]:
        """The result of MCP work on a server, or the JSON-RPC error of its failure
        (`missing` for what does not exist or is not granted)."""
        context = exchange_for(request.scope)
        try:
            answer = await unless_gone(request.scope, work)
        except ToolNotFound:
            raise RpcError(missing_code, missing) from None
        except (RateLimited, BudgetExhausted) as exc:
            headers = dict(context.response_headers)
            if exc.retry_after_s is not None:
                headers.setdefault("retry-after", str(max(1, round(exc.retry_after_s))))
            raise RpcError(REFUSED, exc.message, {"reason": exc.reason}, 429, headers) from None
        except (DeadlineExceeded, UpstreamError) as exc:
            data = {"server": exc.metadata.get("server", ""),
                    "reason": exc.metadata.get("outcome", "upstream_error")}  # fmt: skip
            raise RpcError(INTERNAL_ERROR, exc.message, data) from None
        except Cancelled:
            raise
        except GatewayError as exc:
            raise RpcError(REFUSED, exc.message, {"reason": exc.reason}, exc.http_status) from None
        return answer.result

    # -- GET and DELETE: the hand-shake generation's sessions --------------------------

    async def get(self, request: Request) -> Response:
        return await self._with_session(request, stream=True)

    async def delete(self, request: Request) -> Response:
        return await self._with_session(request, stream=False)

    async def _with_session(self, request: Request, stream: bool) -> Response:
        try:
            self._origin(request)
            principal = await self._principal(request)
            self._server(request.path_params.get("server"))
            session = request.headers.get(SESSION_HEADER)
            if not session:
                return Response(status_code=405, headers={"allow": "POST"})
            if self.sessions.version(session, principal.key_id) is None:
                raise RpcError(REFUSED, "session not found", status=404)
            if not stream:
                return Response(status_code=204)  # signed, not stored: nothing to forget
            _accepts(request, "text/event-stream")
        except RpcError as error:
            return Response(_error_body(None, error), status_code=error.status or 400,
                            media_type="application/json", headers=error.headers)  # fmt: skip
        return StreamingResponse(_keepalives(), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})  # fmt: skip

    # -- OAuth -------------------------------------------------------------------------

    async def resource_metadata(self, request: Request) -> Response:
        oauth = self.oauth()
        if oauth is None:
            raise NotFound("not found", {"path": request.url.path})
        return Response(orjson.dumps(oauth.metadata(oauth.config.audience)),
                        media_type="application/json")  # fmt: skip


async def _keepalives() -> AsyncIterator[bytes]:
    while True:
        yield b": keep-alive\n\n"
        await asyncio.sleep(KEEPALIVE_S)


def _accepts(request: Request, *kinds: str) -> None:
    accept = request.headers.get("accept", "").lower()
    if not all(kind in accept for kind in kinds) and "*/*" not in accept:
        raise RpcError(REFUSED, f"Not Acceptable: Accept must list {' and '.join(kinds)}",
                       status=406)  # fmt: skip


def _envelope_problem(message: Mapping[str, Any]) -> str:
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if not isinstance(message.get("method"), str):
        return "method must be a string"
    if "id" in message:
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return "id must be a string or an integer"
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return "params must be an object"
    return ""


def _check_mirrors(exchange: Exchange) -> None:
    """`Mcp-Method` and `Mcp-Name`, when sent, say what the body says."""
    method = exchange.headers.get("mcp-method")
    if method is not None and method != exchange.method:
        raise RpcError(HEADER_MISMATCH, "Mcp-Method header does not match the body's method",
                       status=400)  # fmt: skip
    name, named = exchange.headers.get("mcp-name"), exchange.params.get("name")
    if exchange.method == "tools/call" and None not in (name, named) and name != named:
        raise RpcError(HEADER_MISMATCH, "Mcp-Name header does not match the body's name",
                           status=400)  # fmt: skip


def _check_envelope(exchange: Exchange, version: str | None) -> None:
    """The 2026-07-28 request's envelope: `_meta` with its version and capabilities,
    mirrored by the headers, at a version served."""
    meta = exchange.params.get("_meta")
    if not isinstance(meta, dict) or VERSION_META not in meta or CAPABILITIES_META not in meta:
        raise RpcError(INVALID_PARAMS, f"params._meta must carry {VERSION_META!r} and "
                       f"{CAPABILITIES_META!r}")  # fmt: skip
    if version != meta[VERSION_META]:
        raise RpcError(HEADER_MISMATCH, "MCP-Protocol-Version header does not match the "
                       "request's protocol version", status=400)  # fmt: skip
    if exchange.headers.get("mcp-method") != exchange.method:
        raise RpcError(HEADER_MISMATCH, "Mcp-Method header does not match the body's method",
                       status=400)  # fmt: skip
    _check_mirrors(exchange)
    named = exchange.params.get("name") is not None
    if exchange.method == "tools/call" and named and exchange.headers.get("mcp-name") is None:
        raise RpcError(HEADER_MISMATCH, "Mcp-Name header is required for tools/call",
                       status=400)  # fmt: skip
    if meta[VERSION_META] not in MODERN:
        raise _unsupported(meta[VERSION_META])


def mcp_routes(endpoint: McpEndpoint) -> list[BaseRoute]:
    """The MCP gateway's paths, beside the contract's."""
    routes: list[BaseRoute] = []
    for path in ("/mcp", "/mcp/{server}"):
        routes += [
            Route(path, endpoint.post, methods=["POST"]),
            Route(path, endpoint.get, methods=["GET"]),
            Route(path, endpoint.delete, methods=["DELETE"]),
            Route(f"{WELL_KNOWN}{path}", endpoint.resource_metadata, methods=["GET"]),
        ]
    return routes
