"""A key's team must exist: the store refuses to create a key of a team that does not
(it could be neither read, rotated nor revoked through the admin API), and the admin
API's refusals name the field at fault."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from server.base.errors import NotFound
from tests.support.gateways import running_gateway
from tests.support.shared_state import ADMIN_KEY, config_with

HEADERS = {"x-admin-key": ADMIN_KEY}


@pytest.fixture(scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    path = tmp_path_factory.mktemp("key-teams") / "gw.db"
    async with running_gateway(config_with(sqlite_path=str(path))) as running:
        yield running


@pytest.fixture
async def http(gw: Any) -> AsyncIterator[httpx.AsyncClient]:
    base = f"http://127.0.0.1:{gw.http_port}"
    async with httpx.AsyncClient(base_url=base, headers=HEADERS, timeout=30) as client:
        yield client


async def a_team(http: httpx.AsyncClient, org_name: str) -> str:
    org = await http.post("/v1/admin/orgs", json={"name": org_name})
    assert org.status_code == 200, org.text
    team = await http.post("/v1/admin/teams", json={"org_id": org.json()["org"]["id"], "name": "s"})
    assert team.status_code == 200, team.text
    return str(team.json()["team"]["id"])


async def key_names(http: httpx.AsyncClient) -> set[str]:
    listed = await http.get("/v1/admin/keys", params={"include_revoked": True})
    assert listed.status_code == 200, listed.text
    return {k["name"] for k in listed.json()["keys"]}


async def test_the_store_refuses_a_key_of_a_team_that_does_not_exist(gw: Any, http) -> None:
    with pytest.raises(NotFound) as refused:
        await gw.gateway.store.keys.create(kind="api", name="orphan", team_id="team_nowhere")
    assert refused.value.param == "team_id" and "team_nowhere" in refused.value.message
    assert "orphan" not in await key_names(http)  # nothing written
    # A key of a team that exists is made, and is managed like any other.
    team = await a_team(http, "acme-store")
    key, _ = await gw.gateway.store.keys.create(kind="api", name="placed", team_id=team)
    rotated = await http.post(f"/v1/admin/keys/{key.id}:rotate", json={})
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["key"]["team"] == team and rotated.json()["secret"]


async def test_the_admin_api_names_the_team_field_it_refuses(http) -> None:
    created = await http.post("/v1/admin/keys",
                              json={"name": "stray", "kind": "api", "team": "team_nowhere"})  # fmt: skip
    assert created.status_code == 404
    error = created.json()["error"]
    assert error["param"] == "team" and "team_nowhere" in error["message"]
    team = await a_team(http, "acme-admin")
    made = await http.post("/v1/admin/keys", json={"name": "mover", "kind": "api", "team": team})
    assert made.status_code == 200, made.text
    key_id = made.json()["key"]["id"]
    moved = await http.patch(f"/v1/admin/keys/{key_id}", json={"team": "team_nowhere"})
    assert moved.status_code == 404 and moved.json()["error"]["param"] == "team"
    assert "stray" not in await key_names(http)
