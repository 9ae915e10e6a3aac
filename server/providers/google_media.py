"""Google's speech generation and Imagen, as the Gemini API and Vertex AI serve them
(gemini.py and vertex.py send them to their own URLs).

Speech: `:generateContent` on a TTS model (`gemini-2.5-flash-preview-tts`), the input
as one user turn (the caller's `instructions` before it, as Google's docs steer the
delivery: "Say cheerfully: ..."), `responseModalities: [AUDIO]` and the voice as
`speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName` (Google's voice names: Kore,
Puck...). The answer is inline 16-bit PCM (`audio/L16;codec=pcm;rate=24000`), answered
as `pcm`, or as WAV for every other format (mp3, opus, aac and flac included: the
gateway does not encode audio; the content type says audio/wav). Google has no speed:
one other than 1 is refused by name. Billed by the tokens Google reports.

Images: Imagen's `:predict`, `instances: [{prompt}]` and `parameters` (`sampleCount`
from `n`, 1 to 4; `aspectRatio` the nearest of Imagen's to `size`; `outputOptions`
from `output_format` png or jpeg and `output_compression`); each prediction's
`bytesBase64Encoded` is an image. Imagen edits no images and draws no transparent
backgrounds: both are refused by name. Imagen reports no usage: billed per image.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from typing import Any

from server.base.audio import SpeechRequest
from server.base.errors import UpstreamRejected
from server.base.generation import TokenCounts
from server.base.images import ImageRequest, Images, MadeImage
from server.providers.http import ProtocolViolation, count

# Imagen's aspect ratios, by width over height.
ASPECT_RATIOS = {"1:1": 1.0, "3:4": 0.75, "4:3": 4 / 3, "9:16": 9 / 16, "16:9": 16 / 9}
MAX_IMAGEN_IMAGES = 4
# What Google's PCM is when its type names no rate.
DEFAULT_RATE = 24_000


def _refused(provider: str, field: str, why: str) -> UpstreamRejected:
    return UpstreamRejected(f"{field}: {why} ({provider})", {"provider": provider, "field": field})


def speech_body(request: SpeechRequest, provider: str) -> dict[str, Any]:
    if request.speed not in (None, 1.0):
        raise _refused(provider, "speed", "Google's speech generation has no speed")
    text = f"{request.instructions}: {request.input}" if request.instructions else request.input
    voice = {"prebuiltVoiceConfig": {"voiceName": request.voice}}
    return {
        "contents": [{"role": "user", "parts": [{"text": text}]}],
        "generationConfig": {
            "responseModalities": ["AUDIO"],
            "speechConfig": {"voiceConfig": voice},
        },
    }


def speech_audio(answer: Any, response_format: str) -> tuple[str, bytes, TokenCounts | None]:
    """The answer's audio in the format asked for (pcm, else WAV): its content type,
    its bytes, and the tokens Google reported."""
    pcm, rate = bytearray(), DEFAULT_RATE
    try:
        parts = answer["candidates"][0]["content"]["parts"]
        for part in parts:
            inline = part.get("inlineData") or part.get("inline_data")
            if not inline:
                continue
            kind = str(inline.get("mimeType") or inline.get("mime_type") or "")
            if not kind.startswith(("audio/L16", "audio/pcm")):
                raise ProtocolViolation(f"audio of type {kind!r}, not 16-bit PCM")
            found = re.search(r"rate=(\d+)", kind)
            rate = int(found.group(1)) if found else rate
            pcm += base64.b64decode(inline["data"], validate=True)
    except (KeyError, IndexError, TypeError, binascii.Error):
        raise ProtocolViolation("a speech answer without its audio") from None
    if not pcm:
        raise ProtocolViolation("a speech answer without its audio")
    usage = answer.get("usageMetadata") or {}
    counts = None
    if "promptTokenCount" in usage:
        counts = TokenCounts(
            count(usage["promptTokenCount"], "promptTokenCount"),
            count(usage.get("candidatesTokenCount", 0), "candidatesTokenCount"),
        )
    if response_format == "pcm":
        return "audio/pcm", bytes(pcm), counts
    return "audio/wav", wav(bytes(pcm), rate), counts


def wav(pcm: bytes, rate: int) -> bytes:
    """16-bit mono PCM at `rate` in a RIFF/WAVE file."""
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1, 1, rate,
        rate * 2, 2, 16, b"data", len(pcm),
    )  # fmt: skip
    return header + pcm


def imagen_body(request: ImageRequest, provider: str) -> dict[str, Any]:
    if request.edit:
        raise _refused(provider, "image", "Imagen generates images; it does not edit them")
    if request.background == "transparent":
        raise _refused(provider, "background", "Imagen draws no transparent background")
    if request.n > MAX_IMAGEN_IMAGES:
        raise _refused(provider, "n", f"Imagen makes at most {MAX_IMAGEN_IMAGES} images a call")
    parameters: dict[str, Any] = {"sampleCount": request.n}
    if ratio := aspect_ratio(request.size):
        parameters["aspectRatio"] = ratio
    output: dict[str, Any] = {}
    if request.output_format in ("png", "jpeg"):
        output["mimeType"] = f"image/{request.output_format}"
    elif request.output_format:
        raise _refused(provider, "output_format", "Imagen writes png or jpeg")
    if request.output_compression is not None:
        output["compressionQuality"] = request.output_compression
    if output:
        parameters["outputOptions"] = output
    return {"instances": [{"prompt": request.prompt}], "parameters": parameters}


def aspect_ratio(size: str) -> str | None:
    """Imagen's aspect ratio nearest to `WIDTHxHEIGHT` (None for `auto` or none)."""
    width, _, height = size.partition("x")
    if not (width.isdigit() and height.isdigit()):
        return None
    wanted = int(width) / int(height)
    return min(ASPECT_RATIOS, key=lambda name: abs(ASPECT_RATIOS[name] - wanted))


def imagen_images(answer: Any, request: ImageRequest) -> Images:
    predictions = answer.get("predictions") if isinstance(answer, dict) else None
    if not isinstance(predictions, list) or not predictions:
        # Imagen leaves out what its safety filters removed: none left is a refusal.
        raise ProtocolViolation("an Imagen answer without images (all filtered, or none made)")
    made, kinds = [], set()
    for p in predictions:
        if not isinstance(p, dict) or not isinstance(p.get("bytesBase64Encoded"), str):
            raise ProtocolViolation("an Imagen prediction without bytesBase64Encoded")
        try:
            made.append(MadeImage(data=base64.b64decode(p["bytesBase64Encoded"], validate=True)))
        except binascii.Error:
            raise ProtocolViolation("an Imagen image that is not base64") from None
        kinds.add(str(p.get("mimeType") or "image/png"))
    output_format = "jpeg" if kinds == {"image/jpeg"} else "png"
    return Images(tuple(made), size=request.size, quality=request.quality,
                  output_format=output_format, background=request.background)  # fmt: skip
