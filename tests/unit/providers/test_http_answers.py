"""What every HTTP adapter reads from an upstream's refusal: the wait it asks for
(Retry-After as seconds or a date, retry-after-ms), the error it quotes (without
credentials), and Azure's content-filter code. httpx's own Response and Headers, as the
adapters receive them."""

from __future__ import annotations

import email.utils
import json
import time

import httpx
import pytest

from server.base.errors import UpstreamError, UpstreamRejected
from server.providers.http import check_status, redact, retry_after


def waits(**headers: str) -> float | None:
    return retry_after(httpx.Headers({k.replace("_", "-"): v for k, v in headers.items()}))


def test_retry_after_in_milliseconds_comes_first():
    assert waits(retry_after_ms="1500", retry_after="9") == 1.5
    assert waits(retry_after_ms="-20") == 0.0
    # Unreadable milliseconds: the seconds header still counts.
    assert waits(retry_after_ms="soon", retry_after="3") == 3.0


def test_retry_after_in_seconds_or_as_a_date():
    assert waits(retry_after="2.5") == 2.5
    assert waits(retry_after="-3") == 0.0
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= waits(retry_after=later) <= 30  # type: ignore[operator]
    earlier = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert waits(retry_after=earlier) == 0.0
    assert waits(retry_after="tomorrow-ish") is None
    assert waits() is None


def test_credentials_are_redacted_keeping_what_names_them():
    said = (
        "invalid key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789; header Authorization:"
        " Bearer abc.def-ghi; x-api-key: gw-api-QWERTYUIOPasdf1234; api_key=hunter2hunter2 ok;"
        ' token: "tok12345"; hf_abcdefghijk; Bearer eyJhbGciOi.x.y'
    )
    assert redact(said) == (
        "invalid key [redacted]; header Authorization: [redacted]; x-api-key: [redacted];"
        ' api_key=[redacted] ok; token: "[redacted]"; [redacted]; Bearer [redacted]'
    )


async def refusal(status: int, body: object, **headers: str) -> UpstreamError:
    request = httpx.Request("POST", "http://upstream/v1/chat/completions")
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    named = {k.replace("_", "-"): v for k, v in headers.items()}
    response = httpx.Response(status, headers=named, content=content, request=request)
    with pytest.raises(UpstreamError) as info:
        await check_status(response, "p")
    return info.value


async def test_a_content_filter_refusal_is_said_as_such():
    error = {"error": {"message": "The prompt was filtered.", "code": "content_filter"}}
    filtered = await refusal(400, error)
    assert isinstance(filtered, UpstreamRejected)
    assert filtered.message == (
        "p: the upstream's content filter refused the prompt (content_filter):"
        " The prompt was filtered."
    )
    assert filtered.metadata == {
        "provider": "p",
        "upstream_status": "400",
        "code": "content_filter",
    }


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "bad", "code": "invalid_value"}},
        {"error": {"message": "bad", "code": 7}},
        {"error": "bad"},
        {"message": "bad"},
        [{"error": {"code": "content_filter"}}],
        b"bad",
    ],
)
async def test_any_other_400_is_a_plain_refusal(body):
    plain = await refusal(400, body)
    assert isinstance(plain, UpstreamRejected)
    assert plain.metadata == {"provider": "p", "upstream_status": "400"}
    assert plain.message.startswith("p: upstream answered HTTP 400")


async def test_a_429_carries_its_wait():
    busy = await refusal(429, {"error": {"message": "slow down"}}, retry_after_ms="250")
    assert busy.retry_after_s == 0.25 and busy.retryable
    assert busy.message == "p: upstream answered HTTP 429: slow down"
