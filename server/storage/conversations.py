"""Conversations of the Conversations API: a head (id, owner, creation time, metadata)
and its items in order, each owned by the key that created it.

Items are kept in OpenAI's JSON shape, one row each, ordered by a sequence the database
assigns, so concurrent appends never collide. Every read and write names the owning
key: for any other key a conversation does not exist. Without a database
(`build_gateway`), `MemoryConversations` keeps them in a bounded dictionary instead.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import orjson

from server.storage.db import Database, Executor

Item = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    key_id: str
    created_at: float
    metadata: dict[str, str] = field(default_factory=dict)


class ConversationStore(Protocol):
    async def create(self, conversation: Conversation, items: Sequence[Item]) -> None: ...

    async def get(self, conversation_id: str, key_id: str) -> Conversation | None:
        """The conversation when it exists and is the key's."""
        ...

    async def set_metadata(
        self, conversation_id: str, key_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        """Replaces the key's conversation's metadata; the conversation, or None."""
        ...

    async def delete(self, conversation_id: str, key_id: str) -> bool:
        """Deletes the key's conversation and its items; whether there was one."""
        ...

    async def items(self, conversation_id: str, key_id: str) -> list[Item] | None:
        """The key's conversation's items, oldest first; None without the conversation."""
        ...

    async def append(self, conversation_id: str, key_id: str, items: Sequence[Item]) -> bool:
        """Adds items at the end of the key's conversation; whether there was one."""
        ...

    async def delete_item(self, conversation_id: str, key_id: str, item_id: str) -> bool:
        """Deletes one item of the key's conversation; whether there was one."""
        ...


class DatabaseConversations:
    """Conversations in the gateway's database (SQLite or PostgreSQL)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, conversation: Conversation, items: Sequence[Item]) -> None:
        async with self.db.transaction() as tx:
            await tx.execute(
                "INSERT INTO conversations (id, key_id, created_at, metadata) VALUES (?, ?, ?, ?)",
                conversation.id, conversation.key_id, conversation.created_at,
                orjson.dumps(conversation.metadata).decode(),
            )  # fmt: skip
            await _insert(tx, conversation.id, items)

    async def get(self, conversation_id: str, key_id: str) -> Conversation | None:
        row = await self.db.fetchrow(
            "SELECT * FROM conversations WHERE id = ? AND key_id = ?", conversation_id, key_id
        )
        if row is None:
            return None
        return Conversation(
            row["id"], row["key_id"], float(row["created_at"]), orjson.loads(row["metadata"])
        )

    async def set_metadata(
        self, conversation_id: str, key_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        await self.db.execute(
            "UPDATE conversations SET metadata = ? WHERE id = ? AND key_id = ?",
            orjson.dumps(metadata).decode(), conversation_id, key_id,
        )  # fmt: skip
        return await self.get(conversation_id, key_id)

    async def delete(self, conversation_id: str, key_id: str) -> bool:
        async with self.db.transaction() as tx:
            if not await _owned(tx, conversation_id, key_id):
                return False
            await tx.execute(
                "DELETE FROM conversation_items WHERE conversation_id = ?", conversation_id
            )
            await tx.execute("DELETE FROM conversations WHERE id = ?", conversation_id)
        return True

    async def items(self, conversation_id: str, key_id: str) -> list[Item] | None:
        if await self.get(conversation_id, key_id) is None:
            return None
        rows = await self.db.fetch(
            "SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY seq",
            conversation_id,
        )
        return [orjson.loads(row["item"]) for row in rows]

    async def append(self, conversation_id: str, key_id: str, items: Sequence[Item]) -> bool:
        async with self.db.transaction() as tx:
            if not await _owned(tx, conversation_id, key_id):
                return False
            await _insert(tx, conversation_id, items)
        return True

    async def delete_item(self, conversation_id: str, key_id: str, item_id: str) -> bool:
        async with self.db.transaction() as tx:
            if not await _owned(tx, conversation_id, key_id):
                return False
            found = await tx.fetch(
                "SELECT seq FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
                conversation_id, item_id,
            )  # fmt: skip
            await tx.execute(
                "DELETE FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
                conversation_id, item_id,
            )  # fmt: skip
        return bool(found)


async def _owned(tx: Executor, conversation_id: str, key_id: str) -> bool:
    rows = await tx.fetch(
        "SELECT id FROM conversations WHERE id = ? AND key_id = ?", conversation_id, key_id
    )
    return bool(rows)


async def _insert(tx: Executor, conversation_id: str, items: Sequence[Item]) -> None:
    for item in items:
        await tx.execute(
            "INSERT INTO conversation_items (conversation_id, item_id, item) VALUES (?, ?, ?)",
            conversation_id, str(item.get("id", "")), orjson.dumps(item).decode(),
        )  # fmt: skip


class MemoryConversations:
    """Conversations in memory, the newest `capacity` of them (no database)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[str, tuple[Conversation, list[Item]]] = OrderedDict()

    def _find(self, conversation_id: str, key_id: str) -> tuple[Conversation, list[Item]] | None:
        row = self._rows.get(conversation_id)
        return row if row is not None and row[0].key_id == key_id else None

    async def create(self, conversation: Conversation, items: Sequence[Item]) -> None:
        self._rows[conversation.id] = (conversation, [dict(i) for i in items])
        while len(self._rows) > self.capacity:
            self._rows.popitem(last=False)

    async def get(self, conversation_id: str, key_id: str) -> Conversation | None:
        row = self._find(conversation_id, key_id)
        return row[0] if row is not None else None

    async def set_metadata(
        self, conversation_id: str, key_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        row = self._find(conversation_id, key_id)
        if row is None:
            return None
        updated = replace(row[0], metadata=dict(metadata))
        self._rows[conversation_id] = (updated, row[1])
        return updated

    async def delete(self, conversation_id: str, key_id: str) -> bool:
        if self._find(conversation_id, key_id) is None:
            return False
        del self._rows[conversation_id]
        return True

    async def items(self, conversation_id: str, key_id: str) -> list[Item] | None:
        row = self._find(conversation_id, key_id)
        return [dict(i) for i in row[1]] if row is not None else None

    async def append(self, conversation_id: str, key_id: str, items: Sequence[Item]) -> bool:
        row = self._find(conversation_id, key_id)
        if row is None:
            return False
        row[1].extend(dict(i) for i in items)
        return True

    async def delete_item(self, conversation_id: str, key_id: str, item_id: str) -> bool:
        row = self._find(conversation_id, key_id)
        if row is None:
            return False
        kept = [i for i in row[1] if i.get("id") != item_id]
        found = len(kept) < len(row[1])
        row[1][:] = kept
        return found
