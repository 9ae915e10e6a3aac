"""Uploads through the edge tier: an audio file or an edit's images cross from the
facade to the core over gRPC in one message, so each upload method's message is bounded
by its documented upload bound (25 MB of audio, 50 MB of images) instead of
`server.max_body_bytes`; past the bound the answer is 413 naming the field, whether
the facade or the core finds it, and a body whose declared length is past it is
refused before it is read."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import openai
import pytest
from gateway.v1 import audio_service_pb2 as audio_pb
from gateway.v1 import audio_service_pb2_grpc, image_service_pb2_grpc
from gateway.v1 import image_service_pb2 as image_pb

from server.base.audio import MAX_AUDIO_BYTES
from server.base.uploads import FORM_SLACK
from server.providers.simulated_audio import wav
from tests.support.facade import both_modes, declared_past, facade
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API, details
from tests.support.upstreams.base import serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.images import ImagesWire, image

AUTH = {"x-api-key": API_KEY}
# Six seconds short of a minute of 24 kHz 16-bit mono audio: about 2.5 MB, past the
# default `server.max_body_bytes` (1 MB) and gRPC's own default bound (4 MB) both.
MINUTE = wav(b"\x01\x02" * 24_000 * 54)
BIG_IMAGE = bytes(3 << 20)
BOUNDARY = "b0und"
FORM = {"content-type": f"multipart/form-data; boundary={BOUNDARY}", **AUTH}


def form_head(fields: dict[str, str], file_field: str) -> bytes:
    """A form's text fields and the head of its file part (the file's bytes follow)."""
    parts = [
        f'--{BOUNDARY}\r\ncontent-disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields.items()
    ]
    parts.append(
        f'--{BOUNDARY}\r\ncontent-disposition: form-data; name="{file_field}"; '
        'filename="upload"\r\n\r\n'
    )
    return "".join(parts).encode()


TAIL = f"\r\n--{BOUNDARY}--\r\n".encode()


@pytest.fixture
async def edge() -> AsyncIterator[str]:
    async with facade("edge") as url:
        yield url


async def test_uploads_past_a_megabyte_cross_the_edge_tier(edge: str) -> None:
    async with openai.AsyncOpenAI(base_url=f"{edge}/v1", api_key=API_KEY, max_retries=0) as sdk:
        whole = await sdk.audio.transcriptions.create(model="sim-audio", file=("a.wav", MINUTE))
        usage: Any = whole.usage
        assert whole.text.startswith("(simulated) ") and usage.seconds == 54.0
        stream = await sdk.audio.transcriptions.create(
            model="sim-audio", file=("a.wav", MINUTE), stream=True
        )
        events = [event async for event in stream]
        assert events[-1].type == "transcript.text.done" and events[-1].text == whole.text
        english = await sdk.audio.translations.create(model="sim-audio", file=("a.wav", MINUTE))
        assert english.text == whole.text
        edited = await sdk.images.edit(
            model="sim-image", prompt="a hat", image=[("a.png", BIG_IMAGE), ("b.png", BIG_IMAGE)],
            mask=("m.png", BIG_IMAGE), size="256x256",
        )  # fmt: skip
        assert edited.data is not None and edited.data[0].b64_json


async def test_an_upload_at_its_bound_crosses_the_edge_tier(edge: str) -> None:
    head = form_head({"model": "sim-audio", "response_format": "text"}, "file")
    async with httpx.AsyncClient(base_url=edge, timeout=60) as c:
        at = await c.post(
            "/v1/audio/transcriptions", content=head + bytes(MAX_AUDIO_BYTES) + TAIL, headers=FORM
        )
        past = await c.post(
            "/v1/audio/transcriptions",
            content=head + bytes(MAX_AUDIO_BYTES + 1) + TAIL,
            headers=FORM,
        )
    assert at.status_code == 200, at.text
    assert at.text.startswith("(simulated)")
    assert past.status_code == 413, past.text
    error = past.json()["error"]
    assert error["param"] == "file" and str(MAX_AUDIO_BYTES) in error["message"]


@both_modes
async def test_a_transcription_declared_past_25_mb_is_refused_before_its_body(
    mode: str,
) -> None:
    head = form_head({"model": "sim-audio"}, "file")
    async with facade(mode) as url:
        # Only the head of the form is sent: the answer cannot wait for the rest.
        status, error = await declared_past(
            url, "/v1/audio/transcriptions", FORM, MAX_AUDIO_BYTES + FORM_SLACK + 1, head
        )
    assert status == 413
    assert error["param"] == "file" and str(MAX_AUDIO_BYTES) in error["message"]


@pytest.fixture
async def gw() -> AsyncIterator[Any]:
    data = default_config_dict()
    data["server"]["max_body_bytes"] = 64 * 1024
    async with running_gateway(data) as running:
        yield running


async def test_grpc_bounds_each_upload_method_by_its_upload(gw: Any) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        audio = audio_service_pb2_grpc.AudioServiceStub(channel)
        got = await audio.CreateTranscription(
            audio_pb.CreateTranscriptionRequest(model="sim-audio", file=MINUTE), metadata=API
        )
        assert got.usage.seconds == 54.0
        images = image_service_pb2_grpc.ImageServiceStub(channel)
        edit = image_pb.EditImageRequest(
            model="sim-image", prompt="a hat", size="256x256",
            image=[image_pb.ImageFile(data=BIG_IMAGE, filename="a.png")],
        )  # fmt: skip
        assert len((await images.EditImage(edit, metadata=API)).data) == 1
        past = audio_pb.CreateTranscriptionRequest(
            model="sim-audio", file=bytes(MAX_AUDIO_BYTES + FORM_SLACK)
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await audio.CreateTranscription(past, metadata=API)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        found = details(refused.value)
        assert found["ErrorInfo"].reason == "REQUEST_TOO_LARGE"  # type: ignore[attr-defined]
        violations = found["BadRequest"].field_violations  # type: ignore[attr-defined]
        assert [v.field for v in violations] == ["file"]
    assert gw.gateway.observer.in_flight == 0


async def test_the_edge_answers_413_when_the_core_refuses_the_size(gw: Any) -> None:
    """The core's bound is the smaller (its max_body_bytes is 64 kB): the edge says 413,
    as the core would over REST, not a 400 or a 429."""
    async with (
        running_gateway(grpc_target=f"127.0.0.1:{gw.grpc_port}") as edge_gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{edge_gw.http_port}", timeout=30) as c,
    ):
        got = await c.post(
            "/v1/chat/completions", headers=AUTH,
            json={"model": "sim-mini", "messages": [{"role": "user", "content": "x" * 100_000}]},
        )  # fmt: skip
    assert got.status_code == 413, got.text
    assert got.json()["error"]["type"] == "invalid_request_error"


async def test_an_answer_past_4_mb_crosses_the_edge_tier() -> None:
    """Two images of 3 MB each: past gRPC's default bound on what a channel receives."""
    wire = ImagesWire(padding=3 << 20)
    async with serving(wire) as upstream:
        entry = model("images-fake", provider("images-primary", "openai", upstream.url,
                                               model="gpt-image-1"))  # fmt: skip
        entry["capabilities"] = ["image_generation"]
        async with (
            facade("edge", with_models(entry)) as url,
            httpx.AsyncClient(base_url=url, timeout=60) as c,
        ):
            got = await c.post(
                "/v1/images/generations", headers=AUTH,
                json={"model": "images-fake", "prompt": "a cat", "n": 2},
            )  # fmt: skip
    assert got.status_code == 200, got.text[:500]
    assert [len(base64.b64decode(i["b64_json"])) for i in got.json()["data"]] == [
        len(image(i)) + (3 << 20) for i in range(2)
    ]
    assert wire.refused == []


@both_modes
async def test_an_upload_sent_as_json_takes_the_same_bound(mode: str) -> None:
    """The JSON form of a transcription or an edit carries its files in base64: its
    body may hold an upload's bound in base64, not just `server.max_body_bytes`."""
    audio = base64.b64encode(MINUTE).decode()
    async with facade(mode) as url, httpx.AsyncClient(base_url=url, timeout=60) as c:
        got = await c.post("/v1/audio/transcriptions", headers=AUTH,
                           json={"model": "sim-audio", "file": audio})  # fmt: skip
        edit = await c.post("/v1/images/edits", headers=AUTH, json={
            "model": "sim-image", "prompt": "a hat", "size": "256x256",
            "image": [{"data": base64.b64encode(BIG_IMAGE).decode(), "filename": "a.png"}]})  # fmt: skip
        status, error = await declared_past(
            url, "/v1/audio/transcriptions", {"content-type": "application/json", **AUTH},
            MAX_AUDIO_BYTES * 4 // 3 + 2 * FORM_SLACK, b'{"file": "',
        )  # fmt: skip
    assert got.status_code == 200, got.text[:300]
    assert got.json()["text"].startswith("(simulated)")
    assert edit.status_code == 200, edit.text[:300]
    assert status == 413 and "exceeds" in error["message"]
