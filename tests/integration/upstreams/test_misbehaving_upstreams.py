"""Misbehaving upstreams, byte for byte: impossible usage numbers (issue 12, item 4),
endless SSE lines (item 5) and upstream errors that echo credentials (item 7)."""

from __future__ import annotations

import asyncio
import json
import logging

import grpc
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import streaming_pb2

from server.base import tokens
from server.base.generation import GenerationRequest, Message
from server.providers.http import redact
from tests.support.faults import SSE_HEAD, RawRequest, http_response, raw_upstream
from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import API, Stubs
from tests.support.upstreams.config import model, provider, with_models

PROMPT = "Say hello."
MESSAGES = [chat.ChatMessage(role="user", content=PROMPT)]
BAD_USAGE = ["1e309", "3e9", "-5", "12.5", '"12"', "true", "[]"]


def _answer(prompt_tokens: str, completion_tokens: str = "2") -> str:
    return (
        '{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": '
        '{"role": "assistant", "content": "Hi there"}, "finish_reason": "stop"}], '
        f'"usage": {{"prompt_tokens": {prompt_tokens}, "completion_tokens": {completion_tokens}}}}}'
    )


def _unary(prompt_tokens: str, completion_tokens: str = "2"):  # type: ignore[no-untyped-def]
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(http_response(_answer(prompt_tokens, completion_tokens)))

    return handler


def _streaming(prompt_tokens: str, completion_tokens: str = "2"):  # type: ignore[no-untyped-def]
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        for piece in ("Hi", " there"):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        writer.write(f"data: {json.dumps(last)}\n\n".encode())
        usage = f'{{"choices": [], "usage": {{"prompt_tokens": {prompt_tokens}, "completion_tokens": {completion_tokens}}}}}'
        writer.write(f"data: {usage}\n\ndata: [DONE]\n\n".encode())

    return handler


def test_what_counts_as_implausible():
    request = GenerationRequest(messages=(Message("user", PROMPT),), max_tokens=10)
    from server.base.generation import TokenCounts

    assert tokens.implausible(TokenCounts(8, 10), request) is None
    assert tokens.implausible(TokenCounts(-1, 10), request)
    assert tokens.implausible(TokenCounts(3_000_000_000, 1), request)
    assert tokens.implausible(TokenCounts(100_000, 1), request)  # prompt of 10 bytes
    assert tokens.implausible(TokenCounts(8, 10_000), request)  # max_tokens 10
    assert tokens.implausible(TokenCounts(8, 10, cached_tokens=9), request)
    assert tokens.implausible(TokenCounts(8, 10, reasoning_tokens=11), request)


@pytest.mark.parametrize("bad", BAD_USAGE)
async def test_impossible_usage_in_a_whole_answer_fails_over(bad):
    async with raw_upstream(_unary(bad)) as liar, raw_upstream(_unary("7", "2")) as honest:
        data = with_models(
            model(
                "m",
                provider("liar", "openai", liar.url, stream=False),
                provider("honest", "openai", honest.url, "backup", stream=False),
            )
        )
        async with running_gateway(data) as gw:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
                reply = await Stubs(channel).chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model="m", messages=MESSAGES), metadata=API
                )
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT provider, prompt_tokens, total_cost_usd FROM usage_records "
                "WHERE model = 'm'"
            )
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 2)
    assert reply.usage.total_cost_usd > 0
    assert len(honest.requests) == 1
    assert [(r["provider"], r["prompt_tokens"]) for r in rows] == [("honest", 7)]


@pytest.mark.parametrize("bad", ["1e309", "3e9", "-5", '"x"'])
@pytest.mark.parametrize("field", ["prompt", "completion"])
async def test_impossible_usage_after_the_text_is_counted_by_the_gateway(bad, field, caplog):
    prompt, completion = (bad, "2") if field == "prompt" else ("7", bad)
    async with raw_upstream(_streaming(prompt, completion)) as liar:
        data = with_models(model("m", provider("liar", "openai", liar.url)))
        async with running_gateway(data) as gw:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
                stubs = Stubs(channel)
                chunks = [
                    c
                    async for c in stubs.chat.StreamChatCompletion(
                        chat.StreamChatCompletionRequest(
                            model="m",
                            messages=MESSAGES,
                            stream_options=streaming_pb2.StreamOptions(include_usage=True),
                        ),
                        metadata=API,
                    )
                ]
                unary = await stubs.chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model="m", messages=MESSAGES), metadata=API
                )
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT status, prompt_tokens, completion_tokens, total_cost_usd "
                "FROM usage_records WHERE model = 'm'"
            )
    for usage in (chunks[-1].usage, unary.usage):
        assert (
            usage.prompt_tokens
            == tokens.estimate_prompt(GenerationRequest(messages=(Message("user", PROMPT),)))
            or (field == "completion" and usage.prompt_tokens == 7)
            or bad == '"x"'
        )
        assert 0 <= usage.completion_tokens < 100
        assert usage.total_cost_usd >= 0
    assert chunks[-2].choices[0].finish_reason == "stop" and not chunks[-1].choices
    assert len(rows) == 2 and all(r["status"] == "OK" for r in rows)
    assert all(0 <= r["total_cost_usd"] < 0.01 for r in rows)
    assert not [r for r in caplog.records if r.exc_info]


async def test_an_endless_sse_line_is_refused_within_its_bound():
    sent = {"bytes": 0}

    async def endless(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + b"data: ")
        chunk = b"x" * 65536
        for _ in range(2000):  # up to 128 MiB, never a newline
            writer.write(chunk)
            sent["bytes"] += len(chunk)
            await writer.drain()

    async with raw_upstream(endless) as upstream, raw_upstream(_streaming("7")) as backup:
        data = with_models(
            model(
                "m",
                provider("endless", "openai", upstream.url, max_line_bytes=1 << 20),
                provider("backup", "openai", backup.url, "backup"),
            )
        )
        async with (
            running_gateway(data) as gw,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        ):
            reply = await Stubs(channel).chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model="m", messages=MESSAGES), metadata=API
            )
    assert reply.choices[0].message.content == "Hi there"
    assert sent["bytes"] < 16 << 20, "the gateway kept reading a line past its bound"


# A made-up key of OpenAI's shape, assembled so that secret scanners do not take the
# file for one holding a real key.
SECRET = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz" + "0123456789"


def test_redact_credentials():
    said = (
        f"invalid key {SECRET}; header Authorization: Bearer abc.def-ghi; "
        "x-api-key: gw-api-QWERTYUIOPasdf1234; api_key=hunter2hunter2 ok"
    )
    out = redact(said, ["hunter2hunter2"])
    for secret in (SECRET, "abc.def-ghi", "gw-api-QWERTYUIOPasdf1234", "hunter2hunter2"):
        assert secret not in out, out
    assert out.startswith("invalid key ") and out.endswith(" ok")


async def test_upstream_errors_quoted_to_callers_carry_no_credentials(monkeypatch, caplog):
    own_key = "own-provider-key-0123456789"
    monkeypatch.setenv("LIAR_KEY", own_key)

    async def echo(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        said = f"bad request from {request.headers.get('authorization')} ({SECRET}, {own_key})"
        writer.write(http_response(json.dumps({"error": {"message": said}}), status=400))

    async with raw_upstream(echo) as upstream:
        data = with_models(
            model("m", provider("echo", "openai", upstream.url, api_key_env="LIAR_KEY"))
        )
        async with (
            running_gateway(data) as gw,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        ):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await Stubs(channel).chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model="m", messages=MESSAGES),
                    metadata=API,
                )
    message = failed.value.details()
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "bad request from" in message
    assert own_key not in message and SECRET not in message, message
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert own_key not in logged
    logging.getLogger(__name__).debug("redacted: %s", message)


def test_backoff_has_jitter_and_budgets_reserve_the_cache_write_price():
    from server.base.config import Price
    from server.base.costs import max_cost
    from server.base.errors import UpstreamError
    from server.base.generation import RetryPolicy

    policy = RetryPolicy(max_retries=3, backoff_s=1.0)
    error = UpstreamError("down")
    pauses = {policy.pause(2, error) for _ in range(50)}
    assert len(pauses) > 1 and all(1.0 <= p <= 2.0 for p in pauses)  # type: ignore[operator]
    request = GenerationRequest(prompt="x" * 4000, max_tokens=1)
    plain = max_cost([Price(input=1, output=1)], request, 1)
    writing = max_cost([Price(input=1, output=1, cache_write=3)], request, 1)
    assert writing == pytest.approx((1000 * 3 + 1) / 1_000_000) and writing > plain
