"""Provider adapters against fake upstreams on loopback: wire formats, usage, errors.

Core-level: the adapters are driven directly, with no gateway transport in between.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from server.application.pipeline.catalog import Upstream
from server.application.pipeline.dispatch import open_stream
from server.base.config import ConfigError, ModelConfig, ProviderConfig
from server.base.errors import UpstreamError, UpstreamRejected
from server.base.generation import (
    DocumentPart,
    GenerationRequest,
    Message,
    Provider,
    ResponseFormat,
    TextDelta,
    TextPart,
    TokenCounts,
    TokenLogprob,
    ToolCall,
    ToolSpec,
    TopLogprob,
)
from server.providers import registry
from tests.support.collected import collect
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import (
    TEXT,
    FakeUpstream,
    Fault,
    Usage,
    refused_url,
    serving,
)
from tests.support.upstreams.bedrock import BedrockWire
from tests.support.upstreams.checks import KEY
from tests.support.upstreams.config import provider
from tests.support.upstreams.gemini import GeminiWire
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.tgi import TgiWire

WIRES = {"openai": OpenAIWire, "anthropic": AnthropicWire, "tgi": TgiWire, "gemini": GeminiWire,
         "bedrock": BedrockWire}  # fmt: skip
CHAT = GenerationRequest(
    messages=(Message("system", "Be brief."), Message("user", "Say hello.")), max_tokens=64
)
PROMPT = GenerationRequest(prompt="Say hello.", max_tokens=64)
WHOLE = "".join(TEXT)


def build(adapter: str, url: str, **params: Any) -> Provider:
    entry = provider(f"{adapter}-test", adapter, url, **params)
    return registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")


async def events(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


@pytest.fixture(params=["openai", "anthropic", "tgi", "gemini", "bedrock"])
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[True, False], ids=["stream", "unary"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(scope="module")
async def servers() -> AsyncIterator[dict[str, FakeUpstream]]:
    """One fake server per wire format for the whole module (starting one costs ~0.2s)."""
    async with (
        serving(OpenAIWire()) as openai,
        serving(AnthropicWire()) as anthropic,
        serving(TgiWire()) as tgi,
        serving(GeminiWire()) as gemini,
        serving(BedrockWire()) as bedrock,
    ):
        yield {"openai": openai, "anthropic": anthropic, "tgi": tgi, "gemini": gemini,
               "bedrock": bedrock}  # fmt: skip


@pytest.fixture
def upstream(adapter: str, servers: dict[str, FakeUpstream]) -> FakeUpstream:
    return fresh(servers[adapter])


def fresh(fake: FakeUpstream) -> FakeUpstream:
    fake.faults, fake.default, fake.usage = [], Fault(), Usage()
    fake.seen.clear()
    fake.disconnects.clear()
    return fake


async def test_whole_answer_chat_and_prompt(adapter: str, stream: bool, upstream: FakeUpstream):
    upstream.usage = Usage(prompt_tokens=30)
    p = build(adapter, upstream.url, stream=stream)
    try:
        for request in (CHAT, PROMPT):
            got = await collect(p.generate(request))
            assert got.text == WHOLE
            assert got.finished is not None and got.finished.finish_reason == "stop"
            assert got.finished.counts == TokenCounts(30, len(TEXT))
            if stream:
                assert len(got.text_parts) == len(TEXT), "streamed token by token"
    finally:
        await p.aclose()


async def test_max_tokens_gives_length(adapter: str, stream: bool, upstream: FakeUpstream):
    p = build(adapter, upstream.url, stream=stream)
    try:
        got = await collect(p.generate(GenerationRequest(prompt="x", max_tokens=3)))
    finally:
        await p.aclose()
    assert got.text == "".join(TEXT[:3])
    assert got.finished is not None and got.finished.finish_reason == "length"


async def test_openai_request_shape_and_cached_reasoning_usage(stream: bool, servers):
    fake = fresh(servers["openai"])
    fake.usage = Usage(prompt_tokens=100, cached_tokens=60, reasoning_tokens=7)
    p = build("openai", fake.url, stream=stream, headers={"OpenAI-Organization": "org-1"})
    try:
        got = await collect(p.generate(CHAT))
        await collect(p.generate(PROMPT))
    finally:
        await p.aclose()
    assert got.finished is not None
    assert got.finished.counts == TokenCounts(100, len(TEXT) + 7, 60, 7)
    chat, text = fake.seen
    assert chat.path == "/v1/chat/completions" and text.path == "/v1/completions"
    assert chat.body["model"] == "gpt-fake"
    assert chat.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert text.body["prompt"] == "Say hello."
    assert chat.headers["openai-organization"] == "org-1"
    if stream:
        assert chat.body["stream_options"] == {"include_usage": True}
    else:
        assert "stream" not in chat.body


async def test_anthropic_request_shape_and_cache_usage(stream: bool, servers):
    fake = fresh(servers["anthropic"])
    fake.usage = Usage(prompt_tokens=100, cached_tokens=60, cache_write_tokens=25)
    p = build("anthropic", fake.url, stream=stream)
    try:
        got = await collect(p.generate(CHAT))
        await collect(p.generate(GenerationRequest(prompt="Hi")))
    finally:
        await p.aclose()
    # Anthropic sent input_tokens=15 (cache excluded); the gateway counts all 100.
    assert got.finished is not None
    assert got.finished.counts == TokenCounts(100, len(TEXT), 60, 0, 25)
    chat, text = fake.seen
    assert chat.path == "/v1/messages"
    assert chat.body["system"] == "Be brief."
    assert chat.body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert chat.headers["anthropic-version"] == "2023-06-01"
    assert text.body["messages"] == [{"role": "user", "content": "Hi"}]
    assert text.body["max_tokens"] == 1024, "max_tokens is required by the Messages API"


PDF = "JVBERi0xLjQK"
PDF_PARTS = {
    "openai": lambda name: {"type": "file", "file": {
        "filename": name, "file_data": f"data:application/pdf;base64,{PDF}"}},
    "anthropic": lambda name: {"type": "document", "source": {
        "type": "base64", "media_type": "application/pdf", "data": PDF}},
}  # fmt: skip


@pytest.mark.parametrize("fmt", PDF_PARTS)
async def test_a_pdf_reaches_the_upstream_in_its_own_form(fmt: str, servers):
    fake = fresh(servers[fmt])
    p = build(fmt, fake.url)
    turns = [
        (DocumentPart("application/pdf", PDF, "report.pdf"), "report.pdf"),
        (DocumentPart("application/pdf", PDF), "document.pdf"),  # untitled
    ]
    try:
        for document, _ in turns:
            message = Message("user", "", parts=(TextPart("Sum it up."), document))
            await collect(p.generate(GenerationRequest(messages=(message,), max_tokens=64)))
    finally:
        await p.aclose()
    assert fake.problems == []
    for seen, (_, filename) in zip(fake.seen, turns, strict=True):
        assert seen.body["messages"][0]["content"] == [
            {"type": "text", "text": "Sum it up."},
            PDF_PARTS[fmt](filename),
        ]


async def test_a_turns_cache_mark_reaches_anthropic_with_its_lifetime(servers):
    fake = fresh(servers["anthropic"])
    p = build("anthropic", fake.url)
    turns = (Message("user", "Long document.", cache="1h"), Message("assistant", "Read."),
             Message("user", "Question?", cache="5m"))  # fmt: skip
    try:
        await collect(p.generate(GenerationRequest(messages=turns, max_tokens=64)))
    finally:
        await p.aclose()
    assert fake.problems == []
    sent = [m["content"] for m in fake.seen[0].body["messages"]]
    assert sent == [
        [{"type": "text", "text": "Long document.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "Read.",
        [{"type": "text", "text": "Question?", "cache_control": {"type": "ephemeral"}}],
    ]  # fmt: skip


async def test_anthropic_turns_system_text_and_a_format_tool(servers):
    fake = fresh(servers["anthropic"])
    p = build("anthropic", fake.url)
    merged = (Message("system", "Be brief."), Message("developer", "Be kind."),
              Message("user", "One."), Message("user", "Two."))  # fmt: skip
    cached = (Message("system", "Long rules.", cache="1h"), Message("developer", "Short."),
              Message("user", "Hi."))  # fmt: skip
    shaped = GenerationRequest(messages=(Message("user", "Pick."),), max_tokens=64,
                               response_format=ResponseFormat("json_schema", "pick", {"type": "object"}))  # fmt: skip
    try:
        for turns in (merged, cached):
            await collect(p.generate(GenerationRequest(messages=turns, max_tokens=64)))
        await collect(p.generate(shaped))
    finally:
        await p.aclose()
    assert fake.problems == []
    first, second, third = (s.body for s in fake.seen)
    assert first["system"] == "Be brief.\n\nBe kind."
    # Consecutive user turns merge into one turn of blocks.
    assert first["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "One."}, {"type": "text", "text": "Two."}]}]  # fmt: skip
    assert second["system"] == [
        {"type": "text", "text": "Long rules.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        {"type": "text", "text": "Short."},
    ]  # fmt: skip
    assert third["tools"] == [{"name": "pick", "description": "Answers in this JSON shape.",
                               "input_schema": {"type": "object"}}]  # fmt: skip


ANTHROPIC_CHOICES = [
    # tool_choice, parallel_tool_calls, response_format, what Anthropic gets
    ("auto", None, None, {"type": "auto"}),
    ("none", None, None, {"type": "none"}),
    ("required", None, None, {"type": "any"}),
    (None, False, None, {"type": "auto", "disable_parallel_tool_use": True}),
    (None, None, ResponseFormat("json_object"), {"type": "tool", "name": "json_object"}),
]


@pytest.mark.parametrize("choice, parallel, fmt, expected", ANTHROPIC_CHOICES)
async def test_tool_choices_and_formats_in_anthropics_terms(choice, parallel, fmt, expected,
                                                            servers):  # fmt: skip
    fake = fresh(servers["anthropic"])
    p = build("anthropic", fake.url, stream=False)
    request = GenerationRequest(messages=(Message("user", ""), Message("user", "Weather?")),
                                tools=(ToolSpec("get_weather"),), tool_choice=choice,
                                parallel_tool_calls=parallel, response_format=fmt,
                                max_tokens=64)  # fmt: skip
    try:
        await events(p.generate(request))
        await collect(p.generate(PROMPT))
    finally:
        await p.aclose()
    assert fake.problems == []
    sent, text = (s.body for s in fake.seen)
    assert sent.get("tool_choice") == expected
    # A tool without a schema takes any object; no description is sent as none.
    assert sent["tools"][0] == {"name": "get_weather",
                                "input_schema": {"type": "object", "properties": {}}}  # fmt: skip
    if fmt is not None:
        assert sent["tools"][1]["input_schema"] == {"type": "object"}
    # An empty turn before another of the same role adds no empty block.
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Weather?"}]}]
    assert "system" not in text and text["messages"] == [{"role": "user", "content": "Say hello."}]


async def test_tool_calls_without_json_arguments_reach_anthropic_as_empty_input(servers):
    fake = fresh(servers["anthropic"])
    p = build("anthropic", fake.url)
    calls = (ToolCall("toolu_1", "f", ""), ToolCall("toolu_2", "g", "not json"),
             ToolCall("toolu_3", "h", '{"a": 1}'))  # fmt: skip
    history = (
        Message("user", "Go."),
        Message("assistant", "", tool_calls=calls),
        *(Message("tool", "done", tool_call_id=c.id) for c in calls),
    )
    try:
        await collect(p.generate(GenerationRequest(messages=history, max_tokens=64)))
    finally:
        await p.aclose()
    assert fake.problems == []
    sent = fake.seen[0].body["messages"][1]["content"]
    assert [(b["id"], b["input"]) for b in sent] == [
        ("toolu_1", {}), ("toolu_2", {}), ("toolu_3", {"a": 1})]  # fmt: skip


@pytest.mark.parametrize("top", [None, 2])
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completion"])
async def test_openai_logprobs_come_back_token_by_token(stream: bool, chat: bool, top, servers):
    fake = fresh(servers["openai"])
    p = build("openai", fake.url, stream=stream)
    request = dataclasses.replace(CHAT if chat else PROMPT, logprobs=True, top_logprobs=top)
    try:
        got = [e.logprobs for e in await events(p.generate(request)) if isinstance(e, TextDelta)]
    finally:
        await p.aclose()
    assert fake.problems == []
    sent = fake.seen[0].body
    if chat:
        assert (sent["logprobs"], sent.get("top_logprobs")) == (True, top)
    else:
        assert sent["logprobs"] == (top or 0), "legacy completions: how many alternatives"
    tokens = [lp for part in got for lp in part]
    alternatives = (top or 1) - 1
    assert tokens == [
        TokenLogprob(t, -0.25 * (i + 1), (
            (TopLogprob(t, -0.25 * (i + 1)),
             *(TopLogprob(f"alt{j}", -0.25 * (i + 1) - 1 - j) for j in range(alternatives)))
            if top else ()
        ))
        for i, t in enumerate(TEXT)
    ]  # fmt: skip
    if stream:
        assert all(len(part) == 1 for part in got), "each streamed token with its own"


async def test_openai_messages_keep_content_only_where_it_was_given(servers):
    fake = fresh(servers["openai"])
    p = build("openai", fake.url)
    calls = (ToolCall("call_1", "f", "{}"),)
    history = (
        Message("user", "Go."),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "done", tool_call_id="call_1"),
        Message("assistant", "Checking again.", tool_calls=(ToolCall("call_2", "f", "{}"),)),
        Message("tool", "done", tool_call_id="call_2"),
        Message("user", ""),
    )
    try:
        await collect(p.generate(GenerationRequest(messages=history)))
    finally:
        await p.aclose()
    assert fake.problems == []
    sent = fake.seen[0].body["messages"]
    assert "content" not in sent[1], "a turn of tool calls only has no content"
    assert sent[3]["content"] == "Checking again."
    assert sent[5] == {"role": "user", "content": ""}


async def test_openai_tools_and_cache_fields_only_as_given(servers):
    fake = fresh(servers["openai"])
    p = build("openai", fake.url, max_tokens_field="max_completion_tokens")
    tools = (ToolSpec("f"), ToolSpec("g", "Gets.", {"type": "object"}, strict=True))
    given = GenerationRequest(messages=(Message("user", "Hi"),), tools=tools,
                              prompt_cache_key="k1", store=False, service_tier="flex",
                              safety_identifier="u-hash")  # fmt: skip
    try:
        await events(p.generate(given))
        await events(p.generate(GenerationRequest(messages=(Message("user", "Hi"),))))
        await collect(p.generate(PROMPT))  # completions take max_tokens under that name
    finally:
        await p.aclose()
    assert fake.problems == []
    with_all, plain, completion = (s.body for s in fake.seen)
    assert with_all["tools"] == [
        {"type": "function", "function": {"name": "f"}},
        {"type": "function", "function": {"name": "g", "description": "Gets.",
                                          "parameters": {"type": "object"}, "strict": True}},
    ]  # fmt: skip
    cache_fields = ("prompt_cache_key", "store", "service_tier", "safety_identifier")
    assert {k: with_all[k] for k in cache_fields} == {
        "prompt_cache_key": "k1", "store": False, "service_tier": "flex",
        "safety_identifier": "u-hash"}  # fmt: skip
    assert not set(cache_fields) & set(plain)
    assert completion["max_tokens"] == 64 and "max_completion_tokens" not in completion


async def test_tgi_request_shape(stream: bool, servers):
    fake = fresh(servers["tgi"])
    p = build("tgi", fake.url, stream=stream)
    try:
        await collect(p.generate(GenerationRequest(prompt="Hi", temperature=0, stop=("\n",))))
        await collect(p.generate(CHAT))
        # TGI takes top_p strictly between 0 and 1: the ends mean no nucleus sampling.
        for top_p in (0.0, 1.0, 0.5):
            await collect(p.generate(GenerationRequest(prompt="Hi", top_p=top_p, temperature=0.7)))
        tool_turn = (Message("user", "Weather?"), Message("tool", "Sunny.", tool_call_id="c1"))
        await collect(p.generate(GenerationRequest(messages=tool_turn)))
    finally:
        await p.aclose()
    assert fake.problems == []
    text, chat, *nucleus, tools = fake.seen
    assert [s.body["parameters"].get("top_p") for s in nucleus] == [None, None, 0.5]
    assert nucleus[0].body["parameters"]["temperature"] == 0.7
    assert nucleus[0].body["parameters"]["do_sample"] is True
    assert tools.body["inputs"] == "User: Weather?\n\ntool: Sunny.\n\nAssistant:"
    assert text.path == ("/generate_stream" if stream else "/generate")
    assert text.body == {
        "inputs": "Hi",
        "parameters": {"max_new_tokens": 256, "details": True, "do_sample": False, "stop": ["\n"]},
    }
    assert chat.body["inputs"] == "System: Be brief.\n\nUser: Say hello.\n\nAssistant:"


async def test_api_key_from_env_is_sent_and_never_in_errors(monkeypatch, servers):
    secret = "sk-test-secret-value-123456"
    monkeypatch.setenv("FAKE_UPSTREAM_KEY", secret)
    fake = fresh(servers["openai"])
    p = build("openai", fake.url, api_key_env="FAKE_UPSTREAM_KEY")
    wire = fake.wire
    assert isinstance(wire, OpenAIWire)
    wire.key = secret
    try:
        await collect(p.generate(CHAT))
        fake.faults = [Fault("status", 401)]
        with pytest.raises(UpstreamError) as info:
            await collect(p.generate(CHAT))
    finally:
        await p.aclose()
        wire.key = KEY
    assert fake.seen[0].headers["authorization"] == f"Bearer {secret}"
    assert info.value.retryable and info.value.upstream_answered
    assert secret not in str(info.value) and "api_key_env" in str(info.value)


@pytest.mark.parametrize("adapter_name", ["openai", "tgi"])
async def test_a_provider_without_a_key_sends_no_authorization(adapter_name: str, servers):
    fake = fresh(servers[adapter_name])
    wire = fake.wire
    key, wire.key = wire.key, None  # type: ignore[attr-defined]
    p = build(adapter_name, fake.url, api_key_env=None)
    try:
        await collect(p.generate(CHAT))
    finally:
        await p.aclose()
        wire.key = key  # type: ignore[attr-defined]
    assert "authorization" not in fake.seen[0].headers


def test_missing_key_env_is_a_config_error(adapter: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("FAKE_UPSTREAM_KEY", raising=False)
    with pytest.raises(
        ConfigError, match=r"^models\[0\]\.providers\[0\]\.params\.api_key_env: .*not set"
    ):
        build(adapter, "http://127.0.0.1:1", api_key_env="FAKE_UPSTREAM_KEY")


async def test_a_retryable_failure_is_retried_on_the_same_provider(
    adapter: str, stream: bool, upstream: FakeUpstream
):
    entry = provider(f"{adapter}-test", adapter, upstream.url, stream=stream, max_retries=1,
                     backoff_s=0.01)  # fmt: skip
    config = ProviderConfig.model_validate(entry)
    p = registry.build(config, "models[0].providers[0]")
    only = ModelConfig(id="m", owned_by="test", created=0, providers=[config])
    upstream.faults = [Fault("status", 503)]
    try:
        _, events = await open_stream([Upstream(config, p, only)], CHAT, None, "m")
        got = await collect(events)
    finally:
        await p.aclose()
    assert got.text == WHOLE
    assert len(upstream.seen) == 2, "the 503, then the retry that answered"


def test_bad_params_name_the_field():
    with pytest.raises(ConfigError, match=r"params\.read_timeout_s"):
        build("openai", "http://127.0.0.1:1", read_timeout_s=-1)
    with pytest.raises(ConfigError, match=r"params\.api_key: Extra inputs"):
        build("tgi", "http://127.0.0.1:1", api_key="sk-inline")
    with pytest.raises(ConfigError, match=r"params\.base_url: must start with http"):
        build("openai", "ftp://x")


# -- faults: each one becomes the right gateway error --------------------------------

FAULTS: list[tuple[str, Fault, bool, bool]] = [
    # name, fault, retryable, upstream_answered
    ("500", Fault("status", 500), True, True),
    ("503", Fault("status", 503), True, True),
    ("429", Fault("status", 429, retry_after="2"), True, False),
    ("401", Fault("status", 401), True, True),
    ("403", Fault("status", 403), True, True),
    ("slow-headers", Fault("slow_headers", delay_s=2), True, False),
    ("slow-body", Fault("slow_body", delay_s=2), True, False),
    ("hang", Fault("hang"), True, False),
    ("malformed", Fault("malformed"), True, True),
    ("cut", Fault("cut", after_tokens=2), True, True),
    ("abort", Fault("abort", after_tokens=2), True, True),
]


@pytest.mark.parametrize("name,fault,retryable,answered", FAULTS, ids=[f[0] for f in FAULTS])
async def test_fault_maps_to_upstream_error(
    adapter: str, stream: bool, upstream: FakeUpstream, name, fault, retryable, answered
):
    upstream.default = fault
    p = build(adapter, upstream.url, stream=stream, read_timeout_s=0.2)
    try:
        with pytest.raises(UpstreamError) as info:
            await collect(p.generate(CHAT))
    finally:
        await p.aclose()
    err = info.value
    assert type(err) is UpstreamError
    assert err.retryable is retryable
    if name == "abort" or (name == "slow-body" and not stream):
        assert err.upstream_answered is True or err.upstream_answered is False
    else:
        assert err.upstream_answered is answered, err.message
    assert err.metadata["provider"] == f"{adapter}-test"
    if name == "429":
        assert err.retry_after_s == 2
    assert "Traceback" not in err.message


@pytest.mark.parametrize("status", [400, 413, 422])
async def test_request_caused_4xx_is_not_retryable(adapter, stream, status, upstream):
    fake = upstream
    fake.default = Fault("status", status)
    p = build(adapter, fake.url, stream=stream)
    try:
        with pytest.raises(UpstreamRejected) as info:
            await collect(p.generate(CHAT))
    finally:
        await p.aclose()
    assert not info.value.retryable and info.value.http_status == 400
    assert f"HTTP {status}" in info.value.message


async def test_connection_refused(adapter: str, stream: bool):
    p = build(adapter, refused_url(), stream=stream)
    try:
        with pytest.raises(UpstreamError, match="cannot connect") as info:
            await collect(p.generate(CHAT))
    finally:
        await p.aclose()
    assert info.value.retryable and not info.value.upstream_answered


async def test_stream_cut_yields_tokens_then_raises(adapter: str, upstream: FakeUpstream):
    """Tokens before the cut arrive; the end is an error, never a Finished."""
    upstream.default = Fault("cut", after_tokens=3)
    p = build(adapter, upstream.url)
    got: list[Any] = []
    try:
        with pytest.raises(UpstreamError, match="without"):
            async for event in p.generate(CHAT):
                got.append(event)
    finally:
        await p.aclose()
    assert got == [TextDelta(t) for t in TEXT[:3]]
