"""Every sampling and control field a caller sends reaches the upstream under the
upstream's own name, for every adapter; a field an adapter has no name for is refused
with a 400 naming it (never dropped on the way).

Callers speak OpenAI's dialect to the REST facade; the fakes take only the fields their
real API has (tests/support/upstreams/checks.py), so a field sent under OpenAI's name to
Anthropic or TGI is refused there, and a field dropped is seen missing here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.tgi import TgiWire

A = {"x-api-key": API_KEY}
MESSAGES = [{"role": "user", "content": "Say hello."}]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Gets the weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}}
# The sampling fields every adapter carries, with values none of them defaults to.
SAMPLING = {"temperature": 0.35, "top_p": 0.55, "max_tokens": 7, "stop": ["STOP", "END"]}


class Env:
    def __init__(self, fakes: dict[str, FakeUpstream], http: httpx.AsyncClient) -> None:
        self.fakes, self.http = fakes, http

    async def ask(self, fmt: str, path: str, body: dict[str, Any]) -> tuple[int, Any, Any]:
        """Posts `body` to the model served by `fmt`; returns the status, the answer and
        the body the upstream received (None when nothing reached it)."""
        fake = self.fakes[fmt]
        fake.seen.clear()
        response = await self.http.post(path, json={"model": f"{fmt}-model", **body}, headers=A)
        seen = fake.seen[-1].body if fake.seen else None
        return response.status_code, response.json(), seen


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[Env]:
    async with (
        serving(OpenAIWire()) as oa,
        serving(AnthropicWire()) as an,
        serving(TgiWire()) as tgi,
    ):
        fakes = {"openai": oa, "anthropic": an, "tgi": tgi}
        models = [
            model(f"{fmt}-model", provider(f"{fmt}-p", fmt, fake.url, stream=False))
            for fmt, fake in fakes.items()
        ]
        async with (
            running_gateway(with_models(*models)) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as http,
        ):
            yield Env(fakes, http)
            for fmt, fake in fakes.items():
                assert fake.problems == [], f"{fmt} refused: {fake.problems}"


async def test_openai_chat_gets_every_field_under_its_own_name(env: Env):
    fields = {
        **SAMPLING, "seed": 42, "presence_penalty": 0.5, "frequency_penalty": -0.25,
        "logit_bias": {"50256": -100}, "user": "end-user-7", "n": 2, "logprobs": True,
        "top_logprobs": 3, "tools": [TOOL], "tool_choice": "required",
        "parallel_tool_calls": False, "reasoning_effort": "low",
        "metadata": {"team": "search"},
    }  # fmt: skip
    status, answer, seen = await env.ask("openai", "/v1/chat/completions",
                                         {"messages": MESSAGES, **fields})  # fmt: skip
    assert status == 200, answer
    assert {k: seen.get(k) for k in fields} == fields
    formatted = {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}
    status, answer, seen = await env.ask("openai", "/v1/chat/completions",
                                         {"messages": MESSAGES, "response_format": formatted})  # fmt: skip
    assert status == 200, answer
    assert seen["response_format"] == formatted


async def test_openai_chat_max_tokens_under_the_configured_name():
    async with serving(OpenAIWire()) as fake:
        data = with_models(
            model("reasoning", provider("r", "openai", fake.url,
                                        max_tokens_field="max_completion_tokens"))
        )  # fmt: skip
        async with (
            running_gateway(data) as gw,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
        ):
            body = {"model": "reasoning", "messages": MESSAGES, "max_tokens": 9}
            response = await http.post("/v1/chat/completions", json=body, headers=A)
    assert response.status_code == 200, response.text
    assert fake.seen[-1].body["max_completion_tokens"] == 9
    assert "max_tokens" not in fake.seen[-1].body


async def test_openai_completions_get_every_field_under_its_own_name(env: Env):
    fields = {
        **SAMPLING, "seed": 42, "presence_penalty": 0.5, "frequency_penalty": -0.25,
        "logit_bias": {"50256": -100}, "user": "end-user-7", "n": 2, "best_of": 3,
        "logprobs": 2, "suffix": "!",
    }  # fmt: skip
    status, answer, seen = await env.ask("openai", "/v1/completions",
                                         {"prompt": "Once", **fields})  # fmt: skip
    assert status == 200, answer
    assert {k: seen.get(k) for k in fields} == fields


async def test_anthropic_gets_each_field_under_the_messages_api_name(env: Env):
    body = {"messages": MESSAGES, **SAMPLING, "user": "end-user-7", "tools": [TOOL],
            "tool_choice": "required", "parallel_tool_calls": False}  # fmt: skip
    status, answer, seen = await env.ask("anthropic", "/v1/chat/completions", body)
    assert status == 200, answer
    assert seen["temperature"] == 0.35 and seen["top_p"] == 0.55
    assert seen["max_tokens"] == 7
    assert seen["stop_sequences"] == ["STOP", "END"]
    assert seen["metadata"] == {"user_id": "end-user-7"}
    assert seen["tools"] == [
        {"name": "get_weather", "description": "Gets the weather of a city.",
         "input_schema": TOOL["function"]["parameters"]}  # type: ignore[index]
    ]  # fmt: skip
    assert seen["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    formatted = {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}
    status, answer, seen = await env.ask(
        "anthropic", "/v1/chat/completions", {"messages": MESSAGES, "response_format": formatted}
    )
    assert status == 200, answer
    assert seen["tool_choice"] == {"type": "tool", "name": "reply"}
    assert seen["tools"][-1]["name"] == "reply" and seen["tools"][-1]["input_schema"] == SCHEMA
    # A text completion is one user turn, with the same fields.
    status, answer, seen = await env.ask("anthropic", "/v1/completions",
                                         {"prompt": "Once", **SAMPLING})  # fmt: skip
    assert status == 200, answer
    assert (seen["temperature"], seen["top_p"], seen["max_tokens"]) == (0.35, 0.55, 7)
    assert seen["stop_sequences"] == ["STOP", "END"]


async def test_tgi_gets_each_field_under_its_parameters_name(env: Env):
    for path, body in (
        ("/v1/chat/completions", {"messages": MESSAGES}),
        ("/v1/completions", {"prompt": "Once"}),
    ):
        status, answer, seen = await env.ask("tgi", path, {**body, **SAMPLING})
        assert status == 200, answer
        assert seen["parameters"] == {
            "temperature": 0.35, "do_sample": True, "top_p": 0.55, "max_new_tokens": 7,
            "stop": ["STOP", "END"], "details": True,
        }  # fmt: skip
    # temperature 0 is greedy decoding (TGI refuses a temperature of 0).
    status, answer, seen = await env.ask("tgi", "/v1/completions",
                                         {"prompt": "Once", "temperature": 0})  # fmt: skip
    assert status == 200, answer
    assert seen["parameters"]["do_sample"] is False and "temperature" not in seen["parameters"]


# Fields an adapter's wire format has no name for: refused before any upstream call.
NAMELESS = [
    (fmt, name, value)
    for fmt in ("anthropic", "tgi")
    for name, value in (
        ("seed", 42), ("presence_penalty", 0.5), ("frequency_penalty", 0.5),
        ("logit_bias", {"50256": -100}), ("n", 2), ("logprobs", True),
        ("reasoning_effort", "low"), ("metadata", {"team": "search"}),
    )
] + [("tgi", "tools", [TOOL]), ("tgi", "response_format", {"type": "json_object"})]  # fmt: skip


@pytest.mark.parametrize("fmt, name, value", NAMELESS, ids=[f"{f}-{n}" for f, n, _ in NAMELESS])
async def test_a_field_the_upstream_has_no_name_for_is_refused_naming_it(
    env: Env, fmt, name, value
):
    status, answer, seen = await env.ask(
        fmt, "/v1/chat/completions", {"messages": MESSAGES, name: value}
    )
    assert status == 400, answer
    assert answer["error"]["param"] == name
    assert answer["error"]["code"] == "unsupported_capability"
    assert seen is None


async def test_user_has_no_tgi_name_and_is_not_sent(env: Env):
    """TGI's GenerateParameters has no end-user id: `user` is for the gateway's records
    and the upstream's abuse tracking, which TGI does not do."""
    status, answer, seen = await env.ask("tgi", "/v1/chat/completions",
                                         {"messages": MESSAGES, "user": "u"})  # fmt: skip
    assert status == 200, answer
    assert "user" not in seen and "user" not in seen["parameters"]


async def test_openai_completions_get_prompt_arrays_as_sent(env: Env):
    for prompt in (["Once", "Twice"], [1, 2, 3], [[1, 2], [3]]):
        status, answer, seen = await env.ask(
            "openai", "/v1/completions", {"prompt": prompt, "max_tokens": 2}
        )
        assert status == 200, answer
        assert seen["prompt"] == prompt


@pytest.mark.parametrize("fmt", ["anthropic", "tgi"])
async def test_prompt_arrays_need_an_upstream_that_takes_them(env: Env, fmt: str):
    for prompt in (["a", "b"], [1, 2, 3]):
        status, answer, seen = await env.ask(fmt, "/v1/completions", {"prompt": prompt})
        assert status == 400 and seen is None, answer
        assert (
            answer["error"]["param"] == "prompt" and "prompt_arrays" in answer["error"]["message"]
        )
    # One string in an array is a plain prompt, which every adapter takes.
    status, answer, seen = await env.ask(fmt, "/v1/completions", {"prompt": ["a"], "max_tokens": 2})
    assert status == 200, answer
