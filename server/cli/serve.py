"""Assembles and runs the gateway: gRPC server, REST facade, or the facade alone as an
edge tier forwarding to a remote gRPC gateway."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import grpc
import uvicorn
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from starlette.types import ASGIApp

from server.accounting.accounts import Accounting, Accounts
from server.accounting.admission import Admission, KeyDirectory
from server.accounting.alerts import BudgetAlerts
from server.accounting.budget import Budgets, MemoryBudgets, RedisBudgets
from server.accounting.guard import GuardedBudgets, GuardedLimiter, bounded
from server.accounting.ledger import Ledger
from server.accounting.ratelimit import BucketLimiter, Limiter, RedisLimiter
from server.accounting.shared import SharedBudgets, SharedInFlight, SharedLimiter, StateClient
from server.accounting.spool import Spool
from server.accounting.traffic import InFlight, MemoryInFlight, RedisInFlight, Traffic
from server.application import rpcs
from server.application.admin import AdminService
from server.application.audio import AudioService
from server.application.batches.files import Files
from server.application.batches.jobs import Batches
from server.application.batches.service import BatchService
from server.application.batches.worker import Worker
from server.application.control import Control
from server.application.dashboard import Dashboard
from server.application.dialects.chat.service import ChatService, CompletionService
from server.application.dialects.gemini.service import GeminiService
from server.application.dialects.messages.service import MessagesService
from server.application.dialects.responses.conversations import ConversationsService
from server.application.dialects.responses.service import ResponsesService
from server.application.dialects.routing.service import DeploymentService, RouterService
from server.application.embedding import EmbeddingService
from server.application.feedback import FeedbackService
from server.application.governance.audit import Admins, Auditor
from server.application.governance.service import Governance
from server.application.governance.signin import SignIn
from server.application.images import ImageService
from server.application.mcp.service import McpService
from server.application.mcp.toolbox import Toolbox
from server.application.mcp.tools import Tools
from server.application.model import ModelService
from server.application.moderation import ModerationService
from server.application.pipeline import affinity, expiring, response_cache
from server.application.pipeline.chain import Chains
from server.application.pipeline.generations import Generations
from server.application.pipeline.state import Live, Snapshot, snapshot_of
from server.application.provider import ProviderService
from server.application.realtime_relay import RealtimeRelays
from server.application.relay import WorkerRelay
from server.application.rerank import RerankService
from server.application.retrain import retrain_every
from server.application.rpcs import Services
from server.application.usage import UsageService
from server.base.config import Config, ConfigError, OperationsConfig, ServerConfig
from server.base.pipeline import SERVICES, SESSION_SERVICES, Middleware, RpcMethod
from server.base.uploads import largest_message
from server.grpc_api.service import Limits, grpc_handlers
from server.ops import requestlog
from server.ops.batch_metrics import BatchMetrics
from server.ops.health import GatewayHealth, Readiness
from server.ops.loop_lag import watch_lag
from server.ops.metrics import Metrics, multiprocess_dir, prepare_multiprocess_dir
from server.ops.observe import Observer, Outcome
from server.ops.recent import Recent
from server.ops.tracing import Tracing
from server.providers import batch_apis, registry
from server.routing.policies import build_router
from server.storage import Store, open_store
from server.storage.alerts import AlertStore
from server.storage.conversations import MemoryConversations
from server.storage.files import DiskBlobs
from server.storage.responses import MemoryResponses

if TYPE_CHECKING:
    # Imported when Redis is configured: the client costs memory a gateway without it
    # does not need.
    from redis.asyncio import Redis

    from http_facade.accept import AcceptingServer

log = logging.getLogger(__name__)

# Seconds the HTTP listener of metrics and health gets to close.
GRACE_S = 5.0
# Seconds before the grace period ends that streams still running are ended with an
# error event, so it reaches callers before their sockets close.
STOP_NOTICE_S = 1.0

Closer = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class State:
    """Where limits, budgets, keys and the ledger live: memory, a database, Redis, or
    the parent process of `--workers N`."""

    store: Store | None
    limiter: Limiter
    budgets: Budgets
    ledger: Ledger
    affinity: expiring.Store
    responses: expiring.Store
    closers: tuple[Closer, ...] = ()
    # Calls in flight per key, team and model (traffic.max_in_flight).
    in_flight: InFlight = field(default_factory=MemoryInFlight)


@dataclass(frozen=True)
class Gateway:
    """An assembled gateway: its parts, built once by `assemble` and never rewired.
    What a reload replaces is behind `live` (one snapshot, one reference)."""

    live: Live
    accounts: Accounts
    store: Store | None
    control: Control
    services: Services
    # Around every handler, outermost first.
    middlewares: tuple[Middleware, ...]
    table: dict[str, RpcMethod]
    health: GatewayHealth
    metrics: Metrics
    observer: Observer
    # The MCP gateway's core: the upstream MCP servers and the calls to their tools.
    tools: Tools
    # The admin page's sign-in with the company's identity provider.
    signin: SignIn
    closers: tuple[Closer, ...]

    def unknown_route(self, method: str, path: str, client: str, status: int) -> None:
        """Counts and logs a request no route served (the facade's hook)."""
        self.metrics.unknown_routes.labels(method[:16]).inc()
        if self.live.current.config.operations.request_log:
            requestlog.write_unknown_route(method, path, client, status)

    def sample_metrics(self) -> None:
        current = self.live.current
        self.metrics.sample(
            current.catalog, self.accounts.ledger, self.observer.in_flight, current.router.shares()
        )
        self.metrics.sample_tool_servers(self.tools.toolbox.health())

    def render_metrics(self) -> bytes:
        self.sample_metrics()
        return self.metrics.render()

    async def aclose(self) -> None:
        """Closes providers, waits for settlements, drains the ledger, closes storage."""
        await self.live.current.catalog.aclose()
        await self.control.aclose()
        await self.tools.toolbox.aclose()
        await self.accounts.aclose(self.live.current.config.ledger.drain_timeout_s)
        for close in self.closers:
            await close()


def assemble(
    first: Snapshot, state: State, source: Callable[[], tuple[Config, str]] | None = None
) -> Gateway:
    """The composition root: every part of a serving gateway is built here, once, and
    handed to the parts that use it. `first` is the snapshot it starts on; `source`
    reads the config again for a reload."""
    config = first.config
    live = Live(first)
    admission = Admission(
        KeyDirectory(state.store.keys if state.store else None, config.storage.key_cache_ttl_s,
                     timeout_s=config.storage_timeout_s),
        state.limiter,
    )  # fmt: skip
    timeout_s = config.storage_timeout_s
    traffic = Traffic(
        state.in_flight, lambda: live.current.config.traffic,
        None if isinstance(state.in_flight, MemoryInFlight)
        else lambda what, work: bounded(what, work, timeout_s),
    )  # fmt: skip
    alerts = BudgetAlerts(
        state.budgets, lambda: live.current.config.budget_alerts,
        AlertStore(state.store.db) if state.store else None,
        state.store.audit if state.store else None,
    )  # fmt: skip
    accounts = Accounts(admission, state.ledger, state.budgets, traffic, alerts)
    metrics = Metrics()
    traffic.report = metrics.report_in_flight
    traffic.report_waiting = metrics.waiting.set
    recent = Recent()
    toolbox = Toolbox(registry.build_tool_server, config.mcp)

    def reloaded(result: str) -> None:
        metrics.reloads.labels(result).inc()
        toolbox.reconcile(live.current.config.mcp)  # stops the children of servers gone

    control = Control(live, registry.build, build_router, source, on_reload=reloaded)
    tools = Tools(live, accounts, toolbox, report=metrics.tool_called)
    generations = Generations(
        live, accounts, affinity.Affinity(state.affinity),
        response_cache.ResponseCache(state.responses),
    )  # fmt: skip
    conversations = state.store.conversations if state.store else MemoryConversations()
    chains = Chains(generations, tools, accounts)
    auditor = Auditor(state.store)
    signin = SignIn(live, state.store, auditor)
    admins = Admins(live, accounts, auditor, signin)
    services = Services(
        chat=ChatService(generations),
        completion=CompletionService(generations),
        model=ModelService(live, accounts),
        embedding=EmbeddingService(live, accounts),
        rerank=RerankService(live, accounts),
        moderation=ModerationService(live, accounts),
        audio=AudioService(live, accounts),
        images=ImageService(live, accounts),
        provider=ProviderService(live, accounts),
        router=RouterService(generations),
        deployment=DeploymentService(live, accounts, generations),
        admin=AdminService(
            live, accounts, state.store, control,
            Dashboard(live, accounts, state.store, recent, tools), admins,
        ),
        governance=Governance(accounts, state.store, admins),
        usage=UsageService(live, accounts, state.store),
        feedback=FeedbackService(live, accounts, state.store),
        messages=MessagesService(generations, live, accounts, chains),
        responses=ResponsesService(
            live, accounts, generations,
            state.store.responses if state.store else MemoryResponses(), conversations,
            chains,
        ),
        conversations=ConversationsService(live, accounts, conversations),
        gemini=GeminiService(generations, live, accounts),
        mcp=McpService(live, accounts, tools),
        batch=BatchService(),
    )  # fmt: skip

    def count_request(outcome: Outcome) -> None:
        if live.current.config.operations.request_metrics:
            metrics.observe(outcome)

    def log_request(outcome: Outcome) -> None:
        if live.current.config.operations.request_log:
            requestlog.write(outcome)

    observer = Observer(
        [count_request, recent.observe, log_request],
        with_text=lambda: live.current.config.operations.log_text,
    )
    chains.report = observer.round_ended
    # Tracing outermost (the call's span is current while everything else runs), then
    # the observer (it reads the record accounting closes), then accounting.
    middlewares = (Tracing(), observer, Accounting(accounts))
    return Gateway(
        live, accounts, state.store, control, services, middlewares,
        rpcs.table(services, middlewares), GatewayHealth(live, state.store), metrics, observer,
        tools, signin, state.closers,
    )  # fmt: skip


def _answers(config: Config) -> expiring.MemoryStore:
    """The response cache's store in memory, bounded in entries and bytes."""
    cache = config.response_cache
    return expiring.MemoryStore(cache.max_entries, cache.max_bytes)


def in_memory(config: Config) -> State:
    """Config keys only, limits and budgets in memory, no ledger storage."""
    return State(
        None, BucketLimiter(window_s=config.limits.window_s),
        MemoryBudgets(_nothing_spent), Ledger(None),
        expiring.MemoryStore(config.affinity.max_entries),
        _answers(config),
    )  # fmt: skip


def build_gateway(config: Config) -> Gateway:
    """A gateway holding everything in memory (for tests and tools)."""
    return assemble(snapshot_of(config, registry.build, build_router), in_memory(config))


async def open_gateway(
    config: Config,
    shared_state: str | None = None,
    source: Callable[[], tuple[Config, str]] | None = None,
    spool: Spool | None = None,
) -> Gateway:
    """The gateway with its storage: the key store and ledger in SQLite or PostgreSQL,
    limits and budgets in memory or, when `storage.redis_url` is set, in Redis. A worker
    of `--workers N` without Redis (`shared_state`: the parent's Unix socket) asks the
    parent process, which holds the one limiter and budgets for every worker. With a
    `spool`, ledger rows wait on disk until they are in the database."""
    try:
        prepare_multiprocess_dir()
    except OSError as exc:
        folder = multiprocess_dir()
        raise StartupError(
            f"PROMETHEUS_MULTIPROC_DIR: cannot create {folder} ({exc.strerror})"
        ) from None
    # A bad provider or routing config stops start-up before storage opens.
    first = snapshot_of(config, registry.build, build_router)
    try:
        state = await open_state(config, shared_state, spool)
    except BaseException:
        await first.catalog.aclose()
        raise
    try:
        gateway = assemble(first, state, source)
    except BaseException:
        # Storage left open would keep the process alive (its threads) after the error.
        await first.catalog.aclose()
        for close in state.closers:
            await close()
        raise
    state.ledger.start()
    cleaner = asyncio.create_task(gateway.services.responses.clean_every())
    gateway = dataclasses.replace(gateway, closers=(_cancel(cleaner), *gateway.closers))
    if state.store is not None:
        trainer = asyncio.create_task(retrain_every(gateway.live, state.store))
        gateway = dataclasses.replace(gateway, closers=(_cancel(trainer), *gateway.closers))
    lag = asyncio.create_task(watch_lag(gateway.metrics.loop_lag))
    gateway = dataclasses.replace(gateway, closers=(_cancel(lag), *gateway.closers))
    if multiprocess_dir():
        # Workers sample their gauges on a timer: a scrape reaches only one of them.
        sampler = asyncio.create_task(gateway.metrics.sample_every(gateway.sample_metrics))
        return dataclasses.replace(gateway, closers=(_cancel(sampler), *gateway.closers))
    return gateway


def _batches(
    gateway: Gateway, max_body_bytes: int
) -> tuple[list[Any], list[Closer], Callable[[], bytes]]:
    """The Files and Batch APIs' routes, the worker running batches (none without a
    database: jobs must outlive the process) and the metrics' render with its figures."""
    from http_facade.batches import BatchEndpoints, TableRunner, batch_routes

    if gateway.store is None:
        return [], [], gateway.render_metrics
    live, store = gateway.live, gateway.store
    folder = live.current.config.files_folder
    files = Files(live, gateway.accounts, store.files, DiskBlobs(folder))
    batches = Batches(live, gateway.accounts, store.batches, files)
    gateway.services.batch.attach(batches, files)
    runner = TableRunner(gateway.table, live.current.config.server.request_timeout_s)
    observer = gateway.observer
    worker = Worker(
        live,
        gateway.accounts,
        store.batches,
        files,
        runner,
        lambda: observer.in_flight,
        batch_apis.open_api,
    )
    task = asyncio.create_task(worker.run_forever())

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await worker.aclose()

    batch_metrics = BatchMetrics(gateway.metrics.registry)

    def render() -> bytes:
        batch_metrics.sample(worker)
        return gateway.render_metrics()

    return batch_routes(BatchEndpoints(files, batches, max_body_bytes)), [stop], render


def _cancel(task: asyncio.Task[None]) -> Closer:
    async def cancel() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return cancel


async def open_state(config: Config, shared_state: str | None, spool: Spool | None) -> State:
    storage = config.storage
    store = await open_store(storage)
    closers: list[Closer] = [store.aclose]
    limiter: Limiter
    budgets: Budgets
    remembered: expiring.Store = expiring.MemoryStore(config.affinity.max_entries)
    answers: expiring.Store = _answers(config)
    ledger = Ledger(
        store.usage, config.ledger.batch_size, config.ledger.flush_interval_s,
        config.ledger.max_buffered, spool,
    )  # fmt: skip
    timeout_s = config.storage_timeout_s

    async def spent(key_id: str, since: float) -> float:
        stored = await bounded("usage ledger", store.usage.spent_since(key_id, since), timeout_s)
        return stored + ledger.pending_cost(key_id, since)

    if storage.redis_url:
        try:
            client = await connect_redis(
                storage.redis_url, timeout_s, storage.redis_max_connections
            )
        except BaseException:
            await store.aclose()
            raise
        closers.insert(0, client.aclose)
        limiter = RedisLimiter(client, storage.redis_prefix, config.limits.window_s)
        budgets = RedisBudgets(client, storage.redis_prefix, spent)
        remembered = expiring.RedisStore(client, storage.redis_prefix, "affinity", timeout_s)
        answers = expiring.RedisStore(client, storage.redis_prefix, "response", timeout_s)
        limiter = GuardedLimiter(limiter, timeout_s, config.limits.fail_open)
        budgets = GuardedBudgets(budgets, timeout_s)
        in_flight: InFlight = RedisInFlight(client, storage.redis_prefix, config.traffic.lease_s)
    elif shared_state:
        shared = StateClient(shared_state)
        closers.insert(0, shared.aclose)
        limiter = GuardedLimiter(SharedLimiter(shared), timeout_s, config.limits.fail_open)
        budgets = GuardedBudgets(SharedBudgets(shared), timeout_s)
        in_flight = SharedInFlight(shared)
    else:
        limiter = BucketLimiter(window_s=config.limits.window_s)
        # Unguarded: in memory, only the spend's load waits, and `spent` bounds it.
        budgets = MemoryBudgets(spent)
        in_flight = MemoryInFlight(config.traffic.lease_s)
    return State(store, limiter, budgets, ledger, remembered, answers, tuple(closers), in_flight)


async def _nothing_spent(key_id: str, since: float) -> float:
    return 0.0


class StartupError(ConfigError):
    """A service the config names cannot be used; the message says which and why."""


async def connect_redis(url: str, timeout_s: float, max_connections: int) -> Redis:
    """A Redis client whose every command is bounded; StartupError (one line, no
    traceback) when the URL is malformed or nothing answers there. `redis://` is one
    server, `redis+cluster://` a Redis Cluster, `redis+sentinel://` the primary its
    Sentinels name (server/storage/redis_topology.py). Its pool holds
    `max_connections` (per node of a cluster), and a command finding them all busy
    waits for one (within the storage bound): a burst of requests is back-pressure,
    never a refusal."""
    from redis.exceptions import RedisClusterException, RedisError

    from server.storage.redis_topology import client_for

    try:
        client = client_for(url, timeout_s, max_connections)
    except (ValueError, RedisError) as exc:
        raise StartupError(f"storage.redis_url: not a usable Redis URL ({exc})") from None
    try:
        await asyncio.wait_for(client.ping(), timeout_s * 2)
    except (OSError, RedisError, RedisClusterException, TimeoutError) as exc:
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
    session_service: grpc.GenericRpcHandler | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Starts the gRPC server; `health_servicer` (one is made when absent) answers the
    standard health service and is the one to turn NOT_SERVING when draining. Workers of
    `--workers N` (`reuse_port`) each bind the port; the kernel spreads connections.
    `stopping` completes when streams still running must end (UNAVAILABLE).
    `session_service` serves the contract's session service (RealtimeService)."""
    # One request size for both transports: REST's body limit bounds a gRPC message too,
    # and an upload's bound a message carrying one (an edge tier's transcription). gRPC
    # itself refuses only past the largest; the decoder bounds each method by its own.
    largest = largest_message(settings.max_body_bytes)
    options: list[tuple[str, int]] = [("grpc.max_receive_message_length", largest)]
    if reuse_port:
        options.append(("grpc.so_reuseport", 1))
    if settings.grpc_max_connection_age_s:
        grace_s = settings.grpc_max_connection_age_grace_s or settings.request_timeout_s
        options += [
            ("grpc.max_connection_age_ms", round(settings.grpc_max_connection_age_s * 1000)),
            ("grpc.max_connection_age_grace_ms", round(grace_s * 1000)),
        ]
    server = grpc.aio.server(options=options)
    limits = Limits(settings.request_timeout_s, settings.send_timeout_s, settings.max_body_bytes)
    server.add_generic_rpc_handlers(grpc_handlers(table, limits, stopping))
    names = [s.full_name for s in SERVICES]
    if session_service is not None:
        server.add_generic_rpc_handlers([session_service])
        names += [s.full_name for s in SESSION_SERVICES]
    health_servicer = health_servicer or health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ["", *names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    address = f"{settings.host}:{settings.grpc_port}"
    try:
        port = server.add_insecure_port(address)
    except RuntimeError:  # grpc says no more than that it failed
        raise StartupError(f"server.grpc_port: cannot listen on {address} (in use?)") from None
    await server.start()
    return server, port


class HttpListener(NamedTuple):
    """A started HTTP server: its task and the port it bound."""

    server: AcceptingServer
    task: asyncio.Task[None]
    port: int

    async def stop(self) -> None:
        self.server.exit_now()
        await self.task


@dataclass(kw_only=True)
class Running:
    """A started gateway, built once its listeners are up; ports are the bound ones
    (useful when configured as 0)."""

    grpc_port: int | None = None
    http_port: int | None = None
    metrics_port: int | None = None
    gateway: Gateway | None = None
    grpc: grpc.aio.Server | None = None
    http: HttpListener | None = None
    metrics: HttpListener | None = None
    closers: list[Closer] = field(default_factory=list)
    readiness: Readiness | None = None
    health: health.aio.HealthServicer | None = None
    operations: OperationsConfig = field(default_factory=OperationsConfig)
    # Completed shortly before the drain period ends: streams still running then end
    # with a SHUTTING_DOWN error (SSE event, gRPC UNAVAILABLE) before sockets close.
    stopping: asyncio.Future[None] | None = None

    async def drain(self) -> None:
        """Stops being ready: /readyz answers 503 and gRPC health NOT_SERVING, while
        every listener still serves, so load balancers move away first."""
        if self.readiness is not None:
            self.readiness.draining = True
        if self.health is not None:
            await self.health.enter_graceful_shutdown()

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
        if self.http is not None:
            stopping.append(asyncio.ensure_future(self.http.stop()))
        if self.grpc is not None:
            stopping.append(asyncio.ensure_future(self.grpc.stop(self.operations.drain_s)))
        try:
            await asyncio.gather(*stopping)
        finally:
            if warn is not None:
                warn.cancel()
        if self.metrics is not None:
            await self.metrics.stop()
        for close in self.closers:
            await close()


def reuse_port_socket(
    host: str, port: int, reuse_port: bool = True, setting: str = "server.http_port"
) -> socket.socket:
    """A bound TCP socket; with SO_REUSEPORT (`reuse_port`), so every worker can bind
    the same port. StartupError naming `setting` when the port cannot be bound."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise StartupError(f"{setting}: cannot listen on {host}:{port} ({exc.strerror})") from None
    except BaseException:
        sock.close()
        raise
    return sock


def _complete(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def start_http(
    app: ASGIApp,
    settings: ServerConfig,
    port: int | None = None,
    grace_s: float = GRACE_S,
    reuse_port: bool = False,
    setting: str = "server.http_port",
) -> HttpListener:
    from http_facade.accept import AcceptingServer
    from http_facade.protocol import bounded_protocol

    protocol = bounded_protocol(
        settings.header_timeout_s, settings.idle_timeout_s, settings.send_timeout_s
    )
    config = uvicorn.Config(
        app, host=settings.host, port=settings.http_port if port is None else port,
        log_level="warning", lifespan="off", timeout_graceful_shutdown=max(1, round(grace_s)),
        http=protocol, access_log=False, ws_max_size=settings.websockets.max_frame_bytes,
    )  # fmt: skip
    bind = settings.http_port if port is None else port
    sock = reuse_port_socket(settings.host, bind, reuse_port, setting)
    server = AcceptingServer(config, sock)
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            raise RuntimeError("HTTP server failed to start")
        await asyncio.sleep(0.01)
    return HttpListener(server, task, sock.getsockname()[1])


async def start(
    config: Config,
    *,
    grpc_target: str | None = None,
    serve_http: bool = True,
    reuse_port: bool = False,
    shared_state: str | None = None,
    source: Callable[[], tuple[Config, str]] | None = None,
    spool: Spool | None = None,
    relay: tuple[str, int] | None = None,
) -> Running:
    """Starts the gateway. With `grpc_target`, only the facade runs, forwarding there.
    `reuse_port`, `shared_state` and `relay` (the hub's socket and the number of
    workers) make it one worker of several (server/cli/workers.py); `source` reads the
    config file again on a reload."""
    from http_facade.app import create_app
    from http_facade.edge_health import EdgeHealth
    from http_facade.mcp import McpEndpoint, mcp_routes
    from http_facade.mcp_sessions import Sessions, shared_secret
    from http_facade.ops import ops_routes
    from http_facade.realtime_grpc import realtime_service
    from http_facade.signin import signin_routes
    from http_facade.sockets import Sessions as SocketSessions

    settings = config.server
    grace = config.operations.drain_s
    stopping: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if grpc_target is not None:
        edge = EdgeHealth(grpc_target)
        logged = requestlog.write_unknown_route if config.operations.request_log else None
        app = create_app(settings, grpc_target=grpc_target, extra_routes=ops_routes(edge),
                         on_unknown_route=logged)  # fmt: skip
        app.state.stopping = stopping
        edge_http = await start_http(app, settings, grace_s=grace, reuse_port=reuse_port)
        return Running(
            http_port=edge_http.port, http=edge_http,
            closers=[app.state.backend.aclose, edge.aclose],
            readiness=edge, operations=config.operations, stopping=stopping,
        )  # fmt: skip
    gateway = await open_gateway(config, shared_state, source, spool)
    table = gateway.table
    health_servicer = health.aio.HealthServicer()
    batch_extra, batch_closer, render = _batches(gateway, settings.max_body_bytes)
    extra = [*ops_routes(gateway.health, render), *batch_extra]
    sessions = Sessions(shared_secret(config.mcp.session_secret_env), config.mcp.session_ttl_s)
    mcp = McpEndpoint(
        gateway.live, gateway.accounts.admission, gateway.tools, sessions, settings.max_body_bytes
    )
    # What has started, stopped in reverse when a later listener cannot start.
    started: list[Closer] = [gateway.aclose]
    # What a stop closes once the listeners are closed.
    closers: list[Closer] = [*batch_closer, gateway.aclose]
    try:
        if relay is not None:
            # Before it serves: the provider switches made before this worker started.
            worker_relay = WorkerRelay(*relay, gateway.control.apply)
            started.append(worker_relay.aclose)
            closers.insert(0, worker_relay.aclose)
            await worker_relay.open()
            gateway.control.relay = worker_relay
        # Realtime sessions, over WebSocket and gRPC alike: one count of them per key.
        socket_sessions = SocketSessions(settings.websockets)
        realtime = RealtimeRelays(gateway.services.responses.generations, gateway.accounts)
        realtime_rpc = realtime_service(table, settings, socket_sessions, realtime, stopping)
        grpc_server, grpc_port = await start_grpc(
            table, settings, health_servicer, reuse_port, stopping, realtime_rpc
        )
        started.append(functools.partial(grpc_server.stop, None))
        http: HttpListener | None = None
        if serve_http:
            app = create_app(
                settings, table=table,
                extra_routes=[*extra, *mcp_routes(mcp), *signin_routes(gateway.signin)],
                on_unknown_route=gateway.unknown_route,
                realtime=realtime, sessions=socket_sessions,
            )  # fmt: skip
            app.state.stopping = stopping
            http = await start_http(app, settings, grace_s=grace, reuse_port=reuse_port)
            started.append(http.stop)
        metrics: HttpListener | None = None
        if config.operations.metrics_port is not None:
            from starlette.applications import Starlette

            metrics = await start_http(
                Starlette(routes=extra), settings, port=config.operations.metrics_port,
                reuse_port=reuse_port, setting="operations.metrics_port",
            )  # fmt: skip
    except BaseException:
        for stop in reversed(started):
            await stop()
        raise
    return Running(
        grpc_port=grpc_port, http_port=http.port if http else None,
        metrics_port=metrics.port if metrics else None,
        gateway=gateway, grpc=grpc_server, http=http, metrics=metrics, closers=closers,
        readiness=gateway.health, health=health_servicer, operations=config.operations,
        stopping=stopping,
    )  # fmt: skip
