"""`gateway serve --workers N`: N worker processes sharing both ports.

The parent process binds nothing it serves. It picks the ports (when configured as 0),
starts N workers (`gateway serve ... --workers 1` with GATEWAY_WORKER_* set), each
binding the gRPC and HTTP ports with SO_REUSEPORT so the kernel spreads connections
across them, and serves the one rate limiter and budget book every worker checks
(server/accounting/shared.py) unless Redis holds them. SIGHUP is passed on to every
worker (each reloads the config). On SIGTERM or SIGINT it forwards SIGTERM to every
worker and waits: each stops taking calls, finishes those in flight
and drains its own usage ledger. If a worker dies, the others are stopped and the
command exits with an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from server.accounting.shared import StateServer
from server.base.config import Config
from server.cli import serve as app
from server.storage import Store, open_store

WORKER = "GATEWAY_WORKER_INDEX"
SHARED_STATE = "GATEWAY_SHARED_STATE"
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


def worker_options() -> tuple[int | None, str | None]:
    """(index, shared state socket) when this process is a worker, else (None, None)."""
    index = os.environ.get(WORKER)
    return (int(index), os.environ.get(SHARED_STATE)) if index is not None else (None, None)


def _reserve(host: str, port: int) -> socket.socket:
    """Binds (without listening) with SO_REUSEPORT: holds the port, and learns it when
    configured as 0, while the workers bind it too."""
    return app.reuse_port_socket(host, port)


class WorkerFailed(Exception):
    """A worker exited while the others were starting."""


@dataclass
class Workers:
    running: app.Running
    processes: list[asyncio.subprocess.Process]
    exited: asyncio.Event  # set when any worker exits
    state: StateServer
    store: Store | None

    async def stop(self) -> None:
        await stop_workers(self.processes)
        await _close_state(self.state, self.store)


async def supervise(
    cfg: Config, argv: list[str], args: argparse.Namespace, workers: int
) -> Workers:
    """Starts the workers; returns once every one is serving."""
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gateway-metrics-"))
    settings = cfg.server
    held: list[socket.socket] = []
    grpc_port = http_port = None
    if args.grpc_target is None:
        held.append(_reserve(settings.host, settings.grpc_port))
        grpc_port = held[-1].getsockname()[1]
    if not args.no_http:
        held.append(_reserve(settings.host, settings.http_port))
        http_port = held[-1].getsockname()[1]

    store = None
    if args.grpc_target is None and not cfg.storage.redis_url:
        store = await open_store(cfg.storage)  # migrates once, before the workers start

    async def spent(key_id: str, since: float) -> float:
        return await store.usage.spent_since(key_id, since) if store is not None else 0.0

    path = str(Path(tempfile.mkdtemp(prefix="gateway-state-")) / "state.sock")
    state = StateServer(path, spent, cfg.limits.window_s)
    await state.start()
    ports = []
    if grpc_port is not None:
        ports += ["--grpc-port", str(grpc_port)]
    if http_port is not None:
        ports += ["--http-port", str(http_port)]
    processes = []
    for index in range(workers):
        env = {**os.environ, WORKER: str(index), SHARED_STATE: path}
        processes.append(
            await asyncio.create_subprocess_exec(
                sys.executable, "-m", "server.cli.main", *argv, *ports, "--workers", "1", env=env
            )
        )
    exited = asyncio.Event()
    for process in processes:
        asyncio.create_task(_watch(process, exited))
    started = Workers(app.Running(grpc_port, http_port), processes, exited, state, store)
    try:
        await _all_ready(state, workers, exited)
    except BaseException:
        await started.stop()
        raise
    finally:
        for sock in held:
            sock.close()
    return started


async def _watch(process: asyncio.subprocess.Process, exited: asyncio.Event) -> None:
    await process.wait()
    exited.set()


async def _all_ready(state: StateServer, workers: int, exited: asyncio.Event) -> None:
    async with asyncio.timeout(READY_TIMEOUT_S):
        for _ in range(workers):
            got = asyncio.ensure_future(state.ready.get())
            died = asyncio.ensure_future(exited.wait())
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
    """Runs the workers until SIGTERM/SIGINT (0) or until one dies (1)."""
    try:
        started = await supervise(cfg, argv, args, workers)
    except WorkerFailed as exc:
        print(f"gateway: cannot start: {exc}", file=sys.stderr, flush=True)
        return 1
    announce(started.running)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # SIGHUP (reload the config) goes on to every worker.
    loop.add_signal_handler(signal.SIGHUP, _forward, started.processes, signal.SIGHUP)
    stopping = asyncio.ensure_future(stop.wait())
    dying = asyncio.ensure_future(started.exited.wait())
    await asyncio.wait({stopping, dying}, return_when=asyncio.FIRST_COMPLETED)
    failed = not stop.is_set()
    stopping.cancel()
    dying.cancel()
    if failed:
        print("gateway: a worker exited; stopping the others", file=sys.stderr, flush=True)
    else:
        print("gateway: shutting down", flush=True)
    await started.stop()
    print("gateway: stopped", flush=True)
    return 1 if failed else 0
