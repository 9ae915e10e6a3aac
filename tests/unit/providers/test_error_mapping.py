"""Each adapter's reading of an upstream's refusal -> the gateway's error: which error
(a provider fault that fails over, a misconfigured provider, a request the upstream
rejects), the message it quotes (redacted, shortened), the metadata and the wait.

The refusals are real HTTP answers from a loopback server, read by the adapters' own
client, with bodies built by the providers' SDK types where they have them (openai,
anthropic) and as the APIs document them otherwise (Gemini's google.rpc details,
Bedrock's x-amzn-ErrorType). Mid-stream `error` events go to the readers that see them.
The same refusals through a whole gateway are in tests/integration/upstreams; these run
in milliseconds, for each mutant too."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from anthropic.types import ErrorResponse, InvalidRequestError, OverloadedError
from openai.types.shared import ErrorObject

from server.base.errors import GatewayError, UpstreamError, UpstreamRejected
from server.providers import bedrock, gemini, openai, openai_responses
from server.providers.anthropic import AnthropicProvider
from server.providers.http import Client, HttpParams, Response, check_status
from tests.support.faults import RawRequest, raw_upstream

Checker = Callable[[Response, str], Awaitable[None]]
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


async def refusal(
    check: Checker, status: int, body: Any = b"", headers: dict[str, str] | None = None
) -> GatewayError | None:
    """What `check` makes of one real answer with `status`, `body` (JSON unless
    bytes) and `headers`: the error it raises, or None."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()

    async def answer(request: RawRequest, writer: Any) -> None:
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}"
            f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
            + data
        )

    async with raw_upstream(answer) as upstream:
        client = Client(HttpParams(base_url=upstream.url, model="m"), {})
        try:
            async with client.stream("POST", "/v1/x", json={}) as response:
                await check(response, "p1")
        except GatewayError as exc:
            return exc
        finally:
            await client.aclose()
    return None


def openai_error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": ErrorObject(message=message, type=kind, code=code, param=None).model_dump()}


# -- the shared mapping (OpenAI, Azure OpenAI, Anthropic, TGI) -----------------


@pytest.mark.parametrize("status", [200, 201, 299])
async def test_a_success_is_no_error(status):
    assert await refusal(check_status, status, {"error": {"message": "no"}}) is None


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_a_refused_key_url_or_model_is_the_providers_configuration_never_quoted(status):
    said = openai_error(f"Incorrect API key provided: {KEY}", "invalid_request_error")
    assert await refusal(check_status, status, said) == UpstreamError(
        f"p1: upstream refused the gateway's configuration (HTTP {status}); "
        "check its api_key_env, base_url and model",
        {"provider": "p1", "upstream_status": str(status)},
        upstream_answered=True,
    )


async def test_a_rate_limit_fails_over_with_the_wait_asked_for():
    said = openai_error("Rate limit reached for gpt-4o", "requests", "rate_limit_exceeded")
    assert await refusal(check_status, 429, said, {"retry-after": "7"}) == UpstreamError(
        "p1: upstream answered HTTP 429: Rate limit reached for gpt-4o",
        {"provider": "p1", "upstream_status": "429"},
        retry_after_s=7.0,
    )
    without = await refusal(check_status, 429, b"")
    assert without == UpstreamError(
        "p1: upstream answered HTTP 429", {"provider": "p1", "upstream_status": "429"}
    )


@pytest.mark.parametrize("status", [500, 502, 503, 529, 408, 409])
async def test_a_server_fault_or_a_conflict_fails_over(status):
    said = ErrorResponse(
        error=OverloadedError(message="Overloaded", type="overloaded_error"), request_id=None,
        type="error",
    ).model_dump()  # fmt: skip
    assert await refusal(check_status, status, said) == UpstreamError(
        f"p1: upstream answered HTTP {status}: Overloaded",
        {"provider": "p1", "upstream_status": str(status)},
        upstream_answered=True,
    )


@pytest.mark.parametrize("status", [400, 413, 422])
async def test_a_request_the_upstream_refuses_is_the_callers_quoted_and_redacted(status):
    said = ErrorResponse(
        error=InvalidRequestError(message=f"max_tokens: too large (key {KEY})",
                                  type="invalid_request_error"),
        request_id="req_1", type="error",
    ).model_dump()  # fmt: skip
    assert await refusal(check_status, status, said) == UpstreamRejected(
        f"p1: upstream answered HTTP {status}: max_tokens: too large (key [redacted])",
        {"provider": "p1", "upstream_status": str(status)},
    )


async def test_azures_content_filter_is_said_as_such():
    said = openai_error("The response was filtered due to the prompt.", "invalid_request_error",
                        "content_filter")  # fmt: skip
    said["error"]["innererror"] = {"code": "ResponsibleAIPolicyViolation"}
    assert await refusal(check_status, 400, said) == UpstreamRejected(
        "p1: the upstream's content filter refused the prompt (content_filter): "
        "The response was filtered due to the prompt.",
        {"provider": "p1", "upstream_status": "400", "code": "content_filter"},
    )
    bare = await refusal(check_status, 400, {"error": {"code": "content_filter"}})
    assert bare == UpstreamRejected(
        "p1: the upstream's content filter refused the prompt (content_filter)",
        {"provider": "p1", "upstream_status": "400", "code": "content_filter"},
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"error": "Input validation error: `inputs` must have less than 1024 tokens",
          "error_type": "validation"},
         "Input validation error: `inputs` must have less than 1024 tokens"),  # TGI
        ({"detail": "Not acceptable"}, "Not acceptable"),
        ({"message": "bad field", "detail": "other"}, "bad field"),
        ({"error": {"code": 7}}, ""),
        ({"error": {"code": "other_code", "message": "nope"}}, "nope"),
        ([1, 2], ""),
        ("just text", ""),  # a JSON string: no message field
        (b"  <html>Bad Gateway</html>  ", "<html>Bad Gateway</html>"),
        (b"\xffbad \xe2\x82 gateway", "\ufffdbad \ufffd gateway"),  # not UTF-8
        ({"error": "x" * 300}, "x" * 200),
        (b"y" * 300, "y" * 200),
        (b"", ""),
    ],
)  # fmt: skip
async def test_the_message_quoted_is_the_upstreams_own_in_each_shape(body, said):
    out = await refusal(check_status, 400, body)
    assert isinstance(out, UpstreamRejected) and "code" not in out.metadata
    assert out.message == "p1: upstream answered HTTP 400" + (f": {said}" if said else "")


async def test_only_the_start_of_a_long_error_body_is_read():
    body = json.dumps({"error": {"message": "m", "code": "content_filter"}}).encode()
    out = await refusal(check_status, 400, body + b" " * (16 * 1024))
    assert isinstance(out, UpstreamRejected) and out.metadata["code"] == "content_filter"
    cut = await refusal(check_status, 400, b" " * (16 * 1024) + body)
    assert cut == UpstreamRejected(
        "p1: upstream answered HTTP 400", {"provider": "p1", "upstream_status": "400"}
    )


# -- errors inside an answer ---------------------------------------------------


def test_an_openai_stream_error_is_quoted_short_and_redacted():
    assert openai._error_text({"message": f"boom {KEY}", "type": "server_error"}) == (
        "boom [redacted]"
    )
    assert openai._error_text("overloaded " + "z" * 300) == "overloaded " + "z" * 189
    assert openai._error_text({"type": "server_error"}) == "None"


def test_a_failed_response_is_an_upstream_fault_quoting_its_message():
    reader = openai_responses.Reader("p1")
    failed = reader._failure({"code": "server_error", "message": f"try again {KEY}"})
    assert failed == UpstreamError(
        "p1: upstream failed: try again [redacted]", {"provider": "p1"}, upstream_answered=True
    )
    assert reader._failure({"code": "server_error", "message": "w" * 300}).message == (
        "p1: upstream failed: " + "w" * 200
    )
    assert reader._failure({}).message == "p1: upstream failed: failed"


def test_an_anthropic_error_event_is_an_upstream_fault_quoting_its_type_and_message():
    adapter = AnthropicProvider.__new__(AnthropicProvider)
    adapter.id = "p1"
    event = ErrorResponse(
        error=OverloadedError(message=f"Overloaded {KEY}", type="overloaded_error"),
        request_id=None, type="error",
    ).model_dump()  # fmt: skip
    assert adapter._failed(event) == UpstreamError(
        "p1: upstream failed mid-stream: overloaded_error: Overloaded [redacted]",
        {"provider": "p1"},
        upstream_answered=True,
    )
    long = adapter._failed({"type": "error", "error": {"type": "api_error", "message": "v" * 300}})
    assert long.message == "p1: upstream failed mid-stream: api_error: " + "v" * 200
    assert adapter._failed({"type": "error"}).message == (
        "p1: upstream failed mid-stream: error: None"
    )


# -- Gemini (and Vertex's Gemini) ----------------------------------------------


def google_error(code: int, status: str, message: str, *details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status, "details": list(details)}}


async def test_gemini_says_a_wrong_key_is_the_providers_configuration():
    said = google_error(
        400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
         "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},
    )  # fmt: skip
    assert await refusal(gemini.check, 400, said) == UpstreamError(
        "p1: upstream refused the gateway's configuration (HTTP 400 API_KEY_INVALID); "
        "check its api_key_env",
        {"provider": "p1", "upstream_status": "400"},
        upstream_answered=True,
    )


async def test_gemini_rejects_a_bad_request_quoting_its_message():
    said = google_error(400, "INVALID_ARGUMENT", f"Invalid JSON payload {KEY} " + "q" * 300)
    out = await refusal(gemini.check, 400, said)
    assert out == UpstreamRejected(
        "p1: upstream answered HTTP 400: Invalid JSON payload [redacted] " + "q" * 134,
        {"provider": "p1", "upstream_status": "400"},
    )
    bodies: tuple[Any, ...] = (b"<html>", [1], {"error": "flat"}, {"error": {}})
    for body in bodies:
        assert await refusal(gemini.check, 400, body) == UpstreamRejected(
            "p1: upstream answered HTTP 400", {"provider": "p1", "upstream_status": "400"}
        )


async def test_gemini_waits_as_its_retry_info_says_unless_a_header_says_otherwise():
    retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "38s"}
    quota = {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []}
    said = google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", quota, retry)
    assert await refusal(gemini.check, 429, said) == UpstreamError(
        "p1: upstream answered HTTP 429: Quota exceeded",
        {"provider": "p1", "upstream_status": "429"},
        retry_after_s=38.0,
    )
    headed = await refusal(gemini.check, 429, said, {"retry-after": "3"})
    assert headed is not None and headed.retry_after_s == 3.0
    zero = await refusal(gemini.check, 429, said, {"retry-after": "0"})
    assert zero is not None and zero.retry_after_s == 0.0
    bare = await refusal(gemini.check, 429, b"")
    assert bare == UpstreamError(
        "p1: upstream answered HTTP 429", {"provider": "p1", "upstream_status": "429"}
    )


@pytest.mark.parametrize(
    ("details", "wait"),
    [([{"retryDelay": "1.5s"}], 1.5), ([{"retryDelay": "-2s"}], 0.0), (["x", {"retryDelay": "4s"}], 4.0),
     ([{"retryDelay": "soon s"}, {"retryDelay": "4s"}], None), ([{"retryDelay": "4"}], None),
     ([{"retryDelay": 4}], None), ([], None), (None, None)],
)  # fmt: skip
def test_gemini_retry_delay_is_read_in_seconds(details, wait):
    assert gemini._retry_delay({"details": details}) == wait


async def test_gemini_passes_other_statuses_to_the_shared_mapping():
    said = google_error(503, "UNAVAILABLE", "The model is overloaded.")
    assert await refusal(gemini.check, 503, said) == UpstreamError(
        "p1: upstream answered HTTP 503: The model is overloaded.",
        {"provider": "p1", "upstream_status": "503"},
        upstream_answered=True,
    )
    assert await refusal(gemini.check, 200, said) is None
    assert isinstance(await refusal(gemini.check, 403, said), UpstreamError)


# -- Bedrock -------------------------------------------------------------------


def amazon(kind: str) -> dict[str, str]:
    return {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"}


async def test_bedrock_names_the_exception_and_quotes_its_message():
    said = {"message": f"Malformed input request: {KEY}, please reformat your input"}
    assert await refusal(bedrock.check, 400, said, amazon("ValidationException")) == (
        UpstreamRejected(
            "p1: upstream answered HTTP 400 ValidationException: Malformed input request: "
            "[redacted], please reformat your input",
            {"provider": "p1", "upstream_status": "400", "upstream_error": "ValidationException"},
        )
    )
    # Without the header, the body's __type names it; some services write Message.
    typed = {"__type": "com.amazon.coral.validate#ValidationException", "Message": "m" * 300}
    assert await refusal(bedrock.check, 400, typed) == UpstreamRejected(
        "p1: upstream answered HTTP 400 ValidationException: " + "m" * 200,
        {"provider": "p1", "upstream_status": "400", "upstream_error": "ValidationException"},
    )
    assert await refusal(bedrock.check, 400, b"<html>proxy</html>") == UpstreamRejected(
        "p1: upstream answered HTTP 400", {"provider": "p1", "upstream_status": "400",
                                           "upstream_error": ""}
    )  # fmt: skip
    assert await refusal(bedrock.check, 200, said) is None
    assert await refusal(bedrock.check, 299, said) is None
    # A JSON answer that is no object (a proxy's, say) names no exception.
    assert await refusal(bedrock.check, 400, [said]) == UpstreamRejected(
        "p1: upstream answered HTTP 400", {"provider": "p1", "upstream_status": "400",
                                           "upstream_error": ""}
    )  # fmt: skip
    # The exception's name is what follows the last '#' of __type.
    nested = {"__type": "com.amazon#coral#ThrottlingException"}
    out = await refusal(bedrock.check, 400, nested)
    assert out is not None and out.metadata["upstream_error"] == "ThrottlingException"
    assert out.retryable


@pytest.mark.parametrize("check", [check_status, bedrock.check, gemini.check])
async def test_a_redirect_is_no_success(check):
    out = await refusal(check, 300, {"message": "moved"})
    assert isinstance(out, UpstreamRejected) and out.metadata["upstream_status"] == "300"


@pytest.mark.parametrize(
    ("status", "kind"),
    [(403, "AccessDeniedException"), (403, "UnrecognizedClientException"),
     (403, "InvalidSignatureException"), (404, "ResourceNotFoundException"),
     (403, "ExpiredTokenException"), (400, "AccessDeniedException"), (401, "")],
)  # fmt: skip
async def test_bedrock_says_refused_credentials_region_or_model_are_the_providers(status, kind):
    said = {"message": f"The security token included in the request is invalid {KEY}"}
    assert await refusal(bedrock.check, status, said, amazon(kind) if kind else None) == (
        UpstreamError(
            f"p1: upstream refused the gateway's configuration (HTTP {status} {kind}); "
            "check its credentials, region and model",
            {"provider": "p1", "upstream_status": str(status), "upstream_error": kind},
            upstream_answered=True,
        )
    )


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "ThrottlingException"), (400, "ServiceQuotaExceededException"),
     (429, "ModelNotReadyException"), (503, "ServiceUnavailableException"),
     (500, "InternalServerException"), (408, "ModelTimeoutException"),
     (424, "ModelErrorException"), (400, "ModelStreamErrorException"), (502, ""), (500, ""),
     (429, ""), (408, ""), (424, "")],
)  # fmt: skip
async def test_bedrock_fails_over_on_throttling_and_server_faults(status, kind):
    out = await refusal(bedrock.check, status, {"message": "Too many requests"},
                        {**(amazon(kind) if kind else {}), "retry-after": "2"})  # fmt: skip
    assert out == UpstreamError(
        f"p1: upstream answered HTTP {status} {kind}".rstrip() + ": Too many requests",
        {"provider": "p1", "upstream_status": str(status), "upstream_error": kind},
        retry_after_s=2.0,
        upstream_answered=status != 429,
    )
    assert type(out) is UpstreamError


def test_bedrock_stream_exception_messages_are_read_from_their_payload():
    assert bedrock._said(b'{"message": "throttled ' + KEY.encode() + b'"}') == (
        "throttled [redacted]"
    )
    assert bedrock._said(bytearray(b'{"Message": "capital"}')) == "capital"
    assert bedrock._said({"message": "", "Message": "second"}) == "second"
    assert bedrock._said(b"not json") == ""
    assert bedrock._said(b"[1]") == ""
    assert bedrock._said({"other": 1}) == ""
    assert bedrock._said({"message": "n" * 300}) == "n" * 200
