"""Prompt-cache breakpoints a caller marks reach the upstreams that cache on request,
from every dialect that can mark them: chat completions' `cache_control` on content
parts and tools (the gateway's extension) and the Messages API's own, translated for
Anthropic's API (cache_control on the marked block) and Bedrock (a cachePoint after it,
`ttl: 1h` for an hour); a mark the APIs would refuse is a 400 naming it. Cache writes
come back by lifetime, priced apart, in each dialect's usage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, Usage, serving
from tests.support.upstreams.bedrock import BedrockWire
from tests.support.upstreams.config import model, provider, with_models

A = {"authorization": f"Bearer {API_KEY}"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE = {"type": "ephemeral"}
TOOL = {"type": "function", "function": {
    "name": "read_file", "description": "Reads a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}  # fmt: skip


class Env:
    def __init__(self, fakes: dict[str, FakeUpstream], http: httpx.AsyncClient) -> None:
        self.fakes, self.http = fakes, http

    async def send(self, kind: str, path: str, body: dict[str, Any]) -> tuple[httpx.Response, Any]:
        fake = self.fakes[kind]
        fake.seen.clear()
        headers = {**A, "anthropic-version": "2023-06-01"} if path == "/v1/messages" else A
        reply = await self.http.post(path, json={"model": f"{kind}-model", **body}, headers=headers)
        return reply, fake.seen[-1].body if fake.seen else None


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[Env]:
    usage = Usage(prompt_tokens=1000, cached_tokens=600, cache_write_tokens=300,
                  cache_write_1h_tokens=200)  # fmt: skip
    async with (
        serving(AnthropicWire(), usage=usage) as an,
        serving(BedrockWire(), usage=usage) as br,
    ):
        fakes = {"anthropic": an, "bedrock": br}
        models = [model(f"{kind}-model", provider(f"{kind}-p", kind, fake.url))
                  for kind, fake in fakes.items()]  # fmt: skip
        async with (
            running_gateway(with_models(*models)) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as http,
        ):
            yield Env(fakes, http)
            for kind, fake in fakes.items():
                assert fake.problems == [], f"{kind} refused: {fake.problems}"


def chat_body() -> dict[str, Any]:
    """An agent's turn: a marked system prompt, a marked tool, history, and the newest
    message marked for 5 minutes."""
    return {
        "max_tokens": 20,
        "tools": [{**TOOL, "cache_control": HOUR}],
        "messages": [
            {"role": "system", "content": [
                {"type": "text", "text": "You are a careful agent.", "cache_control": HOUR}]},
            {"role": "user", "content": "Open the readme."},
            {"role": "assistant", "content": "It says hello."},
            {"role": "user", "content": [
                {"type": "text", "text": "Now the license.", "cache_control": FIVE}]},
        ],
    }  # fmt: skip


async def test_chat_marks_reach_anthropic_as_cache_control(env: Env):
    reply, seen = await env.send("anthropic", "/v1/chat/completions", chat_body())
    assert reply.status_code == 200, reply.text
    assert seen["system"] == [
        {"type": "text", "text": "You are a careful agent.", "cache_control": HOUR}
    ]
    assert seen["tools"][0]["cache_control"] == HOUR
    last = seen["messages"][-1]["content"]
    assert last == [{"type": "text", "text": "Now the license.", "cache_control": FIVE}]
    # Unmarked turns carry no breakpoint.
    assert seen["messages"][0]["content"] == "Open the readme."
    usage = reply.json()["usage"]
    assert usage["prompt_tokens_details"] == {
        "cached_tokens": 600, "audio_tokens": 0, "cache_write_tokens": 300,
        "cache_write_1h_tokens": 200,
    }  # fmt: skip
    # PRICE: input 1, cached 0.5, write 1.25 (5m) and 2.0 (1h), USD per million.
    assert usage["cache_write_cost_usd"] == pytest.approx((100 * 1.25 + 200 * 2.0) / 1e6)
    assert usage["input_cost_usd"] == pytest.approx(100 * 1.0 / 1e6)


async def test_chat_marks_reach_bedrock_as_cache_points(env: Env):
    reply, seen = await env.send("bedrock", "/v1/chat/completions", chat_body())
    assert reply.status_code == 200, reply.text
    point = {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert seen["system"] == [{"text": "You are a careful agent."}, point]
    assert seen["toolConfig"]["tools"][1] == point
    last = seen["messages"][-1]["content"]
    assert last == [{"text": "Now the license."}, {"cachePoint": {"type": "default"}}]
    details = reply.json()["usage"]["prompt_tokens_details"]
    assert (details["cache_write_tokens"], details["cache_write_1h_tokens"]) == (300, 200)


async def test_messages_marks_reach_bedrock_and_writes_come_back_by_lifetime(env: Env):
    body = {
        "max_tokens": 20,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": HOUR}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Hello.", "cache_control": FIVE}]}],
    }  # fmt: skip
    reply, seen = await env.send("bedrock", "/v1/messages", body)
    assert reply.status_code == 200, reply.text
    assert seen["system"][-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert seen["messages"][0]["content"][-1] == {"cachePoint": {"type": "default"}}
    usage = reply.json()["usage"]
    assert usage["cache_creation_input_tokens"] == 300
    assert usage["cache_read_input_tokens"] == 600
    assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": 100,
                                       "ephemeral_1h_input_tokens": 200}  # fmt: skip
    assert usage["input_tokens"] == 100


@pytest.mark.parametrize(
    "mark, field",
    [({"type": "ephemeral", "ttl": "2h"}, "messages[0].content[0].cache_control.ttl"),
     ({"type": "persistent"}, "messages[0].content[0].cache_control.type")],
)  # fmt: skip
async def test_a_mark_the_apis_would_refuse_is_a_400_naming_it(env: Env, mark, field):
    body = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Hi.", "cache_control": mark}]}]}  # fmt: skip
    reply, seen = await env.send("anthropic", "/v1/chat/completions", body)
    assert reply.status_code == 400
    assert field in reply.json()["error"]["message"]
    assert seen is None
