"""Anthropic's Message Batches as they write them: `msgbatch_` ids, RFC 3339 times, a
processing status of three values, and results as JSONL of succeeded, errored, canceled
and expired requests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from server.storage.batches import BatchStore
from server.storage.db import Row

PROCESSING = {"cancelling": "canceling", "completed": "ended", "cancelled": "ended",
              "expired": "ended", "failed": "ended"}  # fmt: skip
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 529: "overloaded_error"}  # fmt: skip


def rfc3339(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


async def as_message_batch(store: BatchStore, row: Row, results_url: str) -> dict[str, Any]:
    counts = await store.counts(row["id"])
    status = PROCESSING.get(row["status"], "in_progress")
    ended_at = next(
        (row[f"{s}_at"] for s in ("completed", "cancelled", "expired", "failed") if row[f"{s}_at"]),
        None,
    )
    return {
        "id": row["id"], "type": "message_batch", "processing_status": status,
        "request_counts": {
            "processing": counts.pending, "succeeded": counts.completed,
            "errored": counts.failed, "canceled": counts.cancelled,
            "expired": counts.expired,
        },
        "ended_at": rfc3339(ended_at), "created_at": rfc3339(row["created_at"]),
        "expires_at": rfc3339(row["expires_at"]), "archived_at": None,
        "cancel_initiated_at": rfc3339(row["cancelling_at"]),
        "results_url": results_url if status == "ended" else None,
    }  # fmt: skip


def result_line(row: Row) -> bytes:
    """One line of a batch's results."""
    result: dict[str, Any]
    if row["status"] == "succeeded":
        result = {"type": "succeeded", "message": orjson.loads(row["result"])["body"]}
    elif row["status"] == "errored":
        answer = orjson.loads(row["result"])
        code = int(answer["status_code"])
        message = (answer.get("body") or {}).get("error", {}).get("message", "the request failed")
        kind = ERROR_TYPES.get(code, "api_error")
        result = {"type": "errored",
                  "error": {"type": "error", "error": {"type": kind, "message": message}}}  # fmt: skip
    else:
        result = {"type": "canceled" if row["status"] == "cancelled" else "expired"}
    return orjson.dumps({"custom_id": row["custom_id"], "result": result}) + b"\n"
