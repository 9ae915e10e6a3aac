"""Audio: speech to text (transcription and translation) and text to speech, what the
core asks of a provider that serves them (Transcriber, Speaker) and the operations
that run them.

A transcription is billed in the provider's unit: by tokens when the upstream reports
them (audio and text input tokens apart), else by seconds of audio at the model's
`per_second` price. Speech is billed per input character at `per_million_characters`,
else by tokens.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from server.base import tokens
from server.base.generation import RetryPolicy, TokenCounts
from server.base.operation import Measure

# OpenAI's bound on an uploaded audio file.
MAX_AUDIO_BYTES = 25 * 1024 * 1024
# What an audio file of unknown format is taken to hold per second (128 kbit/s mp3),
# and an audio token's length, for estimates before the upstream answers.
BYTES_PER_SECOND = 16_000
AUDIO_TOKENS_PER_SECOND = 10


@dataclass(frozen=True, slots=True)
class TranscriptionRequest:
    """An audio file and how to transcribe it (`translate`: into English)."""

    audio: bytes
    filename: str = "audio"
    translate: bool = False
    language: str = ""
    prompt: str = ""
    response_format: str = "json"
    temperature: float | None = None
    granularities: tuple[str, ...] = ()
    # The form's other fields, passed on as sent.
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Segment:
    start: float
    end: float
    text: str


@dataclass(frozen=True, slots=True)
class Word:
    word: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class InputTokens:
    """What an upstream that counts tokens reported (`usage.type: tokens`)."""

    audio: int
    text: int
    output: int


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    language: str = ""
    # Seconds of audio, when the upstream said (else the gateway's estimate bills).
    duration_s: float | None = None
    segments: tuple[Segment, ...] = ()
    words: tuple[Word, ...] = ()
    tokens: InputTokens | None = None


@runtime_checkable
class Transcriber(Protocol):
    """A provider that turns speech into text. Failures are raised as UpstreamError."""

    retry_policy: RetryPolicy

    async def transcribe(self, request: TranscriptionRequest) -> Transcript: ...


def audio_seconds(audio: bytes) -> float:
    """The length of a WAV file from its header; of any other format, an estimate."""
    if len(audio) >= 44 and audio[:4] == b"RIFF" and audio[8:12] == b"WAVE":
        offset = 12
        rate = 0
        while offset + 8 <= len(audio):
            chunk, size = audio[offset : offset + 4], struct.unpack_from("<I", audio, offset + 4)[0]
            if chunk == b"fmt " and size >= 16:
                rate = struct.unpack_from("<I", audio, offset + 16)[0]  # bytes per second
            if chunk == b"data" and rate:
                return round(min(size, len(audio) - offset - 8) / rate, 3)
            offset += 8 + size + (size & 1)
    return round(len(audio) / BYTES_PER_SECOND, 3)


class Transcription:
    """Speech to text as an operation."""

    name = "transcription"

    def serves(self, provider: object) -> bool:
        return isinstance(provider, Transcriber)

    async def call(self, provider: object, request: TranscriptionRequest) -> Transcript:
        assert isinstance(provider, Transcriber)
        return await provider.transcribe(request)

    def malformed(self, request: TranscriptionRequest, result: Transcript) -> str | None:
        return None

    def texts(self, request: TranscriptionRequest) -> tuple[str, ...]:
        return (request.prompt,) if request.prompt else ()

    def with_texts(
        self, request: TranscriptionRequest, texts: tuple[str | tuple[int, ...], ...]
    ) -> TranscriptionRequest:
        if not request.prompt:
            return request
        return replace(request, prompt=str(texts[0]))

    def measure(self, request: TranscriptionRequest, result: Transcript | None) -> Measure:
        if result is not None and result.tokens is not None:
            used = result.tokens
            return Measure(TokenCounts(used.audio + used.text, used.output))
        seconds = audio_seconds(request.audio)
        if result is not None and result.duration_s is not None:
            seconds = result.duration_s
        audio_tokens = round(seconds * AUDIO_TOKENS_PER_SECOND)
        said = tokens.estimate(result.text) if result is not None else audio_tokens
        counts = TokenCounts(audio_tokens + tokens.estimate(request.prompt), said)
        return Measure(counts, {"seconds": seconds})


TRANSCRIPTION = Transcription()


# -- text to speech -------------------------------------------------------------------

# OpenAI's bound on the text of one speech request.
MAX_SPEECH_CHARACTERS = 4096
CONTENT_TYPES = {
    "mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac",
    "wav": "audio/wav", "pcm": "audio/pcm",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    input: str
    voice: str
    instructions: str = ""
    response_format: str = "mp3"
    speed: float | None = None
    # The body's other fields, passed on as sent.
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Speech:
    """Audio as it comes: its first chunk (read before the call counts as answered, so
    a provider failing before it is failed over) and the rest, to read once."""

    content_type: str
    first: bytes
    rest: AsyncGenerator[bytes, None]
    # Tokens when the upstream reported them.
    counts: TokenCounts | None = None


@runtime_checkable
class Speaker(Protocol):
    """A provider that turns text into speech. Failures are raised as UpstreamError."""

    retry_policy: RetryPolicy

    async def speak(self, request: SpeechRequest) -> Speech: ...


class SpeechGeneration:
    """Text to speech as an operation."""

    name = "speech"

    def serves(self, provider: object) -> bool:
        return isinstance(provider, Speaker)

    async def call(self, provider: object, request: SpeechRequest) -> Speech:
        assert isinstance(provider, Speaker)
        return await provider.speak(request)

    def malformed(self, request: SpeechRequest, result: Speech) -> str | None:
        return None if result.first else "no audio"

    def texts(self, request: SpeechRequest) -> tuple[str, ...]:
        return (request.input,)

    def with_texts(
        self, request: SpeechRequest, texts: tuple[str | tuple[int, ...], ...]
    ) -> SpeechRequest:
        return replace(request, input=str(texts[0]))

    def measure(self, request: SpeechRequest, result: Speech | None) -> Measure:
        counts = result.counts if result is not None else None
        if counts is None:
            counts = TokenCounts(tokens.estimate(request.input + request.instructions), 0)
        return Measure(counts, {"characters": len(request.input)})


SPEECH = SpeechGeneration()
