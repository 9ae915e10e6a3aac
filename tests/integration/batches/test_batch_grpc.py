"""BatchService over gRPC: a batch created from JSONL bytes or from a file uploaded to
/v1/files, got with its results, listed and cancelled through the generated stub; the
same jobs as OpenAI's /v1/batches; grpcurl finds the service by reflection."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import openai
import orjson
import pytest
from gateway.v1 import batch_service_pb2 as pb
from gateway.v1 import batch_service_pb2_grpc

from tests.integration.batches.test_openai_batches import chat_line, config, jsonl, rows_of
from tests.support.gateways import API_KEY, ROOT, eventually, running_gateway
from tests.support.grpc_stubs import API


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Any]:
    async with running_gateway(config(tmp_path)) as running:
        yield running


@pytest.fixture
async def stub(gw: Any) -> AsyncIterator[batch_service_pb2_grpc.BatchServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        yield batch_service_pb2_grpc.BatchServiceStub(channel)


async def ended(
    stub: batch_service_pb2_grpc.BatchServiceStub, batch_id: str
) -> pb.GetBatchResponse:
    async def done() -> pb.GetBatchResponse:
        found = await stub.GetBatch(
            pb.GetBatchRequest(batch_id=batch_id, include_results=True), metadata=API
        )
        assert found.batch.status == "completed", found.batch.status
        return found

    return await eventually(done)


async def test_a_batch_from_bytes_runs_and_returns_its_results(gw: Any, stub: Any) -> None:
    data = jsonl([chat_line(f"g{i}", f"question {i}") for i in range(3)])
    created = await stub.CreateBatch(
        pb.CreateBatchRequest(input_jsonl=data, endpoint="/v1/chat/completions",
                              metadata={"job": "grpc"}), metadata=API,
    )  # fmt: skip
    batch = created.batch
    assert batch.id.startswith("batch_") and batch.request_counts.total == 3
    assert batch.status in ("validating", "in_progress") and batch.metadata == {"job": "grpc"}
    found = await ended(stub, batch.id)
    answers = [orjson.loads(line) for line in found.output_jsonl.splitlines()]
    assert sorted(a["custom_id"] for a in answers) == ["g0", "g1", "g2"]
    assert found.error_jsonl == b""
    rows = await rows_of(gw, batch.id)
    assert len(rows) == 3
    assert found.batch.usage.input_tokens == sum(r["prompt_tokens"] for r in rows)
    assert found.batch.usage.cost_usd == pytest.approx(sum(r["total_cost_usd"] for r in rows))
    # The same job as OpenAI's API shows.
    base = f"http://127.0.0.1:{gw.http_port}"
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0) as sdk:
        assert (await sdk.batches.retrieve(batch.id)).status == "completed"
        uploaded = await sdk.files.create(
            file=("in.jsonl", io.BytesIO(jsonl([chat_line("f0")]))), purpose="batch"
        )
    from_file = await stub.CreateBatch(
        pb.CreateBatchRequest(input_file_id=uploaded.id, endpoint="/v1/chat/completions"),
        metadata=API,
    )
    assert from_file.batch.input_file_id == uploaded.id
    listed = await stub.ListBatches(pb.ListBatchesRequest(limit=1), metadata=API)
    assert [b.id for b in listed.batches] == [from_file.batch.id] and listed.has_more


async def test_cancel_and_refusals(gw: Any, stub: Any) -> None:
    data = jsonl([chat_line(f"c{i}") for i in range(40)])
    created = await stub.CreateBatch(
        pb.CreateBatchRequest(input_jsonl=data, endpoint="/v1/chat/completions"), metadata=API
    )
    cancelled = await stub.CancelBatch(
        pb.CancelBatchRequest(batch_id=created.batch.id), metadata=API
    )
    # Whichever came first: the cancel, or the worker running every line (a batch
    # finalizing or completed is not cancelled).
    assert cancelled.batch.status in ("cancelling", "cancelled", "finalizing", "completed")
    for request, code, field in (
        (pb.CreateBatchRequest(endpoint="/v1/chat/completions"), "INVALID_ARGUMENT", "input_jsonl"),
        (pb.CreateBatchRequest(input_jsonl=b"{not json\n", endpoint="/v1/chat/completions"),
         "INVALID_ARGUMENT", "line 1"),
        (pb.CreateBatchRequest(input_jsonl=data, endpoint="/v1/nowhere"), "INVALID_ARGUMENT",
         "endpoint"),
        (pb.CreateBatchRequest(input_file_id="file-0123456789abcdef01234567",
                               endpoint="/v1/chat/completions"), "NOT_FOUND", "file-0123"),
    ):  # fmt: skip
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CreateBatch(request, metadata=API)
        assert refused.value.code().name == code and field in (refused.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.GetBatch(pb.GetBatchRequest(batch_id="batch_nope"), metadata=API)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as anonymous:
        await stub.ListBatches(pb.ListBatchesRequest())
    assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_grpcurl_finds_the_service_by_reflection(gw: Any) -> None:
    grpcurl = str(ROOT / ".venv" / "bin" / "grpcurl")
    target = f"127.0.0.1:{gw.grpc_port}"
    listed = await asyncio.create_subprocess_exec(
        grpcurl, "-plaintext", target, "describe", "gateway.v1.BatchService",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await listed.communicate()
    assert listed.returncode == 0, err.decode()
    for rpc in ("CreateBatch", "GetBatch", "ListBatches", "CancelBatch"):
        assert f"rpc {rpc}" in out.decode()
    called = await asyncio.create_subprocess_exec(
        grpcurl, "-plaintext", "-H", f"x-api-key: {API_KEY}", "-d", '{"limit": 5}', target,
        "gateway.v1.BatchService/ListBatches",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await called.communicate()
    assert called.returncode == 0, err.decode()
    assert json.loads(out) == {}  # no batches yet: an empty page
