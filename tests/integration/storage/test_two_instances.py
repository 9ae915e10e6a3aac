"""Two gateway processes sharing PostgreSQL and Redis: one rate limit, one budget, one
key store (a revocation reaches both), one ledger."""

from __future__ import annotations

import asyncio
import math
import time
import uuid

import asyncpg
import grpc
import pytest
from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import model_service_pb2 as models

from tests.support.gateways import start_process, stop_process, write_config
from tests.support.grpc_stubs import Stubs
from tests.support.shared_state import (
    ADMIN,
    MAX_TOKENS,
    REDIS_URL,
    AdminClient,
    config_with,
    reservation,
)

HELLO = [chat.ChatMessage(role="user", content="hello")]


@pytest.fixture
async def two_gateways(tmp_path, pg_url, redis_prefix):
    data = config_with(database_url=pg_url, redis_url=REDIS_URL,
                       redis_prefix=f"{redis_prefix}{uuid.uuid4().hex[:6]}:")  # fmt: skip
    path = str(write_config(tmp_path, data))
    processes = [start_process("--config", path, "--no-http") for _ in range(2)]
    channels = []
    try:
        for gw in processes:
            assert gw.grpc_port, "".join(gw.output)
            channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}"))
        yield channels
    finally:
        for channel in channels:
            await channel.close()
        outputs = [stop_process(gw) for gw in processes]
        for gw, output in zip(processes, outputs, strict=True):
            assert gw.process.returncode == 0, output


async def test_two_instances_share_limits_budgets_keys_and_ledger(two_gateways, pg_url):
    a, b = two_gateways
    admin_a, admin_b = AdminClient(a), AdminClient(b)
    stubs = [Stubs(a), Stubs(b)]

    # 1. One rate limit: 200 concurrent requests split across both, 60 per minute.
    key_id, secret = await admin_a.create("burst", requests_per_minute=60)
    mine = (("x-api-key", secret),)
    request = chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO)

    async def attempt(i: int) -> grpc.StatusCode:
        try:
            await stubs[i % 2].chat.CreateChatCompletion(request, metadata=mine)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK

    started = time.monotonic()
    codes = await asyncio.gather(*(attempt(i) for i in range(200)))
    took = time.monotonic() - started
    served = codes.count(grpc.StatusCode.OK)
    # The bucket's 60, and one more for each second the burst lasted.
    assert 60 <= served <= 60 + math.ceil(took) + 1, took
    assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 200 - served
    assert {codes[i] for i in range(0, 200, 2)} == {codes[i] for i in range(1, 200, 2)}

    # 2. One budget: concurrent requests through both instances stay within it.
    each = reservation()
    limit = round(each * 5.5, 9)
    _, spender = await admin_b.create("spender", budget_usd=limit)
    pro = chat.CreateChatCompletionRequest(model="sim-pro", messages=HELLO, max_tokens=MAX_TOKENS)

    async def spend(i: int) -> float:
        try:
            reply = await stubs[i % 2].chat.CreateChatCompletion(
                pro, metadata=(("x-api-key", spender),)
            )
        except grpc.aio.AioRpcError as exc:
            assert "budget" in exc.details()
            return 0.0
        return reply.usage.total_cost_usd

    costs = await asyncio.gather(*(spend(i) for i in range(30)))
    assert 1 <= sum(c > 0 for c in costs) <= 5
    assert sum(costs) <= limit + 1e-12

    # 3. One key store: created on A, used on B, revoked on A, refused by B within ~1 s.
    _, roaming = await admin_a.create("roaming")
    theirs = (("x-api-key", roaming),)
    await stubs[1].models.ListModels(models.ListModelsRequest(), metadata=theirs)
    await admin_a.admin.RevokeKey(admin_pb.RevokeKeyRequest(key_id="roaming"), metadata=ADMIN)
    started = time.monotonic()
    while True:
        try:
            await stubs[1].models.ListModels(models.ListModelsRequest(), metadata=theirs)
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
            break
        await asyncio.sleep(0.05)
    revoked_after = time.monotonic() - started
    print(f"revocation reached the other instance after {revoked_after:.2f}s")
    assert revoked_after < 5  # the key cache's TTL, with room for a loaded machine

    # 4. One ledger: every request of the burst is recorded, refused ones included.
    deadline = time.monotonic() + 15
    conn = await asyncpg.connect(pg_url)
    try:
        while True:
            rows = await conn.fetch(
                "SELECT status, COUNT(*) AS n FROM usage_records WHERE key_id = $1 GROUP BY status",
                key_id,
            )
            counts = {r["status"]: r["n"] for r in rows}
            if sum(counts.values()) >= 200 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    assert counts == {"OK": served, "RESOURCE_EXHAUSTED": 200 - served}
