"""Keys the way SDKs send them: `authorization: Bearer <key>`, over REST (both facade
modes) and gRPC metadata. Kinds still never cross, and secrets stay out of the log."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import httpx
import openai
import pytest
from gateway.v1 import model_service_pb2 as models
from gateway.v1 import router_service_pb2 as router
from gateway.v1 import usage_service_pb2 as usage

from tests.support.facade import CHAT, MODES, both_modes, client, facade
from tests.support.gateways import API_KEY, ROUTER_KEY, running_gateway
from tests.support.grpc_stubs import details

MESSAGES = [{"role": "user", "content": "Say hello."}]


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture(params=MODES)
async def base_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with facade(request.param) as url:
        yield f"{url}/v1"


async def test_openai_sdk_with_only_api_key(base_url: str) -> None:
    async with openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as sdk:
        reply = await sdk.chat.completions.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
        assert reply.choices[0].message.content
        assert reply.choices[0].message.content.startswith("(simulated)")
        listed = [m.id async for m in sdk.models.list()]
        assert "sim-mini" in listed
        stream = await sdk.completions.create(model="sim-mini", prompt="Hi", stream=True)
        assert "".join([c.choices[0].text async for c in stream]).startswith("(simulated)")


@pytest.mark.parametrize("wrong", [ROUTER_KEY, "gw-not-a-key-000000000000"])
async def test_openai_sdk_refuses_a_router_or_unknown_key(base_url: str, wrong: str) -> None:
    async with openai.AsyncOpenAI(base_url=base_url, api_key=wrong, max_retries=0) as sdk:
        with pytest.raises(openai.AuthenticationError) as caught:
            await sdk.chat.completions.create(model="sim-mini", messages=MESSAGES)  # type: ignore[arg-type]
    assert caught.value.status_code == 401
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "unauthenticated"


@both_modes
async def test_kinds_never_cross_as_bearer(mode: str) -> None:
    infer = {"prompt": "Hi", "max_tokens": 3}
    async with client(mode) as c:
        assert (
            await c.post("/v1/infer", json=infer, headers=bearer(ROUTER_KEY))
        ).status_code == 200
        ok = await c.get("/v1/deployments", headers=bearer(ROUTER_KEY))
        assert ok.status_code == 200 and ok.json()["data"]
        # A router key as Bearer on interface A, an API key on B: refused exactly as
        # the same key in the other kind's header is.
        for path, key, header in (
            ("/v1/models", ROUTER_KEY, "x-api-key"),
            ("/v1/deployments", API_KEY, "x-router-key"),
        ):
            as_bearer = await c.get(path, headers=bearer(key))
            as_header = await c.get(path, headers={header: key})
            assert as_bearer.status_code == as_header.status_code == 401
            assert as_bearer.json()["error"]["type"] == as_header.json()["error"]["type"]
            assert as_bearer.json()["error"]["code"] == as_header.json()["error"]["code"]
        # The kind's own header wins over a Bearer token: a wrong x-api-key is not
        # rescued by a right Bearer key.
        both = {"x-api-key": "gw-not-a-key-000000000000", **bearer(API_KEY)}
        assert (await c.post("/v1/chat/completions", json=CHAT, headers=both)).status_code == 401
        # Other schemes and empty tokens are no key at all.
        for value in (f"Basic {API_KEY}", "Bearer", API_KEY):
            refused = await c.get("/v1/models", headers={"authorization": value})
            assert refused.status_code == 401
            assert "missing x-api-key" in refused.json()["error"]["message"]
        # The scheme is case-insensitive, as RFC 9110 says.
        lower = await c.get("/v1/models", headers={"authorization": f"bearer {API_KEY}"})
        assert lower.status_code == 200


@both_modes
async def test_usage_api_takes_a_bearer_key_of_either_kind(mode: str) -> None:
    async with client(mode) as c:
        await c.get("/v1/models", headers=bearer(API_KEY))
        mine = await c.get("/v1/usage", headers=bearer(API_KEY))
        assert mine.status_code == 200 and mine.json()["key_name"] == "dev-api"
        theirs = await c.get("/v1/usage", headers=bearer(ROUTER_KEY))
        assert theirs.status_code == 200 and theirs.json()["key_name"] == "dev-router"
        unknown = await c.get("/v1/usage", headers=bearer("gw-not-a-key-000000000000"))
        assert unknown.status_code == 401


async def test_bearer_in_grpc_metadata(stubs) -> None:  # type: ignore[no-untyped-def]
    listed = await stubs.models.ListModels(
        models.ListModelsRequest(), metadata=(("authorization", f"Bearer {API_KEY}"),)
    )
    assert "sim-mini" in [m.id for m in listed.data]
    answer = await stubs.router.Infer(
        router.InferRequest(prompt="Hi", max_tokens=2),
        metadata=(("authorization", f"Bearer {ROUTER_KEY}"),),
    )
    assert answer.choices[0].text.startswith("(simulated)")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.models.ListModels(
            models.ListModelsRequest(), metadata=(("authorization", f"Bearer {ROUTER_KEY}"),)
        )
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert details(caught.value)["ErrorInfo"].reason == "UNAUTHENTICATED"  # type: ignore[attr-defined]


async def test_usage_over_grpc_with_bearer(gateway) -> None:  # type: ignore[no-untyped-def]
    from gateway.v1 import usage_service_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stub = usage_service_pb2_grpc.UsageServiceStub(channel)
        got = await stub.GetUsage(
            usage.GetUsageRequest(), metadata=(("authorization", f"Bearer {ROUTER_KEY}"),)
        )
    assert got.key_name == "dev-router"


@both_modes
async def test_bearer_secrets_never_reach_the_log(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "gw-secret-never-logged-000000"
    caplog.set_level(logging.DEBUG)
    async with client(mode) as c:
        for path in ("/v1/models", "/v1/deployments", "/v1/usage"):
            assert (await c.get(path, headers=bearer(secret))).status_code == 401
        await c.post("/v1/chat/completions", json=CHAT, headers=bearer(secret))
    assert secret not in caplog.text
    assert API_KEY not in caplog.text


async def test_httpx_auth_header_reaches_the_rpc() -> None:
    """A client that sets auth through its own mechanism (httpx's auth hook) works."""

    def sign(request: httpx.Request) -> httpx.Request:
        request.headers["Authorization"] = f"Bearer {API_KEY}"
        return request

    async with facade("in_process") as url, httpx.AsyncClient(base_url=url, auth=sign) as c:
        assert (await c.get("/v1/models")).status_code == 200


async def test_stored_keys_and_admin_keys_as_bearer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.support.shared_state import ADMIN_KEY, config_with

    async with (
        running_gateway(config_with(sqlite_path=str(tmp_path / "gw.db"))) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        admin = bearer(ADMIN_KEY)
        created = await http.post(
            "/v1/admin/keys", headers=admin, json={"name": "s", "kind": "router"}
        )
        assert created.status_code == 200, created.text
        secret, key_id = created.json()["secret"], created.json()["key"]["id"]
        # A stored router key as Bearer: interface B yes, interface A no.
        assert (await http.get("/v1/deployments", headers=bearer(secret))).status_code == 200
        refused = await http.get("/v1/models", headers=bearer(secret))
        assert refused.status_code == 401 and "invalid Bearer key" in refused.text
        # An admin Bearer key reads any key's usage; the key itself reads its own.
        theirs = await http.get(f"/v1/usage?key_id={key_id}", headers=admin)
        assert theirs.status_code == 200 and theirs.json()["key_id"] == key_id
        own = await http.get("/v1/usage", headers=bearer(secret))
        assert own.status_code == 200 and own.json()["key_id"] == key_id
        # Revoked: refused as Bearer at once, saying so (a key the gateway never had,
        # remembered as unknown beside it, takes nothing from the revocation).
        unknown = await http.get("/v1/deployments", headers=bearer("gw-no-such-key-00000000"))
        assert unknown.status_code == 401
        revoked = await http.post(f"/v1/admin/keys/{key_id}:revoke", headers=admin, json={})
        assert revoked.status_code == 200, revoked.text
        gone = await http.get("/v1/deployments", headers=bearer(secret))
        assert gone.status_code == 401 and "revoked" in gone.json()["error"]["message"]
