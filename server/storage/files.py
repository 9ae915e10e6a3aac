"""Uploaded files: their records in the database, their bytes behind `Blobs`.

`Blobs` is the one interface the bytes go through (put, read, delete by id). `DiskBlobs`,
the default, keeps each file in a folder under the gateway's state folder; instances that
share one database share that folder (a network volume), or a store of objects behind
the same three methods. A file is written to a temporary name and renamed when whole, so
no reader ever sees half of one.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from server.storage.db import Database

# Ids are the gateway's own (`file-` and hex): nothing else ever names a path.
_ID = re.compile(r"^file-[0-9a-f]{24,64}$")
# Bytes read from a file per step.
CHUNK = 256 * 1024


class Blobs(Protocol):
    """Where files' bytes live."""

    def writer(self, file_id: str) -> BlobWriter: ...

    def read(self, file_id: str) -> AsyncIterator[bytes]: ...

    async def delete(self, file_id: str) -> None: ...


class BlobWriter(Protocol):
    """A file being written: chunks in order, then `commit` (or `discard`)."""

    async def write(self, chunk: bytes) -> None: ...

    async def commit(self) -> None: ...

    async def discard(self) -> None: ...


class DiskBlobs:
    """Files in a folder, one per id."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, file_id: str) -> Path:
        if not _ID.match(file_id):
            raise ValueError(f"not a file id: {file_id!r}")
        return self.folder / file_id

    def writer(self, file_id: str) -> DiskWriter:
        return DiskWriter(self._path(file_id))

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        handle = await asyncio.to_thread(open, self._path(file_id), "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                yield chunk
        finally:
            handle.close()

    async def delete(self, file_id: str) -> None:
        await asyncio.to_thread(self._path(file_id).unlink, True)


class DiskWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        self._handle: IO[bytes] | None = None

    async def write(self, chunk: bytes) -> None:
        if self._handle is None:
            self._handle = await asyncio.to_thread(self._open)
        await asyncio.to_thread(self._handle.write, chunk)

    def _open(self) -> IO[bytes]:
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        return open(self.partial, "wb")

    async def commit(self) -> None:
        if self._handle is None:
            self._handle = await asyncio.to_thread(self._open)
        handle = self._handle
        await asyncio.to_thread(_seal, handle, self.partial, self.path)

    async def discard(self) -> None:
        if self._handle is not None:
            self._handle.close()
        await asyncio.to_thread(self.partial.unlink, True)


def _seal(handle: IO[bytes], partial: Path, path: Path) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
    os.replace(partial, path)


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: str
    key_id: str
    purpose: str
    filename: str
    bytes: int
    created_at: float
    expires_at: float | None


class FileRecords:
    """The files table: who owns which file, how big it is, when it expires."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, record: FileRecord) -> None:
        await self.db.execute(
            "INSERT INTO files (id, key_id, purpose, filename, bytes, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            record.id, record.key_id, record.purpose, record.filename, record.bytes,
            record.created_at, record.expires_at,
        )  # fmt: skip

    async def get(self, key_id: str, file_id: str) -> FileRecord | None:
        """The key's file, None when it has none by that id (or it expired)."""
        row = await self.db.fetchrow(
            "SELECT * FROM files WHERE id = ? AND key_id = ? "
            "AND (expires_at IS NULL OR expires_at > ?)",
            file_id, key_id, time.time(),
        )  # fmt: skip
        return FileRecord(**row) if row else None

    async def page(
        self, key_id: str, purpose: str | None, limit: int, after: str | None, ascending: bool
    ) -> list[FileRecord]:
        """The key's files, newest first (or oldest), from after the file `after`."""
        where = ["key_id = ?", "(expires_at IS NULL OR expires_at > ?)"]
        args: list[object] = [key_id, time.time()]
        if purpose:
            where.append("purpose = ?")
            args.append(purpose)
        if after:
            mark = await self.get(key_id, after)
            if mark is not None:
                where.append(f"(created_at, id) {'>' if ascending else '<'} (?, ?)")
                args += [mark.created_at, mark.id]
        order = "ASC" if ascending else "DESC"
        rows = await self.db.fetch(
            f"SELECT * FROM files WHERE {' AND '.join(where)} "
            f"ORDER BY created_at {order}, id {order} LIMIT ?",
            *args, limit,
        )  # fmt: skip
        return [FileRecord(**r) for r in rows]

    async def delete(self, key_id: str, file_id: str) -> bool:
        found = await self.get(key_id, file_id)
        if found is None:
            return False
        await self.db.execute("DELETE FROM files WHERE id = ? AND key_id = ?", file_id, key_id)
        return True

    async def expired(self, now: float, limit: int = 500) -> list[str]:
        rows = await self.db.fetch(
            "SELECT id FROM files WHERE expires_at IS NOT NULL AND expires_at <= ? LIMIT ?",
            now, limit,
        )  # fmt: skip
        return [r["id"] for r in rows]

    async def forget(self, file_id: str) -> None:
        await self.db.execute("DELETE FROM files WHERE id = ?", file_id)
