"""A fake of Google's speech generation and Imagen, on the Gemini API
(`/v1beta/models/{m}:...`, the key in `x-goog-api-key`) and on Vertex AI
(`.../publishers/google/models/{m}:...`, a Bearer token its token endpoint issued),
refusing what they refuse: another credential or path, a field the request does not
have (the 400 "Unknown name"), a speech request without `responseModalities: [AUDIO]`,
a voice Google does not have or an empty text, an Imagen instance without its prompt,
a `sampleCount` past 4, an aspect ratio or output type Imagen does not make.

Speech is `samples` 16-bit samples of PCM at 24 kHz (`audio/L16;codec=pcm;rate=24000`)
with usage in tokens; Imagen answers `sampleCount` images, each a 4x4 PNG (or the
bytes `image/jpeg` names when asked) whose first colour is its index.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from server.providers.simulated_images import png
from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.gemini import error, invalid, unknown
from tests.support.upstreams.vertex import PREFIX, Tokens

VOICES = {"Zephyr", "Puck", "Charon", "Kore", "Fenrir", "Leda", "Orus", "Aoede"}
RATIOS = {"1:1", "3:4", "4:3", "9:16", "16:9"}
PARAMETERS = {"sampleCount", "aspectRatio", "outputOptions", "personGeneration",
              "negativePrompt", "seed", "safetySetting", "addWatermark", "imageSize",
              "includeRaiReason", "language", "guidanceScale"}  # fmt: skip
CONFIG = {"responseModalities", "speechConfig", "temperature", "seed"}


def picture(index: int) -> bytes:
    return png(4, 4, bytes([index + 1]) * 6, False)


@dataclass
class GoogleMediaWire:
    key: str | None = KEY
    # None: the Gemini API; else Vertex AI, taking these tokens.
    tokens: Tokens | None = None
    samples: int = 2400
    refused: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return "/v1beta/models/" if self.tokens is None else f"{PREFIX}/google/models/"

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        refused = self._credential(headers) or self._problem(urlsplit(path).path, body)
        if refused is not None:
            self.refused.append(refused.why)
        return refused

    def _credential(self, headers: dict[str, str]) -> Refusal | None:
        if self.tokens is not None:
            if "x-goog-api-key" in headers:
                return invalid("API keys are not supported by this API.")
            return self.tokens.check(headers)
        if headers.get("x-goog-api-key") != self.key:
            return Refusal(403, error(403, "PERMISSION_DENIED", "Method doesn't allow "
                                      "unregistered callers"), "no key")  # fmt: skip
        return None

    def _problem(self, path: str, body: dict[str, Any]) -> Refusal | None:
        if not path.startswith(self.prefix) or ":" not in path:
            return Refusal(404, error(404, "NOT_FOUND", f"Unknown path {path}"), "path")
        method = path.rpartition(":")[2]
        if method == "generateContent":
            return _speech_problem(body)
        if method == "predict":
            return _imagen_problem(body)
        return Refusal(404, error(404, "NOT_FOUND", f"Unknown method {method}"), "method")

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return False

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return None

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        if path.rpartition(":")[2] == "predict":
            parameters = body.get("parameters") or {}
            kind = (parameters.get("outputOptions") or {}).get("mimeType", "image/png")
            made = [
                {"bytesBase64Encoded": base64.b64encode(picture(i)).decode(), "mimeType": kind}
                for i in range(parameters.get("sampleCount", 1))
            ]
            return {}, {"predictions": made}
        pcm = b"\x10\x00" * self.samples
        audio = {
            "mimeType": "audio/L16;codec=pcm;rate=24000",
            "data": base64.b64encode(pcm).decode(),
        }
        return {}, {
            "candidates": [{"content": {"role": "model", "parts": [{"inlineData": audio}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 60,
                              "totalTokenCount": 69},
            "modelVersion": "gemini-tts-fake",
        }  # fmt: skip

    def stream(self, path: str, body: dict[str, Any], reply: Reply) -> Any:
        raise AssertionError("no streams here")

    def error(self, status: int) -> Any:
        return error(status, "UNAVAILABLE" if status == 503 else "INTERNAL", "fake failure")


def _speech_problem(body: dict[str, Any]) -> Refusal | None:
    if extra := sorted(set(body) - {"contents", "generationConfig", "systemInstruction"}):
        return unknown(extra[0])
    config = body.get("generationConfig") or {}
    if extra := sorted(set(config) - CONFIG):
        return unknown(f"generation_config.{extra[0]}")
    if config.get("responseModalities") != ["AUDIO"]:
        return invalid("The requested combination of response modalities is not supported "
                       "by the model. (a TTS model answers AUDIO only)")  # fmt: skip
    voice = (((config.get("speechConfig") or {}).get("voiceConfig") or {})
             .get("prebuiltVoiceConfig") or {}).get("voiceName")  # fmt: skip
    if voice not in VOICES:
        return invalid(f"Voice name {voice} is not supported.")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return invalid("* GenerateContentRequest.contents: contents is not specified")
    texts = [p.get("text", "") for c in contents for p in c.get("parts", [])]
    if not any(t.strip() for t in texts):
        return invalid("* GenerateContentRequest.contents[0].parts: text is empty")
    return None


def _imagen_problem(body: dict[str, Any]) -> Refusal | None:
    if extra := sorted(set(body) - {"instances", "parameters"}):
        return unknown(extra[0])
    instances = body.get("instances")
    if not isinstance(instances, list) or len(instances) != 1:
        return invalid("instances: Imagen takes one instance")
    if set(instances[0]) - {"prompt"} or not instances[0].get("prompt"):
        return invalid("instances[0]: a prompt is required (and nothing else here)")
    parameters = body.get("parameters") or {}
    if extra := sorted(set(parameters) - PARAMETERS):
        return unknown(f"parameters.{extra[0]}")
    if not 1 <= parameters.get("sampleCount", 1) <= 4:
        return invalid("sampleCount must be from 1 to 4")
    if parameters.get("aspectRatio", "1:1") not in RATIOS:
        return invalid(f"Unsupported aspect ratio {parameters['aspectRatio']}")
    output = parameters.get("outputOptions") or {}
    if output.get("mimeType", "image/png") not in ("image/png", "image/jpeg"):
        return invalid(f"Unsupported output mime type {output['mimeType']}")
    return None
