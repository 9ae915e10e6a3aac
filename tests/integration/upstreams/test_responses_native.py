"""Upstreams that serve the Responses API themselves (`responses_api: true`): requests
go there as they came, built-in tools included; encrypted reasoning goes back only to
the provider that made it; a continuation is forwarded by id only to the provider
that stored it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.facade import A
from tests.support.gateways import running_gateway
from tests.support.upstreams.base import FakeUpstream, Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.responses import ResponsesWire

# What Codex sends: no storage, encrypted reasoning asked for, function tools,
# instructions, a prompt cache key, a stream.
CODEX = {
    "instructions": "You are a coding agent.",
    "input": [{"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "List the files."}]}],
    "tools": [{"type": "function", "name": "shell", "description": "Runs a command.",
               "strict": False, "parameters": {"type": "object",
                                               "properties": {"command": {"type": "string"}}}}],
    "tool_choice": "auto", "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "session-1", "prompt_cache_retention": "24h",
}  # fmt: skip


def events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in raw.strip().split("\n\n"):
        name, data = block.split("\n", 1)
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


@pytest.fixture
async def setup() -> AsyncIterator[tuple[httpx.AsyncClient, FakeUpstream, FakeUpstream]]:
    async with serving(ResponsesWire()) as one, serving(ResponsesWire()) as two:
        data = with_models(
            model("native", provider("native-primary", "openai", one.url, responses_api=True)),
            model("native2", provider("native2-primary", "openai", two.url, responses_api=True)),
            model("native-unary", provider("native-unary-primary", "openai", one.url,
                                           responses_api=True, stream=False)),
        )  # fmt: skip
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{gw.http_port}", headers=A, timeout=10
            ) as client,
        ):
            yield client, one, two


async def test_codex_shaped_stream_and_encrypted_reasoning(setup: Any) -> None:
    client, one, two = setup
    r = await client.post("/v1/responses", json={**CODEX, "model": "native"})
    assert r.status_code == 200, r.text
    seen = events(r.text)
    kinds = [k for k, _ in seen]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert "response.reasoning_summary_part.added" in kinds
    assert "response.reasoning_summary_text.delta" in kinds
    assert kinds[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in seen] == list(range(len(seen)))
    final = seen[-1][1]["response"]
    reasoning, message = final["output"]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Thinking briefly."}]
    sealed = reasoning["encrypted_content"]
    assert sealed != "enc-0" and sealed.endswith("enc-0")
    assert message["content"][0]["text"] == "Hello, world! This is a fake reply."
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] == 5
    sent = one.seen[-1].body
    assert sent["model"] == "gpt-fake" and sent["store"] is False and sent["stream"] is True
    assert sent["instructions"] == CODEX["instructions"]
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["prompt_cache_key"] == "session-1" and sent["prompt_cache_retention"] == "24h"
    assert final["prompt_cache_retention"] == "24h"
    assert sent["tools"] == CODEX["tools"]
    assert "previous_response_id" not in sent

    # Codex's next turn sends the reasoning back: only the provider that made it gets it.
    turn = [*CODEX["input"], reasoning, message,
            {"type": "message", "role": "user", "content": "Thanks."}]  # fmt: skip
    again = await client.post("/v1/responses", json={**CODEX, "model": "native", "input": turn})
    assert again.status_code == 200, again.text
    back = [i for i in one.seen[-1].body["input"] if i.get("type") == "reasoning"]
    assert [i["encrypted_content"] for i in back] == ["enc-0"]
    other = await client.post("/v1/responses", json={**CODEX, "model": "native2", "input": turn})
    assert other.status_code == 200, other.text
    assert [i.get("type") for i in two.seen[-1].body["input"]] == [
        "message", "message", "message"
    ]  # fmt: skip
    simulated = await client.post(
        "/v1/responses", json={**CODEX, "model": "sim-mini", "input": turn}
    )
    assert simulated.status_code == 200, simulated.text


async def test_built_in_tools_only_where_served(setup: Any) -> None:
    client, one, _ = setup
    body = {"input": "News?", "tools": [{"type": "web_search"}], "store": False}
    r = await client.post("/v1/responses", json={**body, "model": "native"})
    assert r.status_code == 200, r.text
    kinds = [item["type"] for item in r.json()["output"]]
    assert kinds == ["reasoning", "web_search_call", "message"]
    assert one.seen[-1].body["tools"] == [{"type": "web_search"}]
    refused = await client.post("/v1/responses", json={**body, "model": "sim-mini"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "tools[0].type" and error["code"] == "unsupported_capability"


async def test_continuation_by_id_only_where_stored(setup: Any) -> None:
    client, one, two = setup
    first = (await client.post("/v1/responses", json={"model": "native", "input": "Hi"})).json()
    second = await client.post(
        "/v1/responses",
        json={"model": "native", "input": "Again", "previous_response_id": first["id"]},
    )
    assert second.status_code == 200, second.text
    sent = one.seen[-1].body
    assert sent["previous_response_id"] == "resp_up0"
    assert [i["content"][0]["text"] for i in sent["input"]] == ["Again"]
    third = await client.post(
        "/v1/responses",
        json={
            "model": "native2",
            "input": "Once more",
            "previous_response_id": second.json()["id"],
        },
    )
    assert third.status_code == 200, third.text
    sent = two.seen[-1].body
    assert "previous_response_id" not in sent
    # The whole conversation, but none of the other provider's reasoning.
    assert [i.get("role") or i["type"] for i in sent["input"]] == [
        "user", "assistant", "user", "assistant", "user"
    ]  # fmt: skip


async def test_a_whole_answer_from_the_upstream_and_its_usage(setup: Any) -> None:
    client, one, _ = setup
    one.usage = Usage(prompt_tokens=30, cached_tokens=10)
    r = await client.post("/v1/responses", json={"model": "native-unary", "input": "Hi",
                                                 "store": False})  # fmt: skip
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["output"][-1]["content"][0]["text"] == "Hello, world! This is a fake reply."
    # The upstream's own counts, as it reported them (reasoning included).
    assert reply["usage"]["input_tokens"] == 30
    assert reply["usage"]["input_tokens_details"]["cached_tokens"] == 10
    assert reply["usage"]["output_tokens"] == 15
    assert reply["usage"]["output_tokens_details"]["reasoning_tokens"] == 5
    seen = one.seen[-1]
    assert seen.path == "/v1/responses" and not seen.body.get("stream")
    assert one.problems == []
