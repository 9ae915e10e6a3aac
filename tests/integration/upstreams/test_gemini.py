"""The gemini adapter against a strict fake of the Gemini API (tests/support/upstreams/
gemini.py), through the gateway and real clients: the request under Gemini's names,
usage with cached and reasoning tokens, thought signatures kept across a tool
conversation in every dialect (and never given to another provider), blocked prompts
and replies named, Gemini's 429 wait, a wrong key as a misconfigured provider,
embeddings and token counts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support.gateways import API_KEY, openai_gateway
from tests.support.upstreams.base import TEXT, FakeUpstream, Fault, Usage, serving
from tests.support.upstreams.checks import KEY
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.gemini import (
    BLOCKED_PROMPT,
    BLOCKED_REPLY,
    BYPASS,
    DIMENSIONS,
    EMBEDDER,
    GeminiWire,
)
from tests.support.upstreams.openai import OpenAIWire

HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Gets the weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"], "additionalProperties": False},
    },
}  # fmt: skip
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def gemini(url: str, provider_id: str = "gemini", **params: Any) -> dict[str, Any]:
    return provider(provider_id, "gemini", url, **params)


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    async with serving(GeminiWire()) as upstream:
        yield upstream


async def test_a_chat_reaches_gemini_under_its_own_names(fake: FakeUpstream):
    fake.usage = Usage(prompt_tokens=40, cached_tokens=16, reasoning_tokens=5)
    async with openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _):
        reply = await sdk.chat.completions.create(
            model="m",
            messages=[{"role": "system", "content": "Be brief."}, *HELLO],
            temperature=0.3, top_p=0.8, max_tokens=64, stop=["END"], seed=7,
            presence_penalty=0.5, frequency_penalty=-0.5, n=2,
        )  # fmt: skip
        stream = await sdk.chat.completions.create(
            model="m", messages=HELLO, stream=True, stream_options={"include_usage": True}
        )
        chunks = [c async for c in stream]
    assert fake.problems == []
    assert [c.message.content for c in reply.choices] == ["".join(TEXT)] * 2
    assert reply.usage is not None and reply.usage.prompt_tokens == 40
    assert reply.usage.prompt_tokens_details.cached_tokens == 16  # type: ignore[union-attr]
    assert reply.usage.completion_tokens == len(TEXT) + 5
    assert reply.usage.completion_tokens_details.reasoning_tokens == 5  # type: ignore[union-attr]
    first = fake.seen[0]
    assert first.path == "/v1beta/models/gemini-fake:generateContent" or first.path.endswith(
        ":streamGenerateContent"
    )
    assert first.headers["x-goog-api-key"] == KEY
    assert first.body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert first.body["contents"] == [{"role": "user", "parts": [{"text": "Say hello."}]}]
    assert first.body["generationConfig"] == {
        "temperature": 0.3, "topP": 0.8, "maxOutputTokens": 64, "stopSequences": ["END"],
        "seed": 7, "presencePenalty": 0.5, "frequencyPenalty": -0.5, "candidateCount": 2,
    }  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "".join(TEXT)
    assert fake.seen[1].path.endswith(":streamGenerateContent")
    assert fake.seen[1].query == "alt=sse"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 40


async def test_structured_output_and_thinking_take_gemini_forms(fake: FakeUpstream):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    async with openai_gateway(with_models(model("m", gemini(fake.url, stream=False)))) as (sdk, _):
        await sdk.chat.completions.create(
            model="m", messages=HELLO, reasoning_effort="low",
            response_format={"type": "json_schema",
                             "json_schema": {"name": "reply", "schema": schema}},
        )  # fmt: skip
    config = fake.seen[0].body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == schema
    assert config["thinkingConfig"] == {"thinkingLevel": "low"}
    assert fake.problems == []


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
async def test_thought_signatures_survive_a_tool_conversation_over_chat(stream: bool):
    wire = GeminiWire()
    async with (
        serving(wire) as fake,
        openai_gateway(with_models(model("m", gemini(fake.url, stream=stream)))) as (sdk, _),
    ):
        first = await sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        # The signature rides in Gemini's documented field; the client sends the
        # assistant message back as it came (the SDK keeps unknown fields).
        said = first.choices[0].message.model_dump(exclude_none=True)
        sealed = said["tool_calls"][0]["extra_content"]["google"]["thought_signature"]
        answer = {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "clear"}'}
        second = await sdk.chat.completions.create(
            model="m", messages=[*ASK, said, answer], tools=[WEATHER]
        )
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments)
    assert wire.issued[0] in sealed
    assert wire.returned == [wire.issued[0]], "the signature reached Gemini unchanged"
    assert second.choices[0].message.content == "".join(TEXT)
    assert fake.problems == []
    turns = fake.seen[-1].body["contents"]
    assert [p["functionCall"]["name"] for p in turns[1]["parts"] if "functionCall" in p] == [
        "get_weather"
    ]
    assert turns[2]["parts"][0]["functionResponse"] == {
        "name": "get_weather", "response": {"sky": "clear"}
    }  # fmt: skip


async def test_a_call_without_its_signature_gets_geminis_documented_bypass(fake: FakeUpstream):
    """A history from another model (or a client that dropped the field) has no
    signature: the first call of the turn goes with the value Gemini's docs give."""
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]  # fmt: skip
    async with openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _):
        reply = await sdk.chat.completions.create(model="m", messages=history, tools=[WEATHER])
    assert reply.choices[0].message.content == "".join(TEXT)
    part = fake.seen[0].body["contents"][1]["parts"][0]
    assert part["thoughtSignature"] == BYPASS
    assert part["functionCall"]["id"] == "call_1"
    assert fake.seen[0].body["contents"][2]["parts"][0]["functionResponse"]["response"] == {
        "result": "sunny"
    }


async def test_signatures_are_never_given_to_another_provider():
    """A Gemini conversation failing over goes to an OpenAI upstream without the
    signature, and to another Gemini provider with the bypass, never the first one's."""
    wire = GeminiWire()
    async with (
        serving(wire) as first,
        serving(GeminiWire(), text=("From", " another", " Gemini")) as other,
        serving(OpenAIWire(), text=("From", " OpenAI")) as backup,
    ):
        data = with_models(
            model("g", gemini(first.url)),
            model("m", gemini(first.url, "g1"), gemini(other.url, "g2", kind="backup")),
            model("o", gemini(first.url, "g3"), provider("openai", "openai", backup.url, "backup")),
        )
        async with openai_gateway(data) as (sdk, _):
            made = await sdk.chat.completions.create(model="g", messages=ASK, tools=[WEATHER])
            said = made.choices[0].message.model_dump(exclude_none=True)
            call_id = said["tool_calls"][0]["id"]
            history = [*ASK, said, {"role": "tool", "tool_call_id": call_id, "content": "sunny"}]
            first.default = Fault("status", status=503)
            to_gemini = await sdk.chat.completions.create(model="m", messages=history)
            to_openai = await sdk.chat.completions.create(model="o", messages=history)
    assert to_gemini.choices[0].message.content == "From another Gemini"
    parts = other.seen[-1].body["contents"][1]["parts"]
    assert [p["thoughtSignature"] for p in parts if "functionCall" in p] == [BYPASS]
    assert to_openai.choices[0].message.content == "From OpenAI"
    sent = json.dumps(backup.seen[-1].body)
    assert wire.issued[0] not in sent and "extra_content" not in sent
    assert other.problems == [] and backup.problems == []


async def test_thought_signatures_survive_over_messages_and_responses():
    wire = GeminiWire()
    async with (
        serving(wire) as fake,
        openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, base),
    ):
        claude = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
        tool = {"name": "get_weather", "description": "Weather.",
                "input_schema": WEATHER["function"]["parameters"]}  # type: ignore[index]  # fmt: skip
        async with claude:
            ask = [{"role": "user", "content": "Weather in Paris?"}]
            said = await claude.messages.create(
                model="m",
                max_tokens=64,
                messages=ask,
                tools=[tool],  # type: ignore[list-item]
            )
            use = next(b for b in said.content if b.type == "tool_use")
            result = {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}  # fmt: skip
            history = [*ask, {"role": "assistant", "content": said.content}, result]
            after = await claude.messages.create(
                model="m",
                max_tokens=64,
                messages=history,
                tools=[tool],  # type: ignore[arg-type]
            )
        function = {"type": "function", "name": "get_weather", "description": "Weather.",
                    "parameters": WEATHER["function"]["parameters"]}  # type: ignore[index]  # fmt: skip
        made = await sdk.responses.create(
            model="m", input="Weather in Paris?", tools=[function], store=False,  # type: ignore[list-item]
            include=["reasoning.encrypted_content"],
        )  # fmt: skip
        call = next(i for i in made.output if i.type == "function_call")
        items = [{"role": "user", "content": "Weather in Paris?"},
                 *[i.model_dump(exclude_none=True) for i in made.output],
                 {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]  # type: ignore[union-attr]  # fmt: skip
        finished = await sdk.responses.create(
            model="m",
            input=items,
            tools=[function],
            store=False,  # type: ignore[arg-type,list-item]
        )
    assert [b.type for b in said.content][-2:] == ["thinking", "tool_use"]
    assert after.content[-1].text == "".join(TEXT)  # type: ignore[union-attr]
    assert [i.type for i in made.output][-2:] == ["reasoning", "function_call"]
    assert finished.output_text == "".join(TEXT)
    assert wire.returned == [wire.issued[0], wire.issued[1]]
    assert fake.problems == []


async def test_blocked_prompts_and_replies_are_400s_naming_the_reason(fake: FakeUpstream):
    async with openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _):
        for word in (BLOCKED_PROMPT, BLOCKED_REPLY):
            for stream in (False, True):
                with pytest.raises(openai.BadRequestError) as refused:
                    reply = await sdk.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": f"Tell me of {word}"}],
                        stream=stream,  # type: ignore[call-overload]
                    )  # fmt: skip
                    if stream:
                        _ = [c async for c in reply]
                what = "prompt" if word == BLOCKED_PROMPT else "reply"
                assert f"blocked the {what} (SAFETY)" in refused.value.message


async def test_geminis_retry_delay_is_the_429s_wait(fake: FakeUpstream):
    fake.default = Fault("status", status=429)
    async with (
        openai_gateway(with_models(model("m", gemini(fake.url)))) as (_sdk, base),
        httpx.AsyncClient(base_url=base) as http,
    ):
        answer = await http.post(
            "/v1/chat/completions", json={"model": "m", "messages": HELLO},
            headers={"authorization": f"Bearer {API_KEY}"},
        )  # fmt: skip
    assert answer.status_code in (429, 503), answer.text
    assert answer.headers["retry-after"] == "2"


async def test_a_wrong_key_is_a_misconfigured_provider_not_a_bad_request():
    async with (
        serving(GeminiWire(key="another-key-0123456789")) as fake,
        openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _),
    ):
        with pytest.raises(openai.APIStatusError) as failed:
            await sdk.chat.completions.create(model="m", messages=HELLO)
    assert failed.value.status_code == 502
    assert "API_KEY_INVALID" in failed.value.message and KEY not in failed.value.message
    assert fake.problems == ["bad key"]


async def test_images_go_inline_or_by_uri_with_their_media_type(fake: FakeUpstream):
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAIAAAUAAen63NgAAAAASUVORK5CYII="
    content: Any = [
        {"type": "text", "text": "Compare."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/b.webp?w=2.png"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/c"}},
    ]
    async with openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _):
        await sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": content}]
        )
    assert fake.problems == []
    assert fake.seen[-1].body["contents"][0]["parts"] == [
        {"text": "Compare."},
        {"inlineData": {"mimeType": "image/png", "data": pixel}},
        # The type from the path, not the query; JPEG when the path does not say.
        {"fileData": {"mimeType": "image/webp", "fileUri": "https://example.com/b.webp?w=2.png"}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/c"}},
    ]


async def test_embeddings_and_token_counts(fake: FakeUpstream):
    # The model as Gemini's own model list names it: under models/.
    entry = gemini(fake.url, embedding_model=EMBEDDER, model="models/gemini-fake")
    async with openai_gateway(with_models(model("m", entry))) as (sdk, base):
        vectors = await sdk.embeddings.create(model="m", input=["one", "three"], dimensions=4)
        claude = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
        async with claude:
            counted = await claude.messages.count_tokens(
                model="m",
                system="Be brief.",
                messages=HELLO,  # type: ignore[arg-type]
            )
    assert [len(d.embedding) for d in vectors.data] == [4, 4]
    assert vectors.data[0].embedding != vectors.data[1].embedding
    assert fake.seen[0].path == f"/v1beta/models/{EMBEDDER}:batchEmbedContents"
    assert fake.seen[0].body["requests"][1] == {
        "model": f"models/{EMBEDDER}", "content": {"parts": [{"text": "three"}]},
        "outputDimensionality": 4,
    }  # fmt: skip
    assert counted.input_tokens == 4, "the upstream's count: four words, the system's too"
    assert fake.seen[1].path == "/v1beta/models/gemini-fake:countTokens"
    assert fake.seen[1].body["generateContentRequest"]["model"] == "models/gemini-fake"
    assert fake.problems == []
    assert DIMENSIONS != 4


async def test_embedding_failures_are_named(fake: FakeUpstream):
    async with openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _):
        # Gemini embeds text only: token ids are the caller's mistake, named.
        with pytest.raises(openai.BadRequestError) as ids:
            await sdk.embeddings.create(model="m", input=[[1, 2, 3]])
        # An upstream failure and an answer of the wrong length name the provider.
        fake.faults = [Fault("status", 503)]
        with pytest.raises(openai.APIStatusError) as failed:
            await sdk.embeddings.create(model="m", input=["one"])
        fake.wire.embeddings_missing = 1
        with pytest.raises(openai.APIStatusError) as short:
            await sdk.embeddings.create(model="m", input=["one", "two"])
    assert ids.value.status_code == 400
    assert ids.value.body["param"] == "input"  # type: ignore[index]
    assert ids.value.body["message"] == "input: gemini (Gemini) embeds text, not token ids"  # type: ignore[index]
    assert failed.value.status_code == 502
    assert failed.value.body["message"] == (  # type: ignore[index]
        "all providers of model m failed (gemini: upstream answered HTTP 503: fake upstream 503)"
    )
    assert short.value.status_code == 502
    assert short.value.body["message"] == (  # type: ignore[index]
        "all providers of model m failed "
        "(gemini: malformed answer (embeddings do not match the inputs))"
    )


async def test_a_count_the_upstream_cannot_give_is_estimated_and_logged(
    fake: FakeUpstream, caplog: pytest.LogCaptureFixture
):
    models = with_models(model("m", gemini(fake.url)), model("b", gemini(fake.url, "gemini-b")))
    async with (
        openai_gateway(models) as (_, base),
        httpx.AsyncClient(base_url=base, headers={"x-api-key": API_KEY}) as client,
    ):
        fake.faults = [Fault("status", 503)]
        failed = await client.post("/v1/messages/count_tokens",
                                   json={"model": "m", "messages": HELLO})  # fmt: skip
        fake.wire.total_tokens = "many"
        broken = await client.post("/v1/messages/count_tokens",
                                   json={"model": "b", "messages": HELLO})  # fmt: skip
    assert failed.json()["method"] == broken.json()["method"] == "estimate"
    said = [r.getMessage() for r in caplog.records if "count is estimated" in r.getMessage()]
    assert said == [
        "gemini: upstream answered HTTP 503: fake upstream 503; the token count is estimated",
        "gemini-b: malformed answer (totalTokens is not a token count: many); "
        "the token count is estimated",
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
async def test_extended_thinking_shows_the_models_thoughts(stream: bool, fake: FakeUpstream):
    async with (
        openai_gateway(with_models(model("m", gemini(fake.url, stream=stream)))) as (_, base),
        httpx.AsyncClient(base_url=base, headers={"x-api-key": API_KEY}) as client,
    ):
        said = {}
        for thinking in ({"type": "enabled", "budget_tokens": 1024}, {"type": "adaptive"}):
            r = await client.post("/v1/messages", json={
                "model": "m", "max_tokens": 2048, "messages": HELLO, "thinking": thinking})  # fmt: skip
            assert r.status_code == 200, r.text
            said[thinking["type"]] = r.json()["content"]
    assert fake.problems == []
    assert [s.body["generationConfig"]["thinkingConfig"] for s in fake.seen] == [
        {"thinkingBudget": 1024, "includeThoughts": True},
        {"thinkingBudget": -1, "includeThoughts": True},
    ]
    for content in said.values():
        assert [b["type"] for b in content] == ["thinking", "text"]
        assert content[0]["thinking"] == "Thinking it over."
        assert content[1]["text"] == "".join(TEXT)


@pytest.mark.parametrize(
    ("choice", "config"),
    [("auto", {"mode": "AUTO"}), ("required", {"mode": "ANY"}), ("none", {"mode": "NONE"}),
     ({"type": "function", "function": {"name": "get_weather"}},
      {"mode": "ANY", "allowedFunctionNames": ["get_weather"]})],
)  # fmt: skip
async def test_tool_choice_in_geminis_forms(choice: Any, config: Any, fake: FakeUpstream):
    async with openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _):
        await sdk.chat.completions.create(
            model="m", messages=ASK, tools=[WEATHER], tool_choice=choice
        )
    assert fake.problems == []
    assert fake.seen[0].body["toolConfig"] == {"functionCallingConfig": config}


async def test_safety_settings_cached_content_documents_and_turns_merged(fake: FakeUpstream):
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    entry = gemini(fake.url, safety_settings=safety, cached_content="cachedContents/abc")
    pdf = "JVBERi0xLjQKJeLjz9MK"
    async with (
        openai_gateway(with_models(model("m", entry))) as (_, base),
        httpx.AsyncClient(base_url=base, headers={"x-api-key": API_KEY}) as client,
    ):
        r = await client.post("/v1/messages", json={"model": "m", "max_tokens": 64, "messages": [
            {"role": "user", "content": "Read this."},
            {"role": "user", "content": [
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                "data": pdf}},
                {"type": "text", "text": "Summarise."}]},
        ]})  # fmt: skip
    assert r.status_code == 200, r.text
    assert fake.problems == []
    body = fake.seen[0].body
    assert body["safetySettings"] == safety
    assert body["cachedContent"] == "cachedContents/abc"
    # Two user turns in a row are one Gemini content, its parts in order.
    assert body["contents"] == [{"role": "user", "parts": [
        {"text": "Read this."},
        {"inlineData": {"mimeType": "application/pdf", "data": pdf}},
        {"text": "Summarise."},
    ]}]  # fmt: skip


async def test_an_error_streamed_by_gemini_fails_the_stream_by_name(fake: FakeUpstream):
    fake.wire.mid_stream_error = True
    async with openai_gateway(with_models(model("m", gemini(fake.url)))) as (sdk, _):
        stream = await sdk.chat.completions.create(model="m", messages=HELLO, stream=True)
        got: list[str] = []
        with pytest.raises(openai.APIError) as failed:
            async for chunk in stream:
                got.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(got) == "".join(TEXT[:2])
    assert failed.value.message == (
        "gemini: upstream failed mid-stream: INTERNAL: An internal error has occurred, "
        "key [redacted]"
    )


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "unary"])
@pytest.mark.parametrize(
    ("reason", "text", "finish", "error"),
    [
        ("RECITATION", TEXT, "content_filter", None),
        ("RECITATION", ("",), None, "400: gemini: the upstream blocked the reply (RECITATION)"),
        ("OTHER", TEXT, "stop", None),
        ("OTHER", ("",), None, "502: all providers of model m failed "
                                "(gemini: the upstream ended without a reply (OTHER))"),
    ],
)  # fmt: skip
async def test_geminis_other_finish_reasons(
    stream: bool, reason: str, text: Any, finish: str | None, error: str | None
):
    async with serving(GeminiWire(finish_reason=reason), text=text) as fake:
        entry = gemini(fake.url, stream=stream)
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            if error is None:
                reply = await sdk.chat.completions.create(model="m", messages=HELLO)
                assert reply.choices[0].finish_reason == finish
                assert reply.choices[0].message.content == "".join(text)
                return
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.chat.completions.create(model="m", messages=HELLO)
    assert f"{failed.value.status_code}: {failed.value.body['message']}" == error  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"contents": [{"role": "user", "parts": [{"text": "x"}]}], "temperature": 1}, "unknown"),
        ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, "role"),
        ({"contents": [{"role": "user", "parts": [{"text": "x", "inlineData": {}}]}]}, "exactly one"),
        ({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
          "generationConfig": {"maxTokens": 5}}, "unknown"),
        ({"contents": [{"role": "user", "parts": [{"text": "x"}]},
                       {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}]},
         "missing a `thought_signature`"),
        ({"contents": [{"role": "user", "parts": [{"text": "x"}]},
                       {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}},
                                                     "thoughtSignature": "forged"}]}]},
         "Corrupted"),
    ],
)  # fmt: skip
def test_the_fakes_checks_can_fail(body: dict[str, Any], why: str):
    path = "/v1beta/models/gemini-fake:generateContent"
    refused = GeminiWire().refusal(path, {"x-goog-api-key": KEY}, body)
    assert refused is not None and refused.status == 400
    assert why.lower() in refused.why.lower() or why.lower() in json.dumps(refused.body).lower()
    assert GeminiWire().refusal(path, {}, body) is not None  # no key: 403 first
