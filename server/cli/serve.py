"""Assembles and runs the gateway: gRPC server, REST facade, or the facade alone as an
edge tier forwarding to a remote gRPC gateway."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc
import uvicorn
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from server.accounting.admission import Admission, KeyDirectory, KeyRing
from server.accounting.budget import Budgets, MemoryBudgets, RedisBudgets
from server.accounting.guard import GuardedBudgets, GuardedLimiter, bounded
from server.accounting.ledger import Ledger
from server.accounting.ratelimit import Limiter, RedisLimiter, SlidingWindowLimiter
from server.accounting.shared import SharedBudgets, SharedLimiter, StateClient
from server.accounting.tab import Accounts
from server.application.catalog import Catalog
from server.application.handlers import Gateway
from server.application.rpcs import gateway_table
from server.base.config import Config, ConfigError, OperationsConfig, ServerConfig
from server.base.pipeline import SERVICES, RpcMethod
from server.grpc_api.service import grpc_handlers
from server.ops.health import Readiness
from server.ops.operations import Operations
from server.routing.policies import build_router
from server.storage import open_store

log = logging.getLogger(__name__)

# Seconds the HTTP listener of metrics and health gets to close.
GRACE_S = 5.0
# Seconds before the grace period ends that streams still running are ended with an
# error event, so it reaches callers before their sockets close.
STOP_NOTICE_S = 1.0


def build_gateway(config: Config) -> Gateway:
    """A gateway holding everything in memory: config keys only, no ledger storage."""
    limiter = SlidingWindowLimiter(window_s=config.limits.window_s)
    return Gateway(config, Catalog(config), Admission(KeyDirectory(KeyRing(config.keys)), limiter))


async def open_gateway(config: Config, shared_state: str | None = None) -> Gateway:
    """The gateway with its storage: the key store and ledger in SQLite or PostgreSQL,
    limits and budgets in memory or, when `storage.redis_url` is set, in Redis. A worker
    of `--workers N` without Redis (`shared_state`: the parent's Unix socket) asks the
    parent process, which holds the one limiter and budgets for every worker."""
    # A bad provider or routing config stops start-up before storage opens.
    catalog = Catalog(config)
    storage = config.storage
    try:
        router = build_router(config, catalog)
        store = await open_store(storage)
    except BaseException:
        await catalog.aclose()
        raise
    closers: list[Callable[[], Awaitable[None]]] = [store.aclose]
    limiter: Limiter
    budgets: Budgets
    ledger = Ledger(
        store.usage, config.ledger.batch_size, config.ledger.flush_interval_s,
        config.ledger.max_buffered,
    )  # fmt: skip

    timeout_s = config.storage_timeout_s

    async def spent(key_id: str, since: float) -> float:
        stored = await bounded("usage ledger", store.usage.spent_since(key_id, since), timeout_s)
        return stored + ledger.pending_cost(key_id, since)

    if storage.redis_url:
        try:
            client = await connect_redis(storage.redis_url, timeout_s)
        except BaseException:
            await store.aclose()
            await catalog.aclose()
            raise
        closers.insert(0, client.aclose)
        limiter = RedisLimiter(client, storage.redis_prefix, config.limits.window_s)
        budgets = RedisBudgets(client, storage.redis_prefix, spent)
        limiter = GuardedLimiter(limiter, timeout_s, config.limits.fail_open)
        budgets = GuardedBudgets(budgets, timeout_s)
    elif shared_state:
        state = StateClient(shared_state)
        closers.insert(0, state.aclose)
        limiter = GuardedLimiter(SharedLimiter(state), timeout_s, config.limits.fail_open)
        budgets = GuardedBudgets(SharedBudgets(state), timeout_s)
    else:
        limiter = SlidingWindowLimiter(window_s=config.limits.window_s)
        budgets = GuardedBudgets(MemoryBudgets(spent), timeout_s)
    keys = KeyDirectory(
        KeyRing(config.keys), store.keys, storage.key_cache_ttl_s, timeout_s=timeout_s
    )
    admission = Admission(keys, limiter)
    accounts = Accounts(ledger, limiter, budgets)
    ledger.start()
    return Gateway(config, catalog, admission, accounts, store, closers, router)


class StartupError(ConfigError):
    """A service the config names cannot be used; the message says which and why."""


async def connect_redis(url: str, timeout_s: float):  # noqa: ANN201
    """A Redis client whose every command is bounded; StartupError (one line, no
    traceback) when the URL is malformed or nothing answers there."""
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    try:
        client = Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
        )  # fmt: skip
    except (ValueError, RedisError) as exc:
        raise StartupError(f"storage.redis_url: not a usable Redis URL ({exc})") from None
    try:
        await asyncio.wait_for(client.ping(), timeout_s * 2)
    except (OSError, RedisError, TimeoutError) as exc:
        await client.aclose()
        why = str(exc) or type(exc).__name__
        raise StartupError(f"storage.redis_url: cannot reach Redis ({why})") from None
    return client


async def start_grpc(
    table: dict[str, RpcMethod],
    settings: ServerConfig,
    health_servicer: health.aio.HealthServicer | None = None,
    reuse_port: bool = False,
    stopping: asyncio.Future[None] | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Starts the gRPC server; `health_servicer` (one is made when absent) answers the
    standard health service and is the one to turn NOT_SERVING when draining. Workers of
    `--workers N` (`reuse_port`) each bind the port; the kernel spreads connections.
    `stopping` completes when streams still running must end (UNAVAILABLE)."""
    server = grpc.aio.server(options=[("grpc.so_reuseport", 1)] if reuse_port else None)
    server.add_generic_rpc_handlers(grpc_handlers(table, settings.request_timeout_s, stopping))
    health_servicer = health_servicer or health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [s.full_name for s in SERVICES]
    for name in ["", *names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    port = server.add_insecure_port(f"{settings.host}:{settings.grpc_port}")
    await server.start()
    return server, port


@dataclass
class Running:
    """A started gateway; ports are the bound ones (useful when configured as 0)."""

    grpc_port: int | None
    http_port: int | None
    gateway: Gateway | None = None
    _grpc: grpc.aio.Server | None = None
    _http: uvicorn.Server | None = None
    _http_task: asyncio.Task[None] | None = None
    _closers: list = field(default_factory=list)
    ops: Operations | None = None
    readiness: Readiness | None = None
    metrics_port: int | None = None
    _health: health.aio.HealthServicer | None = None
    _metrics_http: uvicorn.Server | None = None
    _metrics_task: asyncio.Task[None] | None = None
    operations: OperationsConfig = field(default_factory=OperationsConfig)
    # Completed shortly before the drain period ends: streams still running then end
    # with a SHUTTING_DOWN error (SSE event, gRPC UNAVAILABLE) before sockets close.
    stopping: asyncio.Future[None] | None = None

    async def drain(self) -> None:
        """Stops being ready: /readyz answers 503 and gRPC health NOT_SERVING, while
        every listener still serves, so load balancers move away first."""
        if self.readiness is not None:
            self.readiness.draining = True
        if self._health is not None:
            await self._health.enter_graceful_shutdown()

    async def stop(self) -> None:
        """Drains, waits `operations.readiness_delay_s`, then closes the listeners;
        calls and streams in flight get `operations.drain_s` to finish; then the
        gateway closes (the usage ledger drains into the database)."""
        await self.drain()
        if self.operations.readiness_delay_s:
            await asyncio.sleep(self.operations.readiness_delay_s)
        warn = None
        if self.stopping is not None and not self.stopping.done():
            warn = asyncio.get_running_loop().call_later(
                max(0.0, self.operations.drain_s - STOP_NOTICE_S), _complete, self.stopping
            )
        stopping = []
        if self._http is not None and self._http_task is not None:
            self._http.should_exit = True
            stopping.append(self._http_task)
        if self._grpc is not None:
            stopping.append(asyncio.ensure_future(self._grpc.stop(self.operations.drain_s)))
        try:
            await asyncio.gather(*stopping)
        finally:
            if warn is not None:
                warn.cancel()
        if self._metrics_http is not None and self._metrics_task is not None:
            self._metrics_http.should_exit = True
            await self._metrics_task
        for close in self._closers:
            await close()


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound with SO_REUSEPORT, so every worker can bind the same port."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _complete(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def start_http(
    app,
    settings: ServerConfig,
    port: int | None = None,
    grace_s: float = GRACE_S,  # noqa: ANN001
    reuse_port: bool = False,
) -> tuple[uvicorn.Server, asyncio.Task[None], int]:
    from http_facade.protocol import bounded_protocol

    protocol = bounded_protocol(settings.header_timeout_s, settings.send_timeout_s)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.http_port if port is None else port,
        log_level="warning", lifespan="off", timeout_graceful_shutdown=max(1, round(grace_s)),
        http=protocol, access_log=False,
    )  # fmt: skip
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined]
    bind = settings.http_port if port is None else port
    sockets = [reuse_port_socket(settings.host, bind)] if reuse_port else None
    task = asyncio.create_task(server.serve(sockets=sockets))
    while not server.started:
        if task.done():
            await task
            raise RuntimeError("HTTP server failed to start")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, task, port


async def start(
    config: Config,
    *,
    grpc_target: str | None = None,
    serve_http: bool = True,
    reuse_port: bool = False,
    shared_state: str | None = None,
) -> Running:
    """Starts the gateway. With `grpc_target`, only the facade runs, forwarding there.
    `reuse_port` and `shared_state` make it one worker of several (server/cli/workers.py)."""
    from http_facade.app import create_app
    from http_facade.edge_health import EdgeHealth
    from http_facade.ops import ops_routes

    settings = config.server
    grace = config.operations.drain_s
    stopping: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if grpc_target is not None:
        edge = EdgeHealth(grpc_target)
        app = create_app(settings, grpc_target=grpc_target, extra_routes=ops_routes(edge))
        app.state.stopping = stopping
        http, task, http_port = await start_http(
            app, settings, grace_s=grace, reuse_port=reuse_port
        )
        closers = [app.state.backend.aclose, edge.aclose]
        return Running(
            None, http_port, None, None, http, task, closers, readiness=edge,
            operations=config.operations, stopping=stopping,
        )  # fmt: skip
    gateway = await open_gateway(config, shared_state)
    ops = Operations.attach(gateway)
    table = gateway_table(gateway)
    try:
        health_servicer = health.aio.HealthServicer()
        grpc_server, grpc_port = await start_grpc(
            table, settings, health_servicer, reuse_port, stopping
        )
    except BaseException:
        await ops.aclose()
        await gateway.aclose()
        raise
    running = Running(
        grpc_port, None, gateway, grpc_server, _closers=[ops.aclose, gateway.aclose], ops=ops,
        readiness=ops.health, _health=health_servicer, operations=config.operations,
        stopping=stopping,
    )  # fmt: skip
    extra = ops_routes(ops.health, ops.render_metrics)
    if serve_http:
        app = create_app(settings, table=table, extra_routes=extra)
        app.state.stopping = stopping
        running._http, running._http_task, running.http_port = await start_http(
            app, settings, grace_s=grace, reuse_port=reuse_port
        )
    if config.operations.metrics_port is not None:
        from starlette.applications import Starlette

        metrics_app = Starlette(routes=extra)
        running._metrics_http, running._metrics_task, running.metrics_port = await start_http(
            metrics_app, settings, port=config.operations.metrics_port, reuse_port=reuse_port
        )
    return running
