"""POST /v1/audio/transcriptions, /translations and /speech: the openai SDK whole and
streamed, raw HTTP for the multipart bound and every refusal, gRPC, the ledger row in
the provider's unit, and the OpenAI adapter against a strict fake with failover."""

from __future__ import annotations

import base64
import io
import wave
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import openai
import pytest
from gateway.v1 import audio_service_pb2 as pb
from gateway.v1 import audio_service_pb2_grpc

from server.base.audio import MAX_AUDIO_BYTES
from server.providers.simulated_audio import wav
from tests.integration.rest.test_operation_run import last_row
from tests.support.facade import both_modes, client, facade
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.grpc_stubs import API, details
from tests.support.upstreams.audio import AudioWire
from tests.support.upstreams.base import Fault, serving
from tests.support.upstreams.config import PRICE, model, provider, with_models

AUTH = {"x-api-key": API_KEY}
# Two seconds of 24 kHz 16-bit mono audio, and another two of other samples.
TWO_SECONDS = wav(bytes(96_000))
OTHER_TWO = wav(b"\x01\x02" * 48_000)


@pytest.fixture
async def sdk() -> AsyncIterator[openai.AsyncOpenAI]:
    async with (
        facade("in_process") as url,
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0) as c,
    ):
        yield c


async def test_a_transcript_is_derived_from_the_upload_and_billed_by_its_seconds(
    sdk: openai.AsyncOpenAI,
) -> None:
    got = await sdk.audio.transcriptions.create(model="sim-audio", file=("a.wav", TWO_SECONDS))
    again = await sdk.audio.transcriptions.create(model="sim-audio", file=("b.wav", TWO_SECONDS))
    other = await sdk.audio.transcriptions.create(model="sim-audio", file=("a.wav", OTHER_TWO))
    assert got.text.startswith("(simulated) ") and got.text == again.text != other.text
    assert len(got.text.split()) == 1 + 4  # two words a second
    usage: Any = got.usage
    assert (usage.type, usage.seconds) == ("duration", 2.0)
    assert usage.total_cost_usd == pytest.approx(2 * 0.0001)


async def test_each_response_format(sdk: openai.AsyncOpenAI) -> None:
    whole = await sdk.audio.transcriptions.create(model="sim-audio", file=("a.wav", TWO_SECONDS))
    text = await sdk.audio.transcriptions.create(
        model="sim-audio", file=("a.wav", TWO_SECONDS), response_format="text"
    )
    assert text.strip() == whole.text
    verbose = await sdk.audio.transcriptions.create(
        model="sim-audio", file=("a.wav", TWO_SECONDS), response_format="verbose_json",
        timestamp_granularities=["word", "segment"], language="de",
    )  # fmt: skip
    assert (verbose.text, verbose.duration, verbose.language) == (whole.text, 2.0, "de")
    assert verbose.words is not None and verbose.segments is not None
    assert [w.word for w in verbose.words] == whole.text.split()
    assert verbose.words[-1].end == pytest.approx(2.0)
    assert verbose.segments[0].text == whole.text
    srt = await sdk.audio.transcriptions.create(
        model="sim-audio", file=("a.wav", TWO_SECONDS), response_format="srt"
    )
    assert srt == f"1\n00:00:00,000 --> 00:00:02,000\n{whole.text}\n"
    vtt = await sdk.audio.transcriptions.create(
        model="sim-audio", file=("a.wav", TWO_SECONDS), response_format="vtt"
    )
    assert vtt == f"WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n{whole.text}\n"
    english = await sdk.audio.translations.create(model="sim-audio", file=("a.wav", TWO_SECONDS))
    assert english.text == whole.text


async def test_a_streamed_transcription_sends_deltas_then_the_whole_text(
    sdk: openai.AsyncOpenAI,
) -> None:
    whole = await sdk.audio.transcriptions.create(model="sim-audio", file=("a.wav", OTHER_TWO))
    stream = await sdk.audio.transcriptions.create(
        model="sim-audio", file=("a.wav", OTHER_TWO), stream=True
    )
    events = [event async for event in stream]
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    assert len(deltas) == len(whole.text.split()) and "".join(deltas) == whole.text
    done = events[-1]
    assert done.type == "transcript.text.done" and done.text == whole.text
    assert done.usage is not None and done.usage.type == "duration"


async def test_speech_streams_a_valid_wav_billed_per_character() -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        async with sdk.audio.speech.with_streaming_response.create(
            model="sim-audio", input="Hello there", voice="alloy", response_format="wav"
        ) as response:
            assert response.headers["content-type"] == "audio/wav"
            pieces = [piece async for piece in response.iter_bytes()]
        row = await last_row(gw)
        async with sdk.audio.speech.with_streaming_response.create(
            model="sim-audio", input="Hello there", voice="alloy"
        ) as mp3:
            assert mp3.headers["content-type"] == "audio/mpeg"
            frames = await mp3.read()
    audio = b"".join(pieces)
    with wave.open(io.BytesIO(audio)) as read:
        seconds = read.getnframes() / read.getframerate()
        assert (read.getnchannels(), read.getsampwidth()) == (1, 2)
    assert 0.2 <= seconds <= 1.0
    assert frames[:2] == b"\xff\xfb" and len(frames) % 417 == 0
    assert (row["method"], row["unit"], row["units"]) == ("CreateSpeech", "characters", 11)
    assert row["total_cost_usd"] == pytest.approx(11 * 15 / 1e6)


async def test_a_transcription_row_is_billed_in_seconds() -> None:
    async with (
        running_gateway(default_config_dict()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", headers=AUTH) as c,
    ):
        files = {"file": ("a.wav", TWO_SECONDS)}
        got = await c.post("/v1/audio/transcriptions", files=files, data={"model": "sim-audio"})
        assert got.status_code == 200, got.text
        row = await last_row(gw)
        encoded = base64.b64encode(TWO_SECONDS).decode()
        body = {"model": "sim-audio", "file": encoded}
        as_json = await c.post("/v1/audio/transcriptions", json=body)
    assert (row["method"], row["unit"], row["units"]) == ("CreateTranscription", "seconds", 2)
    assert row["total_cost_usd"] == pytest.approx(2 * 0.0001)
    # The same call as JSON, the file in base64, is transcoded as every RPC is.
    assert as_json.status_code == 200 and as_json.json()["text"] == got.json()["text"]


FORM = {"model": "sim-audio"}
FILE = {"file": ("a.wav", TWO_SECONDS)}


BAD_TRANSCRIPTIONS: list[tuple[str, dict[str, str], Any, str, str]] = [
        ("transcriptions", FORM, None, "file", "required"),  # JSON without the file
        ("transcriptions", FORM, {"other": ("a.wav", b"x")}, "file", "required"),
        ("transcriptions", FORM, {"file": ("a.wav", b"")}, "file", "required"),
        ("transcriptions", {}, FILE, "model", "required"),
        ("transcriptions", {**FORM, "response_format": "mp3"}, FILE, "response_format", "json"),
        ("transcriptions", {**FORM, "temperature": "2"}, FILE, "temperature", "0 to 1"),
        ("transcriptions", {**FORM, "temperature": "hot"}, FILE, "temperature", "number"),
        ("transcriptions", {**FORM, "timestamp_granularities[]": "word"}, FILE,
         "timestamp_granularities[]", "verbose_json"),
        ("transcriptions", {**FORM, "response_format": "verbose_json",
                            "timestamp_granularities[]": "line"}, FILE,
         "timestamp_granularities[]", "line"),
        ("transcriptions", {**FORM, "language": "english"}, FILE, "language", "ISO-639-1"),
        ("transcriptions", {**FORM, "stream": "maybe"}, FILE, "stream", "true or false"),
        ("transcriptions", {"model": "sim-mini"}, FILE, "model", "transcription"),
        ("translations", {**FORM, "stream": "true"}, FILE, "stream", "translations"),
        ("translations", {**FORM, "language": "de"}, FILE, "language", "translations"),
]  # fmt: skip


@both_modes
async def test_bad_transcriptions_name_the_field(mode: str) -> None:
    async with client(mode) as c:
        for path, data, files, param, words in BAD_TRANSCRIPTIONS:
            if files is None:
                got = await c.post(f"/v1/audio/{path}", json=data, headers=AUTH)
            else:
                got = await c.post(f"/v1/audio/{path}", data=data, files=files, headers=AUTH)
            assert got.status_code == 400, (data, got.text)
            error = got.json()["error"]
            assert error["param"] == param and words in error["message"], (data, error)
            assert "Traceback" not in got.text


SPEECH = {"model": "sim-audio", "input": "hi", "voice": "alloy"}


BAD_SPEECH: list[tuple[dict[str, Any], str, str]] = [
        ({**SPEECH, "input": ""}, "input", "required"),
        ({**SPEECH, "input": "x" * 4097}, "input", "4096"),
        ({**SPEECH, "input": 3}, "input", "string"),
        ({"model": "sim-audio", "input": "hi"}, "voice", "required"),
        ({**SPEECH, "response_format": "ogg"}, "response_format", "mp3"),
        ({**SPEECH, "speed": 5}, "speed", "0.25 to 4"),
        ({**SPEECH, "speed": "fast"}, "speed", "number"),
        ({**SPEECH, "stream_format": "sse"}, "stream_format", "audio"),
        ({**SPEECH, "model": "sim-mini"}, "model", "speech"),
        ({"input": "hi", "voice": "alloy"}, "model", "required"),
]  # fmt: skip


@both_modes
async def test_bad_speech_requests_name_the_field(mode: str) -> None:
    async with client(mode) as c:
        for body, param, words in BAD_SPEECH:
            got = await c.post("/v1/audio/speech", json=body, headers=AUTH)
            assert got.status_code == 400, (body, got.text)
            error = got.json()["error"]
            assert error["param"] == param and words in error["message"], (body, error)
            assert "Traceback" not in got.text


async def test_an_upload_past_25_mb_is_413_whether_declared_or_not() -> None:
    past = MAX_AUDIO_BYTES + 1
    boundary = "b0und"
    head = (f'--{boundary}\r\ncontent-disposition: form-data; name="model"\r\n\r\nsim-audio\r\n'
            f'--{boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.mp3"\r\n'
            "\r\n").encode()  # fmt: skip
    tail = f"\r\n--{boundary}--\r\n".encode()
    kind = {"content-type": f"multipart/form-data; boundary={boundary}", **AUTH}

    async def undeclared() -> AsyncIterator[bytes]:
        yield head
        chunk = bytes(1 << 20)
        for _ in range(past // len(chunk) + 1):
            yield chunk
        yield tail

    async with client("in_process") as c:
        declared = await c.post(
            "/v1/audio/transcriptions", content=head + bytes(past) + tail, headers=kind
        )
        streamed = await c.post("/v1/audio/transcriptions", content=undeclared(), headers=kind)
        within = await c.post(
            "/v1/audio/transcriptions", content=head + bytes(1 << 20) + tail, headers=kind
        )
    for got in (declared, streamed):
        assert got.status_code == 413, got.text
        assert got.json()["error"]["param"] == "file"
        assert str(MAX_AUDIO_BYTES) in got.json()["error"]["message"]
    assert within.status_code == 200, within.text


async def test_audio_over_grpc(gateway) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stub = audio_service_pb2_grpc.AudioServiceStub(channel)
        got = await stub.CreateTranscription(
            pb.CreateTranscriptionRequest(model="sim-audio", file=TWO_SECONDS), metadata=API
        )
        assert got.text.startswith("(simulated)") and got.usage.type == "duration"
        assert got.usage.seconds == 2.0 and got.task == "transcribe"
        events = [e async for e in stub.StreamTranscription(
            pb.StreamTranscriptionRequest(model="sim-audio", file=TWO_SECONDS), metadata=API)]  # fmt: skip
        assert events[-1].type == "transcript.text.done" and events[-1].text == got.text
        chunks = [c async for c in stub.CreateSpeech(
            pb.CreateSpeechRequest(model="sim-audio", input="hello", voice="alloy",
                                   response_format="pcm"), metadata=API)]  # fmt: skip
        assert chunks[0].content_type == "audio/pcm" and len(chunks) > 1
        assert sum(len(c.audio) for c in chunks) % 2 == 0
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateTranscription(pb.CreateTranscriptionRequest(model="sim-audio"),
                                           metadata=API)  # fmt: skip
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        violations = details(caught.value)["BadRequest"].field_violations  # type: ignore[attr-defined]
        assert [v.field for v in violations] == ["file"]


def _audio_model(primary: str, backup: str) -> dict[str, Any]:
    entry = model(
        "whisper-fake",
        provider("audio-primary", "openai", primary),
        provider("audio-backup", "openai", backup, "backup"),
        price={**PRICE, "per_second": 0.0001},
    )
    entry["capabilities"] = ["transcription", "speech"]
    return entry


async def test_the_openai_adapter_transcribes_in_the_upstreams_unit_and_fails_over() -> None:
    primary_wire, backup_wire = AudioWire(), AudioWire(tokens=True)
    async with (
        serving(primary_wire) as primary,
        serving(backup_wire) as backup,
        running_gateway(with_models(_audio_model(primary.url, backup.url))) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        got = await sdk.audio.transcriptions.create(
            model="whisper-fake", file=("a.wav", TWO_SECONDS), prompt="names: Ada",
            response_format="verbose_json", timestamp_granularities=["word"],
            extra_body={"include[]": "logprobs"},
        )  # fmt: skip
        form = primary.seen[0].body["_form"]
        assert form["file"] == TWO_SECONDS and form["model"] == "gpt-fake"
        assert form["prompt"] == "names: Ada" and form["include[]"] == ["logprobs"]
        assert form["timestamp_granularities[]"] == ["word"]
        assert got.text == f"heard {len(TWO_SECONDS)} bytes"
        assert [w.word for w in got.words or []] == got.text.split()
        usage: Any = got.usage
        assert (usage.type, usage.seconds) == ("duration", 7)
        row = await last_row(gw)
        assert (row["unit"], row["units"]) == ("seconds", 7)
        assert row["total_cost_usd"] == pytest.approx(7 * 0.0001)
        # The backup reports tokens: billed by them, audio and text apart.
        primary.faults = [Fault("status", 503)]
        moved = await sdk.audio.transcriptions.create(
            model="whisper-fake", file=("a.wav", TWO_SECONDS)
        )
        assert len(backup.seen) == 1
        tokens: Any = moved.usage
        assert (tokens.type, tokens.input_tokens, tokens.output_tokens) == ("tokens", 30, 4)
        assert tokens.input_token_details.audio_tokens == 25
        row = await last_row(gw)
        assert (row["unit"], row["units"]) == ("tokens", 34)
        assert row["total_cost_usd"] == pytest.approx((30 * 1.0 + 4 * 4.0) / 1e6)
        translated = await sdk.audio.translations.create(
            model="whisper-fake", file=("a.wav", TWO_SECONDS), response_format="srt"
        )
        assert "heard" in translated and primary.seen[-1].path.endswith("/translations")
    assert primary_wire.refused == [] and backup_wire.refused == []


async def test_the_openai_adapter_relays_speech_as_it_comes() -> None:
    wire = AudioWire(chunks=3)
    async with (
        serving(wire, default=Fault("slow_body", delay_s=0.2)) as upstream,
        running_gateway(with_models(_audio_model(upstream.url, upstream.url))) as gw,
        openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=API_KEY, max_retries=0
        ) as sdk,
    ):
        async with sdk.audio.speech.with_streaming_response.create(
            model="whisper-fake", input="Say it", voice="nova", speed=1.5,
            instructions="calmly", response_format="mp3",
        ) as response:  # fmt: skip
            assert response.headers["content-type"] == "audio/mpeg"
            pieces = response.iter_bytes()
            first = await anext(pieces)
            # The first audio is here while the upstream is still sending the rest.
            assert first and upstream.in_flight == 1
            rest = b"".join([p async for p in pieces])
        body = upstream.seen[0].body["_json"]
        assert body == {"model": "gpt-fake", "input": "Say it", "voice": "nova",
                        "speed": 1.5, "instructions": "calmly", "response_format": "mp3"}  # fmt: skip
        row = await last_row(gw)
    assert first + rest == b"A" * 1000 + b"B" * 1000 + b"C" * 1000
    assert wire.refused == []
    assert (row["unit"], row["method"]) == ("tokens", "CreateSpeech")  # no per-character price


async def test_the_fake_refuses_what_openai_refuses() -> None:
    from tests.support.upstreams.checks import KEY

    wire = AudioWire()
    async with (
        serving(wire) as fake,
        httpx.AsyncClient(base_url=fake.url, headers={"authorization": f"Bearer {KEY}"}) as h,
    ):
        refused = [
            await h.post("/v1/audio/transcriptions", json={"model": "m"}),
            await h.post("/v1/audio/transcriptions", data={"model": "m"}, files={"x": b"1"}),
            await h.post(
                "/v1/audio/transcriptions",
                data={"model": "m", "response_format": "mp3"},
                files={"file": b"1"},
            ),  # fmt: skip
            await h.post(
                "/v1/audio/translations",
                data={"model": "m", "language": "de"},
                files={"file": b"1"},
            ),  # fmt: skip
            await h.post("/v1/audio/speech", json={"model": "m", "input": "x", "voice": "bob"}),
            await h.post(
                "/v1/audio/speech", json={"model": "m", "input": "x", "voice": "nova", "speed": 9}
            ),  # fmt: skip
        ]
        fine = await h.post("/v1/audio/transcriptions", data={"model": "m"}, files={"file": b"1"})
    assert [r.status_code for r in refused] == [400] * len(refused)
    assert fine.status_code == 200 and len(wire.refused) == len(refused)
