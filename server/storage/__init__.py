"""Durable state: API keys and the usage ledger, in SQLite or PostgreSQL.

db.py          one small async interface over aiosqlite and asyncpg
migrations.py  versioned schema, applied once at start-up (schema_migrations)
keys.py        the key store: hashed secrets, kinds, limits, expiry, revocation
usage.py       the usage ledger's table: batched inserts, spend and usage queries
feedback.py    feedback on earlier requests, and the rows routing trains on
responses.py   stored responses of the Responses API, owned by the key that made them
conversations.py  conversations of the Conversations API, owned by the key that made them
governance.py  organisations, teams, users and memberships: the levels above keys
audit.py       the audit log: administrative changes, chained by SHA-256
sessions.py    admin sign-in: users' sessions and the sign-ins under way
files.py       uploaded files: records owned by keys, bytes behind one small interface
batches.py     batch jobs and their lines, leased to the instance running them
"""

from __future__ import annotations

from dataclasses import dataclass

from server.base.config import StorageConfig
from server.storage.audit import AuditLog
from server.storage.batches import BatchStore
from server.storage.conversations import DatabaseConversations
from server.storage.db import Database, connect
from server.storage.feedback import FeedbackStore
from server.storage.files import FileRecords
from server.storage.governance import GovernanceStore
from server.storage.keys import KeyStore
from server.storage.migrations import migrate
from server.storage.responses import DatabaseResponses
from server.storage.sessions import SessionStore
from server.storage.usage import UsageStore


@dataclass
class Store:
    db: Database
    keys: KeyStore
    usage: UsageStore
    feedback: FeedbackStore
    responses: DatabaseResponses
    conversations: DatabaseConversations
    governance: GovernanceStore
    audit: AuditLog
    sessions: SessionStore
    files: FileRecords
    batches: BatchStore

    async def aclose(self) -> None:
        await self.db.close()


async def open_store(settings: StorageConfig) -> Store:
    """Connects to the configured database and brings its schema up to date."""
    db = await connect(settings.database_url, settings.sqlite_file, settings.pgbouncer)
    try:
        await migrate(db)
    except BaseException:
        await db.close()
        raise
    return Store(
        db, KeyStore(db), UsageStore(db), FeedbackStore(db), DatabaseResponses(db),
        DatabaseConversations(db), GovernanceStore(db), AuditLog(db), SessionStore(db),
        FileRecords(db), BatchStore(db),
    )  # fmt: skip


__all__ = ["Database", "FeedbackStore", "KeyStore", "Store", "UsageStore", "open_store"]
