"""Messages requests against every upstream kind (simulated, OpenAI-compatible,
Anthropic, TGI), with fakes that refuse what the real APIs refuse: a Claude Code-shaped
request, what reaches each upstream, provider-bound state (thinking signatures), server
tools, `anthropic-beta`, count_tokens, failover, and a failure mid-stream with its
ledger row."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.facade import A
from tests.support.gateways import running_gateway
from tests.support.upstreams.anthropic import COUNTED, AnthropicWire
from tests.support.upstreams.base import FakeUpstream, Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.shapes import SIGNATURE
from tests.support.upstreams.tgi import TgiWire

HEADERS = {**A, "anthropic-version": "2023-06-01"}
KINDS = ("simulated", "openai", "anthropic", "tgi")
MODEL = {"simulated": "sim-mini", "openai": "oa", "anthropic": "claude-x", "tgi": "tgi-x"}


def claude_code_request(stream: bool) -> dict[str, Any]:
    """Shaped as Claude Code sends a turn: system blocks with cache_control, many tools,
    a tool loop with `tool_result` blocks, metadata.user_id."""
    tools = [
        {"name": f"Tool{i}", "description": f"Does thing {i}.",
         "input_schema": {"type": "object", "properties": {"path": {"type": "string"},
                          "limit": {"type": "integer", "minimum": 1}}, "required": ["path"]}}
        for i in range(22)
    ]  # fmt: skip
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "",
        "max_tokens": 512,
        "stream": stream,
        "temperature": 1,
        "metadata": {"user_id": "user_abc123_account__session_42"},
        "system": [
            {"type": "text", "text": "You are a coding agent."},
            {"type": "text", "text": "Work in the repository.", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": tools,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_01", "name": "Tool0", "input": {"path": "."}},
                {"type": "tool_use", "id": "toolu_02", "name": "Tool1",
                 "input": {"path": "src", "limit": 5}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.py\nb.py"},
                {"type": "tool_result", "tool_use_id": "toolu_02", "is_error": True,
                 "content": [{"type": "text", "text": "no such directory"}]},
                {"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}}]},
        ],
    }  # fmt: skip


class Env:
    def __init__(self, fakes: dict[str, FakeUpstream], client: httpx.AsyncClient, gw: Any) -> None:
        self.fakes, self.client, self.gw = fakes, client, gw

    def last(self, kind: str) -> Any:
        return self.fakes[kind].seen[-1]

    async def messages(self, body: dict[str, Any], **headers: str) -> httpx.Response:
        return await self.client.post("/v1/messages", json=body, headers={**HEADERS, **headers})


@pytest.fixture(scope="module")
async def env_module() -> AsyncIterator[Env]:
    async with (
        serving(OpenAIWire()) as oa,
        serving(AnthropicWire()) as an,
        serving(TgiWire()) as tg,
    ):
        fast = {"breaker": {"failure_threshold": 1000, "cooldown_s": 1}}
        data = with_models(
            model("oa", provider("oa-p", "openai", oa.url, **fast)),
            model("claude-x", provider("claude-x-p", "anthropic", an.url, **fast)),
            model("claude-u", provider("claude-u-p", "anthropic", an.url, stream=False)),
            model("tgi-x", provider("tgi-x-p", "tgi", tg.url)),
            model("claude-then-oa", provider("cto-a", "anthropic", an.url, **fast),
                  provider("cto-o", "openai", oa.url, "backup", **fast)),
        )  # fmt: skip
        plain = provider("oa-plain-p", "openai", oa.url)
        plain["capabilities"] = ["tools", "images"]  # a model without reasoning
        data["models"].append(model("oa-plain", plain))
        async with running_gateway(data) as gw:
            url = f"http://127.0.0.1:{gw.http_port}"
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                yield Env({"openai": oa, "anthropic": an, "tgi": tg}, client, gw)


@pytest.fixture
def env(env_module: Env) -> Env:
    for fake in env_module.fakes.values():
        fake.seen.clear()
        fake.faults = []
    yield env_module
    for name, fake in env_module.fakes.items():
        assert not fake.problems, f"{name} refused: {fake.problems}"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", KINDS)
async def test_claude_code_shaped_request(env: Env, kind: str, stream: bool) -> None:
    body = {**claude_code_request(stream), "model": MODEL[kind]}
    response = await env.messages(body)
    if kind == "tgi":
        # TGI's native API has no tools: refused by name, never dropped.
        assert response.status_code == 400, response.text
        error = response.json()
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert error["error"]["message"].startswith("tools:")
        return
    assert response.status_code == 200, response.text
    if stream:
        assert b"event: message_stop" in response.content
    else:
        assert response.json()["content"]
    if kind == "anthropic":
        sent = env.last("anthropic").body
        # As the caller wrote it: cache_control, tools, metadata and blocks untouched.
        expected = {k: v for k, v in body.items() if k not in ("model", "stream")}
        assert {k: v for k, v in sent.items() if k not in ("model", "stream")} == expected
        assert sent["model"] == "claude-fake"
    if kind == "openai":
        sent = env.last("openai").body
        assert sent["user"] == "user_abc123_account__session_42"
        assert len(sent["tools"]) == 22
        roles = [m["role"] for m in sent["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
        assert sent["messages"][4]["content"] == "Error: no such directory"
        assert [c["id"] for c in sent["messages"][2]["tool_calls"]] == ["toolu_01", "toolu_02"]
        assert json.loads(sent["messages"][2]["tool_calls"][1]["function"]["arguments"]) == {
            "path": "src", "limit": 5}  # fmt: skip


@pytest.mark.parametrize("name", ["claude-x", "claude-u"])
async def test_anthropic_upstream_reply_comes_back_untouched(env: Env, name: str) -> None:
    body = {
        "model": name, "max_tokens": 2000, "messages": [{"role": "user", "content": "Hi"}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}],
    }  # fmt: skip
    response = await env.messages(body, **{"anthropic-beta": "interleaved-thinking-2025-05-14"})
    assert response.status_code == 200, response.text
    reply = response.json()
    assert [b["type"] for b in reply["content"]] == [
        "thinking", "server_tool_use", "web_search_tool_result", "text"]  # fmt: skip
    thinking, _, result, text = reply["content"]
    assert thinking == {
        "type": "thinking",
        "thinking": "Let me think.",
        "signature": SIGNATURE + "1",
    }
    assert result["content"][0]["encrypted_content"] == "enc-fake"
    assert result["content"][0]["page_age"] is None
    assert text["citations"][0]["encrypted_index"] == "ei-fake"
    assert reply["stop_reason"] == "end_turn" and reply["model"] == name
    assert reply["usage"]["input_tokens"] == 20
    assert reply["usage"]["server_tool_use"] == {"web_search_requests": 1}
    seen = env.last("anthropic")
    assert seen.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert seen.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


async def test_numbers_reach_anthropic_as_the_caller_wrote_them(env: Env) -> None:
    # A tool's schema is free JSON: whole numbers go on as integers, fractions as they
    # are, and a number beyond 2**53 (no longer an exact integer) as a float.
    schema = {"type": "object", "properties": {"n": {
        "type": "integer", "minimum": 200, "maximum": 2**53 - 1, "multipleOf": 0.5,
        "default": 2**53, "examples": [-7, 1e6]}}}  # fmt: skip
    body = {
        "model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"name": "pick", "input_schema": schema}],
    }  # fmt: skip
    response = await env.messages(body)
    assert response.status_code == 200, response.text
    sent = env.last("anthropic").body["tools"][0]["input_schema"]["properties"]["n"]
    typed = {k: (type(v).__name__, v) for k, v in sent.items() if k != "examples"}
    assert typed == {
        "type": ("str", "integer"), "minimum": ("int", 200), "maximum": ("int", 2**53 - 1),
        "multipleOf": ("float", 0.5), "default": ("float", float(2**53)),
    }  # fmt: skip
    assert [(type(v).__name__, v) for v in sent["examples"]] == [("int", -7), ("int", 1000000)]


THOUGHT = {"type": "thinking", "thinking": "Earlier.", "signature": SIGNATURE + "0"}
GATEWAY_THOUGHT = {"type": "thinking", "thinking": "Mine.",
                   "signature": "gateway-signature:simulated:00"}  # fmt: skip


def with_history(name: str, *thoughts: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": name, "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [*thoughts, {"type": "text", "text": "Hello."}]},
            {"role": "user", "content": "More?"},
        ],
    }  # fmt: skip


async def test_thinking_goes_back_only_to_its_maker(env: Env) -> None:
    # Anthropic's own signature goes back to it; one the gateway made does not.
    response = await env.messages(with_history("claude-x", THOUGHT, GATEWAY_THOUGHT))
    assert response.status_code == 200, response.text
    sent = env.last("anthropic").body["messages"][1]["content"]
    assert sent == [THOUGHT, {"type": "text", "text": "Hello."}]
    # An OpenAI-compatible upstream gets none (Anthropic's docs let earlier turns' thinking
    # be left out); its reasoning effort stands for the budget.
    response = await env.messages(with_history("oa", THOUGHT))
    assert response.status_code == 200, response.text
    sent = env.last("openai").body
    assert sent["messages"][1] == {"role": "assistant", "content": "Hello."}
    assert sent["reasoning_effort"] == "low"


async def test_failover_drops_provider_bound_state(env: Env) -> None:
    env.fakes["anthropic"].faults = [Fault("status", 500)]
    response = await env.messages(with_history("claude-then-oa", THOUGHT))
    assert response.status_code == 200, response.text
    assert env.fakes["anthropic"].seen and env.fakes["openai"].seen
    assert "signature" not in json.dumps(env.last("openai").body)


async def test_server_tools_need_an_anthropic_provider(env: Env) -> None:
    body = {"model": "oa", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]}  # fmt: skip
    response = await env.messages(body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("tools[0]: only the request's own format")
    assert not env.fakes["openai"].seen
    # On a model with an Anthropic provider and another kind, only the former is tried.
    env.fakes["anthropic"].faults = [Fault("status", 500)]
    response = await env.messages({**body, "model": "claude-then-oa"})
    assert response.status_code == 502  # the upstream answered badly
    assert response.json()["error"]["type"] == "api_error"
    assert not env.fakes["openai"].seen


async def test_count_tokens_by_the_upstream_or_estimated(env: Env) -> None:
    body = {"model": "claude-x", "messages": [{"role": "user", "content": "Hi"}],
            "system": "Be brief."}  # fmt: skip
    beta = {**HEADERS, "anthropic-beta": "token-counting-2024-11-01"}
    response = await env.client.post("/v1/messages/count_tokens", json=body, headers=beta)
    assert response.json() == {"input_tokens": COUNTED, "method": "provider"}
    assert env.last("anthropic").path == "/v1/messages/count_tokens"
    assert env.last("anthropic").headers["anthropic-beta"] == "token-counting-2024-11-01"
    assert env.last("anthropic").body == {**body, "model": "claude-fake"}
    response = await env.client.post(
        "/v1/messages/count_tokens", json={**body, "model": "oa"}, headers=HEADERS
    )
    assert response.json()["method"] == "estimate" and response.json()["input_tokens"] > 0
    env.fakes["anthropic"].faults = [Fault("status", 500)]
    response = await env.client.post("/v1/messages/count_tokens", json=body, headers=HEADERS)
    assert response.json()["method"] == "estimate"


async def test_failure_mid_stream_is_an_error_event_and_a_ledger_row(env: Env) -> None:
    env.fakes["anthropic"].faults = [Fault("abort", after_tokens=3)]
    body = {"model": "claude-x", "max_tokens": 50, "stream": True,
            "messages": [{"role": "user", "content": "Hi"}]}  # fmt: skip
    response = await env.messages(body, **{"x-request-id": "messages-mid-stream-1"})
    assert response.status_code == 200
    frames = response.content.decode().strip().split("\n\n")
    assert frames[-1].startswith("event: error\ndata: ")
    error = json.loads(frames[-1].split("data: ", 1)[1])
    assert error["type"] == "error" and error["error"]["type"] in ("api_error", "overloaded_error")
    assert "Traceback" not in response.text and "message_stop" not in response.text
    ledger = env.gw.gateway.accounts.ledger
    await ledger.flush()
    rows = await env.gw.gateway.store.db.fetch(
        "SELECT * FROM usage_records WHERE request_id = 'messages-mid-stream-1'"
    )
    assert [(r["method"], r["status"], r["model"]) for r in rows] == [
        ("StreamMessage", "UNAVAILABLE", "claude-x")
    ]


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAen63NgAAAAASUVORK5CYII="


@pytest.mark.parametrize("kind", KINDS)
async def test_text_and_images_on_every_kind(env: Env, kind: str) -> None:
    text = {"model": MODEL[kind], "max_tokens": 50, "system": "Be brief.",
            "stop_sequences": ["\n\n"], "messages": [{"role": "user", "content": "Hi"}]}  # fmt: skip
    response = await env.messages(text)
    assert response.status_code == 200, response.text
    assert response.json()["content"][0]["type"] == "text"
    image = {**text, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "text", "text": "What is it?"}]}]}  # fmt: skip
    response = await env.messages(image)
    if kind == "tgi":
        assert response.status_code == 400
        assert response.json()["error"]["message"].startswith("messages:")
        return
    assert response.status_code == 200, response.text
    if kind == "openai":
        parts = env.last("openai").body["messages"][1]["content"]
        assert parts[0] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{PNG}"},
        }
        assert env.last("openai").body["stop"] == ["\n\n"]
    if kind == "anthropic":
        assert env.last("anthropic").body["messages"] == image["messages"]


async def test_thinking_hints_and_requirements(env: Env) -> None:
    """`adaptive` thinking and an effort are hints a provider without thinking serves
    without; `enabled` thinking is a requirement it refuses by name."""
    hinted = {"max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}],
              "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}  # fmt: skip
    response = await env.messages({**hinted, "model": "oa"})
    assert response.status_code == 200, response.text
    assert env.last("openai").body["reasoning_effort"] == "high"
    response = await env.messages({**hinted, "model": "oa-plain"})
    assert response.status_code == 200, response.text
    assert "reasoning_effort" not in env.last("openai").body
    response = await env.messages({**hinted, "model": "tgi-x"})
    assert response.status_code == 200, response.text
    required = {
        **hinted,
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    for name in ("oa-plain", "tgi-x"):
        response = await env.messages({**required, "model": name})
        assert response.status_code == 400
        assert response.json()["error"]["message"].startswith("thinking:")


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_json_schema_output_format_on_every_kind(env: Env, kind: str, stream: bool) -> None:
    """output_config.format is the gateway's structured output: an Anthropic upstream gets
    it as sent, an OpenAI-compatible one as response_format, the simulated model answers
    valid JSON; a provider without structured output refuses it by name."""
    body = {"model": MODEL[kind], "max_tokens": 200, "stream": stream,
            "messages": [{"role": "user", "content": "Extract: Ada, 36."}],
            "output_config": {"effort": "low",
                              "format": {"type": "json_schema", "schema": PERSON}}}  # fmt: skip
    response = await env.messages(body)
    if kind == "tgi":
        assert response.status_code == 400, response.text
        return
    assert response.status_code == 200, response.text
    if kind == "anthropic":
        assert env.last("anthropic").body["output_config"] == body["output_config"]
    if kind == "openai":
        sent = env.last("openai").body["response_format"]
        assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == PERSON
    if kind == "simulated":
        if stream:
            text = "".join(
                json.loads(line[6:])["delta"].get("text", "")
                for line in response.text.splitlines()
                if line.startswith("data: ") and '"text_delta"' in line
            )
        else:
            text = response.json()["content"][0]["text"]
        answer = json.loads(text)
        assert set(answer) == {"name", "age"} and isinstance(answer["age"], int)


@pytest.mark.parametrize(
    "output_format, field",
    [
        ({"type": "json_object"}, "output_config.format.type"),
        ({"type": "json_schema"}, "output_config.format.schema"),
        ({"type": "json_schema", "schema": {"type": 3}}, "output_config.format.schema.type"),
        ({"type": "json_schema", "schema": PERSON, "name": "x"}, "output_config.format.name"),
        ("json", "output_config.format"),
    ],
)
async def test_a_bad_output_format_is_refused_by_name(env: Env, output_format: Any, field: str):
    body = {"model": "sim-mini", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}],
            "output_config": {"format": output_format}}  # fmt: skip
    response = await env.messages(body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith(f"{field}:"), response.text


@pytest.mark.parametrize("kind", KINDS)
async def test_tuning_hints_are_served_on_every_kind(env: Env, kind: str) -> None:
    """A tool's eager_input_streaming (the Vercel AI SDK sends it by default), `speed` and
    output_config.task_budget only tune Anthropic's serving: every kind takes them, and an
    Anthropic upstream gets them as sent."""
    tool = {**claude_code_request(False)["tools"][0], "eager_input_streaming": True}
    body = {"model": MODEL[kind], "max_tokens": 100, "speed": "fast",
            "output_config": {"task_budget": {"type": "tokens", "total": 20000}},
            "messages": [{"role": "user", "content": "Hi"}]}  # fmt: skip
    if kind != "tgi":  # TGI's native API has no tools
        body["tools"] = [tool]
    response = await env.messages(body, **{"anthropic-beta": "fast-mode-2026-02-01"})
    assert response.status_code == 200, response.text
    if kind == "anthropic":
        sent = env.last("anthropic").body
        assert sent["tools"] == [tool] and sent["speed"] == "fast"
        assert sent["output_config"] == body["output_config"]
    bad = await env.messages({**body, "speed": "warp"})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("speed:")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_thread_is_refused_as_anthropic_refuses_it(env: Env, kind: str) -> None:
    body = {"model": MODEL[kind], "max_tokens": 50, "thread": {"type": "create"},
            "messages": [{"role": "user", "content": "Hi"}]}  # fmt: skip
    response = await env.messages(body)
    assert response.status_code == 400, response.text
    assert response.headers["x-should-retry"] == "false"
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith("thread:")
    assert error["details"] == {"error_code": "thread_unsupported_request"}
    assert kind not in env.fakes or not env.fakes[kind].seen
