"""OpenAI's Files and Batch APIs through the openai SDK, refusals through raw HTTP: a
batch's lines run through the live pipeline, each billed by exactly one ledger row."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from server.ops import tracing
from tests.support.gateways import API_KEY, default_config_dict, eventually, running_gateway

OTHER_KEY = "gw-test-other-key-00000000"
MODEL = "sim-mini"


def config(tmp_path: Path) -> dict[str, Any]:
    data = default_config_dict()
    data["storage"]["sqlite_path"] = str(tmp_path / "gateway.db")
    data["batches"] = {
        "files_dir": str(tmp_path / "files"),
        "poll_s": 0.05,
        "max_lines": 50,
        "max_file_bytes": 64 * 1024,
    }
    data["keys"] = [*data.get("keys", []), {"name": "other", "secret": OTHER_KEY, "kind": "api"}]
    return data


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def chat_line(custom_id: str, text: str = "hello", **body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": MODEL, "messages": [{"role": "user", "content": text}],
                     "max_tokens": 8, **body}}  # fmt: skip


@pytest.fixture
async def gateway(
    tmp_path: Path,
) -> AsyncIterator[tuple[openai.AsyncOpenAI, httpx.AsyncClient, Any]]:
    async with running_gateway(config(tmp_path)) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with sdk, httpx.AsyncClient(base_url=base, timeout=30) as raw:
            yield sdk, raw, gw


async def rows_of(gw: Any, batch_id: str) -> list[dict[str, Any]]:
    return await gw.gateway.store.db.fetch(
        "SELECT custom_id, total_cost_usd, prompt_tokens, completion_tokens "
        "FROM usage_records WHERE batch_id = ?", batch_id,
    )  # fmt: skip


async def test_a_batch_runs_every_line_once_and_reports_its_rows(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    lines = [chat_line(f"req-{i}", f"question {i}") for i in range(6)]
    uploaded = await sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl(lines))), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(jsonl(lines))
    assert uploaded.expires_at is not None and uploaded.expires_at > uploaded.created_at
    batch = await sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h",
        metadata={"job": "nightly"},
    )  # fmt: skip
    assert batch.id.startswith("batch_") and batch.status in ("validating", "in_progress")
    assert batch.request_counts is not None and batch.request_counts.total == 6

    async def done() -> Any:
        found = await sdk.batches.retrieve(batch.id)
        assert found.status == "completed", found.status
        return found

    finished = await eventually(done)
    assert finished.request_counts.completed == 6 and finished.request_counts.failed == 0
    assert finished.output_file_id and finished.error_file_id is None
    assert finished.metadata == {"job": "nightly"}
    output = (await sdk.files.content(finished.output_file_id)).content
    answers = [orjson.loads(line) for line in output.splitlines()]
    assert sorted(a["custom_id"] for a in answers) == sorted(f"req-{i}" for i in range(6))
    for answer in answers:
        assert answer["error"] is None
        assert answer["response"]["status_code"] == 200
        assert answer["response"]["body"]["object"] == "chat.completion"
    rows = await rows_of(gw, batch.id)
    assert sorted(r["custom_id"] for r in rows) == sorted(f"req-{i}" for i in range(6))
    # The batch's usage is the sum of its rows; retrieves and fetches write none.
    assert finished.usage.input_tokens == sum(r["prompt_tokens"] for r in rows)
    assert finished.usage.output_tokens == sum(r["completion_tokens"] for r in rows)
    await sdk.batches.retrieve(batch.id)
    await sdk.files.content(finished.output_file_id)
    await gw.gateway.accounts.ledger.flush()
    assert len(await rows_of(gw, batch.id)) == 6
    listed = await sdk.batches.list()
    assert batch.id in [b.id for b in listed.data]
    metrics = (await raw.get("/metrics")).text
    assert 'gateway_batch_lines_total{outcome="succeeded"} 6.0' in metrics
    assert "gateway_batch_lines_running 0.0" in metrics


async def test_a_batch_line_pays_the_batch_price(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    uploaded = await sdk.files.create(
        file=("in.jsonl", io.BytesIO(jsonl([chat_line("only", "price me")]))), purpose="batch"
    )
    batch = await sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )

    async def done() -> None:
        assert (await sdk.batches.retrieve(batch.id)).status == "completed"

    await eventually(done)
    [row] = await rows_of(gw, batch.id)
    # sim-mini: $0.15 in and $0.60 out per million tokens, half for a batch line.
    live = (row["prompt_tokens"] * 0.15 + row["completion_tokens"] * 0.60) / 1_000_000
    assert row["completion_tokens"] > 0
    assert row["total_cost_usd"] == pytest.approx(live * 0.5)


async def test_the_database_refuses_a_second_row_for_a_line(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    db = gw.gateway.store.db
    insert = ("INSERT INTO usage_records (ts, request_id, key_id, key_name, method, model, "
              "provider, prompt_tokens, completion_tokens, total_tokens, latency_ms, status, "
              "batch_id, custom_id) VALUES (0, ?, 'k', 'k', 'm', 'm', 'p', 1, 1, 2, 1, 'OK', "
              "'batch_x', 'line-1')")  # fmt: skip
    await db.execute(insert, "first")
    with pytest.raises(Exception, match="(?i)unique"):
        await db.execute(insert, "second")


async def test_files_belong_to_the_key_that_uploaded_them(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    uploaded = await sdk.files.create(file=("a.jsonl", io.BytesIO(b"{}\n")), purpose="batch")
    other = {"authorization": f"Bearer {OTHER_KEY}"}
    for path in (f"/v1/files/{uploaded.id}", f"/v1/files/{uploaded.id}/content"):
        assert (await raw.get(path, headers=other)).status_code == 404
    assert (await raw.delete(f"/v1/files/{uploaded.id}", headers=other)).status_code == 404
    assert uploaded.id not in [
        f["id"] for f in (await raw.get("/v1/files", headers=other)).json()["data"]
    ]
    assert uploaded.id in [f.id for f in (await sdk.files.list()).data]
    assert (await sdk.files.retrieve(uploaded.id)).filename == "a.jsonl"
    assert (await sdk.files.delete(uploaded.id)).deleted
    assert (
        await raw.get(f"/v1/files/{uploaded.id}", headers={"authorization": f"Bearer {API_KEY}"})
    ).status_code == 404
    assert (await raw.get("/v1/files")).status_code == 401


async def test_a_file_past_the_limit_is_413_and_leaves_nothing(gateway, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    auth = {"authorization": f"Bearer {API_KEY}"}
    big = b"x" * (65 * 1024)
    response = await raw.post("/v1/files", headers=auth, data={"purpose": "batch"},
                              files={"file": ("big.jsonl", big)})  # fmt: skip
    assert response.status_code == 413, response.text
    assert response.json()["error"]["param"] == "file"
    assert [p for p in (tmp_path / "files").glob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    ("content", "field", "line"),
    [
        (b"not json\n", "input_file_id", "line 1"),
        (jsonl([chat_line("a"), {**chat_line("b"), "url": "/v1/embeddings"}]), "url", "line 2"),
        (
            jsonl(
                [
                    chat_line("a"),
                    {**chat_line("b"), "body": {**chat_line("b")["body"], "model": "sim-pro"}},
                ]
            ),
            "body.model",
            "line 2",
        ),
        (jsonl([chat_line("a"), chat_line("a")]), "custom_id", "line 2"),
        (jsonl([chat_line("a", stream=True)]), "body.stream", "line 1"),
        (jsonl([chat_line(f"n{i}") for i in range(51)]), "input_file_id", "line 51"),
    ],
    ids=["not-json", "wrong-url", "two-models", "duplicate-custom-id", "stream", "too-many-lines"],
)
async def test_bad_input_is_refused_whole_naming_line_and_field(  # type: ignore[no-untyped-def]
    gateway, content: bytes, field: str, line: str
) -> None:
    sdk, raw, gw = gateway
    auth = {"authorization": f"Bearer {API_KEY}"}
    uploaded = await sdk.files.create(file=("in.jsonl", io.BytesIO(content)), purpose="batch")
    response = await raw.post("/v1/batches", headers=auth, json={
        "input_file_id": uploaded.id, "endpoint": "/v1/chat/completions",
        "completion_window": "24h"})  # fmt: skip
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == field and error["message"].startswith(line), error
    assert (await sdk.batches.list()).data == []


async def test_create_refuses_a_wrong_endpoint_window_or_file(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    auth = {"authorization": f"Bearer {API_KEY}"}
    uploaded = await sdk.files.create(
        file=("in.jsonl", io.BytesIO(jsonl([chat_line("a")]))), purpose="batch"
    )
    good = {
        "input_file_id": uploaded.id,
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    for change, field, status in (
        ({"endpoint": "/v1/nothing"}, "endpoint", 400),
        ({"completion_window": "1h"}, "completion_window", 400),
        ({"input_file_id": "file-" + "0" * 24}, None, 404),
    ):
        response = await raw.post("/v1/batches", headers=auth, json={**good, **change})
        assert response.status_code == status, response.text
        assert response.json()["error"]["param"] == field
    response = await raw.post(
        "/v1/batches", headers={"authorization": f"Bearer {OTHER_KEY}"}, json=good
    )
    assert response.status_code == 404


async def test_a_cancelled_batch_ends_cancelled(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    lines = [chat_line(f"c{i}") for i in range(40)]
    uploaded = await sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl(lines))), purpose="batch")
    batch = await sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    cancelling = await sdk.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled", "finalizing", "completed")

    async def ended() -> Any:
        found = await sdk.batches.retrieve(batch.id)
        assert found.status in ("cancelled", "completed"), found.status
        return found

    found = await eventually(ended)
    rows = await rows_of(gw, batch.id)
    # Billed: the lines that finished, nothing else.
    assert len(rows) == found.request_counts.completed
    assert len({r["custom_id"] for r in rows}) == len(rows)


async def test_a_batch_past_the_key_budget_is_refused_at_create(tmp_path: Path) -> None:
    data = config(tmp_path)
    poor = "gw-test-poor-key-000000000"
    data["keys"].append({"name": "poor", "secret": poor, "kind": "api", "budget_usd": 0.0001})
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=poor, max_retries=0)
        async with sdk:
            # 50 lines of up to 4000 tokens each at sim-mini's batch price: about $0.06.
            lines = [chat_line(f"b{i}", max_tokens=4000) for i in range(50)]
            uploaded = await sdk.files.create(
                file=("in.jsonl", io.BytesIO(jsonl(lines))), purpose="batch"
            )
            with pytest.raises(openai.RateLimitError) as refused:
                await sdk.batches.create(
                    input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                    completion_window="24h",
                )  # fmt: skip
            assert "budget" in refused.value.message and "'poor'" in refused.value.message
            assert (await sdk.batches.list()).data == []
            # One small line fits.
            small = await sdk.files.create(
                file=("s.jsonl", io.BytesIO(jsonl([chat_line("one", max_tokens=4)]))),
                purpose="batch",
            )
            batch = await sdk.batches.create(
                input_file_id=small.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            assert batch.request_counts is not None and batch.request_counts.total == 1


async def test_an_expired_file_is_gone(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    uploaded = await sdk.files.create(
        file=("a.jsonl", io.BytesIO(b"{}\n")), purpose="user_data",
        extra_body={"expires_after": {"anchor": "created_at", "seconds": 3600}},
    )  # fmt: skip
    assert uploaded.expires_at == pytest.approx(uploaded.created_at + 3600, abs=2)
    db = gw.gateway.store.db
    await db.execute("UPDATE files SET expires_at = 1 WHERE id = ?", uploaded.id)
    with pytest.raises(openai.NotFoundError):
        await sdk.files.retrieve(uploaded.id)
    assert uploaded.id not in [f.id for f in (await sdk.files.list()).data]


async def test_batch_lines_wait_while_live_calls_fill_the_instance(tmp_path: Path) -> None:
    data = config(tmp_path)
    data["batches"]["yield_above_in_flight"] = 1  # one live call is enough to hold lines
    slow_s = 1.5
    for model in data["models"]:
        if model["id"] == "sim-pro":
            for provider in model["providers"]:
                provider["params"] = {"ttft_ms": int(slow_s * 1000), "tokens_per_second": 0}
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with sdk:
            uploaded = await sdk.files.create(
                file=("in.jsonl", io.BytesIO(jsonl([chat_line(f"y{i}") for i in range(5)]))),
                purpose="batch",
            )
            started = time.time()
            live = asyncio.create_task(sdk.chat.completions.create(
                model="sim-pro", max_tokens=4, messages=[{"role": "user", "content": "slow"}]
            ))  # fmt: skip

            async def in_flight() -> None:
                assert gw.gateway.observer.in_flight >= 1

            await eventually(in_flight)
            batch = await sdk.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                completion_window="24h",
            )  # fmt: skip
            await live

            async def done() -> None:
                assert (await sdk.batches.retrieve(batch.id)).status == "completed"

            await eventually(done)
            ended = await gw.gateway.store.db.fetch(
                "SELECT ended_at FROM batch_lines WHERE batch_id = ?", batch.id
            )
            # No line ran while the live call waited on its upstream.
            assert min(r["ended_at"] for r in ended) >= started + slow_s


async def test_running_batches_hold_their_worst_case_against_budget_and_queue(
    tmp_path: Path,
) -> None:
    data = config(tmp_path)
    data["batches"]["run"] = False  # the batches stay queued
    data["batches"]["max_enqueued_tokens_per_key"] = 100_000
    poor = "gw-test-poor-key-000000000"
    data["keys"].append({"name": "poor", "secret": poor, "kind": "api", "budget_usd": 0.01})
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=poor, max_retries=0)
        async with sdk:
            # 10 lines of up to 4000 tokens at $0.60 per million, half price: ~$0.012
            # would not fit $0.01; 6 lines (~$0.0072) do, once.
            six = await sdk.files.create(
                file=("6.jsonl", io.BytesIO(jsonl([chat_line(f"s{i}", max_tokens=4000)
                                                  for i in range(6)]))),
                purpose="batch",
            )  # fmt: skip
            first = await sdk.batches.create(
                input_file_id=six.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            with pytest.raises(openai.RateLimitError) as refused:
                await sdk.batches.create(
                    input_file_id=six.id, endpoint="/v1/chat/completions",
                    completion_window="24h",
                )  # fmt: skip
            assert "budget" in refused.value.message and "'poor'" in refused.value.message
            # Its worst case is released once it ends (cancelled here, by hand: no
            # instance runs it).
            await gw.gateway.store.db.execute(
                "UPDATE batches SET status = 'cancelled' WHERE id = ?", first.id
            )
            again = await sdk.batches.create(
                input_file_id=six.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            assert again.status == "validating"
        rich = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with rich:
            many = await rich.files.create(
                file=("q.jsonl", io.BytesIO(jsonl([chat_line(f"q{i}", max_tokens=4000)
                                                  for i in range(20)]))),
                purpose="batch",
            )  # fmt: skip
            await rich.batches.create(
                input_file_id=many.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            with pytest.raises(openai.RateLimitError) as queued:
                await rich.batches.create(
                    input_file_id=many.id, endpoint="/v1/chat/completions",
                    completion_window="24h",
                )  # fmt: skip
            assert "in the queue" in queued.value.message and "100000" in queued.value.message


async def test_a_refused_line_goes_to_the_error_file_and_leaves_one_row(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    lines = [chat_line("good"), chat_line("hot", temperature=5)]
    uploaded = await sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl(lines))), purpose="batch")
    batch = await sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )

    async def done() -> Any:
        found = await sdk.batches.retrieve(batch.id)
        assert found.status == "completed"
        return found

    found = await eventually(done)
    assert (found.request_counts.completed, found.request_counts.failed) == (1, 1)
    [error] = [
        orjson.loads(x) for x in (await sdk.files.content(found.error_file_id)).content.splitlines()
    ]
    assert error["custom_id"] == "hot" and error["response"]["status_code"] == 400
    assert "temperature" in error["response"]["body"]["error"]["message"]
    [output] = (await sdk.files.content(found.output_file_id)).content.splitlines()
    assert orjson.loads(output)["custom_id"] == "good"
    rows = await rows_of(gw, batch.id)
    assert sorted(r["custom_id"] for r in rows) == ["good", "hot"]


async def test_each_line_is_a_span_with_the_call_beneath_it(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        uploaded = await sdk.files.create(
            file=("in.jsonl", io.BytesIO(jsonl([chat_line("t0"), chat_line("t1")]))),
            purpose="batch",
        )
        batch = await sdk.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )

        async def done() -> None:
            assert (await sdk.batches.retrieve(batch.id)).status == "completed"

        await eventually(done)
    finally:
        tracing.enable(None)
    spans = exporter.get_finished_spans()
    lines = [s for s in spans if s.name == "gateway.batch.line"]
    assert sorted((s.attributes or {})["gateway.batch.custom_id"] for s in lines) == ["t0", "t1"]
    assert {(s.attributes or {})["gateway.batch.id"] for s in lines} == {batch.id}
    ids = {s.context.span_id for s in lines}
    beneath = [s for s in spans if s.parent is not None and s.parent.span_id in ids]
    assert len(beneath) >= 2  # each line's call runs inside its line's span


async def test_the_usage_api_tells_batch_spend_from_live_spend(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    await sdk.chat.completions.create(
        model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "live"}]
    )
    uploaded = await sdk.files.create(
        file=("in.jsonl", io.BytesIO(jsonl([chat_line("u0"), chat_line("u1")]))), purpose="batch"
    )
    batch = await sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )

    async def done() -> None:
        assert (await sdk.batches.retrieve(batch.id)).status == "completed"

    await eventually(done)
    usage = (await raw.get("/v1/usage", headers={"authorization": f"Bearer {API_KEY}"})).json()
    rows = await rows_of(gw, batch.id)
    total = usage["total"]
    assert total["requests"] == 3 and total["batch_requests"] == 2
    assert total["batch_cost_usd"] == pytest.approx(sum(r["total_cost_usd"] for r in rows))
    assert total["cost_usd"] > total["batch_cost_usd"] > 0
