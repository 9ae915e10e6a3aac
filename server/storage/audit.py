"""The audit log: every administrative change, append-only and tamper-evident.

Each event is chained to the one before: its `hash` is the SHA-256 of its canonical
JSON (sorted keys, no spaces, UTF-8), which holds the previous event's hash. Editing,
removing or inserting an event anywhere breaks the chain from there on, and `verify`
names the first event that no longer fits.

An event is written in the transaction of the change it records, which also holds
the audit lock (PostgreSQL's advisory lock; SQLite's one writer): two changes never
chain to the same event, and a change whose event cannot be written is not made.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any

from server.storage.db import Database, Executor

# An arbitrary constant naming the audit lock.
LOCK_ID = 0x6175_6474
GENESIS = "0" * 64
COLUMNS = (
    "seq", "ts", "actor", "actor_address", "action", "target", "before", "after",
    "request_id", "prev_hash", "hash",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditEvent:
    seq: int
    ts: float
    actor: str
    actor_address: str
    action: str
    target: str
    # The target before and after, as canonical JSON; None for a creation (before) or a
    # deletion (after).
    before: str | None
    after: str | None
    request_id: str
    prev_hash: str
    hash: str

    def chained(self) -> str:
        """The hash this event must carry: over every field but `hash` itself."""
        fields = asdict(self)
        del fields["hash"]
        return digest(fields)


def canonical(value: Any) -> str:
    """`value` as canonical JSON: sorted keys, no spaces, UTF-8 text unescaped."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(fields: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(fields).encode()).hexdigest()


def _event(row: dict[str, Any]) -> AuditEvent:
    return AuditEvent(**{c: row[c] for c in COLUMNS})


@dataclass(frozen=True, slots=True)
class AuditFilter:
    actor: str = ""
    action: str = ""  # a prefix: `team.` keeps every team change
    target: str = ""
    start: float | None = None
    end: float | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("actor", self.actor), ("target", self.target)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        if self.action:
            # A prefix, compared without LIKE's wildcards.
            where.append("substr(action, 1, ?) = ?")
            args += [len(self.action), self.action]
        if self.start is not None:
            where.append("ts >= ?")
            args.append(self.start)
        if self.end is not None:
            where.append("ts < ?")
            args.append(self.end)
        return where, args


class AuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    @asynccontextmanager
    async def change(self) -> AsyncIterator[Executor]:
        """The transaction of one change and its event, holding the audit lock."""
        async with self.db.transaction(lock_id=LOCK_ID) as tx:
            yield tx

    async def append(
        self,
        ex: Executor,
        *,
        ts: float,
        actor: str,
        actor_address: str,
        action: str,
        target: str,
        before: Any,
        after: Any,
        request_id: str,
    ) -> AuditEvent:
        """Appends one event after the last, in the change's transaction `ex`."""
        rows = await ex.fetch("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
        seq, prev = (int(rows[0]["seq"]) + 1, rows[0]["hash"]) if rows else (1, GENESIS)
        fields: dict[str, Any] = {
            "seq": seq, "ts": ts, "actor": actor, "actor_address": actor_address,
            "action": action, "target": target,
            "before": None if before is None else canonical(before),
            "after": None if after is None else canonical(after),
            "request_id": request_id, "prev_hash": prev,
        }  # fmt: skip
        event = AuditEvent(**fields, hash=digest(fields))
        await ex.execute(
            f"INSERT INTO audit_events ({', '.join(COLUMNS)}) "
            f"VALUES ({', '.join('?' for _ in COLUMNS)})",
            *(getattr(event, c) for c in COLUMNS),
        )
        return event

    async def page(self, match: AuditFilter, after_seq: int, limit: int) -> list[AuditEvent]:
        """Up to `limit` events the filter keeps, after `after_seq`, oldest first."""
        where, args = match.where()
        where.append("seq > ?")
        args.append(after_seq)
        rows = await self.db.fetch(
            f"SELECT {', '.join(COLUMNS)} FROM audit_events WHERE {' AND '.join(where)} "
            "ORDER BY seq LIMIT ?",
            *args, limit,
        )  # fmt: skip
        return [_event(r) for r in rows]

    async def seq_of(self, event_hash: str) -> int | None:
        """The seq of the event carrying `event_hash`, None when none does."""
        rows = await self.db.fetch("SELECT seq FROM audit_events WHERE hash = ?", event_hash)
        return int(rows[0]["seq"]) if rows else None

    async def verify(self, batch: int = 1000) -> tuple[int, AuditEvent | None, str]:
        """Walks the whole chain: (events checked, the first event that does not fit or
        None, why it does not)."""
        checked, prev, expected_seq = 0, GENESIS, 1
        while True:
            rows = await self.db.fetch(
                f"SELECT {', '.join(COLUMNS)} FROM audit_events WHERE seq >= ? "
                "ORDER BY seq LIMIT ?",
                expected_seq, batch,
            )  # fmt: skip
            if not rows:
                return checked, None, ""
            for row in rows:
                event = _event(row)
                if event.seq != expected_seq:
                    return checked, event, f"event {expected_seq} is missing"
                if event.prev_hash != prev:
                    return checked, event, "its prev_hash is not the previous event's hash"
                if event.chained() != event.hash:
                    return checked, event, "its content does not match its hash"
                checked += 1
                prev, expected_seq = event.hash, expected_seq + 1
