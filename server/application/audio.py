"""AudioService: speech to text and text to speech on the first of a model's providers
that serves them, in OpenAI's shape."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import TypeVar

from gateway.v1 import audio_service_pb2 as pb

from server.accounting.accounts import Accounts
from server.application.pipeline.operation_run import OperationRun, operate
from server.application.pipeline.state import Live
from server.base.audio import (
    CONTENT_TYPES,
    MAX_AUDIO_BYTES,
    MAX_SPEECH_CHARACTERS,
    SPEECH,
    TRANSCRIPTION,
    Speech,
    SpeechRequest,
    Transcript,
    TranscriptionRequest,
)
from server.base.call import Call
from server.base.errors import InvalidArgument, TooLarge

TEXT_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
# The three requests share their fields (and the two answers theirs).
TranscriptionAsked = (
    pb.CreateTranscriptionRequest | pb.StreamTranscriptionRequest | pb.CreateTranslationRequest
)
AnswerT = TypeVar("AnswerT", pb.CreateTranscriptionResponse, pb.CreateTranslationResponse)
GRANULARITIES = ("word", "segment")
_LANGUAGE = re.compile(r"[a-z]{2,3}")


class AudioService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def _transcribe(
        self, request: TranscriptionAsked, call: Call, translate: bool
    ) -> OperationRun[TranscriptionRequest, Transcript]:
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        wanted = validated_transcription(request, translate)
        return await operate(
            self.accounts, state, call, principal, request.model, TRANSCRIPTION, wanted
        )

    async def create_transcription(
        self, request: pb.CreateTranscriptionRequest, call: Call
    ) -> pb.CreateTranscriptionResponse:
        run = await self._transcribe(request, call, False)
        return _transcription(run, pb.CreateTranscriptionResponse(task="transcribe"))

    async def create_translation(
        self, request: pb.CreateTranslationRequest, call: Call
    ) -> pb.CreateTranslationResponse:
        run = await self._transcribe(request, call, True)
        return _transcription(run, pb.CreateTranslationResponse(task="translate"))

    async def stream_transcription(
        self, request: pb.StreamTranscriptionRequest, call: Call
    ) -> AsyncGenerator[pb.StreamTranscriptionResponse, None]:
        """The transcript as OpenAI streams it: a delta per word, then the whole text."""
        run = await self._transcribe(request, call, False)
        answer = _transcription(run, pb.CreateTranscriptionResponse(task="transcribe"))
        for piece in re.findall(r"\S+\s*", answer.text):
            yield pb.StreamTranscriptionResponse(type="transcript.text.delta", delta=piece)
        yield pb.StreamTranscriptionResponse(
            type="transcript.text.done", text=answer.text, usage=answer.usage
        )

    async def create_speech(
        self, request: pb.CreateSpeechRequest, call: Call
    ) -> AsyncGenerator[pb.CreateSpeechResponse, None]:
        """The audio in chunks as the upstream sends them; the first names its type."""
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        wanted = validated_speech(request)
        run = await operate(self.accounts, state, call, principal, request.model, SPEECH, wanted)
        assert run.result is not None
        speech: Speech = run.result
        try:
            yield pb.CreateSpeechResponse(audio=speech.first, content_type=speech.content_type)
            async for chunk in speech.rest:
                yield pb.CreateSpeechResponse(audio=chunk)
        finally:
            await speech.rest.aclose()


def _transcription(run: OperationRun[TranscriptionRequest, Transcript], answer: AnswerT) -> AnswerT:
    """`answer` filled in with the run's transcript and usage."""
    assert run.result is not None
    result = run.result
    measure = run.measure()
    usage = pb.TranscriptionUsage()
    if result.tokens is not None:
        usage.type = "tokens"
        usage.input_tokens = result.tokens.audio + result.tokens.text
        usage.input_token_details.audio_tokens = result.tokens.audio
        usage.input_token_details.text_tokens = result.tokens.text
        usage.output_tokens = result.tokens.output
        usage.total_tokens = usage.input_tokens + result.tokens.output
    else:
        usage.type = "duration"
        usage.seconds = measure.units.get("seconds", 0.0)
    cost = run.cost()
    if cost is not None:
        usage.total_cost_usd = cost.total_usd
    answer.text, answer.language, answer.model = result.text, result.language, run.model.id
    answer.duration = result.duration_s if result.duration_s is not None else usage.seconds
    answer.segments.extend(
        pb.TranscriptionSegment(id=i, start=s.start, end=s.end, text=s.text)
        for i, s in enumerate(result.segments)
    )
    answer.words.extend(
        pb.TranscriptionWord(word=w.word, start=w.start, end=w.end) for w in result.words
    )
    answer.usage.CopyFrom(usage)
    return answer


def validated_transcription(request: TranscriptionAsked, translate: bool) -> TranscriptionRequest:
    """Checks a CreateTranscriptionRequest; InvalidArgument names the field at fault."""
    if not request.file:
        raise InvalidArgument.for_field("file", "is required (the audio file, not empty)")
    if len(request.file) > MAX_AUDIO_BYTES:
        raise TooLarge(f"file: the file exceeds {MAX_AUDIO_BYTES} bytes", {"field": "file"})
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    language = request.language
    if language and (translate or not _LANGUAGE.fullmatch(language)):
        why = "is not taken by translations" if translate else "must be an ISO-639-1 code (en)"
        raise InvalidArgument.for_field("language", why)
    answer = request.response_format or "json"
    if answer not in TEXT_FORMATS:
        raise InvalidArgument.for_field(
            "response_format", f"must be one of {', '.join(TEXT_FORMATS)}"
        )
    temperature = request.temperature if request.HasField("temperature") else None
    if temperature is not None and not 0 <= temperature <= 1:
        raise InvalidArgument.for_field("temperature", "must be from 0 to 1")
    granularities = tuple(request.timestamp_granularities)
    for given in granularities:
        if given not in GRANULARITIES:
            raise InvalidArgument.for_field(
                "timestamp_granularities[]", f"must be `word` or `segment`, not {given!r}"
            )
    if granularities and (translate or answer != "verbose_json"):
        raise InvalidArgument.for_field(
            "timestamp_granularities[]", "needs response_format verbose_json"
        )
    return TranscriptionRequest(
        audio=request.file,
        filename=request.filename or "audio",
        translate=translate,
        language=language,
        prompt=request.prompt,
        response_format=answer,
        temperature=temperature,
        granularities=granularities,
        extra=dict(request.extra),
    )


def validated_speech(request: pb.CreateSpeechRequest) -> SpeechRequest:
    """Checks a CreateSpeechRequest; InvalidArgument names the field at fault."""
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    if not request.input.strip():
        raise InvalidArgument.for_field("input", "is required")
    if len(request.input) > MAX_SPEECH_CHARACTERS:
        raise InvalidArgument.for_field(
            "input", f"must be at most {MAX_SPEECH_CHARACTERS} characters"
        )
    if not request.voice:
        raise InvalidArgument.for_field("voice", "is required")
    answer = request.response_format or "mp3"
    if answer not in CONTENT_TYPES:
        raise InvalidArgument.for_field(
            "response_format", f"must be one of {', '.join(CONTENT_TYPES)}"
        )
    speed = request.speed if request.HasField("speed") else None
    if speed is not None and not 0.25 <= speed <= 4:
        raise InvalidArgument.for_field("speed", "must be from 0.25 to 4")
    return SpeechRequest(
        input=request.input,
        voice=request.voice,
        instructions=request.instructions,
        response_format=answer,
        speed=speed,
        extra=dict(request.extra),
    )
