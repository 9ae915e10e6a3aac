"""A strict fake of OpenAI's Files and Batch APIs, on loopback: what a gateway that hands
a batch over must get right.

It refuses what the real API refuses: a wrong key, a path it does not serve, an upload
without `purpose: batch` or whose lines are not `{custom_id, method: POST, url, body}`
of one endpoint and the upstream's model, a batch of an unknown file, another endpoint
or window, or an unknown field. Each look at a batch moves it one step through
validating -> in_progress -> finalizing -> completed, and its output file appears one
look after `completed` (as the real API may report `completed` before naming it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.upstreams.checks import KEY

MODEL = "gpt-fake"
ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses")
STEPS = ("validating", "in_progress", "finalizing", "completed")
USAGE = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
BATCH_FIELDS = {"input_file_id", "endpoint", "completion_window", "metadata"}


def _error(status: int, message: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": "invalid_request_error", "param": param,
                   "code": None}}, status_code=status,
    )  # fmt: skip


@dataclass
class FakeBatchAPI:
    # custom_ids whose line the fake answers with a 400 (in the error file).
    refuse: set[str] = field(default_factory=set)
    # While set, a batch stays where it is however often it is looked at.
    paused: bool = False
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Every request by (method, path), and every one refused with why.
    seen: list[tuple[str, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    port: int = 0
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> Starlette:
        routes = [
            Route("/v1/files", self.upload, methods=["POST"]),
            Route("/v1/files/{file_id}/content", self.content, methods=["GET"]),
            Route("/v1/batches", self.create, methods=["POST"]),
            Route("/v1/batches/{batch_id}", self.retrieve, methods=["GET"]),
            Route("/v1/batches/{batch_id}/cancel", self.cancel, methods=["POST"]),
        ]
        app = Starlette(routes=routes)

        async def strict(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            request = Request(scope, receive)
            self.seen.append((request.method, request.url.path))
            if request.headers.get("authorization") != f"Bearer {KEY}":
                self.refused.append(f"key on {request.url.path}")
                return await _error(401, "Incorrect API key provided")(scope, receive, send)
            served = {r.path for r in routes}
            if not any(r.matches(scope)[0].name == "FULL" for r in routes):
                self.refused.append(f"path {request.method} {request.url.path}")
                answer = _error(404, f"no route {request.url.path} ({sorted(served)})")
                return await answer(scope, receive, send)
            await app(scope, receive, send)

        return strict  # type: ignore[return-value]

    def _refuse(self, why: str, param: str | None = None) -> JSONResponse:
        self.refused.append(why)
        return _error(400, why, param)

    async def upload(self, request: Request) -> Response:
        form = await request.form()
        if form.get("purpose") != "batch":
            return self._refuse("purpose must be batch", "purpose")
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            return self._refuse("file is required", "file")
        data = await upload.read()
        urls = set()
        for number, raw in enumerate(data.splitlines(), start=1):
            line = json.loads(raw)
            if set(line) != {"custom_id", "method", "url", "body"} or line["method"] != "POST":
                return self._refuse(f"line {number}: not a batch request line")
            if line["url"] not in ENDPOINTS or line["body"].get("model") != MODEL:
                return self._refuse(f"line {number}: url or model")
            if line["body"].get("stream"):
                return self._refuse(f"line {number}: stream")
            urls.add(line["url"])
        if len(urls) != 1:
            return self._refuse("the lines must share one url")
        file_id = f"file-up{next(self._ids)}"
        self.files[file_id] = data
        return JSONResponse({"id": file_id, "object": "file", "bytes": len(data),
                             "created_at": 1, "filename": upload.filename, "purpose": "batch"})  # fmt: skip

    async def create(self, request: Request) -> Response:
        body = await request.json()
        if unknown := set(body) - BATCH_FIELDS:
            return self._refuse(f"Unrecognized request argument supplied: {sorted(unknown)}")
        data = self.files.get(body.get("input_file_id", ""))
        if data is None:
            return self._refuse("no such input file", "input_file_id")
        first = json.loads(data.splitlines()[0])
        if body.get("endpoint") != first["url"] or body.get("completion_window") != "24h":
            return self._refuse("endpoint or completion_window", "endpoint")
        batch_id = f"batch_up{next(self._ids)}"
        self.batches[batch_id] = {
            "id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
            "input_file_id": body["input_file_id"], "completion_window": "24h",
            "status": "validating", "output_file_id": None, "error_file_id": None,
            "created_at": 1, "request_counts": {"total": len(data.splitlines()),
                                                "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }  # fmt: skip
        return JSONResponse(self.batches[batch_id])

    async def retrieve(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "No batch found")
        self._step(batch)
        return JSONResponse(batch)

    async def cancel(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "No batch found")
        if batch["status"] in ("validating", "in_progress"):
            batch["status"] = "cancelling"
        return JSONResponse(batch)

    async def content(self, request: Request) -> Response:
        data = self.files.get(request.path_params["file_id"])
        if data is None:
            return _error(404, "No such File object")
        return Response(data, media_type="application/octet-stream")

    def _step(self, batch: dict[str, Any]) -> None:
        """One look moves the batch one step; the output arrives after `completed`."""
        if self.paused:
            return
        status = batch["status"]
        if status == "cancelling":
            batch["status"] = "cancelled"
        elif status in STEPS[:-1]:
            batch["status"] = STEPS[STEPS.index(status) + 1]
        elif status == "completed" and batch["output_file_id"] is None:
            self._results(batch)

    def _results(self, batch: dict[str, Any]) -> None:
        output, errors = [], []
        for raw in self.files[batch["input_file_id"]].splitlines():
            line = json.loads(raw)
            custom_id = line["custom_id"]
            if custom_id in self.refuse:
                body = {
                    "error": {"message": "refused by the fake", "type": "invalid_request_error"}
                }
                errors.append({"id": f"req_{custom_id}", "custom_id": custom_id, "error": None,
                               "response": {"status_code": 400, "request_id": "r",
                                            "body": body}})  # fmt: skip
                continue
            answer = {
                "id": f"chatcmpl-{custom_id}", "object": "chat.completion", "created": 1,
                "model": MODEL, "usage": USAGE,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"batch {custom_id}"}}],
            }  # fmt: skip
            output.append({"id": f"req_{custom_id}", "custom_id": custom_id, "error": None,
                           "response": {"status_code": 200, "request_id": "r", "body": answer}})  # fmt: skip
        for kind, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                file_id = f"file-out{next(self._ids)}"
                self.files[file_id] = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
                batch[kind] = file_id
        batch["request_counts"].update(completed=len(output), failed=len(errors))


@asynccontextmanager
async def serving_batches(**kwargs: Any) -> AsyncIterator[FakeBatchAPI]:
    fake = FakeBatchAPI(**kwargs)
    async with _served(fake.app()) as port:
        fake.port = port
        yield fake


ANTHROPIC_MODEL = "claude-fake"
ANTHROPIC_USAGE = {"input_tokens": 13, "output_tokens": 7}


@dataclass
class FakeMessageBatches:
    """A strict fake of Anthropic's Message Batches: `x-api-key` and
    `anthropic-version` on every request, `requests[{custom_id, params}]` whose params
    name the upstream's model with `max_tokens` and `messages`; a batch is
    `in_progress` for two looks, then `ended`, and only then has a `results_url`."""

    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seen: list[tuple[str, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    looks: dict[str, int] = field(default_factory=dict)
    port: int = 0
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> Any:
        routes = [
            Route("/v1/messages/batches", self.create, methods=["POST"]),
            Route("/v1/messages/batches/{batch_id}", self.retrieve, methods=["GET"]),
            Route("/v1/messages/batches/{batch_id}/cancel", self.cancel, methods=["POST"]),
            Route("/v1/messages/batches/{batch_id}/results", self.results, methods=["GET"]),
        ]
        app = Starlette(routes=routes)

        async def strict(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            request = Request(scope, receive)
            self.seen.append((request.method, request.url.path))
            headers = request.headers
            if headers.get("x-api-key") != KEY or not headers.get("anthropic-version"):
                self.refused.append(f"key or version on {request.url.path}")
                return await _error(401, "invalid x-api-key")(scope, receive, send)
            if not any(r.matches(scope)[0].name == "FULL" for r in routes):
                self.refused.append(f"path {request.method} {request.url.path}")
                return await _error(404, "not found")(scope, receive, send)
            await app(scope, receive, send)

        return strict

    async def create(self, request: Request) -> Response:
        body = await request.json()
        requests = body.get("requests")
        if set(body) != {"requests"} or not isinstance(requests, list) or not requests:
            self.refused.append("requests")
            return _error(400, "requests: is required")
        for i, one in enumerate(requests):
            params = one.get("params") or {}
            if set(one) != {"custom_id", "params"} or params.get("model") != ANTHROPIC_MODEL:
                self.refused.append(f"requests[{i}]")
                return _error(400, f"requests[{i}]: custom_id and params of {ANTHROPIC_MODEL}")
            if not isinstance(params.get("max_tokens"), int) or "messages" not in params:
                self.refused.append(f"requests[{i}].params")
                return _error(400, f"requests[{i}].params: max_tokens and messages")
        batch_id = f"msgbatch_up{next(self._ids)}"
        self.requests[batch_id] = requests
        self.batches[batch_id] = {
            "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0,
                               "canceled": 0, "expired": 0},
            "ended_at": None, "created_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-02T00:00:00Z", "cancel_initiated_at": None,
            "results_url": None,
        }  # fmt: skip
        return JSONResponse(self.batches[batch_id])

    async def retrieve(self, request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        batch = self.batches.get(batch_id)
        if batch is None:
            return _error(404, "not found")
        self.looks[batch_id] = self.looks.get(batch_id, 0) + 1
        if self.looks[batch_id] >= 3 and batch["processing_status"] != "ended":
            batch["processing_status"] = "ended"
            batch["ended_at"] = "2026-01-01T00:01:00Z"
            batch["results_url"] = f"{self.url}/v1/messages/batches/{batch_id}/results"
        return JSONResponse(batch)

    async def cancel(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "not found")
        batch["cancel_initiated_at"] = "2026-01-01T00:00:30Z"
        batch["processing_status"] = "canceling"
        return JSONResponse(batch)

    async def results(self, request: Request) -> Response:
        batch_id = request.path_params["batch_id"]
        batch = self.batches.get(batch_id)
        if batch is None or batch["processing_status"] != "ended":
            self.refused.append("results before ended")
            return _error(404, "results are not ready")
        lines = []
        for one in self.requests[batch_id]:
            custom_id = one["custom_id"]
            message = {
                "id": f"msg_{custom_id}", "type": "message", "role": "assistant",
                "model": ANTHROPIC_MODEL, "stop_reason": "end_turn", "stop_sequence": None,
                "content": [{"type": "text", "text": f"batch {custom_id}"}],
                "usage": ANTHROPIC_USAGE,
            }  # fmt: skip
            lines.append({"custom_id": custom_id,
                          "result": {"type": "succeeded", "message": message}})  # fmt: skip
        return Response(b"".join(json.dumps(x).encode() + b"\n" for x in lines),
                        media_type="application/binary")  # fmt: skip


@asynccontextmanager
async def serving_message_batches() -> AsyncIterator[FakeMessageBatches]:
    fake = FakeMessageBatches()
    async with _served(fake.app()) as port:
        fake.port = port
        yield fake


@asynccontextmanager
async def _served(app: Any) -> AsyncIterator[int]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                await task
            await asyncio.sleep(0.005)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        server.force_exit = True
        await task
