"""Images: generations and edits, what the core asks of a provider that makes them
(ImageMaker) and the operation that runs them.

An image call is billed per image at the model's `per_image` price (keyed
`<quality>/<size>`, then `<size>`, then `default`) where it has one, else by tokens:
the prompt's text tokens at the input price, input images' tokens at `image_input`,
and the image output tokens at the output price.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from server.base import tokens
from server.base.generation import RetryPolicy, TokenCounts
from server.base.operation import Measure

# OpenAI's bounds: an input image's bytes, images per edit, images per call, a prompt.
MAX_IMAGE_BYTES = 50 * 1024 * 1024
MAX_EDIT_IMAGES = 16
MAX_IMAGES = 10
MAX_PROMPT_CHARACTERS = 32_000
SIZES = ("auto", "256x256", "512x512", "1024x1024", "1536x1024", "1024x1536",
         "1792x1024", "1024x1792")  # fmt: skip
QUALITIES = ("auto", "low", "medium", "high", "standard", "hd")
RESPONSE_FORMATS = ("url", "b64_json")
OUTPUT_FORMATS = ("png", "jpeg", "webp")
BACKGROUNDS = ("auto", "transparent", "opaque")
# What an image is taken to cost in output tokens before the upstream says (gpt-image-1's
# 1024x1024 at medium quality), for the reservation.
ESTIMATED_OUTPUT_TOKENS = 1056
# An input image's tokens before the upstream says (a 512px tile and its base).
ESTIMATED_IMAGE_INPUT_TOKENS = 323


@dataclass(frozen=True, slots=True)
class ImageFile:
    data: bytes
    filename: str = "image.png"


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """A generation, or an edit when `images` holds the images to edit."""

    prompt: str
    n: int = 1
    size: str = ""
    quality: str = ""
    response_format: str = ""
    output_format: str = ""
    background: str = ""
    output_compression: int | None = None
    images: tuple[ImageFile, ...] = ()
    mask: ImageFile | None = None
    # The other fields (style, moderation, user), passed on as sent.
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def edit(self) -> bool:
        return bool(self.images)


@dataclass(frozen=True, slots=True)
class MadeImage:
    """One image: its bytes (from the upstream's base64, or fetched from its link), or a
    link the operator lets through."""

    data: bytes = b""
    url: str = ""
    revised_prompt: str = ""


@dataclass(frozen=True, slots=True)
class ImageTokens:
    """What an upstream that counts tokens reported."""

    text: int
    image: int
    output: int


@dataclass(frozen=True, slots=True)
class Images:
    images: tuple[MadeImage, ...]
    # The size, quality, format and background as made (the upstream's, else as asked).
    size: str = ""
    quality: str = ""
    output_format: str = "png"
    background: str = ""
    tokens: ImageTokens | None = None


@runtime_checkable
class ImageMaker(Protocol):
    """A provider that generates and edits images. Failures are raised as UpstreamError."""

    retry_policy: RetryPolicy

    async def make_images(self, request: ImageRequest) -> Images: ...


class ImageGeneration:
    """Image generation and editing as an operation."""

    name = "image_generation"

    def serves(self, provider: object) -> bool:
        return isinstance(provider, ImageMaker)

    async def call(self, provider: object, request: ImageRequest) -> Images:
        assert isinstance(provider, ImageMaker)
        return await provider.make_images(request)

    def malformed(self, request: ImageRequest, result: Images) -> str | None:
        if not result.images or any(not (i.data or i.url) for i in result.images):
            return "no image"
        return None

    def texts(self, request: ImageRequest) -> tuple[str, ...]:
        return (request.prompt,)

    def with_texts(
        self, request: ImageRequest, texts: tuple[str | tuple[int, ...], ...]
    ) -> ImageRequest:
        return replace(request, prompt=str(texts[0]))

    def measure(self, request: ImageRequest, result: Images | None) -> Measure:
        if result is not None and result.tokens is not None:
            used = result.tokens
        else:
            made = len(result.images) if result is not None else request.n
            used = ImageTokens(
                tokens.estimate(request.prompt),
                ESTIMATED_IMAGE_INPUT_TOKENS * (len(request.images) + (request.mask is not None)),
                ESTIMATED_OUTPUT_TOKENS * made,
            )
        counts = TokenCounts(used.text + used.image, used.output, image_input_tokens=used.image)
        count = len(result.images) if result is not None else request.n
        size = (result.size if result is not None else "") or request.size or "auto"
        quality = (result.quality if result is not None else "") or request.quality or "auto"
        return Measure(counts, {"images": count}, variant=f"{quality}/{size}")


IMAGES = ImageGeneration()
