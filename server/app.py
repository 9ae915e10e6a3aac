"""Assembles and runs the gateway: gRPC server, REST facade, or the facade alone as an
edge tier forwarding to a remote gRPC gateway."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import grpc
import uvicorn
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from server.auth import Admission, KeyRing
from server.catalog import Catalog
from server.config import Config, ServerConfig
from server.gateway import Gateway
from server.ratelimit import SlidingWindowLimiter
from server.rpc import SERVICES, RpcMethod, grpc_handlers, rpc_table

log = logging.getLogger(__name__)

GRACE_S = 5.0


def build_gateway(config: Config) -> Gateway:
    return Gateway(config, Catalog(config), Admission(KeyRing(config.keys), SlidingWindowLimiter()))


async def start_grpc(
    table: dict[str, RpcMethod], settings: ServerConfig
) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(grpc_handlers(table, settings.request_timeout_s))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [s.full_name for s in SERVICES]
    for name in ["", *names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    port = server.add_insecure_port(f"{settings.host}:{settings.grpc_port}")
    await server.start()
    return server, port


@dataclass
class Running:
    """A started gateway; ports are the bound ones (useful when configured as 0)."""

    grpc_port: int | None
    http_port: int | None
    _grpc: grpc.aio.Server | None = None
    _http: uvicorn.Server | None = None
    _http_task: asyncio.Task[None] | None = None
    _closers: list = field(default_factory=list)

    async def stop(self) -> None:
        if self._http is not None and self._http_task is not None:
            self._http.should_exit = True
            await self._http_task
        if self._grpc is not None:
            await self._grpc.stop(GRACE_S)
        for close in self._closers:
            await close()


async def start_http(app, settings: ServerConfig) -> tuple[uvicorn.Server, asyncio.Task[None], int]:  # type: ignore[no-untyped-def]
    config = uvicorn.Config(
        app, host=settings.host, port=settings.http_port, log_level="warning",
        lifespan="off", timeout_graceful_shutdown=int(GRACE_S),
    )  # fmt: skip
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            raise RuntimeError("HTTP server failed to start")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, task, port


async def start(
    config: Config, *, grpc_target: str | None = None, serve_http: bool = True
) -> Running:
    """Starts the gateway. With `grpc_target`, only the facade runs, forwarding there."""
    from http_facade.app import create_app

    settings = config.server
    if grpc_target is not None:
        app = create_app(settings, grpc_target=grpc_target)
        http, task, http_port = await start_http(app, settings)
        return Running(None, http_port, None, http, task, [app.state.backend.aclose])
    gateway = build_gateway(config)
    table = rpc_table(gateway)
    grpc_server, grpc_port = await start_grpc(table, settings)
    running = Running(grpc_port, None, grpc_server, _closers=[gateway.catalog.aclose])
    if serve_http:
        app = create_app(settings, table=table)
        running._http, running._http_task, running.http_port = await start_http(app, settings)
    return running
