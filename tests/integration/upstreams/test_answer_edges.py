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
from gateway.v1 import messages_service_pb2 as messages_service
from gateway.v1 import responses_service_pb2 as responses_service

from http_facade import codec
from server.application.dialects.messages.request import generation
from server.application.dialects.responses.request import translate
from server.base import tokens
from server.base.embedding import EmbeddingRequest, Embeddings
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import (
    Finished,
    GenerationRequest,
    Message,
    NativeEvent,
    TextDelta,
    Thinking,
    TokenCounts,
    TokenLogprob,
    ToolCallDelta,
    ToolSpec,
    TopLogprob,
    serves,
)
from tests.integration.upstreams.test_adapters import build, collect
from tests.support.faults import SSE_HEAD, RawRequest, http_response, raw_upstream
from tests.support.upstreams.base import serving
from tests.support.upstreams.openai import OpenAIWire

REQUEST = GenerationRequest(prompt="Say hello.", max_tokens=16)


def replying(body: bytes | str, status: int = 200, headers: str = "") -> Any:
    """A raw upstream's handler that answers every request with `body`, `status` and
    extra `headers` (CRLF-terminated lines)."""

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        head, _, rest = http_response(body, status=status).partition(b"\r\n")
        writer.write(head + b"\r\n" + headers.encode() + rest)

    return handler


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


async def test_the_inference_apis_answer_in_a_list():
    body = json.dumps([{"generated_text": "Hi", "details": {"finish_reason": "eos_token",
                                                           "generated_tokens": 1}}])  # fmt: skip

    handler = replying(body)

    got = await answer(handler)
    assert got.text == "Hi" and got.finished.counts == TokenCounts(3, 1)


async def test_a_tgi_stream_takes_the_header_count_and_ends_at_details_alone():
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD.replace(b"\r\n\r\n", b"\r\nx-prompt-tokens: 11\r\n\r\n"))
        token = {"id": 1, "text": "Hi", "logprob": -0.1, "special": False}
        last = {"token": token, "generated_text": None,
                "details": {"finish_reason": "length", "generated_tokens": 1}}  # fmt: skip
        writer.write(f"data: {json.dumps(last)}\n\n".encode())

    got = await answer(handler, stream=True)
    assert got.text == "Hi"
    assert got.finished.finish_reason == "length" and got.finished.counts == TokenCounts(11, 1)


async def test_a_tgi_stream_without_its_final_event_is_broken():
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        token = {"id": 1, "text": "Hi", "logprob": -0.1, "special": False}
        writer.write(f"data: {json.dumps({'token': token})}\n\n".encode())

    with pytest.raises(UpstreamError) as info:
        await answer(handler, stream=True)
    assert info.value.message == (
        "tgi-test: malformed answer (stream ended without its final details)"
    )


async def test_a_tgi_error_event_fails_the_stream_with_its_words():
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        said = {"error": "CUDA out of memory " + "x" * 300, "error_type": "generation"}
        writer.write(f"data: {json.dumps(said)}\n\n".encode())

    with pytest.raises(UpstreamError) as info:
        await answer(handler, stream=True)
    expected = ("CUDA out of memory " + "x" * 300)[:200]
    assert info.value.message == f"tgi-test: upstream failed mid-stream: {expected}"
    assert info.value.metadata == {"provider": "tgi-test"}
    assert info.value.upstream_answered and info.value.retryable


# -- Anthropic --------------------------------------------------------------------


def anthropic_unary(usage: Any):  # type: ignore[no-untyped-def]
    body = json.dumps({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-fake",
        "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": usage,
    })  # fmt: skip

    handler = replying(body)

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

    handler = replying(body)

    return handler


async def test_legacy_logprobs_read_null_as_zero_and_skip_absent_alternatives():
    # One more token than probabilities, and alternatives for the first only: what is
    # missing is left out, never an error.
    logprobs = {
        "tokens": ["Hi", " there", "!", "?"],
        "token_logprobs": [None, -0.5, -0.25],
        "top_logprobs": [None, {" there": -0.5, " here": -1.5}],
        "text_offset": [0, 2, 8, 9],
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
        TokenLogprob("!", -0.25),
    )]  # fmt: skip


# -- Anthropic, a Messages request passed through as the caller wrote it -----------


def native(**fields: Any) -> GenerationRequest:
    body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}],
            **fields}  # fmt: skip
    message = messages_service.CreateMessageRequest()
    codec.from_dict(body, message, strict=True)
    return generation(message)


def sse_answer(*frames: str):  # type: ignore[no-untyped-def]
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + "".join(frames).encode())

    return handler


def frame(data: Any, event: str | None = None) -> str:
    name = event or (data.get("type") if isinstance(data, dict) else "x")
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


START = {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-fake",
    "content": [], "stop_reason": None, "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 1}}}  # fmt: skip
BLOCK = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
]
END = {"type": "message_delta", "delta": {"stop_reason": "stop_sequence", "stop_sequence": "##"},
       "usage": {"output_tokens": 7, "input_tokens": None}}  # fmt: skip


async def native_events(handler: Any, stream: bool = True, request: Any = None) -> list[Any]:
    async with raw_upstream(handler) as upstream:
        p = build("anthropic", upstream.url, stream=stream, api_key_env=None)
        try:
            return [e async for e in p.generate(request or native())]
        finally:
            await p.aclose()


async def test_a_native_stream_is_passed_on_without_pings_and_ends_with_its_counts():
    frames = [frame(START), frame({"type": "ping"}), *map(frame, BLOCK), frame(END),
              frame({"type": "message_stop"})]  # fmt: skip
    got = await native_events(sse_answer(*frames))
    *passed, finished = got
    assert [e.data for e in passed] == [START, *BLOCK, END]
    assert all(isinstance(e, NativeEvent) for e in passed)
    # Cumulative usage: the delta's output_tokens replace the start's; its null is ignored.
    assert finished == Finished("stop", TokenCounts(12, 7), stop_sequence="##")


async def test_a_native_whole_answer_is_passed_on_as_the_events_that_would_stream_it():
    answer = {**START["message"], "content": [{"type": "text", "text": "Hi"},
              {"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
              "stop_reason": "tool_use", "stop_sequence": None,
              "usage": {"input_tokens": 12, "output_tokens": 7}}  # fmt: skip

    handler = replying(json.dumps(answer))

    *passed, finished = await native_events(handler, stream=False)
    head = {k: v for k, v in answer.items() if k not in ("content", "stop_reason", "stop_sequence")}
    assert [e.data for e in passed] == [
        {"type": "message_start", "message": {**head, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": answer["content"][0]},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": answer["content"][1]},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"input_tokens": 12, "output_tokens": 7}},
    ]  # fmt: skip
    assert finished == Finished("tool_calls", TokenCounts(12, 7), stop_sequence=None)


@pytest.mark.parametrize(
    "frames, stream, problem",
    [
        ([frame(START), *map(frame, BLOCK)], True, "stream ended without message_stop"),
        ([frame(START), frame([1, 2])], True, "an event that is not a JSON object"),
        (None, False, "an answer without content"),
    ],
    ids=["no message_stop", "not an object", "no content"],
)
async def test_a_broken_native_answer_names_what_broke(frames, stream, problem):
    whole = replying(json.dumps({"type": "message", "content": None}))

    handler = sse_answer(*frames) if frames else whole
    with pytest.raises(UpstreamError) as info:
        await native_events(handler, stream=stream)
    assert info.value.message == f"anthropic-test: malformed answer ({problem})"
    assert info.value.retryable and info.value.upstream_answered


@pytest.mark.parametrize(
    "error, event, said",
    [
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
         "error", "overloaded_error: Overloaded"),
        # Named only by the SSE event; no type in the error: "error".
        ({"error": {"message": "x" * 300}}, "error", "error: " + "x" * 200),
        # Named only by its type.
        ({"type": "error", "error": {"type": "api_error", "message": "Internal"}}, "message",
         "api_error: Internal"),
    ],
)  # fmt: skip
async def test_a_native_error_event_fails_the_stream_with_its_words(error, event, said):
    with pytest.raises(UpstreamError) as info:
        await native_events(sse_answer(frame(START), frame(error, event)))
    assert info.value.message == f"anthropic-test: upstream failed mid-stream: {said}"
    assert info.value.metadata == {"provider": "anthropic-test"}
    assert info.value.upstream_answered and info.value.retryable


async def test_native_refusals_and_counts_name_the_provider():
    async def overloaded(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(http_response('{"type": "error", "error": {"type": "overloaded_error",'
                                   ' "message": "Overloaded"}}', status=529))  # fmt: skip

    with pytest.raises(UpstreamError) as info:
        await native_events(overloaded)
    assert info.value.message == "anthropic-test: upstream answered HTTP 529: Overloaded"

    async with raw_upstream(overloaded) as upstream:
        p = build("anthropic", upstream.url, api_key_env=None)
        try:
            with pytest.raises(UpstreamError) as counted:
                await p.count_tokens(native())
        finally:
            await p.aclose()
    assert counted.value.message == "anthropic-test: upstream answered HTTP 529: Overloaded"
    assert upstream.requests[0].method == "POST"
    assert upstream.requests[0].path == "/v1/messages/count_tokens"


@pytest.mark.parametrize("answer, got", [('{"input_tokens": 42}', 42),
                                         ('{"input_tokens": "42"}', None)])  # fmt: skip
async def test_the_upstreams_token_count(answer, got):
    handler = replying(answer)

    async with raw_upstream(handler) as upstream:
        p = build("anthropic", upstream.url, api_key_env=None)
        try:
            if got is not None:
                assert await p.count_tokens(native()) == got
                assert json.loads(upstream.requests[0].body) == {
                    "model": "claude-fake",
                    "messages": [{"role": "user", "content": "Hi"}],
                }
            else:
                with pytest.raises(UpstreamError) as info:
                    await p.count_tokens(native())
                assert info.value.message == (
                    "anthropic-test: malformed answer (input_tokens is not a token count: 42)"
                )
            with pytest.raises(UpstreamError) as generic:
                await p.count_tokens(REQUEST)
        finally:
            await p.aclose()
    assert generic.value.message == "anthropic-test: counts only Messages requests"
    assert generic.value.metadata == {"provider": "anthropic-test"}


@pytest.mark.parametrize(
    "thinking, effort",
    [
        (Thinking("disabled", effort="xhigh"), "high"),
        (Thinking("disabled", effort="max"), "high"),
        (Thinking("disabled", effort="low"), "low"),
        (Thinking("adaptive"), "medium"),
        (Thinking("enabled", budget_tokens=1024), "low"),
        (Thinking("enabled", budget_tokens=4095), "low"),
        (Thinking("enabled", budget_tokens=4096), "medium"),
        (Thinking("enabled", budget_tokens=16383), "medium"),
        (Thinking("enabled", budget_tokens=16384), "high"),
    ],
)
async def test_extended_thinking_reaches_openai_as_a_reasoning_effort(thinking, effort):
    async with serving(OpenAIWire()) as fake:
        p = build("openai", fake.url)
        try:
            chat = GenerationRequest(messages=(Message("user", "Think."),), thinking=thinking)
            await collect(p.generate(chat))
        finally:
            await p.aclose()
    assert fake.problems == []
    assert fake.seen[0].body["reasoning_effort"] == effort


LONG_LINE = "data: " + json.dumps({"type": "x", "pad": "x" * 4096}) + "\n\n"


@pytest.mark.parametrize(
    "adapter, params, dialect",
    [
        ("openai", {}, "generic"),
        ("openai", {"responses_api": True}, "responses"),
        ("anthropic", {}, "generic"),
        ("anthropic", {}, "messages"),
        ("tgi", {}, "generic"),
    ],
)
async def test_every_event_stream_reader_keeps_the_configured_line_bound(adapter, params, dialect):
    request = {"generic": REQUEST, "messages": native(), "responses": responses_request()}
    async with raw_upstream(sse_answer(LONG_LINE)) as upstream:
        p = build(adapter, upstream.url, api_key_env=None, max_line_bytes=1024, **params)
        try:
            with pytest.raises(UpstreamError) as info:
                await collect(p.generate(request[dialect]))
        finally:
            await p.aclose()
    assert info.value.message == (
        f"{adapter}-test: malformed answer (an event-stream line exceeds 1024 bytes)"
    )


def responses_request() -> GenerationRequest:
    message = responses_service.CreateResponseRequest()
    codec.from_dict({"model": "m", "input": "Hi", "stream": True}, message, strict=True)
    return translate(message, None).generation


def embeddings_answer(data: Any, usage: Any = None, status: int = 200):  # type: ignore[no-untyped-def]
    body = {"object": "list", "data": data, "model": "m"}
    if usage is not None:
        body["usage"] = usage

    handler = replying(json.dumps(body), status=status)

    return handler


async def embed(handler: Any) -> Any:
    async with raw_upstream(handler) as upstream:
        p = build("openai", upstream.url, api_key_env=None)
        try:
            return await p.embed(EmbeddingRequest(("a", "b")))
        finally:
            await p.aclose()


def item(index: int, vector: Any) -> dict[str, Any]:
    return {"object": "embedding", "index": index, "embedding": vector}


async def test_embeddings_come_back_in_input_order_with_their_count():
    got = await embed(embeddings_answer([item(1, [0.5, 1]), item(0, [2, -1.5])],
                                        {"prompt_tokens": 4, "total_tokens": 4}))  # fmt: skip
    assert got == Embeddings(((2.0, -1.5), (0.5, 1.0)), 4)
    unreported = await embed(embeddings_answer([item(0, [1.0]), item(1, [2.0])]))
    assert unreported.prompt_tokens is None


@pytest.mark.parametrize(
    "data, usage, problem",
    [
        ([item(0, [1.0])], None, "expected 2 embeddings indexed from 0"),
        ([item(0, [1.0]), item(1, "AAAA")], None, "an embedding is not a list of numbers"),
        ([item(0, [1.0]), item(1, [True])], None, "an embedding is not a list of numbers"),
        ([item(0, [1.0]), item(1, [2.0])], {"prompt_tokens": -4},
         "usage.prompt_tokens is not a token count: -4"),
    ],
    ids=["one short", "base64", "booleans", "garbled count"],
)  # fmt: skip
async def test_broken_embeddings_name_what_broke(data, usage, problem):
    with pytest.raises(UpstreamError) as info:
        await embed(embeddings_answer(data, usage))
    assert info.value.message == f"openai-test: malformed answer ({problem})"


async def test_an_embedding_refusal_names_the_provider():
    with pytest.raises(UpstreamError) as info:
        await embed(embeddings_answer({"error": {"message": "overloaded"}}, status=503))
    assert info.value.message.startswith("openai-test: upstream answered HTTP 503")


@pytest.mark.parametrize(
    "error, said",
    [({"message": "The server had an error", "type": "server_error"}, "The server had an error"),
     ("plain words " + "x" * 300, ("plain words " + "x" * 300)[:200])],
)  # fmt: skip
async def test_an_openai_error_chunk_fails_the_stream_with_its_words(error, said):
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    handler = sse_answer(
        f"data: {json.dumps(chunk)}\n\n", f"data: {json.dumps({'error': error})}\n\n"
    )
    with pytest.raises(UpstreamError) as info:
        await answer(handler, stream=True, adapter="openai")
    assert info.value.message == f"openai-test: upstream failed mid-stream: {said}"
    assert info.value.metadata == {"provider": "openai-test"}
    assert info.value.upstream_answered is True


# -- refusals, read from the answer as every HTTP adapter reads them --------------


async def refusal(status: int, body: object, **headers: str) -> UpstreamError:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    named = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        head, _, tail = http_response(content, status=status).partition(b"\r\n")
        writer.write(head + b"\r\n" + named.encode() + tail)

    with pytest.raises(UpstreamError) as info:
        await answer(handler, adapter="openai")
    return info.value


async def test_a_content_filter_refusal_is_said_as_such():
    error = {"error": {"message": "The prompt was filtered.", "code": "content_filter"}}
    filtered = await refusal(400, error)
    assert isinstance(filtered, UpstreamRejected)
    assert filtered.message == (
        "openai-test: the upstream's content filter refused the prompt (content_filter):"
        " The prompt was filtered."
    )
    assert filtered.metadata == {
        "provider": "openai-test",
        "upstream_status": "400",
        "code": "content_filter",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "bad", "code": "invalid_value"}},
        {"error": {"message": "bad", "code": 7}},
        {"error": "bad"},
        {"message": "bad"},
        [{"error": {"code": "content_filter"}}],
        b"bad",
    ],
)
async def test_any_other_400_is_a_plain_refusal(body):
    plain = await refusal(400, body)
    assert isinstance(plain, UpstreamRejected)
    assert plain.metadata == {"provider": "openai-test", "upstream_status": "400"}
    assert plain.message.startswith("openai-test: upstream answered HTTP 400")


async def test_a_429_carries_its_wait():
    busy = await refusal(429, {"error": {"message": "slow down"}}, retry_after_ms="250")
    assert busy.retry_after_s == 0.25 and busy.retryable
    assert busy.message == "openai-test: upstream answered HTTP 429: slow down"


async def test_garbled_native_usage_is_dropped_and_said(caplog):
    caplog.set_level(logging.WARNING)
    garbled = {**END, "usage": {"output_tokens": "seven"}}
    frames = [frame(START), *map(frame, BLOCK), frame(garbled), frame({"type": "message_stop"})]
    *_, finished = await native_events(sse_answer(*frames))
    assert finished.counts is None
    assert "anthropic-test: unusable usage report (usage.output_tokens is not a token count" in (
        caplog.text
    )


async def test_a_whole_responses_answer_is_refused_or_its_counts_checked():
    busy = replying('{"error": {"message": "busy"}}', status=503)

    async def liar(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        answer = {"id": "resp_1", "object": "response", "status": "completed", "model": "m",
                  "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                              "status": "completed",
                              "content": [{"type": "output_text", "text": "Hi",
                                           "annotations": []}]}],
                  "usage": {"input_tokens": 10**9, "output_tokens": 1, "total_tokens": 10**9 + 1}}  # fmt: skip
        writer.write(http_response(json.dumps(answer)))

    for handler, said in ((busy, "upstream answered HTTP 503: busy"),
                          (liar, "malformed answer (implausible usage: ")):  # fmt: skip
        async with raw_upstream(handler) as upstream:
            p = build("openai", upstream.url, api_key_env=None, responses_api=True, stream=False)
            try:
                with pytest.raises(UpstreamError) as info:
                    await collect(p.generate(responses_request()))
            finally:
                await p.aclose()
        assert info.value.message.startswith(f"openai-test: {said}")


def chat_answer(choices: Any, usage: Any = None) -> Any:
    body = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": choices, "usage": usage}  # fmt: skip

    handler = replying(json.dumps(body))

    return handler


def choice(text: str, index: Any = None, finish: Any = "stop") -> dict[str, Any]:
    out = {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
    return out if index is None else {**out, "index": index}


CHAT_REQUEST = GenerationRequest(messages=(Message("user", "Hi"),), n=2)


async def test_openai_choices_in_index_order_and_counts_left_out_are_zero():
    got = await answer(chat_answer([choice("second", 1), choice("first")],
                                   {"prompt_tokens": 3}), adapter="openai",
                       request=CHAT_REQUEST)  # fmt: skip
    assert got.text == "firstsecond"
    assert got.finished.counts == TokenCounts(3, 0)
    assert got.finished.finish_reasons == ("stop", "stop")
    one = await answer(chat_answer([choice("only", finish="length")], {"prompt_tokens": 3}),
                       adapter="openai", request=CHAT_REQUEST)  # fmt: skip
    assert one.finished.finish_reason == "length" and one.finished.finish_reasons == ()


@pytest.mark.parametrize(
    "choices, usage, problem",
    [
        ([], None, "no choices"),
        ([choice("Hi", finish=None)], None, "answer without a finish_reason"),
        ([choice("Hi")], {"prompt_tokens": -1}, "usage.prompt_tokens is not a token count: -1"),
        ([choice("Hi")], {"prompt_tokens": 3, "completion_tokens": -1},
         "usage.completion_tokens is not a token count: -1"),
        ([choice("Hi")], {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": -1}},
         "cached_tokens is not a token count: -1"),
        ([choice("Hi")], {"prompt_tokens": 3,
                          "completion_tokens_details": {"reasoning_tokens": -1}},
         "reasoning_tokens is not a token count: -1"),
    ],
)  # fmt: skip
async def test_a_broken_openai_answer_names_what_broke(choices, usage, problem):
    with pytest.raises(UpstreamError) as info:
        await answer(chat_answer(choices, usage), adapter="openai", request=CHAT_REQUEST)
    assert info.value.message == f"openai-test: malformed answer ({problem})"


async def test_an_answer_past_the_body_bound_is_refused():
    from server.providers.http import MAX_BODY_BYTES

    def sized(size: int):  # type: ignore[no-untyped-def]
        head = '{"choices": [{"message": {"content": "Hi"}, "finish_reason": "stop"}], "pad": "'
        body = head + "x" * (size - len(head) - 2) + '"}'
        assert len(body) == size

        handler = replying(body)

        return handler

    chat = GenerationRequest(messages=(Message("user", "Hi"),))
    assert (await answer(sized(MAX_BODY_BYTES), adapter="openai", request=chat)).text == "Hi"
    with pytest.raises(UpstreamError) as info:
        await answer(sized(MAX_BODY_BYTES + 1), adapter="openai", request=chat)
    assert info.value.message == "openai-test: malformed answer (answer too large)"


@pytest.mark.parametrize(
    "body, said",
    [
        (b'{"message": "top-level words"}', ": top-level words"),
        (b'{"detail": "a framework\'s words"}', ": a framework's words"),
        (b'{"error": {"type": "x"}}', ""),
        (b"  plain \xff text  ", ": plain \ufffd text"),
    ],
)
async def test_the_upstreams_own_words_are_quoted(body, said):
    handler = replying(body, status=500)

    with pytest.raises(UpstreamError) as info:
        await answer(handler, adapter="openai")
    assert info.value.message == f"openai-test: upstream answered HTTP 500{said}"


async def test_an_error_body_is_read_in_pieces_and_only_to_its_bound():
    words = json.dumps({"error": {"message": "over capacity"}}).encode()

    async def in_pieces(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 500 X\r\ncontent-type: application/json\r\n"
                     + f"content-length: {len(words)}\r\nconnection: close\r\n\r\n".encode())  # fmt: skip
        for i in range(0, len(words), 7):
            writer.write(words[i : i + 7])
            await writer.drain()
            await asyncio.sleep(0.005)

    with pytest.raises(UpstreamError) as info:
        await answer(in_pieces, adapter="openai")
    assert info.value.message == "openai-test: upstream answered HTTP 500: over capacity"

    # Past 16 KiB the body is cut, so its JSON no longer parses: its first words are shown.
    huge = json.dumps({"error": {"message": "m" * 20, "pad": "p" * 100_000}})

    endless = replying(huge, status=500)

    with pytest.raises(UpstreamError) as cut:
        await answer(endless, adapter="openai")
    assert cut.value.message == "openai-test: upstream answered HTTP 500: " + huge[:200]


async def test_an_openai_stream_keeps_each_choice_and_tool_call_by_its_index():
    def chunk(index: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {"choices": [{"index": index, "delta": delta, "finish_reason": finish, **extra}]}
        return f"data: {json.dumps(body)}\n\n"

    logprobs = {"content": [{"token": "", "logprob": -0.5, "top_logprobs": []}]}
    call = {"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "g", "arguments": ""}}  # fmt: skip
    frames = [
        chunk(1, {"content": "B"}),
        chunk(0, {"content": "A"}),
        chunk(0, {"content": None}, logprobs=logprobs),
        chunk(1, {"tool_calls": [call]}),
        chunk(1, {"tool_calls": [{"function": {"arguments": '{"x"'}}]}),
        chunk(1, {"tool_calls": [{"index": 1, "function": {"arguments": {"parsed": 1}}}]}),
        chunk(0, {}, "stop"),
        chunk(1, {}, "tool_calls"),
        "data: [DONE]\n\n",
    ]
    request = GenerationRequest(messages=(Message("user", "Hi"),), n=2, logprobs=True)
    async with raw_upstream(sse_answer(*frames)) as upstream:
        p = build("openai", upstream.url, api_key_env=None)
        try:
            got = [e async for e in p.generate(request)]
        finally:
            await p.aclose()
    assert got == [
        TextDelta("B", 1),
        TextDelta("A", 0),
        TextDelta("", 0, (TokenLogprob("", -0.5),)),
        ToolCallDelta(1, "call_b", "g", "", 1),
        ToolCallDelta(0, None, None, '{"x"', 1),  # no index given: its place in the list
        ToolCallDelta(1, None, None, "", 1),  # arguments that are not a string: none
        Finished("stop", None, ("stop", "tool_calls")),
    ]


TOOL_TURN = GenerationRequest(
    messages=(Message("user", "Weather in both?"),),
    tools=(ToolSpec("get_weather", parameters={"type": "object"}),),
    max_tokens=64,
)


async def test_anthropic_tool_calls_are_numbered_in_order_in_a_whole_answer():
    answer_ = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-fake",
               "content": [{"type": "text", "text": "Checking."},
                           {"type": "tool_use", "id": "t1", "name": "get_weather",
                            "input": {"city": "Oslo"}},
                           {"type": "tool_use", "id": "t2", "name": "get_weather",
                            "input": {"city": "Lima"}}],
               "stop_reason": "tool_use", "usage": {"input_tokens": 9, "output_tokens": 4}}  # fmt: skip

    handler = replying(json.dumps(answer_))

    async with raw_upstream(handler) as upstream:
        p = build("anthropic", upstream.url, api_key_env=None, stream=False)
        try:
            got = [e async for e in p.generate(TOOL_TURN)]
        finally:
            await p.aclose()
    assert got == [
        TextDelta("Checking."),
        ToolCallDelta(0, "t1", "get_weather", '{"city": "Oslo"}'),
        ToolCallDelta(1, "t2", "get_weather", '{"city": "Lima"}'),
        Finished("tool_calls", TokenCounts(9, 4)),
    ]


def anthropic_stream(named: bool, typed: bool) -> list[str]:
    """Anthropic's stream of one text block; its kinds by `event:` names, by `type`
    fields, or both (servers of the format differ)."""
    payloads = [
        ("message_start", {"message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ("message_stop", {}),
    ]
    frames = []
    for kind, data in payloads:
        head = f"event: {kind}\n" if named else ""
        body = {"type": kind, **data} if typed else data
        frames.append(f"{head}data: {json.dumps(body)}\n\n")
    return frames


@pytest.mark.parametrize("named, typed", [(True, True), (False, True), (True, False)])
async def test_anthropic_stream_kinds_by_name_or_type(named, typed):
    got = await answer(sse_answer(*anthropic_stream(named, typed)), stream=True,
                       adapter="anthropic", request=TOOL_TURN)  # fmt: skip
    assert got.text == "Hi"
    assert got.finished == Finished("stop", TokenCounts(9, 2))


async def test_an_endless_error_body_is_read_only_to_its_bound():
    async def endless(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 500 X\r\ncontent-type: text/plain\r\n"
                     b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
        while True:  # until the client goes away: a reader without a bound never returns
            writer.write(b"1000\r\n" + b"e" * 4096 + b"\r\n")
            await writer.drain()

    with pytest.raises(UpstreamError) as info:
        await asyncio.wait_for(answer(endless, adapter="openai"), timeout=10)
    assert info.value.message == "openai-test: upstream answered HTTP 500: " + "e" * 200


async def test_refusals_past_2xx_and_the_configuration_and_filter_words():
    redirected = await refusal(300, {"error": {"message": "pick one"}})
    assert isinstance(redirected, UpstreamRejected)
    assert redirected.message == "openai-test: upstream answered HTTP 300: pick one"
    refused = await refusal(401, {"error": {"message": "bad key sk-abc"}})
    assert refused.message == (
        "openai-test: upstream refused the gateway's configuration (HTTP 401); "
        "check its api_key_env, base_url and model"
    )
    silent = await refusal(400, {"error": {"code": "content_filter"}})
    assert silent.message == (
        "openai-test: the upstream's content filter refused the prompt (content_filter)"
    )


def test_only_a_responses_server_declares_the_responses_api():
    plain = build("openai", "http://127.0.0.1:1", api_key_env=None)
    native = build("openai", "http://127.0.0.1:1", api_key_env=None, responses_api=True)
    assert serves("responses") not in plain.capabilities
    assert serves("responses") in native.capabilities


async def test_top_k_goes_to_openai_compatible_servers_that_read_it():
    # vLLM, llama.cpp and Ollama read top_k; OpenAI itself has no such field (its fake
    # refuses it), so this server is a plain one that records the body.
    async with raw_upstream(chat_answer([choice("Hi")])) as upstream:
        p = build("openai", upstream.url, api_key_env=None, stream=False)
        try:
            await collect(p.generate(GenerationRequest(messages=(Message("user", "Hi"),),
                                                       top_k=40)))  # fmt: skip
        finally:
            await p.aclose()
    assert upstream.requests[0].json()["top_k"] == 40


async def test_an_openai_stream_without_a_finish_or_with_garbled_usage(caplog):
    caplog.set_level(logging.WARNING)
    text = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": "many", "completion_tokens": 1}}
    frames = [f"data: {json.dumps(text)}\n\n", "data: [DONE]\n\n"]
    with pytest.raises(UpstreamError) as info:
        await answer(sse_answer(*frames), stream=True, adapter="openai", request=CHAT_REQUEST)
    assert info.value.message == (
        "openai-test: malformed answer (stream ended without a finish_reason)"
    )
    frames = [f"data: {json.dumps(d)}\n\n" for d in (text, end, usage)] + ["data: [DONE]\n\n"]
    got = await answer(sse_answer(*frames), stream=True, adapter="openai", request=CHAT_REQUEST)
    assert got.text == "Hi" and got.finished.counts is None
    assert "openai-test: unusable usage report (usage.prompt_tokens is not a token count" in (
        caplog.text
    )


async def test_an_openai_stream_that_stops_before_done_is_broken():
    end = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}
    with pytest.raises(UpstreamError) as info:
        await answer(sse_answer(f"data: {json.dumps(end)}\n\n"), stream=True, adapter="openai",
                     request=CHAT_REQUEST)  # fmt: skip
    assert info.value.message == "openai-test: malformed answer (stream ended without data: [DONE])"
