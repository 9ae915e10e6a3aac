"""Stored state that could amplify a small request: item references in a Responses
continuation are bounded as expanded (by the model's window, or the gateway's ceiling
for a model without one) and refused before any upstream call, bill or storage write,
with the caller's answer and the ledger agreeing; stored conversations grow by what
each request sends, not by copies; a key its limits or budget refuse is refused before
its stored state is read; listed input items page to an end."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.faults import tcp_proxy
from tests.support.gateways import API_KEY, running_gateway
from tests.support.shared_state import config_with

HEADERS = {"x-api-key": API_KEY}
SECRET = "gw-test-stored-state-key-000"
# About 5,000 tokens of text: one stored item a continuation may point at many times.
BIG = "lorem ipsum dolor sit amet " * 740


def unbounded(data: dict[str, Any], ceiling: int) -> dict[str, Any]:
    """The test config with sim-mini's context window removed (as in every provider
    example) and the gateway's ceiling at `ceiling` tokens."""
    for model in data["models"]:
        model.pop("context_window", None)
    data.setdefault("limits", {})["max_prompt_tokens"] = ceiling
    return data


async def _first(client: httpx.AsyncClient) -> tuple[str, str]:
    """A stored response holding BIG; its id and the id of BIG's item."""
    first = await client.post("/v1/responses", headers=HEADERS, json={
        "model": "sim-mini", "input": [{"role": "user", "content": BIG}]})  # fmt: skip
    assert first.status_code == 200, first.text
    rid = first.json()["id"]
    items = (await client.get(f"/v1/responses/{rid}/input_items", headers=HEADERS)).json()
    return rid, items["data"][0]["id"]


def _references(item_id: str, count: int) -> list[dict[str, str]]:
    return [{"type": "item_reference", "id": item_id}] * count


async def _ledger(gw: Any) -> list[Any]:
    await gw.gateway.accounts.ledger.flush()
    return await gw.gateway.store.db.fetch(
        "SELECT method, status, prompt_tokens, completion_tokens, total_cost_usd, provider "
        "FROM usage_records ORDER BY id"
    )


async def _stored_sizes(gw: Any) -> list[int]:
    rows = await gw.gateway.store.db.fetch(
        "SELECT context FROM stored_responses ORDER BY created_at"
    )
    return [len(r["context"]) for r in rows]


async def test_references_expanding_past_the_ceiling_are_refused_before_any_upstream_bill_or_row(
    tmp_path: Path,
) -> None:
    data = unbounded(config_with(sqlite_path=str(tmp_path / "gw.db")), ceiling=30_000)
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
    ):
        rid, big = await _first(client)
        # Each turn's 60-byte body points at BIG once more: the expanded conversation
        # grows by 5,000 tokens a turn until the ceiling refuses it, streamed or not.
        refused = []
        for turn in range(20):
            reply = await client.post("/v1/responses", headers=HEADERS, json={
                "model": "sim-mini", "previous_response_id": rid, "stream": turn % 2 == 1,
                "input": _references(big, 1)})  # fmt: skip
            if reply.status_code == 200:
                if turn % 2 == 0:
                    rid = reply.json()["id"]
                continue
            refused.append(reply)
            if len(refused) == 2:
                break
        assert [r.status_code for r in refused] == [400, 400], [r.text for r in refused]
        for reply in refused:
            error = reply.json()["error"]
            assert error["param"] == "input"
            assert "takes 30000 at most" in error["message"], error
        rows = [r for r in await _ledger(gw) if r["method"] != "ListInputItems"]
        stored = await _stored_sizes(gw)
    # The refusals: a row each, as the caller heard it: refused, nothing billed or asked.
    refusals = [r for r in rows if r["status"] != "OK"]
    assert [(r["status"], r["prompt_tokens"], r["total_cost_usd"], r["provider"])
            for r in refusals] == [("INVALID_ARGUMENT", 0, None, "")] * 2  # fmt: skip
    assert all(r["prompt_tokens"] <= 30_000 for r in rows)
    # Every answered turn was stored, and no refused one.
    assert len(stored) == len(rows) - len(refusals)


async def test_a_model_window_bounds_the_expanded_request_too(tmp_path: Path) -> None:
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    next(m for m in data["models"] if m["id"] == "sim-mini")["context_window"] = 16_384
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
    ):
        rid, big = await _first(client)
        body = {
            "model": "sim-mini",
            "previous_response_id": rid,
            "input": _references(big, 1) + [{"role": "user", "content": BIG}] * 3,
        }
        refused = await client.post("/v1/responses", headers=HEADERS, json=body)
        assert refused.status_code == 400, refused.text
        assert "model 'sim-mini' takes 16384 at most" in refused.json()["error"]["message"]
        assert len(await _stored_sizes(gw)) == 1


async def test_a_stored_conversation_grows_by_what_each_request_sends_not_by_copies(
    tmp_path: Path,
) -> None:
    data = unbounded(config_with(sqlite_path=str(tmp_path / "gw.db")), ceiling=200_000)
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
    ):
        rid, big = await _first(client)
        for _ in range(4):
            reply = await client.post("/v1/responses", headers=HEADERS, json={
                "model": "sim-mini", "previous_response_id": rid,
                "input": _references(big, 1)})  # fmt: skip
            assert reply.status_code == 200, reply.text
            rid = reply.json()["id"]
        sizes = await _stored_sizes(gw)
        # Each turn's prompt holds BIG once more (the caller asked for it)...
        rows = await _ledger(gw)
        prompts = [r["prompt_tokens"] for r in rows if r["method"] == "CreateResponse"]
        assert all(b - a > 4000 for a, b in zip(prompts, prompts[1:], strict=False)), prompts
        # ...while each stored row is the one before plus a reference and an answer.
        growth = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
        assert all(g < 2_000 for g in growth), growth
        # The references are read back as the item they name.
        listed = await client.get(f"/v1/responses/{rid}/input_items", headers=HEADERS)
        assert [(i["id"], i["content"][0]["text"]) for i in listed.json()["data"]] == [(big, BIG)]


async def test_an_id_names_one_item_of_an_input(tmp_path: Path) -> None:
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
    ):
        rid, big = await _first(client)
        for given in (
            [{"id": "msg_a", "role": "user", "content": "one"},
             {"id": "msg_a", "role": "user", "content": "two"}],
            _references(big, 2),
            [{"id": big, "role": "user", "content": "mine"}, *_references(big, 1)],
        ):  # fmt: skip
            refused = await client.post("/v1/responses", headers=HEADERS, json={
                "model": "sim-mini", "previous_response_id": rid, "input": given})  # fmt: skip
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["param"] == "input[1].id"


async def test_input_item_pages_end_and_every_id_is_a_cursor(tmp_path: Path) -> None:
    data = config_with(sqlite_path=str(tmp_path / "gw.db"))
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
    ):
        rid, big = await _first(client)
        given = [{"role": "user", "content": f"m{i}"} for i in range(5)]
        given.insert(2, {"type": "item_reference", "id": big})
        reply = await client.post("/v1/responses", headers=HEADERS, json={
            "model": "sim-mini", "previous_response_id": rid, "input": given})  # fmt: skip
        assert reply.status_code == 200, reply.text
        rid = reply.json()["id"]
        for order in ("asc", "desc"):
            seen: list[str] = []
            after = None
            for _ in range(10):
                params = {"limit": "2", "order": order, **({"after": after} if after else {})}
                page = (await client.get(f"/v1/responses/{rid}/input_items", headers=HEADERS,
                                         params=params)).json()  # fmt: skip
                seen += [i["id"] for i in page["data"]]
                if not page["has_more"]:
                    break
                after = page["last_id"]
            else:
                pytest.fail(f"the pages of {order} never ended: {seen}")
            assert len(seen) == len(set(seen)) == 6
            assert (seen[2] if order == "asc" else seen[3]) == big


@pytest.mark.parametrize("refusal", ["requests", "budget"])
async def test_a_key_its_limits_refuse_is_refused_before_its_stored_state_is_read(
    pg_url: str, refusal: str
) -> None:
    target = urlsplit(pg_url)
    async with tcp_proxy("127.0.0.1", target.port or 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}{target.path}"
        data = config_with(database_url=url)
        # A key of its own: the database may hold other tests' spending by the dev key.
        key = {"name": f"stored-{uuid.uuid4().hex[:8]}", "kind": "api", "secret": SECRET}
        data["keys"].append(key)
        if refusal == "requests":
            key["requests_per_minute"] = 1
        else:  # covers the first answer, not the 1,024 tokens a second may generate
            key["budget_usd"] = 0.0001
        data["storage"]["timeout_s"] = 1.0
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
        ):
            mine = {"x-api-key": SECRET}
            first = await client.post("/v1/responses", headers=mine, json={
                "model": "sim-mini", "input": "Hi", "max_output_tokens": 16})  # fmt: skip
            assert first.status_code == 200, first.text
            # The database stops answering: a read of the stored response would wait for
            # the storage bound and fail with 503.
            proxy.stall()
            try:
                refused = await client.post("/v1/responses", headers=mine, json={
                    "model": "sim-mini", "input": "And?",
                    "previous_response_id": first.json()["id"]})  # fmt: skip
            finally:
                proxy.resume()
            assert refused.status_code == 429, refused.text
            reason = "rate limit of 1 requests" if refusal == "requests" else "cannot cover"
            assert reason in refused.json()["error"]["message"]
