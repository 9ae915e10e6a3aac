"""The Gemini API through Google's own SDK (google-genai), in both facade modes and on
both API versions it speaks: whole and streamed answers, a chat with history, a
function-calling round trip, structured output parsed into a pydantic model,
count_tokens, embeddings, the model list, and each error class the SDK raises for the
status and body the gateway writes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest
from google import genai
from google.genai import errors, types

from tests.support.facade import MODES, facade, set_params
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.upstreams.base import refused_url
from tests.support.upstreams.config import model, provider, with_models


def client(url: str, key: str = API_KEY, version: str | None = None) -> genai.Client:
    options = types.HttpOptions(base_url=url, api_version=version, retry_options=None)
    return genai.Client(api_key=key, http_options=options)


@pytest.fixture(params=[(m, v) for m in MODES for v in ("v1beta", "v1")], ids=str)
async def sdk(request: pytest.FixtureRequest) -> AsyncIterator[genai.client.AsyncClient]:
    mode, version = request.param
    async with facade(mode) as url:
        yield client(url, version=version).aio


async def test_generate(sdk: genai.client.AsyncClient) -> None:
    answer = await sdk.models.generate_content(model="sim-mini", contents="Say hello.")
    assert answer.text is not None and answer.text.startswith("(simulated)")
    (candidate,) = answer.candidates or []
    assert candidate.finish_reason == types.FinishReason.STOP
    assert answer.model_version == "sim-mini" and answer.response_id
    usage = answer.usage_metadata
    assert usage is not None and usage.prompt_token_count and usage.candidates_token_count
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count


async def test_stream(sdk: genai.client.AsyncClient) -> None:
    chunks = [
        c async for c in await sdk.models.generate_content_stream(
            model="models/sim-mini", contents="Stream a sentence."
        )
    ]  # fmt: skip
    text = "".join(c.text or "" for c in chunks)
    assert text.startswith("(simulated)") and len(chunks) > 2
    assert {c.response_id for c in chunks} == {chunks[0].response_id}
    last = chunks[-1]
    assert last.candidates and last.candidates[0].finish_reason == types.FinishReason.STOP
    assert all(not c.candidates[0].finish_reason for c in chunks[:-1] if c.candidates)
    assert last.usage_metadata is not None and last.usage_metadata.candidates_token_count


async def test_chat_keeps_its_history(sdk: genai.client.AsyncClient) -> None:
    chat = sdk.chats.create(
        model="sim-mini",
        config=types.GenerateContentConfig(system_instruction="Be brief.", max_output_tokens=20),
    )
    first = await chat.send_message("Hello.")
    second = await chat.send_message("And again.")
    assert first.text and second.text
    history = chat.get_history()
    assert [c.role for c in history] == ["user", "model", "user", "model"]


def get_weather(city: str) -> str:
    """Gets the weather of a city."""
    return f"Sunny in {city}."


async def test_function_calling_round_trip(sdk: genai.client.AsyncClient) -> None:
    config = types.GenerateContentConfig(
        tools=[get_weather],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    ask = types.Content(role="user", parts=[types.Part(text="What is the weather in Paris?")])
    answer = await sdk.models.generate_content(model="sim-mini", contents=[ask], config=config)
    (call,) = answer.function_calls or []
    assert call.name == "get_weather" and isinstance((call.args or {}).get("city"), str)
    assert call.id
    assert answer.candidates and answer.candidates[0].content
    result = types.Part.from_function_response(name=call.name, response={"output": "Sunny."})
    result.function_response.id = call.id  # type: ignore[union-attr]
    turns = [ask, answer.candidates[0].content, types.Content(role="user", parts=[result])]
    final = await sdk.models.generate_content(model="sim-mini", contents=turns, config=config)
    assert final.text and not final.function_calls


async def test_automatic_function_calling(sdk: genai.client.AsyncClient) -> None:
    config = types.GenerateContentConfig(tools=[get_weather])
    answer = await sdk.models.generate_content(
        model="sim-mini", contents="What is the weather in Rome?", config=config
    )
    assert answer.text and answer.text.startswith("(simulated)")
    history = answer.automatic_function_calling_history or []
    kinds = [(c.role, [bool(p.function_call) for p in c.parts or []]) for c in history]
    assert kinds[:2] == [("user", [False]), ("model", [True])]


class Recipe(pydantic.BaseModel):
    name: str
    minutes: int
    steps: list[str]


async def test_structured_output_parses_into_a_model(sdk: genai.client.AsyncClient) -> None:
    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=Recipe
    )
    answer = await sdk.models.generate_content(
        model="sim-mini", contents="A recipe.", config=config
    )
    assert isinstance(answer.parsed, Recipe)
    assert isinstance(answer.parsed.steps, list)


async def test_count_tokens(sdk: genai.client.AsyncClient) -> None:
    short = await sdk.models.count_tokens(model="sim-mini", contents="Hi.")
    long = await sdk.models.count_tokens(model="sim-mini", contents="Hi. " * 200)
    assert short.total_tokens and long.total_tokens and long.total_tokens > short.total_tokens


async def test_embed_content(sdk: genai.client.AsyncClient) -> None:
    one = await sdk.models.embed_content(model="sim-embed", contents="hello")
    several = await sdk.models.embed_content(
        model="sim-embed",
        contents=["hello", "world"],
        config=types.EmbedContentConfig(output_dimensionality=64),
    )
    assert one.embeddings and len(one.embeddings) == 1 and one.embeddings[0].values
    assert several.embeddings and [len(e.values or []) for e in several.embeddings] == [64, 64]


async def test_models_list_and_get(sdk: genai.client.AsyncClient) -> None:
    names = [m.name async for m in await sdk.models.list()]
    assert names == [
        f"models/{m}"
        for m in (
            "sim-mini",
            "sim-standard",
            "sim-pro",
            "sim-embed",
            "sim-rerank",
            "sim-moderation",
            "sim-audio",
            "sim-image",
        )
    ]
    one = await sdk.models.get(model="sim-mini")
    assert one.name == "models/sim-mini" and one.input_token_limit
    assert one.supported_actions and "generateContent" in one.supported_actions


async def test_each_error_class() -> None:
    data = with_models(model("down", provider("down-p", "openai", refused_url())))
    data["keys"].append({"name": "one-a-minute", "kind": "api", "secret": "gw-once-key-000000000",
                         "requests_per_minute": 1})  # fmt: skip
    async with facade("in_process", data) as url:
        sdk = client(url).aio
        once = client(url, key="gw-once-key-000000000").aio
        cases: list[tuple[Any, type[errors.APIError], int, str]] = [
            (client(url, key="wrong").aio.models.generate_content(model="sim-mini", contents="x"),
             errors.ClientError, 401, "UNAUTHENTICATED"),
            (sdk.models.generate_content(model="nope", contents="x"),
             errors.ClientError, 404, "NOT_FOUND"),
            (sdk.models.generate_content(
                model="sim-mini", contents="x", config=types.GenerateContentConfig(top_p=2)),
             errors.ClientError, 400, "INVALID_ARGUMENT"),
            (sdk.models.generate_content(model="down", contents="x"),
             errors.ServerError, 503, "UNAVAILABLE"),
        ]  # fmt: skip
        for call, kind, code, status in cases:
            with pytest.raises(kind) as caught:
                await call
            assert caught.value.status == status
            # A refused connection is a 503; something else on that port, a bad answer (502).
            assert caught.value.code == code or (code, caught.value.code) == (503, 502)
        await once.models.generate_content(model="sim-mini", contents="x")
        with pytest.raises(errors.ClientError) as limited:
            await once.models.generate_content(model="sim-mini", contents="x")
        assert (limited.value.code, limited.value.status) == (429, "RESOURCE_EXHAUSTED")
        details = (limited.value.details or {})["error"]["details"]
        retry = [d for d in details if d["@type"].endswith("RetryInfo")]
        assert retry and retry[0]["retryDelay"].endswith("s")


async def test_a_failure_mid_stream_raises_and_never_finishes() -> None:
    data = set_params(default_config_dict(), "sim-mini", fail_after_tokens=3)
    data["models"][0]["providers"] = data["models"][0]["providers"][:1]
    async with running_gateway(data) as gw:
        sdk = client(f"http://127.0.0.1:{gw.http_port}").aio
        seen = []
        with pytest.raises(errors.APIError) as caught:
            async for chunk in await sdk.models.generate_content_stream(
                model="sim-mini", contents="Go."
            ):
                seen.append(chunk)
        assert caught.value.status == "UNAVAILABLE"
        assert seen and not any(c.candidates and c.candidates[0].finish_reason for c in seen)
