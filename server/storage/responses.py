"""Stored responses of the Responses API: kept for retrieval, listing of their input
items and continuation by `previous_response_id`, each owned by the key that made it.

A row holds the response (its proto, serialized), its own input items and the whole
conversation it ends (earlier context, its input, its output), so a continuation reads
one row. Rows expire after the configured retention; reads skip expired rows and
`delete_expired` removes them. Without a database (`build_gateway`), `MemoryResponses`
keeps them in a bounded dictionary instead.
"""

from __future__ import annotations

import base64
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from server.storage.db import Database

Item = dict[str, Any]


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    key_id: str
    created_at: float
    expires_at: float
    # The provider that answered, and its own id of the response when it stored one.
    provider: str
    upstream_id: str
    # The serialized `gateway.v1.Response`.
    response: bytes
    input_items: tuple[Item, ...]
    context: tuple[Item, ...]


class ResponseStore(Protocol):
    async def save(self, stored: StoredResponse) -> None: ...

    async def get(self, response_id: str, key_id: str) -> StoredResponse | None:
        """The response when it exists, is the key's and has not expired."""
        ...

    async def delete(self, response_id: str, key_id: str) -> bool:
        """Deletes the key's response; whether there was one."""
        ...

    async def delete_expired(self, now: float) -> int:
        """Deletes every response past its retention; how many."""
        ...


def _items(text: str) -> tuple[Item, ...]:
    return tuple(orjson.loads(text))


class DatabaseResponses:
    """Stored responses in the gateway's database (SQLite or PostgreSQL)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def save(self, stored: StoredResponse) -> None:
        await self.db.execute(
            "INSERT INTO stored_responses (id, key_id, created_at, expires_at, provider, "
            "upstream_id, response, input_items, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            stored.id, stored.key_id, stored.created_at, stored.expires_at, stored.provider,
            stored.upstream_id, base64.b64encode(stored.response).decode(),
            orjson.dumps(stored.input_items).decode(), orjson.dumps(stored.context).decode(),
        )  # fmt: skip

    async def get(self, response_id: str, key_id: str) -> StoredResponse | None:
        row = await self.db.fetchrow(
            "SELECT * FROM stored_responses WHERE id = ? AND key_id = ? AND expires_at > ?",
            response_id, key_id, time.time(),
        )  # fmt: skip
        if row is None:
            return None
        return StoredResponse(
            row["id"], row["key_id"], float(row["created_at"]), float(row["expires_at"]),
            row["provider"], row["upstream_id"], base64.b64decode(row["response"]),
            _items(row["input_items"]), _items(row["context"]),
        )  # fmt: skip

    async def delete(self, response_id: str, key_id: str) -> bool:
        async with self.db.transaction() as tx:
            rows = await tx.fetch(
                "SELECT id FROM stored_responses WHERE id = ? AND key_id = ? AND expires_at > ?",
                response_id, key_id, time.time(),
            )  # fmt: skip
            await tx.execute(
                "DELETE FROM stored_responses WHERE id = ? AND key_id = ?", response_id, key_id
            )
        return bool(rows)

    async def delete_expired(self, now: float) -> int:
        async with self.db.transaction() as tx:
            rows = await tx.fetch(
                "SELECT COUNT(*) AS n FROM stored_responses WHERE expires_at <= ?", now
            )
            await tx.execute("DELETE FROM stored_responses WHERE expires_at <= ?", now)
        return int(rows[0]["n"]) if rows else 0


class MemoryResponses:
    """Stored responses in memory, the newest `capacity` of them (no database)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[str, StoredResponse] = OrderedDict()

    async def save(self, stored: StoredResponse) -> None:
        self._rows[stored.id] = stored
        while len(self._rows) > self.capacity:
            self._rows.popitem(last=False)

    async def get(self, response_id: str, key_id: str) -> StoredResponse | None:
        row = self._rows.get(response_id)
        if row is None or row.key_id != key_id or row.expires_at <= time.time():
            return None
        return row

    async def delete(self, response_id: str, key_id: str) -> bool:
        if await self.get(response_id, key_id) is None:
            return False
        del self._rows[response_id]
        return True

    async def delete_expired(self, now: float) -> int:
        expired = [k for k, row in self._rows.items() if row.expires_at <= now]
        for key in expired:
            del self._rows[key]
        return len(expired)
