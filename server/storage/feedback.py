"""Feedback on earlier requests, kept beside their ledger rows, and the training rows
routing learns from (`gateway router train --from-ledger`)."""

from __future__ import annotations

import time

from server.storage.db import Database


class FeedbackStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def save(
        self, request_id: str, key_id: str, score: float, label: str, comment: str
    ) -> None:
        """Records a key's feedback for one of its requests, replacing any given before."""
        async with self.db.transaction() as tx:
            await tx.execute(
                "DELETE FROM feedback WHERE key_id = ? AND request_id = ?", key_id, request_id
            )
            await tx.execute(
                "INSERT INTO feedback (request_id, key_id, score, label, comment, ts) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                request_id, key_id, score, label, comment, time.time(),
            )  # fmt: skip

    async def rated_prompts(self, model: str) -> list[tuple[str, float]]:
        """(prompt, score) of every rated request that `model` answered and whose prompt
        was recorded, oldest first."""
        rows = await self.db.fetch(
            "SELECT u.prompt AS prompt, f.score AS score FROM feedback f "
            "JOIN usage_records u ON u.key_id = f.key_id AND u.request_id = f.request_id "
            "WHERE u.model = ? AND u.status = 'OK' AND u.prompt IS NOT NULL ORDER BY f.ts",
            model,
        )
        return [(str(r["prompt"]), float(r["score"])) for r in rows]

    async def rated_answers(self) -> list[tuple[str, str, str, float]]:
        """(prompt, tags comma-separated, model that answered, score) of every rated
        routed request whose prompt was recorded, oldest first: every rung's answers."""
        rows = await self.db.fetch(
            "SELECT u.prompt AS prompt, u.tags AS tags, u.model AS model, f.score AS score "
            "FROM feedback f JOIN usage_records u "
            "ON u.key_id = f.key_id AND u.request_id = f.request_id "
            "WHERE u.route_profile != '' AND u.status = 'OK' AND u.prompt IS NOT NULL "
            "ORDER BY f.ts",
        )
        return [
            (str(r["prompt"]), str(r["tags"]), str(r["model"]), float(r["score"])) for r in rows
        ]
