"""The Files API: a key's uploads, bounded in size, expiring, seen by that key alone
(another key's file is a 404, as one that does not exist)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from typing import Any

from server.accounting.accounts import Accounts
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.caller import Principal
from server.base.errors import InvalidArgument, NotFound, TooLarge
from server.storage.files import Blobs, BlobWriter, FileRecord, FileRecords

PURPOSES = ("batch", "batch_output", "user_data", "assistants", "fine-tune", "vision", "evals")
DAY_S = 86_400


def new_id() -> str:
    return f"file-{os.urandom(12).hex()}"


def as_object(record: FileRecord) -> dict[str, Any]:
    """A file as OpenAI writes it."""
    found: dict[str, Any] = {
        "id": record.id, "object": "file", "bytes": record.bytes,
        "created_at": int(record.created_at), "filename": record.filename,
        "purpose": record.purpose, "status": "processed",
    }  # fmt: skip
    if record.expires_at is not None:
        found["expires_at"] = int(record.expires_at)
    return found


class Files:
    def __init__(self, live: Live, accounts: Accounts, records: FileRecords, blobs: Blobs) -> None:
        self.live = live
        self.accounts = accounts
        self.records = records
        self.blobs = blobs

    async def caller(self, call: Call) -> Principal:
        return await self.accounts.check(call, "api", self.live.current.keys)

    def expiry(self, purpose: str, after_s: int | None) -> float | None:
        """When a new file of `purpose` expires: `after_s` from now when asked, else the
        configured days for batch files (and results); other files stay."""
        days = self.live.current.config.batches.file_expiry_days
        if after_s is not None:
            return time.time() + after_s
        return time.time() + days * DAY_S if purpose.startswith("batch") else None

    def begin(self, principal: Principal) -> Upload:
        """A new file of the key's, written as its bytes arrive (once), bounded."""
        limit = self.live.current.config.batches.max_file_bytes
        file_id = new_id()
        return Upload(self, principal, file_id, self.blobs.writer(file_id), limit)

    async def store(self, key_id: str, purpose: str, filename: str, data: bytes) -> FileRecord:
        """A file the gateway makes for a key (a batch's output)."""
        file_id = new_id()
        writer = self.blobs.writer(file_id)
        await writer.write(data)
        await writer.commit()
        record = FileRecord(
            file_id, key_id, purpose, filename, len(data), time.time(),
            self.expiry(purpose, None),
        )  # fmt: skip
        await self.records.add(record)
        return record

    async def get(self, principal: Principal, file_id: str) -> FileRecord:
        found = await self.records.get(principal.key_id, file_id)
        if found is None:
            raise NotFound(f"no file {file_id!r}", {"file_id": file_id})
        return found

    async def read(self, key_id: str, file_id: str) -> bytes:
        found = await self.records.get(key_id, file_id)
        if found is None:
            raise NotFound(f"no file {file_id!r}", {"file_id": file_id})
        return b"".join([chunk async for chunk in self.blobs.read(file_id)])

    def content(self, file_id: str) -> AsyncIterator[bytes]:
        return self.blobs.read(file_id)

    async def page(
        self, principal: Principal, purpose: str | None, limit: int, after: str | None,
        ascending: bool,
    ) -> list[FileRecord]:  # fmt: skip
        return await self.records.page(principal.key_id, purpose, limit, after, ascending)

    async def clean(self) -> int:
        """Deletes the files that have expired (their bytes first); returns how many."""
        gone = await self.records.expired(time.time())
        for file_id in gone:
            await self.blobs.delete(file_id)
            await self.records.forget(file_id)
        return len(gone)

    async def delete(self, principal: Principal, file_id: str) -> None:
        if not await self.records.delete(principal.key_id, file_id):
            raise NotFound(f"no file {file_id!r}", {"file_id": file_id})
        await self.blobs.delete(file_id)


class Upload:
    """A file being uploaded: `write` its chunks, then `finish` with what the form said
    of it (its fields may come after the file), or `discard`."""

    def __init__(
        self, files: Files, principal: Principal, file_id: str, writer: BlobWriter, limit: int
    ) -> None:
        self.files = files
        self.principal = principal
        self.file_id = file_id
        self.writer = writer
        self.limit = limit
        self.size = 0

    async def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise TooLarge(f"file: the file exceeds {self.limit} bytes", {"field": "file"})
        await self.writer.write(chunk)

    async def finish(self, purpose: str, filename: str, expires_after_s: int | None) -> FileRecord:
        if purpose not in PURPOSES:
            raise InvalidArgument.for_field("purpose", f"must be one of {', '.join(PURPOSES)}")
        await self.writer.commit()
        record = FileRecord(
            self.file_id, self.principal.key_id, purpose, filename or "upload.jsonl",
            self.size, time.time(), self.files.expiry(purpose, expires_after_s),
        )  # fmt: skip
        await self.files.records.add(record)
        return record

    async def discard(self) -> None:
        await self.writer.discard()
