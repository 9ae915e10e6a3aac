"""Gemini-dialect requests against every upstream kind (simulated, OpenAI-compatible,
Anthropic, Gemini), with fakes that refuse what the real APIs refuse: one
conversation with a function-calling turn moving between all four, what a Gemini
upstream is sent (the request as written) and gives back (untouched, its thought
signatures sealed to it), and Gemini-only fields refused by name elsewhere."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.gemini import BYPASS, GeminiWire
from tests.support.upstreams.openai import OpenAIWire

G = {"x-goog-api-key": API_KEY}
MODELS = ("sim-mini", "oa", "claude-x", "gem")
WEATHER = {
    "functionDeclarations": [{
        "name": "get_weather",
        "description": "Gets the weather of a city.",
        "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                                 "required": ["city"]},
    }]
}  # fmt: skip


class Env:
    def __init__(self, fakes: dict[str, FakeUpstream], client: httpx.AsyncClient) -> None:
        self.fakes, self.client = fakes, client

    async def generate(self, model_id: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.client.post(
            f"/v1beta/models/{model_id}:generateContent", json=body, headers=G
        )
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer


@pytest.fixture(scope="module")
async def env_module() -> AsyncIterator[Env]:
    async with (
        serving(OpenAIWire()) as oa,
        serving(AnthropicWire()) as an,
        serving(GeminiWire()) as ge,
    ):
        openai = provider("oa-p", "openai", oa.url)
        # As OpenAI's own API: no top-K sampling (docs/providers.md).
        openai["capabilities"] = ["tools", "images", "structured_output", "n",
                                  "sampling_controls", "logprobs", "reasoning_effort"]  # fmt: skip
        data = with_models(
            model("oa", openai),
            model("claude-x", provider("claude-x-p", "anthropic", an.url)),
            model("gem", provider("gem-p", "gemini", ge.url)),
            model("gem-other", provider("gem-other-p", "gemini", ge.url)),
        )
        async with running_gateway(data) as gw:
            url = f"http://127.0.0.1:{gw.http_port}"
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                yield Env({"openai": oa, "anthropic": an, "gemini": ge}, client)


@pytest.fixture
def env(env_module: Env) -> AsyncIterator[Env]:
    for fake in env_module.fakes.values():
        fake.seen.clear()
    yield env_module
    for name, fake in env_module.fakes.items():
        assert not fake.problems, f"{name} refused: {fake.problems}"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def calls(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in answer["candidates"][0]["content"]["parts"] if "functionCall" in p]


@pytest.mark.parametrize("first", MODELS)
async def test_one_conversation_moves_between_every_upstream(env: Env, first: str) -> None:
    """A function call made by one upstream, answered, then the conversation carried on
    by each of the others in turn: every fake accepts what it is sent."""
    contents = [user("What is the weather in Paris?")]
    answer = await env.generate(first, {"contents": contents, "tools": [WEATHER]})
    (call,) = calls(answer)
    assert call["functionCall"]["name"] == "get_weather"
    contents.append(answer["candidates"][0]["content"])
    contents.append({"role": "user", "parts": [{"functionResponse": {
        "id": call["functionCall"].get("id"), "name": "get_weather",
        "response": {"output": "Sunny, 21 C."}}}]})  # fmt: skip
    for model_id in [m for m in MODELS if m != first]:
        answer = await env.generate(model_id, {"contents": contents, "tools": [WEATHER]})
        assert answer["candidates"][0]["finishReason"] == "STOP"
        # Its text carries the conversation on (a fake may call the tool again).
        said = [p for p in answer["candidates"][0]["content"]["parts"] if "text" in p]
        reply = {"role": "model", "parts": said or [{"text": "Noted."}]}
        contents = [*contents, reply, user("Thanks. And now?")]
    if first != "oa":  # the call and its answer reached the OpenAI-compatible one so
        sent = env.fakes["openai"].seen[-1].body["messages"]
        assert [m["role"] for m in sent[:3]] == ["user", "assistant", "tool"]


async def test_a_gemini_upstream_gets_the_request_as_written(env: Env) -> None:
    body = {
        "contents": [user("Search for news.")],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [WEATHER, {"googleSearch": {}}],
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT",
                            "threshold": "BLOCK_LOW_AND_ABOVE"}],
        "generationConfig": {"temperature": 0.5, "topK": 3, "maxOutputTokens": 50,
                             "responseModalities": ["TEXT"]},
    }  # fmt: skip
    await env.generate("gem", copy.deepcopy(body))
    seen = env.fakes["gemini"].seen[-1]
    assert seen.path.endswith("/models/gemini-fake:generateContent") or ":stream" in seen.path
    assert seen.body == body


@pytest.mark.parametrize("model_id", ["sim-mini", "oa", "claude-x"])
async def test_what_only_gemini_honours_is_refused_by_name_elsewhere(
    env: Env, model_id: str
) -> None:
    cases = {
        "tools[1].googleSearch": {"tools": [WEATHER, {"googleSearch": {}}]},
        "safetySettings[0].threshold": {"safetySettings": [
            {"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_LOW_AND_ABOVE"}]},
        "cachedContent": {"cachedContent": "cachedContents/abc"},
        "generationConfig.speechConfig": {"generationConfig": {"speechConfig": {}}},
        "generationConfig.responseModalities": {
            "generationConfig": {"responseModalities": ["TEXT", "IMAGE"]}},
        "generationConfig.responseLogprobs": {"generationConfig": {"responseLogprobs": True}},
    }  # fmt: skip
    for field, extra in cases.items():
        response = await env.client.post(
            f"/v1/models/{model_id}:generateContent",
            json={"contents": [user("Hi.")], **extra},
            headers=G,
        )
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["status"] == "INVALID_ARGUMENT" and error["message"].startswith(field)
    lenient = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    await env.generate(model_id, {"contents": [user("Hi.")], "safetySettings": lenient})


@pytest.mark.parametrize("model_id", ["sim-mini", "oa", "claude-x"])
async def test_what_a_text_model_answers_anyway_is_accepted_everywhere(
    env: Env, model_id: str
) -> None:
    no_ops = {"responseModalities": ["TEXT"], "responseLogprobs": False,
              "audioTimestamp": False, "enableEnhancedCivicAnswers": False,
              "enableAffectiveDialog": False, "mediaResolution": "MEDIA_RESOLUTION_UNSPECIFIED",
              "response_modalities": ["text"], "speechConfig": None}  # fmt: skip
    answer = await env.generate(model_id, {"contents": [user("Hi.")], "generationConfig": no_ops})
    assert answer["candidates"][0]["content"]["parts"][0]["text"]


async def test_thought_signatures_go_back_only_to_their_maker(env: Env) -> None:
    gemini = env.fakes["gemini"].wire
    assert isinstance(gemini, GeminiWire)
    contents = [user("What is the weather in Rome?")]
    answer = await env.generate("gem", {"contents": contents, "tools": [WEATHER]})
    (call,) = calls(answer)
    written = call["thoughtSignature"]
    assert written not in gemini.issued  # sealed, not the upstream's own
    turn = [*contents, answer["candidates"][0]["content"], {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"output": "Rain."}}}]}]  # fmt: skip
    await env.generate("gem", {"contents": turn, "tools": [WEATHER]})
    (sent,) = calls({"candidates": [{"content": env.fakes["gemini"].seen[-1].body["contents"][1]}]})
    assert sent["thoughtSignature"] == gemini.issued[-1]  # opened for its maker
    await env.generate("gem-other", {"contents": turn, "tools": [WEATHER]})
    (sent,) = calls({"candidates": [{"content": env.fakes["gemini"].seen[-1].body["contents"][1]}]})
    assert sent["thoughtSignature"] == BYPASS  # another provider never sees it
    await env.generate("oa", {"contents": turn, "tools": [WEATHER]})
    assert written not in str(env.fakes["openai"].seen[-1].body)


async def test_a_gemini_stream_relays_the_upstreams_chunks(env: Env) -> None:
    async with env.client.stream(
        "POST", "/v1beta/models/gem:streamGenerateContent?alt=sse",
        json={"contents": [user("Hello.")]}, headers=G,
    ) as response:  # fmt: skip
        raw = b"".join([part async for part in response.aiter_raw()])
    assert response.status_code == 200, raw
    events = [e for e in raw.split(b"\n\n") if e]
    assert len(events) >= 2 and all(e.startswith(b"data: {") for e in events)
    assert b'"finishReason":"STOP"' in events[-1] and b'"totalCostUsd"' in events[-1]


def cli_shaped() -> dict[str, Any]:
    """Shaped as Gemini CLI sends a turn: a long system instruction, function
    declarations in JSON Schema, thinking shown, topK, two text parts in the user turn."""
    declarations = [
        {"name": f"tool_{i}", "description": f"Does thing {i}.",
         "parametersJsonSchema": {"type": "object", "properties": {
             "path": {"type": "string", "description": "A path."},
             "flags": {"type": "array", "items": {"type": "string"}}}, "required": ["path"]}}
        for i in range(8)
    ]  # fmt: skip
    return {
        "contents": [{"role": "user", "parts": [{"text": "<session_context>cwd</session_context>"},
                                                {"text": "List the files."}]}],
        "systemInstruction": {"parts": [{"text": "You are an agent. " * 500}]},
        "tools": [{"functionDeclarations": declarations}],
        "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64,
                             "thinkingConfig": {"includeThoughts": True}},
    }  # fmt: skip


@pytest.mark.parametrize("model_id", MODELS)
async def test_a_gemini_cli_turn_reaches_every_upstream(env: Env, model_id: str) -> None:
    body = cli_shaped()
    answer = await env.generate(model_id, copy.deepcopy(body))
    assert answer["candidates"][0]["finishReason"] == "STOP"
    if model_id == "gem":  # a Gemini upstream gets it as written
        assert env.fakes["gemini"].seen[-1].body == body
