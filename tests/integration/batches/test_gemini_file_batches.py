"""Gemini's batch mode read from an uploaded file, through google-genai: `files.upload`
(the resumable upload protocol), `batches.create(src="files/...")`, the responses file
read back with `files.download`; the upload's and the file's refusals through raw HTTP."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from google import genai
from google.genai import errors, types

from tests.integration.batches.test_openai_batches import OTHER_KEY, config
from tests.support.gateways import API_KEY, eventually, running_gateway

START = {"x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start"}


@pytest.fixture
async def gateway(
    tmp_path: Path,
) -> AsyncIterator[tuple[genai.client.AsyncClient, httpx.AsyncClient, Any]]:
    async with running_gateway(config(tmp_path)) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        options = types.HttpOptions(base_url=base, retry_options=None)
        client = genai.Client(api_key=API_KEY, http_options=options)
        async with httpx.AsyncClient(base_url=base, timeout=30) as raw:
            yield client.aio, raw, gw


def requests_file(keys: list[str]) -> bytes:
    return b"".join(
        orjson.dumps({"key": key, "request": {
            "contents": [{"parts": [{"text": f"question {key}"}], "role": "user"}],
            "generationConfig": {"maxOutputTokens": 8},
        }}) + b"\n"
        for key in keys
    )  # fmt: skip


async def test_a_batch_reads_an_uploaded_file_and_writes_a_responses_file(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    data = requests_file(["a", "b", "c"])
    uploaded = await sdk.files.upload(
        file=io.BytesIO(data), config={"mime_type": "jsonl", "display_name": "nightly-requests"}
    )
    assert uploaded.name and uploaded.name.startswith("files/")
    assert uploaded.size_bytes == len(data) and uploaded.display_name == "nightly-requests"
    assert uploaded.state == "ACTIVE" and uploaded.source == "UPLOADED"
    assert (await sdk.files.get(name=uploaded.name)).size_bytes == len(data)
    assert uploaded.name in [f.name async for f in await sdk.files.list()]

    job = await sdk.batches.create(model="sim-mini", src=uploaded.name)

    async def succeeded() -> Any:
        found = await sdk.batches.get(name=job.name)
        assert found.state == "JOB_STATE_SUCCEEDED", found.state
        return found

    assert job.name
    found = await eventually(succeeded)
    assert found.dest is not None and found.dest.file_name
    assert not found.dest.inlined_responses
    output = await sdk.files.download(file=found.dest.file_name)
    lines = [orjson.loads(line) for line in output.splitlines()]
    assert [line["key"] for line in lines] == ["a", "b", "c"]
    for line in lines:
        assert line["response"]["candidates"][0]["content"]["parts"][0]["text"]
    # One ledger row per request, keyed by its line's key.
    batch_id = job.name.removeprefix("batches/")
    rows = await gw.gateway.store.db.fetch(
        "SELECT custom_id FROM usage_records WHERE batch_id = ?", batch_id
    )
    assert sorted(r["custom_id"] for r in rows) == ["a", "b", "c"]
    # The responses file is the key's alone; another key sees no such file.
    other = await raw.get(f"/v1beta/{found.dest.file_name}", headers={"x-goog-api-key": OTHER_KEY})
    assert other.status_code == 404
    await sdk.files.delete(name=uploaded.name)
    with pytest.raises(errors.ClientError):
        await sdk.files.get(name=uploaded.name)


async def test_an_upload_in_two_chunks_and_its_refusals(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    key = {"x-goog-api-key": API_KEY}
    data = requests_file(["x", "y"])
    # No key: refused before anything is held.
    no_key = await raw.post("/upload/v1beta/files", headers={
        **START, "x-goog-upload-header-content-length": str(len(data))})  # fmt: skip
    assert no_key.status_code == 401
    for headers, field in (
        ({**START, "x-goog-upload-protocol": "multipart"}, "X-Goog-Upload-Protocol"),
        (START, "X-Goog-Upload-Header-Content-Length"),
        ({**START, "x-goog-upload-header-content-length": str(10**12)},
         "X-Goog-Upload-Header-Content-Length"),
    ):  # fmt: skip
        refused = await raw.post("/upload/v1beta/files", headers={**key, **headers})
        assert refused.status_code in (400, 413) and field in refused.text, refused.text
    started = await raw.post("/upload/v1beta/files", headers={
        **key, **START, "x-goog-upload-header-content-length": str(len(data))},
        json={"file": {"displayName": "two-parts"}})  # fmt: skip
    assert started.status_code == 200, started.text
    url = started.headers["x-goog-upload-url"]
    half = len(data) // 2
    first = await raw.post(url, content=data[:half],
                           headers={"x-goog-upload-command": "upload",
                                    "x-goog-upload-offset": "0"})  # fmt: skip
    assert first.status_code == 200 and first.headers["x-goog-upload-status"] == "active"
    wrong = await raw.post(url, content=data[half:],
                           headers={"x-goog-upload-command": "upload, finalize",
                                    "x-goog-upload-offset": "1"})  # fmt: skip
    assert wrong.status_code == 400 and "X-Goog-Upload-Offset" in wrong.text
    # A refused chunk ends the upload, leaving no file.
    again = await raw.post(url, content=data[half:],
                           headers={"x-goog-upload-command": "upload, finalize",
                                    "x-goog-upload-offset": str(half)})  # fmt: skip
    assert again.status_code == 404
    assert [f async for f in await sdk.files.list()] == []
    # Whole, in two chunks.
    started = await raw.post("/upload/v1beta/files", headers={
        **key, **START, "x-goog-upload-header-content-length": str(len(data))})  # fmt: skip
    url = started.headers["x-goog-upload-url"]
    await raw.post(
        url,
        content=data[:half],
        headers={"x-goog-upload-command": "upload", "x-goog-upload-offset": "0"},
    )
    last = await raw.post(url, content=data[half:],
                          headers={"x-goog-upload-command": "upload, finalize",
                                   "x-goog-upload-offset": str(half)})  # fmt: skip
    assert last.status_code == 200 and last.headers["x-goog-upload-status"] == "final"
    made = last.json()["file"]
    assert made["sizeBytes"] == str(len(data)) and made["name"].startswith("files/")


async def test_a_bad_requests_file_is_refused_naming_its_line(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    key = {"x-goog-api-key": API_KEY}
    path = "/v1beta/models/sim-mini:batchGenerateContent"
    for content, where in (
        (requests_file(["a"]) + b"not json\n", "line 2"),
        (requests_file(["a", "a"]), "line 2: key"),
        (requests_file(["a"]) + b'{"key": "b"}\n', "line 2: request"),
    ):
        uploaded = await sdk.files.upload(file=io.BytesIO(content), config={"mime_type": "jsonl"})
        refused = await raw.post(path, headers=key, json={
            "batch": {"inputConfig": {"fileName": uploaded.name}}})  # fmt: skip
        assert refused.status_code == 400 and where in refused.text, refused.text
    missing = await raw.post(path, headers=key, json={
        "batch": {"inputConfig": {"fileName": "files/file0123456789abcdef01234567"}}})  # fmt: skip
    assert missing.status_code == 404
    listed = (await raw.get("/v1beta/batches", headers=key)).json()
    assert listed.get("operations", []) == []
