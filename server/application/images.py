"""ImageService: images generated and edited on the first of a model's providers that
makes them, in OpenAI's shape."""

from __future__ import annotations

import base64
import re
import time
from dataclasses import replace
from typing import TypeVar

from gateway.v1 import image_service_pb2 as pb

from server.accounting.accounts import Accounts
from server.application.pipeline.operation_run import OperationRun, operate
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.errors import InvalidArgument, TooLarge
from server.base.images import (
    BACKGROUNDS,
    IMAGES,
    MAX_EDIT_IMAGES,
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    MAX_PROMPT_CHARACTERS,
    OUTPUT_FORMATS,
    QUALITIES,
    RESPONSE_FORMATS,
    SIZES,
    ImageFile,
    ImageRequest,
    Images,
)

ImageAsked = pb.CreateImageRequest | pb.EditImageRequest
# The two answers share their fields.
AnswerT = TypeVar("AnswerT", pb.CreateImageResponse, pb.EditImageResponse)
_SIZE = re.compile(r"[1-9][0-9]{1,4}x[1-9][0-9]{1,4}")


class ImageService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def create_image(
        self, request: pb.CreateImageRequest, call: Call
    ) -> pb.CreateImageResponse:
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        wanted = validated(request, ())
        run = await operate(self.accounts, state, call, principal, request.model, IMAGES, wanted)
        return answered(run, pb.CreateImageResponse())

    async def edit_image(self, request: pb.EditImageRequest, call: Call) -> pb.EditImageResponse:
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        if not request.image:
            raise InvalidArgument.for_field("image", "is required (the image to edit)")
        if len(request.image) > MAX_EDIT_IMAGES:
            raise InvalidArgument.for_field("image", f"takes at most {MAX_EDIT_IMAGES} images")
        images = tuple(_file(f, "image") for f in request.image)
        wanted = validated(request, images)
        if request.HasField("mask"):
            wanted = replace(wanted, mask=_file(request.mask, "mask"))
        run = await operate(self.accounts, state, call, principal, request.model, IMAGES, wanted)
        return answered(run, pb.EditImageResponse())


def answered(run: OperationRun[ImageRequest, Images], answer: AnswerT) -> AnswerT:
    """`answer` filled in with the run's images and usage as OpenAI writes them."""
    assert run.result is not None
    made = run.result
    counts = run.measure().counts
    usage = pb.ImageUsage(
        input_tokens=counts.prompt_tokens,
        input_tokens_details=pb.ImageInputTokens(
            text_tokens=counts.prompt_tokens - counts.image_input_tokens,
            image_tokens=counts.image_input_tokens,
        ),
        output_tokens=counts.completion_tokens,
        total_tokens=counts.total_tokens,
        billed_unit=run.billed()[0],
    )
    cost = run.cost()
    if cost is not None:
        usage.total_cost_usd = cost.total_usd
    answer.created = int(time.time())
    answer.data.extend(
        pb.Image(
            b64_json=base64.b64encode(i.data).decode() if i.data else "",
            url=i.url,
            revised_prompt=i.revised_prompt,
        )
        for i in made.images
    )
    answer.output_format, answer.size = made.output_format, made.size
    answer.quality, answer.background = made.quality, made.background
    answer.usage.CopyFrom(usage)
    return answer


def validated(request: ImageAsked, images: tuple[ImageFile, ...]) -> ImageRequest:
    """Checks a CreateImageRequest or EditImageRequest; InvalidArgument names the field."""
    if not request.prompt.strip():
        raise InvalidArgument.for_field("prompt", "is required")
    if len(request.prompt) > MAX_PROMPT_CHARACTERS:
        raise InvalidArgument.for_field(
            "prompt", f"must be at most {MAX_PROMPT_CHARACTERS} characters"
        )
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    n = request.n if request.HasField("n") else 1
    if not 1 <= n <= MAX_IMAGES:
        raise InvalidArgument.for_field("n", f"must be from 1 to {MAX_IMAGES}")
    if request.size and request.size not in SIZES and not _SIZE.fullmatch(request.size):
        raise InvalidArgument.for_field("size", f"must be auto or WIDTHxHEIGHT ({SIZES[3]})")
    for name, allowed in (
        ("quality", QUALITIES), ("response_format", RESPONSE_FORMATS),
        ("output_format", OUTPUT_FORMATS), ("background", BACKGROUNDS),
    ):  # fmt: skip
        given = getattr(request, name)
        if given and given not in allowed:
            raise InvalidArgument.for_field(name, f"must be one of {', '.join(allowed)}")
    compression = request.output_compression if request.HasField("output_compression") else None
    if compression is not None and not 0 <= compression <= 100:
        raise InvalidArgument.for_field("output_compression", "must be from 0 to 100")
    if request.background == "transparent" and request.output_format == "jpeg":
        raise InvalidArgument.for_field("background", "transparent needs png or webp")
    extra = {"user": request.user} if request.user else {}
    if isinstance(request, pb.CreateImageRequest):
        extra.update({k: v for k in ("style", "moderation") if (v := getattr(request, k))})
    return ImageRequest(
        prompt=request.prompt,
        n=n,
        size=request.size,
        quality=request.quality,
        response_format=request.response_format,
        output_format=request.output_format,
        background=request.background,
        output_compression=compression,
        images=images,
        extra=extra,
    )


def _file(given: pb.ImageFile, name: str) -> ImageFile:
    if not given.data:
        raise InvalidArgument.for_field(name, "is required (an image file, not empty)")
    if len(given.data) > MAX_IMAGE_BYTES:
        raise TooLarge(f"{name}: the file exceeds {MAX_IMAGE_BYTES} bytes", {"field": name})
    return ImageFile(given.data, given.filename or f"{name}.png")
