"""`gateway serve --workers N`: N worker processes sharing both ports.

The parent process binds nothing it serves. It picks the ports (when configured as 0),
starts N workers (`gateway serve ... --workers 1` with GATEWAY_WORKER_* set), each
binding the gRPC and HTTP ports with SO_REUSEPORT so the kernel spreads connections
across them, and serves the one rate limiter and budget book every worker checks
(server/accounting/shared.py) unless Redis holds them. SIGHUP is passed on to every
worker (each reloads the config). On SIGTERM or SIGINT it forwards SIGTERM to every
worker and waits: each stops taking calls, finishes those in flight
and drains its own usage ledger.

A worker that dies is started again, after a pause that grows with each exit, while the
others keep serving; one that keeps dying (CRASH_LOOP exits within CRASH_WINDOW_S) stops
the command with one line saying so. Every worker spools its ledger rows to disk
(server/accounting/spool.py), so the rows of calls a dead worker answered are written
by the worker that takes its place. Without `ledger.spool_dir`, the folder is in
`storage.state_dir` or the user's own state folder, one per database
(`default_spool_folder`), never a shared temporary path: a gateway started again after
a crash of the whole command finds it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import secrets
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from http_facade.mcp_sessions import SECRET_VARIABLE
from server.accounting.shared import StateServer
from server.base.config import Config
from server.cli import serve as app
from server.cli.lifeline import SUPERVISOR
from server.cli.relay_hub import RelayHub
from server.cli.status import say
from server.storage import Store, open_store

WORKER = "GATEWAY_WORKER_INDEX"
SHARED_STATE = "GATEWAY_SHARED_STATE"
# The hub's socket and the number of workers, for admin changes (relay_hub.py).
RELAY = "GATEWAY_RELAY"
WORKERS = "GATEWAY_WORKERS"
SPOOL = "GATEWAY_LEDGER_SPOOL"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
# Pauses before starting a dead worker again, one per exit in a row (the last repeats).
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
CRASH_LOOP = 5
CRASH_WINDOW_S = 60.0


def worker_options() -> tuple[int | None, str | None]:
    """(index, shared state socket) when this process is a worker, else (None, None)."""
    index = os.environ.get(WORKER)
    return (int(index), os.environ.get(SHARED_STATE)) if index is not None else (None, None)


def relay_options() -> tuple[str, int] | None:
    """(the relay hub's socket, the number of workers) in a worker, else None."""
    path = os.environ.get(RELAY)
    return (path, int(os.environ[WORKERS])) if path else None


def spool_folder() -> str | None:
    """The folder a worker spools its ledger rows to (set by the parent)."""
    return os.environ.get(SPOOL)


def default_spool_folder(cfg: Config) -> str:
    """The spool folder when the config names none: in `storage.state_dir`, else in
    the user's state folder (`$XDG_STATE_HOME`, else ~/.local/state), one per
    database, so only gateways writing to the same database ever adopt each other's
    rows."""
    storage = cfg.storage
    database = storage.database_url or os.path.abspath(storage.sqlite_file)
    digest = hashlib.sha256(database.encode()).hexdigest()[:16]
    if storage.state_dir:
        return os.path.join(os.path.expanduser(storage.state_dir), "spool", digest)
    home = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(home, "model-gateway", "spool", digest)


def _reserve(host: str, port: int, setting: str) -> socket.socket:
    """Binds (without listening) with SO_REUSEPORT: holds the port, and learns it when
    configured as 0, while the workers bind it too."""
    return app.reuse_port_socket(host, port, setting=setting)


class WorkerFailed(Exception):
    """A worker exited while the others were starting."""


@dataclass
class Workers:
    running: app.Running
    processes: list[asyncio.subprocess.Process]
    exited: asyncio.Queue[int]  # the index of each worker that exits
    state: StateServer
    hub: RelayHub
    store: Store | None
    spawn: Callable[[int], Awaitable[asyncio.subprocess.Process]]
    # The default spool folder, removed at a clean stop when empty (None: the config's own).
    own_spool: str | None = None
    # The watchers' tasks (the loop holds tasks only weakly).
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def _keep(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def watch(self, index: int) -> None:
        self._keep(_watch(index, self.processes[index], self.exited))

    async def respawn(self, index: int) -> None:
        self.processes[index] = await self.spawn(index)
        self.watch(index)
        self._keep(self._announce(index))

    async def _announce(self, index: int) -> None:
        """Says when a worker started again is serving (only such workers report ready
        after start-up)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(READY_TIMEOUT_S):
                await self.state.ready.get()
                say(f"gateway: worker {index} is serving again")

    async def stop(self) -> None:
        await stop_workers(self.processes)
        await self.hub.aclose()
        await _close_state(self.state, self.store)
        if self.own_spool is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self.own_spool)  # only when every row reached the database


async def supervise(
    cfg: Config, argv: list[str], args: argparse.Namespace, workers: int
) -> Workers:
    """Starts the workers; returns once every one is serving."""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gateway-metrics-"))
    # One secret signs every worker's MCP sessions, so a session continues on any of them.
    os.environ.setdefault(SECRET_VARIABLE, secrets.token_hex(32))
    settings = cfg.server
    held: list[socket.socket] = []
    grpc_port = http_port = None
    if args.grpc_target is None:
        held.append(_reserve(settings.host, settings.grpc_port, "server.grpc_port"))
        grpc_port = held[-1].getsockname()[1]
    if not args.no_http:
        held.append(_reserve(settings.host, settings.http_port, "server.http_port"))
        http_port = held[-1].getsockname()[1]

    store = None
    if args.grpc_target is None and not cfg.storage.redis_url:
        store = await open_store(cfg.storage)  # migrates once, before the workers start

    async def spent(key_id: str, since: float) -> float:
        return await store.usage.spent_since(key_id, since) if store is not None else 0.0

    path = str(Path(tempfile.mkdtemp(prefix="gateway-state-")) / "state.sock")
    state = StateServer(path, spent, cfg.limits.window_s)
    await state.start()
    hub = RelayHub(str(Path(path).parent / "relay.sock"))
    await hub.start()
    own_spool = None if cfg.ledger.spool_dir else default_spool_folder(cfg)
    spool = cfg.ledger.spool_dir or own_spool
    ports = []
    if grpc_port is not None:
        ports += ["--grpc-port", str(grpc_port)]
    if http_port is not None:
        ports += ["--http-port", str(http_port)]

    async def spawn(index: int) -> asyncio.subprocess.Process:
        env = {
            **os.environ, WORKER: str(index), SHARED_STATE: path, SUPERVISOR: str(os.getpid()),
            RELAY: hub.path, WORKERS: str(workers),
        }  # fmt: skip
        if spool is not None:
            env[SPOOL] = spool
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.cli.main", *argv, *ports, "--workers", "1", env=env
        )

    processes = [await spawn(index) for index in range(workers)]
    running = app.Running(grpc_port=grpc_port, http_port=http_port)
    started = Workers(running, processes, asyncio.Queue(), state, hub, store, spawn, own_spool)
    for index in range(workers):
        started.watch(index)
    try:
        await _all_ready(state, workers, started.exited)
    except BaseException:
        await started.stop()
        raise
    finally:
        for sock in held:
            sock.close()
    return started


async def _watch(
    index: int, process: asyncio.subprocess.Process, exited: asyncio.Queue[int]
) -> None:
    await process.wait()
    exited.put_nowait(index)


async def _all_ready(state: StateServer, workers: int, exited: asyncio.Queue[int]) -> None:
    async with asyncio.timeout(READY_TIMEOUT_S):
        for _ in range(workers):
            got = asyncio.ensure_future(state.ready.get())
            died = asyncio.ensure_future(exited.get())
            await asyncio.wait({got, died}, return_when=asyncio.FIRST_COMPLETED)
            died.cancel()
            if not got.done():
                got.cancel()
                raise WorkerFailed("a worker exited during start-up")


async def stop_workers(processes: list[asyncio.subprocess.Process]) -> int:
    """SIGTERM to every worker still running, then waits; returns the worst exit code."""
    for process in processes:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(STOP_TIMEOUT_S):
            codes = [await p.wait() for p in processes]
    except TimeoutError:
        for process in processes:
            if process.returncode is None:
                process.kill()
        codes = [await p.wait() for p in processes]
    return max((abs(c) for c in codes), default=0)


def _forward(processes: list[asyncio.subprocess.Process], sig: int) -> None:
    for process in processes:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)


async def _close_state(state: StateServer, store: Store | None) -> None:
    await state.aclose()
    if store is not None:
        await store.aclose()
    with contextlib.suppress(OSError):
        os.unlink(state.path)
        os.rmdir(os.path.dirname(state.path))


async def run(
    cfg: Config, argv: list[str], args: argparse.Namespace, workers: int,
    announce: Callable[[app.Running], None],
) -> int:  # fmt: skip
    """Runs the workers until SIGTERM/SIGINT (0), starting again each one that dies,
    unless one keeps dying (1)."""
    try:
        started = await supervise(cfg, argv, args, workers)
    except WorkerFailed as exc:
        say(f"gateway: cannot start: {exc}", sys.stderr)
        return 1
    announce(started.running)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # SIGHUP (reload the config) goes on to every worker.
    loop.add_signal_handler(signal.SIGHUP, lambda: _forward(started.processes, signal.SIGHUP))
    try:
        failed = await _keep_alive(started, stop)
        if not failed:
            say("gateway: shutting down")
    finally:
        # Whatever ended the wait, no worker is left serving without a supervisor.
        await started.stop()
    say("gateway: stopped")
    return 1 if failed else 0


async def _keep_alive(workers: Workers, stop: asyncio.Event) -> bool:
    """Starts each dead worker again until `stop` is set (False), or until one dies
    CRASH_LOOP times within CRASH_WINDOW_S (True)."""
    exits: dict[int, list[float]] = {}
    stopping = asyncio.ensure_future(stop.wait())
    try:
        while True:
            died = asyncio.ensure_future(workers.exited.get())
            await asyncio.wait({stopping, died}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                died.cancel()
                return False
            index = died.result()
            now = time.monotonic()
            recent = [t for t in exits.get(index, []) if now - t < CRASH_WINDOW_S] + [now]
            exits[index] = recent
            code = workers.processes[index].returncode
            if len(recent) >= CRASH_LOOP:
                say(
                    f"gateway: worker {index} exited {len(recent)} times in "
                    f"{CRASH_WINDOW_S:g}s (last code {code}); stopping",
                    sys.stderr,
                )
                return True
            pause = BACKOFF_S[min(len(recent), len(BACKOFF_S)) - 1]
            say(
                f"gateway: worker {index} exited (code {code}); starting it again in {pause:g}s",
                sys.stderr,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(stopping), pause)
            if stop.is_set():
                return False
            await workers.respawn(index)
    finally:
        stopping.cancel()
