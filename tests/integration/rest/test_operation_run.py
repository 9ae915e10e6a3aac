"""The one operation run every call that is not a generation takes: an embedding's
ledger row says what it is billed in and how many, and a model that does not declare a
kind in its capabilities refuses it naming `model`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.gateways import API_KEY, default_config_dict, eventually, running_gateway

AUTH = {"x-api-key": API_KEY}


async def last_row(gw: Any) -> dict[str, Any]:
    """The ledger's latest row, once written."""

    async def written() -> dict[str, Any]:
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT * FROM usage_records ORDER BY id")
        assert rows
        return dict(rows[-1])

    row: dict[str, Any] = await eventually(written)
    return row


async def test_an_embeddings_row_is_billed_in_tokens_with_its_unit() -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        body = {"model": "sim-embed", "input": "abcdefgh" * 3}
        got = await c.post("/v1/embeddings", json=body, headers=AUTH)
        assert got.status_code == 200, got.text
        used = got.json()["usage"]["prompt_tokens"]
        row = await last_row(gw)
    assert row["method"] == "CreateEmbeddings"
    assert (row["unit"], row["units"]) == ("tokens", used)
    assert row["total_cost_usd"] == pytest.approx(used * 0.02 / 1e6)


async def test_a_kind_the_model_does_not_declare_is_refused_naming_model() -> None:
    data = default_config_dict()
    embed = next(m for m in data["models"] if m["id"] == "sim-embed")
    embed["capabilities"] = ["rerank"]
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c,
    ):
        body = {"model": "sim-embed", "input": "x"}
        got = await c.post("/v1/embeddings", json=body, headers=AUTH)
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert error["param"] == "model"
    assert "sim-embed" in error["message"] and "embeddings" in error["message"]
    assert "Traceback" not in got.text
