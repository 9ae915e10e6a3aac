"""Fixtures and helpers for tests of keys, limits, budgets and the ledger: a private
PostgreSQL database and Redis key prefix per test session, both removed afterwards.
The fixtures reach every test through the root conftest."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import grpc
import pytest
from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import admin_service_pb2_grpc, usage_service_pb2_grpc
from redis.asyncio import Redis

from server.base import costs, tokens
from server.base.config import Price
from server.base.generation import GenerationRequest, Message
from tests.support.gateways import default_config_dict
from tests.support.redis_nodes import redis_cluster, redis_sentinel

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"
ADMIN_KEY = "gw-test-admin-key-00000000000"
ADMIN = (("x-admin-key", ADMIN_KEY),)
PRO = Price(input=5.0, output=20.0)  # sim-pro's price in the default config
# A request of this many tokens at most reserves `reservation()` against a budget.
MAX_TOKENS = 20


def reservation() -> float:
    """What a "hello" to sim-pro with MAX_TOKENS reserves, in USD."""
    request = GenerationRequest(messages=(Message("user", "hello"),), max_tokens=MAX_TOKENS)
    assert tokens.estimate_prompt(request) == 9
    return costs.max_cost([PRO], request, 1024)


@asynccontextmanager
async def fresh_database(prefix: str) -> AsyncIterator[str]:
    """A new PostgreSQL database named `prefix` and a random tail; yields its name and
    drops it at the end."""
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield name
    finally:
        admin = await asyncpg.connect(PG_ADMIN_URL)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@pytest.fixture(scope="session")
async def pg_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at its end."""
    async with fresh_database("gw_test_") as name:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"


@pytest.fixture(scope="session")
async def redis_prefix() -> AsyncIterator[str]:
    """A Redis key prefix private to this session; its keys are deleted at the end."""
    prefix = f"gwtest:{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = Redis.from_url(REDIS_URL)
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A six-node Redis Cluster on loopback for this test session (skipped without
    redis-server)."""
    with redis_cluster(tmp_path_factory.mktemp("redis-cluster")) as url:
        yield url


@pytest.fixture(scope="session")
def redis_sentinel_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A primary, its replica and a Sentinel on loopback for this test session
    (skipped without redis-server)."""
    with redis_sentinel(tmp_path_factory.mktemp("redis-sentinel")) as nodes:
        yield nodes.url


def redis_settings(request: pytest.FixtureRequest, kind: str, prefix: str) -> dict[str, Any]:
    """Storage settings putting a test's limits and budgets on one Redis (`redis`), on
    the session's Redis Cluster (`cluster`) or on its Sentinel's primary (`sentinel`),
    under a prefix of its own."""
    url = REDIS_URL if kind == "redis" else request.getfixturevalue(f"redis_{kind}_url")
    return {"redis_url": url, "redis_prefix": f"{prefix}{uuid.uuid4().hex[:6]}:"}


def config_with(
    *,
    sqlite_path: str = ":memory:",
    database_url: str | None = None,
    redis_url: str | None = None,
    redis_prefix: str = "gateway:",
    **sections: dict[str, Any],
) -> dict[str, Any]:
    """The test config (instant simulated models) plus an admin key and the storage given."""
    data = default_config_dict()
    data["storage"] |= {"sqlite_path": sqlite_path, "redis_prefix": redis_prefix}
    if database_url:
        data["storage"]["database_url"] = database_url
    if redis_url:
        data["storage"]["redis_url"] = redis_url
    data["keys"].append({"name": "test-admin", "kind": "admin", "secret": ADMIN_KEY})
    data.update(sections)
    return data


class AdminClient:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        self.usage = usage_service_pb2_grpc.UsageServiceStub(channel)

    async def create(self, name: str, kind: str = "api", **limits: Any) -> tuple[str, str]:
        """Creates a key; returns its id and secret."""
        reply = await self.admin.CreateKey(
            admin_pb.CreateKeyRequest(name=name, kind=kind, **limits), metadata=ADMIN
        )
        return reply.key.id, reply.secret
