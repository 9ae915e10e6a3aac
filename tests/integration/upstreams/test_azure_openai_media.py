"""The azure_openai adapter's audio and images against a strict fake of Azure OpenAI
(tests/support/upstreams/azure.py, AzureMediaWire), through the gateway and the `openai`
SDK: each operation at its deployment's URL with the api-version that serves it and the
key in `api-key`, billed as OpenAI's; moderation and rerank, which Azure does not serve,
refused by name before any upstream is asked."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from server.providers.simulated_audio import wav
from tests.integration.rest.test_operation_run import last_row
from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.azure import AzureMediaWire
from tests.support.upstreams.base import FakeUpstream, Fault, serving
from tests.support.upstreams.checks import KEY
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.images import image

PREVIEW = "2025-04-01-preview"
TWO_SECONDS = wav(bytes(96_000))
PNG = ("a.png", image(0), "image/png")


def azure(
    url: str, deployment: str, kind: str = "primary", name: str = "", **params: Any
) -> dict[str, Any]:
    provider_id = name or f"azure-{deployment}-{kind}"
    return provider(provider_id, "azure_openai", url, kind, deployment=deployment, **params)


def media_models(url: str, backup: str | None = None) -> dict[str, Any]:
    """whisper (transcription, GA version), tts (speech, preview), image (generations
    and edits, preview), and a model that declares what Azure does not serve."""
    whisper = model("whisper-az", azure(url, "whisper"), price={"input": 1.0, "output": 4.0,
                                                                "per_second": 0.0001})  # fmt: skip
    whisper["capabilities"] = ["transcription"]
    tts = model("tts-az", azure(url, "tts", api_version=PREVIEW),
                price={"input": 1.0, "output": 4.0, "per_million_characters": 15.0})  # fmt: skip
    tts["capabilities"] = ["speech"]
    providers = [azure(url, "image", api_version=PREVIEW, model="gpt-image-1")]
    if backup is not None:
        providers.append(azure(backup, "image", "backup", api_version=PREVIEW, model="gpt-image-1"))
    images = model("image-az", *providers, price={"input": 5.0, "output": 40.0})
    images["capabilities"] = ["image_generation"]
    other = model("other-az", azure(url, "whisper", name="azure-other"))
    other["capabilities"] = ["moderation", "rerank"]
    return with_models(whisper, tts, images, other)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeUpstream, AzureMediaWire]]:
    wire = AzureMediaWire()
    async with serving(wire) as upstream:
        wire.images.base_url = upstream.url
        yield upstream, wire


async def test_transcriptions_at_the_deployment_url_with_the_api_key(
    fake: tuple[FakeUpstream, AzureMediaWire],
) -> None:
    upstream, wire = fake
    async with (
        running_gateway(media_models(upstream.url)) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        got = await sdk.audio.transcriptions.create(
            model="whisper-az", file=("a.wav", TWO_SECONDS), response_format="verbose_json",
            timestamp_granularities=["word"],
        )  # fmt: skip
        row = await last_row(gw)
        english = await sdk.audio.translations.create(
            model="whisper-az", file=("a.wav", TWO_SECONDS), response_format="srt"
        )
    assert got.text == f"heard {len(TWO_SECONDS)} bytes"
    assert [w.word for w in got.words or []] == got.text.split()
    assert (row["unit"], row["units"]) == ("seconds", 7)
    assert row["total_cost_usd"] == pytest.approx(7 * 0.0001)
    assert english.startswith("1\n00:00:00,000 --> 00:00:07,000\nheard")
    first, second = upstream.seen
    assert (first.path, first.query) == (
        "/openai/deployments/whisper/audio/transcriptions", "api-version=2024-10-21",
    )  # fmt: skip
    assert second.path == "/openai/deployments/whisper/audio/translations"
    assert first.headers["api-key"] == KEY and "authorization" not in first.headers
    assert first.body["_form"]["file"] == TWO_SECONDS
    assert upstream.problems == [] and wire.audio.refused == []


async def test_speech_is_relayed_from_a_preview_api_version(
    fake: tuple[FakeUpstream, AzureMediaWire],
) -> None:
    upstream, wire = fake
    async with (
        running_gateway(media_models(upstream.url)) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        async with sdk.audio.speech.with_streaming_response.create(
            model="tts-az", input="Say it", voice="nova", response_format="mp3"
        ) as response:
            assert response.headers["content-type"] == "audio/mpeg"
            audio = await response.read()
        row = await last_row(gw)
    assert audio == b"".join(bytes([65 + i]) * 1000 for i in range(4))
    seen = upstream.seen[0]
    assert (seen.path, seen.query) == ("/openai/deployments/tts/audio/speech",
                                       f"api-version={PREVIEW}")  # fmt: skip
    assert seen.body["_json"]["voice"] == "nova"
    assert (row["unit"], row["units"]) == ("characters", len("Say it"))
    assert upstream.problems == []


async def test_images_are_generated_and_edited_and_fail_over() -> None:
    primary_wire, backup_wire = AzureMediaWire(), AzureMediaWire()
    async with (
        serving(primary_wire) as primary,
        serving(backup_wire) as backup,
        running_gateway(media_models(primary.url, backup.url)) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        made = await sdk.images.generate(model="image-az", prompt="a cat", n=2, size="1024x1024")
        primary.faults = [Fault("status", 503)]
        edited = await sdk.images.edit(
            model="image-az", prompt="a hat", image=[PNG, ("b.png", image(1), "image/png")],
            mask=("m.png", image(2), "image/png"),
        )  # fmt: skip
    assert made.data is not None
    assert [base64.b64decode(i.b64_json or "") for i in made.data] == [image(0), image(1)]
    assert made.usage is not None and made.usage.output_tokens == 272
    sent = primary.seen[0]
    assert (sent.path, sent.query) == ("/openai/deployments/image/images/generations",
                                       f"api-version={PREVIEW}")  # fmt: skip
    assert sent.body["_json"]["prompt"] == "a cat"
    assert [s.path for s in backup.seen] == ["/openai/deployments/image/images/edits"]
    form = backup.seen[0].body["_form"]
    assert form["image[]"] == [image(0), image(1)] and form["mask"] == image(2)
    assert edited.data is not None and len(edited.data) == 1
    assert primary.problems == [] and backup.problems == []


async def test_what_azure_does_not_serve_is_refused_naming_the_model(
    fake: tuple[FakeUpstream, AzureMediaWire],
) -> None:
    upstream, _ = fake
    auth = {"x-api-key": API_KEY}
    async with (
        running_gateway(media_models(upstream.url)) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=10) as c,
    ):
        moderation = await c.post(
            "/v1/moderations", json={"model": "other-az", "input": "hi"}, headers=auth
        )
        rerank = await c.post(
            "/v1/rerank", json={"model": "other-az", "query": "q", "documents": ["d"]},
            headers=auth,
        )  # fmt: skip
    for got in (moderation, rerank):
        assert got.status_code == 400, got.text
        error = got.json()["error"]
        assert error["param"] == "model" and "azure-other" in error["message"]
    assert upstream.seen == []


async def test_the_fake_refuses_what_azure_refuses(
    fake: tuple[FakeUpstream, AzureMediaWire],
) -> None:
    upstream, wire = fake
    speech = {"model": "tts", "input": "hi", "voice": "nova"}
    async with httpx.AsyncClient(base_url=upstream.url, headers={"api-key": KEY}) as h:
        bearer = await h.post(
            f"/openai/deployments/tts/audio/speech?api-version={PREVIEW}", json=speech,
            headers={"api-key": "", "authorization": f"Bearer {KEY}"},
        )  # fmt: skip
        ga_speech = await h.post(
            "/openai/deployments/tts/audio/speech?api-version=2024-10-21", json=speech
        )
        no_version = await h.post("/openai/deployments/tts/audio/speech", json=speech)
        unknown = await h.post(
            f"/openai/deployments/nobody/audio/speech?api-version={PREVIEW}", json=speech
        )
        moderations = await h.post(
            f"/openai/deployments/tts/moderations?api-version={PREVIEW}", json={"input": "hi"}
        )
        rerank = await h.post("/openai/v1/rerank", json={"query": "q", "documents": ["d"]})
        bad_voice = await h.post(
            f"/openai/deployments/tts/audio/speech?api-version={PREVIEW}",
            json={**speech, "voice": "nobody"},
        )
        ok = await h.post(
            f"/openai/deployments/tts/audio/speech?api-version={PREVIEW}", json=speech
        )
    assert bearer.status_code == 401
    # A version Azure knows that lacks the operation: not found; none at all: 400.
    assert [r.status_code for r in (ga_speech, no_version, unknown)] == [404, 400, 404]
    assert moderations.status_code == rerank.status_code == 404
    assert bad_voice.status_code == 400 and "voice" in bad_voice.text
    assert ok.status_code == 200 and ok.content.startswith(b"A" * 1000)
