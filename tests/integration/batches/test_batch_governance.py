"""A batch is governed as its lines' live calls would be: the model allowlists of the
key, its team and its organisation refuse a batch of a model they leave out at create,
in every dialect (403 naming the level, nothing stored); and a batch past its
completion window ends `expired`, billing the lines that finished and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.integration.batches.test_openai_batches import chat_line, config, jsonl, rows_of
from tests.support.gateways import API_KEY, eventually, running_gateway
from tests.support.shared_state import ADMIN_KEY

ADMIN = {"x-admin-key": ADMIN_KEY}
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    data = config(tmp_path)
    data["keys"].append({"name": "test-admin", "kind": "admin", "secret": ADMIN_KEY})
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base, headers=ADMIN, timeout=30) as http:
            yield http


async def made(http: httpx.AsyncClient, path: str, body: dict[str, Any], kind: str) -> Any:
    reply = await http.post(path, json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()[kind]


async def key_at(http: httpx.AsyncClient, level: str) -> str:
    """A key whose `level` (key, team or org) allows sim-pro alone, the others anything."""
    only = {"models": ["sim-pro"]}
    org = await made(http, "/v1/admin/orgs",
                     {"name": f"o-{level}", "limits": only if level == "org" else {}}, "org")  # fmt: skip
    team = await made(http, "/v1/admin/teams",
                      {"org_id": org["id"], "name": f"t-{level}",
                       "limits": only if level == "team" else {}}, "team")  # fmt: skip
    reply = await http.post("/v1/admin/keys", json={
        "name": f"k-{level}", "kind": "api", "team": team["id"],
        **(only if level == "key" else {}),
    })  # fmt: skip
    assert reply.status_code == 200, reply.text
    return str(reply.json()["secret"])


def refused_naming(reply: httpx.Response, level: str) -> None:
    assert reply.status_code == 403, reply.text
    message = orjson.dumps(reply.json()).decode()
    assert f"'sim-mini' is not allowed for {level} '" in message, message
    assert "Traceback" not in reply.text


@pytest.mark.parametrize("level", ["key", "team", "org"])
async def test_every_levels_allowlist_refuses_a_batch_of_another_model(
    admin: httpx.AsyncClient, level: str
) -> None:
    secret = await key_at(admin, level)
    bearer = {"authorization": f"Bearer {secret}"}
    # OpenAI: the file is the key's; the batch of its model is refused.
    uploaded = await admin.post(
        "/v1/files", headers=bearer, data={"purpose": "batch"},
        files={"file": ("in.jsonl", jsonl([chat_line("a"), chat_line("b")]))},
    )  # fmt: skip
    assert uploaded.status_code == 200, uploaded.text
    created = await admin.post("/v1/batches", headers=bearer, json={
        "input_file_id": uploaded.json()["id"], "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    })  # fmt: skip
    refused_naming(created, level)
    # Anthropic and Gemini, the same.
    message_batch = await admin.post(
        "/v1/messages/batches", headers={"x-api-key": secret},
        json={"requests": [{"custom_id": "a", "params": {
            "model": "sim-mini", "max_tokens": 8, "messages": MESSAGES}}]},
    )  # fmt: skip
    refused_naming(message_batch, level)
    gemini = await admin.post(
        "/v1beta/models/sim-mini:batchGenerateContent", headers={"x-goog-api-key": secret},
        json={"batch": {"inputConfig": {"requests": {"requests": [
            {"request": {"contents": [{"parts": [{"text": "hi"}], "role": "user"}]}}]}}}},
    )  # fmt: skip
    refused_naming(gemini, level)
    # Nothing was stored; the model the levels allow is taken.
    assert (await admin.get("/v1/batches", headers=bearer)).json()["data"] == []
    allowed = await admin.post(
        "/v1/files", headers=bearer, data={"purpose": "batch"},
        files={"file": ("ok.jsonl", jsonl([chat_line("a", model="sim-pro")]))},
    )  # fmt: skip
    taken = await admin.post("/v1/batches", headers=bearer, json={
        "input_file_id": allowed.json()["id"], "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    })  # fmt: skip
    assert taken.status_code == 200, taken.text


async def test_a_batch_past_its_window_ends_expired_billing_the_finished_lines(
    tmp_path: Path,
) -> None:
    data = config(tmp_path)
    data["batches"] |= {"completion_window_s": 1.5, "concurrency_per_batch": 1}
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": 60, "tokens_per_second": 0}
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with sdk:
            lines = [chat_line(f"e{i}") for i in range(40)]
            uploaded = await sdk.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
            batch = await sdk.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )

            async def ended() -> Any:
                found = await sdk.batches.retrieve(batch.id)
                assert found.status == "expired", found.status
                return found

            expired = await eventually(ended)
            assert expired.expired_at is not None and expired.request_counts is not None
            finished = expired.request_counts.completed
            assert 1 <= finished < 40
            rows = await rows_of(gw, batch.id)
            assert len(rows) == finished and len({r["custom_id"] for r in rows}) == finished
            assert expired.usage.input_tokens == sum(r["prompt_tokens"] for r in rows)
            # The finished lines' answers are in the output file, the rest expired.
            assert expired.output_file_id and expired.error_file_id
            output = (await sdk.files.content(expired.output_file_id)).content.splitlines()
            errors = (await sdk.files.content(expired.error_file_id)).content.splitlines()
            assert {orjson.loads(o)["custom_id"] for o in output} == {r["custom_id"] for r in rows}
            assert len(errors) == 40 - finished
            assert {orjson.loads(e)["error"]["code"] for e in errors} == {"batch_expired"}
            # Nothing runs or bills after the end; the batch holds nothing any more.
            await gw.gateway.accounts.ledger.flush()
            assert len(await rows_of(gw, batch.id)) == finished
            stored = await gw.gateway.store.batches.get(batch.id)
            assert stored is not None
            assert await gw.gateway.store.batches.outstanding({"key_id": stored["key_id"]}) == (
                0,
                0.0,
            )
