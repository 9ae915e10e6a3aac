"""Speech generation and Imagen through the gemini and vertex adapters, against a strict
fake of both (tests/support/upstreams/google_media.py), through the gateway and the
`openai` SDK: the inline PCM answered as WAV or PCM and billed by Google's tokens,
Imagen's predictions answered as images billed per image, and what Google does not
serve refused by name."""

from __future__ import annotations

import base64
import io
import wave
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests.integration.rest.test_operation_run import last_row
from tests.support.gateways import API_KEY, running_gateway
from tests.support.upstreams.base import FakeUpstream, Fault, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.google_media import GoogleMediaWire, picture
from tests.support.upstreams.vertex import LOCATION, PROJECT, Tokens

PRICE = {"input": 1.0, "output": 20.0, "per_image": {"default": 0.04}}
TOKEN = "ya29.given-token"


def media(adapter: str, url: str, backup: str | None = None, **params: Any) -> dict[str, Any]:
    """`tts` (speech) and `imagen` (image generation) on `adapter` at `url` (and a backup
    of the same kind at `backup`)."""
    if adapter == "vertex":
        params = {"project": PROJECT, "location": LOCATION, "api_key_env": None,
                  "token_env": "VERTEX_TEST_TOKEN", **params}  # fmt: skip
    models = []
    for name, upstream, capability in (("tts", "gemini-2.5-flash-preview-tts", "speech"),
                                       ("imagen", "imagen-4.0-generate-001",
                                        "image_generation")):  # fmt: skip
        providers = [provider(f"{name}-p", adapter, url, model=upstream, **params)]
        if backup is not None:
            providers.append(provider(f"{name}-b", adapter, backup, "backup", model=upstream,
                                      **params))  # fmt: skip
        entry = model(name, *providers, price=PRICE)
        entry["capabilities"] = [capability]
        models.append(entry)
    return with_models(*models)


@pytest.fixture(params=["gemini", "vertex"])
async def env(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, FakeUpstream, GoogleMediaWire, Any, openai.AsyncOpenAI]]:
    adapter = request.param
    monkeypatch.setenv("VERTEX_TEST_TOKEN", TOKEN)
    wire = GoogleMediaWire(tokens=Tokens(valid={TOKEN}) if adapter == "vertex" else None)
    async with (
        serving(wire) as fake,
        running_gateway(media(adapter, fake.url)) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        yield adapter, fake, wire, gw, sdk


async def test_speech_is_googles_pcm_as_wav_or_pcm_billed_by_its_tokens(env: Any) -> None:
    adapter, fake, wire, gw, sdk = env
    async with sdk.audio.speech.with_streaming_response.create(
        model="tts", input="Have a wonderful day", voice="Kore", response_format="wav",
        instructions="Say cheerfully",
    ) as response:  # fmt: skip
        assert response.headers["content-type"] == "audio/wav"
        audio = await response.read()
    row = await last_row(gw)
    async with sdk.audio.speech.with_streaming_response.create(
        model="tts", input="Hello", voice="Puck", response_format="pcm"
    ) as response:
        assert response.headers["content-type"] == "audio/pcm"
        pcm = await response.read()
    with wave.open(io.BytesIO(audio)) as read:
        assert (read.getframerate(), read.getsampwidth(), read.getnchannels()) == (24_000, 2, 1)
        assert read.readframes(read.getnframes()) == pcm == b"\x10\x00" * wire.samples
    sent = fake.seen[0]
    expected = "/v1beta/models/gemini-2.5-flash-preview-tts:generateContent" \
        if adapter == "gemini" else f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/gemini-2.5-flash-preview-tts:generateContent"  # noqa: E501  # fmt: skip
    assert sent.path == expected
    assert sent.body["contents"] == [{"role": "user", "parts": [
        {"text": "Say cheerfully: Have a wonderful day"}]}]  # fmt: skip
    assert (row["unit"], row["prompt_tokens"], row["completion_tokens"]) == ("tokens", 9, 60)
    assert row["total_cost_usd"] == pytest.approx((9 * 1.0 + 60 * 20.0) / 1e6)
    assert wire.refused == []


async def test_imagen_answers_images_billed_per_image(env: Any) -> None:
    adapter, fake, wire, gw, sdk = env
    got = await sdk.images.generate(
        model="imagen", prompt="a lighthouse", n=3, size="1792x1024", output_format="jpeg"
    )
    row = await last_row(gw)
    assert got.data is not None
    assert [base64.b64decode(i.b64_json or "") for i in got.data] == [picture(i) for i in range(3)]
    assert got.output_format == "jpeg"  # type: ignore[attr-defined]
    sent = fake.seen[0]
    assert sent.path.endswith("/models/imagen-4.0-generate-001:predict")
    assert sent.body == {
        "instances": [{"prompt": "a lighthouse"}],
        "parameters": {
            "sampleCount": 3,
            "aspectRatio": "16:9",
            "outputOptions": {"mimeType": "image/jpeg"},
        },
    }
    assert (row["unit"], row["units"]) == ("images", 3)
    assert row["total_cost_usd"] == pytest.approx(3 * 0.04)
    assert wire.refused == []


async def test_what_google_does_not_serve_is_refused_by_name(env: Any) -> None:
    _, fake, _, _, sdk = env
    refusals = []
    for call in (
        sdk.images.generate(model="imagen", prompt="p", n=5),
        sdk.images.generate(model="imagen", prompt="p", background="transparent"),
        sdk.images.edit(model="imagen", prompt="p", image=("a.png", picture(0), "image/png")),
        sdk.audio.speech.create(model="tts", input="hi", voice="Kore", speed=1.5),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            await call
        refusals.append(refused.value.body["param"])  # type: ignore[index]
    assert refusals == ["n", "background", "image", "speed"]
    assert fake.seen == []


async def test_a_google_failure_fails_over() -> None:
    primary_wire, backup_wire = GoogleMediaWire(), GoogleMediaWire()
    async with (
        serving(primary_wire, faults=[Fault("status", 503), Fault("status", 503)]) as primary,
        serving(backup_wire) as backup,
        running_gateway(media("gemini", primary.url, backup.url)) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        speech = await sdk.audio.speech.create(model="tts", input="hi", voice="Kore")
        made = await sdk.images.generate(model="imagen", prompt="a cat")
    assert speech.content.startswith(b"RIFF")  # mp3 asked: answered as WAV
    assert made.data is not None and len(made.data) == 1
    assert len(primary.seen) == len(backup.seen) == 2
    assert primary_wire.refused == backup_wire.refused == []


async def test_the_fake_refuses_what_google_refuses() -> None:
    import httpx

    from tests.support.upstreams.checks import KEY

    wire = GoogleMediaWire()
    speech = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
              "generationConfig": {"responseModalities": ["AUDIO"], "speechConfig": {
                  "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}}}}  # fmt: skip
    tts = "/v1beta/models/gemini-2.5-flash-preview-tts:generateContent"
    imagen = "/v1beta/models/imagen-4.0-generate-001:predict"
    async with serving(wire) as fake, httpx.AsyncClient(base_url=fake.url) as h:
        key = {"x-goog-api-key": KEY}
        got = [
            (await h.post(tts, json=speech)).status_code,
            (
                await h.post(
                    tts,
                    json={**speech, "generationConfig": {"responseModalities": ["TEXT"]}},
                    headers=key,
                )
            ).status_code,  # fmt: skip
            (await h.post(tts, json={**speech, "speed": 2}, headers=key)).status_code,
            (
                await h.post(
                    imagen,
                    json={"instances": [{"prompt": "p"}], "parameters": {"sampleCount": 5}},
                    headers=key,
                )
            ).status_code,  # fmt: skip
            (
                await h.post(
                    imagen,
                    json={"instances": [{"prompt": "p"}], "parameters": {"aspectRatio": "3:2"}},
                    headers=key,
                )
            ).status_code,  # fmt: skip
            (await h.post(tts, json=speech, headers=key)).status_code,
        ]
    assert got == [403, 400, 400, 400, 400, 200]
