"""A chat stream to an upstream of OpenAI's own format is relayed as the upstream wrote
it (a real loopback upstream, raw SSE, the openai SDK, a gRPC stub): its fields pass
untouched but for the gateway's head and usage, what carries nothing is left out, the
stream keeps the contract's shape (the gateway's role chunk first, one finish chunk
with an empty delta, usage only when asked), and the ledger bills the upstream's usage.
gRPC callers get each read's text as one chunk of the contract's; the response cache
and guardrails take the decoding path."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import openai
import pytest
from gateway.v1 import chat_service_pb2

from server.base import tokens
from tests.support.faults import SSE_HEAD, RawRequest, raw_upstream
from tests.support.gateways import API_KEY, ledger_counts, running_gateway
from tests.support.grpc_stubs import API, Stubs
from tests.support.upstreams.config import model, provider, with_models

HEADERS = {"x-api-key": API_KEY}
HEAD = {"id": "chatcmpl-upstream", "object": "chat.completion.chunk", "created": 1,
        "model": "upstream-model-2026", "system_fingerprint": "fp_upstream"}  # fmt: skip


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {**HEAD, "choices": [choice], **extra}


# OpenAI's own shape: a role chunk, text with an `obfuscation` field the contract does
# not know, the last text on the finishing chunk (as vLLM sends it), then usage.
TEXT_STREAM = [
    _chunk({"role": "assistant", "content": "", "refusal": None}, obfuscation="r0"),
    _chunk({"content": "Hel"}, obfuscation="x1"),
    _chunk({"content": "lo"}, obfuscation="x2"),
    _chunk({"content": "!"}, "stop", obfuscation="x3"),
    {
        **HEAD,
        "choices": [],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    },  # fmt: skip
]
TOOL_STREAM = [
    _chunk({"role": "assistant", "content": None}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": ""},
                }
            ]
        }
    ),  # fmt: skip
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
    _chunk({}, "tool_calls"),
    {
        **HEAD,
        "choices": [],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
    },  # fmt: skip
]


def _streaming(
    chunks: list[dict[str, Any]], seen: list[Any], pause_s: float = 0
) -> Callable[..., Any]:
    """An OpenAI-format upstream that writes `chunks` in one go (one read or a few), or
    with `pause_s`, one at a time (a read each)."""

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        seen.append(request.json())
        frames = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]
        if not pause_s:
            frames = [b"".join(frames)]
        writer.write(SSE_HEAD)
        for frame in frames:
            writer.write(frame)
            await writer.drain()
            if pause_s:
                await asyncio.sleep(pause_s)
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()

    return handler


def _config(url: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    data = with_models(model("relay", provider("relay-p", "openai", url)))
    data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
    data.update(extra)
    return data


def _events(body: str) -> list[dict[str, Any]]:
    frames = body.split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""], frames[-3:]
    assert all(f.startswith("data: ") for f in frames[:-1]), frames
    return [json.loads(f[6:]) for f in frames[:-2]]


async def _post(gw: Any, **body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c:
        return await c.post("/v1/chat/completions", headers=HEADERS, json={
            "model": "relay", "stream": True,
            "messages": [{"role": "user", "content": "Hi"}], **body})  # fmt: skip


async def test_a_chat_stream_is_relayed_as_written_under_the_gateways_head(
    tmp_path: Path,
) -> None:
    seen: list[Any] = []
    async with (
        raw_upstream(_streaming(TEXT_STREAM, seen)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _post(gw, stream_options={"include_usage": True})
        assert reply.status_code == 200, reply.text
        events = _events(reply.text)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT status, prompt_tokens, completion_tokens FROM usage_records"
        )
    request_id = reply.headers["x-request-id"]
    assert [e["id"] for e in events] == [f"chatcmpl-{request_id}"] * len(events)
    assert {e["model"] for e in events} == {"relay"}
    assert len({e["created"] for e in events}) == 1
    fingerprints = {e["system_fingerprint"] for e in events}
    assert len(fingerprints) == 1 and "fp_upstream" not in fingerprints
    # The gateway's role chunk, the upstream's three text chunks as written (its own
    # fields kept, its finish reason taken out), one finish chunk, the usage chunk.
    assert events[0]["choices"] == [{"index": 0, "delta": {"role": "assistant"}}]
    relayed = events[1:4]
    assert [e["obfuscation"] for e in relayed] == ["x1", "x2", "x3"]
    assert [e["choices"] for e in relayed] == [
        [{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}]
        for text in ("Hel", "lo", "!")
    ]
    assert events[4]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert events[5]["choices"] == [] and events[5]["usage"]["prompt_tokens"] == 7
    assert events[5]["usage"]["completion_tokens"] == 3 and "total_cost_usd" in events[5]["usage"]
    assert [e for e in events if e.get("usage")] == [events[5]]
    assert [(r["status"], r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        ("OK", 7, 3)
    ]
    # The upstream was asked for usage whatever the caller asked.
    assert seen[0]["stream_options"] == {"include_usage": True}


async def test_without_include_usage_no_chunk_carries_usage(tmp_path: Path) -> None:
    async with (
        raw_upstream(_streaming(TEXT_STREAM, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _post(gw)
    events = _events(reply.text)
    assert not [e for e in events if e.get("usage")]
    assert "".join(c["delta"].get("content", "") for e in events for c in e["choices"]) == "Hello!"
    assert events[-1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]


async def test_the_openai_sdk_gathers_relayed_tool_calls(tmp_path: Path) -> None:
    async with (
        raw_upstream(_streaming(TOOL_STREAM, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        sdk = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        )
        async with sdk, sdk.chat.completions.stream(
            model="relay", messages=[{"role": "user", "content": "Weather?"}],
            tools=[{"type": "function", "function": {"name": "weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}}],
            stream_options={"include_usage": True},
        ) as stream:  # fmt: skip
            final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_1",
        "weather",
        '{"city":"Paris"}',
    )
    assert final.usage is not None and final.usage.completion_tokens == 9


async def _grpc_stream(
    tmp_path: Path, chunks: list[dict[str, Any]], pause_s: float = 0, **fields: Any
) -> list[Any]:
    async with (
        raw_upstream(_streaming(chunks, [], pause_s)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        request = chat_service_pb2.StreamChatCompletionRequest(
            model="relay", messages=[{"role": "user", "content": "Hi"}], **fields
        )
        call = Stubs(channel).chat.StreamChatCompletion(request, metadata=API)
        return [c async for c in call]


@pytest.mark.parametrize("pause_s", [0, 0.01], ids=["one-read", "a-read-each"])
async def test_grpc_callers_get_the_relayed_text_decoded(tmp_path: Path, pause_s: float) -> None:
    chunks = await _grpc_stream(tmp_path, TEXT_STREAM, pause_s)
    texts = [choice.delta.content for c in chunks for choice in c.choices if choice.delta.content]
    assert "".join(texts) == "Hello!"
    if not pause_s:  # the text of one read is one message
        assert texts == ["Hello!"]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["stop"]


async def test_grpc_callers_get_relayed_tool_calls_fragment_by_fragment(tmp_path: Path) -> None:
    chunks = await _grpc_stream(tmp_path, TOOL_STREAM)
    calls = [call for c in chunks for choice in c.choices for call in choice.delta.tool_calls]
    assert [(call.id, call.function.name) for call in calls] == [
        ("call_1", "weather"), ("", ""), ("", "")]  # fmt: skip
    assert "".join(call.function.arguments for call in calls) == '{"city":"Paris"}'
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_a_grpc_stream_past_max_tokens_is_cut_there(tmp_path: Path) -> None:
    flood = [_chunk({"content": "word " * 8}) for _ in range(100)]
    chunks = await _grpc_stream(tmp_path, [*flood, _chunk({}, "stop")], max_tokens=50)
    text = "".join(choice.delta.content for c in chunks for choice in c.choices)
    assert 0 < len(text) <= (50 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN
    assert len(text) < 100 * len("word " * 8)
    assert chunks[-1].choices[0].finish_reason == "length"


async def test_a_cached_or_guarded_stream_is_decoded(tmp_path: Path) -> None:
    """The response cache keeps, and guardrails read, the core's events: such a stream
    is decoded (the upstream's own fields gone), and the cache still answers again."""
    seen: list[Any] = []
    pii = {"guardrails": [{"id": "pii"}], "default_guardrails": ["pii"]}
    async with raw_upstream(_streaming(TEXT_STREAM, seen)) as upstream:
        async with running_gateway(_config(upstream.url, tmp_path)) as gw:
            cached = [await _post(gw, temperature=0) for _ in range(2)]
        async with running_gateway(_config(upstream.url, tmp_path, **pii)) as gw:
            guarded = await _post(gw)
    assert [r.headers["x-gateway-cache"] for r in cached] == ["miss", "hit"]
    assert len(seen) == 2  # the hit asked no upstream
    for reply in [*cached, guarded]:
        events = _events(reply.text)
        assert not [e for e in events if "obfuscation" in e]
        text = "".join(c["delta"].get("content", "") for e in events for c in e["choices"])
        assert text == "Hello!"


def _anthropic_stream(
    seen: list[Any], first: str = "Hel", reports_usage: bool = True
) -> Callable[..., Any]:
    """An Anthropic upstream writing with spaces after its separators (as json.dumps
    does), one event split over two `data:` lines, and a ping; without `reports_usage`,
    one that reports no usage."""

    def frame(data: dict[str, Any], split: bool = False) -> bytes:
        text = json.dumps(data)
        if split:  # SSE's multi-line data: the lines join with a line break
            head, _, tail = text.partition(', "delta"')
            text = f'{head},\ndata:  "delta"{tail}'
        return f"event: {data['type']}\ndata: {text}\n\n".encode()

    message = {"id": "msg_upstream", "type": "message", "role": "assistant", "content": [],
               "model": "claude-upstream", "stop_reason": None, "stop_sequence": None}  # fmt: skip
    ending = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}
    if reports_usage:
        message["usage"] = {"input_tokens": 12, "output_tokens": 1}
        ending["usage"] = {"output_tokens": 5}
    text_delta = {"type": "content_block_delta", "index": 0}
    events = [
        frame({"type": "message_start", "message": message}),
        frame({"type": "ping"}),
        frame(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        ),  # fmt: skip
        frame({**text_delta, "delta": {"type": "text_delta", "text": first}}),
        frame({**text_delta, "delta": {"type": "text_delta", "text": "lo"}}, split=True),
        frame({"type": "content_block_stop", "index": 0}),
        frame(ending),
        frame({"type": "message_stop"}),
    ]

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        seen.append(request.json())
        writer.write(SSE_HEAD + b"".join(events))
        await writer.drain()

    return handler


def _claude_config(url: str, tmp_path: Path) -> dict[str, Any]:
    data = with_models(model("relay-claude", provider("relay-a", "anthropic", url)))
    data["storage"] |= {"sqlite_path": str(tmp_path / "gw.db")}
    return data


async def _post_message(gw: Any, max_tokens: int) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as c:
        return await c.post("/v1/messages", headers={
            **HEADERS, "anthropic-version": "2023-06-01"}, json={
            "model": "relay-claude", "max_tokens": max_tokens, "stream": True,
            "messages": [{"role": "user", "content": "Hi"}]})  # fmt: skip


async def test_a_messages_stream_relays_an_anthropic_upstreams_blocks_as_written(
    tmp_path: Path,
) -> None:
    """The blocks' events go out byte for byte (the upstream's spacing kept, a split
    event joined on one line); the message's start, stop and usage are the gateway's."""
    seen: list[Any] = []
    async with (
        raw_upstream(_anthropic_stream(seen)) as upstream,
        running_gateway(_claude_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _post_message(gw, max_tokens=100)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT prompt_tokens, completion_tokens FROM usage_records"
        )
    assert reply.status_code == 200, reply.text
    frames = reply.content[:-2].split(b"\n\n")
    events = []
    for frame in frames:
        name, body = frame.split(b"\n")  # one data line each
        payload = json.loads(body.removeprefix(b"data: "))
        assert name == b"event: " + payload["type"].encode()
        events.append(payload)
    kinds = [e["type"] for e in events]
    assert kinds == ["message_start", "content_block_start", "content_block_delta",
                     "content_block_delta", "content_block_stop", "message_delta",
                     "message_stop"]  # fmt: skip
    start = events[0]["message"]
    assert (start["id"], start["model"]) == (f"msg_{reply.headers['x-request-id']}", "relay-claude")
    assert b'data: {"type": "content_block_delta", "index": 0,  "delta"' in reply.content
    assert b'data: {"type": "content_block_start", "index": 0,' in reply.content
    assert "".join(e["delta"].get("text", "") for e in events[2:4]) == "Hello"
    end = events[5]
    assert end["delta"]["stop_reason"] == "end_turn"
    assert end["usage"]["output_tokens"] == 5 and "total_cost_usd" in end["usage"]
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [(12, 5)]
    assert seen[0]["stream"] is True


async def test_a_relayed_stream_past_max_tokens_is_cut_there_and_billed_within_it(
    tmp_path: Path,
) -> None:
    """Small chunks that each fit, a read each, still add up: the relay counts every
    read against max_tokens and the stream is cut at it."""
    flood = [_chunk({"content": "word " * 8}) for _ in range(100)]
    async with (
        raw_upstream(_streaming([*flood, _chunk({}, "stop")], [], pause_s=0.002)) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _post(gw, max_tokens=50, stream_options={"include_usage": True})
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT completion_tokens FROM usage_records")
    events = _events(reply.text)
    text = "".join(c["delta"].get("content", "") for e in events for c in e["choices"])
    assert 0 < len(text) <= (50 + tokens.COMPLETION_SLACK_TOKENS) * tokens.BYTES_PER_TOKEN
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert [r["completion_tokens"] for r in rows] == [50]


async def test_without_usage_the_relayed_text_is_counted(tmp_path: Path) -> None:
    """An upstream that reports no usage: the ledger bills the estimate of what was
    relayed, the answer's text and the tool call's arguments alike."""
    no_usage = TOOL_STREAM[:-1]
    async with (
        raw_upstream(_streaming(no_usage, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _post(gw)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT completion_tokens FROM usage_records")
    assert reply.status_code == 200
    assert [r["completion_tokens"] for r in rows] == [tokens.estimate('{"city":"Paris"}')]


async def test_text_beside_a_role_and_a_chunk_of_only_logprobs_are_relayed(
    tmp_path: Path,
) -> None:
    logprob = {"token": "Hi", "logprob": -0.25, "bytes": [72, 105], "top_logprobs": []}
    only_logprobs = {"index": 0, "delta": {}, "logprobs": {"content": [logprob]}}
    chunks = [
        _chunk({"role": "assistant", "content": "Hi"}),  # the role and text in one chunk
        {**HEAD, "choices": [{**only_logprobs, "finish_reason": None}]},
        _chunk({}, "stop"),
    ]
    async with (
        raw_upstream(_streaming(chunks, [])) as upstream,
        running_gateway(_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _post(gw, logprobs=True)
    events = _events(reply.text)
    deltas = [e["choices"][0]["delta"] for e in events[1:-1]]
    assert deltas == [{"role": "assistant", "content": "Hi"}, {}]
    assert [e["choices"][0]["logprobs"] for e in events[1:-1]] == [None, {"content": [logprob]}]


async def test_a_messages_read_past_max_tokens_takes_the_decoding_path(tmp_path: Path) -> None:
    """A read whose text crosses what max_tokens allows is decoded: the same events,
    written by the gateway (compact JSON), the text whole (the upstream bounds its own
    Messages answers)."""
    long = "word " * 400
    async with (
        raw_upstream(_anthropic_stream([], first=long)) as upstream,
        running_gateway(_claude_config(upstream.url, tmp_path)) as gw,
    ):
        reply = await _post_message(gw, max_tokens=10)
    assert reply.status_code == 200, reply.text
    assert b'"type": "content_block' not in reply.content
    events = [json.loads(f.split(b"\n")[1][6:]) for f in reply.content[:-2].split(b"\n\n")]
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == long + "lo"


async def test_an_anthropic_answer_without_usage_is_billed_by_estimate(tmp_path: Path) -> None:
    """Relayed (a stream) or decoded (a whole answer: the upstream's events passed on as
    they are), the text of an upstream that reports no usage is what is billed."""
    async with (
        raw_upstream(_anthropic_stream([], reports_usage=False)) as upstream,
        running_gateway(_claude_config(upstream.url, tmp_path)) as gw,
    ):
        streamed = await _post_message(gw, max_tokens=100)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c:
            whole = await c.post("/v1/messages", headers={
                **HEADERS, "anthropic-version": "2023-06-01"}, json={
                "model": "relay-claude", "max_tokens": 100,
                "messages": [{"role": "user", "content": "Hi"}]})  # fmt: skip
        rows = await ledger_counts(gw)
    assert streamed.status_code == 200 and whole.status_code == 200, whole.text
    assert whole.json()["content"][0]["text"] == "Hello"
    assert [completion for _, completion in rows] == [tokens.estimate("Hello")] * 2
