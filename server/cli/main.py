"""The `gateway` command: serve (the default), manage keys, migrate the database.

    gateway [--config FILE] [--grpc-port N] ...      serve gRPC and REST
    gateway keys create --name N --kind api ...      create a key; prints its secret once
    gateway keys list | show KEY | revoke KEY        manage keys
    gateway migrate                                  bring the database schema up to date

Key commands talk to the configured database directly (the SQLite file, or PostgreSQL
from `storage.database_url`, `--database-url` or GATEWAY_DATABASE_URL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from server.accounting.admission import HEADER
from server.cli import serve as app
from server.core import config
from server.core.errors import GatewayError
from server.ops import metrics, requestlog, tracing
from server.ops.control import Control
from server.storage import open_store
from server.storage.db import connect
from server.storage.keys import KeyRecord
from server.storage.migrations import current_version, migrate

# Environment variables that override the config file's storage settings.
ENV = {
    "database_url": "GATEWAY_DATABASE_URL",
    "redis_url": "GATEWAY_REDIS_URL",
    "sqlite_path": "GATEWAY_SQLITE_PATH",
}


def _storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML config file (default: the embedded config)")
    parser.add_argument(
        "--database-url",
        help="PostgreSQL URL (overrides storage.database_url and $GATEWAY_DATABASE_URL)",
    )
    parser.add_argument("--sqlite-path", help="SQLite file (overrides storage.sqlite_path)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gateway",
        description="Serve the model gateway: gRPC plus its REST/SSE facade.",
        epilog="Other commands: `gateway keys --help` (key management), `gateway migrate`.",
    )
    _storage_options(parser)
    parser.add_argument("--host", help="address to bind (overrides server.host)")
    parser.add_argument("--grpc-port", type=int, help="gRPC port (overrides server.grpc_port)")
    parser.add_argument("--http-port", type=int, help="REST port (overrides server.http_port)")
    parser.add_argument("--redis-url", help="Redis URL (overrides storage.redis_url)")
    parser.add_argument(
        "--grpc-target",
        metavar="HOST:PORT",
        help="run only the REST facade, forwarding every call to this gRPC gateway",
    )
    parser.add_argument("--no-http", action="store_true", help="serve gRPC only")
    parser.add_argument(
        "--metrics-port",
        type=int,
        help="also serve /metrics, /healthz and /readyz on this port (overrides "
        "operations.metrics_port; for a gRPC-only gateway)",
    )
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def parse_keys_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gateway keys", description="Manage gateway keys.")
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a key and print its secret (once)")
    _storage_options(create)
    create.add_argument("--name", required=True)
    create.add_argument("--kind", required=True, choices=["api", "router", "admin"])
    create.add_argument("--owner", default="")
    create.add_argument("--rpm", type=int, help="requests per minute (default: unlimited)")
    create.add_argument("--tpm", type=int, help="tokens per minute (default: unlimited)")
    create.add_argument("--budget-usd", type=float, help="spend per period in USD")
    create.add_argument("--budget-period", default="monthly", choices=["daily", "monthly", "none"])
    create.add_argument("--expires-in-days", type=float, help="expiry (default: never)")
    create.add_argument("--json", action="store_true", help="print JSON")
    listing = commands.add_parser("list", help="list keys")
    _storage_options(listing)
    listing.add_argument("--kind", choices=["api", "router", "admin"])
    listing.add_argument("--owner")
    listing.add_argument("--all", action="store_true", help="include revoked keys")
    listing.add_argument("--json", action="store_true", help="print JSON")
    for name, text in (("show", "show one key"), ("revoke", "revoke a key")):
        sub = commands.add_parser(name, help=text)
        _storage_options(sub)
        sub.add_argument("key", help="key id or name")
        sub.add_argument("--json", action="store_true", help="print JSON")
    return parser.parse_args(argv)


def _redact(url: str) -> str:
    """A URL without its password, for printing."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def with_overrides(cfg: config.Config, args: argparse.Namespace) -> config.Config:
    overrides = {
        name: value
        for name, value in (
            ("host", getattr(args, "host", None)),
            ("grpc_port", getattr(args, "grpc_port", None)),
            ("http_port", getattr(args, "http_port", None)),
        )
        if value is not None
    }
    server = cfg.server.model_copy(update=overrides)
    operations = cfg.operations
    if getattr(args, "metrics_port", None) is not None:
        operations = operations.model_copy(update={"metrics_port": args.metrics_port})
    storage_updates = {}
    for name, env in ENV.items():
        value = getattr(args, name, None) or os.environ.get(env)
        if value:
            storage_updates[name] = value
    storage = cfg.storage.model_copy(update=storage_updates)
    return cfg.model_copy(update={"server": server, "storage": storage, "operations": operations})


def describe_storage(storage: config.StorageConfig) -> str:
    where = (
        f"postgresql {_redact(storage.database_url)}"
        if storage.database_url
        else f"sqlite {storage.sqlite_path}"
    )
    shared = f"redis {_redact(storage.redis_url)}" if storage.redis_url else "in memory"
    return f"{where}; limits and budgets {shared}"


def announce(cfg: config.Config, source: str, running: app.Running, embedded: bool) -> None:
    host = cfg.server.host
    print(f"gateway: config: {source}", flush=True)
    if running.grpc_port is not None:
        print(f"gateway: gRPC listening on {host}:{running.grpc_port}", flush=True)
    if running.http_port is not None:
        print(f"gateway: HTTP listening on http://{host}:{running.http_port}", flush=True)
    if running.metrics_port is not None:
        where = f"http://{host}:{running.metrics_port}"
        print(f"gateway: metrics listening on {where}/metrics", flush=True)
    print(f"gateway: storage: {describe_storage(cfg.storage)}", flush=True)
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
    if running.gateway is not None and args.config is not None:
        control = running.gateway.control
        control.source = lambda: _reread(args)
        loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(_reload(control)))
    await stop.wait()
    # Turns NOT_SERVING, lets calls in flight finish, then drains the usage ledger.
    print("gateway: shutting down", flush=True)
    await running.stop()
    metrics.mark_process_dead()
    print("gateway: stopped", flush=True)


def _reread(args: argparse.Namespace) -> tuple[config.Config, str]:
    """The config file again, with the same command-line overrides."""
    cfg, source = config.load(args.config)
    return with_overrides(cfg, args), source


async def _reload(control: Control) -> None:
    """SIGHUP: reloads the config file; a refusal is logged and changes nothing."""
    with contextlib.suppress(GatewayError):
        done = await control.reload()
        print(f"gateway: config reloaded from {done.source}", flush=True)


def _key_dict(key: KeyRecord) -> dict[str, Any]:
    return {
        "id": key.id, "prefix": key.prefix, "kind": key.kind, "name": key.name,
        "owner": key.owner, "requests_per_minute": key.requests_per_minute,
        "tokens_per_minute": key.tokens_per_minute, "budget_usd": key.budget_usd,
        "budget_period": key.budget_period, "created_at": _when(key.created_at),
        "expires_at": _when(key.expires_at), "revoked_at": _when(key.revoked_at),
    }  # fmt: skip


def _when(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _print_key(key: KeyRecord, as_json: bool) -> None:
    data = _key_dict(key)
    if as_json:
        print(json.dumps(data))
        return
    for name, value in data.items():
        print(f"{name + ':':22}{'-' if value is None else value}")


async def keys_command(args: argparse.Namespace) -> int:
    cfg, _ = config.load(args.config)
    cfg = with_overrides(cfg, args)
    store = await open_store(cfg.storage)
    try:
        if args.command == "create":
            expires = None
            if args.expires_in_days is not None:
                expires = time.time() + args.expires_in_days * 86400
            key, secret = await store.keys.create(
                kind=args.kind, name=args.name, owner=args.owner, requests_per_minute=args.rpm,
                tokens_per_minute=args.tpm, budget_usd=args.budget_usd,
                budget_period=args.budget_period, expires_at=expires,
            )  # fmt: skip
            if args.json:
                print(json.dumps({**_key_dict(key), "secret": secret}))
            else:
                _print_key(key, False)
                print(f"{'secret:':22}{secret}")
                print("The secret is shown only now; the gateway keeps only its digest.")
            return 0
        if args.command == "list":
            keys = await store.keys.list(kind=args.kind, owner=args.owner, include_revoked=args.all)
            if args.json:
                print(json.dumps([_key_dict(k) for k in keys]))
                return 0
            print(f"{'ID':22} {'PREFIX':12} {'KIND':7} {'NAME':20} {'OWNER':14} {'RPM':>6} "
                  f"{'TPM':>8} {'BUDGET':>12} STATUS")  # fmt: skip
            for k in keys:
                status = "revoked" if k.revoked else ("expired" if k.expired() else "active")
                budget = "-" if k.budget_usd is None else f"${k.budget_usd:g}/{k.budget_period}"
                print(f"{k.id:22} {k.prefix:12} {k.kind:7} {k.name:20} {k.owner:14} "
                      f"{k.requests_per_minute or '-':>6} {k.tokens_per_minute or '-':>8} "
                      f"{budget:>12} {status}")  # fmt: skip
            return 0
        found = await store.keys.get(args.key)
        if found is None:
            print(f"gateway: no key {args.key!r}", file=sys.stderr)
            return 1
        if args.command == "revoke":
            found = await store.keys.revoke(found.id)
            assert found is not None
        _print_key(found, args.json)
        return 0
    finally:
        await store.aclose()


async def migrate_command(args: argparse.Namespace) -> int:
    cfg, _ = config.load(args.config)
    cfg = with_overrides(cfg, args)
    db = await connect(cfg.storage.database_url, cfg.storage.sqlite_path)
    try:
        applied = await migrate(db)
        version = await current_version(db)
        print(f"gateway: schema at version {version} ({describe_storage(cfg.storage)})")
        print(f"gateway: applied {', '.join(map(str, applied)) or 'nothing (up to date)'}")
        return 0
    finally:
        await db.close()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["keys"]:
            sys.exit(asyncio.run(keys_command(parse_keys_args(argv[1:]))))
        if argv[:1] == ["migrate"]:
            parser = argparse.ArgumentParser(prog="gateway migrate")
            _storage_options(parser)
            sys.exit(asyncio.run(migrate_command(parser.parse_args(argv[1:]))))
        if argv[:1] == ["serve"]:
            argv = argv[1:]
        args = parse_args(argv)
        logging.basicConfig(
            level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        requestlog.install()
        tracing.configure_from_env()
        asyncio.run(serve(args))
    except config.ConfigError as exc:
        sys.exit(f"gateway: config error: {exc}")
    except OSError as exc:
        sys.exit(f"gateway: cannot start: {exc}")


if __name__ == "__main__":
    main()
