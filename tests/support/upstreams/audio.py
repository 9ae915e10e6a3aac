"""A fake of OpenAI's audio endpoints, refusing what OpenAI refuses: another key,
another path, a transcription that is no multipart form or has no file, an unknown
field, a response_format or voice OpenAI does not know, timestamps without
verbose_json, a speech input past 4096 characters or a speed out of 0.25-4.

A transcript is "heard N bytes" (N the file's size), reported with usage in tokens
(`tokens=True`) or in seconds; speech is `chunks` chunks of `chunk_bytes` bytes each,
sent one per token (so `slow_body` paces them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from python_multipart.multipart import MultipartParser, parse_options_header

from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.openai import bad_request, credential_refusal, error_body

FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
TRANSCRIPTION_FIELDS = {"file", "model", "language", "prompt", "response_format",
                        "temperature", "timestamp_granularities[]", "stream", "include[]",
                        "chunking_strategy"}  # fmt: skip
SPEECH_FIELDS = {"model", "input", "voice", "instructions", "response_format", "speed",
                 "stream_format"}  # fmt: skip
VOICES = {"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage",
          "shimmer", "verse"}  # fmt: skip
AUDIO_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")


@dataclass
class AudioWire:
    key: str | None = KEY
    tokens: bool = False
    chunks: int = 4
    chunk_bytes: int = 1000
    stream_content_type: str = "audio/mpeg"
    refused: list[str] = field(default_factory=list)

    def parse(self, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
        """A form as {name: value} (`file` its bytes, repeated names a list); JSON else."""
        kind, options = parse_options_header(headers.get("content-type", ""))
        if kind != b"multipart/form-data":
            return {"_json": json.loads(raw)} if raw else {}
        form: dict[str, Any] = {}
        part: dict[str, Any] = {}
        header = [b"", b""]

        def on_header_field(data: bytes, start: int, end: int) -> None:
            header[0] += data[start:end]

        def on_header_value(data: bytes, start: int, end: int) -> None:
            header[1] += data[start:end]

        def on_header_end() -> None:
            if header[0].lower() == b"content-disposition":
                part["name"] = parse_options_header(header[1])[1][b"name"].decode()
            header[0], header[1] = b"", b""

        def on_part_begin() -> None:
            part.clear()
            part["data"] = b""

        def on_part_data(data: bytes, start: int, end: int) -> None:
            part["data"] += data[start:end]

        def on_part_end() -> None:
            name, value = part["name"], part["data"]
            value = value if name == "file" else value.decode()
            if name.endswith("[]"):
                form.setdefault(name, []).append(value)
            else:
                form[name] = value

        parser = MultipartParser(options[b"boundary"], {
            "on_part_begin": on_part_begin, "on_header_field": on_header_field,
            "on_header_value": on_header_value, "on_header_end": on_header_end,
            "on_part_data": on_part_data, "on_part_end": on_part_end,
        })  # fmt: skip
        parser.write(raw)
        parser.finalize()
        return {"_form": form}

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        refused = credential_refusal(headers, self.key)
        if refused is None:
            if path.endswith(("/audio/transcriptions", "/audio/translations")):
                problem = self._transcription_problem(path, body)
            elif path.endswith("/audio/speech"):
                problem = self._speech_problem(body)
            else:
                return Refusal(404, error_body(f"Invalid URL (POST {path})"), "path")
            refused = bad_request(problem) if problem is not None else None
        if refused is not None:
            self.refused.append(refused.why)
        return refused

    def _transcription_problem(self, path: str, body: dict[str, Any]) -> str | None:
        form = body.get("_form")
        if form is None:
            return "Expected multipart/form-data"
        if extra := sorted(set(form) - TRANSCRIPTION_FIELDS):
            return f"Unrecognized request argument supplied: {extra[0]}"
        if path.endswith("/translations") and "language" in form:
            return "Unrecognized request argument supplied: language"
        if not form.get("file"):
            return "'file' is a required property"
        if not form.get("model"):
            return "'model' is a required property"
        answer = form.get("response_format", "json")
        if answer not in FORMATS:
            return f"'{answer}' is not one of {list(FORMATS)} - 'response_format'"
        if form.get("timestamp_granularities[]") and answer != "verbose_json":
            return "timestamp_granularities requires response_format verbose_json"
        return None

    def _speech_problem(self, body: dict[str, Any]) -> str | None:
        given = body.get("_json")
        if not isinstance(given, dict):
            return "Expected a JSON body"
        if extra := sorted(set(given) - SPEECH_FIELDS):
            return f"Unrecognized request argument supplied: {extra[0]}"
        text = given.get("input")
        if not isinstance(text, str) or not text or len(text) > 4096:
            return "input must be a string of 1 to 4096 characters"
        if given.get("voice") not in VOICES:
            return f"voice must be one of {sorted(VOICES)}"
        if given.get("response_format", "mp3") not in AUDIO_FORMATS:
            return "response_format must be one of " + ", ".join(AUDIO_FORMATS)
        speed = given.get("speed", 1.0)
        if not isinstance(speed, int | float) or not 0.25 <= speed <= 4:
            return "speed must be from 0.25 to 4"
        return None

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return path.endswith("/audio/speech")

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return None

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        form = body["_form"]
        size = len(form["file"])
        text = f"heard {size} bytes"
        usage: dict[str, Any]
        if self.tokens:
            usage = {"type": "tokens", "input_tokens": 30,
                     "input_token_details": {"text_tokens": 5, "audio_tokens": 25},
                     "output_tokens": 4, "total_tokens": 34}  # fmt: skip
        else:
            usage = {"type": "duration", "seconds": 7}
        answer: dict[str, Any] = {"text": text, "usage": usage}
        if form.get("response_format") == "verbose_json":
            answer.update(
                task="translate" if path.endswith("translations") else "transcribe",
                language="english",
                duration=7.0,
                segments=[{"id": 0, "start": 0.0, "end": 7.0, "text": text}],
            )
            if "word" in form.get("timestamp_granularities[]", []):
                answer["words"] = [{"word": w, "start": 0.0, "end": 1.0} for w in text.split()]
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        return [], [bytes([65 + i]) * self.chunk_bytes for i in range(self.chunks)], []

    def error(self, status: int) -> Any:
        return error_body(f"fake failure {status}")
