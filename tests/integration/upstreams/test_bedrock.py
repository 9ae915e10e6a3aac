"""The bedrock adapter against a strict fake of Bedrock's runtime (tests/support/
upstreams/bedrock.py) that verifies every SigV4 signature with its own implementation,
through the gateway and the `openai` SDK: Converse and ConverseStream (event-stream
framing), tools, guardrails, cache token usage, Bedrock's errors, Titan embeddings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from server.base.config import ProviderConfig
from server.providers import registry
from tests.support.gateways import API_KEY, openai_gateway, running_gateway
from tests.support.upstreams.base import TEXT, FakeUpstream, Usage, serving
from tests.support.upstreams.bedrock import (
    EMBEDDER,
    GUARDED,
    REASONING,
    SIGNATURE,
    BedrockWire,
    error,
    invalid,
)
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Gets the weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}  # fmt: skip
PATH = "/model/anthropic.claude-fake-v1:0"  # as the fake decodes it; sent escaped


def bedrock(url: str, provider_id: str = "bedrock", **params: Any) -> dict[str, Any]:
    return provider(provider_id, "bedrock", url, **params)


@pytest.fixture
def wire() -> BedrockWire:
    return BedrockWire()


@pytest.fixture
async def fake(wire: BedrockWire) -> AsyncIterator[FakeUpstream]:
    async with serving(wire) as upstream:
        yield upstream


async def test_converse_and_converse_stream_signed_and_named_as_bedrock_names_them(
    fake: FakeUpstream, wire: BedrockWire
):
    fake.usage = Usage(prompt_tokens=50, cached_tokens=30, cache_write_tokens=10)
    entry = bedrock(
        fake.url, guardrail_config={"guardrailIdentifier": "g-1", "guardrailVersion": "1"}
    )
    async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
        reply = await sdk.chat.completions.create(
            model="m", messages=[{"role": "system", "content": "Be brief."}, *HELLO],
            temperature=0.3, top_p=0.9, max_tokens=64, stop=["END"],
        )  # fmt: skip
        stream = await sdk.chat.completions.create(model="m", messages=HELLO, stream=True)
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert reply.choices[0].message.content == streamed == "".join(TEXT)
    assert fake.problems == [] and len(wire.verified) == 2
    assert reply.usage is not None and reply.usage.prompt_tokens == 50
    assert reply.usage.prompt_tokens_details.cached_tokens == 30  # type: ignore[union-attr]
    first = fake.seen[0]
    assert first.path == f"{PATH}/converse-stream"
    assert first.body["system"] == [{"text": "Be brief."}]
    assert first.body["messages"] == [{"role": "user", "content": [{"text": "Say hello."}]}]
    assert first.body["inferenceConfig"] == {
        "maxTokens": 64, "temperature": 0.3, "topP": 0.9, "stopSequences": ["END"]
    }  # fmt: skip
    assert first.body["guardrailConfig"] == {"guardrailIdentifier": "g-1", "guardrailVersion": "1"}
    assert first.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIA")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
async def test_a_tool_round_trip(stream: bool, fake: FakeUpstream):
    async with openai_gateway(with_models(model("m", bedrock(fake.url, stream=stream)))) as (
        sdk,
        _,
    ):
        first = await sdk.chat.completions.create(model="m", messages=HELLO, tools=[WEATHER])
        said = first.choices[0].message.model_dump(exclude_none=True)
        call = said["tool_calls"][0]
        answer = {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}
        second = await sdk.chat.completions.create(
            model="m", messages=[*HELLO, said, answer], tools=[WEATHER]
        )
    assert first.choices[0].finish_reason == "tool_calls"
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert second.choices[0].message.content == "".join(TEXT)
    assert fake.problems == []
    turns = fake.seen[-1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    uses = [b["toolUse"] for b in turns[1]["content"] if "toolUse" in b]
    assert uses == [{"toolUseId": call["id"], "name": "get_weather", "input": {"city": "Paris"}}]
    assert turns[2]["content"] == [
        {"toolResult": {"toolUseId": call["id"], "content": [{"text": "sunny"}]}}
    ]
    assert fake.seen[0].body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {
        "json": WEATHER["function"]["parameters"]  # type: ignore[index]
    }


async def test_a_session_token_is_signed_and_a_wrong_secret_refused(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("TEST_AWS_SESSION_TOKEN", "session-token-fake")
    async with serving(BedrockWire(session_token="session-token-fake")) as fake:
        entry = bedrock(fake.url, session_token_env="TEST_AWS_SESSION_TOKEN")
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            reply = await sdk.chat.completions.create(model="m", messages=HELLO)
    assert reply.choices[0].message.content == "".join(TEXT)
    assert fake.seen[0].headers["x-amz-security-token"] == "session-token-fake"
    async with (
        serving(BedrockWire(secret="another-secret")) as fake,
        openai_gateway(with_models(model("m", bedrock(fake.url)))) as (sdk, _),
    ):
        with pytest.raises(openai.APIStatusError) as failed:
            await sdk.chat.completions.create(model="m", messages=HELLO)
    assert failed.value.status_code == 502 and "InvalidSignatureException" in failed.value.message
    assert fake.problems == ["InvalidSignatureException"]


async def test_a_bedrock_api_key_goes_as_bearer():
    async with serving(BedrockWire(api_key=KEY)) as fake:
        entry = bedrock(fake.url, api_key_env="GATEWAY_TEST_UPSTREAM_KEY")
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            reply = await sdk.chat.completions.create(model="m", messages=HELLO)
    assert reply.choices[0].message.content == "".join(TEXT)
    assert fake.seen[0].headers["authorization"] == f"Bearer {KEY}"


async def test_a_guardrail_stop_is_a_content_filter_finish(fake: FakeUpstream):
    async with openai_gateway(with_models(model("m", bedrock(fake.url)))) as (sdk, _):
        reply = await sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"Tell me of {GUARDED}"}]
        )
    assert reply.choices[0].finish_reason == "content_filter"


@pytest.mark.parametrize(
    ("refusal", "status", "said"),
    [
        (invalid("messages.0.content: text too long"), 400, "text too long"),
        (error("AccessDeniedException", "You don't have access to the model.", 403), 502,
         "AccessDeniedException"),
        (error("ThrottlingException", "Too many requests, please wait.", 429), 503,
         "ThrottlingException"),
        (error("ModelNotReadyException", "Model is not ready.", 429), 503, "ModelNotReady"),
    ],
)  # fmt: skip
async def test_bedrocks_errors_are_mapped(refusal: Any, status: int, said: str):
    async with (
        serving(BedrockWire(fail_with=refusal)) as fake,
        openai_gateway(with_models(model("m", bedrock(fake.url)))) as (sdk, _),
    ):
        with pytest.raises(openai.APIStatusError) as failed:
            await sdk.chat.completions.create(model="m", messages=HELLO)
    assert failed.value.status_code == status, failed.value.message
    assert said in failed.value.message
    assert fake.problems == [refusal.why]


async def test_an_exception_event_mid_stream_fails_the_stream():
    async with (
        serving(BedrockWire(mid_stream="modelStreamErrorException")) as fake,
        openai_gateway(with_models(model("m", bedrock(fake.url)))) as (sdk, _),
    ):
        stream = await sdk.chat.completions.create(model="m", messages=HELLO, stream=True)
        got: list[str] = []
        with pytest.raises(openai.APIError, match="modelStreamErrorException"):
            async for chunk in stream:
                got.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(got) == "".join(TEXT[:2])


async def test_failover_from_bedrock_to_another_kind_of_upstream(wire: BedrockWire):
    wire.fail_with = error("ServiceUnavailableException", "Service unavailable.", 503)
    async with serving(wire) as fake, serving(OpenAIWire(), text=("From", " OpenAI")) as backup:
        data = with_models(model("m", bedrock(fake.url),
                                 provider("openai", "openai", backup.url, kind="backup")))  # fmt: skip
        async with openai_gateway(data) as (sdk, _):
            reply = await sdk.chat.completions.create(model="m", messages=HELLO)
    assert reply.choices[0].message.content == "From OpenAI"
    assert fake.problems == ["ServiceUnavailableException"]


async def test_titan_embeddings_by_invoke_model(fake: FakeUpstream):
    entry = bedrock(fake.url, embedding_model=EMBEDDER)
    async with openai_gateway(with_models(model("e", entry))) as (sdk, _):
        made = await sdk.embeddings.create(model="e", input=["one two", "three"], dimensions=4)
    assert [len(d.embedding) for d in made.data] == [4, 4]
    assert made.usage.prompt_tokens == 3
    assert fake.seen[0].path == "/model/amazon.titan-embed-text-v2:0/invoke"
    assert fake.seen[0].body == {"inputText": "one two", "dimensions": 4}
    assert fake.problems == []


# A tool loop with thinking on whose calling turn does not start with its reasoning.
LOOP = {
    "messages": [
        {"role": "user", "content": [{"text": "Weather?"}]},
        {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "sun"}]}}]},
    ],
    "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"messages": [{"role": "user", "content": [{"text": "x"}]}], "temperature": 1},
         "extraneous key [temperature]"),
        ({"messages": [{"role": "assistant", "content": [{"text": "x"}]}]}, "start with a user"),
        ({"messages": [{"role": "user", "content": [{"text": "x", "image": {}}]}]}, "exactly one"),
        ({"messages": [{"role": "user", "content": [{"text": "x"}]}],
          "inferenceConfig": {"max_tokens": 5}}, "extraneous key [max_tokens]"),
        ({"messages": [{"role": "user", "content": [
            {"text": "x"}, {"cachePoint": {"type": "default", "ttl": "2h"}}]}]}, "ttl"),
        ({"messages": [{"role": "user", "content": [
            {"text": "x"}, *[{"cachePoint": {"type": "default"}}] * 5]}]}, "maximum of 4"),
        (LOOP, "must start with a thinking block"),
        ({**LOOP, "messages": [LOOP["messages"][0], {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Changed.", "signature": SIGNATURE}}},
            *LOOP["messages"][1]["content"]]}, LOOP["messages"][2]]},
         "messages.1.content.0: Invalid `signature`"),
    ],
)  # fmt: skip
def test_the_fakes_field_checks_can_fail(body: dict[str, Any], why: str):
    refused = BedrockWire()._converse(body)
    assert refused is not None and refused.status == 400 and why in refused.body["message"]


async def test_the_messages_and_responses_dialects_reach_bedrock(fake: FakeUpstream):
    import anthropic

    async with running_gateway(with_models(model("m", bedrock(fake.url)))) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        messages = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
        responses = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with messages, responses:
            said = await messages.messages.create(
                model="m",
                max_tokens=64,
                system="Be brief.",
                messages=HELLO,  # type: ignore[arg-type]
            )
            answered = await responses.responses.create(
                model="m", input="Say hello.", instructions="Be brief.", max_output_tokens=32
            )
    assert said.content[0].text == "".join(TEXT)  # type: ignore[union-attr]
    assert answered.output_text == "".join(TEXT)
    assert fake.problems == []
    for seen in fake.seen:
        assert seen.body["system"] == [{"text": "Be brief."}]
    assert fake.seen[0].body["inferenceConfig"]["maxTokens"] == 64
    assert fake.seen[1].body["inferenceConfig"]["maxTokens"] == 32


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
async def test_reasoning_is_shown_when_thinking_is_asked_its_signature_sealed(
    stream: bool, fake: FakeUpstream, wire: BedrockWire
):
    import anthropic

    async with running_gateway(with_models(model("m", bedrock(fake.url, stream=stream)))) as gw:
        client = anthropic.AsyncAnthropic(
            base_url=f"http://127.0.0.1:{gw.http_port}", api_key=API_KEY, max_retries=0
        )
        async with client:
            thought = await client.messages.create(
                model="m", max_tokens=2048, messages=HELLO,  # type: ignore[arg-type]
                thinking={"type": "enabled", "budget_tokens": 1024},
            )  # fmt: skip
            wire.always_reasons = True  # as a model that reasons by default
            plain = await client.messages.create(
                model="m", max_tokens=2048, messages=HELLO,  # type: ignore[arg-type]
                thinking={"type": "disabled"},
            )  # fmt: skip
    assert fake.problems == []
    assert fake.seen[0].body["additionalModelRequestFields"]["thinking"] == {
        "type": "enabled", "budget_tokens": 1024
    }  # fmt: skip
    thinking, text = thought.content
    assert thinking.type == "thinking" and text.type == "text"
    assert thinking.thinking == "".join(REASONING)
    # Bedrock's signature, sealed as the gateway's own: no other provider is given it.
    assert thinking.signature != SIGNATURE and thinking.signature.endswith(SIGNATURE)
    assert text.text == "".join(TEXT)
    # Reasoning nobody asked for is not shown.
    assert [block.type for block in plain.content] == ["text"]


CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
async def test_structured_output_is_a_forced_tool_whose_input_is_the_reply(
    stream: bool, fake: FakeUpstream
):
    async with openai_gateway(with_models(model("m", bedrock(fake.url, stream=stream)))) as (
        sdk,
        _,
    ):
        shaped = await sdk.chat.completions.create(
            model="m", messages=HELLO,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "City", "schema": CITY}},
        )  # fmt: skip
        plain = await sdk.chat.completions.create(
            model="m", messages=HELLO, response_format={"type": "json_object"}
        )
    assert fake.problems == []
    for reply in (shaped, plain):
        assert reply.choices[0].message.content == '{"city": "Paris"}'
        assert reply.choices[0].finish_reason == "stop"
        assert not reply.choices[0].message.tool_calls
    (spec,) = fake.seen[0].body["toolConfig"]["tools"]
    assert spec["toolSpec"]["name"] == "City"
    assert spec["toolSpec"]["inputSchema"] == {"json": CITY}
    assert fake.seen[0].body["toolConfig"]["toolChoice"] == {"tool": {"name": "City"}}
    (spec,) = fake.seen[1].body["toolConfig"]["tools"]
    assert spec["toolSpec"]["name"] == "json_object"
    assert spec["toolSpec"]["inputSchema"] == {"json": {"type": "object"}}


@pytest.mark.parametrize(
    ("choice", "sent"),
    [("required", {"any": {}}), ("auto", {"auto": {}}),
     ({"type": "function", "function": {"name": "get_weather"}},
      {"tool": {"name": "get_weather"}})],
)  # fmt: skip
async def test_tool_choice_in_bedrocks_forms(choice: Any, sent: Any, fake: FakeUpstream):
    async with openai_gateway(with_models(model("m", bedrock(fake.url)))) as (sdk, _):
        await sdk.chat.completions.create(
            model="m", messages=HELLO, tools=[WEATHER], tool_choice=choice
        )
    assert fake.problems == []
    assert fake.seen[0].body["toolConfig"]["toolChoice"] == sent


async def test_no_tools_when_none_are_to_be_called_unless_the_conversation_used_them(
    fake: FakeUpstream,
):
    async with openai_gateway(with_models(model("m", bedrock(fake.url)))) as (sdk, _):
        await sdk.chat.completions.create(
            model="m", messages=HELLO, tools=[WEATHER], tool_choice="none"
        )
        used = [
            *HELLO,
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "tooluse_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "tooluse_1", "content": "sunny"},
        ]  # fmt: skip
        await sdk.chat.completions.create(
            model="m", messages=used, tools=[WEATHER], tool_choice="none"
        )
    assert fake.problems == []
    assert "toolConfig" not in fake.seen[0].body
    # Bedrock refuses tool blocks without the tools' definitions: they stay, unforced.
    assert fake.seen[1].body["toolConfig"] == {"tools": [{"toolSpec": {
        "name": "get_weather", "description": "Gets the weather.",
        "inputSchema": {"json": WEATHER["function"]["parameters"]}}}]}  # type: ignore[index]  # fmt: skip


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAen63NgAAAAASUVORK5CYII="
PDF = "JVBERi0xLjQKJeLjz9MK"


async def test_images_and_documents_as_bytes_and_a_link_refused(fake: FakeUpstream):
    import anthropic

    async with running_gateway(with_models(model("m", bedrock(fake.url)))) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        claude = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
        async with sdk, claude:
            await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": [
                {"type": "text", "text": "Compare."},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                {"type": "image_url", "image_url": {"url": f"data:image/webp;base64,{PNG}"}},
            ]}])  # fmt: skip
            await claude.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": [
                {"type": "document", "title": "Report",
                 "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
                {"type": "text", "text": "Summarise."},
            ]}])  # fmt: skip
            with pytest.raises(openai.BadRequestError) as linked:
                await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ]}])  # fmt: skip
    assert fake.problems == []
    assert fake.seen[0].body["messages"][0]["content"] == [
        {"text": "Compare."},
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"image": {"format": "webp", "source": {"bytes": PNG}}},
    ]
    assert fake.seen[1].body["messages"][0]["content"] == [
        {"document": {"format": "pdf", "name": "Report", "source": {"bytes": PDF}}},
        {"text": "Summarise."},
    ]
    assert linked.value.body["message"] == (  # type: ignore[index]
        "messages: Bedrock takes images as data: URLs (base64), not links"
    )
    assert len(fake.seen) == 2


async def test_top_k_and_performance_config_and_the_regions_endpoint(fake: FakeUpstream):
    import anthropic

    entry = bedrock(fake.url, performance_config={"latency": "optimized"},
                    additional_model_request_fields={"anthropic_beta": ["x"]})  # fmt: skip
    async with running_gateway(with_models(model("m", entry))) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        claude = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
        async with claude:
            await claude.messages.create(
                model="m",
                max_tokens=64,
                messages=HELLO,
                extra_body={"top_k": 5},  # type: ignore[arg-type]
            )
    body = fake.seen[0].body
    assert body["performanceConfig"] == {"latency": "optimized"}
    assert body["additionalModelRequestFields"] == {"anthropic_beta": ["x"], "top_k": 5}
    assert fake.problems == []
    for region, url in [(None, "https://bedrock-runtime.us-east-1.amazonaws.com"),
                        ("eu-west-3", "https://bedrock-runtime.eu-west-3.amazonaws.com")]:  # fmt: skip
        config = ProviderConfig.model_validate(bedrock("http://x", region=region))
        config.params.pop("base_url")
        if region is None:
            config.params.pop("region", None)
        built = registry.build(config, "p")
        assert built.params.base_url == url  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("refusal", "message"),
    [
        # The error's kind from the body's __type when no header names it.
        (Refusal(429, {"__type": "com.amazon.coral.service#ThrottlingException",
                       "Message": "Rate exceeded"}, "throttled"),
         "bedrock: upstream answered HTTP 429 ThrottlingException: Rate exceeded"),
        # A body that is no JSON: the status alone.
        (Refusal(500, "<html>Internal error</html>", "html", text=True),
         "bedrock: upstream answered HTTP 500"),
    ],
)  # fmt: skip
async def test_an_error_answer_without_bedrocks_header_is_still_named(
    refusal: Refusal, message: str
):
    async with (
        serving(BedrockWire(fail_with=refusal)) as fake,
        openai_gateway(with_models(model("m", bedrock(fake.url)))) as (sdk, _),
    ):
        with pytest.raises(openai.APIStatusError) as failed:
            await sdk.chat.completions.create(model="m", messages=HELLO)
    assert failed.value.body["message"] == f"all providers of model m failed ({message})"  # type: ignore[index]


async def test_titan_embeds_text_not_token_ids(fake: FakeUpstream):
    entry = bedrock(fake.url, embedding_model=EMBEDDER)
    async with openai_gateway(with_models(model("e", entry))) as (sdk, _):
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.embeddings.create(model="e", input=[[1, 2, 3]])
    assert refused.value.body["param"] == "input"  # type: ignore[index]
    assert refused.value.body["message"] == "input: bedrock (Bedrock) embeds text, not token ids"  # type: ignore[index]
    assert fake.seen == []


CLAUDE_WEATHER = {"name": "get_weather", "description": "Gets the weather.",
                  "input_schema": WEATHER["function"]["parameters"]}  # fmt: skip
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
async def test_a_thinking_tool_loop_gives_bedrock_its_reasoning_back(
    stream: bool, fake: FakeUpstream
):
    """Claude Code's loop: the client gives back the thinking block with its tool_use,
    and Bedrock (as Anthropic's models do) wants it at the start of that turn."""
    import anthropic

    entries = [model("m", bedrock(fake.url, stream=stream)),
               model("other", bedrock(fake.url, "other-bedrock", stream=stream))]  # fmt: skip
    async with running_gateway(with_models(*entries)) as gw:
        client = anthropic.AsyncAnthropic(
            base_url=f"http://127.0.0.1:{gw.http_port}", api_key=API_KEY, max_retries=0
        )
        async with client:
            ask = {"role": "user", "content": "Weather in Paris?"}
            first = await client.messages.create(
                model="m", max_tokens=2048, messages=[ask],  # type: ignore[list-item]
                tools=[CLAUDE_WEATHER], thinking=THINKING,  # type: ignore[list-item,arg-type]
            )  # fmt: skip
            assert first.content[0].type == "thinking"
            call = first.content[-1]
            assert call.type == "tool_use"
            result = {"type": "tool_result", "tool_use_id": call.id, "content": "Sunny."}
            loop = [ask, {"role": "assistant", "content": first.content},
                    {"role": "user", "content": [result]}]  # fmt: skip
            second = await client.messages.create(
                model="m", max_tokens=2048, messages=loop,  # type: ignore[arg-type]
                tools=[CLAUDE_WEATHER], thinking=THINKING,  # type: ignore[list-item,arg-type]
            )  # fmt: skip
            # Another provider never made that reasoning: it is not given it, and
            # thinking is left off rather than refused.
            elsewhere = await client.messages.create(
                model="other", max_tokens=2048, messages=loop,  # type: ignore[arg-type]
                tools=[CLAUDE_WEATHER], thinking=THINKING,  # type: ignore[list-item,arg-type]
            )  # fmt: skip
    assert fake.problems == []
    assert [b.type for b in second.content] == ["thinking", "text"]
    assert [b.type for b in elsewhere.content] == ["text"]
    calling = fake.seen[1].body["messages"][1]["content"]
    assert calling[0] == {"reasoningContent": {"reasoningText": {
        "text": "".join(REASONING), "signature": SIGNATURE}}}  # fmt: skip
    assert "toolUse" in calling[-1]
    assert fake.seen[1].body["additionalModelRequestFields"]["thinking"] == THINKING
    other = fake.seen[2].body
    assert "additionalModelRequestFields" not in other
    assert all("reasoningContent" not in b for m in other["messages"] for b in m["content"])
