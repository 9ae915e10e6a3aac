"""The key store, its migrations, the admin API (gRPC and REST), the keys CLI and the
usage API, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
import time

import grpc
import httpx
import pytest
from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import model_service_pb2 as models
from gateway.v1 import usage_service_pb2 as usage_pb

from server.base.config import StorageConfig
from server.storage import open_store
from server.storage.migrations import MIGRATIONS, migrate
from tests.support.gateways import COMMAND_TIMEOUT_S, ROOT, eventually, running_gateway
from tests.support.grpc_stubs import API, Stubs
from tests.support.shared_state import ADMIN, ADMIN_KEY, AdminClient, config_with

HELLO = [chat.ChatMessage(role="user", content="hello")]


@pytest.fixture(params=["sqlite", "postgresql"])
def storage(request, tmp_path, pg_url):
    if request.param == "sqlite":
        return StorageConfig(sqlite_path=str(tmp_path / "keys.db"))
    return StorageConfig(database_url=pg_url)


async def test_migrations_are_versioned_and_idempotent(storage):
    store = await open_store(storage)
    try:
        rows = await store.db.fetch("SELECT version FROM schema_migrations ORDER BY version")
        assert [r["version"] for r in rows] == [m[0] for m in MIGRATIONS]
        assert await migrate(store.db) == []
    finally:
        await store.aclose()
    again = await open_store(storage)  # a second start changes nothing
    await again.aclose()


async def test_store_keeps_a_digest_and_a_prefix_never_the_secret(storage):
    store = await open_store(storage)
    try:
        key, secret = await store.keys.create(kind="router", name="svc-b", owner="team-b",
                                              tokens_per_minute=1000, budget_usd=2.5)  # fmt: skip
        rows = await store.db.fetch("SELECT * FROM api_keys WHERE id = ?", key.id)
        stored = json.dumps(rows, default=str)
        assert secret not in stored and secret[12:] not in stored
        assert rows[0]["digest"] == hashlib.sha256(secret.encode()).hexdigest()
        assert secret.startswith(rows[0]["prefix"]) and len(rows[0]["prefix"]) == 14
        assert (await store.keys.get("svc-b")) == key
        revoked = await store.keys.revoke(key.id)
        assert revoked is not None and revoked.revoked
        assert key.id not in [k.id for k in await store.keys.list()]
        assert key.id in [k.id for k in await store.keys.list(include_revoked=True)]
    finally:
        await store.aclose()


async def test_admin_api_over_grpc_and_revocation_within_the_cache_ttl(tmp_path):
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    async with (
        running_gateway(data) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        client, stubs = AdminClient(channel), Stubs(channel)
        key_id, secret = await client.create("team-a", owner="alice", requests_per_minute=500)
        mine = (("x-api-key", secret),)
        await stubs.models.ListModels(models.ListModelsRequest(), metadata=mine)
        # A key of one kind never stands for another.
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.router.Infer(_infer(), metadata=(("x-router-key", secret),))
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        listed = await client.admin.ListKeys(admin_pb.ListKeysRequest(), metadata=ADMIN)
        assert [k.name for k in listed.keys] == ["team-a"]
        got = await client.admin.GetKey(admin_pb.GetKeyRequest(key_id="team-a"), metadata=ADMIN)
        assert got.key.id == key_id and got.key.requests_per_minute == 500
        assert got.key.owner == "alice" and not got.key.revoked
        for metadata in ((), API, mine):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await client.admin.ListKeys(admin_pb.ListKeysRequest(), metadata=metadata)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.admin.GetKey(admin_pb.GetKeyRequest(key_id="nope"), metadata=ADMIN)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await client.admin.CreateKey(admin_pb.CreateKeyRequest(name="x", kind="root"),
                                         metadata=ADMIN)  # fmt: skip
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        # Revoked behind this instance's back (as another instance or the CLI would):
        # the key stops working once the one-second cache entry lapses.
        await gw.gateway.store.keys.revoke(key_id)
        started = time.monotonic()
        while True:
            try:
                await stubs.models.ListModels(models.ListModelsRequest(), metadata=mine)
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
                assert "revoked" in exc.details()
                break
            await asyncio.sleep(0.05)
        assert time.monotonic() - started < 5  # the next refresh, with room for a loaded machine
        # The config file's keys keep working beside stored ones.
        await stubs.models.ListModels(models.ListModelsRequest(), metadata=API)


async def test_admin_api_over_rest(tmp_path):
    async with (
        running_gateway(config_with(sqlite_path=str(tmp_path / "gw.db"))) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        admin = {"x-admin-key": ADMIN_KEY}
        created = await http.post("/v1/admin/keys", headers=admin, json={
            "name": "svc", "kind": "api", "budget_usd": 3, "budget_period": "daily"})  # fmt: skip
        assert created.status_code == 200, created.text
        body = created.json()
        secret, key_id = body["secret"], body["key"]["id"]
        assert body["key"]["prefix"] == secret[:11]
        assert (await http.get("/v1/models", headers={"x-api-key": secret})).status_code == 200
        listed = await http.get("/v1/admin/keys", headers=admin)
        assert [k["id"] for k in listed.json()["keys"]] == [key_id]
        assert "secret" not in listed.text and secret not in listed.text
        assert (await http.get("/v1/admin/keys", headers={"x-api-key": secret})).status_code == 401
        revoked = await http.post(f"/v1/admin/keys/{key_id}:revoke", headers=admin, json={})
        assert revoked.status_code == 200 and revoked.json()["key"]["revoked"] is True
        # Revoked on this instance: refused at once.
        refused = await http.get("/v1/models", headers={"x-api-key": secret})
        assert refused.status_code == 401


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli.main", "keys", *args], capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S, cwd=ROOT,
    )  # fmt: skip


async def test_keys_cli_shows_the_secret_once_and_the_gateway_accepts_it(tmp_path):
    db = str(tmp_path / "cli.db")
    created = _cli("create", "--name", "batch", "--kind", "api", "--owner", "data",
                   "--rpm", "100", "--budget-usd", "10", "--json", "--sqlite-path", db)  # fmt: skip
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    secret = key["secret"]
    listing = _cli("list", "--sqlite-path", db)
    shown = _cli("show", "batch", "--sqlite-path", db)
    assert key["id"] in listing.stdout and key["prefix"] in shown.stdout
    assert secret not in listing.stdout + shown.stdout
    async with (
        running_gateway(config_with(sqlite_path=db, limits={"count_listings": True})) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        stubs = Stubs(channel)
        call = stubs.models.ListModels(
            models.ListModelsRequest(), metadata=(("x-api-key", secret),)
        )
        await call
        assert dict(await call.initial_metadata())["x-ratelimit-limit-requests"] == "100"
        revoked = _cli("revoke", key["id"], "--sqlite-path", db, "--json")
        assert json.loads(revoked.stdout)["revoked_at"] is not None

        async def refused() -> None:
            # The key directory learns of the revocation at its next refresh.
            try:
                await stubs.models.ListModels(
                    models.ListModelsRequest(), metadata=(("x-api-key", secret),)
                )
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
                return
            raise AssertionError("a revoked key is still served")

        await eventually(refused)
    assert _cli("show", "missing", "--sqlite-path", db).returncode == 1


async def test_an_expired_key_is_refused(tmp_path):
    async with running_gateway(config_with(sqlite_path=str(tmp_path / "gw.db"))) as gw:
        _, secret = await gw.gateway.store.keys.create(kind="api", name="old",
                                                       expires_at=time.time() - 1)  # fmt: skip
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await Stubs(channel).models.ListModels(
                    models.ListModelsRequest(), metadata=(("x-api-key", secret),)
                )
            assert "expired" in caught.value.details()


async def test_usage_api_reports_own_spend_by_model_and_day(storage):
    data = config_with(sqlite_path=storage.sqlite_path, database_url=storage.database_url)
    async with running_gateway(data) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            client, stubs = AdminClient(channel), Stubs(channel)
            key_id, secret = await client.create(f"usage-{time.time_ns()}")
            mine = (("x-api-key", secret),)
            spent = 0.0
            for model in ("sim-mini", "sim-mini", "sim-pro"):
                reply = await stubs.chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model=model, messages=HELLO), metadata=mine
                )
                spent += reply.usage.total_cost_usd
            with pytest.raises(grpc.aio.AioRpcError):
                await stubs.chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model="no-such", messages=HELLO), metadata=mine
                )
            report = await client.usage.GetUsage(usage_pb.GetUsageRequest(), metadata=mine)
            assert report.key_id == key_id
            assert report.total.requests == 4 and report.total.errors == 1
            assert report.total.cost_usd == pytest.approx(spent)
            by_model = {b.model: b for b in report.by_model}
            assert by_model["sim-mini"].requests == 2 and by_model["sim-pro"].requests == 1
            assert by_model["no-such"].errors == 1 and by_model["no-such"].cost_usd == 0
            today = time.strftime("%Y-%m-%d", time.gmtime())
            assert [d.day for d in report.by_day] == [today]
            assert len(report.by_day_and_model) == 3
            # An admin reads any key; a range in the past is empty.
            other = await client.usage.GetUsage(
                usage_pb.GetUsageRequest(key_id=key_id, end_time=int(time.time()) - 3600),
                metadata=ADMIN,
            )
            assert other.total.requests == 0
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await client.usage.GetUsage(
                    usage_pb.GetUsageRequest(key_id="cfg-dev-api"), metadata=mine
                )
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
            rest = await http.get("/v1/usage", headers={"x-api-key": secret})
            assert rest.status_code == 200, rest.text
            assert float(rest.json()["total"]["cost_usd"]) == pytest.approx(spent)


def _infer():  # type: ignore[no-untyped-def]
    from gateway.v1 import router_service_pb2 as router

    return router.InferRequest(prompt="hi")
