"""Options and overrides shared by the `gateway` sub-commands."""

from __future__ import annotations

import argparse
import os
from urllib.parse import urlsplit, urlunsplit

from server.base import config

# Environment variables that override the config file's storage settings.
ENV = {
    "database_url": "GATEWAY_DATABASE_URL",
    "redis_url": "GATEWAY_REDIS_URL",
    "sqlite_path": "GATEWAY_SQLITE_PATH",
    "state_dir": "GATEWAY_STATE_DIR",
}


def storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML config file (default: the embedded config)")
    parser.add_argument(
        "--database-url",
        help="PostgreSQL URL (overrides storage.database_url and $GATEWAY_DATABASE_URL)",
    )
    parser.add_argument("--sqlite-path", help="SQLite file (overrides storage.sqlite_path)")


def redact(url: str) -> str:
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
        f"postgresql {redact(storage.database_url)}"
        if storage.database_url
        else f"sqlite {storage.sqlite_file}"
    )
    shared = f"redis {redact(storage.redis_url)}" if storage.redis_url else "in memory"
    return f"{where}; limits and budgets {shared}"


def load(args: argparse.Namespace) -> config.Config:
    """The config file (or the embedded default) with the command line's overrides."""
    cfg, _ = config.load(args.config)
    return with_overrides(cfg, args)
