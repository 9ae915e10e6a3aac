"""The usage ledger's table: one row per request, success or failure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from operator import attrgetter

from server.base.caller import account_fields
from server.base.record import UsageRecord
from server.storage.db import Database

COLUMNS = tuple(f.name for f in fields(UsageRecord))


@dataclass(frozen=True, slots=True)
class Bucket:
    """A key's usage of one model on one UTC day."""

    day: str
    model: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float
    errors: int
    # The requests that were batch lines, and their cost (among the above).
    batch_requests: int = 0
    batch_cost_usd: float = 0.0


# The UTC day of a row, per dialect.
DAY = {
    "sqlite": "strftime('%Y-%m-%d', ts, 'unixepoch')",
    "postgresql": "to_char(to_timestamp(ts) AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}


# One record as a row, in COLUMNS order (dataclasses.astuple deep-copies every field).
_row = attrgetter(*COLUMNS)


class UsageStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert(self, records: Sequence[UsageRecord]) -> None:
        marks = ", ".join("?" for _ in COLUMNS)
        await self.db.executemany(
            f"INSERT INTO usage_records ({', '.join(COLUMNS)}) VALUES ({marks})",
            [_row(r) for r in records],
        )

    async def spent_since(self, account: str, since: float) -> float:
        """What an account (a key's id, or a level's `account_of`) has spent since
        `since` (Unix seconds), in USD: the sum of its rows."""
        match = account_fields(account)
        where = " AND ".join(f"{column} = ?" for column in match)
        row = await self.db.fetchrow(
            "SELECT COALESCE(SUM(total_cost_usd), 0) AS spent FROM usage_records "
            f"WHERE {where} AND ts >= ?",
            *match.values(),
            since,
        )
        return float(row["spent"]) if row else 0.0

    async def buckets(self, key_id: str, start: float, end: float) -> list[Bucket]:
        """A key's usage by UTC day and model over [start, end), oldest day first."""
        day = DAY[self.db.dialect]
        rows = await self.db.fetch(
            f"SELECT {day} AS day, model, COUNT(*) AS requests, "
            "SUM(prompt_tokens) AS prompt_tokens, SUM(completion_tokens) AS completion_tokens, "
            "SUM(total_tokens) AS total_tokens, COALESCE(SUM(total_cost_usd), 0) AS cost_usd, "
            "SUM(CASE WHEN status = 'OK' THEN 0 ELSE 1 END) AS errors, "
            "SUM(CASE WHEN batch_id <> '' THEN 1 ELSE 0 END) AS batch_requests, "
            "COALESCE(SUM(CASE WHEN batch_id <> '' THEN total_cost_usd END), 0) AS batch_cost "
            "FROM usage_records WHERE key_id = ? AND ts >= ? AND ts < ? "
            f"GROUP BY {day}, model ORDER BY 1, 2",
            key_id,
            start,
            end,
        )
        return [
            Bucket(
                r["day"],
                r["model"],
                int(r["requests"]),
                int(r["prompt_tokens"]),
                int(r["completion_tokens"]),
                int(r["total_tokens"]),
                float(r["cost_usd"]),
                int(r["errors"]),
                int(r["batch_requests"]),
                float(r["batch_cost"]),
            )  # fmt: skip
            for r in rows
        ]

    async def holds(self, key_id: str, request_id: str) -> bool:
        """Whether the ledger holds a request of this key with this id (callers choose
        their ids, so only the pair names one request)."""
        row = await self.db.fetchrow(
            "SELECT 1 AS found FROM usage_records WHERE key_id = ? AND request_id = ? LIMIT 1",
            key_id, request_id,
        )  # fmt: skip
        return row is not None

    async def count(self) -> int:
        row = await self.db.fetchrow("SELECT COUNT(*) AS n FROM usage_records")
        return int(row["n"]) if row else 0
