"""A fake of OpenAI's images endpoints, refusing what OpenAI refuses: another key,
another path, an unknown field, a missing prompt or model, an n, size, quality or
format out of OpenAI's sets; for gpt-image models a `response_format` (they answer
base64 only), for dall-e models `output_format`, `background` and
`output_compression`, dall-e-3 more than one image; an edit that is no multipart form
or has no image.

gpt-image models answer base64 and usage in tokens (text and image input apart);
dall-e models answer a link (by default) to the fake's own signed storage
(`/storage/<n>.png?sig=...`, refused without its signature) and no usage. Each image
is a small PNG whose colours tell the request apart, `padding` bytes appended.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from server.providers.simulated_images import png
from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.openai import bad_request, credential_refusal, error_body

GENERATION_FIELDS = {"model", "prompt", "n", "size", "quality", "response_format",
                     "output_format", "background", "output_compression", "style",
                     "moderation", "user", "stream", "partial_images"}  # fmt: skip
EDIT_FIELDS = {"model", "prompt", "n", "size", "quality", "response_format", "output_format",
               "background", "output_compression", "user", "image", "image[]", "mask",
               "input_fidelity"}  # fmt: skip
SIZES = {"auto", "256x256", "512x512", "1024x1024", "1536x1024", "1024x1536", "1792x1024",
         "1024x1792"}  # fmt: skip
QUALITIES = {"auto", "low", "medium", "high", "standard", "hd"}
SIGNATURE = "sig=fake-signed"
USAGE = {"input_tokens": 50, "input_tokens_details": {"text_tokens": 10, "image_tokens": 40},
         "output_tokens": 272, "total_tokens": 322}  # fmt: skip


@dataclass
class ImagesWire:
    key: str | None = KEY
    # Where the fake is served (set once it runs), for its storage links.
    base_url: str = ""
    # Links without their signature (the storage refuses them).
    sign_links: bool = True
    # Zero bytes appended to each image answered (a large answer).
    padding: int = 0
    refused: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)

    def parse(self, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
        """A form as {name: value} (files their bytes, repeated names a list); JSON else."""
        if not headers.get("content-type", "").startswith("multipart/form-data"):
            return {"_json": json.loads(raw)} if raw else {}
        boundary = headers["content-type"].partition("boundary=")[2].encode()
        form: dict[str, Any] = {}
        for part in raw.split(b"--" + boundary)[1:-1]:
            head, _, value = part[2:-2].partition(b"\r\n\r\n")
            name = head.split(b'name="', 1)[1].split(b'"', 1)[0].decode()
            given: Any = value if b"filename=" in head else value.decode()
            if name.endswith("[]"):
                form.setdefault(name, []).append(given)
            else:
                form[name] = given
        return {"_form": form}

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        if path.startswith("/storage/"):
            if SIGNATURE not in path:
                self.refused.append("unsigned")
                return Refusal(403, {"error": "AuthenticationFailed"}, "unsigned")
            return None
        refused = credential_refusal(headers, self.key)
        if refused is None:
            if path.endswith("/images/generations"):
                problem = self._generation_problem(body)
            elif path.endswith("/images/edits"):
                problem = self._edit_problem(body)
            else:
                return Refusal(404, error_body(f"Invalid URL (POST {path})"), "path")
            refused = bad_request(problem) if problem is not None else None
        if refused is not None:
            self.refused.append(refused.why)
        return refused

    def _generation_problem(self, body: dict[str, Any]) -> str | None:
        given = body.get("_json")
        if not isinstance(given, dict):
            return "Expected a JSON body"
        if extra := sorted(set(given) - GENERATION_FIELDS):
            return f"Unknown parameter: '{extra[0]}'."
        return _common_problem(given)

    def _edit_problem(self, body: dict[str, Any]) -> str | None:
        form = body.get("_form")
        if form is None:
            return "Expected multipart/form-data"
        if extra := sorted(set(form) - EDIT_FIELDS):
            return f"Unknown parameter: '{extra[0]}'."
        if not form.get("image") and not form.get("image[]"):
            return "Missing required parameter: 'image'."
        if isinstance(form.get("image"), bytes) and not form["image"].startswith(b"\x89PNG"):
            return "Invalid image file. Supported formats are png, webp and jpeg."
        given = {k: v for k, v in form.items() if k not in ("image", "image[]", "mask")}
        if "n" in given:
            given["n"] = int(given["n"])
        return _common_problem(given)

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return path.startswith("/storage/")  # the image's bytes, not JSON

    stream_content_type = "image/png"

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return None

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        given = body.get("_json") or body.get("_form") or {}
        model, n = given["model"], int(given.get("n", 1))
        gpt_image = model.startswith("gpt-image")
        link = not gpt_image and given.get("response_format", "url") == "url"
        data = []
        for i in range(n):
            if link:
                signed = f"?{SIGNATURE}" if self.sign_links else ""
                data.append({"url": f"{self.base_url}/storage/{i}.png{signed}",
                             "revised_prompt": f"revised {given['prompt']}"})  # fmt: skip
            else:
                padded = image(i) + bytes(self.padding)
                data.append({"b64_json": base64.b64encode(padded).decode()})
        answer: dict[str, Any] = {"created": 1767225600, "data": data}
        if gpt_image:
            answer.update(size=given.get("size", "1024x1024"), quality="high",
                          output_format=given.get("output_format", "png"),
                          background="opaque", usage=USAGE)  # fmt: skip
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        self.fetched.append(path)
        index = int(path.removeprefix("/storage/").partition(".")[0])
        return [], [image(index)], []

    def error(self, status: int) -> Any:
        return error_body(f"fake failure {status}")


def image(index: int) -> bytes:
    """The fake's image `index`: a 4x4 PNG of its own colours."""
    return png(4, 4, bytes([index + 1]) * 6, False)


def _common_problem(given: dict[str, Any]) -> str | None:
    model = given.get("model")
    if not model:
        return "Missing required parameter: 'model'."
    if not isinstance(given.get("prompt"), str) or not given["prompt"]:
        return "Missing required parameter: 'prompt'."
    n = given.get("n", 1)
    if not isinstance(n, int) or not 1 <= n <= 10 or (model == "dall-e-3" and n != 1):
        return f"Invalid 'n': {n}."
    if given.get("size", "auto") not in SIZES:
        return f"Invalid value: '{given['size']}'. Supported values are: {sorted(SIZES)}."
    if given.get("quality", "auto") not in QUALITIES:
        return f"Invalid value: '{given['quality']}' for quality."
    if model.startswith("gpt-image"):
        if "response_format" in given:
            return "Unknown parameter: 'response_format'."
        if given.get("output_format", "png") not in ("png", "jpeg", "webp"):
            return "Invalid value for output_format."
    else:
        for name in ("output_format", "background", "output_compression"):
            if name in given:
                return f"Unknown parameter: '{name}'."
        if given.get("response_format", "url") not in ("url", "b64_json"):
            return "Invalid value for response_format."
    return None
