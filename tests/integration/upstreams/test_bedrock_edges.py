"""Bedrock's answers at the edges of its wire, byte for byte, to the adapter: usage
reports with every count and each one malformed, each stop reason, error answers by
header or by body, exception and error messages inside an event stream, and Titan's
token counts."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from server.base.config import ConfigError
from server.base.embedding import EmbeddingRequest
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import (
    DocumentPart,
    GenerationRequest,
    ImagePart,
    Message,
    ReasoningDelta,
    ResponseFormat,
    TextDelta,
    TextPart,
    Thinking,
    Thought,
    TokenCounts,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    seal,
)
from tests.integration.upstreams.test_adapters import build, collect, events
from tests.integration.upstreams.test_answer_edges import replying
from tests.support.faults import RawRequest, http_response, raw_upstream
from tests.support.upstreams.base import serving
from tests.support.upstreams.bedrock import ACCESS_KEY_ENV, SECRET_ENV, BedrockWire, event, frame

HELLO = GenerationRequest(messages=(Message("user", "Say hello."),), max_tokens=16)
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/vnd.amazon.eventstream\r\n"
    b"connection: close\r\n\r\n"
)


def converse(stop: str | None = "end_turn", **usage: Any) -> str:
    body: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Hi"}]}},
        "usage": {"inputTokens": 5, "outputTokens": 1, **usage},
    }
    if stop is not None:
        body["stopReason"] = stop
    return json.dumps(body)


async def failure(
    p: Any, kind: type[UpstreamError] = UpstreamError
) -> pytest.ExceptionInfo[UpstreamError]:
    """What asking `p` for HELLO raises (a `kind`); `p` closed after."""
    try:
        with pytest.raises(kind) as raised:
            await collect(p.generate(HELLO))
    finally:
        await p.aclose()
    return raised


async def bedrock(handler: Any, request: GenerationRequest = HELLO, stream: bool = False) -> Any:
    async with raw_upstream(handler) as upstream:
        p = build("bedrock", upstream.url, stream=stream)
        try:
            return await collect(p.generate(request))
        finally:
            await p.aclose()


async def test_every_count_of_a_usage_report_is_read():
    details = [{"ttl": "1h", "inputTokens": 3}, {"ttl": "5m", "inputTokens": 4}, "junk"]
    got = await bedrock(replying(converse(
        inputTokens=10, outputTokens=2, cacheReadInputTokens=6, cacheWriteInputTokens=7,
        cacheDetails=details,
    )))  # fmt: skip
    assert got.finished.counts == TokenCounts(
        prompt_tokens=23, completion_tokens=2, cached_tokens=6, cache_write_tokens=7,
        cache_write_1h_tokens=3,
    )  # fmt: skip


async def test_hour_long_writes_never_exceed_the_writes():
    details = [{"ttl": "1h", "inputTokens": 9}]
    got = await bedrock(replying(converse(cacheWriteInputTokens=4, cacheDetails=details)))
    assert got.finished.counts.cache_write_1h_tokens == 4


async def test_counts_a_report_leaves_out_are_zero():
    body = json.loads(converse(cacheWriteInputTokens=4, cacheDetails=[{"ttl": "1h"}]))
    del body["usage"]["outputTokens"]
    got = await bedrock(replying(json.dumps(body)))
    assert got.finished.counts == TokenCounts(prompt_tokens=9, completion_tokens=0,
                                              cache_write_tokens=4)  # fmt: skip


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"inputTokens": "5"}, "inputTokens"),
        ({"outputTokens": -1}, "outputTokens"),
        ({"cacheReadInputTokens": "6"}, "cacheReadInputTokens"),
        ({"cacheWriteInputTokens": "7"}, "cacheWriteInputTokens"),
        ({"cacheWriteInputTokens": 7, "cacheDetails": [{"ttl": "1h", "inputTokens": "3"}]},
         "cacheDetails.inputTokens"),
    ],
)  # fmt: skip
async def test_a_malformed_count_is_a_malformed_answer_naming_it(usage: Any, field: str):
    with pytest.raises(UpstreamError) as failed:
        await bedrock(replying(converse(**usage)))
    assert failed.value.message.startswith(
        f"bedrock-test: malformed answer ({field} is not a token count: "
    )


async def test_without_input_tokens_the_counts_are_left_to_the_gateway():
    body = json.loads(converse())
    del body["usage"]["inputTokens"]
    got = await bedrock(replying(json.dumps(body)))
    assert got.text == "Hi" and got.finished.counts is None


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"), ("tool_use", "tool_calls"),
        ("guardrail_intervened", "content_filter"), ("content_filtered", "content_filter"),
        ("something_new", "stop"),
    ],
)  # fmt: skip
async def test_each_stop_reason(stop: str, finish: str):
    got = await bedrock(replying(converse(stop)))
    assert got.finished.finish_reason == finish


async def test_a_structured_answer_made_by_the_forced_tool_is_a_plain_stop():
    shaped = GenerationRequest(
        messages=HELLO.messages, response_format=ResponseFormat("json_object")
    )
    body = json.loads(converse("tool_use"))
    body["output"]["message"]["content"] = [
        {"toolUse": {"toolUseId": "t1", "name": "json", "input": {"city": "Paris"}}}
    ]
    got = await bedrock(replying(json.dumps(body)), shaped)
    assert got.text == '{"city": "Paris"}' and got.finished.finish_reason == "stop"
    assert got.finished.counts == TokenCounts(prompt_tokens=5, completion_tokens=1)


async def test_an_answer_without_a_stop_reason_is_malformed():
    with pytest.raises(UpstreamError) as failed:
        await bedrock(replying(converse(None)))
    assert failed.value.message == "bedrock-test: malformed answer (answer without a stopReason)"


ERROR_TYPE = "x-amzn-ErrorType: {}:http://internal.amazon.com/coral/com.amazon.bedrock/\r\n"


@pytest.mark.parametrize(
    ("status", "body", "headers", "kind", "said"),
    [
        (400, '{"message": "Malformed input."}', ERROR_TYPE.format("ValidationException"),
         "ValidationException", ": Malformed input."),
        (400, '{"__type": "com.amazon.bedrock#ValidationException", "Message": "Bad."}', "",
         "ValidationException", ": Bad."),
        (400, "not json", "", "", ""),
        (300, "not json", "", "", ""),
        (400, '{"__type": "com.amazon#coral#ValidationException"}', "",
         "ValidationException", ""),
        (422, '["a list"]', "", "", ""),
    ],
)  # fmt: skip
async def test_the_callers_errors_are_named_by_kind_from_the_header_or_the_body(
    status: int, body: str, headers: str, kind: str, said: str
):
    with pytest.raises(UpstreamRejected) as refused:
        await bedrock(replying(body, status, headers))
    assert refused.value.message == (
        f"bedrock-test: upstream answered HTTP {status} {kind}".rstrip() + said
    )
    assert refused.value.metadata == {
        "provider": "bedrock-test", "upstream_status": str(status), "upstream_error": kind
    }  # fmt: skip


@pytest.mark.parametrize(
    ("status", "kind", "answered_", "wait"),
    [
        (429, "ThrottlingException", False, 2.0),
        (400, "ModelErrorException", True, None),
        (408, "", True, None),
        (424, "ModelErrorException", True, None),
        (424, "", True, None),
        (500, "InternalServerException", True, None),
    ],
)  # fmt: skip
async def test_retryable_errors_fail_over_keeping_the_wait(
    status: int, kind: str, answered_: bool, wait: float | None
):
    headers = (ERROR_TYPE.format(kind) if kind else "") + ("retry-after: 2\r\n" if wait else "")
    with pytest.raises(UpstreamError) as failed:
        await bedrock(replying('{"message": "Try again."}', status, headers))
    assert type(failed.value) is UpstreamError and failed.value.retryable
    assert failed.value.upstream_answered is answered_
    assert failed.value.retry_after_s == wait
    assert failed.value.message == (
        f"bedrock-test: upstream answered HTTP {status} {kind}".rstrip() + ": Try again."
    )


@pytest.mark.parametrize(
    ("status", "kind"), [(403, "AccessDeniedException"), (404, "ResourceNotFoundException"),
                         (400, "UnrecognizedClientException")]
)  # fmt: skip
async def test_a_refused_configuration_names_what_to_check(status: int, kind: str):
    with pytest.raises(UpstreamError) as failed:
        await bedrock(replying('{"message": "No."}', status, ERROR_TYPE.format(kind)))
    assert type(failed.value) is UpstreamError and failed.value.upstream_answered
    assert failed.value.message == (
        f"bedrock-test: upstream refused the gateway's configuration (HTTP {status} {kind}); "
        "check its credentials, region and model"
    )
    assert failed.value.metadata == {
        "provider": "bedrock-test", "upstream_status": str(status), "upstream_error": kind
    }  # fmt: skip


def streaming(*messages: bytes) -> Any:
    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(STREAM_HEAD + b"".join(messages))

    return handler


TEXT = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (frame({":message-type": "exception", ":exception-type": "throttlingException"},
               b'{"message": "Too many requests."}'),
         "throttlingException: Too many requests."),
        (frame({":message-type": "exception", ":exception-type": "modelStreamErrorException"},
               b'{"Message": "Model failed."}'),
         "modelStreamErrorException: Model failed."),
        (frame({":message-type": "error", ":error-code": "InternalFailure",
                ":error-message": "Something broke."}, b""),
         "InternalFailure: Something broke."),
        (frame({":message-type": "exception"}, b"not json"), "error: "),
        (frame({":message-type": "exception", ":exception-type": "validationException"},
               b'["not", "an object"]'), "validationException: "),
    ],
)  # fmt: skip
async def test_an_exception_inside_the_stream_is_named_by_its_type(message: bytes, said: str):
    with pytest.raises(UpstreamError) as failed:
        await bedrock(streaming(TEXT, message), stream=True)
    assert failed.value.message == f"bedrock-test: upstream failed mid-stream: {said}"
    assert failed.value.metadata == {"provider": "bedrock-test"}
    assert failed.value.upstream_answered


async def test_titans_token_counts_are_summed_and_a_malformed_one_named():
    answers = iter([{"embedding": [0.5], "inputTextTokenCount": 2},
                    {"embedding": [0.25]}, {"embedding": [1], "inputTextTokenCount": "3"}])  # fmt: skip

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(http_response(json.dumps(next(answers))))

    async with raw_upstream(handler) as upstream:
        p = build("bedrock", upstream.url)
        try:
            made = await p.embed(EmbeddingRequest(inputs=("one two", "three")))
            with pytest.raises(UpstreamError) as failed:
                await p.embed(EmbeddingRequest(inputs=("four",)))
            with pytest.raises(UpstreamRejected) as refused:
                await p.embed(EmbeddingRequest(inputs=((1, 2),)))
        finally:
            await p.aclose()
    assert made.vectors == ((0.5,), (0.25,)) and made.prompt_tokens == 2
    assert failed.value.message == (
        "bedrock-test: malformed answer (inputTextTokenCount is not a token count: 3)"
    )
    assert refused.value.metadata == {"provider": "bedrock-test", "field": "input"}
    assert [r.body for r in upstream.requests] == [
        b'{"inputText": "one two"}', b'{"inputText": "three"}', b'{"inputText": "four"}'
    ]  # fmt: skip


async def stream_events(*messages: bytes, request: GenerationRequest = HELLO) -> list[Any]:
    async with raw_upstream(streaming(*messages)) as upstream:
        p = build("bedrock", upstream.url, stream=True)
        try:
            return await events(p.generate(request))
        finally:
            await p.aclose()


CLOSE = [event("messageStop", {"stopReason": "end_turn"}),
         event("metadata", {"usage": {"inputTokens": 5, "outputTokens": 1}})]  # fmt: skip


async def test_parallel_calls_of_a_whole_answer_are_numbered_in_order():
    body = json.loads(converse("tool_use"))
    body["output"]["message"]["content"] = [
        {"toolUse": {"toolUseId": f"t{n}", "name": "get_weather", "input": {"n": n}}}
        for n in range(2)
    ]
    async with raw_upstream(replying(json.dumps(body))) as upstream:
        p = build("bedrock", upstream.url, stream=False)
        try:
            got = await events(p.generate(HELLO))
        finally:
            await p.aclose()
    calls = [e for e in got if isinstance(e, ToolCallDelta)]
    assert [(c.index, c.id, c.arguments) for c in calls] == [
        (0, "t0", '{"n": 0}'), (1, "t1", '{"n": 1}')
    ]  # fmt: skip


async def test_a_streamed_calls_pieces_find_their_call_by_block_index():
    start = {"toolUse": {"toolUseId": "t1", "name": "get_weather"}}
    got = await stream_events(
        event("contentBlockStart", {"start": start}),  # index 0, left out as Bedrock may
        event("contentBlockDelta", {"delta": {"toolUse": {"input": '{"city"'}}}),
        event("contentBlockDelta", {"contentBlockIndex": 5, "delta": {"toolUse": {"input": "x"}}}),
        event("contentBlockDelta", {"contentBlockIndex": 0,
                                    "delta": {"toolUse": {"input": ': "Paris"}'}}}),
        *CLOSE,
    )  # fmt: skip
    calls = [e for e in got if isinstance(e, ToolCallDelta)]
    assert [(c.index, c.arguments) for c in calls] == [(0, ""), (0, '{"city"'), (0, ': "Paris"}')]


async def test_an_event_without_a_payload_is_passed_over():
    got = await stream_events(
        TEXT, frame({":message-type": "event", ":event-type": "contentBlockStop"}, b""), *CLOSE
    )
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["Hi"]


async def test_a_structured_streams_empty_pieces_add_no_text():
    shaped = GenerationRequest(
        messages=HELLO.messages, response_format=ResponseFormat("json_object")
    )
    start = {"toolUse": {"toolUseId": "t1", "name": "json"}}
    got = await stream_events(
        event("contentBlockStart", {"contentBlockIndex": 0, "start": start}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {}}}),
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}),
        *CLOSE, request=shaped,
    )  # fmt: skip
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["{}"]


async def test_a_signature_alone_is_no_empty_thought():
    thinking = GenerationRequest(messages=HELLO.messages, thinking=Thinking("enabled", 1024))
    got = await stream_events(
        event("contentBlockDelta", {"contentBlockIndex": 0,
                                    "delta": {"reasoningContent": {"text": "Hmm."}}}),
        event("contentBlockDelta", {"contentBlockIndex": 0,
                                    "delta": {"reasoningContent": {"signature": "sig"}}}),
        *CLOSE, request=thinking,
    )  # fmt: skip
    thoughts = [e for e in got if isinstance(e, ReasoningDelta)]
    assert [t.text for t in thoughts] == ["Hmm.", ""]
    assert thoughts[0].signature is None and str(thoughts[1].signature).endswith("sig")


CALL = ToolCall("t1", "get_weather", "{}")
THINKING = Thinking("enabled", 1024)


@pytest.mark.parametrize(
    ("messages", "thinks"),
    [
        # Not a tool loop: a plain earlier turn does not stop thinking.
        ((Message("user", "Hi."), Message("assistant", "Hello."), Message("user", "Well?")),
         True),
        # A tool result with no assistant turn before it: nothing to give back.
        ((Message("user", "Hi."), Message("tool", "Sunny.", tool_call_id="t1")), True),
        # Instructions after the results are not a turn: still a loop without reasoning.
        ((Message("user", "Hi."), Message("assistant", "", tool_calls=(CALL,)),
          Message("tool", "Sunny.", tool_call_id="t1"), Message("system", "Be brief.")),
         False),
        ((Message("user", "Hi."), Message("assistant", "", tool_calls=(CALL,)),
          Message("tool", "Sunny.", tool_call_id="t1"), Message("developer", "Be brief.")),
         False),
    ],
)  # fmt: skip
def test_thinking_is_left_off_only_in_a_loop_without_this_providers_reasoning(
    messages: tuple[Message, ...], thinks: bool
):
    p = build("bedrock", "http://127.0.0.1:9")
    body = p.body(GenerationRequest(messages=messages, thinking=THINKING))
    assert ("thinking" in body.get("additionalModelRequestFields", {})) is thinks


def body_of(request: GenerationRequest, **params: Any) -> dict[str, Any]:
    return build("bedrock", "http://127.0.0.1:9", **params).body(request)


@pytest.mark.parametrize("prompt", ["Once upon a time", ""])
def test_a_text_completions_prompt_is_the_one_user_turn(prompt: str):
    assert body_of(GenerationRequest(prompt=prompt))["messages"] == [
        {"role": "user", "content": [{"text": prompt}]}
    ]


def test_instructions_of_both_roles_are_the_system_and_turns_merge():
    body = body_of(GenerationRequest(messages=(
        Message("system", "Be brief."), Message("user", "Hi."), Message("developer", "Use French."),
        Message("user", "Well?"), Message("assistant", "", cache="5m"), Message("user", "Still?"),
        Message("assistant", "Yes."),
    ), metadata={"team": "search"}))  # fmt: skip
    assert body["system"] == [{"text": "Be brief."}, {"text": "Use French."}]
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "Hi."}, {"text": "Well?"}, {"text": "Still?"}]},
        {"role": "assistant", "content": [{"text": "Yes."}]},
    ]
    assert body["requestMetadata"] == {"team": "search"}


@pytest.mark.parametrize("marked", [False, True])
def test_cache_points_after_the_system_prompt_and_the_tools_once(marked: bool):
    request = GenerationRequest(
        messages=(Message("system", "Be brief.", cache="1h" if marked else None),
                  Message("user", "Hi.")),
        tools=(ToolSpec("get_weather", parameters={"type": "object"}),),
    )  # fmt: skip
    first = {"cachePoint": {"type": "default", "ttl": "1h"}} if marked else None
    point = {"cachePoint": {"type": "default"}}
    body = body_of(request, cache_points=True)
    assert body["system"] == [{"text": "Be brief."}, first or point]
    assert body["toolConfig"]["tools"][-1] == point
    plain = body_of(request)
    assert plain["system"] == [{"text": "Be brief."}, *([first] if first else [])]
    assert all("cachePoint" not in t for t in plain["toolConfig"]["tools"])


def test_the_parts_bedrock_takes_and_its_defaults():
    calls = (ToolCall("t1", "get_weather", "not json"), ToolCall("t2", "get_time", ""))
    pdf = DocumentPart("application/pdf", "JVBERi0=")
    body = body_of(GenerationRequest(messages=(
        Message("user", "Read.", (TextPart("Read."), pdf)),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "", tool_call_id="t1"), Message("tool", "Noon.", tool_call_id="t2"),
    )))  # fmt: skip
    user, assistant, results = body["messages"]
    assert user["content"][1] == {"document": {"format": "pdf", "name": "document",
                                               "source": {"bytes": "JVBERi0="}}}  # fmt: skip
    assert [b["toolUse"]["input"] for b in assistant["content"]] == [{}, {}]
    assert [b["toolResult"]["content"] for b in results["content"]] == [
        [{"text": " "}], [{"text": "Noon."}]
    ]  # fmt: skip


def test_an_image_link_is_refused_naming_the_messages():
    link = Message("user", "", (ImagePart("https://example.com/cat.png"),))
    with pytest.raises(UpstreamRejected) as refused:
        body_of(GenerationRequest(messages=(link,)))
    assert refused.value.metadata == {"field": "messages"}


def test_reasoning_is_given_back_only_with_thinking_on():
    made = seal("bedrock-test", "sig")
    turns = (Message("user", "Hi."),
             Message("assistant", "Hello.", thoughts=(Thought("Hmm.", made),)),
             Message("user", "Well?"))  # fmt: skip
    off = body_of(GenerationRequest(messages=turns))
    on = body_of(GenerationRequest(messages=turns, thinking=THINKING))
    assert off["messages"][1]["content"] == [{"text": "Hello."}]
    assert on["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "Hmm.", "signature": "sig"}}},
        {"text": "Hello."},
    ]


def test_tools_and_the_structured_output_tool_as_bedrock_takes_them():
    tools = (ToolSpec("bare"), ToolSpec("full", "Does it all.", {"type": "object"}))
    shaped = ResponseFormat("json_schema", "City", {"type": "object", "required": ["city"]})
    body = body_of(GenerationRequest(messages=HELLO.messages, tools=tools, response_format=shaped))
    assert body["toolConfig"]["tools"] == [
        {"toolSpec": {"name": "bare", "inputSchema": {"json": {"type": "object", "properties": {}}}}},
        {"toolSpec": {"name": "full", "description": "Does it all.",
                      "inputSchema": {"json": {"type": "object"}}}},
        {"toolSpec": {"name": "City", "description": "Answers in this JSON shape.",
                      "inputSchema": {"json": {"type": "object", "required": ["city"]}}}},
    ]  # fmt: skip
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "City"}}


def test_a_tool_the_caller_marked_gets_no_second_cache_point():
    tools = (ToolSpec("a"), ToolSpec("b", cache="1h"))
    body = body_of(GenerationRequest(messages=HELLO.messages, tools=tools), cache_points=True)
    assert [next(iter(t)) for t in body["toolConfig"]["tools"]] == [
        "toolSpec", "toolSpec", "cachePoint"
    ]  # fmt: skip
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}


def test_tools_stay_when_a_tool_result_is_in_the_conversation():
    turns = (Message("user", "Hi."), Message("tool", "Sunny.", tool_call_id="t1"))
    body = body_of(GenerationRequest(messages=turns, tools=(ToolSpec("a"),), tool_choice="none"))
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["a"]


@pytest.mark.parametrize("name", ["access_key_id_env", "secret_access_key_env"])
def test_missing_credentials_fail_at_start_up_naming_the_variable(
    name: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("NO_SUCH_AWS_VARIABLE", raising=False)
    with pytest.raises(ConfigError) as failed:
        build("bedrock", "http://127.0.0.1:9", **{name: "NO_SUCH_AWS_VARIABLE"})
    assert str(failed.value) == (
        f"models[0].providers[0].params.{name}: environment variable NO_SUCH_AWS_VARIABLE "
        "is not set"
    )


async def test_a_models_arn_is_one_path_segment():
    arn = "arn:aws:bedrock:us-west-2:1:application-inference-profile/abc"
    async with raw_upstream(replying(converse())) as upstream:
        p = build("bedrock", upstream.url, stream=False, model=arn)
        try:
            await events(p.generate(HELLO))
        finally:
            await p.aclose()
    (seen,) = upstream.requests
    assert seen.path == (
        "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A1%3Aapplication-inference-profile%2Fabc/converse"
    )


async def test_a_malformed_usage_report_at_a_streams_end_is_logged_by_provider(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.WARNING)
    got = await stream_events(
        TEXT, event("messageStop", {"stopReason": "end_turn"}),
        event("metadata", {"usage": {"inputTokens": "many"}}),
    )  # fmt: skip
    assert got[-1].counts is None
    assert any(
        r.getMessage().startswith("bedrock-test: unusable usage report (inputTokens")
        for r in caplog.records
    )


async def test_a_failed_embedding_names_the_provider():
    async with raw_upstream(replying('{"message": "Busy."}', 503)) as upstream:
        p = build("bedrock", upstream.url)
        try:
            with pytest.raises(UpstreamError) as failed:
                await p.embed(EmbeddingRequest(inputs=("one",)))
        finally:
            await p.aclose()
    assert failed.value.message == "bedrock-test: upstream answered HTTP 503: Busy."


async def test_a_session_token_an_upstream_quotes_back_never_reaches_the_caller(
    monkeypatch: pytest.MonkeyPatch,
):
    token = "session-token-quoted-back"  # its own: once remembered, always redacted
    monkeypatch.setenv("TEST_AWS_SESSION_TOKEN", token)

    async def echoing(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        said = f"The security token {request.headers['x-amz-security-token']} is invalid."
        writer.write(http_response(json.dumps({"message": said}), 400))

    async with raw_upstream(echoing) as upstream:
        p = build("bedrock", upstream.url, session_token_env="TEST_AWS_SESSION_TOKEN")
        refused = await failure(p, UpstreamRejected)
    assert refused.value.message == (
        "bedrock-test: upstream answered HTTP 400: The security token [redacted] is invalid."
    )


async def test_credentials_gone_after_start_up_are_a_refused_configuration(
    monkeypatch: pytest.MonkeyPatch,
):
    async with serving(BedrockWire()) as fake:
        p = build("bedrock", fake.url)
        monkeypatch.delenv(ACCESS_KEY_ENV)
        monkeypatch.delenv(SECRET_ENV)
        refused = await failure(p)
    assert refused.value.message == (
        "bedrock-test: upstream refused the gateway's configuration (HTTP 403 "
        "UnrecognizedClientException); check its credentials, region and model"
    )
