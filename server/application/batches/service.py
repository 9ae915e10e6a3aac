"""BatchService: the batch jobs over gRPC (and its REST binding, /v1/batch_jobs), the
same jobs as OpenAI's /v1/batches, the input sent as bytes or named as an uploaded file.

The jobs need the database (they outlive the process): the service is attached to them
once they exist (`attach`); until then, and without a database, it answers UNAVAILABLE.
"""

from __future__ import annotations

from typing import Any

import orjson
from gateway.v1 import batch_service_pb2 as pb

from server.application.batches.files import Files
from server.application.batches.jobs import Batches
from server.base.call import Call
from server.base.errors import InvalidArgument, StorageUnavailable


class BatchService:
    def __init__(self) -> None:
        self._batches: Batches | None = None
        self._files: Files | None = None

    def attach(self, batches: Batches, files: Files) -> None:
        self._batches, self._files = batches, files

    def _jobs(self) -> tuple[Batches, Files]:
        if self._batches is None or self._files is None:
            raise StorageUnavailable("batches need the gateway's database (storage)")
        return self._batches, self._files

    async def create_batch(
        self, request: pb.CreateBatchRequest, call: Call
    ) -> pb.CreateBatchResponse:
        batches, files = self._jobs()
        principal = await files.caller(call)
        which = request.WhichOneof("input")
        if which is None:
            raise InvalidArgument.for_field("input_jsonl", "or input_file_id is required")
        if not request.endpoint:
            raise InvalidArgument.for_field("endpoint", "is required")
        given: str | bytes = (
            request.input_jsonl if which == "input_jsonl" else request.input_file_id
        )
        row = await batches.create(
            principal, given, request.endpoint, request.completion_window or "24h",
            dict(request.metadata) or None,
        )  # fmt: skip
        return pb.CreateBatchResponse(batch=await _job(batches, row))

    async def get_batch(self, request: pb.GetBatchRequest, call: Call) -> pb.GetBatchResponse:
        batches, files = self._jobs()
        principal = await files.caller(call)
        row = await batches.get(principal, request.batch_id)
        found = pb.GetBatchResponse(batch=await _job(batches, row))
        if request.include_results:
            if row["output_file_id"]:
                found.output_jsonl = await files.read(principal.key_id, row["output_file_id"])
            if row["error_file_id"]:
                found.error_jsonl = await files.read(principal.key_id, row["error_file_id"])
        return found

    async def list_batches(
        self, request: pb.ListBatchesRequest, call: Call
    ) -> pb.ListBatchesResponse:
        batches, files = self._jobs()
        principal = await files.caller(call)
        limit = request.limit or 20
        if not 1 <= limit <= 100:
            raise InvalidArgument.for_field("limit", "must be from 1 to 100")
        rows = await batches.page(principal, limit + 1, request.after or None)
        return pb.ListBatchesResponse(
            batches=[await _job(batches, r) for r in rows[:limit]], has_more=len(rows) > limit
        )

    async def cancel_batch(
        self, request: pb.CancelBatchRequest, call: Call
    ) -> pb.CancelBatchResponse:
        batches, files = self._jobs()
        principal = await files.caller(call)
        row = await batches.cancel(principal, request.batch_id)
        return pb.CancelBatchResponse(batch=await _job(batches, row))


async def _job(batches: Batches, row: Any) -> pb.BatchJob:
    """A batch as the contract writes it: OpenAI's batch object, its usage with cost."""
    shown = await batches.as_object(row)
    usage = await batches.store.usage(row["id"])
    counts = shown["request_counts"]
    return pb.BatchJob(
        id=shown["id"], status=shown["status"], endpoint=shown["endpoint"],
        model=shown["model"], input_file_id=shown["input_file_id"],
        output_file_id=shown["output_file_id"] or "", error_file_id=shown["error_file_id"] or "",
        created_at=shown["created_at"], expires_at=shown["expires_at"],
        request_counts=pb.BatchRequestCounts(
            total=counts["total"], completed=counts["completed"], failed=counts["failed"]
        ),
        usage=pb.BatchUsage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens, cost_usd=usage.cost_usd,
        ),
        metadata=orjson.loads(row["metadata"]),
    )  # fmt: skip
