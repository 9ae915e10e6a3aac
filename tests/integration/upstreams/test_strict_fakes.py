"""The fake upstreams refuse what the real APIs refuse, with the real APIs' answers.

Each case sends one request a real API would refuse (a wrong credential or its wrong
form, a missing version header, an unknown top-level field, a mistyped or out-of-range
field) straight to the fake with httpx, and checks the status and the error body; a
well-formed request beside them is answered. These are the checks the adapter tests
rely on: if one of them could not fail, a gateway bug it is meant to catch would pass.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import FakeUpstream, serving
from tests.support.upstreams.checks import KEY
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.responses import ResponsesWire
from tests.support.upstreams.tgi import TgiWire

BEARER = {"authorization": f"Bearer {KEY}"}
ANTHROPIC = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
CHAT = {"model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]}
COMPLETION = {"model": "gpt-fake", "prompt": "hi"}
MESSAGES = {
    "model": "claude-fake",
    "max_tokens": 8,
    "messages": [{"role": "user", "content": "hi"}],
}
GENERATE = {"inputs": "hi", "parameters": {"max_new_tokens": 8}}


@pytest.fixture(scope="module")
async def fakes() -> AsyncIterator[dict[str, FakeUpstream]]:
    async with (
        serving(OpenAIWire()) as openai,
        serving(AnthropicWire()) as anthropic,
        serving(TgiWire()) as tgi,
    ):
        yield {"openai": openai, "anthropic": anthropic, "tgi": tgi}


async def post(fake: FakeUpstream, path: str, headers: dict[str, str], body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=fake.url) as http:
        return await http.post(path, json=body, headers=headers)


WELL_FORMED = [
    ("openai", "/v1/chat/completions", BEARER, CHAT),
    ("openai", "/v1/chat/completions", BEARER, {**CHAT, "stream": True,
                                               "stream_options": {"include_usage": True}}),
    ("openai", "/v1/completions", BEARER, {**COMPLETION, "logprobs": 2, "echo": True}),
    ("openai", "/v1/chat/completions", BEARER, {
        **CHAT, "temperature": 0.2, "top_p": 0.9, "max_tokens": 5, "stop": ["x"], "seed": 3,
        "presence_penalty": 1, "frequency_penalty": -1, "logit_bias": {"50256": -100},
        "user": "u", "n": 2, "logprobs": True, "top_logprobs": 2, "metadata": {"a": "b"},
        "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto",
        "parallel_tool_calls": False, "response_format": {"type": "json_object"},
        "reasoning_effort": "low",
    }),
    ("openai", "/v1/chat/completions", BEARER, {**CHAT, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Sum it up."},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
    ]}]}),
    ("anthropic", "/v1/messages", ANTHROPIC, MESSAGES),
    ("anthropic", "/v1/messages", ANTHROPIC, {
        **MESSAGES, "temperature": 0.5, "top_p": 0.5, "top_k": 3, "stop_sequences": ["x"],
        "system": "be brief", "metadata": {"user_id": "u"}, "stream": True,
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    }),
    ("tgi", "/generate", BEARER, GENERATE),
    ("tgi", "/generate_stream", {"authorization": f"bearer {KEY}"}, {
        "inputs": "hi", "parameters": {"max_new_tokens": 8, "temperature": 0.5, "top_p": 0.5,
                                       "stop": ["x"], "do_sample": True, "details": True,
                                       "seed": 1, "frequency_penalty": 0.5}
    }),
]  # fmt: skip


@pytest.mark.parametrize("fmt, path, headers, body", WELL_FORMED)
async def test_a_well_formed_request_is_answered(fakes, fmt, path, headers, body):
    fakes[fmt].problems.clear()
    response = await post(fakes[fmt], path, headers, body)
    assert response.status_code == 200, response.text
    assert fakes[fmt].problems == []


OPENAI_REFUSED = [
    # name, path, headers, body, status, error (message start, param, code)
    ("no key", "/v1/chat/completions", {}, CHAT, 401,
     ("You didn't provide an API key", None, None)),
    ("key as x-api-key", "/v1/chat/completions", {"x-api-key": KEY}, CHAT, 401,
     ("You didn't provide an API key", None, None)),
    ("wrong key", "/v1/chat/completions", {"authorization": "Bearer sk-other"}, CHAT, 401,
     ("Incorrect API key provided", None, "invalid_api_key")),
    ("unknown field", "/v1/chat/completions", BEARER, {**CHAT, "stop_sequences": ["x"]}, 400,
     ("Unrecognized request argument supplied: stop_sequences", None, None)),
    ("a completions field on chat", "/v1/chat/completions", BEARER, {**CHAT, "echo": True}, 400,
     ("Unrecognized request argument supplied: echo", None, None)),
    ("a chat field on completions", "/v1/completions", BEARER, {**COMPLETION, "tools": []}, 400,
     ("Unrecognized request argument supplied: tools", None, None)),
    ("no messages", "/v1/chat/completions", BEARER, {"model": "gpt-fake"}, 400,
     ("Missing required parameter: 'messages'", "messages", "missing_required_parameter")),
    ("temperature as text", "/v1/chat/completions", BEARER, {**CHAT, "temperature": "0.5"}, 400,
     ("Invalid value for 'temperature'", "temperature", "invalid_value")),
    ("temperature above 2", "/v1/chat/completions", BEARER, {**CHAT, "temperature": 2.5}, 400,
     ("Invalid value for 'temperature'", "temperature", "invalid_value")),
    ("top_p above 1", "/v1/completions", BEARER, {**COMPLETION, "top_p": 1.5}, 400,
     ("Invalid value for 'top_p'", "top_p", "invalid_value")),
    ("max_tokens 0", "/v1/chat/completions", BEARER, {**CHAT, "max_tokens": 0}, 400,
     ("Invalid value for 'max_tokens'", "max_tokens", "invalid_value")),
    ("five stops", "/v1/chat/completions", BEARER, {**CHAT, "stop": list("abcde")}, 400,
     ("Invalid value for 'stop'", "stop", "invalid_value")),
    ("seed as float", "/v1/chat/completions", BEARER, {**CHAT, "seed": 1.5}, 400,
     ("Invalid value for 'seed'", "seed", "invalid_value")),
    ("penalty beyond 2", "/v1/chat/completions", BEARER, {**CHAT, "presence_penalty": 3}, 400,
     ("Invalid value for 'presence_penalty'", "presence_penalty", "invalid_value")),
    ("logprobs as int on chat", "/v1/chat/completions", BEARER, {**CHAT, "logprobs": 2}, 400,
     ("Invalid value for 'logprobs'", "logprobs", "invalid_value")),
    ("user as int", "/v1/chat/completions", BEARER, {**CHAT, "user": 7}, 400,
     ("Invalid value for 'user'", "user", "invalid_value")),
    ("stream_options without stream", "/v1/chat/completions", BEARER,
     {**CHAT, "stream_options": {"include_usage": True}}, 400,
     ("The 'stream_options' parameter is only allowed", "stream_options", None)),
    ("parallel_tool_calls without tools", "/v1/chat/completions", BEARER,
     {**CHAT, "parallel_tool_calls": True}, 400,
     ("Invalid value for 'parallel_tool_calls'", "parallel_tool_calls", None)),
    ("a tool in Anthropic's shape", "/v1/chat/completions", BEARER,
     {**CHAT, "tools": [{"name": "f", "input_schema": {}}]}, 400, ("tools[0]", None, None)),
    ("a file part without its data", "/v1/chat/completions", BEARER,
     {**CHAT, "messages": [{"role": "user", "content": [
         {"type": "file", "file": {"filename": "a.pdf", "data": "JVBERi0="}}]}]}, 400,
     ("messages[0].content[0].file fields", None, None)),
    ("unknown path", "/v1/chat/completion", BEARER, CHAT, 404,
     ("Invalid URL (POST /v1/chat/completion)", None, None)),
    ("unknown embedding field", "/v1/embeddings", BEARER,
     {"model": "m", "input": "x", "seed": 1}, 400,
     ("Unrecognized request argument supplied: seed", None, None)),
]  # fmt: skip


@pytest.mark.parametrize(
    "name, path, headers, body, status, expected",
    OPENAI_REFUSED,
    ids=[c[0] for c in OPENAI_REFUSED],
)
async def test_the_openai_fake_refuses_as_openai(
    fakes, name, path, headers, body, status, expected
):
    response = await post(fakes["openai"], path, headers, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    message, param, code = expected
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(message), error["message"]
    assert (error["param"], error["code"]) == (param, code)


ANTHROPIC_REFUSED = [
    ("no key", {"anthropic-version": "2023-06-01"}, MESSAGES, 401,
     ("authentication_error", "x-api-key header is required")),
    ("key as Bearer", {**BEARER, "anthropic-version": "2023-06-01"}, MESSAGES, 401,
     ("authentication_error", "x-api-key header is required")),
    ("wrong key", {**ANTHROPIC, "x-api-key": "sk-ant-other"}, MESSAGES, 401,
     ("authentication_error", "invalid x-api-key")),
    ("no version", {"x-api-key": KEY}, MESSAGES, 400,
     ("invalid_request_error", "anthropic-version: header is required")),
    ("unknown version", {**ANTHROPIC, "anthropic-version": "2099-01-01"}, MESSAGES, 400,
     ("invalid_request_error", "anthropic-version: invalid version")),
    ("OpenAI's stop", ANTHROPIC, {**MESSAGES, "stop": ["x"]}, 400,
     ("invalid_request_error", "stop: Extra inputs are not permitted")),
    ("OpenAI's user", ANTHROPIC, {**MESSAGES, "user": "u"}, 400,
     ("invalid_request_error", "user: Extra inputs are not permitted")),
    ("OpenAI's seed", ANTHROPIC, {**MESSAGES, "seed": 1}, 400,
     ("invalid_request_error", "seed: Extra inputs are not permitted")),
    ("no max_tokens", ANTHROPIC, {k: v for k, v in MESSAGES.items() if k != "max_tokens"}, 400,
     ("invalid_request_error", "max_tokens: Field required")),
    ("temperature above 1", ANTHROPIC, {**MESSAGES, "temperature": 1.5}, 400,
     ("invalid_request_error", "temperature: expected a value between 0 and 1")),
    ("temperature as text", ANTHROPIC, {**MESSAGES, "temperature": "0.5"}, 400,
     ("invalid_request_error", "temperature: expected a number")),
    ("stop_sequences as text", ANTHROPIC, {**MESSAGES, "stop_sequences": "x"}, 400,
     ("invalid_request_error", "stop_sequences: expected a list of strings")),
    ("metadata beyond user_id", ANTHROPIC, {**MESSAGES, "metadata": {"user": "u"}}, 400,
     ("invalid_request_error", "metadata.user: Extra inputs are not permitted")),
    ("a system role message", ANTHROPIC,
     {**MESSAGES, "messages": [{"role": "system", "content": "x"}]}, 400,
     ("invalid_request_error", "messages[0].role 'system'")),
    ("a cache lifetime of 2h", ANTHROPIC, {**MESSAGES, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}]},
     400, ("invalid_request_error", "cache_control.ttl")),
    ("five breakpoints", ANTHROPIC, {**MESSAGES, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}] * 5}]},
     400, ("invalid_request_error", "A maximum of 4 blocks with cache_control")),
    ("a tool in OpenAI's shape", ANTHROPIC,
     {**MESSAGES, "tools": [{"type": "function", "function": {"name": "f"}}]}, 400,
     ("invalid_request_error", "tools[0]")),
]  # fmt: skip


@pytest.mark.parametrize(
    "name, headers, body, status, expected",
    ANTHROPIC_REFUSED,
    ids=[c[0] for c in ANTHROPIC_REFUSED],
)
async def test_the_anthropic_fake_refuses_as_anthropic(
    fakes, name, headers, body, status, expected
):
    response = await post(fakes["anthropic"], "/v1/messages", headers, body)
    assert response.status_code == status, response.text
    answer = response.json()
    kind, message = expected
    assert answer["type"] == "error" and answer["error"]["type"] == kind
    assert answer["error"]["message"].startswith(message), answer["error"]["message"]


TGI_REFUSED = [
    ("no key", {}, GENERATE, 401, None),
    ("key as x-api-key", {"x-api-key": KEY}, GENERATE, 401, None),
    ("wrong key", {"authorization": "Bearer hf_other"}, GENERATE, 401, None),
    ("OpenAI's prompt", BEARER, {"prompt": "hi"}, 422, "unknown field `prompt`"),
    ("max_tokens at the top", BEARER, {**GENERATE, "max_tokens": 3}, 422,
     "unknown field `max_tokens`"),
    ("OpenAI's max_tokens", BEARER, {"inputs": "hi", "parameters": {"max_tokens": 3}}, 422,
     "parameters: unknown field `max_tokens`"),
    ("presence_penalty", BEARER, {"inputs": "hi", "parameters": {"presence_penalty": 1}}, 422,
     "parameters: unknown field `presence_penalty`"),
    ("temperature as text", BEARER, {"inputs": "hi", "parameters": {"temperature": "1"}}, 422,
     "parameters.temperature: invalid type"),
    ("stop as text", BEARER, {"inputs": "hi", "parameters": {"stop": "x"}}, 422,
     "parameters.stop: invalid type"),
    ("temperature 0", BEARER, {"inputs": "hi", "parameters": {"temperature": 0}}, 422,
     "`temperature` must be strictly positive"),
    ("top_p 1", BEARER, {"inputs": "hi", "parameters": {"top_p": 1.0}}, 422,
     "`top_p` must be > 0.0 and < 1.0"),
    ("max_new_tokens 0", BEARER, {"inputs": "hi", "parameters": {"max_new_tokens": 0}}, 422,
     "`max_new_tokens` must be strictly positive"),
    ("five stops", BEARER, {"inputs": "hi", "parameters": {"stop": list("abcde")}}, 422,
     "`stop` supports up to 4 stop sequences. Given: 5"),
    ("empty inputs", BEARER, {"inputs": ""}, 422, "`inputs` cannot be empty"),
]  # fmt: skip


@pytest.mark.parametrize(
    "name, headers, body, status, expected", TGI_REFUSED, ids=[c[0] for c in TGI_REFUSED]
)
async def test_the_tgi_fake_refuses_as_tgi(fakes, name, headers, body, status, expected):
    response = await post(fakes["tgi"], "/generate", headers, body)
    assert response.status_code == status, response.text
    if expected is None:
        assert response.content == b""
    elif response.headers["content-type"].startswith("application/json"):
        assert response.json() == {"error": expected, "error_type": "validation"}
    else:
        assert response.text.startswith("Failed to deserialize the JSON body")
        assert expected in response.text


async def test_anthropic_and_tgi_fakes_serve_only_their_paths(fakes):
    wrong = await post(fakes["anthropic"], "/v1/message", ANTHROPIC, MESSAGES)
    assert wrong.status_code == 404
    assert wrong.json()["error"] == {"type": "not_found_error", "message": "Not Found"}
    missing = await post(fakes["tgi"], "/v1/generate", BEARER, GENERATE)
    assert (missing.status_code, missing.content) == (404, b"")


async def test_a_fake_without_a_key_takes_requests_without_one():
    """An OpenAI-compatible server run without a key (vLLM, Ollama) takes any."""
    async with serving(OpenAIWire(key=None)) as fake:
        assert (await post(fake, "/v1/chat/completions", {}, CHAT)).status_code == 200
    async with serving(TgiWire(key=None)) as fake:
        assert (await post(fake, "/generate", {}, GENERATE)).status_code == 200


RESPONSE = {"model": "gpt-fake", "input": "hi"}
RESPONSES_REFUSED = [
    ("no key", {}, RESPONSE, 401, "You didn't provide an API key"),
    ("chat's messages", BEARER, {**RESPONSE, "messages": []}, 400,
     "Unrecognized request argument supplied: messages"),
    ("chat's max_tokens", BEARER, {**RESPONSE, "max_tokens": 5}, 400,
     "Unrecognized request argument supplied: max_tokens"),
    ("no model", BEARER, {"input": "hi"}, 400, "Missing required parameter: 'model'"),
    ("temperature above 2", BEARER, {**RESPONSE, "temperature": 3}, 400,
     "Invalid value for 'temperature'"),
    ("include as text", BEARER, {**RESPONSE, "include": "reasoning.encrypted_content"}, 400,
     "Invalid value for 'include'"),
]  # fmt: skip


@pytest.mark.parametrize(
    "name, headers, body, status, message", RESPONSES_REFUSED, ids=[c[0] for c in RESPONSES_REFUSED]
)
async def test_the_responses_fake_refuses_as_openai(name, headers, body, status, message):
    async with serving(ResponsesWire()) as fake:
        assert (await post(fake, "/v1/responses", BEARER, RESPONSE)).status_code == 200
        response = await post(fake, "/v1/responses", headers, body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["message"].startswith(message)
