"""How an error becomes an HTTP response, piece by piece: the bodies of both error
formats, the statuses only HTTP has, Retry-After in whole seconds, and which response
metadata become headers. The expectations are written out here from the contract
(DESIGN.md) and the providers' documented error types, not read from the code."""

from __future__ import annotations

import json
import logging

import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request

from http_facade.errors import (
    ANTHROPIC,
    FORMATS,
    OPENAI,
    MethodNotAllowed,
    RequestTimeout,
    UnsupportedMediaType,
    error_body,
    error_json,
    error_response,
    error_status,
    internal,
    on_gateway_error,
    on_http_exception,
    response_headers,
)
from server.base.errors import (
    AllProvidersFailed,
    BudgetExhausted,
    Cancelled,
    Code,
    DeadlineExceeded,
    GatewayError,
    Internal,
    InvalidArgument,
    ModelNotFound,
    NotFound,
    PermissionDenied,
    RateLimited,
    StorageUnavailable,
    TooLarge,
    Unauthenticated,
    UpstreamError,
    UpstreamRejected,
)

# Anthropic's documented error types (its "Errors" page), by the gateway's code: each
# Anthropic SDK raises its own class from them.
ANTHROPIC_TYPES = [
    (InvalidArgument("bad", {}), 400, "invalid_request_error"),
    (UpstreamRejected("refused", {}), 400, "invalid_request_error"),
    (Unauthenticated("who", {}), 401, "authentication_error"),
    (PermissionDenied("no", {}), 403, "permission_error"),
    (NotFound("gone", {}), 404, "not_found_error"),
    (TooLarge("big", {}), 413, "request_too_large"),
    (RateLimited("slow", {}), 429, "rate_limit_error"),
    (BudgetExhausted("spent", {}), 429, "rate_limit_error"),
    (Internal("bug", {}), 500, "api_error"),
    (DeadlineExceeded("late", {}), 504, "timeout_error"),
    (Cancelled("gone", {}), 499, "api_error"),
    # 503 is Anthropic's 529 "overloaded", which its SDKs retry; 502 stays 502.
    (StorageUnavailable("db", {}), 529, "overloaded_error"),
    (UpstreamError("down", {}), 529, "overloaded_error"),
    # An upstream that answered badly is not overloaded: Anthropic's api_error.
    (UpstreamError("broke", {}, upstream_answered=True), 502, "api_error"),
]


@pytest.mark.parametrize("error, status, kind", ANTHROPIC_TYPES,
                         ids=[type(e).__name__ for e, _, _ in ANTHROPIC_TYPES])  # fmt: skip
def test_anthropic_error_format(error: GatewayError, status: int, kind: str) -> None:
    assert error_status(error, ANTHROPIC) == status
    assert error_body(error, ANTHROPIC) == {
        "type": "error",
        "error": {"type": kind, "message": error.message},
    }


def test_openai_error_format() -> None:
    error = InvalidArgument.for_field("temperature", "must be between 0 and 2")
    assert error_status(error) == 400
    assert error_body(error) == {
        "error": {
            "message": "temperature: must be between 0 and 2",
            "type": "invalid_request_error",
            "code": "invalid_argument",
            "param": "temperature",
        }
    }
    # OpenAI answers an unknown model with 404 invalid_request_error / model_not_found.
    missing = error_body(ModelNotFound("no model", {}))["error"]
    assert (missing["type"], missing["code"], missing["param"]) == (
        "invalid_request_error",
        "model_not_found",
        None,
    )
    assert error_body(NotFound("no key", {}))["error"]["type"] == "not_found_error"
    assert error_status(UpstreamError("down", {})) == 503


@pytest.mark.parametrize(
    "error, status, code",
    [
        (TooLarge("too big", {}), 413, "request_too_large"),
        (RequestTimeout("too slow", {}), 408, "request_timeout"),
        (MethodNotAllowed("no GET", {}), 405, "method_not_allowed"),
        (UnsupportedMediaType("not JSON", {}), 415, "unsupported_media_type"),
    ],
)
def test_http_only_conditions(error: GatewayError, status: int, code: str) -> None:
    response = error_response(error)
    assert response.status_code == status
    body = json.loads(bytes(response.body))
    assert body["error"]["code"] == code and body["error"]["message"] == error.message
    assert response.headers["content-type"] == "application/json"


def test_method_not_allowed_is_unimplemented() -> None:
    assert MethodNotAllowed("x", {}).code == Code.UNIMPLEMENTED
    assert error_body(MethodNotAllowed("x", {}))["error"]["type"] == "api_error"


@pytest.mark.parametrize(
    "error, expected",
    [
        (RateLimited("slow", {}, retry_after_s=2.2), "3"),
        (RateLimited("slow", {}, retry_after_s=3.0), "3"),
        (RateLimited("slow", {}, retry_after_s=0.2), "1"),
        (RateLimited("slow", {}, retry_after_s=0), "1"),
        (AllProvidersFailed.of("m", []), None),
        (UpstreamError("busy", {}, retry_after_s=7), "7"),
        (StorageUnavailable("db", {}, retry_after_s=1.5), "2"),
        # Only a 429 or a 503 says when to come back.
        (UpstreamError("bad", {}, retry_after_s=7, upstream_answered=True), None),
        (InvalidArgument("bad", {}, retry_after_s=7), None),
    ],
)
def test_retry_after_in_whole_seconds_on_429_and_503(error: GatewayError, expected) -> None:  # type: ignore[no-untyped-def]
    headers = error_response(error).headers
    assert headers.get("retry-after") == expected
    assert headers.get("retry_after") == expected


# What `x-should-retry` says per error, written out from the SDKs' documented rule (retry
# rate limits, timeouts and server faults) less the refusals a retry would meet again.
SHOULD_RETRY = [
    (InvalidArgument("bad", {}), "false"),
    (UpstreamRejected("refused", {}), "false"),
    (Unauthenticated("who", {}), "false"),
    (PermissionDenied("no", {}), "false"),
    (NotFound("gone", {}), "false"),
    (ModelNotFound("which", {}), "false"),
    (TooLarge("big", {}), "false"),
    (MethodNotAllowed("no GET", {}), "false"),
    (Cancelled("gone", {}), "false"),
    (BudgetExhausted("spent", {}, retry_after_s=60), "false"),
    (RateLimited("slow", {}, retry_after_s=2), "true"),
    (RequestTimeout("too slow", {}), "true"),
    (DeadlineExceeded("late", {}), "true"),
    (Internal("bug", {}), "true"),
    (StorageUnavailable("db", {}), "true"),
    (UpstreamError("down", {}), "true"),
    (UpstreamError("broke", {}, upstream_answered=True), "true"),
    (AllProvidersFailed.of("m", []), "true"),
]


@pytest.mark.parametrize("dialect", sorted(FORMATS))
@pytest.mark.parametrize("error, expected", SHOULD_RETRY,
                         ids=[type(e).__name__ for e, _ in SHOULD_RETRY])  # fmt: skip
def test_every_error_in_every_dialect_says_whether_to_retry(
    error: GatewayError, expected: str, dialect: int
) -> None:
    headers = error_response(error, dialect=dialect).headers
    assert headers.getlist("x-should-retry") == [expected]


def test_the_errors_own_retry_hint_replaces_the_metadatas() -> None:
    headers = error_response(InvalidArgument("bad", {}), {"x-should-retry": "true"}).headers
    assert headers.getlist("x-should-retry") == ["false"]


def test_an_unimplemented_method_is_not_retried() -> None:
    unimplemented = GatewayError("not here", {})
    unimplemented.code = Code.UNIMPLEMENTED
    response = error_response(unimplemented)
    assert (response.status_code, response.headers["x-should-retry"]) == (501, "false")


def test_retry_after_on_anthropics_529() -> None:
    response = error_response(UpstreamError("busy", {}, retry_after_s=4), dialect=ANTHROPIC)
    assert response.status_code == 529
    assert response.headers["retry-after"] == "4"


def test_the_errors_own_retry_after_replaces_the_metadatas() -> None:
    metadata = {"retry-after": "99", "x-ratelimit-remaining-requests": "0"}
    headers = error_response(RateLimited("slow", {}, retry_after_s=5), metadata).headers
    assert headers["retry-after"] == "5" and headers.getlist("retry-after") == ["5"]
    assert headers["x-ratelimit-remaining-requests"] == "0"
    # Without its own, the metadata's stays as it was.
    kept = error_response(InvalidArgument("bad", {}), metadata).headers
    assert kept["retry-after"] == "99"


def test_only_text_metadata_that_is_not_grpcs_own_becomes_headers() -> None:
    metadata = [
        ("X-RateLimit-Limit-Requests", "10"),
        ("x-request-id", "req-1"),
        ("grpc-status", "8"),
        ("grpc-message", "x"),
        (":authority", "h"),
        ("trace-bin", b"\x00"),
        ("detail-bin", "text"),
        ("content-type", "application/grpc"),
        ("content-length", "12"),
        ("transfer-encoding", "chunked"),
        ("connection", "close"),
        ("x-binary", b"raw"),
    ]
    assert response_headers(metadata) == {
        "x-ratelimit-limit-requests": "10",
        "x-request-id": "req-1",
    }


def test_a_lone_surrogate_in_a_message_does_not_break_the_body() -> None:
    raw = error_json(InvalidArgument("unknown key '\ud800'", {}))
    body = json.loads(raw)
    assert body["error"]["message"].startswith("unknown key '")
    assert "é" in json.loads(error_json(InvalidArgument("café", {})))["error"]["message"]
    assert "café".encode() in error_json(InvalidArgument("café", {}))


def test_an_unexpected_failure_is_logged_whole_and_shown_generically(caplog) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.ERROR, logger="http_facade.errors"):
        error = internal(RuntimeError("secret detail"), "req-9")
    assert error.message == "internal error (request req-9)"
    assert error.metadata == {"request_id": "req-9"} and error.code == Code.INTERNAL
    (record,) = caplog.records
    assert record.getMessage() == "request req-9 failed" and record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


def test_dialects_do_not_mix() -> None:
    error = RateLimited("slow", {}, retry_after_s=1)
    assert set(error_body(error, OPENAI)) == {"error"}
    assert set(error_body(error, ANTHROPIC)) == {"type", "error"}
    assert error_status(AllProvidersFailed.of("m", []), OPENAI) == 503


def request_for(method: str, path: str) -> Request:
    return Request({"type": "http", "method": method, "path": path, "headers": [],
                    "query_string": b""})  # fmt: skip


async def test_starlettes_own_errors_in_the_same_body() -> None:
    missing = await on_http_exception(request_for("GET", "/v1/nope"), HTTPException(404))
    assert missing.status_code == 404
    assert json.loads(bytes(missing.body))["error"] == {
        "message": "no route for GET /v1/nope",
        "type": "not_found_error",
        "code": "not_found",
        "param": None,
    }
    wrong = await on_http_exception(
        request_for("GET", "/v1/chat/completions"), HTTPException(405, headers={"Allow": "POST"})
    )
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert json.loads(bytes(wrong.body))["error"]["message"] == (
        "GET is not allowed on /v1/chat/completions"
    )
    bare = await on_http_exception(request_for("PUT", "/x"), HTTPException(405))
    assert bare.status_code == 405 and "allow" not in bare.headers
    other = await on_http_exception(request_for("POST", "/x"), HTTPException(400, "bad framing"))
    assert other.status_code == 400
    assert json.loads(bytes(other.body))["error"]["message"] == "bad framing"
    assert json.loads(bytes(other.body))["error"]["type"] == "invalid_request_error"


async def test_a_gateway_error_in_the_endpoints_format_with_its_exchanges_headers() -> None:
    from http_facade.context import Exchange

    request = request_for("POST", "/v1/messages")
    request.state.error_format = ANTHROPIC
    request.state.exchange = Exchange("r1", {}, {"x-ratelimit-remaining-requests": "0"})
    refused = await on_gateway_error(request, RateLimited("slow", {}, retry_after_s=2))
    assert refused.status_code == 429 and refused.headers["retry-after"] == "2"
    assert json.loads(bytes(refused.body))["error"]["type"] == "rate_limit_error"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    # Refused before any endpoint took it (a route whose bindings each want a header
    # the request lacks): the gateway's own format, no headers but its own.
    early = await on_gateway_error(request_for("GET", "/v1/models"), NotFound("no route"))
    assert early.status_code == 404 and "x-ratelimit-remaining-requests" not in early.headers
    assert json.loads(bytes(early.body)) == {
        "error": {"message": "no route", "type": "not_found_error", "code": "not_found",
                  "param": None}
    }  # fmt: skip


def test_anthropics_error_code_goes_in_its_details_only() -> None:
    refused = InvalidArgument(
        "thread: no", {"field": "thread", "error_code": "thread_unsupported_request"}
    )
    body = error_body(refused, ANTHROPIC)["error"]
    assert body["details"] == {"error_code": "thread_unsupported_request"}
    assert "details" not in error_body(InvalidArgument("bad", {}), ANTHROPIC)["error"]
    assert "details" not in error_body(refused, OPENAI)["error"]
