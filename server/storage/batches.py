"""Batch jobs and their lines, in the database, with a lease.

A batch is run by the instance holding its lease (`lease_owner` until `lease_until`);
the holder renews it while it runs, and once it lapses (the holder died) any instance
takes the batch over with one conditional UPDATE, which only one can win. A line ends
once: its UPDATE applies only to a line still `pending`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from server.storage.db import Database, Row

# The statuses a batch is still worked on in.
ACTIVE = ("validating", "in_progress", "finalizing", "cancelling")


@dataclass(frozen=True, slots=True)
class NewLine:
    line: int
    custom_id: str
    body: str


@dataclass(frozen=True, slots=True)
class Ended:
    """A line that ended: how, and its answer (or error) as stored."""

    batch_id: str
    line: int
    status: str
    status_code: int
    result: str


@dataclass(frozen=True, slots=True)
class LineCounts:
    total: int
    completed: int
    failed: int
    pending: int
    cancelled: int = 0
    expired: int = 0


@dataclass(frozen=True, slots=True)
class BatchUsage:
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    total_tokens: int
    cost_usd: float
    rows: int


class BatchStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, batch: dict[str, Any], lines: Sequence[NewLine]) -> None:
        """The batch and every line of it, or nothing."""
        columns = ", ".join(batch)
        marks = ", ".join("?" for _ in batch)
        async with self.db.transaction() as tx:
            await tx.execute(f"INSERT INTO batches ({columns}) VALUES ({marks})", *batch.values())
            for one in lines:
                await tx.execute(
                    "INSERT INTO batch_lines (batch_id, line, custom_id, body) "
                    "VALUES (?, ?, ?, ?)",
                    batch["id"], one.line, one.custom_id, one.body,
                )  # fmt: skip

    async def get(self, batch_id: str, key_id: str | None = None) -> Row | None:
        """A batch (the key's only, when `key_id` is given)."""
        if key_id is None:
            return await self.db.fetchrow("SELECT * FROM batches WHERE id = ?", batch_id)
        return await self.db.fetchrow(
            "SELECT * FROM batches WHERE id = ? AND key_id = ?", batch_id, key_id
        )

    async def page(
        self, key_id: str, dialect: str, limit: int, after: str | None = None
    ) -> list[Row]:
        """The key's batches of one dialect, newest first, from after the batch `after`."""
        where, args = "key_id = ? AND dialect = ?", [key_id, dialect]
        if after:
            mark = await self.get(after, key_id)
            if mark is not None:
                where += " AND (created_at, id) < (?, ?)"
                args += [mark["created_at"], mark["id"]]
        return await self.db.fetch(
            f"SELECT * FROM batches WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ?",
            *args, limit,
        )  # fmt: skip

    async def delete(self, batch_id: str) -> None:
        async with self.db.transaction() as tx:
            await tx.execute("DELETE FROM batch_lines WHERE batch_id = ?", batch_id)
            await tx.execute("DELETE FROM batches WHERE id = ?", batch_id)

    async def counts(self, batch_id: str) -> LineCounts:
        rows = await self.db.fetch(
            "SELECT status, COUNT(*) AS n FROM batch_lines WHERE batch_id = ? GROUP BY status",
            batch_id,
        )
        by = {r["status"]: int(r["n"]) for r in rows}
        return LineCounts(
            total=sum(by.values()),
            completed=by.get("succeeded", 0),
            failed=by.get("errored", 0),
            pending=by.get("pending", 0),
            cancelled=by.get("cancelled", 0),
            expired=by.get("expired", 0),
        )

    async def usage(self, batch_id: str) -> BatchUsage:
        """The sum of the batch's ledger rows."""
        row = await self.db.fetchrow(
            "SELECT COUNT(*) AS n, COALESCE(SUM(prompt_tokens), 0) AS i, "
            "COALESCE(SUM(cached_tokens), 0) AS c, COALESCE(SUM(completion_tokens), 0) AS o, "
            "COALESCE(SUM(reasoning_tokens), 0) AS r, COALESCE(SUM(total_tokens), 0) AS t, "
            "COALESCE(SUM(total_cost_usd), 0) AS usd FROM usage_records WHERE batch_id = ?",
            batch_id,
        )
        assert row is not None
        return BatchUsage(
            int(row["i"]), int(row["c"]), int(row["o"]), int(row["r"]), int(row["t"]),
            float(row["usd"]), int(row["n"]),
        )  # fmt: skip

    async def billed(self, batch_id: str) -> set[str]:
        """The custom_ids of the batch's lines that have their ledger row."""
        rows = await self.db.fetch(
            "SELECT custom_id FROM usage_records WHERE batch_id = ?", batch_id
        )
        return {row["custom_id"] for row in rows}

    async def outstanding(self, match: dict[str, str]) -> tuple[int, float]:
        """What the running batches of an account (`match`: its ledger columns, which
        batches carry too) may still take: their tokens, and their reserved cost less
        what their lines were billed."""
        where = " AND ".join(f"b.{column} = ?" for column in match)
        active = ", ".join("?" for _ in ACTIVE)
        held = await self.db.fetchrow(
            "SELECT COALESCE(SUM(b.tokens), 0) AS tokens, "
            "COALESCE(SUM(b.reserved_usd), 0) AS usd "
            f"FROM batches b WHERE {where} AND b.status IN ({active})",
            *match.values(), *ACTIVE,
        )  # fmt: skip
        billed = await self.db.fetchrow(
            "SELECT COALESCE(SUM(u.total_cost_usd), 0) AS usd FROM usage_records u "
            f"JOIN batches b ON u.batch_id = b.id WHERE {where} AND b.status IN ({active})",
            *match.values(), *ACTIVE,
        )  # fmt: skip
        assert held is not None and billed is not None
        return int(held["tokens"]), max(0.0, float(held["usd"]) - float(billed["usd"]))

    async def set_status(self, batch_id: str, status: str, when: str, now: float) -> None:
        """Moves the batch to `status`, stamping `<when>_at` (a column of the table)."""
        assert when.isidentifier()
        await self.db.execute(
            f"UPDATE batches SET status = ?, {when}_at = ? WHERE id = ?", status, now, batch_id
        )

    async def advance(self, batch_id: str, source: str, status: str, now: float) -> bool:
        """Moves the batch from `source` to `status` (stamping `<status>_at`) unless
        something else moved it first (a cancel asked meanwhile); whether it moved."""
        assert status.isidentifier()
        moved = await self._update_returning(
            f"UPDATE batches SET status = ?, {status}_at = ? WHERE id = ? AND status = ? "
            "RETURNING id",
            status, now, batch_id, source,
        )  # fmt: skip
        return bool(moved)

    async def cancel(self, batch_id: str, now: float) -> None:
        """Asks for a running batch to stop: its worker cancels what has not run."""
        await self.db.execute(
            "UPDATE batches SET status = 'cancelling', cancelling_at = ? WHERE id = ? "
            "AND status IN ('validating', 'in_progress')",
            now, batch_id,
        )  # fmt: skip

    async def finish(
        self, batch_id: str, status: str, when: str, now: float, output: str, errors: str
    ) -> None:
        assert when.isidentifier()
        await self.db.execute(
            f"UPDATE batches SET status = ?, {when}_at = ?, output_file_id = ?, "
            "error_file_id = ?, lease_owner = '', lease_until = 0 WHERE id = ?",
            status, now, output, errors, batch_id,
        )  # fmt: skip

    async def set_upstream(self, batch_id: str, upstream_id: str) -> None:
        """Notes the provider's id of a batch handed to it."""
        await self.db.execute(
            "UPDATE batches SET upstream_id = ? WHERE id = ?", upstream_id, batch_id
        )

    async def claim(self, owner: str, lease_s: float, limit: int) -> list[str]:
        """Takes up to `limit` batches still worked on whose lease has lapsed (or that
        nobody held yet); returns their ids. Two instances never take one batch."""
        now = time.time()
        candidates = await self.db.fetch(
            f"SELECT id FROM batches WHERE status IN ({', '.join('?' for _ in ACTIVE)}) "
            "AND lease_until < ? ORDER BY created_at LIMIT ?",
            *ACTIVE, now, limit,
        )  # fmt: skip
        taken = []
        for row in candidates:
            won = await self._update_returning(
                "UPDATE batches SET lease_owner = ?, lease_until = ? "
                "WHERE id = ? AND lease_until < ? RETURNING id",
                owner, now + lease_s, row["id"], now,
            )  # fmt: skip
            if won:
                taken.append(row["id"])
        return taken

    async def renew(self, batch_id: str, owner: str, lease_s: float) -> bool:
        """Extends this owner's lease; False when it is no longer the owner's."""
        kept = await self._update_returning(
            "UPDATE batches SET lease_until = ? WHERE id = ? AND lease_owner = ? RETURNING id",
            time.time() + lease_s, batch_id, owner,
        )  # fmt: skip
        return bool(kept)

    async def _update_returning(self, sql: str, *args: Any) -> list[Row]:
        """An UPDATE ... RETURNING, committed (a plain fetch leaves SQLite's write open)."""
        async with self.db.transaction() as tx:
            return await tx.fetch(sql, *args)

    async def release(self, batch_id: str, owner: str) -> None:
        await self.db.execute(
            "UPDATE batches SET lease_owner = '', lease_until = 0 "
            "WHERE id = ? AND lease_owner = ?",
            batch_id, owner,
        )  # fmt: skip

    async def pending_lines(self, batch_id: str, limit: int, skip: int = 0) -> list[NewLine]:
        rows = await self.db.fetch(
            "SELECT line, custom_id, body FROM batch_lines "
            "WHERE batch_id = ? AND status = 'pending' ORDER BY line LIMIT ? OFFSET ?",
            batch_id, limit, skip,
        )  # fmt: skip
        return [NewLine(int(r["line"]), r["custom_id"], r["body"]) for r in rows]

    async def end_lines(self, ended: Sequence[Ended]) -> None:
        """Ends lines once, all in one write: a line already ended keeps its first
        outcome."""
        now = time.time()
        await self.db.executemany(
            "UPDATE batch_lines SET status = ?, status_code = ?, result = ?, ended_at = ? "
            "WHERE batch_id = ? AND line = ? AND status = 'pending'",
            [(e.status, e.status_code, e.result, now, e.batch_id, e.line) for e in ended],
        )

    async def end_pending(self, batch_id: str, status: str) -> None:
        """Ends every line not run yet with `status` (cancelled, expired)."""
        await self.db.execute(
            "UPDATE batch_lines SET status = ?, ended_at = ? "
            "WHERE batch_id = ? AND status = 'pending'",
            status, time.time(), batch_id,
        )  # fmt: skip

    async def lines(self, batch_id: str, after: int, limit: int) -> list[Row]:
        """Ended lines in order, from after line `after`."""
        return await self.db.fetch(
            "SELECT line, custom_id, status, status_code, result FROM batch_lines "
            "WHERE batch_id = ? AND line > ? ORDER BY line LIMIT ?",
            batch_id, after, limit,
        )  # fmt: skip
