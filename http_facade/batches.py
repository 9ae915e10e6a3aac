"""`/v1/files` and `/v1/batches`: OpenAI's Files and Batch APIs over the core's batch
jobs (server/application/batches), and the runner that sends a batch's lines through
the same RPC handlers a live call of the line's endpoint reaches.

An upload is read from the multipart stream as it arrives, each part of the file
written once to the files folder, bounded by `batches.max_file_bytes` (413 past it).
"""

from __future__ import annotations

from typing import Any

import orjson
from google.protobuf.message import Message
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from http_facade import codec
from http_facade.bindings import Binding, bindings
from http_facade.context import exchange_for
from http_facade.endpoint import read_json_object
from http_facade.forms import boundary_of, read_form
from server.application.batches.anthropic import as_message_batch, result_line
from server.application.batches.files import Files, as_object
from server.application.batches.gemini import as_operation, file_id
from server.application.batches.gemini_files import GeminiUploads, as_file
from server.application.batches.jobs import Batches
from server.base.call import Call
from server.base.caller import Principal
from server.base.errors import InvalidArgument, TooLarge
from server.base.pipeline import RpcMethod


class BatchEndpoints:
    def __init__(self, files: Files, batches: Batches, max_body_bytes: int) -> None:
        self.files = files
        self.batches = batches
        self.max_body_bytes = max_body_bytes
        self.uploads = GeminiUploads(files)

    async def _caller(self, request: Request) -> Principal:
        exchange = exchange_for(request.scope)
        return await self.files.caller(Call(exchange.metadata, request_id=exchange.request_id))

    # -- files ---------------------------------------------------------------------

    async def upload(self, request: Request) -> Response:
        principal = await self._caller(request)
        boundary = boundary_of(request, "file")
        declared = request.headers.get("content-length", "")
        limit = self.files.live.current.config.batches.max_file_bytes
        if declared.isdigit() and int(declared) > limit + 64 * 1024:
            raise TooLarge(f"file: the file exceeds {limit} bytes", {"field": "file"})
        upload = self.files.begin(principal)
        try:
            fields = dict(await read_form(request, boundary, "file", upload.write))
            if "file" not in fields:
                raise InvalidArgument.for_field("file", "is required")
            expires = _expires_after(fields)
            record = await upload.finish(fields.get("purpose", ""), fields["file"], expires)
        except BaseException:
            await upload.discard()
            raise
        return _json(as_object(record))

    async def list_files(self, request: Request) -> Response:
        if _from_google(request):  # Gemini's list on its v1 path
            return await self.gemini_list_files(request)
        principal = await self._caller(request)
        query = request.query_params
        limit = _limit(query.get("limit"), 10_000)
        found = await self.files.page(
            principal, query.get("purpose"), limit + 1, query.get("after"),
            query.get("order", "desc") == "asc",
        )  # fmt: skip
        return _json(_page([as_object(r) for r in found], limit))

    async def get_file(self, request: Request) -> Response:
        """OpenAI's and Gemini's (v1) files share this path: a Google SDK's request is
        answered in Gemini's shape, and its `{name}:download` with the bytes."""
        if request.path_params["file_id"].endswith(":download"):
            return await self.gemini_download(request)
        if _from_google(request):
            return await self.gemini_get_file(request)
        principal = await self._caller(request)
        return _json(as_object(await self.files.get(principal, request.path_params["file_id"])))

    async def file_content(self, request: Request) -> Response:
        principal = await self._caller(request)
        record = await self.files.get(principal, request.path_params["file_id"])
        return StreamingResponse(
            self.files.content(record.id), media_type="application/octet-stream",
            headers={"content-length": str(record.bytes)},
        )  # fmt: skip

    async def delete_file(self, request: Request) -> Response:
        if _from_google(request):
            return await self.gemini_delete_file(request)
        principal = await self._caller(request)
        file_id = request.path_params["file_id"]
        await self.files.delete(principal, file_id)
        return _json({"id": file_id, "object": "file", "deleted": True})

    # -- Gemini's files ----------------------------------------------------------------

    async def gemini_upload(self, request: Request) -> Response:
        """A resumable upload's start (the key's) or one of its chunks (the upload id's)."""
        headers = request.headers
        command = [c.strip() for c in headers.get("x-goog-upload-command", "").split(",")]
        upload_id = request.query_params.get("upload_id")
        if upload_id is None:
            return await self._gemini_upload_start(request, command)
        if "upload" not in command:
            raise InvalidArgument.for_field("X-Goog-Upload-Command", "must be upload")
        offset = headers.get("x-goog-upload-offset", "")
        if not offset.isdigit():
            raise InvalidArgument.for_field("X-Goog-Upload-Offset", "is required (bytes so far)")
        finalize = "finalize" in command
        record = await self.uploads.chunk(upload_id, int(offset), request.stream(), finalize)
        status = {"x-goog-upload-status": "final" if record else "active"}
        if record is None:
            return Response(b"", headers=status)
        file = as_file(record, _base(request))
        return Response(orjson.dumps({"file": file}), media_type="application/json",
                        headers=status)  # fmt: skip

    async def _gemini_upload_start(self, request: Request, command: list[str]) -> Response:
        principal = await self._caller(request)
        headers = request.headers
        if headers.get("x-goog-upload-protocol") != "resumable":
            raise InvalidArgument.for_field("X-Goog-Upload-Protocol", "must be resumable")
        if command != ["start"]:
            raise InvalidArgument.for_field("X-Goog-Upload-Command", "must be start")
        size = headers.get("x-goog-upload-header-content-length", "")
        if not size.isdigit():
            raise InvalidArgument.for_field(
                "X-Goog-Upload-Header-Content-Length", "is required (the file's bytes)"
            )
        body = await read_json_object(request, self.max_body_bytes) if _has_body(request) else {}
        file = body.get("file")
        if not isinstance(file, dict):
            file = {}
        # Either spelling, as the API's JSON takes them (google-genai sends snake_case).
        name = (
            file.get("displayName") or file.get("display_name")
            or headers.get("x-goog-upload-file-name") or "upload.jsonl"
        )  # fmt: skip
        if not isinstance(name, str) or len(name) > 512:
            raise InvalidArgument.for_field("file.displayName", "must be at most 512 characters")
        upload_id = await self.uploads.start(principal, int(size), name)
        url = f"{_base(request)}{request.url.path}?upload_id={upload_id}"
        return Response(b"{}", media_type="application/json", headers={
            "x-goog-upload-url": url, "x-goog-upload-status": "active",
        })  # fmt: skip

    async def gemini_get_file(self, request: Request) -> Response:
        principal = await self._caller(request)
        record = await self.files.get(principal, _gemini_file(request))
        return _json(as_file(record, _base(request)))

    async def gemini_list_files(self, request: Request) -> Response:
        principal = await self._caller(request)
        limit = _limit(request.query_params.get("pageSize"), 100)
        after = request.query_params.get("pageToken")
        found = await self.files.page(principal, None, limit + 1, after, False)
        page: dict[str, Any] = {"files": [as_file(r, _base(request)) for r in found[:limit]]}
        if len(found) > limit:
            page["nextPageToken"] = found[limit - 1].id
        return _json(page)

    async def gemini_delete_file(self, request: Request) -> Response:
        principal = await self._caller(request)
        await self.files.delete(principal, _gemini_file(request))
        return _json({})

    async def gemini_download(self, request: Request) -> Response:
        principal = await self._caller(request)
        record = await self.files.get(principal, _gemini_file(request))
        return StreamingResponse(
            self.files.content(record.id), media_type="application/octet-stream",
            headers={"content-length": str(record.bytes)},
        )  # fmt: skip

    # -- batches -------------------------------------------------------------------

    async def create_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        body = await read_json_object(request, self.max_body_bytes)
        input_file_id = body.get("input_file_id")
        if not isinstance(input_file_id, str) or not input_file_id:
            raise InvalidArgument.for_field("input_file_id", "is required")
        endpoint = body.get("endpoint")
        if not isinstance(endpoint, str):
            raise InvalidArgument.for_field("endpoint", "is required")
        row = await self.batches.create(
            principal, input_file_id, endpoint, str(body.get("completion_window", "")),
            body.get("metadata"),
        )  # fmt: skip
        return _json(await self.batches.as_object(row))

    async def get_batch(self, request: Request) -> Response:
        """OpenAI's and Gemini's (v1) batches share this path: the batch's dialect says
        which shape it is read in."""
        principal = await self._caller(request)
        batch_id = request.path_params["batch_id"]
        gemini = await self.batches.store.get(batch_id, principal.key_id)
        if gemini is not None and gemini["dialect"] == "gemini":
            return _json(await as_operation(self.batches.store, gemini))
        row = await self.batches.get(principal, batch_id)
        return _json(await self.batches.as_object(row))

    async def list_batches(self, request: Request) -> Response:
        if _from_google(request):  # Gemini's list on its v1 path
            return await self.list_gemini_batches(request)
        principal = await self._caller(request)
        limit = _limit(request.query_params.get("limit"), 100)
        rows = await self.batches.page(principal, limit + 1, request.query_params.get("after"))
        return _json(_page([await self.batches.as_object(r) for r in rows], limit))

    async def cancel_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        row = await self.batches.cancel(principal, request.path_params["batch_id"])
        return _json(await self.batches.as_object(row))

    # -- Anthropic's message batches --------------------------------------------------

    async def _message_batch(self, request: Request, row: Any) -> dict[str, Any]:
        url = str(request.base_url).rstrip("/") + f"/v1/messages/batches/{row['id']}/results"
        return await as_message_batch(self.batches.store, row, url)

    async def create_message_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        body = await read_json_object(request, self.max_body_bytes)
        row = await self.batches.create_inline(principal, body.get("requests"))
        return _json(await self._message_batch(request, row))

    async def get_message_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        batch_id = request.path_params["batch_id"]
        row = await self.batches.get(principal, batch_id, "anthropic")
        return _json(await self._message_batch(request, row))

    async def list_message_batches(self, request: Request) -> Response:
        principal = await self._caller(request)
        limit = _limit(request.query_params.get("limit"), 1000)
        after = request.query_params.get("after_id")
        rows = await self.batches.page(principal, limit + 1, after, "anthropic")
        data = [await self._message_batch(request, r) for r in rows[:limit]]
        return _json({
            "data": data, "has_more": len(rows) > limit,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        })  # fmt: skip

    async def cancel_message_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        batch_id = request.path_params["batch_id"]
        row = await self.batches.cancel(principal, batch_id, "anthropic")
        return _json(await self._message_batch(request, row))

    async def delete_message_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        batch_id = request.path_params["batch_id"]
        await self.batches.delete(principal, batch_id, "anthropic")
        return _json({"id": batch_id, "type": "message_batch_deleted"})

    async def message_batch_results(self, request: Request) -> Response:
        principal = await self._caller(request)
        batch_id = request.path_params["batch_id"]
        rows = await self.batches.lines_of(principal, batch_id, "anthropic")
        body = b"".join(result_line(row) for row in rows)
        return Response(body, media_type="application/binary")

    # -- Gemini's batch mode -----------------------------------------------------------

    async def create_gemini_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        body = await read_json_object(request, self.max_body_bytes)
        model = request.path_params["model"].removeprefix("models/")
        row = await self.batches.create_gemini(principal, model, body)
        return _json(await as_operation(self.batches.store, row))

    async def get_gemini_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        row = await self.batches.get(principal, request.path_params["batch_id"], "gemini")
        return _json(await as_operation(self.batches.store, row))

    async def list_gemini_batches(self, request: Request) -> Response:
        principal = await self._caller(request)
        limit = _limit(request.query_params.get("pageSize"), 1000)
        after = request.query_params.get("pageToken")
        rows = await self.batches.page(principal, limit + 1, after, "gemini")
        found: dict[str, Any] = {
            "operations": [await as_operation(self.batches.store, r) for r in rows[:limit]]
        }
        if len(rows) > limit:
            found["nextPageToken"] = rows[limit - 1]["id"]
        return _json(found)

    async def cancel_gemini_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        await self.batches.cancel(principal, request.path_params["batch_id"], "gemini")
        return _json({})

    async def delete_gemini_batch(self, request: Request) -> Response:
        principal = await self._caller(request)
        await self.batches.delete(principal, request.path_params["batch_id"], "gemini")
        return _json({})


def batch_routes(endpoints: BatchEndpoints) -> list[BaseRoute]:
    e = endpoints
    gemini_create = "{version}/models/{{model:path}}:batchGenerateContent"
    return [
        # OpenAI's Files and Batch APIs (Gemini's v1 batches share /v1/batches/{id}).
        Route("/v1/files", e.upload, methods=["POST"]),
        Route("/v1/files", e.list_files, methods=["GET"]),
        Route("/v1/files/{file_id}", e.get_file, methods=["GET"]),
        Route("/v1/files/{file_id}", e.delete_file, methods=["DELETE"]),
        Route("/v1/files/{file_id}/content", e.file_content, methods=["GET"]),
        Route("/v1/batches", e.create_batch, methods=["POST"]),
        Route("/v1/batches", e.list_batches, methods=["GET"]),
        Route("/v1/batches/{batch_id}", e.get_batch, methods=["GET"]),
        Route("/v1/batches/{batch_id}/cancel", e.cancel_batch, methods=["POST"]),
        # Anthropic's Message Batches.
        Route("/v1/messages/batches", e.create_message_batch, methods=["POST"]),
        Route("/v1/messages/batches", e.list_message_batches, methods=["GET"]),
        Route("/v1/messages/batches/{batch_id}", e.get_message_batch, methods=["GET"]),
        Route("/v1/messages/batches/{batch_id}", e.delete_message_batch, methods=["DELETE"]),
        Route("/v1/messages/batches/{batch_id}/cancel", e.cancel_message_batch, methods=["POST"]),
        Route("/v1/messages/batches/{batch_id}/results", e.message_batch_results, methods=["GET"]),
        # Gemini's Files API as batch mode needs it, on both API versions.
        Route("/upload/v1beta/files", e.gemini_upload, methods=["POST"]),
        Route("/upload/v1/files", e.gemini_upload, methods=["POST"]),
        Route("/v1beta/files/{name}:download", e.gemini_download, methods=["GET"]),
        Route("/v1beta/files", e.gemini_list_files, methods=["GET"]),
        Route("/v1beta/files/{name}", e.gemini_get_file, methods=["GET"]),
        Route("/v1beta/files/{name}", e.gemini_delete_file, methods=["DELETE"]),
        # Gemini's batch mode, on both API versions.
        Route(gemini_create.format(version="/v1beta"), e.create_gemini_batch, methods=["POST"]),
        Route(gemini_create.format(version="/v1"), e.create_gemini_batch, methods=["POST"]),
        Route("/v1beta/batches", e.list_gemini_batches, methods=["GET"]),
        Route("/v1beta/batches/{batch_id}", e.get_gemini_batch, methods=["GET"]),
        Route("/v1beta/batches/{batch_id}", e.delete_gemini_batch, methods=["DELETE"]),
        Route("/v1beta/batches/{batch_id}:cancel", e.cancel_gemini_batch, methods=["POST"]),
        Route("/v1/batches/{batch_id}", e.delete_gemini_batch, methods=["DELETE"]),
        Route("/v1/batches/{batch_id}:cancel", e.cancel_gemini_batch, methods=["POST"]),
    ]  # fmt: skip


def _gemini_file(request: Request) -> str:
    """The file a Gemini path names (`files/{name}`, `{name}:download`), by its id."""
    params = request.path_params
    return file_id(str(params.get("name") or params["file_id"]).removesuffix(":download"))


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _has_body(request: Request) -> bool:
    return request.headers.get("content-length", "0") != "0"


def _from_google(request: Request) -> bool:
    """Whether a request comes from a Google SDK (its key header or its paging)."""
    headers, query = request.headers, request.query_params
    return "x-goog-api-key" in headers or "pageSize" in query or "pageToken" in query


def _expires_after(fields: dict[str, str]) -> int | None:
    anchor = fields.get("expires_after[anchor]")
    seconds = fields.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise InvalidArgument.for_field("expires_after.anchor", "must be created_at")
    if seconds is None or not seconds.isdigit() or not 3600 <= int(seconds) <= 2_592_000:
        raise InvalidArgument.for_field(
            "expires_after.seconds", "must be a whole number of seconds from 3600 to 2592000"
        )
    return int(seconds)


def _limit(raw: str | None, most: int) -> int:
    if raw is None:
        return 20
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise InvalidArgument.for_field("limit", f"must be a whole number from 1 to {most}")
    return int(raw)


def _page(data: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    shown = data[:limit]
    return {
        "object": "list", "data": shown, "has_more": len(data) > limit,
        "first_id": shown[0]["id"] if shown else None,
        "last_id": shown[-1]["id"] if shown else None,
    }  # fmt: skip


def _json(payload: Any) -> Response:
    return Response(orjson.dumps(payload), media_type="application/json")


class TableRunner:
    """Runs a batch line through the RPC handlers a live call of its endpoint reaches
    (routing, failover, guardrails, limits, the ledger), as the batch's key."""

    def __init__(self, table: dict[str, RpcMethod], timeout_s: float) -> None:
        self.table = table
        self.timeout_s = timeout_s
        self.by_endpoint: dict[str, Binding] = {}
        for binding in bindings(method.descriptor for method in table.values()):
            plain = not binding.when_header and not binding.when_query
            if binding.verb == "POST" and plain and binding.template not in self.by_endpoint:
                # Paths with a variable are known by their template (Gemini's model).
                self.by_endpoint[binding.template] = binding

    def method_of(self, endpoint: str) -> str:
        """The RPC method a live call of `endpoint` is (a ledger row's `method`)."""
        binding = self.by_endpoint.get(endpoint)
        return self.table[binding.rpc.path].descriptor.name if binding else endpoint

    async def run(
        self, principal: Principal, endpoint: str, body: dict[str, Any], batch_id: str,
        custom_id: str, price_factor: float,
    ) -> tuple[int, dict[str, Any], str]:  # fmt: skip
        binding = self.by_endpoint.get(endpoint)
        if binding is None:
            raise InvalidArgument.for_field("url", f"{endpoint} is not served here")
        rpc = binding.rpc
        call = Call.with_timeout({}, self.timeout_s)
        call.writes_json = True
        call.record.principal = principal
        call.record.batch_id, call.record.custom_id = batch_id, custom_id
        call.record.price_factor = price_factor
        if binding.path_fields:  # the model goes in the path (Gemini), not the body
            body = dict(body)
            model = str(body.pop("model", "")).removeprefix("models/")
        message: Message = codec.from_dict(body, rpc.request_type(), strict=rpc.strict)
        for path in binding.path_fields.values():
            codec.set_field(message, path, model)
        response = await self.table[rpc.path].unary(message, call)
        answer: Any = codec.to_dict(response)
        if binding.response_body:
            answer = answer[binding.response_body]
        return 200, answer, call.request_id
