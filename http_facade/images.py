"""`/v1/images/edits`: OpenAI's multipart image edits over ImageService, in-process or
to a remote gateway alike, in place of the annotated route's JSON handling (an edit
sent as JSON, its files in base64, still goes there; generations are JSON and stay on
the annotated route).

The form's files (`image`, `image[]`, `mask`) are read as they arrive
(http_facade/forms.py) within MAX_IMAGE_BYTES together (413 past it, or at once when
the declared length is past it), each joined once.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import orjson
from gateway.v1 import image_service_pb2 as pb
from google.protobuf.descriptor import MethodDescriptor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from http_facade.backends import Backend
from http_facade.bindings import Rpc
from http_facade.codec import to_dict
from http_facade.context import exchange_for
from http_facade.errors import response_headers
from http_facade.forms import boundary_of, read_files, refuse_declared_past
from http_facade.protocol import unless_gone
from server.base.errors import InvalidArgument, TooLarge
from server.base.images import MAX_IMAGE_BYTES

Handle = Callable[[Request], Awaitable[Response]]
SERVICE = "gateway.v1.ImageService"
EDITS = "/v1/images/edits"
FILE_FIELDS = ("image", "image[]", "mask")
TEXT_FIELDS = ("prompt", "model", "size", "quality", "response_format", "output_format",
               "background", "user")  # fmt: skip
NUMBER_FIELDS = ("n", "output_compression")


class ImageEndpoints:
    def __init__(self, rpc: Rpc, backend: Backend) -> None:
        self.rpc = rpc
        self.backend = backend

    async def edits(self, annotated: Handle, request: Request) -> Response:
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            return await annotated(request)
        exchange = exchange_for(request.scope)
        boundary = boundary_of(request, "image")
        too_large = TooLarge(f"image: the files exceed {MAX_IMAGE_BYTES} bytes", {"field": "image"})
        refuse_declared_past(request, MAX_IMAGE_BYTES, too_large)
        fields, files = await read_files(request, boundary, FILE_FIELDS, MAX_IMAGE_BYTES)
        message = edit_request(fields, files)
        del files  # the request holds them now
        answer = await unless_gone(request.scope, self.backend.unary(self.rpc, message, exchange))
        assert isinstance(answer, pb.EditImageResponse)
        headers = response_headers(exchange.response_headers.items())
        return Response(
            orjson.dumps(to_dict(answer)), headers=headers, media_type="application/json"
        )


def with_images(
    routes: list[BaseRoute], served: Iterable[MethodDescriptor], backend: Backend
) -> list[BaseRoute]:
    """`routes` with an edit's multipart form served here (JSON goes on as annotated)."""
    rpcs = [m for m in served if m.full_name == f"{SERVICE}.EditImage"]
    if not rpcs:
        return routes
    endpoints = ImageEndpoints(Rpc.of(rpcs[0]), backend)
    found: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, Route) and route.path == EDITS:
            serve = functools.partial(endpoints.edits, route.endpoint)
            replaced = Route(route.path, serve, methods=list(route.methods or ()), name=route.name)
            replaced.methods = route.methods
            route = replaced
        found.append(route)
    return found


def edit_request(
    fields: list[tuple[str, str]], files: list[tuple[str, str, bytes]]
) -> pb.EditImageRequest:
    """The form as an EditImageRequest; a field it does not know is refused by name."""
    message = pb.EditImageRequest()
    for name, filename, data in files:
        if name == "mask":
            if message.HasField("mask"):
                raise InvalidArgument.for_field("mask", "takes one file")
            message.mask.CopyFrom(pb.ImageFile(data=data, filename=filename))
        else:
            message.image.append(pb.ImageFile(data=data, filename=filename))
    for name, value in fields:
        if name in TEXT_FIELDS:
            setattr(message, name, value)
        elif name in NUMBER_FIELDS:
            setattr(message, name, _whole(value, name))
        else:
            raise InvalidArgument.for_field(name, "is not a field of an image edit")
    return message


def _whole(value: str, name: str) -> Any:
    try:
        return int(value)
    except ValueError:
        raise InvalidArgument.for_field(name, "must be a whole number") from None
