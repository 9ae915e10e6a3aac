"""Anthropic's Message Batches through the anthropic SDK over the same job model: create,
retrieve, list, results, cancel, delete; refusals through raw HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.integration.batches.test_openai_batches import config
from tests.support.gateways import API_KEY, eventually, running_gateway

MODEL = "sim-mini"


def request(custom_id: str, text: str = "hello", **params: Any) -> dict[str, Any]:
    return {"custom_id": custom_id,
            "params": {"model": MODEL, "max_tokens": 8,
                       "messages": [{"role": "user", "content": text}], **params}}  # fmt: skip


@pytest.fixture
async def gateway(
    tmp_path: Path,
) -> AsyncIterator[tuple[anthropic.AsyncAnthropic, httpx.AsyncClient, Any]]:
    async with running_gateway(config(tmp_path)) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
        async with sdk, httpx.AsyncClient(base_url=base, timeout=30) as raw:
            yield sdk, raw, gw


async def test_a_message_batch_runs_and_returns_its_results(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    batch = await sdk.messages.batches.create(
        requests=[request(f"q{i}", f"question {i}") for i in range(4)]  # type: ignore[misc]
    )
    assert batch.id.startswith("msgbatch_") and batch.type == "message_batch"
    assert isinstance(batch.created_at, datetime) and batch.created_at.tzinfo is not None

    async def ended() -> Any:
        found = await sdk.messages.batches.retrieve(batch.id)
        assert found.processing_status == "ended", found.processing_status
        return found

    found = await eventually(ended)
    assert found.request_counts.succeeded == 4 and found.request_counts.errored == 0
    assert found.ended_at is not None and found.results_url
    results = [r async for r in await sdk.messages.batches.results(batch.id)]
    assert sorted(r.custom_id for r in results) == [f"q{i}" for i in range(4)]
    for result in results:
        assert result.result.type == "succeeded"
        assert result.result.message.type == "message" and result.result.message.content
    rows = await gw.gateway.store.db.fetch(
        "SELECT custom_id FROM usage_records WHERE batch_id = ?", batch.id
    )
    assert sorted(r["custom_id"] for r in rows) == [f"q{i}" for i in range(4)]
    # Fetching the results again bills nothing.
    [r async for r in await sdk.messages.batches.results(batch.id)]
    await gw.gateway.accounts.ledger.flush()
    assert len(await gw.gateway.store.db.fetch(
        "SELECT 1 FROM usage_records WHERE batch_id = ?", batch.id)) == 4  # fmt: skip
    listed = [b.id async for b in sdk.messages.batches.list()]
    assert batch.id in listed
    deleted = await sdk.messages.batches.delete(batch.id)
    assert deleted.type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        await sdk.messages.batches.retrieve(batch.id)


async def test_a_cancelled_message_batch_ends_with_canceled_results(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    batch = await sdk.messages.batches.create(
        requests=[request(f"c{i}") for i in range(40)]  # type: ignore[misc]
    )
    cancelled = await sdk.messages.batches.cancel(batch.id)
    assert cancelled.processing_status in ("canceling", "ended")

    async def ended() -> Any:
        found = await sdk.messages.batches.retrieve(batch.id)
        assert found.processing_status == "ended"
        return found

    found = await eventually(ended)
    counts = found.request_counts
    assert counts.succeeded + counts.canceled == 40
    results = [r async for r in await sdk.messages.batches.results(batch.id)]
    assert {r.result.type for r in results} <= {"succeeded", "canceled"}
    assert len(results) == 40


@pytest.mark.parametrize(
    ("requests", "field"),
    [
        ([request("a"), request("a")], "requests[1].custom_id"),
        ([request("a", stream=True)], "requests[0].params.stream"),
        ([{"custom_id": "a"}], "requests[0].params"),
        ([], "requests"),
    ],
    ids=["duplicate-custom-id", "stream", "no-params", "empty"],
)
async def test_bad_requests_are_refused_naming_the_request(gateway, requests, field) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    response = await raw.post("/v1/messages/batches", headers={"x-api-key": API_KEY},
                              json={"requests": requests})  # fmt: skip
    assert response.status_code == 400, response.text
    assert field in response.text
    assert [b async for b in sdk.messages.batches.list()] == []


async def test_results_of_a_batch_still_running_are_refused(tmp_path: Path) -> None:
    data = config(tmp_path)
    data["batches"]["run"] = False  # this instance accepts batches but runs none
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as raw:
            auth = {"x-api-key": API_KEY}
            created = await raw.post("/v1/messages/batches", headers=auth,
                                     json={"requests": [request("r0")]})  # fmt: skip
            batch = created.json()
            assert batch["processing_status"] == "in_progress" and batch["results_url"] is None
            response = await raw.get(f"/v1/messages/batches/{batch['id']}/results", headers=auth)
            assert response.status_code == 400 and "not ended" in response.text
            response = await raw.delete(f"/v1/messages/batches/{batch['id']}", headers=auth)
            assert response.status_code == 400 and "cancel it first" in response.text
            stranger = await raw.get(f"/v1/messages/batches/{batch['id']}",
                                     headers={"x-api-key": "gw-test-other-key-00000000"})  # fmt: skip
            assert stranger.status_code == 404
