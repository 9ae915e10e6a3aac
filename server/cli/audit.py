"""`gateway audit verify`: checks the audit log's chain in the configured database."""

from __future__ import annotations

import argparse
from typing import Any

from server.cli.options import describe_storage, load, storage_options
from server.storage.audit import AuditLog
from server.storage.db import connect
from server.storage.migrations import migrate


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "audit", help="the audit log", description="Work with the audit log."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser(
        "verify", help="check that no audit event was altered, removed or inserted",
        description="Walk the audit log's SHA-256 chain. Exits 0 when every event fits, "
        "1 naming the first event that does not.",
    )  # fmt: skip
    storage_options(verify)
    parser.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    db = await connect(cfg.storage.database_url, cfg.storage.sqlite_file)
    try:
        await migrate(db)
        checked, broken, why = await AuditLog(db).verify()
    finally:
        await db.close()
    where = describe_storage(cfg.storage).split(";")[0]
    if broken is None:
        print(f"gateway: audit log intact: {checked} events chained ({where})")
        return 0
    print(
        f"gateway: audit event {broken.seq} ({broken.action} of {broken.target or '-'} at "
        f"{broken.ts:.3f}) does not fit the chain: {why}; {checked} events before it fit"
    )
    return 1
