"""CPU per ledger row written to SQLite, with the gateway's request ids (time-ordered:
`server.base.call.new_request_id`) against random ones, into a table that already holds
`--rows` rows. The ledger's table and indexes are the migrations' own; rows go in as the
ledger writes them (`UsageStore.insert`, batches of 500). Each kind has its database;
the kinds alternate within each round, and the CPU is the process's (the database's
thread included).

    python -m bench.ledger_ids                       # 200,000 rows first, 3 rounds
    python -m bench.ledger_ids --rows 1000000 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from server.base.call import new_request_id
from server.base.record import UsageRecord
from server.storage.db import SQLiteDatabase
from server.storage.migrations import migrate
from server.storage.usage import UsageStore

BATCH = 500  # the ledger's default batch_size
KINDS: dict[str, Callable[[], str]] = {
    "time-ordered ids": new_request_id,
    "random ids": lambda: os.urandom(16).hex(),
}


def row(request_id: str) -> UsageRecord:
    return UsageRecord(
        ts=time.time(), request_id=request_id, key_id="cfg-bench", key_name="bench",
        method="CreateChatCompletion", model="bench", provider="bench-nginx", prompt_tokens=9,
        completion_tokens=6, total_tokens=15, input_cost_usd=0.000009,
        output_cost_usd=0.000012, cache_input_cost_usd=None, total_cost_usd=0.000021,
        latency_ms=0.5, ttft_ms=0.2, status="OK",
    )  # fmt: skip


async def insert(store: UsageStore, make_id: Callable[[], str], rows: int) -> float:
    """CPU seconds to insert `rows` rows in batches."""
    started = time.process_time()
    for first in range(0, rows, BATCH):
        await store.insert([row(make_id()) for _ in range(min(BATCH, rows - first))])
    return time.process_time() - started


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="ledger-ids-") as tmp:
        stores = {}
        for name, make_id in KINDS.items():
            db = await SQLiteDatabase.open(str(Path(tmp) / f"{name.split()[0]}.db"))
            await migrate(db)
            stores[name] = store = UsageStore(db)
            await insert(store, make_id, args.rows)
        per_row: dict[str, list[float]] = {name: [] for name in KINDS}
        for _ in range(args.rounds):
            for name, make_id in KINDS.items():
                spent = await insert(stores[name], make_id, args.measured)
                per_row[name].append(spent / args.measured * 1e6)
        for store in stores.values():
            await store.db.close()
    print(f"| {args.rows:,} rows first, then {args.measured:,} | CPU us per row, each round |")
    print("|---|---|")
    for name, figures in per_row.items():
        print(f"| {name} | {' / '.join(f'{f:.1f}' for f in figures)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows in the table first")
    parser.add_argument("--measured", type=int, default=20_000, help="rows timed per round")
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
