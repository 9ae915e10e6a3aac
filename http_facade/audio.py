"""`/v1/audio/transcriptions`, `/v1/audio/translations` and `/v1/audio/speech`: OpenAI's
audio routes over AudioService, in-process or to a remote gateway alike, in place of
the annotated routes' JSON handling (a transcription sent as JSON still goes there).

An upload is read from its multipart form as it arrives (http_facade/forms.py), its
chunks bounded by MAX_AUDIO_BYTES (413 past it, or at once when the declared length is
past it) and joined once. The transcript is written in the `response_format` asked
for (json, text, srt, verbose_json, vtt), or streamed as OpenAI's `transcript.text.*`
events; speech is sent as raw audio bytes as they come.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import orjson
from gateway.v1 import audio_service_pb2 as pb
from google.protobuf.descriptor import MethodDescriptor
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from http_facade.backends import Backend
from http_facade.bindings import Rpc
from http_facade.context import exchange_for
from http_facade.endpoint import read_json_object
from http_facade.errors import response_headers
from http_facade.forms import boundary_of, read_form, refuse_declared_past
from http_facade.protocol import unless_gone
from server.base.audio import MAX_AUDIO_BYTES
from server.base.errors import InvalidArgument, TooLarge

Handle = Callable[[Request], Awaitable[Response]]
SERVICE = "gateway.v1.AudioService"
SPEECH_FIELDS = ("model", "input", "voice", "instructions", "response_format", "speed")


def _too_large() -> TooLarge:
    return TooLarge(f"file: the file exceeds {MAX_AUDIO_BYTES} bytes", {"field": "file"})


class Chunks:
    """An upload's chunks, bounded: TooLarge naming `file` past MAX_AUDIO_BYTES."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    async def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > MAX_AUDIO_BYTES:
            raise _too_large()
        self.parts.append(chunk)

    def take(self) -> bytes:
        """The file, joined once; the chunks are let go."""
        whole = b"".join(self.parts)
        self.parts.clear()
        return whole


class AudioEndpoints:
    def __init__(self, rpcs: dict[str, Rpc], backend: Backend, max_body_bytes: int) -> None:
        self.rpcs = rpcs
        self.backend = backend
        self.max_body_bytes = max_body_bytes

    async def transcriptions(self, request: Request, annotated: Handle) -> Response:
        if not _is_form(request):
            return await annotated(request)
        return await self._transcribe(request, translate=False)

    async def translations(self, request: Request, annotated: Handle) -> Response:
        if not _is_form(request):
            return await annotated(request)
        return await self._transcribe(request, translate=True)

    async def _transcribe(self, request: Request, translate: bool) -> Response:
        exchange = exchange_for(request.scope)
        fields, audio = await _read_upload(request)
        stream = _streamed(fields)
        if stream and translate:
            raise InvalidArgument.for_field("stream", "is not served for translations")
        if stream:
            rpc = self.rpcs["StreamTranscription"]
            message = _transcription_request(rpc, fields, audio)
            del audio  # the request holds the file now
            events = self.backend.stream(rpc, message, exchange)
            try:
                first = await unless_gone(request.scope, anext(events))
            except BaseException:
                await events.aclose()
                raise
            headers = response_headers(exchange.response_headers.items())
            return StreamingResponse(
                _sse(first, events), headers=headers, media_type="text/event-stream"
            )
        rpc = self.rpcs["CreateTranslation" if translate else "CreateTranscription"]
        message = _transcription_request(rpc, fields, audio)
        del audio
        answer = await unless_gone(request.scope, self.backend.unary(rpc, message, exchange))
        assert isinstance(answer, pb.CreateTranscriptionResponse | pb.CreateTranslationResponse)
        body, media = written(answer, message)
        headers = response_headers(exchange.response_headers.items())
        return Response(body, headers=headers, media_type=media)

    async def speech(self, request: Request) -> Response:
        exchange = exchange_for(request.scope)
        body = await read_json_object(request, self.max_body_bytes)
        message = _speech_request(body)
        chunks = self.backend.stream(self.rpcs["CreateSpeech"], message, exchange)
        try:
            first = await unless_gone(request.scope, anext(chunks))
        except BaseException:
            await chunks.aclose()
            raise
        assert isinstance(first, pb.CreateSpeechResponse)
        headers = response_headers(exchange.response_headers.items())
        return StreamingResponse(
            _audio(first, chunks), headers=headers, media_type=first.content_type
        )


def with_audio(
    routes: list[BaseRoute], served: Iterable[MethodDescriptor], backend: Backend,
    max_body_bytes: int,
) -> list[BaseRoute]:  # fmt: skip
    """`routes` with the audio paths served here: a transcription's multipart form
    (a JSON body goes on to the annotated route), and speech as raw audio."""
    rpcs = {m.name: Rpc.of(m) for m in served if m.containing_service.full_name == SERVICE}
    if not rpcs:
        return routes
    e = AudioEndpoints(rpcs, backend, max_body_bytes)
    ours: dict[str, Callable[[Request, Handle], Awaitable[Response]]] = {
        "/v1/audio/transcriptions": e.transcriptions,
        "/v1/audio/translations": e.translations,
        "/v1/audio/speech": lambda request, _: e.speech(request),
    }
    found: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, Route) and route.path in ours:
            serve = functools.partial(_either, ours[route.path], route.endpoint)
            replaced = Route(route.path, serve, methods=list(route.methods or ()), name=route.name)
            replaced.methods = route.methods
            route = replaced
        found.append(route)
    return found


async def _either(
    ours: Callable[[Request, Handle], Awaitable[Response]], annotated: Handle, request: Request
) -> Response:
    return await ours(request, annotated)


Form = list[tuple[str, str]]


async def _read_upload(request: Request) -> tuple[Form, bytes]:
    """The form's text fields and the file, read once within MAX_AUDIO_BYTES."""
    boundary = boundary_of(request, "file")
    refuse_declared_past(request, MAX_AUDIO_BYTES, _too_large())
    upload = Chunks()
    fields = await read_form(request, boundary, "file", upload.write)
    if "file" not in (name for name, _ in fields):
        raise InvalidArgument.for_field("file", "is required")
    return fields, upload.take()


def _is_form(request: Request) -> bool:
    return request.headers.get("content-type", "").startswith("multipart/form-data")


def _streamed(fields: Form) -> bool:
    given = [value for name, value in fields if name == "stream"]
    if any(value not in ("true", "false") for value in given):
        raise InvalidArgument.for_field("stream", "must be true or false")
    return given[-1:] == ["true"]


def _transcription_request(rpc: Rpc, fields: Form, audio: bytes) -> Any:
    """The form as `rpc`'s request (the three transcription requests share fields)."""
    message: Any = rpc.request_type(file=audio)
    for name, value in fields:
        if name == "file":
            message.filename = value
        elif name in ("model", "language", "prompt", "response_format"):
            setattr(message, name, value)
        elif name == "temperature":
            message.temperature = _number(value, name)
        elif name in ("timestamp_granularities[]", "timestamp_granularities"):
            message.timestamp_granularities.append(value)
        elif name != "stream":
            message.extra[name] = value
    return message


def _speech_request(body: dict[str, Any]) -> pb.CreateSpeechRequest:
    message = pb.CreateSpeechRequest()
    for name, value in body.items():
        if name == "speed":
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise InvalidArgument.for_field("speed", "must be a number")
            message.speed = float(value)
        elif name in SPEECH_FIELDS:
            if not isinstance(value, str):
                raise InvalidArgument.for_field(name, "must be a string")
            setattr(message, name, value)
        elif name == "stream_format" and value not in ("audio", None):
            raise InvalidArgument.for_field("stream_format", "only `audio` is served")
        elif name != "stream_format":
            message.extra[name] = orjson.dumps(value).decode()
    return message


def _number(value: str, name: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InvalidArgument.for_field(name, "must be a number") from None


async def _sse(first: Any, events: AsyncGenerator[Any, None]) -> AsyncIterator[bytes]:
    try:
        yield _event(first)
        async for event in events:
            yield _event(event)
    finally:
        await events.aclose()


def _event(event: pb.StreamTranscriptionResponse) -> bytes:
    if event.type == "transcript.text.delta":
        payload: dict[str, Any] = {"type": event.type, "delta": event.delta}
    else:
        payload = {"type": event.type, "text": event.text, "usage": usage(event.usage)}
    return b"data: " + orjson.dumps(payload) + b"\n\n"


async def _audio(
    first: pb.CreateSpeechResponse, chunks: AsyncGenerator[Any, None]
) -> AsyncIterator[bytes]:
    try:
        yield first.audio
        async for chunk in chunks:
            yield chunk.audio
    finally:
        await chunks.aclose()


def usage(given: pb.TranscriptionUsage) -> dict[str, Any]:
    """OpenAI's usage of a transcription, with the gateway's cost beside it."""
    if given.type == "tokens":
        found: dict[str, Any] = {
            "type": "tokens", "input_tokens": given.input_tokens,
            "input_token_details": {"text_tokens": given.input_token_details.text_tokens,
                                    "audio_tokens": given.input_token_details.audio_tokens},
            "output_tokens": given.output_tokens, "total_tokens": given.total_tokens,
        }  # fmt: skip
    else:
        found = {"type": "duration", "seconds": given.seconds}
    if given.HasField("total_cost_usd"):
        found["total_cost_usd"] = given.total_cost_usd
    return found


def written(
    answer: pb.CreateTranscriptionResponse | pb.CreateTranslationResponse,
    asked: pb.CreateTranscriptionRequest | pb.CreateTranslationRequest,
) -> tuple[bytes, str]:
    """The transcript in the `response_format` asked for, and its media type."""
    response_format = asked.response_format or "json"
    if response_format == "text":
        return answer.text.encode() + b"\n", "text/plain"
    if response_format in ("srt", "vtt"):
        return subtitles(answer, response_format).encode(), "text/plain"
    if response_format == "json":
        return orjson.dumps({"text": answer.text, "usage": usage(answer.usage)}), "application/json"
    granularities = set(asked.timestamp_granularities) or {"segment"}
    verbose: dict[str, Any] = {
        "task": answer.task, "language": answer.language, "duration": answer.duration,
        "text": answer.text,
    }  # fmt: skip
    if "segment" in granularities:
        verbose["segments"] = [
            {"id": s.id, "seek": 0, "start": s.start, "end": s.end, "text": s.text,
             "tokens": [], "temperature": asked.temperature, "avg_logprob": 0.0,
             "compression_ratio": 0.0, "no_speech_prob": 0.0}
            for s in answer.segments
        ]  # fmt: skip
    if "word" in granularities:
        verbose["words"] = [{"word": w.word, "start": w.start, "end": w.end} for w in answer.words]
    verbose["usage"] = usage(answer.usage)
    return orjson.dumps(verbose), "application/json"


def subtitles(
    answer: pb.CreateTranscriptionResponse | pb.CreateTranslationResponse, kind: str
) -> str:
    """SubRip or WebVTT cues, one per segment (one for the whole text without any)."""
    cues = [(s.start, s.end, s.text) for s in answer.segments] or [
        (0.0, answer.duration, answer.text)
    ]
    comma = "," if kind == "srt" else "."
    lines = [] if kind == "srt" else ["WEBVTT", ""]
    for n, (start, end, text) in enumerate(cues, 1):
        if kind == "srt":
            lines.append(str(n))
        lines += [f"{_clock(start, comma)} --> {_clock(end, comma)}", text.strip(), ""]
    return "\n".join(lines)


def _clock(seconds: float, comma: str) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02}:{ms // 60_000 % 60:02}:{ms // 1000 % 60:02}{comma}{ms % 1000:03}"
