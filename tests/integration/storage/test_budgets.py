"""Budgets: reserve the maximum cost before a call, settle after, atomically, so that
concurrent requests cannot overrun; spend survives a restart (it comes from the ledger)."""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import usage_service_pb2 as usage_pb

from server.accounting import budget
from tests.support.facade import set_params
from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import Stubs, details
from tests.support.shared_state import (
    MAX_TOKENS,
    AdminClient,
    config_with,
    redis_settings,
    reservation,
)

HELLO = [chat.ChatMessage(role="user", content="hello")]


def test_period_bounds_are_utc_calendar_periods():
    start, end = budget.period_bounds("monthly", 1_771_000_000)  # 2026-02-13
    assert (start, end) == (1_769_904_000, 1_769_904_000 + 28 * 86400)
    assert budget.period_bounds("daily", 1_771_000_000) == (1_770_940_800, 1_771_027_200)
    assert budget.period_bounds("none") == (0.0, None)


@pytest.fixture(params=["memory", "redis", "cluster"])
def shared(request, redis_prefix):
    if request.param == "memory":
        return {}
    return redis_settings(request, request.param, redis_prefix)


async def test_concurrent_requests_cannot_overrun_a_nearly_spent_budget(shared):
    each = reservation()
    limit = round(each * 10.5, 9)
    data = config_with(**shared)
    # sim-pro holds each request for a while: the burst below is in flight together.
    set_params(data, "sim-pro", ttft_ms=300)
    async with running_gateway(data) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            client, stubs = AdminClient(channel), Stubs(channel)
            key_id, secret = await client.create("team-b", budget_usd=limit)
            mine = (("x-api-key", secret),)
            request = chat.CreateChatCompletionRequest(model="sim-pro", messages=HELLO,
                                                       max_tokens=MAX_TOKENS)  # fmt: skip
            spent = 0.0
            for _ in range(8):  # nearly spent: room for two or three more
                spent += (
                    await stubs.chat.CreateChatCompletion(request, metadata=mine)
                ).usage.total_cost_usd

            async def attempt() -> float | grpc.aio.AioRpcError:
                try:
                    reply = await stubs.chat.CreateChatCompletion(request, metadata=mine)
                except grpc.aio.AioRpcError as exc:
                    return exc
                return reply.usage.total_cost_usd

            results = await asyncio.gather(*(attempt() for _ in range(40)))
            costs = [r for r in results if isinstance(r, float)]
            refusals = [r for r in results if not isinstance(r, float)]
            spent += sum(costs)
            assert 1 <= len(costs) <= 3 and len(refusals) == 40 - len(costs)
            # Worst cases all fitted, so the budget holds; and it was nearly all used.
            assert spent <= limit + 1e-12
            assert spent > limit - 2 * each
            error = refusals[0]
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert details(error)["ErrorInfo"].reason == "BUDGET_EXHAUSTED"  # type: ignore[attr-defined]
            assert f"monthly budget of ${limit:g} of key 'team-b'" in error.details()
            report = await client.usage.GetUsage(usage_pb.GetUsageRequest(), metadata=mine)
            assert report.budget.spent_usd == pytest.approx(spent)
            assert report.budget.reserved_usd == 0
            assert report.total.requests == 48 and report.total.errors == len(refusals)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
            refused = await http.post(
                "/v1/chat/completions", headers={"x-api-key": secret},
                json={"model": "sim-pro", "max_tokens": MAX_TOKENS,
                      "messages": [{"role": "user", "content": "hello"}]},
            )  # fmt: skip
            assert refused.status_code == 429
            assert "budget" in refused.json()["error"]["message"]


async def test_spend_survives_a_restart(tmp_path):
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    limit = round(reservation() * 2.5, 9)
    request = chat.CreateChatCompletionRequest(
        model="sim-pro", messages=HELLO, max_tokens=MAX_TOKENS
    )
    async with (
        running_gateway(data) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        _, secret = await AdminClient(channel).create("daily", budget_usd=limit,
                                                      budget_period="daily")  # fmt: skip
        mine = (("x-api-key", secret),)
        for _ in range(2):
            await Stubs(channel).chat.CreateChatCompletion(request, metadata=mine)
    async with (
        running_gateway(data) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await Stubs(channel).chat.CreateChatCompletion(request, metadata=mine)
        assert "daily budget" in caught.value.details()
        report = await AdminClient(channel).usage.GetUsage(
            usage_pb.GetUsageRequest(), metadata=mine
        )
        assert report.budget.spent_usd == pytest.approx(2 * reservation(), rel=0.2)
        assert report.budget.period == "daily"
