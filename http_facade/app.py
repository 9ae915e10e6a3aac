"""The REST/SSE facade: an ASGI app serving the contract's HTTP bindings.

In-process (`table`), it calls the core's RPC handlers directly; as an edge tier
(`grpc_target`), it forwards every call to a remote gRPC gateway. Callers cannot tell
the two apart. `app.state.backend.aclose()` releases the backend.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from fastapi import FastAPI
from google.protobuf.descriptor import MethodDescriptor
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from http_facade.audio import with_audio
from http_facade.backends import Backend, InProcess, Remote
from http_facade.bindings import bindings
from http_facade.context import RequestContext
from http_facade.endpoint import Limits
from http_facade.errors import EXCEPTION_HANDLERS
from http_facade.fast_routes import Facade, direct
from http_facade.gemini_live import GeminiLive
from http_facade.images import with_images
from http_facade.openapi import document
from http_facade.realtime import RealtimeSocket
from http_facade.responses_socket import ResponsesSocket
from http_facade.routes import routes
from http_facade.sockets import Sessions
from http_facade.unknown_routes import UnknownRouteHook
from server.application.realtime_relay import RealtimeRelays
from server.base.config import CorsConfig, ServerConfig
from server.base.pipeline import RpcMethod, methods


def create_app(
    settings: ServerConfig,
    table: dict[str, RpcMethod] | None = None,
    grpc_target: str | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    on_unknown_route: UnknownRouteHook | None = None,
    realtime: RealtimeRelays | None = None,
    sessions: Sessions | None = None,
) -> FastAPI:
    """`extra_routes` are served beside the contract's (health, metrics, admin page);
    `on_unknown_route` hears of every request no route serves; `realtime` relays the
    Realtime sessions of models whose upstream serves that API (in-process only);
    `sessions` counts the WebSocket sessions with those of another transport."""
    if (table is None) == (grpc_target is None):
        raise ValueError("give exactly one of table (in-process) and grpc_target (edge)")
    backend: Backend
    if table is not None:
        backend = InProcess(table, settings.request_timeout_s)
        served = [method.descriptor for method in table.values()]
    else:
        assert grpc_target is not None
        backend = Remote(grpc_target, settings.request_timeout_s)
        served = list(methods())
    limits = Limits(settings.max_body_bytes, settings.keepalive_s, settings.body_timeout_s)
    # Built when first asked for, not at every start: most gateways never serve it.
    spec = functools.cache(lambda: document(served))

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(spec())

    served_routes = [
        *with_images(
            with_audio(routes(served, backend, limits), served, backend, settings.max_body_bytes),
            served,
            backend,
        ),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    served_routes[-1].methods = {"GET"}  # type: ignore[attr-defined]
    sessions = sessions or Sessions(settings.websockets)
    socket_routes = _socket_routes(served, backend, settings, sessions, realtime)
    app = Facade(
        title="Model gateway",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        routes=[*served_routes, *socket_routes, *extra_routes],
        middleware=[*_cors(settings.cors), Middleware(RequestContext)],
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.backend = backend
    app.state.sessions = sessions
    app.state.on_unknown_route = on_unknown_route
    if not settings.cors.allow_origins:
        app.fixed = {
            (verb, route.path): direct(route.endpoint)
            for route in served_routes
            if isinstance(route, Route) and "{" not in route.path
            for verb in route.methods or ()
        }
    return app


def _socket_routes(
    served: Sequence[MethodDescriptor],
    backend: Backend,
    settings: ServerConfig,
    sessions: Sessions,
    realtime: RealtimeRelays | None,
) -> list[BaseRoute]:
    """The WebSocket sessions over the served RPCs: the Responses API's WebSocket mode
    beside its POST (an upgrade checked as a model listing is), and OpenAI's Realtime API
    over the same handler (an upgrade checked as reading its model is)."""
    by_name = {b.rpc.descriptor.full_name: b for b in bindings(served)}
    check = by_name.get("gateway.v1.ModelService.ListModels")
    create = by_name.get("gateway.v1.ResponsesService.CreateResponse")
    if check is None or create is None or create.stream_rpc is None:
        return []
    socket = ResponsesSocket(create.stream_rpc, check.rpc, backend, settings, sessions)
    routes: list[BaseRoute] = [socket.route(create.route_path)]
    realtime_socket = RealtimeSocket.over(served, backend, settings, sessions, realtime)
    if realtime_socket is not None:
        routes.append(realtime_socket.route())
        routes += GeminiLive(realtime_socket, check.rpc, backend).routes()
    return routes


def _cors(cors: CorsConfig) -> list[Middleware]:
    """Starlette's CORS middleware, outermost, so a preflight is answered before any
    route or key check; none while no origin is allowed."""
    if not cors.allow_origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=cors.allow_origins,
            allow_methods=cors.allow_methods,
            allow_headers=cors.allow_headers,
            expose_headers=cors.expose_headers,
            max_age=cors.max_age_s,
        )
    ]
