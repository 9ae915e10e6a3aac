"""OpenAI's audio wire format: a transcription's multipart form and its answer, and a
speech request's body (server/providers/openai.py sends them)."""

from __future__ import annotations

import os
from typing import Any

import orjson

from server.base.audio import (
    InputTokens,
    Segment,
    SpeechRequest,
    Transcript,
    TranscriptionRequest,
    Word,
)
from server.providers.http import ProtocolViolation

# The gateway writes srt and vtt from segments, so it asks for them in verbose_json.
_ASKED = {"json": "json", "text": "json", "verbose_json": "verbose_json",
          "srt": "verbose_json", "vtt": "verbose_json"}  # fmt: skip


def transcription_form(model: str, request: TranscriptionRequest) -> tuple[bytes, str]:
    """The multipart body and its content type: the gateway's fields, the caller's
    others as sent, and the file (copied once, into the body)."""
    fields: list[tuple[str, str]] = [("model", model)]
    fields.append(("response_format", _ASKED[request.response_format]))
    if request.language:
        fields.append(("language", request.language))
    if request.prompt:
        fields.append(("prompt", request.prompt))
    if request.temperature is not None:
        fields.append(("temperature", repr(request.temperature)))
    fields += [("timestamp_granularities[]", g) for g in request.granularities]
    fields += [(k, v) for k, v in request.extra.items()]
    boundary = os.urandom(16).hex()
    head = b"".join(
        f'--{boundary}\r\ncontent-disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields
    )
    filename = request.filename.replace('"', "")
    file_head = (
        f'--{boundary}\r\ncontent-disposition: form-data; name="file"; filename="{filename}"\r\n'
        "content-type: application/octet-stream\r\n\r\n"
    ).encode()
    body = b"".join((head, file_head, request.audio, f"\r\n--{boundary}--\r\n".encode()))
    return body, f"multipart/form-data; boundary={boundary}"


def transcript(answer: Any) -> Transcript:
    """OpenAI's json or verbose_json answer -> Transcript."""
    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
        raise ProtocolViolation("a transcription answer without its text")
    try:
        segments = tuple(
            Segment(float(s["start"]), float(s["end"]), str(s["text"]))
            for s in answer.get("segments") or ()
        )
        words = tuple(
            Word(str(w["word"]), float(w["start"]), float(w["end"]))
            for w in answer.get("words") or ()
        )
    except (KeyError, TypeError, ValueError):
        raise ProtocolViolation("a transcription segment or word without its times") from None
    duration = answer.get("duration")
    given = answer.get("usage")
    usage: dict[str, Any] = given if isinstance(given, dict) else {}
    tokens = None
    if usage.get("type") == "tokens":
        details = usage.get("input_token_details") or {}
        tokens = InputTokens(
            audio=int(details.get("audio_tokens", usage.get("input_tokens", 0))),
            text=int(details.get("text_tokens", 0)),
            output=int(usage.get("output_tokens", 0)),
        )
    elif usage.get("type") == "duration" and isinstance(usage.get("seconds"), int | float):
        duration = usage["seconds"]
    return Transcript(
        text=answer["text"],
        language=str(answer.get("language") or ""),
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        segments=segments,
        words=words,
        tokens=tokens,
    )


def speech_body(model: str, request: SpeechRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        k: orjson.loads(v) for k, v in request.extra.items()
    }  # the caller's other fields, as sent
    body.update(model=model, input=request.input, voice=request.voice,
                response_format=request.response_format)  # fmt: skip
    if request.instructions:
        body["instructions"] = request.instructions
    if request.speed is not None:
        body["speed"] = request.speed
    return body
