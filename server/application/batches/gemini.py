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


def input_file(body: Any) -> str | None:
    """The uploaded file a batch reads (`batch.inputConfig.fileName`), None for inline
    requests."""
    batch = body.get("batch") if isinstance(body, dict) else None
    config = batch.get("inputConfig") if isinstance(batch, dict) else None
    name = config.get("fileName") if isinstance(config, dict) else None
    if name is None:
        return None
    if not isinstance(name, str) or not name.startswith("files/"):
        raise InvalidArgument.for_field("batch.inputConfig.fileName", "must be files/{id}")
    return file_id(name)


def read_requests(model: str, body: Any, max_lines: int, max_line_bytes: int) -> lines.Input:
    """`batch.inputConfig.requests.requests[{request, metadata}]` as lines, each keyed by
    its metadata's `key` (or its place)."""
    batch = body.get("batch") if isinstance(body, dict) else None
    config = batch.get("inputConfig") if isinstance(batch, dict) else None
    if not isinstance(config, dict) or "requests" not in config:
        raise InvalidArgument.for_field(
            "batch.inputConfig.requests", "is required (or batch.inputConfig.fileName)"
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
        data += _line(model, str(key), one["request"])
    return lines.read(bytes(data), ENDPOINT, max_lines, max_line_bytes)


def read_file(model: str, data: bytes, max_lines: int, max_line_bytes: int) -> lines.Input:
    """An uploaded JSONL file of `{"key", "request"}` lines, as Gemini's batch mode
    reads one; a refusal names the line (from 1) and its field."""
    out = bytearray()
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(raw) > max_line_bytes:
            raise _refused(number, "", f"is longer than {max_line_bytes} bytes")
        try:
            item = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _refused(number, "", "is not JSON") from None
        if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
            raise _refused(number, "request", "is required (an object)")
        key = item.get("key")
        if not isinstance(key, str) or not key:
            raise _refused(number, "key", "is required (a string)")
        out += _line(model, key, item["request"])
    if not out:
        raise InvalidArgument.for_field("batch.inputConfig.fileName", "the file has no lines")
    try:
        return lines.read(bytes(out), ENDPOINT, max_lines, max_line_bytes)
    except InvalidArgument as refused:
        # Named as the file's own fields: `key`, `request...`.
        field = refused.metadata["field"]
        field = {"custom_id": "key", "input_file_id": ""}.get(
            field, field.replace("body", "request", 1)
        )
        raise _refused(int(refused.metadata["line"].removeprefix("line ")), field,
                       refused.metadata["why"]) from None  # fmt: skip


def _line(model: str, key: str, request: dict[str, Any]) -> bytes:
    body = {k: v for k, v in request.items() if k != "model"}
    return (
        orjson.dumps({"custom_id": key, "url": ENDPOINT, "body": {**body, "model": model}}) + b"\n"
    )


def _refused(number: int, field: str, why: str) -> InvalidArgument:
    """A refusal of a line of the input file: `line N: field why`, the field named as
    the file names it (`key`, `request.contents`)."""
    where = f"line {number}"
    name = f"{where}: {field}" if field else where
    return InvalidArgument(
        f"batch.inputConfig.fileName: {name} {why}",
        {"field": field or "batch.inputConfig.fileName", "line": where, "why": why},
    )


def file_name(file_id: str) -> str:
    """A file's Gemini name: `files/` and its id without the dash (Gemini's names are
    lowercase letters and digits, and the SDK reads them so from a file's URI)."""
    return "files/" + file_id.replace("-", "", 1)


def file_id(name: str) -> str:
    """The gateway's id of a Gemini file name."""
    bare = name.removeprefix("files/")
    return bare if bare.startswith("file-") else bare.replace("file", "file-", 1)


def output_line(row: Row) -> bytes:
    """One line of a file batch's responses file: the line's key and its response, or
    its error."""
    found = _inlined(row)
    found["key"] = found.pop("metadata")["key"]
    return orjson.dumps(found) + b"\n"


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
    if done and row["output_file_id"]:
        metadata["output"] = {"responsesFile": file_name(row["output_file_id"])}
    elif done:
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
