"""A batch line pays its model's batch prices: the batch rates of its price where the
config gives them, else the live rates at a share (the model's, else
`batches.price_factor`); the batch's reservation at create is figured at the same prices."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import grpc
import httpx
import openai
import pytest
from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import admin_service_pb2_grpc

from tests.integration.batches.test_openai_batches import MODEL, chat_line, config, jsonl, rows_of
from tests.support.gateways import API_KEY, eventually, running_gateway
from tests.support.shared_state import ADMIN, ADMIN_KEY

POOR_KEY = "gw-test-poor-key-000000000"


def priced(
    tmp_path: Path, batch: dict[str, Any], budget_usd: float | None = None
) -> dict[str, Any]:
    data = config(tmp_path)
    [model] = [m for m in data["models"] if m["id"] == MODEL]
    model["price"] = {**model["price"], "batch": batch}
    if budget_usd is not None:
        data["keys"].append(
            {"name": "poor", "secret": POOR_KEY, "kind": "api", "budget_usd": budget_usd}
        )
    return data


async def run_batch(sdk: openai.AsyncOpenAI, lines: list[dict[str, Any]]) -> Any:
    uploaded = await sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl(lines))), purpose="batch")
    batch = await sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )

    async def done() -> Any:
        found = await sdk.batches.retrieve(batch.id)
        assert found.status == "completed", found.status
        return found

    return await eventually(done)


async def test_a_line_pays_the_models_batch_rates_and_the_batch_the_sum(tmp_path: Path) -> None:
    async with running_gateway(priced(tmp_path, {"input": 0.01, "output": 0.07})) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with sdk:
            lines = [chat_line(f"r{i}", f"question number {i} " * (i + 1)) for i in range(4)]
            finished = await run_batch(sdk, lines)
            await sdk.chat.completions.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "live"}]
            )
            await gw.gateway.accounts.ledger.flush()
            rows = await rows_of(gw, finished.id)
            assert len(rows) == 4
            for row in rows:
                assert row["completion_tokens"] > 0
                batch_rate = (row["prompt_tokens"] * 0.01 + row["completion_tokens"] * 0.07) / 1e6
                assert row["total_cost_usd"] == pytest.approx(batch_rate, rel=1e-9)
            assert finished.usage.input_tokens == sum(r["prompt_tokens"] for r in rows)
            assert finished.usage.output_tokens == sum(r["completion_tokens"] for r in rows)
            async with httpx.AsyncClient(base_url=base) as raw:
                answer = await raw.get("/v1/usage", headers={"authorization": f"Bearer {API_KEY}"})
            total = answer.json()["total"]
            assert total["batch_requests"] == 4
            assert total["batch_cost_usd"] == pytest.approx(sum(r["total_cost_usd"] for r in rows))
            # The live call beside it paid the live price, not the batch's.
            [live] = await gw.gateway.store.db.fetch(
                "SELECT prompt_tokens, completion_tokens, total_cost_usd FROM usage_records "
                "WHERE batch_id = ''"
            )  # fmt: skip
            at_live = (live["prompt_tokens"] * 0.15 + live["completion_tokens"] * 0.60) / 1e6
            assert live["total_cost_usd"] == pytest.approx(at_live, rel=1e-9)


async def test_a_models_own_batch_share_applies_to_rates_it_leaves_out(tmp_path: Path) -> None:
    async with running_gateway(priced(tmp_path, {"factor": 0.25, "output": 0.3})) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with sdk:
            finished = await run_batch(sdk, [chat_line("only", "price me by share")])
            [row] = await rows_of(gw, finished.id)
            # sim-mini's live input is $0.15 per million: a quarter of it; output its own.
            expected = (row["prompt_tokens"] * 0.15 * 0.25 + row["completion_tokens"] * 0.3) / 1e6
            assert row["total_cost_usd"] == pytest.approx(expected, rel=1e-9)


async def test_the_reservation_at_create_is_figured_at_batch_prices(tmp_path: Path) -> None:
    # 50 lines of up to 4000 tokens: 200k tokens, $0.06 at half the live $0.60 but
    # $0.002 at a batch rate of $0.01; the key may spend $0.01.
    data = priced(tmp_path, {"input": 0.01, "output": 0.01}, budget_usd=0.01)
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=POOR_KEY, max_retries=0)
        async with sdk:
            lines = [chat_line(f"b{i}", max_tokens=4000) for i in range(50)]
            uploaded = await sdk.files.create(
                file=("in.jsonl", io.BytesIO(jsonl(lines))), purpose="batch"
            )
            batch = await sdk.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            held = await gw.gateway.store.db.fetch(
                "SELECT reserved_usd FROM batches WHERE id = ?", batch.id
            )
            assert 0 < held[0]["reserved_usd"] < 0.0021


async def test_the_admin_page_shows_a_keys_batch_spend_apart(tmp_path: Path) -> None:
    data = priced(tmp_path, {"input": 0.01, "output": 0.07})
    data["keys"].append({"name": "test-admin", "kind": "admin", "secret": ADMIN_KEY})
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with sdk:
            finished = await run_batch(sdk, [chat_line("a0"), chat_line("a1")])
            await sdk.chat.completions.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "live"}]
            )
        await gw.gateway.accounts.ledger.flush()
        rows = await rows_of(gw, finished.id)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            board = await admin_service_pb2_grpc.AdminServiceStub(channel).GetDashboard(
                admin_pb.GetDashboardRequest(), metadata=ADMIN
            )
        [key] = [k for k in board.keys if k.name == "dev-api"]
        assert key.batch_cost_usd == pytest.approx(sum(r["total_cost_usd"] for r in rows))
        assert key.cost_usd > key.batch_cost_usd > 0
        async with httpx.AsyncClient(base_url=base) as raw:
            page = (await raw.get("/admin")).text
        assert "of it batch" in page and "batch_cost_usd" in page
