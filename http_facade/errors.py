"""Errors -> HTTP: one status table (server.base.errors), one table of error formats.

Every error a caller sees, from the core, a remote gateway or the facade itself, is a
GatewayError rendered by `error_response`, in the format of the dialect its path speaks
(`FORMATS`, keyed by the contract's ErrorFormat); the gateway's own is OpenAI's:

    {"error": {"message": ..., "type": ..., "code": ..., "param": ...}}

with the status from the error's `http_status`, the response metadata the core filled
(x-ratelimit-*), on 429 both `Retry-After` and `retry_after` in whole seconds, and on
every error `x-should-retry`, which the official SDKs obey over their own rule by status.
"""

from __future__ import annotations

import json
import logging
import math
import operator
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.v1 import rest_pb2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from http_facade.unknown_routes import nearest
from server.base.errors import (
    Code,
    GatewayError,
    Internal,
    InvalidArgument,
    NotFound,
)

log = logging.getLogger(__name__)
OPENAI = rest_pb2.ERROR_FORMAT_UNSPECIFIED
ANTHROPIC = rest_pb2.ERROR_FORMAT_ANTHROPIC
OPENAI_RESPONSES = rest_pb2.ERROR_FORMAT_OPENAI_RESPONSES

# OpenAI-style `error.type` per code, so OpenAI clients raise their matching class.
ERROR_TYPE: dict[Code, str] = {
    Code.INVALID_ARGUMENT: "invalid_request_error",
    Code.FAILED_PRECONDITION: "invalid_request_error",
    Code.OUT_OF_RANGE: "invalid_request_error",
    Code.UNAUTHENTICATED: "authentication_error",
    Code.PERMISSION_DENIED: "permission_error",
    Code.NOT_FOUND: "not_found_error",
    Code.RESOURCE_EXHAUSTED: "rate_limit_error",
    Code.DEADLINE_EXCEEDED: "timeout_error",
    Code.CANCELLED: "cancelled",
    Code.UNAVAILABLE: "upstream_error",
}


# Reasons whose OpenAI `error.type` is not their code's: OpenAI answers an unknown model
# with 404 `invalid_request_error` / `model_not_found`; a failed audit write is not an
# upstream's failure.
REASON_ERROR_TYPE: dict[str, str] = {
    "MODEL_NOT_FOUND": "invalid_request_error",
    # The gateway's own storage, not an upstream, failed the change.
    "AUDIT_UNAVAILABLE": "api_error",
    # The gateway's own workers, not an upstream, did not all confirm the change.
    "CHANGE_NOT_EVERYWHERE": "api_error",
}


def error_type(code: Code, reason: str) -> str:
    """The OpenAI-style `error.type` of an error."""
    return REASON_ERROR_TYPE.get(reason) or ERROR_TYPE.get(code, "api_error")


# Metadata that belongs to the transport and never becomes an HTTP header.
_NOT_HEADERS = frozenset({"content-type", "content-length", "transfer-encoding", "connection"})


class RequestTimeout(InvalidArgument):
    """The request body did not arrive in time (an HTTP-only condition)."""

    reason = "REQUEST_TIMEOUT"

    @property
    def http_status(self) -> int:
        return 408


class UnsupportedMediaType(InvalidArgument):
    """The request body is of a type the method does not take (an HTTP-only condition)."""

    reason = "UNSUPPORTED_MEDIA_TYPE"

    @property
    def http_status(self) -> int:
        return 415


class MethodNotAllowed(GatewayError):
    """The path exists, but not for this HTTP method (an HTTP-only condition)."""

    code = Code.UNIMPLEMENTED
    reason = "METHOD_NOT_ALLOWED"

    @property
    def http_status(self) -> int:
        return 405


# Refusals whose status alone would invite a retry that meets the same refusal.
NOT_RETRIED = frozenset({"BUDGET_EXHAUSTED"})


def should_retry(error: GatewayError, status: int) -> bool:
    """Whether the caller may succeed by asking again: after a rate limit, a timeout or a
    failure on the serving side, never after a refusal of the request itself (a wrong key,
    an unknown model, a bad field, a spent budget, a path or method the API lacks)."""
    if error.reason in NOT_RETRIED:
        return False
    return status in (408, 429) or (status >= 500 and status != 501)


def internal(exc: BaseException, request_id: str) -> Internal:
    """An unexpected failure: logged whole here, shown to the caller only generically."""
    log.error("request %s failed", request_id, exc_info=exc)
    return Internal(f"internal error (request {request_id})", {"request_id": request_id})


def error_object(error: GatewayError) -> dict[str, Any]:
    return {
        "message": error.message,
        "type": error_type(error.code, error.reason),
        "code": error.reason.lower(),
        "param": error.param,
    }


# Anthropic's error `type` per code, so each Anthropic SDK raises its own class.
ANTHROPIC_ERROR_TYPE: dict[Code, str] = {
    Code.INVALID_ARGUMENT: "invalid_request_error",
    Code.FAILED_PRECONDITION: "invalid_request_error",
    Code.OUT_OF_RANGE: "invalid_request_error",
    Code.UNAUTHENTICATED: "authentication_error",
    Code.PERMISSION_DENIED: "permission_error",
    Code.NOT_FOUND: "not_found_error",
    Code.RESOURCE_EXHAUSTED: "rate_limit_error",
    Code.DEADLINE_EXCEEDED: "timeout_error",
    Code.UNAVAILABLE: "overloaded_error",
}
# Anthropic answers an overloaded service with 529, which its SDKs retry.
OVERLOADED = 529


def _openai_body(error: GatewayError) -> dict[str, Any]:
    return {"error": error_object(error)}


def _anthropic_body(error: GatewayError) -> dict[str, Any]:
    if error.http_status == 413:
        kind = "request_too_large"
    elif error.http_status == 502:
        kind = "api_error"  # an upstream answered badly: not a capacity problem
    else:
        kind = ANTHROPIC_ERROR_TYPE.get(error.code, "api_error")
    body: dict[str, Any] = {"type": kind, "message": error.message}
    if code := error.metadata.get("error_code"):
        # Anthropic's machine-readable cause, which its SDKs act on (see its `details`).
        body["details"] = {"error_code": code}
    return {"type": "error", "error": body}


def _anthropic_status(error: GatewayError) -> int:
    return OVERLOADED if error.http_status == 503 else error.http_status


def _responses_event(error: GatewayError, sequence: int) -> dict[str, Any]:
    return {
        "type": "error",
        "code": error.reason.lower(),
        "message": error.message,
        "param": error.param,
        "sequence_number": sequence,
    }


def _google_body(error: GatewayError) -> dict[str, Any]:
    """Google's error: the HTTP status as `code`, the gRPC status name as `status`, and
    the details its SDKs and tools read (why, which field, when to retry)."""
    details: list[dict[str, Any]] = [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": error.reason,
         "domain": "gateway"}
    ]  # fmt: skip
    if error.param:
        violation = {"field": error.param, "description": error.message}
        details.append(
            {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}
        )
    if error.retry_after_s is not None:
        delay = f"{max(1, math.ceil(error.retry_after_s))}s"
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay})
    return {
        "error": {
            "code": error.http_status,
            "message": error.message,
            "status": Code(error.code).name,
            "details": details,
        }
    }


@dataclass(frozen=True, slots=True)
class ErrorFormat:
    """How one dialect writes an error: its body, its HTTP status, and its body inside a
    stream after `sequence` events (the plain body when it has no stream form)."""

    body: Callable[[GatewayError], dict[str, Any]]
    status: Callable[[GatewayError], int] = operator.attrgetter("http_status")
    stream_body: Callable[[GatewayError, int], dict[str, Any]] | None = None


# The contract's error formats (rest.proto's ErrorFormat), one entry per dialect that
# writes errors its own way.
FORMATS: dict[int, ErrorFormat] = {
    rest_pb2.ERROR_FORMAT_UNSPECIFIED: ErrorFormat(_openai_body),
    rest_pb2.ERROR_FORMAT_ANTHROPIC: ErrorFormat(_anthropic_body, _anthropic_status),
    rest_pb2.ERROR_FORMAT_OPENAI_RESPONSES: ErrorFormat(_openai_body, stream_body=_responses_event),
    rest_pb2.ERROR_FORMAT_GOOGLE: ErrorFormat(_google_body),
}


def error_body(error: GatewayError, dialect: int = OPENAI) -> dict[str, Any]:
    """The error as the dialect writes it (rest.proto's ErrorFormat)."""
    return FORMATS[dialect].body(error)


def stream_error_body(error: GatewayError, dialect: int, sequence: int) -> dict[str, Any]:
    """The error as the dialect writes it inside a stream, after `sequence` events."""
    written = FORMATS[dialect]
    if written.stream_body is None:
        return written.body(error)
    return written.stream_body(error, sequence)


def error_status(error: GatewayError, dialect: int = OPENAI) -> int:
    return FORMATS[dialect].status(error)


def error_json(error: GatewayError, dialect: int = OPENAI) -> bytes:
    # "replace": an error may quote caller text (an unknown key) holding a lone surrogate.
    body = error_body(error, dialect)
    return json.dumps(body, ensure_ascii=False).encode(errors="replace")


def response_headers(metadata: Iterable[tuple[str, Any]]) -> dict[str, str]:
    """The part of RPC response metadata that is sent as HTTP headers (x-ratelimit-*,
    retry-after): text entries that are not gRPC's own."""
    headers = {}
    for key, value in metadata:
        key = key.lower()
        if (
            isinstance(value, str)
            and not key.startswith(("grpc-", ":"))
            and not key.endswith("-bin")
            and key not in _NOT_HEADERS
        ):
            headers[key] = value
    return headers


def error_response(
    error: GatewayError, metadata: Mapping[str, str] | None = None, dialect: int = OPENAI
) -> Response:
    headers = response_headers((metadata or {}).items())
    status = error_status(error, dialect)
    retry_after = error.retry_after_s
    if retry_after is not None and status in (429, 503, OVERLOADED):
        seconds = str(max(1, math.ceil(retry_after)))
        # The HTTP header and the spec's `retry_after`, over any the metadata carried.
        headers["retry-after"] = headers["retry_after"] = seconds
    # The openai and anthropic SDKs (and the agents built on them) obey it over their own
    # rule by status: a spent budget's 429 is not retried, a wrong key not asked again.
    headers["x-should-retry"] = "true" if should_retry(error, status) else "false"
    return Response(error_json(error, dialect), status, headers, media_type="application/json")


def _metadata(request: Request) -> Mapping[str, str]:
    exchange = getattr(request.state, "exchange", None)
    return exchange.response_headers if exchange is not None else {}


async def on_gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    # The endpoint notes its service's error format; a path the facade does not know
    # answers in the gateway's own.
    dialect = getattr(request.state, "error_format", OPENAI)
    return error_response(exc, _metadata(request), dialect)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 (unknown path, wrong method), in the same body."""
    assert isinstance(exc, HTTPException)
    error: GatewayError
    path, method = request.url.path, request.method
    app = request.scope.get("app")
    hook = getattr(app.state, "on_unknown_route", None) if app is not None else None
    if exc.status_code in (404, 405) and hook is not None:
        client = request.client.host if request.client is not None else ""
        hook(method, path, client, exc.status_code)
    if exc.status_code == 404:
        message = f"no route for {method} {path}"
        if app is not None and (instead := nearest(path, method, app.routes)) is not None:
            message += f"; use {instead}"
        error = NotFound(message)
    elif exc.status_code == 405:
        error = MethodNotAllowed(f"{request.method} is not allowed on {request.url.path}")
    else:
        error = InvalidArgument(str(exc.detail))
    response = error_response(error)
    if exc.headers and "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response


EXCEPTION_HANDLERS: dict[
    int | type[Exception], Callable[[Request, Any], Coroutine[Any, Any, Response]]
] = {
    GatewayError: on_gateway_error,
    HTTPException: on_http_exception,
}
