"""The simulated provider's audio: a transcript derived from the upload's bytes, and
speech as a short tone (or silent MP3 frames), both deterministic and made offline.

A transcript is "(simulated)" and then placeholder words picked by a hash of the file,
about two a second of audio (at least one, at most 200), with a segment per ten words
and each word's times spread evenly. Speech is a sine tone of a few hundred
milliseconds (longer for longer input, at most a second) whose pitch comes from a hash
of the input: WAV or raw 16-bit PCM at 24 kHz mono, or silent MPEG-1 Layer III frames
for mp3; opus, aac and flac are answered as WAV (the content type says so).
"""

from __future__ import annotations

import hashlib
import math
import struct

from server.base.audio import (
    CONTENT_TYPES,
    Segment,
    SpeechRequest,
    Transcript,
    TranscriptionRequest,
    Word,
    audio_seconds,
)

RATE = 24_000
# One silent MPEG-1 Layer III frame, 128 kbit/s at 44.1 kHz (417 bytes, 26 ms): the
# header, then side information and main data all zero, which decodes as silence.
MP3_FRAME = b"\xff\xfb\x90\x04" + bytes(413)
MP3_FRAME_S = 1152 / 44_100


def transcript(request: TranscriptionRequest, words: tuple[str, ...]) -> Transcript:
    seconds = audio_seconds(request.audio)
    digest = hashlib.sha256(request.audio).digest()
    count = max(1, min(200, round(seconds * 2)))
    picked = [words[digest[i % len(digest)] * (i + 1) % len(words)] for i in range(count)]
    said = ["(simulated)", *picked]
    step = max(seconds, 0.1) / len(said)
    timed = tuple(Word(w, round(i * step, 3), round((i + 1) * step, 3)) for i, w in enumerate(said))
    segments = tuple(
        Segment(timed[i].start, timed[min(i + 10, len(timed)) - 1].end,
                " ".join(w.word for w in timed[i : i + 10]))
        for i in range(0, len(timed), 10)
    )  # fmt: skip
    language = "english" if request.translate or not request.language else request.language
    return Transcript(" ".join(said), language, seconds, segments, timed)


def speech(request: SpeechRequest) -> tuple[str, bytes]:
    """The content type and the whole audio."""
    seconds = min(1.0, 0.2 + 0.01 * len(request.input)) / (request.speed or 1.0)
    if request.response_format == "mp3":
        frames = max(1, round(seconds / MP3_FRAME_S))
        return CONTENT_TYPES["mp3"], MP3_FRAME * frames
    pitch = 220 + int.from_bytes(hashlib.sha256(request.input.encode()).digest()[:2]) % 660
    samples = round(seconds * RATE)
    pcm = b"".join(
        struct.pack("<h", round(8000 * math.sin(2 * math.pi * pitch * i / RATE)))
        for i in range(samples)
    )
    if request.response_format == "pcm":
        return CONTENT_TYPES["pcm"], pcm
    return CONTENT_TYPES["wav"], wav(pcm)


def wav(pcm: bytes) -> bytes:
    """16-bit mono PCM at RATE in a RIFF/WAVE file."""
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1, 1, RATE,
        RATE * 2, 2, 16, b"data", len(pcm),
    )  # fmt: skip
    return header + pcm
