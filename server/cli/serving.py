"""`gateway serve`: one gateway process, or the supervisor of `--workers N`, from
start-up to a drained stop. Imported only to serve: the other commands start without
the gateway's whole stack."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable

from server.accounting.admission import HEADER
from server.accounting.shared import StateClient
from server.accounting.spool import Spool
from server.application.admin import config_summary
from server.application.governance.signin import call_for
from server.base import config
from server.base.errors import GatewayError
from server.cli import lifeline, workers
from server.cli import serve as app
from server.cli.options import describe_storage, with_overrides
from server.cli.status import say
from server.ops import metrics, requestlog, tracing

STOPPED_STARTING = "gateway: stopped before it was serving"


def announce(cfg: config.Config, source: str, running: app.Running, embedded: bool) -> None:
    host = cfg.server.host
    say(f"gateway: config: {source}")
    if running.grpc_port is not None:
        say(f"gateway: gRPC listening on {host}:{running.grpc_port}")
    if running.http_port is not None:
        say(f"gateway: HTTP listening on http://{host}:{running.http_port}")
    if running.metrics_port is not None:
        where = f"http://{host}:{running.metrics_port}"
        say(f"gateway: metrics listening on {where}/metrics")
    say(f"gateway: storage: {describe_storage(cfg.storage)}")
    for key in cfg.keys:
        # Only the embedded development keys are printed whole; real secrets never are.
        shown = key.secret if embedded else key.secret[:6] + "..."
        say(f"gateway: key {key.name} ({HEADER[key.kind]}): {shown}")
    say("gateway: ready")


async def serve(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    index, shared_state = workers.worker_options()
    if index is not None:
        lifeline.follow_supervisor()
    starting = asyncio.current_task()
    assert starting is not None
    # Until it serves, a stop signal ends start-up: as a container's first process the
    # gateway would otherwise ignore SIGTERM (PID 1 has no default action). A process
    # that serves nothing yet has nothing to drain and exits at once; the parent of
    # `--workers N` first stops the workers it started.
    parent = args.workers > 1 and index is None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, starting.cancel if parent else _stopped_starting)
    cfg, source = config.load(args.config)
    cfg = with_overrides(cfg, args)
    if args.workers > 1 and index is None:
        return await workers.run(
            cfg, args.argv, args, args.workers,
            lambda running: announce(cfg, source, running, embedded=args.config is None),
        )  # fmt: skip
    folder = workers.spool_folder() or cfg.ledger.spool_dir
    spool = None
    if folder and args.grpc_target is None:
        spool = Spool(folder, "gateway" if index is None else f"worker-{index}")
    running = await app.start(
        cfg, grpc_target=args.grpc_target, serve_http=not args.no_http,
        reuse_port=index is not None, shared_state=shared_state,
        source=None if args.config is None else lambda: _reread(args), spool=spool,
        relay=workers.relay_options(),
    )  # fmt: skip
    quiet_gc()
    if index is None:
        announce(cfg, source, running, embedded=args.config is None)
    elif shared_state:
        parent = StateClient(shared_state)
        await parent.call("ready", index)
        await parent.aclose()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if running.gateway is not None and args.config is not None:
        gateway = running.gateway
        # One worker of several records the reload (each reloads its own config).
        audited = index in (None, 0)
        loop.add_signal_handler(
            signal.SIGHUP, lambda: asyncio.ensure_future(_reload(gateway, audited))
        )
    await stop.wait()
    # Turns NOT_SERVING, lets calls in flight finish, then drains the usage ledger.
    say("gateway: shutting down")
    await running.stop()
    metrics.mark_process_dead()
    tracing.shutdown()
    say("gateway: stopped")
    return 0


def _reread(args: argparse.Namespace) -> tuple[config.Config, str]:
    """The config file again, with the same command-line overrides."""
    cfg, source = config.load(args.config)
    return with_overrides(cfg, args), source


async def _reload(gateway: app.Gateway, audited: bool) -> None:
    """SIGHUP: reloads the config file; a refusal is logged and changes nothing. The
    reload is recorded in the audit log (actor `signal:SIGHUP`) as the admin API's is."""
    with contextlib.suppress(GatewayError):
        before = config_summary(gateway.live.current.config)
        done = await gateway.control.reload()
        say(f"gateway: config reloaded from {done.source}")
        if audited:
            after = config_summary(gateway.live.current.config)
            await gateway.signin.auditor.event(
                call_for("", ""), "signal:SIGHUP", "config.reload", f"config:{done.source}",
                before, after,
            )  # fmt: skip


def quiet_gc() -> None:
    """Moves everything alive after start-up (modules, descriptors, config) out of the
    collector's sight and collects the young generation less often, so collections
    stay short and rare under load instead of stalling the event loop."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def event_loop() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's loop (for grpc.aio and uvicorn alike) when installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run(args: argparse.Namespace) -> None:
    """Serves until stopped; exits non-zero, saying why, when it cannot start."""
    try:
        logging.basicConfig(
            level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        requestlog.install()
        tracing.configure_from_env()
    except config.ConfigError as exc:
        sys.exit(f"gateway: config error: {exc}")
    except OSError as exc:
        sys.exit(f"gateway: cannot start: {exc}")
    code, why = 1, ""
    try:
        with asyncio.Runner(loop_factory=event_loop()) as runner:
            code = runner.run(serve(args))
    except app.StartupError as exc:
        why = f"gateway: cannot start: {exc}"
    except config.ConfigError as exc:
        why = f"gateway: config error: {exc}"
    except OSError as exc:
        why = f"gateway: cannot start: {exc}"
    except (asyncio.CancelledError, KeyboardInterrupt):
        why = STOPPED_STARTING
    except Exception:
        logging.getLogger("gateway").exception("gateway: cannot start")
    finally:
        requestlog.stop()
    if code:
        _exit(code, why)


def _stopped_starting() -> None:
    _exit(1, STOPPED_STARTING)


def _exit(code: int, why: str) -> None:
    """Ends a gateway that failed now, with `code`: a thread something left running
    (a database driver's, an executor's) would otherwise hold the process after the
    error, and an orchestrator sees no exit to restart."""
    if why:
        say(why, sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
