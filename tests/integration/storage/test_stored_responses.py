"""Stored responses on SQLite and PostgreSQL: kept with `store` (the default), owned by
the key that made them, continued by previous_response_id, deleted, expired after the
retention and removed by the cleanup."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateways import API_KEY, eventually, running_gateway
from tests.support.shared_state import config_with

OTHER = "gw-test-other-api-key-0000"


async def _exercise(data: dict[str, Any]) -> None:
    data["keys"].append({"name": "other", "kind": "api", "secret": OTHER})
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as client,
    ):
        mine, theirs = {"x-api-key": API_KEY}, {"x-api-key": OTHER}
        first = await client.post(
            "/v1/responses", headers=mine, json={"model": "sim-mini", "input": "My name is Ada."}
        )
        assert first.status_code == 200, first.text
        rid = first.json()["id"]
        assert (await client.get(f"/v1/responses/{rid}", headers=mine)).json() == first.json()
        assert (await client.get(f"/v1/responses/{rid}", headers=theirs)).status_code == 404
        listed = (await client.get(f"/v1/responses/{rid}/input_items", headers=mine)).json()
        assert [i["content"][0]["text"] for i in listed["data"]] == ["My name is Ada."]
        refused = await client.post(
            "/v1/responses", headers=theirs,
            json={"model": "sim-mini", "input": "Name?", "previous_response_id": rid},
        )  # fmt: skip
        assert refused.status_code == 404
        assert refused.json()["error"]["param"] == "previous_response_id"
        second = await client.post(
            "/v1/responses", headers=mine,
            json={"model": "sim-standard", "input": "Name?", "previous_response_id": rid},
        )  # fmt: skip
        assert second.status_code == 200, second.text
        assert (await client.delete(f"/v1/responses/{rid}", headers=theirs)).status_code == 404
        deleted = await client.delete(f"/v1/responses/{rid}", headers=mine)
        assert deleted.json() == {"id": rid, "object": "response", "deleted": True}
        assert (await client.get(f"/v1/responses/{rid}", headers=mine)).status_code == 404
        unstored = await client.post(
            "/v1/responses", headers=mine,
            json={"model": "sim-mini", "input": "Hi", "store": False},
        )  # fmt: skip
        gone = unstored.json()["id"]
        assert (await client.get(f"/v1/responses/{gone}", headers=mine)).status_code == 404

        # Retention: a response past it is gone, and the cleanup deletes its row.
        assert gw.gateway is not None and gw.gateway.store is not None
        responses = gw.gateway.store.responses
        kept = second.json()["id"]
        assert await responses.delete_expired(time.time()) == 0
        # At least this test's row: the session's PostgreSQL database holds other tests' too.
        assert await responses.delete_expired(time.time() + 31 * 86_400) >= 1
        assert (await client.get(f"/v1/responses/{kept}", headers=mine)).status_code == 404


async def test_sqlite(tmp_path: Path) -> None:
    await _exercise(config_with(sqlite_path=str(tmp_path / "gw.db")))


async def test_postgres(pg_url: str) -> None:
    await _exercise(config_with(database_url=pg_url))


async def test_expiry_and_cleanup_task(tmp_path: Path) -> None:
    data = config_with(
        sqlite_path=str(tmp_path / "gw.db"),
        responses={"retention_days": 1.0 / 86_400, "cleanup_interval_s": 0.2},
    )
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{gw.http_port}", headers={"x-api-key": API_KEY}
        ) as client,
    ):
        made = await client.post("/v1/responses", json={"model": "sim-mini", "input": "Hi"})
        rid = made.json()["id"]
        assert (await client.get(f"/v1/responses/{rid}")).status_code == 200
        assert gw.gateway is not None and gw.gateway.store is not None
        store = gw.gateway.store

        async def expired_and_cleaned() -> None:
            assert (await client.get(f"/v1/responses/{rid}")).status_code == 404
            assert await store.db.fetch("SELECT id FROM stored_responses") == []

        await eventually(expired_and_cleaned)


@pytest.mark.parametrize("limit", [0, 101])
async def test_page_limits(limit: int, tmp_path: Path) -> None:
    async with (
        running_gateway(config_with()) as gw,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{gw.http_port}", headers={"x-api-key": API_KEY}
        ) as client,
    ):
        rid = (
            await client.post("/v1/responses", json={"model": "sim-mini", "input": "Hi"})
        ).json()["id"]
        r = await client.get(f"/v1/responses/{rid}/input_items", params={"limit": limit})
        assert r.status_code == 400 and r.json()["error"]["param"] == "limit"
