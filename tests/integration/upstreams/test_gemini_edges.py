"""Gemini's answers at the edges of its wire, byte for byte, to the adapter: usage
reports with every count and each one malformed, several candidates, replies that end
blocked or empty, errors inside a stream, RetryInfo details among others, and the
forms the request takes for tool results and image links."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest

from server.base.embedding import EmbeddingRequest
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import (
    Finished,
    GenerationRequest,
    ImagePart,
    Message,
    ReasoningDelta,
    ResponseFormat,
    TextDelta,
    Thinking,
    TokenCounts,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
)
from tests.integration.upstreams.test_adapters import build, events
from tests.integration.upstreams.test_answer_edges import answer, replying
from tests.support.faults import SSE_HEAD, RawRequest, raw_upstream

HELLO = GenerationRequest(messages=(Message("user", "Say hello."),), max_tokens=16)


def candidate(text: str = "Hi", finish: str = "STOP", index: int = 0) -> dict[str, Any]:
    parts = [{"text": text}] if text else []
    return {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": index}


def reply(*candidates: dict[str, Any], **usage: Any) -> str:
    body: dict[str, Any] = {"candidates": list(candidates or [candidate()])}
    if usage:
        body["usageMetadata"] = usage
    return json.dumps(body)


async def gemini(body: str, stream: bool = False) -> Any:
    if stream:

        async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
            writer.write(SSE_HEAD + f"data: {body}\n\n".encode())

        return await answer(handler, stream=True, adapter="gemini", request=HELLO)
    return await answer(replying(body), adapter="gemini", request=HELLO)


async def test_every_count_of_a_usage_report_is_read():
    got = await gemini(reply(promptTokenCount=10, toolUsePromptTokenCount=5,
                             candidatesTokenCount=2, thoughtsTokenCount=3,
                             cachedContentTokenCount=4))  # fmt: skip
    assert got.finished.counts == TokenCounts(
        prompt_tokens=15, completion_tokens=5, cached_tokens=4, reasoning_tokens=3
    )


async def test_counts_a_report_leaves_out_are_zero():
    got = await gemini(reply(promptTokenCount=10))
    assert got.finished.counts == TokenCounts(prompt_tokens=10, completion_tokens=0)


async def test_a_report_without_the_prompts_count_is_left_to_the_gateway():
    got = await gemini(reply(candidatesTokenCount=2))
    assert got.text == "Hi" and got.finished.counts is None


@pytest.mark.parametrize(
    "field",
    ["promptTokenCount", "toolUsePromptTokenCount", "candidatesTokenCount",
     "thoughtsTokenCount", "cachedContentTokenCount"],
)  # fmt: skip
async def test_a_malformed_count_is_a_malformed_answer_naming_it(field: str):
    usage = {"promptTokenCount": 10, field: "12"}
    with pytest.raises(UpstreamError) as failed:
        await gemini(reply(**usage))
    assert failed.value.message == (
        f"gemini-test: malformed answer ({field} is not a token count: 12)"
    )


async def test_an_answer_that_is_not_an_object_is_malformed():
    with pytest.raises(UpstreamError) as failed:
        await gemini("[1]")
    assert failed.value.message == (
        "gemini-test: malformed answer (an answer that is not a JSON object)"
    )


async def test_an_answer_without_a_finish_reason_is_malformed():
    with pytest.raises(UpstreamError) as failed:
        await gemini(json.dumps({"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]}))
    assert failed.value.message == "gemini-test: malformed answer (answer without a finishReason)"


async def test_each_candidates_finish_reason_is_kept():
    got = await gemini(reply(candidate("a"), candidate("b", "MAX_TOKENS", 1)))
    assert got.finished.finish_reason == "stop"
    assert got.finished.finish_reasons == ("stop", "length")


async def test_a_blocked_reply_names_its_reason_and_an_empty_one_fails_over():
    with pytest.raises(UpstreamRejected) as blocked:
        await gemini(reply(candidate("", "SAFETY")))
    assert blocked.value.message == "gemini-test: the upstream blocked the reply (SAFETY)"
    assert blocked.value.metadata == {
        "provider": "gemini-test", "reason": "SAFETY", "code": "content_filter"
    }  # fmt: skip
    with pytest.raises(UpstreamError) as empty:
        await gemini(reply(candidate("", "MALFORMED_FUNCTION_CALL")))
    assert type(empty.value) is UpstreamError and empty.value.retryable
    assert empty.value.upstream_answered
    assert empty.value.metadata == {"provider": "gemini-test", "reason": "MALFORMED_FUNCTION_CALL"}


async def test_an_error_inside_a_stream_without_a_status_is_named_error():
    with pytest.raises(UpstreamError) as failed:
        await gemini(json.dumps({"error": {"code": 500, "message": "Internal error."}}), True)
    assert failed.value.message == (
        "gemini-test: upstream failed mid-stream: error: Internal error."
    )
    assert failed.value.metadata == {"provider": "gemini-test"}
    assert failed.value.upstream_answered


@pytest.mark.parametrize(
    ("details", "wait"),
    [
        (["junk", {"@type": "type.googleapis.com/google.rpc.Help"},
          {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.5s"}], 0.5),
        ([{"retryDelay": "-3s"}], 0.0),
        ([{"retryDelay": "soon"}, {"retryDelay": "2s"}], 2.0),
        ([{"retryDelay": "xs"}], None),
    ],
)  # fmt: skip
async def test_the_retry_delay_is_found_among_other_details(details: Any, wait: float | None):
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Slow down.",
                      "details": details}}  # fmt: skip
    with pytest.raises(UpstreamError) as limited:
        await answer(replying(json.dumps(body), 429), adapter="gemini", request=HELLO)
    assert limited.value.message == "gemini-test: upstream answered HTTP 429: Slow down."
    assert limited.value.retry_after_s == wait


async def test_token_ids_are_refused_naming_the_input():
    async with raw_upstream(replying("{}")) as upstream:
        p = build("gemini", upstream.url, api_key_env=None)
        try:
            with pytest.raises(UpstreamRejected) as refused:
                await p.embed(EmbeddingRequest(inputs=((1, 2),)))
        finally:
            await p.aclose()
    assert refused.value.metadata == {"provider": "gemini-test", "field": "input"}


@pytest.mark.parametrize(
    ("content", "response"),
    [
        ('{"temp": 21}', {"temp": 21}),
        ("[1, 2]", {"result": [1, 2]}),
        ("21", {"result": 21}),
        ("sunny", {"result": "sunny"}),
    ],
)
def test_a_tool_result_is_an_object_as_gemini_wants_it(content: str, response: Any):
    call = ToolCall("c1", "get_weather", "{}")
    request = GenerationRequest(messages=(
        Message("user", "Weather?"), Message("assistant", "", tool_calls=(call,)),
        Message("tool", content, tool_call_id="c1"),
    ))  # fmt: skip
    p = build("gemini", "http://127.0.0.1:9", api_key_env=None)
    (part,) = p.body(request)["contents"][-1]["parts"]
    assert part["functionResponse"] == {"id": "c1", "name": "get_weather", "response": response}


@pytest.mark.parametrize(
    ("url", "mime"),
    [
        ("https://example.com/cat.png?size=2?v=1", "image/png"),
        ("https://example.com/cat.webp", "image/webp"),
        ("https://example.com/cat", "image/jpeg"),
    ],
)
def test_an_image_links_media_type_comes_from_its_path(url: str, mime: str):
    request = GenerationRequest(messages=(Message("user", "", (ImagePart(url),)),))
    p = build("gemini", "http://127.0.0.1:9", api_key_env=None)
    (part,) = p.body(request)["contents"][0]["parts"]
    assert part == {"fileData": {"mimeType": mime, "fileUri": url}}


async def test_a_blocked_prompt_is_the_callers_400_with_its_reason():
    with pytest.raises(UpstreamRejected) as blocked:
        await gemini(json.dumps({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}))
    assert blocked.value.message == (
        "gemini-test: the upstream blocked the prompt (PROHIBITED_CONTENT)"
    )
    assert blocked.value.metadata == {
        "provider": "gemini-test", "code": "prompt_blocked", "reason": "PROHIBITED_CONTENT"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("status", "body", "headers", "said", "wait"),
    [
        (400, '{"error": {"code": 400, "message": "Bad field."}}', "",
         "gemini-test: upstream answered HTTP 400: Bad field.", None),
        (400, "not json", "", "gemini-test: upstream answered HTTP 400", None),
        (400, '{"error": {"code": 400}}', "", "gemini-test: upstream answered HTTP 400", None),
        (400, "[1]", "", "gemini-test: upstream answered HTTP 400", None),
        (400, '{"error": "Bad."}', "", "gemini-test: upstream answered HTTP 400", None),
        (429, '{"error": {"message": "Slow.", "details": [{"retryDelay": "9s"}]}}',
         "retry-after: 3\r\n", "gemini-test: upstream answered HTTP 429: Slow.", 3.0),
    ],
)  # fmt: skip
async def test_geminis_error_answers_are_named_by_status_and_message(
    status: int, body: str, headers: str, said: str, wait: float | None
):
    with pytest.raises(UpstreamError) as failed:
        await answer(replying(body, status, headers), adapter="gemini", request=HELLO)
    assert failed.value.message == said
    assert failed.value.metadata == {"provider": "gemini-test", "upstream_status": str(status)}
    assert failed.value.retry_after_s == wait
    assert isinstance(failed.value, UpstreamRejected) is (status == 400)


async def test_a_key_gemini_does_not_take_is_named_as_the_providers_configuration():
    body = {"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT",
                      "details": [{"reason": "API_KEY_INVALID"}]}}  # fmt: skip
    with pytest.raises(UpstreamError) as failed:
        await answer(replying(json.dumps(body), 400), adapter="gemini", request=HELLO)
    assert type(failed.value) is UpstreamError and failed.value.upstream_answered
    assert failed.value.message == (
        "gemini-test: upstream refused the gateway's configuration (HTTP 400 "
        "API_KEY_INVALID); check its api_key_env"
    )
    assert failed.value.metadata == {"provider": "gemini-test", "upstream_status": "400"}


async def every_event(parts: list[Any], finish: str) -> list[Any]:
    """The events of a whole answer of one candidate with these parts."""
    body = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}]}
    async with raw_upstream(replying(json.dumps(body))) as upstream:
        p = build("gemini", upstream.url, api_key_env=None, stream=False)
        try:
            return await events(p.generate(HELLO))
        finally:
            await p.aclose()


async def test_calls_in_an_answer_keep_their_ids_or_get_ours_in_order():
    call = {"name": "get_weather", "args": {"city": "Paris"}}
    parts = [{"functionCall": {**call, "id": "fc-1"}, "thoughtSignature": "sig-1"},
             {"functionCall": call}, {"functionCall": call}]  # fmt: skip
    got = await every_event(parts, "OTHER")
    calls = [e for e in got if isinstance(e, ToolCallDelta)]
    assert [c.index for c in calls] == [0, 1, 2]
    assert calls[0].id == "fc-1" and calls[0].signature is not None
    assert calls[0].signature.endswith("sig-1") and "gemini-test" in calls[0].signature
    assert [c.signature for c in calls[1:]] == [None, None]
    for made in calls[1:]:
        assert re.fullmatch(r"call_gw_[0-9a-f]{16}", made.id)
    assert calls[1].id != calls[2].id
    assert calls[0].arguments == '{"city": "Paris"}'
    # Calls are a reply: an unknown finish reason after them is a plain stop.
    assert isinstance(got[-1], Finished) and got[-1].finish_reason == "stop"


async def test_thoughts_are_shown_only_when_thinking_was_asked():
    parts = [{"text": "Pondering.", "thought": True}, {"text": "Hi"}]
    got = await every_event(parts, "STOP")
    assert not any(isinstance(e, ReasoningDelta) for e in got)
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["Hi"]


async def test_a_stream_line_over_the_providers_bound_fails_it():
    long = json.dumps({"candidates": [candidate("x" * 2000)]})

    async def handler(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + f"data: {long}\n\n".encode())

    async with raw_upstream(handler) as upstream:
        p = build("gemini", upstream.url, api_key_env=None, stream=True, max_line_bytes=1024)
        try:
            with pytest.raises(UpstreamError) as failed:
                await events(p.generate(HELLO))
        finally:
            await p.aclose()
    assert "1024" in failed.value.message


async def test_a_malformed_usage_report_at_a_streams_end_is_logged_by_provider(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.WARNING)
    got = await gemini(reply(promptTokenCount="many"), stream=True)
    assert got.text == "Hi" and got.finished.counts is None
    assert any(
        r.getMessage().startswith("gemini-test: unusable usage report (promptTokenCount")
        for r in caplog.records
    )


def test_the_calls_of_an_earlier_turn_and_their_results_as_gemini_takes_them():
    calls = (ToolCall("c1", "get_weather", '{"city": "Paris"}'), ToolCall("c2", "get_time", ""),
             ToolCall("call_gw_0123456789abcdef", "get_date", "not json"))  # fmt: skip
    request = GenerationRequest(messages=(
        Message("user", "Weather?"), Message("assistant", "", tool_calls=calls),
        Message("tool", "Sunny.", tool_call_id="c1"),
        Message("tool", "Noon.", tool_call_id="call_gw_0123456789abcdef"),
        Message("tool", "Late.", tool_call_id="unknown-call"),
    ))  # fmt: skip
    p = build("gemini", "http://127.0.0.1:9", api_key_env=None)
    user, model_turn, results = p.body(request)["contents"]
    assert [part["functionCall"] for part in model_turn["parts"]] == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"},
        {"name": "get_time", "args": {}, "id": "c2"},
        {"name": "get_date", "args": {}},  # an id the gateway made up is not Gemini's
    ]
    # Only a turn's first call gets Gemini's documented stand-in for a missing signature.
    signatures = [{k: v for k, v in p.items() if k != "functionCall"} for p in model_turn["parts"]]
    assert signatures == [{"thoughtSignature": "skip_thought_signature_validator"}, {}, {}]
    assert [part["functionResponse"] for part in results["parts"]] == [
        {"name": "get_weather", "response": {"result": "Sunny."}, "id": "c1"},
        {"name": "get_date", "response": {"result": "Noon."}},
        {"name": "unknown-call", "response": {"result": "Late."}, "id": "unknown-call"},
    ]


async def test_without_a_key_none_is_sent_and_a_models_path_is_escaped():
    async with raw_upstream(replying(reply())) as upstream:
        p = build("gemini", upstream.url, api_key_env=None, stream=False,
                  model="tunedModels/my model")  # fmt: skip
        try:
            await events(p.generate(HELLO))
        finally:
            await p.aclose()
    (seen,) = upstream.requests
    assert "x-goog-api-key" not in {k.lower() for k in seen.headers}
    assert seen.path == "/v1beta/models/tunedModels%2Fmy%20model:generateContent"


def gemini_body(**request: Any) -> dict[str, Any]:
    p = build("gemini", "http://127.0.0.1:9", api_key_env=None)
    return p.body(GenerationRequest(**{"messages": HELLO.messages, **request}))


def test_every_sampling_field_under_geminis_name():
    config = gemini_body(
        temperature=0.5, top_p=0.9, top_k=40, max_tokens=64, seed=7,
        presence_penalty=0.1, frequency_penalty=0.2,
    )["generationConfig"]  # fmt: skip
    assert config == {"temperature": 0.5, "topP": 0.9, "topK": 40, "maxOutputTokens": 64,
                      "seed": 7, "presencePenalty": 0.1, "frequencyPenalty": 0.2}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "config"),
    [
        (ResponseFormat("json_object"), {"responseMimeType": "application/json"}),
        (ResponseFormat("json_schema"), {"responseMimeType": "application/json"}),
        (ResponseFormat("json_schema", "City", {"type": "object"}),
         {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object"}}),
    ],
)  # fmt: skip
def test_a_response_format_with_its_schema_only_when_one_is_given(
    given: ResponseFormat, config: dict[str, Any]
):
    assert gemini_body(response_format=given)["generationConfig"] == config


@pytest.mark.parametrize(
    ("thinking", "effort", "config"),
    [
        (Thinking("enabled", 0), None, {"thinkingBudget": -1, "includeThoughts": True}),
        (Thinking("enabled", 2048), None, {"thinkingBudget": 2048, "includeThoughts": True}),
        (Thinking("disabled", effort="low"), None, {"thinkingLevel": "low"}),
        (None, "extreme", {"thinkingLevel": "high"}),
        (None, None, None),
    ],
)  # fmt: skip
def test_thinking_as_a_budget_or_a_level(
    thinking: Thinking | None, effort: str | None, config: dict[str, Any] | None
):
    body = gemini_body(thinking=thinking, reasoning_effort=effort)
    assert (body.get("generationConfig") or {}).get("thinkingConfig") == config


def test_a_tools_description_and_parameters_only_when_it_has_them():
    tools = (ToolSpec("bare"), ToolSpec("full", "Does it all.", {"type": "object"}))
    body = gemini_body(tools=tools)
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "bare"},
        {"name": "full", "description": "Does it all.", "parametersJsonSchema": {"type": "object"}},
    ]}]  # fmt: skip
    assert "toolConfig" not in gemini_body(tool_choice="required")


def test_instructions_of_both_roles_are_the_system_instruction_and_turns_merge():
    body = gemini_body(messages=(
        Message("system", "Be brief."), Message("developer", "Use French."),
        Message("user", "Hi."), Message("assistant", ""), Message("user", "Well?"),
    ))  # fmt: skip
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief.\n\nUse French."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi."}, {"text": "Well?"}]}]


@pytest.mark.parametrize("prompt", ["Once upon a time", ""])
def test_a_text_completions_prompt_is_the_one_user_turn(prompt: str):
    p = build("gemini", "http://127.0.0.1:9", api_key_env=None)
    body = p.body(GenerationRequest(prompt=prompt))
    assert body["contents"] == [{"role": "user", "parts": [{"text": prompt}]}]
