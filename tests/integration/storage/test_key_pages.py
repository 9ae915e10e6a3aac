"""ListKeys with 500 stored keys, over REST and gRPC: pages that neither repeat nor skip
a key (even when keys are created between pages), search by name, id or prefix, the
team filter, every order, and refusals naming the field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from gateway.v1 import admin_service_pb2 as admin_pb

from server.storage.governance import Limits
from tests.support.gateways import running_gateway
from tests.support.shared_state import ADMIN, ADMIN_KEY, AdminClient, config_with

KEYS = 500
HEADERS = {"x-admin-key": ADMIN_KEY}


@pytest.fixture(scope="module")
async def gw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    path = tmp_path_factory.mktemp("keys") / "gw.db"
    async with running_gateway(config_with(sqlite_path=str(path))) as running:
        store = running.gateway.store
        async with store.db.transaction() as tx:  # a key's team must exist
            org = await store.governance.create_org(tx, "acme", Limits())
            team = await store.governance.create_team(tx, org.id, "team-a", Limits())
        for i in range(KEYS):
            await store.keys.create(kind="router" if i % 10 == 0 else "api", name=f"svc-{i:03d}",
                                    owner=f"owner-{i % 7}", team_id=team.id if i % 5 == 0 else "")  # fmt: skip
        yield running


async def team_a(gw: Any) -> str:
    """The id of the team a fifth of the keys are of."""
    return str((await gw.gateway.store.governance.list_teams())[0].id)


async def pages(http: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    """Every page of a listing; checks each page's size and total."""
    seen: list[dict[str, Any]] = []
    token = params.pop("page_token", "")
    while True:
        reply = await http.get("/v1/admin/keys", params={**params, "page_token": token})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert len(body["keys"]) <= params["page_size"]
        seen.extend(body["keys"])
        token = body.get("next_page_token", "")
        if not token:
            return seen


async def test_pages_cover_every_key_once_in_each_order(gw: Any) -> None:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{gw.http_port}", headers=HEADERS
    ) as http:
        first = (await http.get("/v1/admin/keys", params={"page_size": 100})).json()
        assert len(first["keys"]) == 100 and first["total_size"] >= KEYS
        created = [k["id"] for k in await pages(http, page_size=100)]
        assert len(created) == len(set(created)) >= KEYS
        names = [k["name"] for k in await pages(http, page_size=64, order_by="-name")]
        assert names == sorted(names, key=str.lower, reverse=True)
        owners = [k.get("owner", "") for k in await pages(http, page_size=77, order_by="owner")]
        assert owners == sorted(owners) and len(owners) == len(created)


async def test_a_key_created_between_pages_neither_repeats_nor_skips_one(gw: Any) -> None:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{gw.http_port}", headers=HEADERS
    ) as http:
        first = (
            await http.get("/v1/admin/keys", params={"page_size": 50, "order_by": "name"})
        ).json()
        await gw.gateway.store.keys.create(kind="api", name="aaa-first-by-name")
        rest = await pages(http, page_size=50, order_by="name", page_token=first["next_page_token"])
        ids = [k["id"] for k in first["keys"] + rest]
        assert len(ids) == len(set(ids))
        assert "aaa-first-by-name" not in {k["name"] for k in rest}  # it sorts before the token


async def test_search_and_filters(gw: Any) -> None:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{gw.http_port}", headers=HEADERS
    ) as http:
        found = (await http.get("/v1/admin/keys", params={"query": "SVC-04"})).json()
        assert {k["name"] for k in found["keys"]} == {f"svc-{i:03d}" for i in range(40, 50)}
        one = found["keys"][0]
        for text in (one["id"], one["prefix"]):
            by = (await http.get("/v1/admin/keys", params={"query": text})).json()["keys"]
            assert one["id"] in {k["id"] for k in by}
        team = (
            await http.get("/v1/admin/keys", params={"team": await team_a(gw), "kind": "router"})
        ).json()
        assert team["total_size"] == KEYS // 10 and all(k["kind"] == "router" for k in team["keys"])
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        reply = await AdminClient(channel).admin.ListKeys(
            admin_pb.ListKeysRequest(query="svc-1", page_size=20, order_by="-created_at"),
            metadata=ADMIN,
        )
    assert len(reply.keys) == 20 and {k.name for k in reply.keys} <= {
        f"svc-{i}" for i in range(100, 200)
    }
    assert reply.total_size == 100 and reply.next_page_token


@pytest.mark.parametrize(
    ("params", "field"),
    [({"page_size": 1001}, "page_size"), ({"page_size": -1}, "page_size"),
     ({"page_token": "not-a-token"}, "page_token"), ({"order_by": "secret"}, "order_by")],
)  # fmt: skip
async def test_bad_paging_is_refused_naming_the_field(gw: Any, params: dict, field: str) -> None:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{gw.http_port}", headers=HEADERS
    ) as http:
        reply = await http.get("/v1/admin/keys", params=params)
    assert reply.status_code == 400, reply.text
    assert field in reply.json()["error"]["message"]


async def test_the_dashboard_key_list_pages_and_names_its_keys(gw: Any) -> None:
    base = f"http://127.0.0.1:{gw.http_port}"
    async with httpx.AsyncClient(base_url=base, headers=HEADERS) as http:
        first = (await http.get("/v1/admin/dashboard", params={"key_page_size": 40})).json()
        assert len(first["keys"]) == 40 and first["key_total"] > KEYS
        after = {"key_page_size": 40, "key_page_token": first["key_next_page_token"]}
        second = (await http.get("/v1/admin/dashboard", params=after)).json()
        assert not {k["id"] for k in first["keys"]} & {k["id"] for k in second["keys"]}
        listed = (await http.get("/v1/admin/keys", params={"page_size": 3})).json()["keys"]
        ids = [k["id"] for k in listed]
        named = (await http.get("/v1/admin/dashboard", params={"key_ids": ids})).json()
        assert [k["id"] for k in named["keys"]] == ids and named["key_total"] == 3
        refused = await http.get("/v1/admin/dashboard", params={"key_page_size": 5000})
        assert refused.status_code == 400 and "key_page_size" in refused.json()["error"]["message"]
