"""The Responses API's namespace tools (Codex's multi-agent tools) on every model: an
upstream serving the Responses API gets them as sent and answers calls with their
namespace; any other gets each function as a tool named `{namespace}__{name}`, and its
calls come back as the namespace's function; a call given back in the input goes to
each upstream in the form it knows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.facade import A
from tests.support.gateways import running_gateway
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.responses import ResponsesWire

AGENTS = {
    "type": "namespace", "name": "agents", "description": "Tools for sub-agents.",
    "tools": [{"type": "function", "name": "spawn_agent", "description": "Spawns one.",
               "strict": False, "parameters": {"type": "object",
                                               "properties": {"task": {"type": "string"}}}}],
}  # fmt: skip


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[tuple[httpx.AsyncClient, FakeUpstream, FakeUpstream]]:
    async with serving(ResponsesWire()) as native, serving(OpenAIWire()) as chat:
        data = with_models(
            model("native", provider("native-p", "openai", native.url, responses_api=True)),
            model("chat", provider("chat-p", "openai", chat.url)),
        )
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{gw.http_port}", headers=A, timeout=10
            ) as client,
        ):
            yield client, native, chat


def final(response: httpx.Response, streamed: bool) -> dict[str, Any]:
    if not streamed:
        return dict(response.json())
    last = response.text.strip().split("\n\n")[-1]
    return dict(json.loads(last.split("\n", 1)[1].removeprefix("data: "))["response"])


def calls(output: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    return [(i.get("namespace"), i["name"]) for i in output if i["type"] == "function_call"]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("name", ["native", "chat", "sim-mini"])
async def test_a_namespaced_function_is_called_on_every_model(
    env: Any, name: str, streamed: bool
) -> None:
    client, native, chat = env
    body = {"model": name, "input": "Spawn an agent.", "tools": [AGENTS],
            "tool_choice": "required", "store": False, "stream": streamed}  # fmt: skip
    r = await client.post("/v1/responses", json=body)
    assert r.status_code == 200, r.text
    assert calls(final(r, streamed)["output"]) == [("agents", "spawn_agent")]
    if name == "native":
        assert native.seen[-1].body["tools"] == [AGENTS]
    if name == "chat":
        (tool,) = chat.seen[-1].body["tools"]
        assert tool["function"]["name"] == "agents__spawn_agent"


@pytest.mark.parametrize("name", ["native", "chat"])
async def test_a_namespaced_call_given_back_reaches_each_upstream_in_its_form(
    env: Any, name: str
) -> None:
    client, native, chat = env
    call = {"type": "function_call", "call_id": "call_1", "name": "spawn_agent",
            "namespace": "agents", "arguments": "{}"}  # fmt: skip
    result = {"type": "function_call_output", "call_id": "call_1", "output": "spawned"}
    body = {"model": name, "tools": [AGENTS], "store": False,
            "input": [{"role": "user", "content": "Spawn an agent."}, call, result]}  # fmt: skip
    r = await client.post("/v1/responses", json=body)
    assert r.status_code == 200, r.text
    if name == "native":
        sent = native.seen[-1].body["input"][1]
        assert (sent["name"], sent["namespace"]) == ("spawn_agent", "agents")
    else:
        (tool_call,) = chat.seen[-1].body["messages"][1]["tool_calls"]
        assert tool_call["function"]["name"] == "agents__spawn_agent"


@pytest.mark.parametrize(
    "tool, field",
    [
        ({**AGENTS, "tools": []}, "tools[0].tools"),
        ({**AGENTS, "name": "a b"}, "tools[0].name"),
        ({**AGENTS, "color": "red"}, "tools[0].color"),
        ({**AGENTS, "name": "n" * 60}, "tools[0].tools[0].name"),
        ({**AGENTS, "tools": [{"type": "custom", "name": "x"}]}, "tools[0].tools[0].type"),
    ],
)
async def test_a_bad_namespace_is_refused_by_name(env: Any, tool: Any, field: str) -> None:
    client, _, _ = env
    r = await client.post(
        "/v1/responses", json={"model": "sim-mini", "input": "Hi", "tools": [tool]}
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
