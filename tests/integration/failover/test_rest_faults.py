"""Failover over REST/SSE against fake upstreams, and the `openai` SDK end to end.

The same fault matrix as the gRPC tests (tests/support/upstreams/matrix.py), as an HTTP caller
sees it: the backup's answer, or 502 (an upstream answered badly) / 503 (none
answered; Retry-After when the upstream gave one), or 400 for a request the upstream
refused. A stream broken after its first token ends with a `data: {"error": ...}`
event: no finish_reason, no [DONE].
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import TEXT, Fault, serving
from tests.support.upstreams.matrix import (
    BACKUP_TEXT,
    BEFORE_FIRST_TOKEN,
    Env,
    matrix_config,
)
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.tgi import TgiWire

# Whether the fault means "an upstream answered badly" (502) or "none answered" (503).
ANSWERED = {
    "500": True,
    "503": True,
    "429": False,
    "401": True,
    "slow-headers": False,
    "hang": False,
    "malformed": True,
    "cut-at-0": True,
    "abort-at-0": True,
}


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[Env]:
    async with (
        serving(OpenAIWire()) as oa,
        serving(AnthropicWire()) as an,
        serving(TgiWire()) as tg,
        serving(OpenAIWire()) as backup,
    ):
        fakes = {"openai": oa, "anthropic": an, "tgi": tg, "backup": backup}
        async with (
            running_gateway(matrix_config(fakes)) as running,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{running.http_port}",
                headers={"x-api-key": API_KEY},
                timeout=5,
            ) as client,
        ):
            yield Env(fakes, client, running)


@pytest.fixture
def gw(env: Env) -> Env:
    env.reset()
    return env


def sse_data(body: str) -> list[str]:
    return [line.removeprefix("data: ") for line in body.split("\n\n") if line.strip()]


async def chat(gw: Env, model: str, stream: bool) -> tuple[httpx.Response, str, list[Any]]:
    """POSTs a chat; returns the response, the text and the SSE events (JSON or [DONE])."""
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}]}
    response = await gw.client.post("/v1/chat/completions", json={**body, "stream": stream})
    if response.status_code != 200:
        return response, "", []
    if not stream:
        return response, response.json()["choices"][0]["message"]["content"], []
    events = [e if e == "[DONE]" else json.loads(e) for e in sse_data(response.text)]
    text = "".join(
        e["choices"][0]["delta"].get("content", "")
        for e in events
        if isinstance(e, dict) and "choices" in e
    )
    return response, text, events


MODES = pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
FORMATS = pytest.mark.parametrize("fmt", ["openai", "anthropic", "tgi"])
FAULTS = pytest.mark.parametrize(
    "name,fault", [f[:2] for f in BEFORE_FIRST_TOKEN], ids=[f[0] for f in BEFORE_FIRST_TOKEN]
)


@MODES
@FORMATS
@FAULTS
async def test_fault_before_first_token_fails_over(gw: Env, fmt, name, fault, stream):
    gw.fakes[fmt].default = fault
    response, text, events = await chat(gw, f"{fmt}-failover", stream)
    assert response.status_code == 200
    assert text == "".join(BACKUP_TEXT)
    if stream:
        assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "stop"


@MODES
@FORMATS
@FAULTS
async def test_fault_with_no_backup_is_an_http_error(gw: Env, fmt, name, fault, stream):
    gw.fakes[fmt].default = fault
    response, _, _ = await chat(gw, f"{fmt}-alone", stream)
    assert response.status_code == (502 if ANSWERED[name] else 503), response.text
    error = response.json()["error"]
    assert error["type"] == "upstream_error"
    assert f"{fmt}-alone-primary" in error["message"]
    if name == "429":
        assert response.headers["retry-after"] == "7"


@MODES
@FORMATS
async def test_request_refused_by_upstream_is_400_without_failover(gw: Env, fmt, stream):
    gw.fakes[fmt].default = Fault("status", 422)
    response, _, _ = await chat(gw, f"{fmt}-failover", stream)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert gw.fakes["backup"].seen == []


@FORMATS
@pytest.mark.parametrize("kind", ["cut", "abort", "malformed"])
async def test_stream_broken_after_first_token_ends_with_error_event(gw: Env, fmt, kind):
    gw.fakes[fmt].default = Fault(kind, after_tokens=3)
    response, text, events = await chat(gw, f"{fmt}-failover", True)
    assert response.status_code == 200, "the stream had started"
    assert text == "".join(TEXT[:3])
    assert "[DONE]" not in events
    assert events[-1]["error"]["type"] == "upstream_error"
    assert f"{fmt}-primary" in events[-1]["error"]["message"]
    finishes = [
        e["choices"][0].get("finish_reason")
        for e in events
        if isinstance(e, dict) and "choices" in e
    ]
    assert not any(finishes), "never a silent stop"


async def test_providers_show_live_health(gw: Env):
    response = await gw.client.get("/v1/providers", params={"model": "tgi-failover"})
    assert response.status_code == 200
    listed = response.json()["providers"]
    assert [(p["id"], p["type"], p["enabled"], p["health"]) for p in listed] == [
        ("tgi-primary", "primary", True, "healthy"),
        ("tgi-backup", "backup", True, "healthy"),
    ]


# -- the openai SDK, end to end -------------------------------------------------------


@pytest.fixture
def sdk(gw: Env) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{gw.running.http_port}/v1",
        api_key="unused",
        default_headers={"x-api-key": API_KEY},
        max_retries=0,
        timeout=5,
    )


async def test_openai_sdk_through_the_gateway_to_an_openai_upstream(gw: Env, sdk):
    messages: Any = [{"role": "user", "content": "Say hello."}]
    answer = await sdk.chat.completions.create(model="openai-failover", messages=messages)
    assert answer.choices[0].message.content == "".join(TEXT)
    assert answer.usage is not None and answer.usage.prompt_tokens == 20
    pieces = []
    stream = await sdk.chat.completions.create(
        model="openai-failover",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    assert "".join(pieces) == "".join(TEXT)
    seen = gw.fakes["openai"].seen
    assert seen[0].body["model"] == "gpt-fake" and seen[0].path == "/v1/chat/completions"
    text = await sdk.completions.create(model="openai-failover", prompt="Hi")
    assert text.choices[0].text == "".join(TEXT)


async def test_openai_sdk_fails_over_and_sees_errors(gw: Env, sdk):
    messages: Any = [{"role": "user", "content": "Say hello."}]
    gw.fakes["openai"].default = Fault("status", 500)
    answer = await sdk.chat.completions.create(model="openai-failover", messages=messages)
    assert answer.choices[0].message.content == "".join(BACKUP_TEXT)
    with pytest.raises(openai.APIStatusError) as info:
        await sdk.chat.completions.create(model="openai-alone", messages=messages)
    assert info.value.status_code == 502
    gw.fakes["openai"].default = Fault("cut", after_tokens=2)
    stream = await sdk.chat.completions.create(
        model="openai-failover", messages=messages, stream=True
    )
    with pytest.raises(openai.APIError, match="openai-primary"):
        async for _ in stream:
            pass
