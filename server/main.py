"""The `gateway` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from server import app, config
from server.auth import HEADER


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gateway",
        description="Serve the model gateway: gRPC plus its REST/SSE facade.",
    )
    parser.add_argument("--config", help="YAML config file (default: the embedded config)")
    parser.add_argument("--host", help="address to bind (overrides server.host)")
    parser.add_argument("--grpc-port", type=int, help="gRPC port (overrides server.grpc_port)")
    parser.add_argument("--http-port", type=int, help="REST port (overrides server.http_port)")
    parser.add_argument(
        "--grpc-target",
        metavar="HOST:PORT",
        help="run only the REST facade, forwarding every call to this gRPC gateway",
    )
    parser.add_argument("--no-http", action="store_true", help="serve gRPC only")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def with_overrides(cfg: config.Config, args: argparse.Namespace) -> config.Config:
    overrides = {
        name: value
        for name, value in (
            ("host", args.host),
            ("grpc_port", args.grpc_port),
            ("http_port", args.http_port),
        )
        if value is not None
    }
    server = cfg.server.model_copy(update=overrides)
    return cfg.model_copy(update={"server": server})


def announce(cfg: config.Config, source: str, running: app.Running, embedded: bool) -> None:
    host = cfg.server.host
    print(f"gateway: config: {source}", flush=True)
    if running.grpc_port is not None:
        print(f"gateway: gRPC listening on {host}:{running.grpc_port}", flush=True)
    if running.http_port is not None:
        print(f"gateway: HTTP listening on http://{host}:{running.http_port}", flush=True)
    for key in cfg.keys:
        # Only the embedded development keys are printed whole; real secrets never are.
        shown = key.secret if embedded else key.secret[:6] + "..."
        print(f"gateway: key {key.name} ({HEADER[key.kind]}): {shown}", flush=True)
    print("gateway: ready", flush=True)


async def serve(args: argparse.Namespace) -> None:
    cfg, source = config.load(args.config)
    cfg = with_overrides(cfg, args)
    running = await app.start(cfg, grpc_target=args.grpc_target, serve_http=not args.no_http)
    announce(cfg, source, running, embedded=args.config is None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print("gateway: shutting down", flush=True)
    await running.stop()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(args))
    except config.ConfigError as exc:
        sys.exit(f"gateway: config error: {exc}")
    except OSError as exc:
        sys.exit(f"gateway: cannot start: {exc}")


if __name__ == "__main__":
    main()
