"""Answers at the edges of each wire format, byte for byte, to the adapters.

TGI as its versions answer: where the prompt's token count comes from (the
x-prompt-tokens header, details.input_length, else the gateway's estimate), finish
reasons it does not know, details missing or garbled, unary (a broken answer, so the
next provider is tried) and streamed (the text is out: the counts are dropped and
estimated). Anthropic's usage absent or garbled; OpenAI's legacy logprobs with the null
OpenAI writes for a token it has no probability of."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from server.base import tokens
from server.base.errors import UpstreamError
from server.base.generation import (
    GenerationRequest,
    TextDelta,
    TokenCounts,
    TokenLogprob,
    TopLogprob,
)
from tests.integration.upstreams.test_adapters import build, collect
from tests.support.faults import SSE_HEAD, RawRequest, http_response, raw_upstream

REQUEST = GenerationRequest(prompt="Say hello.", max_tokens=16)


def unary(details: Any, headers: str = ""):  # type: ignore[no-untyped-def]
    body = json.dumps({"generated_text": "Hi", "details": details})

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        head, _, rest = http_response(body).partition(b"\r\n")
        writer.write(head + b"\r\n" + headers.encode() + rest)

    return handler


def streamed(details: Any):  # type: ignore[no-untyped-def]
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        token = {"id": 1, "text": "Hi", "logprob": -0.1, "special": False}
        writer.write(f"data: {json.dumps({'token': token, 'details': None})}\n\n".encode())
        end = {"id": 2, "text": "</s>", "logprob": -0.1, "special": True}
        last = {"token": end, "generated_text": "Hi", "details": details}
        writer.write(f"data: {json.dumps(last)}\n\n".encode())

    return handler


async def answer(
    handler: Any, stream: bool = False, adapter: str = "tgi", request: GenerationRequest = REQUEST
) -> Any:
    async with raw_upstream(handler) as upstream:
        p = build(adapter, upstream.url, stream=stream, api_key_env=None)
        try:
            return await collect(p.generate(request))
        finally:
            await p.aclose()


@pytest.mark.parametrize(
    "header, details, prompt",
    [
        ("x-prompt-tokens: 70\r\n", {"input_length": 9}, 70),  # the header first
        ("x-prompt-tokens: 0\r\n", {}, 0),
        ("", {"input_length": 9}, 9),
        ("x-prompt-tokens: many\r\n", {"input_length": 9}, 9),
        ("x-prompt-tokens: -1\r\n", {"input_length": 9}, 9),
        (f"x-prompt-tokens: {2**31}\r\n", {"input_length": 9}, 9),
        ("", {"input_length": 2**31}, tokens.estimate_prompt(REQUEST)),
        ("", {}, tokens.estimate_prompt(REQUEST)),
        ("", {"input_length": None}, tokens.estimate_prompt(REQUEST)),
    ],
)
async def test_prompt_tokens_come_from_the_header_then_details_then_an_estimate(
    header, details, prompt
):
    got = await answer(unary({"finish_reason": "length", "generated_tokens": 2, **details}, header))
    assert got.finished.counts == TokenCounts(prompt, 2)


async def test_a_count_in_range_but_beyond_the_prompt_is_refused():
    with pytest.raises(UpstreamError, match="implausible usage"):
        await answer(
            unary(
                {"finish_reason": "length", "generated_tokens": 2},
                f"x-prompt-tokens: {2**31 - 1}\r\n",
            )
        )


async def test_finish_reasons_it_does_not_know_pass_through_as_sent():
    got = await answer(unary({"finish_reason": "stop_sequence", "generated_tokens": 1}))
    assert got.finished.finish_reason == "stop"
    got = await answer(unary({"finish_reason": "cancelled", "generated_tokens": 1}))
    assert got.finished.finish_reason == "cancelled"


async def test_an_answer_without_generated_tokens_has_no_counts():
    got = await answer(unary({"finish_reason": "eos_token"}))
    assert got.text == "Hi" and got.finished.finish_reason == "stop"
    assert got.finished.counts is None


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
@pytest.mark.parametrize("details", [None, {}, {"finish_reason": ""}, ["eos_token"]])
async def test_an_answer_without_a_finish_reason_is_a_broken_answer(stream, details):
    handler = streamed(details) if stream else unary(details)
    with pytest.raises(UpstreamError) as info:
        await answer(handler, stream)
    assert info.value.message == (
        "tgi-test: malformed answer (answer without details.finish_reason)"
    )
    assert info.value.retryable and info.value.upstream_answered


async def test_garbled_counts_fail_a_whole_answer_over():
    with pytest.raises(UpstreamError) as info:
        await answer(unary({"finish_reason": "eos_token", "generated_tokens": "2"}))
    assert info.value.message == (
        "tgi-test: malformed answer (details.generated_tokens is not a token count: 2)"
    )
    assert info.value.retryable


async def test_garbled_counts_after_streamed_text_are_estimated(caplog):
    caplog.set_level(logging.WARNING)
    got = await answer(streamed({"finish_reason": "eos_token", "generated_tokens": "2"}), True)
    assert got.text == "Hi" and got.finished.finish_reason == "stop"
    assert got.finished.counts is None, "the gateway counts the tokens itself"
    assert (
        "tgi-test: unusable usage report (details.generated_tokens is not a token count: 2);"
        " counting tokens instead" in caplog.text
    )


def test_the_native_api_declares_no_capability():
    p = build("tgi", "http://127.0.0.1:1", api_key_env=None)
    assert p.capabilities == frozenset()


# -- Anthropic --------------------------------------------------------------------


def anthropic_unary(usage: Any):  # type: ignore[no-untyped-def]
    body = json.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-fake",
        "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": usage,
    })  # fmt: skip

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(http_response(body))

    return handler


@pytest.mark.parametrize("usage", [None, {}, {"output_tokens": 2}])
async def test_an_anthropic_answer_without_input_tokens_has_no_counts(usage):
    got = await answer(anthropic_unary(usage), adapter="anthropic")
    assert got.text == "Hi" and got.finished.finish_reason == "stop"
    assert got.finished.counts is None


@pytest.mark.parametrize(
    "garbled, named",
    [
        ({"input_tokens": -1}, "usage.input_tokens"),
        ({"output_tokens": -1}, "usage.output_tokens"),
        ({"cache_read_input_tokens": -1}, "cache_read_input_tokens"),
        ({"cache_creation_input_tokens": -1}, "cache_creation_input_tokens"),
        ({"cache_creation": {"ephemeral_1h_input_tokens": -1}}, "cache_creation.ephemeral_1h"),
    ],
)
async def test_a_garbled_anthropic_count_names_its_field(garbled, named):
    usage = {"input_tokens": 5, "output_tokens": 2, **garbled}
    with pytest.raises(UpstreamError) as info:
        await answer(anthropic_unary(usage), adapter="anthropic")
    assert info.value.message == (
        f"anthropic-test: malformed answer ({named} is not a token count: -1)"
    )


async def test_anthropic_counts_left_out_are_zero():
    got = await answer(anthropic_unary({"input_tokens": 5}), adapter="anthropic")
    assert got.finished.counts == TokenCounts(5, 0)


# -- OpenAI -----------------------------------------------------------------------


def completion_with_logprobs(logprobs: Any):  # type: ignore[no-untyped-def]
    body = json.dumps({
        "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "text": "Hi there", "finish_reason": "stop",
                     "logprobs": logprobs}],
    })  # fmt: skip

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(http_response(body))

    return handler


async def test_legacy_logprobs_read_null_as_zero_and_skip_absent_alternatives():
    logprobs = {
        "tokens": ["Hi", " there"],
        "token_logprobs": [None, -0.5],
        "top_logprobs": [None, {" there": -0.5, " here": -1.5}],
        "text_offset": [0, 2],
    }
    request = GenerationRequest(prompt="Say hi", logprobs=True, top_logprobs=2)
    async with raw_upstream(completion_with_logprobs(logprobs)) as upstream:
        p = build("openai", upstream.url, stream=False, api_key_env=None)
        try:
            deltas = [e async for e in p.generate(request) if isinstance(e, TextDelta)]
        finally:
            await p.aclose()
    assert [d.logprobs for d in deltas] == [(
        TokenLogprob("Hi", 0.0),
        TokenLogprob(" there", -0.5, (TopLogprob(" there", -0.5), TopLogprob(" here", -1.5))),
    )]  # fmt: skip
