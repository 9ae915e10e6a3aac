"""Hugging Face clients against a deployment, unchanged: `huggingface_hub`'s
InferenceClient (token = a router key) and the `text-generation` client, streamed and
not, with and without details; and the raw TGI framing they rely on.

A deployment's Hugging Face URL is /v1/deployments/{id}/generate (TGI's root route:
a one-element list, streams without [DONE]); InferenceClient also reads the invoke
path's answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
import text_generation
from huggingface_hub import InferenceClient
from text_generation.errors import BadRequestError, UnknownError

from tests.support.facade import (
    MODES,
    B,
    both_modes,
    client,
    data_events,
    facade,
    set_params,
    sse,
)
from tests.support.gateways import ROUTER_KEY, default_config_dict

PROMPT = "Explain TCP slow start"
BEARER = {"Authorization": f"Bearer {ROUTER_KEY}"}


@pytest.fixture(params=MODES)
async def base(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with facade(request.param) as url:
        yield url


async def reference(base: str, max_tokens: int) -> str:
    """The deployment's answer to PROMPT, read through the invoke path."""
    async with client_at(base) as c:
        got = await c.post(
            "/v1/deployments/analyst/invoke",
            json={"inputs": PROMPT, "parameters": {"max_new_tokens": max_tokens}},
            headers=B,
        )
    return str(got.json()["generated_text"])


def client_at(base: str):  # type: ignore[no-untyped-def]
    import httpx

    return httpx.AsyncClient(base_url=base, timeout=10)


@pytest.mark.parametrize("path", ["generate", "invoke"])
async def test_inference_client_text_generation(base: str, path: str) -> None:
    expected = await reference(base, 5)
    hf = InferenceClient(model=f"{base}/v1/deployments/analyst/{path}", token=ROUTER_KEY)

    def run() -> tuple[object, ...]:
        plain = hf.text_generation(PROMPT, max_new_tokens=5)
        detailed = hf.text_generation(PROMPT, max_new_tokens=5, details=True)
        streamed = list(hf.text_generation(PROMPT, max_new_tokens=5, stream=True))
        events = list(hf.text_generation(PROMPT, max_new_tokens=5, stream=True, details=True))
        return plain, detailed, streamed, events

    plain, detailed, streamed, events = await asyncio.to_thread(run)
    assert plain == expected and expected.startswith("(simulated)")
    assert detailed.generated_text == expected  # type: ignore[attr-defined]
    assert detailed.details.finish_reason == "length"  # type: ignore[attr-defined]
    assert detailed.details.generated_tokens == 5  # type: ignore[attr-defined]
    assert "".join(streamed) == expected  # type: ignore[arg-type]
    assert len(events) == 5
    assert [e.token.id for e in events] == list(range(5))  # type: ignore[attr-defined]
    assert "".join(e.token.text for e in events) == expected  # type: ignore[attr-defined]
    assert all(e.generated_text is None for e in events[:-1])  # type: ignore[attr-defined]
    last = events[-1]
    assert last.generated_text == expected  # type: ignore[attr-defined]
    assert last.details.finish_reason == "length"  # type: ignore[attr-defined]
    assert last.details.generated_tokens == 5  # type: ignore[attr-defined]


async def test_inference_client_natural_end_is_eos_token(base: str) -> None:
    hf = InferenceClient(model=f"{base}/v1/deployments/analyst/generate", token=ROUTER_KEY)
    got = await asyncio.to_thread(hf.text_generation, PROMPT, details=True)
    assert got.details.finish_reason == "eos_token"
    assert got.details.generated_tokens == len(got.details.tokens)
    assert "".join(t.text for t in got.details.tokens) == got.generated_text


async def test_text_generation_client(base: str) -> None:
    expected = await reference(base, 6)
    url = f"{base}/v1/deployments/analyst/generate"
    tg = text_generation.Client(url, headers=BEARER, timeout=10)

    def run() -> tuple[object, list[object]]:
        whole = tg.generate(PROMPT, max_new_tokens=6)
        return whole, list(tg.generate_stream(PROMPT, max_new_tokens=6))

    whole, events = await asyncio.to_thread(run)
    assert whole.generated_text == expected  # type: ignore[attr-defined]
    details = whole.details  # type: ignore[attr-defined]
    assert details.finish_reason == text_generation.types.FinishReason.Length
    assert details.generated_tokens == 6 and len(details.tokens) == 6
    assert details.prefill == []
    assert "".join(t.text for t in details.tokens) == expected
    assert len(events) == 6
    assert "".join(e.token.text for e in events) == expected  # type: ignore[attr-defined]
    assert events[-1].generated_text == expected  # type: ignore[attr-defined]
    assert events[-1].details.generated_tokens == 6  # type: ignore[attr-defined]
    assert all(e.details is None for e in events[:-1])  # type: ignore[attr-defined]
    # The async client too, and a natural end in TGI's words.
    async_tg = text_generation.AsyncClient(url, headers=BEARER, timeout=10)
    natural = await async_tg.generate(PROMPT, max_new_tokens=500)
    assert natural.details.finish_reason == text_generation.types.FinishReason.EndOfSequenceToken
    streamed = [e async for e in async_tg.generate_stream(PROMPT, max_new_tokens=500)]
    assert streamed[-1].generated_text == natural.generated_text


async def test_text_generation_client_errors(base: str) -> None:
    url = f"{base}/v1/deployments/analyst/generate"

    def bad_parameter() -> None:
        text_generation.Client(url, headers=BEARER).generate(PROMPT, temperature=1.5)

    with pytest.raises(BadRequestError) as caught:
        await asyncio.to_thread(bad_parameter)
    assert "parameters.temperature" in str(caught.value)

    def no_key() -> None:
        text_generation.Client(url).generate(PROMPT)

    with pytest.raises(UnknownError):
        await asyncio.to_thread(no_key)


@both_modes
async def test_tgi_stream_framing(mode: str) -> None:
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 4}, "stream": True}
    async with client(mode) as c:
        async with c.stream(
            "POST", "/v1/deployments/summarizer/generate", json=body, headers=B
        ) as response:
            assert response.status_code == 200
            raw, events = await sse(response)
        whole = await c.post("/v1/deployments/summarizer/generate", json={**body, "stream": False}, headers=B)  # fmt: skip
    assert b"[DONE]" not in raw
    chunks = data_events(events)
    assert [c["index"] for c in chunks] == [1, 2, 3, 4]
    assert [c["token"]["id"] for c in chunks] == [0, 1, 2, 3]
    assert all(set(c) == {"index", "token"} for c in chunks[:-1])
    (generation,) = whole.json()
    assert chunks[-1]["generated_text"] == generation["generated_text"]
    assert chunks[-1]["details"] == {"finish_reason": "length", "generated_tokens": 4}
    assert set(generation) == {"generated_text", "details"}


@both_modes
async def test_invoke_stream_carries_a_token_in_every_chunk(mode: str) -> None:
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 3}, "stream": True}
    async with (
        client(mode) as c,
        c.stream("POST", "/v1/deployments/summarizer/invoke", json=body, headers=B) as response,
    ):
        _, events = await sse(response)
    chunks = data_events(events)
    assert events[-1] == b"data: [DONE]"
    assert [c["token"]["id"] for c in chunks] == [0, 1, 2]
    assert all(c["choices"][0]["text"] == c["token"]["text"] for c in chunks)
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["generated_text"] == "".join(c["token"]["text"] for c in chunks)
    assert all("generated_text" not in c and "finish_reason" not in c["choices"][0]
               for c in chunks[:-1])  # fmt: skip


@both_modes
async def test_an_empty_generation_still_ends_with_a_token(mode: str) -> None:
    # A stop sequence at the very start leaves no text: the last event holds an empty,
    # special token (as a model's end-of-sequence token is).
    data = default_config_dict()
    body = {"inputs": PROMPT, "parameters": {"stop": ["(simulated)"]}, "stream": True}
    async with (
        client(mode, data) as c,
        c.stream("POST", "/v1/deployments/summarizer/generate", json=body, headers=B) as r,
    ):
        _, events = await sse(r)
    (only,) = data_events(events)
    assert only["token"] == {"id": 0, "text": "", "special": True}
    assert only["generated_text"] == ""


@both_modes
async def test_tgi_stream_failure_is_an_error_event(mode: str) -> None:
    data = set_params(default_config_dict(), "sim-mini", fail_after_tokens=2)
    body = {"inputs": PROMPT, "stream": True}
    async with (
        client(mode, data) as c,
        c.stream("POST", "/v1/deployments/summarizer/generate", json=body, headers=B) as r,
    ):
        raw, events = await sse(r)
    assert b"[DONE]" not in raw
    chunks = data_events(events)
    assert len(chunks) == 2 and chunks[0]["token"]["id"] == 0
    assert chunks[-1]["error"]["type"] == "upstream_error"


async def test_generate_text_over_grpc(stubs) -> None:  # type: ignore[no-untyped-def]
    from gateway.v1 import deployment_service_pb2 as deployment

    from tests.support.grpc_stubs import ROUTER

    params = deployment.GenerationParameters(max_new_tokens=3)
    whole = await stubs.deployments.GenerateText(
        deployment.GenerateTextRequest(deployment_id="analyst", inputs=PROMPT, parameters=params),
        metadata=ROUTER,
    )
    (generation,) = whole.generations
    assert generation.details.finish_reason == "length"
    assert len(generation.details.tokens) == generation.details.generated_tokens == 3
    assert "".join(t.text for t in generation.details.tokens) == generation.generated_text
    request = deployment.StreamGenerateTextRequest(
        deployment_id="analyst", inputs=PROMPT, parameters=params
    )
    events = [e async for e in stubs.deployments.StreamGenerateText(request, metadata=ROUTER)]
    assert [e.index for e in events] == [1, 2, 3]
    assert [e.HasField("details") for e in events] == [False, False, True]
    assert events[-1].generated_text == generation.generated_text
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.deployments.GenerateText(
            deployment.GenerateTextRequest(deployment_id="nope", inputs=PROMPT), metadata=ROUTER
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.deployments.GenerateText(
            deployment.GenerateTextRequest(deployment_id="analyst", inputs=""), metadata=ROUTER
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
