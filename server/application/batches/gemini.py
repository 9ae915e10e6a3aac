"""Gemini's batch mode as the Gemini API writes it: `batches/{id}` operations whose
metadata carries the state (`BATCH_STATE_*`), the counts and, once it ended, the inlined
responses in the requests' order."""

from __future__ import annotations

from typing import Any

import orjson

from server.application.batches import lines
from server.application.batches.anthropic import rfc3339
from server.base.errors import InvalidArgument
from server.storage.batches import BatchStore
from server.storage.db import Row

# The RPC a line runs: a live call of this path, its model in the path.
ENDPOINT = "/v1beta/models/{model=**}:generateContent"
TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"
STATES = {"validating": "BATCH_STATE_PENDING", "in_progress": "BATCH_STATE_RUNNING",
          "finalizing": "BATCH_STATE_RUNNING", "cancelling": "BATCH_STATE_RUNNING",
          "completed": "BATCH_STATE_SUCCEEDED", "failed": "BATCH_STATE_FAILED",
          "cancelled": "BATCH_STATE_CANCELLED", "expired": "BATCH_STATE_EXPIRED"}  # fmt: skip
ENDED = ("completed", "failed", "cancelled", "expired")


def read_requests(model: str, body: Any, max_lines: int, max_line_bytes: int) -> lines.Input:
    """`batch.inputConfig.requests.requests[{request, metadata}]` as lines, each keyed by
    its metadata's `key` (or its place)."""
    batch = body.get("batch") if isinstance(body, dict) else None
    config = batch.get("inputConfig") if isinstance(batch, dict) else None
    if not isinstance(config, dict) or "requests" not in config:
        raise InvalidArgument.for_field(
            "batch.inputConfig.requests", "is required (inline requests; files are not read)"
        )
    requests = (config.get("requests") or {}).get("requests")
    if not isinstance(requests, list) or not requests:
        raise InvalidArgument.for_field("batch.inputConfig.requests.requests", "is empty")
    data = bytearray()
    for i, one in enumerate(requests):
        if not isinstance(one, dict) or not isinstance(one.get("request"), dict):
            raise InvalidArgument.for_field(
                f"batch.inputConfig.requests.requests[{i}].request", "is required"
            )
        key = (one.get("metadata") or {}).get("key") or str(i)
        request = {k: v for k, v in one["request"].items() if k != "model"}
        line = {"custom_id": str(key), "url": ENDPOINT, "body": {**request, "model": model}}
        data += orjson.dumps(line) + b"\n"
    return lines.read(bytes(data), ENDPOINT, max_lines, max_line_bytes)


async def as_operation(store: BatchStore, row: Row) -> dict[str, Any]:
    counts = await store.counts(row["id"])
    name = f"batches/{row['id']}"
    ended_at = next((row[f"{s}_at"] for s in ENDED if row[f"{s}_at"]), None)
    metadata: dict[str, Any] = {
        "@type": TYPE, "name": name, "model": f"models/{row['model']}",
        "displayName": orjson.loads(row["metadata"]).get("display_name", ""),
        "state": STATES[row["status"]], "createTime": rfc3339(row["created_at"]),
        "updateTime": rfc3339(ended_at or row["in_progress_at"] or row["created_at"]),
        "batchStats": {
            "requestCount": str(counts.total),
            "successfulRequestCount": str(counts.completed),
            "failedRequestCount": str(counts.failed),
            "pendingRequestCount": str(counts.pending),
        },
    }  # fmt: skip
    if ended_at is not None:
        metadata["endTime"] = rfc3339(ended_at)
    done = row["status"] in ENDED
    if done:
        responses: list[dict[str, Any]] = []
        after = -1
        while more := await store.lines(row["id"], after, 1000):
            after = more[-1]["line"]
            responses.extend(_inlined(r) for r in more)
        metadata["output"] = {"inlinedResponses": {"inlinedResponses": responses}}
    return {"name": name, "metadata": metadata, "done": done}


def _inlined(row: Row) -> dict[str, Any]:
    found: dict[str, Any] = {"metadata": {"key": row["custom_id"]}}
    answer = orjson.loads(row["result"]) if row["result"] else None
    if row["status"] == "succeeded" and answer is not None:
        found["response"] = answer["body"]
    else:
        code = int(answer["status_code"]) if answer else 499
        message = (
            ((answer or {}).get("body") or {})
            .get("error", {})
            .get("message", f"the request was not run: the batch {row['status']}")
        )
        found["error"] = {"code": code, "message": message}
    return found
