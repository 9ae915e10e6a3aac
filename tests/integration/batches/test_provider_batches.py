"""A batch handed to its provider's own batch API (`batch: provider`): the gateway
uploads the lines to a strict fake of OpenAI's Files and Batch APIs, polls its status
machine, reads the output and error files only once they are there, and writes one
ledger row per line at the model's batch prices; the caller sees it through the openai
SDK as any batch."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from tests.integration.batches.test_openai_batches import chat_line, config, jsonl, rows_of
from tests.support.gateways import API_KEY, eventually, running_gateway
from tests.support.shared_state import ADMIN_KEY
from tests.support.upstreams import batch_api
from tests.support.upstreams.config import provider

MODEL = "gpt-batch"
PRICE = {"input": 2.0, "output": 8.0, "batch": {"input": 1.0, "output": 4.0}}


# A key with a budget of a cent: its account is loaded when a batch is created (the
# batch's estimate is held), so each line billed afterwards is charged to it.
RICH = "gw-test-rich-batch-key-01"


def handed(tmp_path: Path, url: str) -> dict[str, Any]:
    data = config(tmp_path)
    data["keys"].append({"name": "rich", "secret": RICH, "kind": "api", "budget_usd": 0.01})
    data["batches"] |= {"provider_poll_s": 0.05}
    data["models"].append({
        "id": MODEL, "owned_by": "test", "created": 0, "price": PRICE, "batch": "provider",
        "providers": [provider("upstream", "openai", url)],
    })  # fmt: skip
    return data


async def run(sdk: openai.AsyncOpenAI, lines: list[dict[str, Any]]) -> Any:
    uploaded = await sdk.files.create(file=("in.jsonl", io.BytesIO(jsonl(lines))), purpose="batch")
    batch = await sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return batch


def sdk_of(gw: Any, key: str) -> openai.AsyncOpenAI:
    base = f"http://127.0.0.1:{gw.http_port}"
    return openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)


async def handed_over(gw: Any, batch_id: str) -> dict[str, Any]:
    """The batch's row, once the provider's id is stored with it."""

    async def stored() -> dict[str, Any]:
        row = await gw.gateway.store.batches.get(batch_id)
        assert row is not None and row["upstream_id"]
        return dict(row)

    return await eventually(stored)


async def completed(sdk: openai.AsyncOpenAI, batch_id: str) -> Any:
    async def done() -> Any:
        found = await sdk.batches.retrieve(batch_id)
        assert found.status == "completed", found.status
        return found

    return await eventually(done)


async def key_spent(gw: Any, batch_id: str) -> float:
    """What the budget of the key that made the batch has spent, as the gateway holds it."""
    stored = await gw.gateway.store.batches.get(batch_id)
    principal = await gw.gateway.accounts.admission.keys.by_id(
        stored["key_id"], "api", gw.gateway.live.current.keys
    )
    [key_budget] = [b for b in principal.budgets if b.level == "key"]
    spent, _ = await gw.gateway.accounts.budgets.status(key_budget)
    return float(spent)


async def test_a_batch_handed_to_the_provider_is_billed_once_per_line(tmp_path: Path) -> None:
    async with (
        batch_api.serving_batches(refuse={"h2"}) as fake,
        running_gateway(handed(tmp_path, fake.url)) as gw,
    ):
        sdk = sdk_of(gw, RICH)
        async with sdk:
            lines = [chat_line(f"h{i}", f"question {i}", model=MODEL) for i in range(4)]
            batch = await run(sdk, lines)

            async def done() -> Any:
                found = await sdk.batches.retrieve(batch.id)
                assert found.status == "completed", found.status
                return found

            finished = await eventually(done)
            assert fake.refused == []
            # Handed over once: one upload, one batch, polled through its steps to
            # the output file arriving after `completed`.
            assert fake.seen.count(("POST", "/v1/files")) == 1
            assert fake.seen.count(("POST", "/v1/batches")) == 1
            [upstream] = fake.batches.values()
            assert upstream["metadata"] == {"gateway_batch_id": batch.id}
            assert upstream["output_file_id"] and upstream["error_file_id"]
            # Three steps to `completed`, and one more for its output file: the
            # gateway took `completed` without a file for not yet final.
            polls = fake.seen.count(("GET", f"/v1/batches/{upstream['id']}"))
            assert polls == len(batch_api.STEPS)
            assert finished.request_counts.completed == 3
            assert finished.request_counts.failed == 1
            output = (await sdk.files.content(finished.output_file_id)).content
            answers = {orjson.loads(x)["custom_id"]: orjson.loads(x) for x in output.splitlines()}
            assert sorted(answers) == ["h0", "h1", "h3"]
            body = answers["h0"]["response"]["body"]
            assert body["choices"][0]["message"]["content"] == "batch h0"
            errors = (await sdk.files.content(finished.error_file_id)).content
            [refused] = [orjson.loads(x) for x in errors.splitlines()]
            assert refused["custom_id"] == "h2"
            assert refused["response"]["status_code"] == 400
            # One row per line, each at the batch rates ($1 in, $4 out per million).
            rows = await rows_of(gw, batch.id)
            assert sorted(r["custom_id"] for r in rows) == ["h0", "h1", "h2", "h3"]
            ran = [r for r in rows if r["custom_id"] != "h2"]
            for row in ran:
                assert (row["prompt_tokens"], row["completion_tokens"]) == (11, 5)
                assert row["total_cost_usd"] == pytest.approx((11 * 1.0 + 5 * 4.0) / 1e6)
            assert finished.usage.input_tokens == sum(r["prompt_tokens"] for r in rows)
            assert finished.usage.output_tokens == sum(r["completion_tokens"] for r in rows)
            parts = await gw.gateway.store.db.fetch(
                "SELECT input_cost_usd, output_cost_usd, units FROM usage_records "
                "WHERE batch_id = ? AND custom_id = 'h0'", batch.id,
            )  # fmt: skip
            assert [tuple(p.values()) for p in parts] == [
                (pytest.approx(11 * 1.0 / 1e6), pytest.approx(5 * 4.0 / 1e6), 16.0)
            ]
            statuses = await gw.gateway.store.db.fetch(
                "SELECT custom_id, status FROM usage_records WHERE batch_id = ?", batch.id
            )
            assert {r["custom_id"]: r["status"] for r in statuses} == {
                "h0": "OK", "h1": "OK", "h2": "INVALID_ARGUMENT", "h3": "OK"
            }  # fmt: skip
            # Each line's cost charged to the key's budget once, the batch's hold gone.
            total = sum(r["total_cost_usd"] or 0 for r in rows)
            assert await key_spent(gw, batch.id) == pytest.approx(total)
            # Retrieves and fetches bill nothing more; the provider is not polled
            # after the batch ended.
            seen = len(fake.seen)
            await sdk.batches.retrieve(batch.id)
            await sdk.files.content(finished.output_file_id)
            await gw.gateway.accounts.ledger.flush()
            assert len(await rows_of(gw, batch.id)) == 4
            assert len(fake.seen) == seen


async def test_a_cancelled_handed_batch_cancels_the_providers(tmp_path: Path) -> None:
    async with batch_api.serving_batches() as fake:
        data = handed(tmp_path, fake.url)
        data["batches"]["provider_poll_s"] = 0.3
        async with running_gateway(data) as gw:
            sdk = sdk_of(gw, API_KEY)
            async with sdk:
                batch = await run(sdk, [chat_line("c0", model=MODEL), chat_line("c1", model=MODEL)])

                async def handed_over() -> None:
                    assert fake.batches

                await eventually(handed_over)
                await sdk.batches.cancel(batch.id)

                async def ended() -> Any:
                    found = await sdk.batches.retrieve(batch.id)
                    assert found.status in ("cancelled", "completed"), found.status
                    return found

                found = await eventually(ended)
                [upstream] = fake.batches.values()
                if found.status == "cancelled":
                    assert ("POST", f"/v1/batches/{upstream['id']}/cancel") in fake.seen
                    assert upstream["status"] == "cancelled"
                assert fake.refused == []
                rows = await rows_of(gw, batch.id)
                assert len(rows) == found.request_counts.completed


async def test_a_message_batch_handed_to_anthropic_is_billed_once_per_request(
    tmp_path: Path,
) -> None:
    async with batch_api.serving_message_batches() as fake:
        data = config(tmp_path)
        data["batches"] |= {"provider_poll_s": 0.05}
        data["models"].append({
            "id": "claude-batch", "owned_by": "test", "created": 0, "price": PRICE,
            "batch": "provider", "providers": [provider("upstream", "anthropic", fake.url)],
        })  # fmt: skip
        data["keys"].append({"name": "test-admin", "kind": "admin", "secret": ADMIN_KEY})
        async with running_gateway(data) as gw:
            base = f"http://127.0.0.1:{gw.http_port}"
            team_key = await _key_of_a_team(base)
            sdk = anthropic.AsyncAnthropic(base_url=base, api_key=team_key, max_retries=0)
            async with sdk:
                batch = await sdk.messages.batches.create(requests=[
                    {"custom_id": f"m{i}", "params": {
                        "model": "claude-batch", "max_tokens": 16,
                        "messages": [{"role": "user", "content": f"question {i}"}]}}
                    for i in range(3)
                ])  # fmt: skip

                async def ended() -> Any:
                    found = await sdk.messages.batches.retrieve(batch.id)
                    assert found.processing_status == "ended", found.processing_status
                    return found

                found = await eventually(ended)
                assert fake.refused == []
                assert fake.seen.count(("POST", "/v1/messages/batches")) == 1
                assert found.request_counts.succeeded == 3
                results = [r async for r in await sdk.messages.batches.results(batch.id)]
                assert sorted(r.custom_id for r in results) == ["m0", "m1", "m2"]
                for result in results:
                    assert result.result.type == "succeeded"
                    assert result.result.message.content[0].text == f"batch {result.custom_id}"
                rows = await rows_of(gw, batch.id)
                assert sorted(r["custom_id"] for r in rows) == ["m0", "m1", "m2"]
                for row in rows:
                    assert (row["prompt_tokens"], row["completion_tokens"]) == (13, 7)
                    assert row["total_cost_usd"] == pytest.approx((13 * 1.0 + 7 * 4.0) / 1e6)
                # Each row names who made the batch, at every level, and what ran it.
                named = await gw.gateway.store.db.fetch(
                    "SELECT key_name, team_id, org_id, method, model, provider, status, "
                    "input_cost_usd, output_cost_usd, units FROM usage_records "
                    "WHERE batch_id = ?", batch.id,
                )  # fmt: skip
                team = await gw.gateway.store.db.fetchrow(
                    "SELECT id, org_id FROM teams WHERE name = 'handed'"
                )
    assert [dict(r) for r in named] == 3 * [{
        "key_name": "handed-key", "team_id": team["id"], "org_id": team["org_id"],
        "method": "CreateMessage", "model": "claude-batch", "provider": "upstream",
        "status": "OK", "input_cost_usd": pytest.approx(13 / 1e6),
        "output_cost_usd": pytest.approx(28 / 1e6), "units": 20.0,
    }]  # fmt: skip


async def _key_of_a_team(base: str) -> str:
    """A key of a team of an organisation, made through the admin API."""
    async with httpx.AsyncClient(base_url=base, headers={"x-admin-key": ADMIN_KEY}) as http:
        org = (await http.post("/v1/admin/orgs", json={"name": "handed"})).json()["org"]
        team = (await http.post("/v1/admin/teams",
                                json={"org_id": org["id"], "name": "handed"})).json()["team"]  # fmt: skip
        made = await http.post(
            "/v1/admin/keys", json={"name": "handed-key", "kind": "api", "team": team["id"]}
        )
        assert made.status_code == 200, made.text
        return str(made.json()["secret"])


async def test_another_instance_polls_the_batch_already_handed_over(tmp_path: Path) -> None:
    """The provider's id is kept with the batch: the instance that takes the batch over
    polls the same provider batch, never hands it over twice, and bills each line once."""
    async with batch_api.serving_batches() as fake:
        first = handed(tmp_path, fake.url)
        first["batches"]["provider_poll_s"] = 600  # hands over, then waits long
        async with running_gateway(first) as gw:
            sdk = sdk_of(gw, API_KEY)
            async with sdk:
                lines = [chat_line(f"t{i}", model=MODEL) for i in range(3)]
                batch = await run(sdk, lines)
                await handed_over(gw, batch.id)
        async with running_gateway(handed(tmp_path, fake.url)) as gw:
            sdk = sdk_of(gw, API_KEY)
            async with sdk:
                finished = await completed(sdk, batch.id)
                assert fake.seen.count(("POST", "/v1/batches")) == 1
                assert fake.seen.count(("POST", "/v1/files")) == 1
                assert finished.request_counts.completed == 3
                rows = await rows_of(gw, batch.id)
                assert sorted(r["custom_id"] for r in rows) == ["t0", "t1", "t2"]


async def test_a_line_billed_before_a_crash_is_not_charged_again(tmp_path: Path) -> None:
    """An instance that died between a line's ledger row and the line's end: the one
    that takes the batch over writes no second row and charges no budget again."""
    async with batch_api.serving_batches() as fake:
        first = handed(tmp_path, fake.url)
        first["batches"]["provider_poll_s"] = 600  # hands over, then waits long
        async with running_gateway(first) as gw:
            sdk = sdk_of(gw, RICH)
            async with sdk:
                batch = await run(sdk, [chat_line(f"t{i}", model=MODEL) for i in range(3)])
                stored = await handed_over(gw, batch.id)
            # t0's row, as the provider's answer bills it, written before the "crash".
            await gw.gateway.store.db.execute(
                "INSERT INTO usage_records (ts, request_id, key_id, key_name, method, model, "
                "provider, prompt_tokens, completion_tokens, total_tokens, latency_ms, status, "
                "total_cost_usd, batch_id, custom_id) VALUES (?, 'before', ?, 'rich', "
                "'CreateChatCompletion', ?, 'upstream', 11, 5, 16, 0, 'OK', ?, ?, 't0')",
                time.time(), stored["key_id"], MODEL, (11 * 1.0 + 5 * 4.0) / 1e6, batch.id,
            )  # fmt: skip
        async with running_gateway(first | {"batches": {**first["batches"],
                                                         "provider_poll_s": 0.05}}) as gw:  # fmt: skip
            sdk = sdk_of(gw, RICH)
            async with sdk:
                await completed(sdk, batch.id)
                rows = await rows_of(gw, batch.id)
                spent = await key_spent(gw, batch.id)
    assert sorted(r["custom_id"] for r in rows) == ["t0", "t1", "t2"]
    assert spent == pytest.approx(sum(r["total_cost_usd"] for r in rows))


async def test_a_line_is_billed_when_its_keys_budget_ran_out_meanwhile(tmp_path: Path) -> None:
    """The provider ran the lines; the key spent its budget elsewhere while they ran:
    each line still has its row (what was spent is owed), and the key's budget, past
    its limit already, stays there (the counter is not raised further; the ledger
    holds the spend, and the next load of the account reads it)."""
    async with (
        batch_api.serving_batches() as fake,
        running_gateway(handed(tmp_path, fake.url)) as gw,
    ):
        fake.paused = True
        sdk = sdk_of(gw, RICH)
        async with sdk:
            batch = await run(sdk, [chat_line(f"s{i}", model=MODEL) for i in range(2)])
            stored = await handed_over(gw, batch.id)
            principal = await gw.gateway.accounts.admission.keys.by_id(
                stored["key_id"], "api", gw.gateway.live.current.keys
            )
            budgets = gw.gateway.accounts.budgets
            held = await budgets.reserve_all(principal.budgets, 0.0)
            await budgets.settle_all(held, 0.02)  # past the key's cent, spent elsewhere
            fake.paused = False

            async def done() -> Any:
                found = await sdk.batches.retrieve(batch.id)
                assert found.status == "completed", found.status
                return found

            await eventually(done)
            rows = await rows_of(gw, batch.id)
            spent = await key_spent(gw, batch.id)
    assert sorted(r["custom_id"] for r in rows) == ["s0", "s1"]
    assert all(r["total_cost_usd"] > 0 for r in rows)
    assert spent >= 0.01
