"""Gemini's Files API as far as its batch mode needs it: a resumable upload (a start
that declares the size and answers an upload URL, then the bytes in order, the last
chunk finalizing), get, list, delete, and the download of a batch's responses file.

A file is the same file as OpenAI's Files API keeps (owned by its key, bounded by
`batches.max_file_bytes`), shown as Gemini writes one. The upload URL is the upload's
capability, as Google's are (its chunks carry no key): a long random id, held by the
instance that began the upload until it ends or `UPLOAD_TTL_S` passes.
"""

from __future__ import annotations

import mimetypes
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from server.application.batches.anthropic import rfc3339
from server.application.batches.files import Files, Upload
from server.application.batches.gemini import file_name
from server.base.caller import Principal
from server.base.errors import InvalidArgument, NotFound, TooLarge
from server.storage.files import FileRecord

# Hours an uploaded file is kept, as Gemini keeps one.
KEPT_S = 48 * 3600
# Seconds an upload begun and not finished is held.
UPLOAD_TTL_S = 3600.0


@dataclass
class Pending:
    upload: Upload
    size: int
    display_name: str
    began: float


def as_file(record: FileRecord, base_url: str) -> dict[str, Any]:
    """A file as the Gemini API writes one; a generated file (a batch's responses) may
    be downloaded."""
    name = file_name(record.id)
    generated = record.purpose == "batch_output"
    mime = "application/jsonl" if record.filename.endswith(".jsonl") or generated else (
        mimetypes.guess_type(record.filename)[0] or "application/octet-stream"
    )  # fmt: skip
    found: dict[str, Any] = {
        "name": name, "displayName": record.filename, "mimeType": mime,
        "sizeBytes": str(record.bytes), "createTime": rfc3339(record.created_at),
        "updateTime": rfc3339(record.created_at), "uri": f"{base_url}/v1beta/{name}",
        "state": "ACTIVE", "source": "GENERATED" if generated else "UPLOADED",
    }  # fmt: skip
    if record.expires_at is not None:
        found["expirationTime"] = rfc3339(record.expires_at)
    if generated:
        found["downloadUri"] = f"{base_url}/v1beta/{name}:download?alt=media"
    return found


class GeminiUploads:
    """Resumable uploads under way on this instance."""

    def __init__(self, files: Files) -> None:
        self.files = files
        self._pending: dict[str, Pending] = {}

    async def start(self, principal: Principal, size: int, display_name: str) -> str:
        """Begins an upload of `size` bytes; returns its upload id."""
        limit = self.files.live.current.config.batches.max_file_bytes
        if size > limit:
            raise TooLarge(
                f"X-Goog-Upload-Header-Content-Length: the file exceeds {limit} bytes",
                {"field": "X-Goog-Upload-Header-Content-Length"},
            )
        await self._forget_stale()
        upload_id = os.urandom(24).hex()
        self._pending[upload_id] = Pending(
            self.files.begin(principal), size, display_name, time.monotonic()
        )
        return upload_id

    async def chunk(
        self, upload_id: str, offset: int, data: AsyncIterator[bytes], finalize: bool
    ) -> FileRecord | None:
        """Writes one chunk at `offset` (the bytes so far) as it arrives; the last one
        finishes the file, which is returned. A refused chunk ends the upload."""
        pending = self._pending.pop(upload_id, None)
        if pending is None:
            raise NotFound("no upload under way by that id", {"field": "upload_id"})
        upload = pending.upload
        try:
            if offset != upload.size:
                raise InvalidArgument.for_field(
                    "X-Goog-Upload-Offset", f"is {offset}, the upload holds {upload.size} bytes"
                )
            async for piece in data:
                if upload.size + len(piece) > pending.size:
                    raise InvalidArgument.for_field(
                        "X-Goog-Upload-Header-Content-Length",
                        f"the bytes sent pass the {pending.size} declared",
                    )
                await upload.write(piece)
            if finalize and upload.size != pending.size:
                raise InvalidArgument.for_field(
                    "X-Goog-Upload-Command",
                    f"finalize after {upload.size} of the {pending.size} bytes declared",
                )
        except BaseException:
            await upload.discard()
            raise
        if not finalize:
            self._pending[upload_id] = pending
            return None
        return await upload.finish("batch", pending.display_name, KEPT_S)

    async def _forget_stale(self) -> None:
        now = time.monotonic()
        for upload_id, pending in list(self._pending.items()):
            if now - pending.began > UPLOAD_TTL_S:
                del self._pending[upload_id]
                await pending.upload.discard()
