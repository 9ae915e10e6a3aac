"""What every HTTP adapter reads from an upstream's refusal: the wait it asks for
(Retry-After as seconds or a date, retry-after-ms, from headers as the HTTP client
gives them: a case-insensitive multidict) and the error it quotes, without credentials.
The refusals themselves, read from a real answer, are in
tests/integration/upstreams/test_answer_edges.py."""

from __future__ import annotations

import email.utils
import time

from multidict import CIMultiDict, CIMultiDictProxy

from server.providers.http import redact, retry_after
from tests.support.lookalikes import AWS_ACCESS_KEY, GOOGLE_API_KEY


def waits(**headers: str) -> float | None:
    named = CIMultiDict({k.replace("_", "-").title(): v for k, v in headers.items()})
    return retry_after(CIMultiDictProxy(named))


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
        ' token: "tok12345"; hf_abcdefghijk; Bearer eyJhbGciOi.x.y;'
        f" {GOOGLE_API_KEY}; {AWS_ACCESS_KEY} signed"
    )
    assert redact(said) == (
        "invalid key [redacted]; header Authorization: [redacted]; x-api-key: [redacted];"
        ' api_key=[redacted] ok; token: "[redacted]"; [redacted]; Bearer [redacted];'
        " [redacted]; [redacted] signed"
    )


def test_the_keys_given_are_redacted_and_an_empty_one_is_ignored():
    said = "the key own-key-0123456789 was refused"
    assert redact(said, ["own-key-0123456789"]) == "the key [redacted] was refused"
    # A token file read empty gives an empty key: it must not match everywhere.
    assert redact(said, [""]) == said
