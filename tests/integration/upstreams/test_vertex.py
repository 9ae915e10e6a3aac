"""The vertex adapter against a strict fake of Vertex AI (tests/support/upstreams/
vertex.py): Gemini and Anthropic models at a project's endpoints, through the `openai`
and `anthropic` SDKs, signed in with a service account whose tokens come from a fake
Google token endpoint (and are refreshed before they expire), or with a given token."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from server.base.config import ConfigError, ProviderConfig
from server.base.embedding import EmbeddingRequest
from server.base.errors import UpstreamRejected
from server.providers import registry
from server.providers.vertex import publisher
from tests.support.gateways import API_KEY, openai_gateway
from tests.support.upstreams.base import TEXT, FakeUpstream, Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.gemini import error
from tests.support.upstreams.vertex import (
    LOCATION,
    PREFIX,
    PROJECT,
    Tokens,
    VertexAnthropicWire,
    VertexGeminiWire,
    service_account,
    token_server,
)

HELLO = [{"role": "user", "content": "Say hello."}]
PLACE = {"project": PROJECT, "location": LOCATION, "api_key_env": None}


def vertex(url: str, **params: Any) -> dict[str, Any]:
    return provider("vertex", "vertex", url, **{**PLACE, **params})


@asynccontextmanager
async def embedder(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[VertexGeminiWire, FakeUpstream, openai.AsyncOpenAI]]:
    """A gateway whose model `e` embeds on a fake Vertex, signed in by a given token."""
    monkeypatch.setenv("VERTEX_TEST_TOKEN", "ya29.given-token")
    wire = VertexGeminiWire(tokens=Tokens(valid={"ya29.given-token"}))
    async with serving(wire) as fake:
        entry = vertex(
            fake.url, token_env="VERTEX_TEST_TOKEN", embedding_model="text-embedding-fake"
        )
        async with openai_gateway(with_models(model("e", entry))) as (sdk, _):
            yield wire, fake, sdk


def key_file(tmp_path: Path, info: dict[str, Any]) -> str:
    path = tmp_path / "service-account.json"
    path.write_text(json.dumps(info))
    return str(path)


async def test_gemini_on_vertex_with_a_service_account(tmp_path: Path):
    tokens = Tokens()
    async with (
        token_server(tokens) as (endpoint, info),
        serving(VertexGeminiWire(tokens=tokens)) as fake,
    ):
        entry = vertex(fake.url, credentials_file=key_file(tmp_path, info))
        async with openai_gateway(with_models(model("m", entry))) as (sdk, base):
            reply = await sdk.chat.completions.create(model="m", messages=HELLO, temperature=0.2)
            stream = await sdk.chat.completions.create(model="m", messages=HELLO, stream=True)
            streamed = "".join(
                [c.choices[0].delta.content or "" async for c in stream if c.choices]
            )
            claude = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
            async with claude:
                counted = await claude.messages.count_tokens(
                    model="m",
                    system="Be brief.",
                    messages=HELLO,  # type: ignore[arg-type]
                )
    assert reply.choices[0].message.content == streamed == "".join(TEXT)
    assert fake.problems == [] and endpoint.problems == []
    assert tokens.issued == ["ya29.fake-1"], "one token, kept while it is fresh"
    # Vertex counts the contents themselves, signed in like every other call.
    assert counted.input_tokens == 4
    assert fake.seen[-1].path == f"{PREFIX}/google/models/gemini-fake:countTokens"
    assert fake.seen[-1].headers["authorization"] == "Bearer ya29.fake-1"
    assert "generateContentRequest" not in fake.seen[-1].body
    assert fake.seen[0].path == f"{PREFIX}/google/models/gemini-fake:streamGenerateContent"
    assert fake.seen[0].headers["authorization"] == "Bearer ya29.fake-1"
    assert fake.seen[0].body["generationConfig"] == {"temperature": 0.2}


async def test_a_token_about_to_expire_is_refreshed_before_the_request(tmp_path: Path):
    """Tokens that live a minute are within google-auth's refresh margin at once: each
    request gets a new one, and the fake takes only tokens it issued."""
    tokens = Tokens()
    async with token_server(tokens, lifetime_s=60) as (endpoint, info), serving(
        VertexGeminiWire(tokens=tokens)
    ) as fake:  # fmt: skip
        entry = vertex(fake.url, credentials_file=key_file(tmp_path, info))
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            for _ in range(2):
                await sdk.chat.completions.create(model="m", messages=HELLO)
    assert tokens.issued == ["ya29.fake-1", "ya29.fake-2"]
    assert [s.headers["authorization"] for s in fake.seen] == [
        "Bearer ya29.fake-1", "Bearer ya29.fake-2"
    ]  # fmt: skip
    assert fake.problems == [] and endpoint.problems == []


async def test_claude_on_vertex_over_messages_and_chat(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VERTEX_TEST_TOKEN", "ya29.given-token")
    tokens = Tokens(valid={"ya29.given-token"})
    wire = VertexAnthropicWire(tokens=tokens)
    async with serving(wire) as fake:
        entry = vertex(fake.url, model=wire.model, token_env="VERTEX_TEST_TOKEN")
        async with openai_gateway(with_models(model("c", entry))) as (sdk, base):
            claude = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
            async with claude:
                said = await claude.messages.create(model="c", max_tokens=32, messages=HELLO)  # type: ignore[arg-type]
                counted = await claude.messages.count_tokens(model="c", messages=HELLO)  # type: ignore[arg-type]
            chat = await sdk.chat.completions.create(model="c", messages=HELLO, max_tokens=16)
    assert said.content[0].text == "".join(TEXT)  # type: ignore[union-attr]
    assert chat.choices[0].message.content == "".join(TEXT)
    assert counted.input_tokens == 42
    assert fake.problems == []
    first = fake.seen[0]
    assert first.path == f"{PREFIX}/anthropic/models/{wire.model}:streamRawPredict"
    assert first.body["anthropic_version"] == "vertex-2023-10-16" and "model" not in first.body
    assert first.headers["authorization"] == "Bearer ya29.given-token"
    assert fake.seen[1].path == f"{PREFIX}/anthropic/models/count-tokens:rawPredict"


async def test_embeddings_by_predict(monkeypatch: pytest.MonkeyPatch):
    async with embedder(monkeypatch) as (_, fake, sdk):
        made = await sdk.embeddings.create(model="e", input=["one two", "three"], dimensions=3)
    assert [len(d.embedding) for d in made.data] == [3, 3]
    assert made.usage.prompt_tokens == 3, "Vertex's own token counts"
    assert fake.seen[0].path == f"{PREFIX}/google/models/text-embedding-fake:predict"
    assert fake.seen[0].body == {"instances": [{"content": "one two"}, {"content": "three"}],
                                 "parameters": {"outputDimensionality": 3}}  # fmt: skip


@pytest.mark.parametrize("claude", [False, True], ids=["google", "anthropic"])
async def test_a_token_file_is_read_for_each_request_and_one_gone_is_named(
    claude: bool, tmp_path: Path
):
    token_file = tmp_path / "token"
    token_file.write_text("ya29.from-file-1\n")
    tokens = Tokens(valid={"ya29.from-file-1", "ya29.from-file-2"})
    wire = VertexAnthropicWire(tokens=tokens) if claude else VertexGeminiWire(tokens=tokens)
    async with serving(wire) as fake:
        named = {"model": wire.model} if isinstance(wire, VertexAnthropicWire) else {}
        entry = vertex(fake.url, token_file=str(token_file), **named)
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            await sdk.chat.completions.create(model="m", messages=HELLO)
            token_file.write_text("ya29.from-file-2\n")  # refreshed outside the gateway
            await sdk.chat.completions.create(model="m", messages=HELLO)
            token_file.unlink()
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.chat.completions.create(model="m", messages=HELLO)
    assert [s.headers["authorization"] for s in fake.seen] == [
        "Bearer ya29.from-file-1", "Bearer ya29.from-file-2"
    ]  # fmt: skip
    assert failed.value.status_code == 503
    assert failed.value.body["message"] == (  # type: ignore[index]
        "all providers of model m failed (vertex: cannot read its token_file (FileNotFoundError))"
    )


async def test_a_token_vertex_refuses_is_a_misconfigured_provider(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VERTEX_TEST_TOKEN", "ya29.stale-token")
    async with serving(VertexGeminiWire()) as fake:
        entry = vertex(fake.url, token_env="VERTEX_TEST_TOKEN")
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.chat.completions.create(model="m", messages=HELLO)
    assert failed.value.status_code == 502
    assert "ya29.stale-token" not in failed.value.message
    assert fake.problems == ["bad token"]


def test_sign_in_is_named_and_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)

    def build(**params: Any) -> None:
        entry = vertex("http://127.0.0.1:9", **params)
        registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")

    with pytest.raises(ConfigError) as none_given:
        build()
    assert str(none_given.value) == (
        "models[0].providers[0].params.credentials_file: give a service-account key file, "
        "token_env or token_file (or set GOOGLE_APPLICATION_CREDENTIALS)"
    )
    with pytest.raises(ConfigError, match="give one of credentials_file, token_env and token_file"):
        build(token_env="A", token_file="b")
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(ConfigError) as junk:
        build(credentials_file=str(tmp_path / "junk.json"))
    assert str(junk.value) == (
        "models[0].providers[0].params.credentials_file: not a service-account key file "
        "(MalformedError)"
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "junk.json"))
    with pytest.raises(
        ConfigError, match=r"params\.GOOGLE_APPLICATION_CREDENTIALS: not a service-account"
    ):
        build()
    with pytest.raises(ConfigError, match=r"params\.token_env: environment variable NO_SUCH_"):
        build(token_env="NO_SUCH_TOKEN_VARIABLE")
    with pytest.raises(ConfigError, match=r"params\.token_file: .*absent is not a file"):
        build(token_file=str(tmp_path / "absent"))
    entry = ProviderConfig.model_validate(
        vertex("http://x", token_file=str(tmp_path / "junk.json"))
    )
    entry.params.pop("base_url")
    provider_ = registry.build(entry, "p")
    assert provider_.params.base_url == f"https://{LOCATION}-aiplatform.googleapis.com/v1"  # type: ignore[attr-defined]
    # The global location has an endpoint of its own, without a region.
    entry = ProviderConfig.model_validate(
        vertex("http://x", token_file=str(tmp_path / "junk.json"), location="global")
    )
    entry.params.pop("base_url")
    provider_ = registry.build(entry, "p")
    assert provider_.params.base_url == "https://aiplatform.googleapis.com/v1"  # type: ignore[attr-defined]


async def test_the_token_endpoint_refuses_a_key_it_does_not_know(tmp_path: Path):
    """The fake token endpoint's signature check can fail: a key file holding another
    private key gets no token, and the caller hears why without any secret."""
    tokens = Tokens()
    async with (
        token_server(tokens) as (endpoint, info),
        serving(VertexGeminiWire(tokens=tokens)) as fake,
    ):
        forged, _ = service_account(endpoint.url)
        entry = vertex(
            fake.url,
            credentials_file=key_file(tmp_path, {**forged, "client_email": info["client_email"]}),
        )
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.chat.completions.create(model="m", messages=HELLO)
    assert endpoint.problems == ["bad signature"] and tokens.issued == [] and fake.seen == []
    assert "cannot get an access token (RefreshError)" in failed.value.message


# The paths below base_url (which ends in the API version).
PLACE_PATH = f"/projects/{PROJECT}/locations/{LOCATION}/publishers"


def test_the_publisher_named_or_implied_by_the_model():
    assert publisher({"publisher": "anthropic", "model": "gemini-x"}) == "anthropic"
    assert publisher({"publisher": "google", "model": "claude-x"}) == "google"
    assert publisher({"model": "claude-sonnet-4@20250514"}) == "anthropic"
    assert publisher({"model": "gemini-2.5-pro"}) == publisher({}) == "google"


@pytest.mark.parametrize("kind", ["gemini-fake", "claude-fake@20250101"])
def test_each_publishers_paths_id_and_config_errors(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    token = tmp_path / "token"
    token.write_text("ya29.t")

    def build(**params: Any) -> Any:
        entry = vertex("http://127.0.0.1:9", model=kind, **params)
        return registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")

    built = build(token_file=str(token), stream=False)
    assert built.id == "vertex"
    if kind.startswith("claude"):
        # A version after @ stays as Vertex names it; a unary call is rawPredict.
        assert built.messages_path() == (
            f"{PLACE_PATH}/anthropic/models/claude-fake@20250101:rawPredict"
        )
    else:
        assert built.model_path("models/a/b c") == f"{PLACE_PATH}/google/models/a%2Fb%20c"
    monkeypatch.delenv("NO_SUCH_TOKEN_VARIABLE", raising=False)
    with pytest.raises(ConfigError, match=r"^models\[0\]\.providers\[0\]\.params\.token_env"):
        build(token_env="NO_SUCH_TOKEN_VARIABLE")
    if kind.startswith("claude"):  # the Anthropic adapter's own key check names it too
        monkeypatch.delenv("NO_SUCH_KEY_VARIABLE", raising=False)
        with pytest.raises(ConfigError, match=r"^models\[0\]\.providers\[0\]\.params\.api_key"):
            build(token_file=str(token), api_key_env="NO_SUCH_KEY_VARIABLE")


async def test_vertex_embeds_text_not_token_ids(monkeypatch: pytest.MonkeyPatch):
    async with embedder(monkeypatch) as (_, fake, sdk):
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.embeddings.create(model="e", input=[[1, 2, 3]])
    assert refused.value.body["param"] == "input"  # type: ignore[index]
    assert refused.value.body["message"] == "input: vertex (Vertex) embeds text, not token ids"  # type: ignore[index]
    assert fake.seen == []


async def test_vertex_embeddings_that_do_not_add_up_are_named(monkeypatch: pytest.MonkeyPatch):
    async with embedder(monkeypatch) as (wire, _, sdk):
        wire.statistics = False  # no counts: the gateway estimates them
        estimated = await sdk.embeddings.create(model="e", input=["one two", "three"])
        wire.statistics, wire.token_count = True, "many"
        with pytest.raises(openai.APIStatusError) as malformed:
            await sdk.embeddings.create(model="e", input=["one"])
        wire.token_count, wire.embeddings_missing = None, 1
        with pytest.raises(openai.APIStatusError) as short:
            await sdk.embeddings.create(model="e", input=["one", "two"])
    assert estimated.usage.prompt_tokens > 0 and len(estimated.data) == 2
    assert malformed.value.body["message"] == (  # type: ignore[index]
        "all providers of model e failed "
        "(vertex: malformed answer (statistics.token_count is not a token count: many))"
    )
    assert short.value.body["message"] == (  # type: ignore[index]
        "all providers of model e failed "
        "(vertex: malformed answer (predictions do not match the inputs))"
    )


class EchoingVertex(VertexGeminiWire):
    """Vertex answering errors that quote the token it was given, bare."""

    def error(self, status: int) -> Any:
        (token,) = self.tokens.valid
        return error(status, "INTERNAL", f"token {token} is not allowed here")


@pytest.mark.parametrize("source", ["token_env", "token_file", "credentials_file"])
async def test_a_token_an_upstream_quotes_back_never_reaches_the_caller(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A token of its own: a token once remembered stays redacted in this process.
    token = f"ya29.quoted-by-{source}"
    tokens = Tokens(valid={token}, prefix=f"{token}-")
    monkeypatch.setenv("VERTEX_TEST_TOKEN", token)
    (tmp_path / "token").write_text(token)
    async with token_server(tokens) as (_, info), serving(EchoingVertex(tokens=tokens)) as fake:
        if source == "credentials_file":
            tokens.valid.clear()  # only the one the endpoint issues
        given = {"token_env": "VERTEX_TEST_TOKEN", "token_file": str(tmp_path / "token"),
                 "credentials_file": key_file(tmp_path, info)}  # fmt: skip
        fake.faults = [Fault("status", 500)]
        entry = vertex(fake.url, **{source: given[source]})
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert failed.value.body["message"] == (  # type: ignore[index]
        "all providers of model m failed "
        "(vertex: upstream answered HTTP 500: token [redacted] is not allowed here)"
    )


async def test_an_embedding_failure_and_token_ids_name_the_provider(
    monkeypatch: pytest.MonkeyPatch,
):
    async with embedder(monkeypatch) as (_, fake, sdk):
        fake.faults = [Fault("status", 400)]
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.embeddings.create(model="e", input=["one"])
        entry = vertex(
            fake.url, token_env="VERTEX_TEST_TOKEN", embedding_model="text-embedding-fake"
        )
        built = registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")
        try:
            with pytest.raises(UpstreamRejected) as ids:
                await built.embed(EmbeddingRequest(inputs=((1, 2),)))
        finally:
            await built.aclose()
    assert refused.value.body["message"].startswith("vertex: upstream answered HTTP 400")  # type: ignore[index]
    assert ids.value.metadata == {"provider": "vertex", "field": "input"}
