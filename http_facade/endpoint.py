"""One HTTP request -> one RPC -> one HTTP response (JSON, or SSE for streaming RPCs).

The request message is built from the binding: the JSON body (bounded by
max_body_bytes), path parameters and, without a body, query parameters. `"stream":
true` in the body of a path with a streaming sibling dispatches to that sibling.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import orjson
from google.protobuf.message import Message
from starlette.requests import Request
from starlette.responses import Response

from http_facade import codec, sse
from http_facade.backends import Backend
from http_facade.bindings import Binding, Rpc
from http_facade.context import Exchange, exchange_for
from http_facade.errors import RequestTimeout, response_headers
from http_facade.protocol import unless_gone
from http_facade.same_origin import check_cookie_change
from server.accounting.admission import KEY_HEADERS
from server.application.governance.signin import SESSION
from server.base.errors import InvalidArgument, TooLarge, UnknownParameter
from server.base.uploads import json_body_bound


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int
    keepalive_s: float
    # Seconds to receive a whole request body (an unterminated one gets 408).
    body_timeout_s: float = 30.0


class Endpoint:
    """The Starlette endpoint serving one Binding."""

    def __init__(self, binding: Binding, backend: Backend, limits: Limits) -> None:
        self.binding = binding
        self.backend = backend
        self.limits = limits
        # A method that takes an upload takes its files in base64 here, to its bound.
        self.max_body_bytes = json_body_bound(
            binding.rpc.descriptor.full_name, limits.max_body_bytes
        )

    async def handle(self, request: Request) -> Response:
        # Errors from here on are written in the service's own error format.
        request.state.error_format = self.binding.rpc.error_format
        exchange = exchange_for(request.scope, self.binding.rpc.forwarded_headers)
        if SESSION in exchange.metadata and not any(
            exchange.metadata.get(h) for h in KEY_HEADERS
        ):  # the admin page's cookie is what authenticates the call
            check_cookie_change(request)
        if self.binding.rpc.key_query:
            _key_from_query(exchange, request, self.binding.rpc.key_query)
        payload = await self._payload(request)
        rpc = self._rpc(payload)
        message = self._message(rpc, payload, request)
        if rpc.server_streaming:
            return await self._stream(rpc, message, exchange, request)
        response = await unless_gone(request.scope, self.backend.unary(rpc, message, exchange))
        answer: Any = codec.to_dict(response)
        if self.binding.response_body:
            answer = answer[self.binding.response_body]
        return _json(answer, exchange)

    async def _payload(self, request: Request) -> Any:
        if not self.binding.body and not self.binding.rpc.refuse_unknown:
            return {}
        try:
            async with asyncio.timeout(self.limits.body_timeout_s):
                raw = await read_body(request, self.max_body_bytes)
        except TimeoutError:
            raise RequestTimeout(
                f"the request body did not arrive within {self.limits.body_timeout_s:g}s"
            ) from None
        if not raw.strip():
            return {}
        try:
            payload = orjson.loads(raw)  # NaN and Infinity are refused, as JSON says
        except (ValueError, RecursionError):
            payload = _strict_loads(raw)
        if self.binding.body == "*" and not isinstance(payload, dict):
            raise InvalidArgument("the request body must be a JSON object")
        if not self.binding.body:
            _no_body(payload, request.method)
            return {}
        return payload

    def _rpc(self, payload: Any) -> Rpc:
        stream_rpc = self.binding.stream_rpc
        if stream_rpc is not None and isinstance(payload, dict) and payload.get("stream") is True:
            return stream_rpc
        return self.binding.rpc

    def _message(self, rpc: Rpc, payload: Any, request: Request) -> Message:
        message = rpc.request_type()
        body = self.binding.body
        if rpc.refuse_unknown and body and request.query_params:
            # The body holds the whole request: the query is read for nothing.
            key = next(iter(request.query_params))
            raise UnknownParameter.for_field(key, "is not a query parameter of this method")
        if body == "*":
            _refuse(payload, rpc.refused_fields)
            codec.from_dict(payload, message, strict=rpc.strict)
        elif body:
            codec.set_field(message, body, payload)
        else:
            descriptor = message.DESCRIPTOR
            for key in request.query_params:
                field = codec.field_for(descriptor, key)
                if field is None or field.message_type is not None:
                    if rpc.refuse_unknown:
                        raise UnknownParameter.for_field(key, "is not a known parameter")
                    continue  # unknown parameters are ignored, like unknown body fields
                values = [codec.from_text(field, v, key) for v in request.query_params.getlist(key)]
                codec.set_field(message, key, values if field.is_repeated else values[-1])
        for param, path in self.binding.path_fields.items():
            field = codec.field_for(message.DESCRIPTOR, path)
            assert field is not None  # checked when the bindings were read
            value = codec.from_text(field, request.path_params[param], path)
            codec.set_field(message, path, value)
        return message

    async def _stream(
        self, rpc: Rpc, message: Message, exchange: Exchange, request: Request
    ) -> Response:
        chunks = self.backend.stream(rpc, message, exchange)
        try:
            first = await unless_gone(request.scope, anext(chunks, None))
        except BaseException:
            await chunks.aclose()
            raise
        headers = response_headers(exchange.response_headers.items())
        framing = rpc.framing.for_query(request.query_params.get("alt"))
        if first is None:
            await chunks.aclose()
            nothing = b"[]" if isinstance(framing, sse.JsonArray) else framing.end
            return Response(nothing, headers={**headers, **framing.headers})
        stopping = getattr(request.app.state, "stopping", None)
        body = sse.events(
            first, chunks, self.limits.keepalive_s, exchange.request_id,
            framing=framing, stopping=stopping,
        )  # fmt: skip
        return sse.EventStream(body, headers, framing.headers)


def _key_from_query(exchange: Exchange, request: Request, parameter: str) -> None:
    """The key a query parameter carries, as a Bearer credential, unless a key header
    came (a header wins, as it does over a Bearer token)."""
    key = request.query_params.get(parameter)
    if key and not any(exchange.metadata.get(h) for h in KEY_HEADERS):
        exchange.metadata["authorization"] = f"Bearer {key}"


def _no_body(payload: Any, method: str) -> None:
    """A 400 for a body sent to a method that reads none (its fields go in the path and
    query): an empty object, or no body at all, is the only one taken."""
    if not isinstance(payload, dict):
        raise InvalidArgument(f"a {method} of this path takes no request body")
    if payload:
        key = next(iter(payload))
        raise UnknownParameter.for_field(
            key, f"is not read from the body of a {method}; give it in the query"
        )


def _refuse(payload: dict[str, Any], refused: frozenset[str]) -> None:
    """A 400 for the first key the contract says the gateway cannot honour."""
    if not refused:
        return
    for key, value in payload.items():
        if key in refused and value is not None:
            raise InvalidArgument.for_field(key, "is not supported by this gateway")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, at most `limit` bytes (TooLarge past it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the request body exceeds {limit} bytes")
    parts = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise TooLarge(f"the request body exceeds {limit} bytes")
        parts.append(part)
    return b"".join(parts)


async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    """The request body (`read_body`) as a JSON object; InvalidArgument otherwise."""
    raw = await read_body(request, limit)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidArgument("malformed JSON in the request body") from None
    if not isinstance(body, dict):
        raise InvalidArgument("the request body must be a JSON object")
    return body


def _json(payload: Any, exchange: Exchange) -> Response:
    body = orjson.dumps(payload)
    headers = response_headers(exchange.response_headers.items())
    return Response(body, headers=headers, media_type="application/json")


def _strict_loads(raw: bytes) -> Any:
    """The standard parser, for what the fast one refuses but JSON allows (an unpaired
    surrogate escape, which the codec then refuses naming its field)."""
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except ValueError:
        raise InvalidArgument("malformed JSON in the request body") from None
    except RecursionError:
        raise InvalidArgument("the request body nests too deeply") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
