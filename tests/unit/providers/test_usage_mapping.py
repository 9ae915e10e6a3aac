"""Each adapter's usage report -> the gateway's TokenCounts, on the adapters' own
mapping functions, with reports built by the providers' SDK types (openai, anthropic,
google-genai) or checked against botocore's Bedrock model, as the upstreams write them:
every field, each absent or null, and each one malformed (named in the refusal).
The same reports read from real answers are in tests/integration/upstreams; these run
in milliseconds, for each mutant too."""

from __future__ import annotations

import json
import logging
from typing import Any

import botocore.session
import pytest
from anthropic.types import CacheCreation, Usage
from google.genai import types as genai
from openai.types import CompletionUsage
from openai.types.completion_usage import CompletionTokensDetails, PromptTokensDetails
from openai.types.responses import ResponseUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from server.base.config import ProviderConfig
from server.base.embedding import EmbeddingRequest, Embeddings
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import GenerationRequest, Message, TokenCounts
from server.providers import anthropic, bedrock, gemini, openai, openai_responses, registry
from server.providers.http import ProtocolViolation, count, plausible, streamed_counts
from server.providers.tgi import TgiProvider, _int_header
from server.providers.vertex import VertexGeminiProvider
from tests.support.faults import RawRequest, http_response, raw_upstream
from tests.support.upstreams.config import provider

REQUEST = GenerationRequest(messages=(Message("user", "Say hello. " * 200),), max_tokens=500)


def refused(mapping: Any, usage: Any, what: str, value: Any = -1) -> None:
    """`mapping(usage)` refuses `value` and names the field `what`."""
    with pytest.raises(ProtocolViolation) as caught:
        mapping(usage)
    assert str(caught.value) == f"{what} is not a token count: {value}"


# -- the shared checks ------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 7, 12.0, 2**31 - 1])
def test_a_count_is_a_whole_number_from_zero_below_two_to_the_31(value):
    out = count(value, "n")
    assert out == value and type(out) is int


@pytest.mark.parametrize(
    ("value", "shown"),
    [(-1, "-1"), (2**31, "2147483648"), (1.5, "1.5"), (float("inf"), "inf"),
     (float("nan"), "nan"), ("12", "12"), (True, "True"), (None, "None"),
     ("x" * 50, "x" * 40)],
)  # fmt: skip
def test_anything_else_is_refused_naming_the_field_and_the_value_cut_at_40(value, shown):
    with pytest.raises(ProtocolViolation) as caught:
        count(value, "usage.n")
    assert str(caught.value) == f"usage.n is not a token count: {shown}"


def test_a_whole_answer_with_an_impossible_report_is_refused_and_a_possible_one_kept():
    fine = TokenCounts(20, 10)
    assert plausible(fine, REQUEST) is fine
    assert plausible(None, REQUEST) is None
    with pytest.raises(ProtocolViolation) as caught:
        plausible(TokenCounts(20, 10, reasoning_tokens=11), REQUEST)
    assert str(caught.value) == "implausible usage: more reasoning tokens than completion tokens"
    with pytest.raises(ProtocolViolation, match="^implausible usage: 900000 prompt tokens"):
        plausible(TokenCounts(900_000, 10), REQUEST)


def test_a_streamed_report_that_cannot_be_read_is_dropped_and_said_once(caplog):
    def broken() -> TokenCounts:
        return TokenCounts(count(-3, "usage.prompt_tokens"), 0)

    assert streamed_counts(lambda: TokenCounts(3, 4), "p1") == TokenCounts(3, 4)
    with caplog.at_level(logging.WARNING, logger="server.providers.http"):
        assert streamed_counts(broken, "usage-test-provider") is None
    said = [r.getMessage() for r in caplog.records if r.name == "server.providers.http"]
    assert said == [
        "usage-test-provider: unusable usage report (usage.prompt_tokens is not a token "
        "count: -3); counting tokens instead"
    ]


# -- OpenAI chat completions ---------------------------------------------------


def openai_usage(**fields: Any) -> dict[str, Any]:
    return CompletionUsage(**{"total_tokens": 0, **fields}).model_dump()


def test_openai_usage_with_its_details():
    usage = openai_usage(
        prompt_tokens=120, completion_tokens=45,
        prompt_tokens_details=PromptTokensDetails(
            cached_tokens=100, cache_write_tokens=15, audio_tokens=0
        ),
        completion_tokens_details=CompletionTokensDetails(reasoning_tokens=30, audio_tokens=0),
    )  # fmt: skip
    assert openai.counts(usage) == TokenCounts(
        120, 45, cached_tokens=100, reasoning_tokens=30, cache_write_tokens=15
    )


def test_openai_usage_without_details_or_completion_counts_zeros():
    # The SDK writes absent details as null; vLLM and others leave them out.
    assert openai.counts(openai_usage(prompt_tokens=9, completion_tokens=0)) == TokenCounts(9, 0)
    assert openai.counts({"prompt_tokens": 9}) == TokenCounts(9, 0)
    empty = openai_usage(
        prompt_tokens=9, completion_tokens=2, prompt_tokens_details=PromptTokensDetails(),
        completion_tokens_details=CompletionTokensDetails(),
    )  # fmt: skip
    assert openai.counts(empty) == TokenCounts(9, 2)


@pytest.mark.parametrize("usage", [None, {}, [], "12", {"completion_tokens": 3}])
def test_openai_without_a_prompt_count_has_no_usage(usage):
    assert openai.counts(usage) is None


def test_openai_usage_refusals_name_the_field():
    fine = {"prompt_tokens": 5, "completion_tokens": 1}
    refused(openai.counts, {**fine, "prompt_tokens": -1}, "usage.prompt_tokens")
    refused(openai.counts, {**fine, "completion_tokens": -1}, "usage.completion_tokens")
    refused(openai.counts, {**fine, "prompt_tokens_details": {"cached_tokens": -1}},
            "cached_tokens")  # fmt: skip
    refused(openai.counts, {**fine, "completion_tokens_details": {"reasoning_tokens": -1}},
            "reasoning_tokens")  # fmt: skip
    refused(openai.counts, {**fine, "prompt_tokens_details": {"cache_write_tokens": -1}},
            "cache_write_tokens")  # fmt: skip


# -- OpenAI responses ----------------------------------------------------------


def test_responses_usage_with_its_details():
    usage = ResponseUsage(
        input_tokens=300, output_tokens=80, total_tokens=380,
        input_tokens_details=InputTokensDetails(cached_tokens=200, cache_write_tokens=56),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=64),
    ).model_dump()  # fmt: skip
    assert openai_responses.counts(usage) == TokenCounts(
        300, 80, cached_tokens=200, reasoning_tokens=64, cache_write_tokens=56
    )


def test_responses_usage_without_details_counts_zeros():
    assert openai_responses.counts({"input_tokens": 4}) == TokenCounts(4, 0)
    nulls = {"input_tokens": 4, "output_tokens": 2, "input_tokens_details": None,
             "output_tokens_details": None}  # fmt: skip
    assert openai_responses.counts(nulls) == TokenCounts(4, 2)


@pytest.mark.parametrize("usage", [None, {}, ["input_tokens"], {"output_tokens": 3}])
def test_responses_without_an_input_count_has_no_usage(usage):
    assert openai_responses.counts(usage) is None


def test_responses_usage_refusals_name_the_field():
    fine = {"input_tokens": 5, "output_tokens": 1}
    mapping = openai_responses.counts
    refused(mapping, {**fine, "input_tokens": -1}, "usage.input_tokens")
    refused(mapping, {**fine, "output_tokens": -1}, "usage.output_tokens")
    refused(mapping, {**fine, "input_tokens_details": {"cached_tokens": -1}}, "cached_tokens")
    refused(mapping, {**fine, "input_tokens_details": {"cache_write_tokens": -1}},
            "cache_write_tokens")  # fmt: skip
    refused(mapping, {**fine, "output_tokens_details": {"reasoning_tokens": -1}},
            "reasoning_tokens")  # fmt: skip


# -- Anthropic -----------------------------------------------------------------


def anthropic_usage(**fields: Any) -> dict[str, Any]:
    return Usage(**fields).model_dump()


def test_anthropic_usage_adds_cache_reads_and_writes_to_the_prompt():
    usage = anthropic_usage(
        input_tokens=20, output_tokens=7, cache_read_input_tokens=1000,
        cache_creation_input_tokens=300,
        cache_creation=CacheCreation(ephemeral_1h_input_tokens=200, ephemeral_5m_input_tokens=100),
    )  # fmt: skip
    assert anthropic.counts(usage) == TokenCounts(
        1320, 7, cached_tokens=1000, cache_write_tokens=300, cache_write_1h_tokens=200
    )


def test_anthropic_hour_long_writes_never_exceed_the_writes():
    usage = anthropic_usage(
        input_tokens=20, output_tokens=7, cache_creation_input_tokens=50,
        cache_creation=CacheCreation(ephemeral_1h_input_tokens=80, ephemeral_5m_input_tokens=0),
    )  # fmt: skip
    assert anthropic.counts(usage) == TokenCounts(
        70, 7, cache_write_tokens=50, cache_write_1h_tokens=50
    )


def test_anthropic_usage_without_cache_fields_counts_zeros():
    assert anthropic.counts(anthropic_usage(input_tokens=3, output_tokens=2)) == TokenCounts(3, 2)
    assert anthropic.counts({"input_tokens": 3}) == TokenCounts(3, 0)
    odd_tiers = {"input_tokens": 3, "cache_creation_input_tokens": 4, "cache_creation": [4]}
    assert anthropic.counts(odd_tiers) == TokenCounts(7, 0, cache_write_tokens=4)


@pytest.mark.parametrize("usage", [None, {}, [3], {"output_tokens": 3}])
def test_anthropic_without_an_input_count_has_no_usage(usage):
    assert anthropic.counts(usage) is None


def test_anthropic_usage_refusals_name_the_field():
    fine = {"input_tokens": 5, "output_tokens": 1}
    refused(anthropic.counts, {**fine, "input_tokens": -1}, "usage.input_tokens")
    refused(anthropic.counts, {**fine, "output_tokens": -1}, "usage.output_tokens")
    refused(anthropic.counts, {**fine, "cache_read_input_tokens": -1}, "cache_read_input_tokens")
    refused(anthropic.counts, {**fine, "cache_creation_input_tokens": -1},
            "cache_creation_input_tokens")  # fmt: skip
    refused(anthropic.counts, {**fine, "cache_creation": {"ephemeral_1h_input_tokens": -1}},
            "cache_creation.ephemeral_1h")  # fmt: skip


# -- Gemini --------------------------------------------------------------------


def gemini_counts(**fields: Any) -> TokenCounts | None:
    usage = genai.GenerateContentResponseUsageMetadata(**fields)
    return gemini_read(usage.model_dump(mode="json", by_alias=True, exclude_none=True))


def gemini_read(usage: Any) -> TokenCounts | None:
    return gemini._Reading("gemini-test", REQUEST, usage=usage).counts()


def test_gemini_usage_counts_thoughts_as_completion_and_tool_prompts_as_prompt():
    out = gemini_counts(
        prompt_token_count=100, candidates_token_count=40, thoughts_token_count=25,
        tool_use_prompt_token_count=12, cached_content_token_count=64, total_token_count=177,
    )  # fmt: skip
    assert out == TokenCounts(112, 65, cached_tokens=64, reasoning_tokens=25)


def test_gemini_usage_with_only_a_prompt_count_counts_zeros():
    assert gemini_counts(prompt_token_count=8) == TokenCounts(8, 0)


@pytest.mark.parametrize("usage", [{}, {"candidatesTokenCount": 3}])
def test_gemini_without_a_prompt_count_has_no_usage(usage):
    assert gemini_read(usage) is None


def test_gemini_usage_refusals_name_the_field():
    fine = {"promptTokenCount": 5, "candidatesTokenCount": 1}
    for field in ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
                  "toolUsePromptTokenCount", "cachedContentTokenCount"):  # fmt: skip
        refused(gemini_read, {**fine, field: -1}, field)


# -- Bedrock -------------------------------------------------------------------

TOKEN_USAGE = botocore.session.get_session().get_service_model("bedrock-runtime")


def bedrock_read(usage: dict[str, Any]) -> TokenCounts | None:
    shape = TOKEN_USAGE.shape_for("TokenUsage")
    assert set(usage) <= set(shape.members), set(usage) - set(shape.members)
    reading = bedrock._Reading("bedrock-test", REQUEST)
    reading.usage = usage
    return reading.counts()


def test_bedrock_usage_adds_cache_reads_and_writes_to_the_prompt():
    details = TOKEN_USAGE.shape_for("CacheDetail")
    assert {"ttl", "inputTokens"} <= set(details.members)
    usage = {"inputTokens": 20, "outputTokens": 9, "totalTokens": 1429,
             "cacheReadInputTokens": 1000, "cacheWriteInputTokens": 400,
             "cacheDetails": [{"ttl": "5m", "inputTokens": 100}, {"ttl": "1h", "inputTokens": 250},
                              {"ttl": "1h", "inputTokens": 50}]}  # fmt: skip
    assert bedrock_read(usage) == TokenCounts(
        1420, 9, cached_tokens=1000, cache_write_tokens=400, cache_write_1h_tokens=300
    )


def test_bedrock_hour_long_writes_never_exceed_the_writes():
    usage = {"inputTokens": 2, "outputTokens": 1, "cacheWriteInputTokens": 10,
             "cacheDetails": [{"ttl": "1h", "inputTokens": 30}, "odd", {"ttl": "1h"}]}  # fmt: skip
    assert bedrock_read(usage) == TokenCounts(
        12, 1, cache_write_tokens=10, cache_write_1h_tokens=10
    )


def test_bedrock_usage_without_cache_fields_counts_zeros():
    assert bedrock_read({"inputTokens": 6, "outputTokens": 2}) == TokenCounts(6, 2)
    assert bedrock_read({"inputTokens": 6}) == TokenCounts(6, 0)
    assert bedrock_read({"inputTokens": 6, "cacheDetails": {"ttl": "1h"}}) == TokenCounts(6, 0)
    assert bedrock_read({}) is None
    assert bedrock_read({"outputTokens": 4}) is None


def test_bedrock_usage_refusals_name_the_field():
    fine = {"inputTokens": 5, "outputTokens": 1}
    for field in ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens"):
        refused(bedrock_read, {**fine, field: -1}, field)
    hour = {**fine, "cacheDetails": [{"ttl": "1h", "inputTokens": -1}]}
    refused(bedrock_read, hour, "cacheDetails.inputTokens")


# -- TGI -----------------------------------------------------------------------


def tgi() -> TgiProvider:
    entry = provider("tgi-test", "tgi", "http://127.0.0.1:9")
    built = registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")
    assert isinstance(built, TgiProvider)
    return built


@pytest.mark.parametrize(
    ("value", "number"),
    [("17", 17), (17, 17), ("0", 0), (None, None), ("", None), ("x", None), ("-1", None),
     (str(2**31), None), (str(2**31 - 1), 2**31 - 1), (float("inf"), None), ([1], None)],
)  # fmt: skip
def test_a_tgi_token_header_is_a_count_or_nothing(value, number):
    assert _int_header(value) == number


def test_tgi_counts_take_the_header_first_then_input_length_then_an_estimate():
    adapter = tgi()
    details = {"finish_reason": "length", "generated_tokens": 12, "input_length": 30}
    finished = adapter._finished(REQUEST, details, 25)
    assert (finished.finish_reason, finished.counts) == ("length", TokenCounts(25, 12))
    assert adapter._finished(REQUEST, details, None).counts == TokenCounts(30, 12)
    estimated = adapter._finished(REQUEST, {"finish_reason": "eos_token", "generated_tokens": 3},
                                  None)  # fmt: skip
    assert estimated.finish_reason == "stop"
    assert estimated.counts is not None and estimated.counts.completion_tokens == 3
    assert 500 <= estimated.counts.prompt_tokens <= 1500  # about 2,200 bytes of prompt
    assert adapter._finished(REQUEST, {"finish_reason": "novel"}, 4).finish_reason == "novel"
    assert adapter._finished(REQUEST, {"finish_reason": "stop_sequence"}, 4).counts is None


@pytest.mark.parametrize("details", [None, {}, {"finish_reason": ""}, ["finish_reason"]])
def test_tgi_details_without_a_finish_reason_are_refused(details):
    with pytest.raises(ProtocolViolation, match="^answer without details.finish_reason$"):
        tgi()._finished(REQUEST, details, 4)


def test_tgi_unreadable_counts_fail_a_whole_answer_but_only_drop_a_streamed_one(caplog):
    adapter = tgi()
    bad = {"finish_reason": "length", "generated_tokens": -2}
    refused(lambda d: adapter._finished(REQUEST, d, 4), bad, "details.generated_tokens", -2)
    with caplog.at_level(logging.WARNING, logger="server.providers.http"):
        finished = adapter._finished(REQUEST, bad, 4, streamed=True)
    assert (finished.finish_reason, finished.counts) == ("length", None)
    assert [r.getMessage() for r in caplog.records] == [
        "tgi-test: unusable usage report (details.generated_tokens is not a token count: -2);"
        " counting tokens instead"
    ]


# -- Vertex embeddings (the tokens counted per instance) -------------------------


async def vertex_embed(
    monkeypatch: pytest.MonkeyPatch, answer: Any, request: EmbeddingRequest, status: int = 200
) -> tuple[Embeddings, RawRequest]:
    """`request` embedded by a Vertex provider whose upstream answers `answer` (with
    `status`); what it gave back and the request the upstream saw."""
    monkeypatch.setenv("VERTEX_UNIT_TOKEN", "ya29.unit-token")

    async def reply(seen: RawRequest, writer: Any) -> None:
        writer.write(http_response(json.dumps(answer), status=status))

    async with raw_upstream(reply) as upstream:
        entry = provider("vertex-test", "vertex", upstream.url, project="proj-1",
                         location="europe-west4", api_key_env=None, token_env="VERTEX_UNIT_TOKEN",
                         embedding_model="text-embedding-005")  # fmt: skip
        built = registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")
        assert isinstance(built, VertexGeminiProvider)
        try:
            return await built.embed(request), upstream.requests[0]
        finally:
            await built.aclose()


def prediction(values: list[float], tokens: Any = None) -> dict[str, Any]:
    statistics = {"truncated": False} if tokens is None else {"truncated": False,
                                                              "token_count": tokens}  # fmt: skip
    return {"embeddings": {"statistics": statistics, "values": values}}


async def test_vertex_embeddings_count_the_tokens_of_every_instance(monkeypatch):
    answer = {"predictions": [prediction([0.5, 1], 6), prediction([2, -1.5], 4.0)]}
    request = EmbeddingRequest(("one", "two"), dimensions=2)
    out, seen = await vertex_embed(monkeypatch, answer, request)
    assert out == Embeddings(((0.5, 1.0), (2.0, -1.5)), 10)
    assert seen.path == ("/v1/projects/proj-1/locations/europe-west4/publishers/google/models/"
                         "text-embedding-005:predict")  # fmt: skip
    assert seen.method == "POST" and seen.headers["authorization"] == "Bearer ya29.unit-token"
    assert seen.json() == {"instances": [{"content": "one"}, {"content": "two"}],
                           "parameters": {"outputDimensionality": 2}}  # fmt: skip


async def test_vertex_embeddings_without_every_count_have_none(monkeypatch):
    answer = {"predictions": [prediction([1.0], 6), prediction([2.0])]}
    out, seen = await vertex_embed(monkeypatch, answer, EmbeddingRequest(("a", "b")))
    assert out == Embeddings(((1.0,), (2.0,)), None)
    assert seen.json() == {"instances": [{"content": "a"}, {"content": "b"}]}
    answer = {"predictions": [{"embeddings": {"values": [3.0]}}]}
    assert (await vertex_embed(monkeypatch, answer, EmbeddingRequest(("a",))))[0] == (
        Embeddings(((3.0,),), None)
    )


@pytest.mark.parametrize(
    ("answer", "why"),
    [({"predictions": [prediction([1.0], -1)]},
      "statistics.token_count is not a token count: -1"),
     ({"predictions": [prediction([1.0], 1), prediction([1.0], 1)]},
      "predictions do not match the inputs"),
     ({"predictions": {"embeddings": {}}}, "predictions do not match the inputs"),
     ({}, "predictions do not match the inputs"),
     ({"predictions": [{"values": [1.0]}]}, "malformed")],
)  # fmt: skip
async def test_a_vertex_embedding_answer_that_cannot_be_read_is_a_broken_answer(
    monkeypatch, answer, why
):
    with pytest.raises(UpstreamError) as caught:
        await vertex_embed(monkeypatch, answer, EmbeddingRequest(("a",)))
    assert caught.value == UpstreamError(
        f"vertex-test: malformed answer ({why})", {"provider": "vertex-test"},
        upstream_answered=True,
    )  # fmt: skip


async def test_vertex_embeds_text_only(monkeypatch):
    with pytest.raises(UpstreamRejected) as caught:
        await vertex_embed(monkeypatch, {}, EmbeddingRequest(("a", (1, 2))))
    assert caught.value == UpstreamRejected(
        "input: vertex-test (Vertex) embeds text, not token ids",
        {"provider": "vertex-test", "field": "input"},
    )


async def test_a_vertex_embedding_refusal_names_the_provider(monkeypatch):
    said = {"error": {"code": 400, "message": "Text too long", "status": "INVALID_ARGUMENT"}}
    with pytest.raises(UpstreamRejected) as caught:
        await vertex_embed(monkeypatch, said, EmbeddingRequest(("a",)), status=400)
    assert caught.value == UpstreamRejected(
        "vertex-test: upstream answered HTTP 400: Text too long",
        {"provider": "vertex-test", "upstream_status": "400"},
    )
