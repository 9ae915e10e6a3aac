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
    # What an operator noted of the log earlier: a log cut short since (an empty one
    # too) no longer holds it, which the chain alone cannot show.
    verify.add_argument(
        "--count", type=_count, metavar="N",
        help="the log held N events when last noted: fewer now is a log cut short",
    )  # fmt: skip
    verify.add_argument(
        "--last-hash", type=_hash, metavar="HASH",
        help="the hash of the last event when last noted (event N's, with --count): "
        "it must still be in the chain",
    )  # fmt: skip
    parser.set_defaults(run=run)


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("must be a whole number of events, at least 1")
    return int(text)


def _hash(text: str) -> str:
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise argparse.ArgumentTypeError("must be an event's hash: 64 lower-case hex digits")
    return text


async def run(args: argparse.Namespace) -> int:
    cfg = load(args)
    db = await connect(cfg.storage.database_url, cfg.storage.sqlite_file, cfg.storage.pgbouncer)
    try:
        await migrate(db)
        log = AuditLog(db)
        checked, broken, why = await log.verify()
        noted = await log.seq_of(args.last_hash) if args.last_hash else None
    finally:
        await db.close()
    where = describe_storage(cfg.storage).split(";")[0]
    if broken is not None:
        print(
            f"gateway: audit event {broken.seq} ({broken.action} of {broken.target or '-'} "
            f"at {broken.ts:.3f}) does not fit the chain: {why}; {checked} events before it fit"
        )
        return 1
    missing = _cut_short(args.count, args.last_hash, checked, noted)
    if missing:
        print(f"gateway: audit log not intact ({where}): {missing}")
        return 1
    print(f"gateway: audit log intact: {checked} events chained ({where})")
    return 0


def _cut_short(count: int | None, last_hash: str | None, checked: int, noted: int | None) -> str:
    """Why a whole chain of `checked` events lacks what was noted of it ("" when it
    holds it): `noted` is the seq of the event with `last_hash`."""
    if count is not None and checked < count:
        return f"{checked} events chained, {count} noted: events were removed from its end"
    if last_hash is not None and noted is None:
        return f"no event has the noted hash {last_hash}: events were removed from its end"
    if count is not None and noted is not None and noted != count:
        return f"the noted hash is event {noted}'s, not event {count}'s"
    return ""
