"""OpenAI's images wire format: a generation's JSON body, an edit's multipart form, the
answer, and an answer's links fetched as the image bytes (server/providers/openai.py
sends and reads them).

An upstream's `url` points at its own signed storage; it reaches the caller only where
the provider's `image_urls: pass` says so. Otherwise each image is fetched here, within
MAX_IMAGE_BYTES and FETCH_TIMEOUT_S, and answered as its bytes (b64_json).
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any

import httpx

from server.base.images import MAX_IMAGE_BYTES, ImageRequest, Images, ImageTokens, MadeImage
from server.providers.http import ProtocolViolation, count, loads

# How long one image's fetch may take, start to end.
FETCH_TIMEOUT_S = 30.0


def generation_body(model: str, request: ImageRequest, links: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "prompt": request.prompt, "n": request.n}
    body.update(_options(request, links))
    return body


def _options(request: ImageRequest, links: bool) -> dict[str, Any]:
    """The request's options as sent. `response_format` goes only where links are
    passed to the caller (`links`); else the upstream answers as it does by default
    (gpt-image models refuse the field) and its links are fetched."""
    names: tuple[str, ...] = ("size", "quality", "output_format", "background")
    if links:
        names += ("response_format",)
    given: dict[str, Any] = {name: value for name in names if (value := getattr(request, name))}
    if request.output_compression is not None:
        given["output_compression"] = request.output_compression
    given.update(request.extra)
    return given


def edit_form(model: str, request: ImageRequest, links: bool) -> tuple[bytes, str]:
    """The multipart body and its content type: the fields, then each image (`image`
    for one, `image[]` for several) and the mask, each copied once, into the body."""
    fields = [("model", model), ("prompt", request.prompt), ("n", str(request.n))]
    fields += [(name, str(value)) for name, value in _options(request, links).items()]
    boundary = os.urandom(16).hex()
    parts = [
        f'--{boundary}\r\ncontent-disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields
    ]
    name = "image" if len(request.images) == 1 else "image[]"
    files = [(name, f) for f in request.images]
    if request.mask is not None:
        files.append(("mask", request.mask))
    for field, given in files:
        filename = given.filename.replace('"', "")
        parts.append(
            f'--{boundary}\r\ncontent-disposition: form-data; name="{field}"; '
            f'filename="{filename}"\r\ncontent-type: {_media(filename)}\r\n\r\n'.encode()
        )
        parts += [given.data, b"\r\n"]
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _media(filename: str) -> str:
    if filename.lower().endswith((".jpg", ".jpeg")):
        return "image/jpeg"
    return "image/webp" if filename.lower().endswith(".webp") else "image/png"


def images(answer: Any, request: ImageRequest) -> Images:
    """OpenAI's answer -> Images (links kept as links; see `fetched`)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise ProtocolViolation("an images answer without its data")
    made = []
    for item in data:
        if not isinstance(item, dict):
            raise ProtocolViolation("an image that is not an object")
        revised = item.get("revised_prompt")
        revised = revised if isinstance(revised, str) else ""
        if isinstance(item.get("b64_json"), str):
            try:
                decoded = base64.b64decode(item["b64_json"], validate=True)
            except binascii.Error:
                raise ProtocolViolation("an image's b64_json is not base64") from None
            made.append(MadeImage(data=decoded, revised_prompt=revised))
        elif isinstance(item.get("url"), str) and item["url"].startswith(("https://", "http://")):
            made.append(MadeImage(url=item["url"], revised_prompt=revised))
        else:
            raise ProtocolViolation("an image without b64_json or an http(s) url")
    usage = answer.get("usage")
    used = None
    if isinstance(usage, dict):
        details = usage.get("input_tokens_details") or {}
        image = count(details.get("image_tokens", 0), "image_tokens")
        total_in = count(usage.get("input_tokens", 0), "input_tokens")
        text = count(details.get("text_tokens", total_in - image), "text_tokens")
        used = ImageTokens(text, image, count(usage.get("output_tokens", 0), "output_tokens"))
    return Images(
        tuple(made),
        size=_text(answer, "size") or request.size,
        quality=_text(answer, "quality") or request.quality,
        output_format=_text(answer, "output_format") or request.output_format or "png",
        background=_text(answer, "background") or request.background,
        tokens=used,
    )


def _text(answer: dict[str, Any], name: str) -> str:
    value = answer.get(name)
    return value if isinstance(value, str) else ""


async def fetched(found: Images) -> Images:
    """`found` with every link replaced by the image it points at, each within
    MAX_IMAGE_BYTES and FETCH_TIMEOUT_S (else ProtocolViolation: the answer is unusable)."""
    if all(not i.url for i in found.images):
        return found
    made = []
    async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_S, follow_redirects=False) as client:
        for image in found.images:
            if image.url:
                image = MadeImage(data=await _fetch(client, image.url),
                                  revised_prompt=image.revised_prompt)  # fmt: skip
            made.append(image)
    return Images(tuple(made), found.size, found.quality, found.output_format,
                  found.background, found.tokens)  # fmt: skip


async def _fetch(client: httpx.AsyncClient, url: str) -> bytes:
    try:
        async with client.stream("GET", url) as r:
            if r.status_code != 200:
                raise ProtocolViolation(f"an image link answered {r.status_code}")
            declared = r.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_IMAGE_BYTES:
                raise ProtocolViolation(f"an image past {MAX_IMAGE_BYTES} bytes")
            chunks, size = [], 0
            async for chunk in r.aiter_bytes():
                size += len(chunk)
                if size > MAX_IMAGE_BYTES:
                    raise ProtocolViolation(f"an image past {MAX_IMAGE_BYTES} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as e:
        raise ProtocolViolation(f"an image link could not be read ({type(e).__name__})") from None


# An images answer's bound: ten images in base64 are larger than a chat answer.
MAX_ANSWER_BYTES = 64 * 1024 * 1024


async def read_answer(response: Any) -> Any:
    """The whole answer as JSON, within MAX_ANSWER_BYTES."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ProtocolViolation("answer too large")
        chunks.append(chunk)
    return loads(b"".join(chunks))
