"""SSE framing on the wire (raw bytes), for every streaming path, in both modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.facade import (
    CHAT,
    A,
    B,
    both_modes,
    client,
    data_events,
    set_params,
    sse,
)
from tests.support.gateways import default_config_dict, patched, wait_for
from tests.support.upstreams.base import FakeUpstream, Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

SSE_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


def check_headers(response: httpx.Response) -> None:
    assert response.status_code == 200
    for name, value in SSE_HEADERS.items():
        assert response.headers[name] == value
    assert response.headers["x-request-id"]


async def stream(c: httpx.AsyncClient, path: str, body: dict[str, Any], headers: dict[str, str]):  # type: ignore[no-untyped-def]
    async with c.stream("POST", path, json=body, headers=headers) as response:
        check_headers(response)
        raw, events = await sse(response)
    return response, raw, events


# OpenAI's documented chat stream (tests/fixtures/transcripts/): the oracle of the shape.
DOCUMENTED = Path(__file__).resolve().parents[2] / "fixtures/transcripts/openai_chat_stream.sse"
CHUNK_KEYS = {"id", "object", "created", "model", "choices", "system_fingerprint", "usage",
              "service_tier"}  # fmt: skip
CHOICE_KEYS = {"index", "delta", "logprobs", "finish_reason"}
DELTA_KEYS = {"role", "content", "tool_calls", "refusal"}


def openai_stream_problems(chunks: list[Any]) -> list[str]:
    """What in `chunks` (a chat stream's JSON events) OpenAI's stream would not have:
    one id; choices with an index and a delta; finish_reason null or absent before the
    last choice chunk and a string on it (OpenAI sends null on every other chunk);
    usage only on a last chunk of no choices."""
    problems = []
    with_choices = [c for c in chunks if c["choices"]]
    if len({c["id"] for c in chunks}) != 1:
        problems.append("more than one id")
    for n, chunk in enumerate(chunks):
        if extra := set(chunk) - CHUNK_KEYS:
            problems.append(f"chunk {n}: {sorted(extra)}")
        if chunk["object"] != "chat.completion.chunk" or not isinstance(chunk["created"], int):
            problems.append(f"chunk {n}: object or created")
        if (
            "usage" in chunk
            and chunk["usage"] is not None
            and (chunk["choices"] or n != len(chunks) - 1)
        ):
            problems.append(f"chunk {n}: usage beside choices or before the end")
        for choice in chunk["choices"]:
            if extra := set(choice) - CHOICE_KEYS:
                problems.append(f"chunk {n}: choice has {sorted(extra)}")
            if set(choice["delta"]) - DELTA_KEYS or not isinstance(choice["index"], int):
                problems.append(f"chunk {n}: delta or index")
            final = chunk is with_choices[-1]
            reason = choice.get("finish_reason")
            if final != isinstance(reason, str):
                problems.append(f"chunk {n}: finish_reason {reason!r}")
    return problems


def test_the_shape_oracle_takes_openais_own_stream_and_refuses_others():
    raw = DOCUMENTED.read_bytes()
    documented = data_events(raw[:-2].split(b"\n\n"))
    assert openai_stream_problems(documented) == []
    assert all(c["choices"][0]["finish_reason"] is None for c in documented[:-2])
    early = [
        dict(c, choices=[{**c["choices"][0], "finish_reason": "stop"}]) for c in documented[:1]
    ]
    assert openai_stream_problems(early + documented[1:]) != []
    unfinished = documented[:-2] + documented[-1:]
    assert openai_stream_problems(unfinished) != []


@both_modes
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/chat/completions:stream"])
async def test_chat_golden_shape(mode: str, path: str) -> None:
    async with client(mode) as c:
        _, raw, events = await stream(c, path, {**CHAT, "stream": True}, A)
    assert events[-1] == b"data: [DONE]"
    assert raw.count(b"data: [DONE]") == 1
    chunks = data_events(events)
    assert len(chunks) == len(events) - 1 >= 3
    assert openai_stream_problems(chunks) == []
    assert chunks[0]["id"].startswith("chatcmpl-")
    # As OpenAI: every chunk has system_fingerprint, and usage null unless asked for.
    assert all(c["usage"] is None and c["system_fingerprint"].startswith("fp_") for c in chunks)
    first, middle, last = chunks[0], chunks[1:-1], chunks[-1]
    assert first["choices"][0]["delta"] == {"role": "assistant"}
    assert middle and all(list(c["choices"][0]["delta"]) == ["content"] for c in middle)
    # Fragments ready together may arrive merged (the edge tier relays gRPC chunks).
    assert middle[0]["choices"][0]["delta"]["content"].startswith("(simulated)")
    assert last["choices"][0]["delta"] == {} and last["choices"][0]["finish_reason"] == "stop"


@both_modes
async def test_chat_stream_usage_on_last_chunk(mode: str) -> None:
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 4}
    async with client(mode) as c:
        _, _, events = await stream(c, "/v1/chat/completions", body, A)
    chunks = data_events(events)
    assert openai_stream_problems(chunks) == []
    # OpenAI's framing: usage on an extra last chunk of no choices, null on the others,
    # so code written to OpenAI's docs (`if not chunk.choices: usage = chunk.usage`) works.
    assert [c for c in chunks if c["usage"] is not None] == [chunks[-1]]
    assert chunks[-1]["choices"] == []
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + 4
    assert usage["total_cost_usd"] > 0 and "ttft_ms" in usage
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0, "audio_tokens": 0}
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"


@both_modes
async def test_completion_stream(mode: str) -> None:
    body = {"model": "sim-mini", "prompt": "Once upon a time", "stream": True}
    async with client(mode) as c:
        whole = (await c.post("/v1/completions", json={**body, "stream": False}, headers=A)).json()
        _, _, events = await stream(c, "/v1/completions", body, A)
    assert events[-1] == b"data: [DONE]"
    chunks = data_events(events)
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert all("finish_reason" not in c["choices"][0] for c in chunks[:-1])
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


@both_modes
async def test_infer_stream(mode: str) -> None:
    body = {"prompt": "Summarize this.", "profile": "economy", "stream": True}
    async with client(mode) as c:
        _, _, events = await stream(c, "/v1/infer", body, B)
    assert events[-1] == b"data: [DONE]"
    chunks = data_events(events)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["route"]["profile"] == "economy"
    assert chunks[0]["route"]["model"] == "sim-mini"
    assert all("route" not in c for c in chunks[1:])
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(c["choices"][0]["text"] for c in chunks).startswith("(simulated)")


@both_modes
async def test_deployment_stream_inputs(mode: str) -> None:
    body = {"inputs": "Summarize this.", "parameters": {"max_new_tokens": 6}, "stream": True}
    async with client(mode) as c:
        _, _, events = await stream(c, "/v1/deployments/summarizer/invoke", body, B)
        _, _, direct = await stream(c, "/v1/deployments/summarizer/invoke:stream", body, B)
    assert events[-1] == b"data: [DONE]"
    chunks = data_events(events)
    assert [c["choices"] for c in chunks] == [c["choices"] for c in data_events(direct)]
    tokens, last = chunks, chunks[-1]
    assert [c["token"]["id"] for c in tokens] == list(range(6))
    assert all(c["deployment_id"] == "summarizer" for c in chunks)
    # As TGI streams: the last chunk holds the last token too (issue 8).
    assert last["token"]["id"] == 5
    assert last["generated_text"] == "".join(c["token"]["text"] for c in tokens)
    assert last["details"] == {"finish_reason": "length", "generated_tokens": 6}


@both_modes
async def test_deployment_stream_prompt(mode: str) -> None:
    body = {"prompt": "Summarize this.", "stream": True}
    async with client(mode) as c:
        _, _, events = await stream(c, "/v1/deployments/assistant/invoke", body, B)
    chunks = data_events(events)
    assert events[-1] == b"data: [DONE]"
    assert all("token" not in c and "generated_text" not in c for c in chunks)
    assert chunks[0]["model"] == "sim-standard"


@both_modes
async def test_error_before_first_chunk_is_plain_http(mode: str) -> None:
    async with client(mode) as c:
        r = await c.post(
            "/v1/chat/completions", json={**CHAT, "model": "nope", "stream": True}, headers=A
        )
        assert r.status_code == 404
        assert r.headers["content-type"] == "application/json"
        assert r.json()["error"]["code"] == "model_not_found"
        r = await c.post("/v1/infer:stream", json={"prompt": "x"}, headers={})
        assert r.status_code == 401


@both_modes
async def test_mid_stream_failure_ends_with_error_event(mode: str) -> None:
    data = set_params(default_config_dict(), "sim-mini", fail_after_tokens=3)
    async with client(mode, data) as c:
        _, raw, events = await stream(c, "/v1/chat/completions", {**CHAT, "stream": True}, A)
        assert b"[DONE]" not in raw
        chunks = data_events(events)
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
        # Three tokens' text (fragments ready together may arrive merged), then the error.
        text = "".join(c["choices"][0]["delta"]["content"] for c in chunks[1:-1])
        assert text.startswith("(simulated)") and len(text.split()) == 3
        error = chunks[-1]["error"]
        assert set(chunks[-1]) == {"error"}
        assert error["type"] == "upstream_error"
        assert set(error) == {"message", "type", "code", "param"}
        assert "Traceback" not in raw.decode()
        # The same on the other streaming paths.
        _, raw, events = await stream(
            c, "/v1/deployments/summarizer/invoke", {"inputs": "x", "stream": True}, B
        )
        assert b"[DONE]" not in raw and "error" in data_events(events)[-1]


@both_modes
async def test_failover_to_backup(mode: str) -> None:
    data = default_config_dict()
    primary, backup = data["models"][0]["providers"]
    primary["params"]["error_rate"] = 1.0
    # The backup's answers are three words long, the primary's never under twelve: the
    # answer says which one gave it.
    backup["params"].update(min_reply_tokens=3, max_reply_tokens=3)
    async with client(mode, data) as c:
        r = await c.post("/v1/chat/completions", json=CHAT, headers=A)
        assert r.status_code == 200
        content = r.json()["choices"][0]["message"]["content"]
        assert content.startswith("(simulated)") and len(content.split()) == 3
        assert r.json()["usage"]["completion_tokens"] == 3
        _, _, events = await stream(c, "/v1/chat/completions", {**CHAT, "stream": True}, A)
        assert events[-1] == b"data: [DONE]"
        streamed = "".join(
            ch["choices"][0]["delta"].get("content", "") for ch in data_events(events)
        )
        assert streamed == content


@both_modes
async def test_keepalive_comments_while_waiting(mode: str) -> None:
    # Half a second between tokens against a 50 ms keep-alive: the simulated provider
    # catches up after a stall, so a shorter gap on a busy machine can deliver every
    # token at once, with no silence left to fill.
    data = set_params(
        patched(default_config_dict(), keepalive_s=0.05), "sim-mini", tokens_per_second=2
    )
    async with client(mode, data) as c:
        body = {**CHAT, "stream": True, "max_tokens": 3}
        _, raw, events = await stream(c, "/v1/chat/completions", body, A)
    assert b": keep-alive\n\n" in raw
    assert events[-1] == b"data: [DONE]"
    # Keep-alives never break a chunk: every content token still arrives, in order.
    contents = [c["choices"][0]["delta"].get("content") for c in data_events(events)]
    assert [t for t in contents if t][0] == "(simulated)"
    assert len([t for t in contents if t]) == 3


def held(fault: Fault, upstream: FakeUpstream) -> dict[str, Any]:
    """A config whose model `held` is served by `upstream` answering with `fault`."""
    upstream.default = fault
    return with_models(model("held", provider("held-p", "openai", upstream.url,
                                              read_timeout_s=30)))  # fmt: skip


@both_modes
async def test_disconnect_cancels_the_generation(mode: str) -> None:
    async with serving(OpenAIWire()) as upstream:
        # Two tokens, then one every two seconds: a caller leaving after the first one
        # leaves in the middle of a twenty-second answer.
        data = held(Fault("slow_body", delay_s=2), upstream)
        async with client(mode, data) as c:
            body = {**CHAT, "model": "held", "stream": True}
            async with c.stream("POST", "/v1/chat/completions", json=body, headers=A) as r:
                check_headers(r)
                async for line in r.aiter_lines():
                    if "content" in line:
                        break
            # The upstream sees its connection closed, long before the answer's end.
            await wait_for(lambda: len(upstream.disconnects) == 1)


@both_modes
@pytest.mark.parametrize("streamed", [True, False])
async def test_disconnect_before_first_token_cancels(mode: str, streamed: bool) -> None:
    async with serving(OpenAIWire()) as upstream:
        data = held(Fault("hang"), upstream)
        async with client(mode, data) as c:
            with pytest.raises(httpx.ReadTimeout):
                await c.post("/v1/chat/completions", headers=A, timeout=0.3,
                             json={**CHAT, "model": "held", "stream": streamed})  # fmt: skip
            # The client gave up while the upstream had said nothing; its request ends too.
            await wait_for(lambda: len(upstream.disconnects) == 1)


@both_modes
async def test_events_are_flushed_one_by_one(mode: str) -> None:
    data = set_params(default_config_dict(), "sim-mini", tokens_per_second=20)
    async with client(mode, data) as c:
        body = {**CHAT, "stream": True, "max_tokens": 4}
        async with c.stream("POST", "/v1/chat/completions", json=body, headers=A) as r:
            parts = [part async for part in r.aiter_raw()]
    # Paced tokens arrive as separate writes, each one whole event.
    assert len(parts) >= 4
    assert all(p.endswith(b"\n\n") for p in parts)
    assert json.loads(parts[0][6:-2])["choices"][0]["delta"] == {"role": "assistant"}
