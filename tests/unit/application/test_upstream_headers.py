"""The checks on a caller's headers for an upstream MCP server, each refusal naming its
field: names are tokens, values field values in Latin-1, the gateway's own headers
stay its own, and the count and size are bounded."""

from __future__ import annotations

from typing import Any

import pytest

from server.application.mcp import upstream_headers as uh
from server.base.errors import InvalidArgument

WHERE = "tools[0].headers"


def refusal(work: Any) -> tuple[str | None, str]:
    with pytest.raises(InvalidArgument) as refused:
        work()
    return refused.value.param, refused.value.message


def test_valid_headers_come_back_by_their_lower_case_names() -> None:
    given = {"X-Tenant": "acme café", "X-Note": "a\tb c", "X-Empty": "", "x~y!#$%&'*+.^_`|": "1"}
    assert uh.checked(given, WHERE) == {
        "x-tenant": "acme café", "x-note": "a\tb c", "x-empty": "", "x~y!#$%&'*+.^_`|": "1",
    }  # fmt: skip
    assert uh.checked({}, WHERE) == {}
    # Every visible ASCII character and every Latin-1 letter or sign is a value.
    every = "".join(map(chr, range(0x20, 0x7F))).strip() + "".join(map(chr, range(0xA0, 0x100)))
    assert uh.checked({"X-All": every}, WHERE) == {"x-all": every}


@pytest.mark.parametrize(
    ("headers", "field", "message"),
    [
        ("X-A: 1", WHERE, "must map header names to strings"),
        (["X-A"], WHERE, "must map header names to strings"),
        ({"X-A": 1}, f"{WHERE}.X-A", "must be a string"),
        ({"X-A": None}, f"{WHERE}.X-A", "must be a string"),
        ({"": "v"}, f"{WHERE}.", "is not a header name (an RFC 9110 token)"),
        ({"X A": "v"}, f"{WHERE}.X A", "is not a header name (an RFC 9110 token)"),
        ({"X-A:": "v"}, f"{WHERE}.X-A:", "is not a header name (an RFC 9110 token)"),
        ({"X-Ä": "v"}, f"{WHERE}.X-Ä", "is not a header name (an RFC 9110 token)"),
        ({"X-A\n": "v"}, f"{WHERE}.X-A\n", "is not a header name (an RFC 9110 token)"),
        ({"X-A": "a\r\nB: 1"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "a\nb"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x00"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x1f"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x7f"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x80"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\x9f"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "€"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": "\u2028"}, f"{WHERE}.X-A",
         "is not a header value (a control character, or one Latin-1 lacks)"),
        ({"X-A": " a"}, f"{WHERE}.X-A", "must not begin or end with a space or tab"),
        ({"X-A": "a\t"}, f"{WHERE}.X-A", "must not begin or end with a space or tab"),
        ({"X-A": "1", "x-a": "2"}, f"{WHERE}.x-a",
         "is given twice (names are case-insensitive)"),
        ({f"X-{i}": "v" for i in range(33)}, WHERE, "holds more than 32 headers"),
        ({"X-A": "a" * 16378, "X-B": "b"}, f"{WHERE}.X-B", "the headers exceed 16384 bytes"),
    ],
)  # fmt: skip
def test_a_header_that_is_no_valid_field_is_refused_by_name(
    headers: Any, field: str, message: str
) -> None:
    assert refusal(lambda: uh.checked(headers, WHERE)) == (field, f"{field}: {message}")


def test_the_bounds_themselves_are_allowed() -> None:
    assert len(uh.checked({f"X-{i}": "v" for i in range(32)}, WHERE)) == 32
    assert uh.checked({"X-A": "a" * 16377, "X-B": "b"}, WHERE)["x-b"] == "b"


@pytest.mark.parametrize(
    "name",
    ["Host", "content-length", "Content-Type", "Content-Encoding", "Transfer-Encoding",
     "Connection", "Keep-Alive", "Upgrade", "TE", "Trailer", "Expect", "Accept",
     "Accept-Encoding", "traceparent", "tracestate", "baggage", "Proxy-Authorization",
     "Proxy-Connection", "Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"],
)  # fmt: skip
def test_the_gateways_own_headers_are_refused(name: str) -> None:
    field = f"{WHERE}.{name}"
    assert refusal(lambda: uh.checked({name: "v"}, WHERE)) == (
        field, f"{field}: is a header the gateway sets itself"
    )  # fmt: skip


def test_a_token_is_sent_as_a_bearer_when_it_is_a_field_value() -> None:
    where = "mcp_servers[0].authorization_token"
    assert uh.bearer("tok en", where) == "Bearer tok en"
    assert uh.bearer("t" * 16384, where) == "Bearer " + "t" * 16384
    for token, message in [
        ("", "must be a token"),
        (None, "must be a token"),
        (5, "must be a token"),
        ("t" * 16385, "exceeds 16384 bytes"),
        ("a\r\nb", "is not a header value (a control character, or one Latin-1 lacks)"),
        (" a", "must not begin or end with a space or tab"),
    ]:
        assert refusal(lambda t=token: uh.bearer(t, where)) == (where, f"{where}: {message}")
