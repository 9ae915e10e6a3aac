"""A request without max_tokens on a key with a budget: the gateway bounds what the
upstream may generate to what the reservation covers, so concurrent requests overrun the
budget by one reservation at most; and a prompt that cannot fit the model's context
window is refused before anything is billed."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import usage_service_pb2 as usage_pb

from tests.support.gateways import (
    API_KEY,
    eventually,
    running_gateway,
    start_process,
    stop_process,
    write_config,
)
from tests.support.grpc_stubs import Stubs
from tests.support.shared_state import REDIS_URL, AdminClient, config_with

LONG = 2000  # what the model says when nothing bounds it
DEFAULT_MAX = 100  # limits.default_max_tokens: what a request without max_tokens reserves
PRICE = {"input": 1.0, "output": 10.0}  # $0.001 for DEFAULT_MAX output tokens
HELLO = [{"role": "user", "content": "hello"}]


def talkative(shared: dict[str, Any]) -> dict[str, Any]:
    data = config_with(**shared, limits={"default_max_tokens": DEFAULT_MAX})
    # Every request is in flight (admitted, reserved) while the next ones arrive.
    params = {"ttft_ms": 300, "tokens_per_second": 0, "min_reply_tokens": LONG,
              "max_reply_tokens": LONG}  # fmt: skip
    data["models"].append({
        "id": "talkative", "owned_by": "test", "created": 0, "price": PRICE,
        "providers": [{"id": "talkative-primary", "type": "primary", "adapter": "simulated",
                       "params": params}],
    })  # fmt: skip
    return data


@pytest.fixture(params=["memory", "redis"])
def shared(request: pytest.FixtureRequest, redis_prefix: str) -> dict[str, Any]:
    if request.param == "memory":
        return {}
    return {"redis_url": REDIS_URL, "redis_prefix": f"{redis_prefix}{uuid.uuid4().hex[:6]}:"}


async def test_concurrent_unbounded_requests_overrun_by_one_reservation_at_most(
    shared: dict[str, Any],
) -> None:
    limit = 0.01
    each = (9 * PRICE["input"] + DEFAULT_MAX * PRICE["output"]) / 1e6  # a "hello" reserves
    async with (
        running_gateway(talkative(shared)) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as http,
    ):
        admin = AdminClient(channel)
        _, secret = await admin.create("capped", budget_usd=limit)
        stubs = Stubs(channel)

        async def over_rest() -> int | None:
            reply = await http.post("/v1/chat/completions", headers={"x-api-key": secret},
                                    json={"model": "talkative", "messages": HELLO})  # fmt: skip
            if reply.status_code == 429:
                return None
            assert reply.json()["choices"][0]["finish_reason"] == "length"
            return int(reply.json()["usage"]["completion_tokens"])

        async def over_grpc() -> int | None:
            request = chat.CreateChatCompletionRequest(
                model="talkative", messages=[chat.ChatMessage(role="user", content="hello")]
            )
            try:
                reply = await stubs.chat.CreateChatCompletion(
                    request, metadata=(("x-api-key", secret),)
                )
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                return None
            return reply.usage.completion_tokens

        results = await asyncio.gather(*(over_rest() for _ in range(15)),
                                       *(over_grpc() for _ in range(15)))  # fmt: skip
        served = [r for r in results if r is not None]
        assert served and all(r == DEFAULT_MAX for r in served)
        assert len(served) < 30  # the budget refused the rest
        report = await admin.usage.GetUsage(
            usage_pb.GetUsageRequest(), metadata=(("x-api-key", secret),)
        )
        assert report.budget.spent_usd <= limit + each
        assert report.budget.reserved_usd == 0

        # A key without a budget is not bounded: the model says all it has to say.
        free = await http.post("/v1/chat/completions", headers={"x-api-key": API_KEY},
                               json={"model": "talkative", "messages": HELLO})  # fmt: skip
        assert free.json()["usage"]["completion_tokens"] == LONG


async def test_a_prompt_beyond_the_context_window_is_refused_unbilled() -> None:
    data = config_with()
    small = next(m for m in data["models"] if m["id"] == "sim-mini")
    small["context_window"] = 50
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        long = [{"role": "user", "content": "word " * 400}]
        reply = await http.post("/v1/chat/completions", headers={"x-api-key": API_KEY},
                                json={"model": "sim-mini", "messages": long})  # fmt: skip
        assert reply.status_code == 400
        error = reply.json()["error"]
        assert error["param"] == "messages" and "takes 50 at most" in error["message"]
        reply = await http.post("/v1/completions", headers={"x-api-key": API_KEY},
                                json={"model": "sim-mini", "prompt": "word " * 400})  # fmt: skip
        assert reply.status_code == 400 and reply.json()["error"]["param"] == "prompt"
        assert gw.gateway is not None
        assert gw.gateway.live.current.catalog.upstreams["sim-mini"][0].ttft_ms.value is None


@pytest.mark.slow
@pytest.mark.parametrize("redis", [False, True], ids=["shared-state", "redis"])
async def test_300_unbounded_requests_on_two_workers_overrun_by_one_reservation_at_most(
    tmp_path: Path, redis_prefix: str, redis: bool
) -> None:
    limit = 0.01
    each = (9 * PRICE["input"] + DEFAULT_MAX * PRICE["output"]) / 1e6
    shared = {"redis_url": REDIS_URL, "redis_prefix": f"{redis_prefix}w:"} if redis else {}
    data = talkative({**shared, "sqlite_path": str(tmp_path / "gateway.db")})
    data["operations"] = {"request_log": False}
    gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2",
                       timeout_s=60)  # fmt: skip
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=60,
                              limits=httpx.Limits(max_connections=100)) as http,
        ):  # fmt: skip
            admin = AdminClient(channel)
            _, secret = await admin.create("capped", budget_usd=limit)
            stubs = Stubs(channel)

            async def over_rest() -> int:
                reply = await http.post("/v1/chat/completions", headers={"x-api-key": secret},
                                        json={"model": "talkative", "messages": HELLO})  # fmt: skip
                return reply.status_code

            async def over_grpc() -> int:
                request = chat.CreateChatCompletionRequest(
                    model="talkative", messages=[chat.ChatMessage(role="user", content="hello")]
                )
                try:
                    await stubs.chat.CreateChatCompletion(
                        request, metadata=(("x-api-key", secret),)
                    )
                except grpc.aio.AioRpcError:
                    return 429
                return 200

            codes = await asyncio.gather(*(over_rest() for _ in range(150)),
                                         *(over_grpc() for _ in range(150)))  # fmt: skip
            assert set(codes) == {200, 429}

            async def settled() -> None:  # in whichever worker served each call
                report = await admin.usage.GetUsage(
                    usage_pb.GetUsageRequest(), metadata=(("x-api-key", secret),)
                )
                assert report.budget.reserved_usd == 0
                assert report.budget.spent_usd <= limit + each

            await eventually(settled)
    finally:
        output = stop_process(gw, timeout_s=60)
    assert gw.process.returncode == 0, output
