"""The `gateway` command: serve (the default), manage keys, migrate the database.

    gateway [serve] [--config FILE] [--grpc-port N] ...   serve gRPC and REST
    gateway keys create --name N --kind api ...           create a key; prints its secret once
    gateway keys list | show KEY | revoke KEY             manage keys
    gateway migrate                                       bring the database schema up to date
    gateway router train --data DIR --out FILE            train the routing scorer
    gateway probe [--url URL | --grpc HOST:PORT]          exit 0 when a running gateway is ready

Key commands talk to the configured database directly (the SQLite file, or PostgreSQL
from `storage.database_url`, `--database-url` or GATEWAY_DATABASE_URL).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from server.base import config
from server.cli import audit, keys, migrate, prices, probe, router
from server.cli.options import storage_options

COMMANDS = ("serve", "keys", "audit", "migrate", "router", "prices", "probe")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="gateway",
        description="The model gateway: gRPC plus its REST/SSE facade. "
        "Without a command, `serve` runs.",
    )
    commands = top.add_subparsers(
        dest="cmd", metavar="{serve,keys,audit,migrate,router,prices,probe}"
    )
    serving = commands.add_parser(
        "serve", help="serve gRPC and REST (the default)",
        description="Serve the model gateway: gRPC plus its REST/SSE facade.",
    )  # fmt: skip
    storage_options(serving)
    serving.add_argument("--host", help="address to bind (overrides server.host)")
    serving.add_argument("--grpc-port", type=int, help="gRPC port (overrides server.grpc_port)")
    serving.add_argument("--http-port", type=int, help="REST port (overrides server.http_port)")
    serving.add_argument("--redis-url", help="Redis URL (overrides storage.redis_url)")
    serving.add_argument(
        "--grpc-target",
        metavar="HOST:PORT",
        help="run only the REST facade, forwarding every call to this gRPC gateway",
    )
    serving.add_argument("--no-http", action="store_true", help="serve gRPC only")
    serving.add_argument(
        "--metrics-port",
        type=int,
        help="also serve /metrics, /healthz and /readyz on this port (overrides "
        "operations.metrics_port; for a gRPC-only gateway)",
    )
    serving.add_argument(
        "--workers", type=_positive, default=1, metavar="N",
        help="worker processes sharing both ports (SO_REUSEPORT); limits, budgets shared",
    )  # fmt: skip
    serving.add_argument("--log-level", default="INFO")
    serving.set_defaults(run=None)
    keys.add_parser(commands)
    audit.add_parser(commands)
    migrate.add_parser(commands)
    router.add_parser(commands)
    prices.add_parser(commands)
    probe.add_parser(commands)
    return top


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    # `serve` is the default: `gateway --config FILE` means `gateway serve --config FILE`.
    if argv[:1] not in (["-h"], ["--help"]) and (not argv or argv[0] not in COMMANDS):
        argv = ["serve", *argv]
    top = parser()
    args, rest = top.parse_known_args(argv)
    if rest and getattr(args, "run", None) is not router.run:
        top.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest  # `router train` hands these on to the trainer
    args.argv = argv  # what the workers of `--workers N` are started with
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.run is not None:
        try:
            sys.exit(asyncio.run(args.run(args)))
        except config.ConfigError as exc:
            sys.exit(f"gateway: config error: {exc}")
        except OSError as exc:
            sys.exit(f"gateway: cannot start: {exc}")
    # Imported only to serve: it is the whole gateway (a second of start-up), which
    # the other commands do not need.
    from server.cli import serving

    serving.run(args)


if __name__ == "__main__":
    main()
