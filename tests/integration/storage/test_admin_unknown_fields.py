"""The administrative API refuses what its requests do not have, naming it, as the
inference API refuses an unknown parameter: a JSON key, a query parameter, a body sent
to a method that reads none, and over gRPC a field number the message lacks. Nothing is
made when a field is refused (a budget given under another gateway's name is not a key
without a budget)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import admin_service_pb2 as admin_pb
from gateway.v1 import admin_service_pb2_grpc, usage_service_pb2_grpc
from gateway.v1 import usage_service_pb2 as usage_pb

from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import details
from tests.support.shared_state import ADMIN, ADMIN_KEY, config_with

HEADERS = {"x-admin-key": ADMIN_KEY}


@pytest.fixture
async def gateway(tmp_path: Any) -> AsyncIterator[tuple[httpx.AsyncClient, grpc.aio.Channel]]:
    async with (
        running_gateway(config_with(sqlite_path=str(tmp_path / "gw.db"))) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as http,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        yield http, channel


def refused(reply: httpx.Response, param: str) -> None:
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert (error["code"], error["param"]) == ("unknown_parameter", param), error
    assert error["message"].startswith(f"{param}: ")


def tag(number: int) -> bytes:
    """A varint field `number` holding 3, as a newer client would encode it."""
    key, out = number << 3, b""
    while key > 0x7F:
        out += bytes([key & 0x7F | 0x80])
        key >>= 7
    return out + bytes([key, 3])


async def test_unknown_json_keys_are_refused_by_name_and_nothing_is_made(gateway) -> None:
    http, _ = gateway
    refused(await http.post("/v1/admin/keys", headers=HEADERS,
                            json={"name": "svc", "kind": "api", "max_budget": 3}), "max_budget")  # fmt: skip
    keys = (await http.get("/v1/admin/keys", headers=HEADERS)).json().get("keys", [])
    assert [k for k in keys if k["name"] == "svc"] == []
    org = await http.post("/v1/admin/orgs", headers=HEADERS, json={"name": "acme"})
    org_id = org.json()["org"]["id"]
    team = {"org_id": org_id, "name": "search", "limits": {"models": []}, "budget_usd": 5}
    refused(await http.post("/v1/admin/teams", headers=HEADERS, json=team), "budget_usd")
    nested = {"org_id": org_id, "name": "search", "limits": {"budget": 5}}
    refused(await http.post("/v1/admin/teams", headers=HEADERS, json=nested), "limits.budget")
    teams = (await http.get("/v1/admin/teams", headers=HEADERS)).json().get("teams", [])
    assert teams == []
    # A known field still works, and a null one is no value (as the inference API reads it).
    made = await http.post("/v1/admin/keys", headers=HEADERS,
                           json={"name": "svc", "kind": "api", "budget_usd": 3, "owner": None})  # fmt: skip
    assert made.status_code == 200 and made.json()["key"]["budget_usd"] == 3


async def test_query_parameters_and_bodies_a_method_does_not_read(gateway) -> None:
    http, _ = gateway
    refused(await http.get("/v1/admin/keys", headers=HEADERS, params={"org": "o"}), "org")
    refused(await http.get("/v1/usage", headers=HEADERS, params={"key": "x"}), "key")
    # A query beside a JSON body that holds the whole request.
    refused(await http.post("/v1/admin/keys", headers=HEADERS, params={"budget_usd": "3"},
                            json={"name": "svc", "kind": "api"}), "budget_usd")  # fmt: skip
    # A body sent to a DELETE, whose fields go in the query.
    org = await http.post("/v1/admin/orgs", headers=HEADERS, json={"name": "acme"})
    team = await http.post("/v1/admin/teams", headers=HEADERS,
                           json={"org_id": org.json()["org"]["id"], "name": "t"})  # fmt: skip
    path = f"/v1/admin/teams/{team.json()['team']['id']}"
    body = await http.request("DELETE", path, headers=HEADERS, json={"revoke_keys": True})
    refused(body, "revoke_keys")
    assert "give it in the query" in body.json()["error"]["message"]
    listed = await http.request("GET", "/v1/admin/keys", headers=HEADERS, json=[1])
    assert listed.status_code == 400 and "takes no request body" in listed.text
    # An empty object, or no body, is no field at all; known query parameters are read.
    assert (await http.request("DELETE", path, headers=HEADERS, json={})).status_code == 200
    assert (await http.get("/v1/admin/keys", headers=HEADERS,
                           params={"include_revoked": "true"})).status_code == 200  # fmt: skip


async def test_grpc_requests_with_field_numbers_the_message_lacks(gateway) -> None:
    _, channel = gateway
    admin = admin_service_pb2_grpc.AdminServiceStub(channel)
    newer = admin_pb.CreateKeyRequest.FromString(
        # After fields of every width (a double, a varint, strings): found all the same.
        admin_pb.CreateKeyRequest(
            name="svc", kind="api", budget_usd=2.5, requests_per_minute=5
        ).SerializeToString()
        + tag(99)
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await admin.CreateKey(newer, metadata=ADMIN)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "#99: is not a field of gateway.v1.CreateKeyRequest"
    found = details(caught.value)
    assert found["ErrorInfo"].reason == "UNKNOWN_PARAMETER"  # type: ignore[attr-defined]
    assert [v.field for v in found["BadRequest"].field_violations] == ["#99"]  # type: ignore[attr-defined]
    assert (await admin.ListKeys(admin_pb.ListKeysRequest(), metadata=ADMIN)).keys == []

    # Inside a nested message: named by its path.
    org = await admin.CreateOrganization(admin_pb.CreateOrganizationRequest(name="acme"),
                                         metadata=ADMIN)  # fmt: skip
    limits = admin_pb.Limits.FromString(
        admin_pb.Limits(models=["m"]).SerializeToString() + tag(300)
    )
    team = admin_pb.CreateTeamRequest(org_id=org.org.id, name="t", limits=limits)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await admin.CreateTeam(team, metadata=ADMIN)
    assert caught.value.details() == "limits.#300: is not a field of gateway.v1.Limits"
    assert (await admin.ListTeams(admin_pb.ListTeamsRequest(), metadata=ADMIN)).teams == []

    usage = usage_service_pb2_grpc.UsageServiceStub(channel)
    asked = usage_pb.GetUsageRequest.FromString(usage_pb.GetUsageRequest().SerializeToString()
                                                + tag(7))  # fmt: skip
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await usage.GetUsage(asked, metadata=ADMIN)
    assert details(caught.value)["ErrorInfo"].reason == "UNKNOWN_PARAMETER"  # type: ignore[attr-defined]
    # The same requests without the unknown field are served.
    made = await admin.CreateKey(admin_pb.CreateKeyRequest(name="svc", kind="api"), metadata=ADMIN)
    assert made.key.name == "svc"
