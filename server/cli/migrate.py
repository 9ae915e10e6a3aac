"""`gateway migrate`: brings the database schema up to date."""

from __future__ import annotations

import argparse
from typing import Any

from server.cli.options import describe_storage, load, storage_options
from server.storage.db import connect
from server.storage.migrations import current_version, migrate


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "migrate", help="bring the database schema up to date",
        description="Apply the database migrations not applied yet.",
    )  # fmt: skip
    storage_options(parser)
    parser.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    db = await connect(cfg.storage.database_url, cfg.storage.sqlite_file, cfg.storage.pgbouncer)
    try:
        applied = await migrate(db)
        version = await current_version(db)
        print(f"gateway: schema at version {version} ({describe_storage(cfg.storage)})")
        print(f"gateway: applied {', '.join(map(str, applied)) or 'nothing (up to date)'}")
        return 0
    finally:
        await db.close()
