"""Gemini's batch mode through google-genai over the same job model: create with inline
requests, get, list, cancel, delete; each request billed by one ledger row."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types

from tests.integration.batches.test_openai_batches import config
from tests.support.gateways import API_KEY, eventually, running_gateway


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


def inline(i: int) -> dict[str, Any]:
    return {"contents": [{"parts": [{"text": f"question {i}"}], "role": "user"}],
            "metadata": {"key": f"g{i}"}, "config": {"max_output_tokens": 8}}  # fmt: skip


async def test_a_gemini_batch_runs_its_inline_requests(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    job = await sdk.batches.create(
        model="sim-mini", src=[inline(i) for i in range(3)],  # type: ignore[misc]
        config={"display_name": "nightly"},
    )  # fmt: skip
    assert job.name and job.name.startswith("batches/")
    assert job.state in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING")
    assert job.display_name == "nightly"

    async def succeeded() -> Any:
        found = await sdk.batches.get(name=job.name)
        assert found.state == "JOB_STATE_SUCCEEDED", found.state
        return found

    found = await eventually(succeeded)
    assert found.end_time is not None and found.dest is not None
    responses = found.dest.inlined_responses or []
    assert [r.metadata for r in responses] == [{"key": f"g{i}"} for i in range(3)]
    for r in responses:
        assert r.response is not None and r.response.text
    batch_id = job.name.removeprefix("batches/")
    rows = await gw.gateway.store.db.fetch(
        "SELECT custom_id FROM usage_records WHERE batch_id = ?", batch_id
    )
    assert sorted(r["custom_id"] for r in rows) == ["g0", "g1", "g2"]
    listed = [j.name async for j in await sdk.batches.list()]
    assert job.name in listed
    await sdk.batches.delete(name=job.name)
    with pytest.raises(errors.ClientError):
        await sdk.batches.get(name=job.name)


async def test_a_cancelled_gemini_batch_ends_cancelled(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    job = await sdk.batches.create(model="sim-mini", src=[inline(i) for i in range(40)])  # type: ignore[misc]
    assert job.name
    await sdk.batches.cancel(name=job.name)

    async def ended() -> Any:
        found = await sdk.batches.get(name=job.name)
        assert found.state in ("JOB_STATE_CANCELLED", "JOB_STATE_SUCCEEDED"), found.state
        return found

    await eventually(ended)


async def test_bad_gemini_batches_are_refused(gateway) -> None:  # type: ignore[no-untyped-def]
    sdk, raw, gw = gateway
    auth = {"x-goog-api-key": API_KEY}
    path = "/v1beta/models/sim-mini:batchGenerateContent"
    for body, field in (
        ({"batch": {}}, "batch.inputConfig.requests"),
        ({"batch": {"inputConfig": {"requests": {"requests": []}}}}, "batch.inputConfig.requests.requests"),
        ({"batch": {"inputConfig": {"requests": {"requests": [{"metadata": {}}]}}}},
         "batch.inputConfig.requests.requests[0].request"),
    ):  # fmt: skip
        response = await raw.post(path, headers=auth, json=body)
        assert response.status_code == 400 and field in response.text, response.text
    unknown = await raw.post("/v1beta/models/nope:batchGenerateContent", headers=auth,
                             json={"batch": {"inputConfig": {"requests": {"requests": [
                                 {"request": {"contents": []}}]}}}})  # fmt: skip
    assert unknown.status_code == 400 and "nope" in unknown.text
    assert (await raw.get("/v1beta/batches")).status_code == 401
