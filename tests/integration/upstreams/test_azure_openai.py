"""The azure_openai adapter against a strict fake of Azure OpenAI (tests/support/
upstreams/azure.py), through the gateway and the `openai` SDK: deployment URLs with
api-version or the v1 path, the key in `api-key` or an Entra token (refreshed from a
file), the content filter as a named 400 or a content_filter finish, embeddings, and
failover to another kind of upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from server.base.config import ConfigError, ProviderConfig
from server.providers import registry
from tests.support.gateways import API_KEY, openai_gateway, running_gateway
from tests.support.upstreams.azure import BLOCKED_WORD, FILTERED_WORD, AzureWire
from tests.support.upstreams.base import TEXT, FakeUpstream, Fault, serving
from tests.support.upstreams.checks import KEY
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

DEPLOYMENT = "gpt-fake-deployment"
HELLO = [{"role": "user", "content": "Say hello."}]


def azure(url: str, **params: Any) -> dict[str, Any]:
    return provider("azure", "azure_openai", url, **params)


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    async with serving(AzureWire()) as upstream:
        yield upstream


async def test_a_deployment_url_with_api_version_and_the_api_key_header(fake: FakeUpstream):
    data = with_models(model("m", azure(fake.url, deployment=DEPLOYMENT)))
    async with openai_gateway(data) as (sdk, _):
        reply = await sdk.chat.completions.create(
            model="m",
            messages=HELLO,
            temperature=0.3,
            max_tokens=5,  # type: ignore[arg-type]
        )
        stream = await sdk.chat.completions.create(
            model="m",
            messages=HELLO,
            stream=True,  # type: ignore[arg-type]
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert reply.choices[0].message.content == "".join(TEXT[:5])
    assert streamed == "".join(TEXT)
    assert fake.problems == []
    first = fake.seen[0]
    assert first.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert first.query == "api-version=2024-10-21"
    assert first.headers["api-key"] == KEY and "authorization" not in first.headers
    assert (first.body["temperature"], first.body["max_tokens"]) == (0.3, 5)


async def test_the_v1_path_names_the_model_and_takes_no_api_version(fake: FakeUpstream):
    data = with_models(model("m", azure(fake.url)))
    async with openai_gateway(data) as (sdk, _):
        reply = await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "".join(TEXT)
    seen = fake.seen[0]
    assert (seen.path, seen.query, seen.body["model"]) == (
        "/openai/v1/chat/completions",
        "",
        "gpt-fake",
    )


async def test_an_entra_token_from_a_file_is_read_again_for_each_request(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("entra-token-one\n")
    wire = AzureWire(token="entra-token-one")
    async with serving(wire) as fake:
        entry = azure(fake.url, deployment=DEPLOYMENT, api_key_env=None, token_file=str(token_file))
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
            # The token is refreshed outside the gateway: the next request carries it.
            token_file.write_text("entra-token-two\n")
            wire.token = "entra-token-two"
            await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert [s.headers["authorization"] for s in fake.seen] == [
        "Bearer entra-token-one", "Bearer entra-token-two"
    ]  # fmt: skip
    assert fake.problems == [] and all("api-key" not in s.headers for s in fake.seen)


async def test_an_entra_token_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AZURE_TEST_TOKEN", "entra-token-env")
    async with serving(AzureWire(token="entra-token-env")) as fake:
        entry = azure(fake.url, deployment=DEPLOYMENT, api_key_env=None,
                      token_env="AZURE_TEST_TOKEN")  # fmt: skip
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert fake.problems == []
    assert fake.seen[0].headers["authorization"] == "Bearer entra-token-env"
    assert "api-key" not in fake.seen[0].headers


async def test_a_token_file_gone_fails_the_provider_by_name(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("entra-token-one\n")
    async with serving(AzureWire(token="entra-token-one")) as fake:
        entry = azure(fake.url, deployment=DEPLOYMENT, api_key_env=None, token_file=str(token_file))
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            token_file.unlink()
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert failed.value.status_code == 503  # no upstream answered
    assert failed.value.body["message"] == (  # type: ignore[index]
        "all providers of model m failed (azure: cannot read its token_file (FileNotFoundError))"
    )
    assert fake.seen == []


async def test_the_content_filter_is_a_named_error_or_a_finish_reason(fake: FakeUpstream):
    data = with_models(model("m", azure(fake.url, deployment=DEPLOYMENT)))
    async with openai_gateway(data) as (sdk, _):
        with pytest.raises(openai.BadRequestError) as refused:
            await sdk.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"Tell me of {BLOCKED_WORD}"}]
            )
        cut = await sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"Tell me of {FILTERED_WORD}"}]
        )
        stream = await sdk.chat.completions.create(
            model="m", stream=True,
            messages=[{"role": "user", "content": f"Tell me of {FILTERED_WORD}"}],
        )  # fmt: skip
        finishes = [c.choices[0].finish_reason async for c in stream if c.choices]
    assert "content_filter" in refused.value.message
    assert "content management policy" in refused.value.message
    assert cut.choices[0].finish_reason == "content_filter"
    assert cut.choices[0].message.content == "".join(TEXT[:2])
    assert finishes[-1] == "content_filter"


async def test_embeddings_through_a_deployment(fake: FakeUpstream):
    entry = azure(fake.url, deployment=DEPLOYMENT)
    data = with_models(model("e", entry))
    async with openai_gateway(data) as (sdk, _):
        vectors = await sdk.embeddings.create(model="e", input=["one", "two"])
    assert len(vectors.data) == 2
    assert fake.seen[-1].path == f"/openai/deployments/{DEPLOYMENT}/embeddings"
    assert fake.seen[-1].query == "api-version=2024-10-21"


async def test_failover_from_azure_to_another_kind_of_upstream(fake: FakeUpstream):
    fake.default = Fault("status", status=500)
    async with serving(OpenAIWire(), text=("From", " OpenAI")) as backup:
        data = with_models(model("m", azure(fake.url, deployment=DEPLOYMENT),
                                 provider("openai", "openai", backup.url, kind="backup")))  # fmt: skip
        async with openai_gateway(data) as (sdk, _):
            reply = await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "From OpenAI"
    assert len(fake.seen) >= 1


@pytest.mark.parametrize(
    ("wire", "params", "why"),
    [
        (AzureWire(), {"deployment": "no-such-deployment"}, "unknown deployment"),
        (AzureWire(), {"deployment": DEPLOYMENT, "api_version": "1999-01-01"}, "bad api-version"),
        (AzureWire(key="sk-another-key-0123456789"), {"deployment": DEPLOYMENT}, "bad credential"),
    ],
)
async def test_the_fakes_checks_can_fail(wire: AzureWire, params: dict[str, Any], why: str):
    async with (
        serving(wire) as fake,
        openai_gateway(with_models(model("m", azure(fake.url, **params)))) as (sdk, _),
    ):
        with pytest.raises(openai.APIStatusError):
            await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert fake.problems == [why]


def test_one_sign_in_and_a_token_file_that_exists(tmp_path: Path):
    def build(**params: Any) -> None:
        entry = azure("http://127.0.0.1:9", deployment=DEPLOYMENT, **params)
        registry.build(ProviderConfig.model_validate(entry), "models[0].providers[0]")

    with pytest.raises(ConfigError, match="give one of api_key_env, token_env and token_file"):
        build(token_env="SOME_TOKEN")
    with pytest.raises(ConfigError, match=r"params\.token_file: .* is not a file"):
        build(api_key_env=None, token_file=str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match=r"params\.token_env: environment variable NO_SUCH_"):
        build(api_key_env=None, token_env="NO_SUCH_TOKEN_VARIABLE")
    with pytest.raises(ConfigError, match=r"^models\[0\]\.providers\[0\]\.params\.api_key_env"):
        build(api_key_env="NO_SUCH_KEY_VARIABLE")


def test_the_deployment_and_api_version_are_escaped_whole():
    entry = azure("http://127.0.0.1:9", deployment="a/b c", api_version="2024/x y")
    built = registry.build(ProviderConfig.model_validate(entry), "p")
    assert built.path("/chat/completions") == (  # type: ignore[attr-defined]
        "/openai/deployments/a%2Fb%20c/chat/completions?api-version=2024%2Fx%20y"
    )


async def test_the_messages_and_responses_dialects_reach_azure(fake: FakeUpstream):
    import anthropic

    data = with_models(model("m", azure(fake.url, deployment=DEPLOYMENT)))
    async with running_gateway(data) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        messages = anthropic.AsyncAnthropic(base_url=base, api_key=API_KEY, max_retries=0)
        responses = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0)
        async with messages, responses:
            said = await messages.messages.create(
                model="m", max_tokens=64, system="Be brief.", messages=HELLO
            )
            answered = await responses.responses.create(
                model="m", input="Say hello.", instructions="Be brief."
            )
    assert said.content[0].text == "".join(TEXT)  # type: ignore[union-attr]
    assert answered.output_text == "".join(TEXT)
    assert fake.problems == []
    for seen in fake.seen:
        assert seen.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
        assert seen.body["messages"][0] == {"role": "system", "content": "Be brief."}


class EchoingAzure(AzureWire):
    """Azure answering errors that quote the token it was given, bare."""

    def error(self, status: int) -> Any:
        return {"error": {"message": f"token {self.token} is not allowed here", "code": "500"}}


@pytest.mark.parametrize("source", ["token_env", "token_file"])
async def test_a_token_an_upstream_quotes_back_never_reaches_the_caller(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A token of its own: a token once remembered stays redacted in this process.
    token = f"entra-token-quoted-by-{source}"
    monkeypatch.setenv("AZURE_TEST_TOKEN", token)
    (tmp_path / "token").write_text(token)
    given = {"token_env": "AZURE_TEST_TOKEN", "token_file": str(tmp_path / "token")}
    async with serving(EchoingAzure(token=token)) as fake:
        fake.faults = [Fault("status", 500)]
        entry = azure(fake.url, deployment=DEPLOYMENT, api_key_env=None,
                      **{source: given[source]})  # fmt: skip
        async with openai_gateway(with_models(model("m", entry))) as (sdk, _):
            with pytest.raises(openai.APIStatusError) as failed:
                await sdk.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
    assert failed.value.body["message"] == (  # type: ignore[index]
        "all providers of model m failed "
        "(azure: upstream answered HTTP 500: token [redacted] is not allowed here)"
    )
