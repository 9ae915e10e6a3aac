"""Organisations, teams, users and memberships through the admin API: team-scoped admin
keys, a team with live keys, a stale If-Match, budgets above a parent's, model
allowlists at every level, and an audit event for every change."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import usage_service_pb2 as usage_pb
from gateway.v1.usage_service_pb2_grpc import UsageServiceStub

from tests.support.gateways import API_KEY, ROUTER_KEY, running_gateway
from tests.support.grpc_stubs import details
from tests.support.shared_state import ADMIN_KEY, config_with

ADMIN = {"x-admin-key": ADMIN_KEY}
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def storage(request: pytest.FixtureRequest, tmp_path: Any) -> dict[str, Any]:
    if request.param == "sqlite":
        return {"sqlite_path": str(tmp_path / "gw.db")}
    return {"database_url": request.getfixturevalue("pg_url")}


@pytest.fixture
async def http(storage: dict[str, Any]) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        running_gateway(config_with(**storage)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
    ):
        yield client


async def audit(http: httpx.AsyncClient, **filters: Any) -> list[dict[str, Any]]:
    reply = await http.get("/v1/admin/audit", headers=ADMIN, params={"page_size": 1000, **filters})
    assert reply.status_code == 200, reply.text
    return list(reply.json().get("events", []))


async def changed(http: httpx.AsyncClient, since: int) -> list[dict[str, Any]]:
    """The audit events after event `since`."""
    return [e for e in await audit(http) if int(e["seq"]) > since]


async def last_seq(http: httpx.AsyncClient) -> int:
    events = await audit(http)
    return int(events[-1]["seq"]) if events else 0


async def setup_org(http: httpx.AsyncClient, name: str, **limits: Any) -> dict[str, Any]:
    reply = await http.post("/v1/admin/orgs", headers=ADMIN, json={"name": name, "limits": limits})
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["org"])


async def setup_team(http: httpx.AsyncClient, org: str, name: str, **limits: Any) -> dict[str, Any]:
    reply = await http.post(
        "/v1/admin/teams", headers=ADMIN, json={"org_id": org, "name": name, "limits": limits}
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json()["team"])


async def test_every_change_leaves_one_audit_event_with_before_and_after(
    http: httpx.AsyncClient,
) -> None:
    start = await last_seq(http)
    org = await setup_org(http, f"acme-{start}", budget_usd=10)
    team = await setup_team(http, org["id"], "search", budget_usd=50, models=["sim-pro"])
    # A child budget above its parent's is accepted, and shown capped.
    assert team["limits"]["budget_usd"] == 50 and team["effective_budget_usd"] == 10
    assert team["effective_models"] == ["sim-pro"]
    key = await http.post("/v1/admin/keys", headers=ADMIN,
                          json={"name": "svc", "kind": "api", "team": team["id"]})  # fmt: skip
    assert key.status_code == 200 and key.json()["key"]["team"] == team["id"]
    secret = key.json()["secret"]
    patched = await http.patch(f"/v1/admin/teams/{team['id']}", headers=ADMIN,
                               json={"limits": {"budget_usd": 5}})  # fmt: skip
    assert patched.status_code == 200 and patched.json()["team"]["effective_budget_usd"] == 5
    user = await http.post("/v1/admin/users", headers=ADMIN,
                           json={"email": "ada@example.com", "subject": f"sub-{start}"})  # fmt: skip
    assert user.status_code == 200, user.text
    user_id = user.json()["user"]["id"]
    member = await http.put("/v1/admin/memberships", headers=ADMIN,
                            json={"user_id": user_id, "team_id": team["id"], "role": "member",
                                  "limits": {"budget_usd": 1}})  # fmt: skip
    assert member.status_code == 200, member.text
    # A member's budget changed on a version read before another change: 412.
    stale = await http.put("/v1/admin/memberships",
                           headers={**ADMIN, "if-match": '"0"'},
                           json={"user_id": user_id, "team_id": team["id"], "role": "member",
                                 "limits": {"budget_usd": 2}})  # fmt: skip
    assert stale.status_code == 412 and member.headers["etag"] == '"1"'
    gone = await http.request("DELETE", "/v1/admin/memberships", headers=ADMIN,
                              params={"user_id": user_id, "team_id": team["id"]})  # fmt: skip
    assert gone.status_code == 200, gone.text
    revoked = await http.post(f"/v1/admin/keys/{key.json()['key']['id']}:revoke", headers=ADMIN)
    assert revoked.status_code == 200

    events = await changed(http, start)
    assert [e["action"] for e in events] == [
        "org.create", "team.create", "key.create", "team.update", "user.create",
        "membership.create", "membership.delete", "key.revoke",
    ]  # fmt: skip
    for event in events:
        assert event["actor"] == "key:cfg-test-admin"
        assert event["actor_address"].startswith("127.0.0.1:")
        assert len(event["hash"]) == 64 and event["request_id"]
    org_made, team_made, key_made, team_changed, *_, key_revoked = events
    assert org_made["before"] == "" and json.loads(org_made["after"])["name"] == org["name"]
    assert json.loads(team_changed["before"])["limits"]["budget_usd"] == 50
    assert json.loads(team_changed["after"])["limits"]["budget_usd"] == 5
    made = json.loads(key_made["after"])
    # A key's prefix only: never its secret nor its digest.
    assert made["prefix"] == secret[:11] and secret not in json.dumps(events)
    assert "digest" not in made
    assert json.loads(key_revoked["before"])["revoked_at"] is None
    assert json.loads(key_revoked["after"])["revoked_at"] is not None
    # Each event chains to the one before it.
    for before, after in zip(events, events[1:], strict=False):
        assert after["prev_hash"] == before["hash"]
    # Reads leave no event.
    await http.get(f"/v1/admin/teams/{team['id']}", headers=ADMIN)
    await http.get("/v1/admin/keys", headers=ADMIN)
    assert await last_seq(http) == int(events[-1]["seq"])


async def test_team_admin_keys_manage_their_own_team_only(http: httpx.AsyncClient) -> None:
    org = await setup_org(http, f"scoped-{await last_seq(http)}")
    mine = await setup_team(http, org["id"], "mine")
    other = await setup_team(http, org["id"], "other")
    made = await http.post("/v1/admin/keys", headers=ADMIN,
                           json={"name": "mine-admin", "kind": "admin", "team": mine["id"]})  # fmt: skip
    scoped = {"x-admin-key": made.json()["secret"]}
    start = await last_seq(http)
    # Its own team: keys (of that team, implied), budgets.
    own = await http.post("/v1/admin/keys", headers=scoped, json={"name": "svc", "kind": "api"})
    assert own.status_code == 200 and own.json()["key"]["team"] == mine["id"]
    budget = await http.patch(f"/v1/admin/teams/{mine['id']}", headers=scoped,
                              json={"limits": {"budget_usd": 3}})  # fmt: skip
    assert budget.status_code == 200
    # Anywhere else: 403, and nothing changes.
    for method, path, body in (
        ("POST", "/v1/admin/keys", {"name": "x", "kind": "api", "team": other["id"]}),
        ("PATCH", f"/v1/admin/teams/{other['id']}", {"limits": {"budget_usd": 1}}),
        ("POST", "/v1/admin/orgs", {"name": "mine-too"}),
        ("DELETE", f"/v1/admin/teams/{mine['id']}", None),
        ("POST", "/v1/admin/config:reload", {}),
        ("GET", "/v1/admin/audit", None),
    ):
        reply = await http.request(method, path, headers=scoped, json=body)
        assert reply.status_code == 403, (path, reply.text)
        assert reply.json()["error"]["code"] == "PERMISSION_DENIED" or reply.status_code == 403
    others_key = await http.post("/v1/admin/keys", headers=ADMIN,
                                 json={"name": "theirs", "kind": "api", "team": other["id"]})  # fmt: skip
    theirs = others_key.json()["key"]["id"]
    assert (await http.get(f"/v1/admin/keys/{theirs}", headers=scoped)).status_code == 403
    assert (await http.post(f"/v1/admin/keys/{theirs}:revoke", headers=scoped)).status_code == 403
    listed = await http.get("/v1/admin/keys", headers=scoped)
    assert {k["team"] for k in listed.json()["keys"]} == {mine["id"]}
    teams = await http.get("/v1/admin/teams", headers=scoped)
    assert [t["id"] for t in teams.json()["teams"]] == [mine["id"]]
    events = await changed(http, start)
    assert [e["action"] for e in events] == ["key.create", "team.update", "key.create"]
    assert events[0]["actor"] == f"key:{made.json()['key']['id']}"


async def test_a_team_admin_key_reads_the_usage_of_its_own_teams_keys_only(
    storage: dict[str, Any],
) -> None:
    async with (
        running_gateway(config_with(**storage)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as http,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        await team_admin_usage(http, UsageServiceStub(channel))


async def team_admin_usage(http: httpx.AsyncClient, usage: UsageServiceStub) -> None:
    org = await setup_org(http, f"usage-{await last_seq(http)}")
    mine = await setup_team(http, org["id"], "mine")
    other = await setup_team(http, org["id"], "other")

    async def key(name: str, kind: str, team: str | None) -> dict[str, Any]:
        body = {"name": name, "kind": kind} | ({"team": team} if team else {})
        reply = await http.post("/v1/admin/keys", headers=ADMIN, json=body)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    scoped = {"x-admin-key": (await key("mine-admin", "admin", mine["id"]))["secret"]}
    own = (await key("svc", "api", mine["id"]))["key"]["id"]
    theirs = (await key("theirs", "api", other["id"]))["key"]["id"]
    gateway_admin = (await key("root", "admin", None))["key"]["id"]
    loose = (await key("loose", "api", None))["key"]["id"]
    read = await http.get("/v1/usage", headers=scoped, params={"key_id": own})
    assert read.status_code == 200 and read.json()["key_id"] == own
    # Another team's key, a key of no team, the gateway's admin key, a key of the config
    # file (by id or name): none is this team's.
    for other_key in (theirs, loose, gateway_admin, "cfg-dev-api", "dev-api"):
        refused = await http.get("/v1/usage", headers=scoped, params={"key_id": other_key})
        assert refused.status_code == 403, (other_key, refused.text)
        assert "may not read key" in refused.json()["error"]["message"]
    # Over gRPC alike, the key named in the error's details.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await usage.GetUsage(usage_pb.GetUsageRequest(key_id=theirs),
                             metadata=tuple(scoped.items()))  # fmt: skip
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert dict(details(caught.value)["ErrorInfo"].metadata) == {"key": theirs}  # type: ignore[attr-defined]
    # The gateway's own administrator reads them all.
    for any_key in (own, theirs, loose, gateway_admin, "cfg-dev-api"):
        reply = await http.get("/v1/usage", headers=ADMIN, params={"key_id": any_key})
        assert reply.status_code == 200, (any_key, reply.text)
    # An admin key names the key it reads; another key reads its own, and names none.
    for headers, asked, param, words in (
        (ADMIN, {}, "key_id", "is required with an admin key"),
        ({"x-api-key": API_KEY}, {"key_id": own}, "key_id", "needs an admin key (x-admin-key)"),
    ):
        refused = await http.get("/v1/usage", headers=headers, params=asked)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == param
        assert refused.json()["error"]["message"] == f"{param}: {words}"
    for headers, key_id in (({"x-router-key": ROUTER_KEY}, "cfg-dev-router"),
                            ({"x-api-key": API_KEY}, "cfg-dev-api")):  # fmt: skip
        reply = await http.get("/v1/usage", headers=headers)
        assert reply.status_code == 200 and reply.json()["key_id"] == key_id, reply.text


async def test_deleting_a_team_with_live_keys_and_a_stale_if_match(
    http: httpx.AsyncClient,
) -> None:
    org = await setup_org(http, f"del-{await last_seq(http)}")
    team = await setup_team(http, org["id"], "t")
    key = await http.post("/v1/admin/keys", headers=ADMIN,
                          json={"name": "k", "kind": "api", "team": team["id"]})  # fmt: skip
    secret = key.json()["secret"]
    refused = await http.delete(f"/v1/admin/teams/{team['id']}", headers=ADMIN)
    assert refused.status_code == 409 and "live keys" in refused.json()["error"]["message"]
    # If-Match: the version the last answer gave as its ETag.
    got = await http.get(f"/v1/admin/teams/{team['id']}", headers=ADMIN)
    etag = got.headers["etag"]
    first = await http.patch(f"/v1/admin/teams/{team['id']}", json={"limits": {"budget_usd": 2}},
                             headers={**ADMIN, "if-match": etag})  # fmt: skip
    assert first.status_code == 200 and first.headers["etag"] != etag
    stale = await http.patch(f"/v1/admin/teams/{team['id']}", json={"limits": {"budget_usd": 9}},
                             headers={**ADMIN, "if-match": etag})  # fmt: skip
    assert stale.status_code == 412, stale.text
    now = await http.get(f"/v1/admin/teams/{team['id']}", headers=ADMIN)
    assert now.json()["team"]["limits"]["budget_usd"] == 2
    start = await last_seq(http)
    deleted = await http.delete(f"/v1/admin/teams/{team['id']}", headers=ADMIN,
                                params={"revoke_keys": "true"})  # fmt: skip
    assert deleted.status_code == 200 and deleted.json()["revoked_keys"] == [
        key.json()["key"]["id"]
    ]
    [event] = await changed(http, start)
    assert event["action"] == "team.delete"
    assert json.loads(event["after"])["revoked_keys"] == [key.json()["key"]["id"]]
    assert (await http.get(f"/v1/admin/teams/{team['id']}", headers=ADMIN)).status_code == 404
    # The revoked key stops working at once on this instance.
    reply = await http.post("/v1/chat/completions", headers={"x-api-key": secret},
                            json={"model": "sim-mini", "messages": HELLO})  # fmt: skip
    assert reply.status_code == 401


async def test_model_allowlists_intersect_across_levels(http: httpx.AsyncClient) -> None:
    org = await setup_org(http, f"allow-{await last_seq(http)}", models=["sim-pro", "sim-mini"])
    team = await setup_team(http, org["id"], "t", models=["sim-mini"])
    key = await http.post("/v1/admin/keys", headers=ADMIN,
                          json={"name": "k", "kind": "api", "team": team["id"]})  # fmt: skip
    secret = key.json()["secret"]
    ok = await http.post("/v1/chat/completions", headers={"x-api-key": secret},
                         json={"model": "sim-mini", "messages": HELLO})  # fmt: skip
    assert ok.status_code == 200
    refused = await http.post("/v1/chat/completions", headers={"x-api-key": secret},
                              json={"model": "sim-pro", "messages": HELLO})  # fmt: skip
    assert refused.status_code == 403
    assert "not allowed for team 't'" in refused.json()["error"]["message"]


async def test_bad_input_names_the_field(http: httpx.AsyncClient) -> None:
    for path, body, field in (
        ("/v1/admin/orgs", {"name": ""}, "name"),
        ("/v1/admin/orgs", {"name": "x", "limits": {"budget_usd": -1}}, "limits.budget_usd"),
        ("/v1/admin/orgs", {"name": "x", "limits": {"budget_period": "weekly"}},
         "limits.budget_period"),
        ("/v1/admin/teams", {"name": "t"}, "org_id"),
        ("/v1/admin/users", {}, "subject"),
    ):  # fmt: skip
        reply = await http.post(path, headers=ADMIN, json=body)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == field
    missing = await http.get("/v1/admin/teams/team_nope", headers=ADMIN)
    assert missing.status_code == 404
    bad_page = await http.get("/v1/admin/audit", headers=ADMIN, params={"page_token": "zz"})
    assert bad_page.status_code == 400 and bad_page.json()["error"]["param"] == "page_token"


async def test_a_member_budget_and_a_team_rate_limit_refuse_naming_their_level(
    http: httpx.AsyncClient,
) -> None:
    org = await setup_org(http, f"member-{await last_seq(http)}")
    team = await setup_team(http, org["id"], "t", requests_per_minute=1000)
    user = await http.post("/v1/admin/users", headers=ADMIN,
                           json={"email": f"dev-{team['id']}@example.com"})  # fmt: skip
    user_id = user.json()["user"]["id"]
    member = await http.put("/v1/admin/memberships", headers=ADMIN,
                            json={"user_id": user_id, "team_id": team["id"], "role": "member",
                                  "limits": {"budget_usd": 0.000001}})  # fmt: skip
    assert member.status_code == 200, member.text
    # The key is the member's by its owner (their email): the member's budget applies.
    key = await http.post("/v1/admin/keys", headers=ADMIN, json={
        "name": "dev", "kind": "api", "team": team["id"],
        "owner": f"dev-{team['id']}@example.com"})  # fmt: skip
    secret = key.json()["secret"]
    # Embeddings ($0.0000003 each) until the member's $0.000001 is spent: three fit.
    codes = []
    for _ in range(5):
        embedded = await http.post("/v1/embeddings", headers={"x-api-key": secret},
                                   json={"model": "sim-mini", "input": "hello"})  # fmt: skip
        codes.append(embedded.status_code)
    assert codes == [200, 200, 200, 429, 429]
    whose = f"of member 'dev-{team['id']}@example.com' ({team['id']}/{user_id})"
    assert whose in embedded.json()["error"]["message"]
    refused = await http.post("/v1/chat/completions", headers={"x-api-key": secret},
                              json={"model": "sim-mini", "messages": HELLO, "max_tokens": 5})  # fmt: skip
    assert refused.status_code == 429 and whose in refused.json()["error"]["message"]
    # A team's rate limit: its keys together get no more than it allows.
    tight = await setup_team(http, org["id"], "tight", requests_per_minute=2)
    keys = []
    for name in ("a", "b"):
        made = await http.post("/v1/admin/keys", headers=ADMIN,
                               json={"name": name, "kind": "api", "team": tight["id"]})  # fmt: skip
        keys.append(made.json()["secret"])
    codes = []
    for secret in (*keys, *keys):
        reply = await http.post("/v1/chat/completions", headers={"x-api-key": secret},
                                json={"model": "sim-mini", "messages": HELLO})  # fmt: skip
        codes.append(reply.status_code)
        if reply.status_code == 429:
            assert "for team 'tight'" in reply.json()["error"]["message"]
    assert codes == [200, 200, 429, 429]


async def test_a_key_updated_and_rotated_leaves_one_event_each(http: httpx.AsyncClient) -> None:
    made = await http.post("/v1/admin/keys", headers=ADMIN,
                           json={"name": f"rot-{await last_seq(http)}", "kind": "api",
                                 "budget_usd": 5})  # fmt: skip
    key, old = made.json()["key"], made.json()["secret"]
    start = await last_seq(http)
    updated = await http.patch(f"/v1/admin/keys/{key['id']}", headers=ADMIN,
                               json={"budget_usd": 7, "replace_models": True,
                                     "models": ["sim-mini"], "clear": ["requests_per_minute"]})  # fmt: skip
    assert updated.status_code == 200, updated.text
    assert updated.json()["key"]["budget_usd"] == 7 and updated.json()["key"]["models"] == [
        "sim-mini"
    ]
    rotated = await http.post(f"/v1/admin/keys/{key['id']}:rotate", headers=ADMIN)
    assert rotated.status_code == 200
    new = rotated.json()["secret"]
    assert new != old and rotated.json()["key"]["id"] == key["id"]
    assert (await http.post("/v1/chat/completions", headers={"x-api-key": old},
                            json={"model": "sim-mini", "messages": HELLO})).status_code == 401  # fmt: skip
    assert (await http.post("/v1/chat/completions", headers={"x-api-key": new},
                            json={"model": "sim-mini", "messages": HELLO})).status_code == 200  # fmt: skip
    bad = await http.patch(f"/v1/admin/keys/{key['id']}", headers=ADMIN, json={"clear": ["owner"]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "clear"
    update, rotate = await changed(http, start)
    assert (update["action"], rotate["action"]) == ("key.update", "key.rotate")
    assert json.loads(update["before"])["budget_usd"] == 5
    assert json.loads(update["after"])["budget_usd"] == 7
    assert json.loads(rotate["before"])["prefix"] == old[:11]
    assert json.loads(rotate["after"])["prefix"] == new[:11]
    assert old not in json.dumps([update, rotate]) and new not in json.dumps([update, rotate])
