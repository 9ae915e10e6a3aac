"""Budget alerts raised: one row per (account, period, threshold), so each alert is
raised once across every instance sharing the database."""

from __future__ import annotations

import json
from typing import Any

from server.storage.db import Database, Executor


class AlertStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim(
        self,
        ex: Executor,
        account: str,
        period_start: float,
        threshold: float,
        ts: float,
        payload: dict[str, Any],
    ) -> bool:
        """Records the alert in the transaction `ex`; False when it was raised already
        (by this instance or another)."""
        rows = await ex.fetch(
            "INSERT INTO budget_alerts (account, period_start, threshold, ts, payload) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING account",
            account, period_start, threshold, ts, json.dumps(payload, sort_keys=True),
        )  # fmt: skip
        return bool(rows)

    async def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The last alerts raised, newest first."""
        rows = await self.db.fetch(
            "SELECT payload FROM budget_alerts ORDER BY ts DESC LIMIT ?", limit
        )
        return [json.loads(r["payload"]) for r in rows]
