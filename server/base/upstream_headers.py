"""Headers a caller gives for an upstream MCP server (a Responses `mcp` tool's `headers`
and `authorization`, a Messages server's `authorization_token`), checked before any of
them reaches a server.

A name is an RFC 9110 token and a value a field value in Latin-1 (what HTTP/1.1 can
carry): a CR, LF, NUL or other control character could end the header and start
another, or another request. The headers that frame the request or that the gateway's
client sets itself (host, content-length, the MCP session...) are the gateway's alone.
A value holding a key of this gateway is refused: the caller's key is for the gateway,
never for an upstream.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from server.base.errors import InvalidArgument

# RFC 9110 §5.6.2: token = 1*tchar.
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A field value: visible ASCII, space and tab, and Latin-1's letters and signs; no C0 or
# C1 control character (CR, LF and NUL among them), nothing Latin-1 cannot encode.
VALUE = re.compile(r"[\t\x20-\x7e\xa0-\xff]*")
MAX_HEADERS = 32
# Names and values together, in bytes.
MAX_BYTES = 16 * 1024
# Framing and hop-by-hop headers, and those the gateway's client sends itself.
RESERVED = frozenset(
    {"host", "content-length", "content-type", "content-encoding", "transfer-encoding",
     "connection", "keep-alive", "upgrade", "te", "trailer", "expect", "accept",
     "accept-encoding", "traceparent", "tracestate", "baggage"}
)  # fmt: skip
RESERVED_PREFIXES = ("proxy-", "mcp-")
# A key the key store makes (gw-{kind}-{32 random bytes in URL-safe base64}), found
# wherever it starts, overlapping ones too.
STORED_KEY = re.compile(r"(?=(gw-(?:api|router|admin)-[A-Za-z0-9_-]{43}))")
# Key store lookups one header may cost; a value holding more key-like tokens is refused.
MAX_KEY_LOOKUPS = 4


def checked(headers: Any, where: str) -> dict[str, str]:
    """A `headers` object as name -> value, each header valid and none reserved;
    InvalidArgument naming the field (`{where}.{name}`) otherwise."""
    if not isinstance(headers, dict):
        raise InvalidArgument.for_field(where, "must map header names to strings")
    if len(headers) > MAX_HEADERS:
        raise InvalidArgument.for_field(where, f"holds more than {MAX_HEADERS} headers")
    out: dict[str, str] = {}
    size = 0
    for name, value in headers.items():
        field = f"{where}.{name}"
        if not TOKEN.fullmatch(name):
            raise InvalidArgument.for_field(field, "is not a header name (an RFC 9110 token)")
        lower = name.lower()
        if lower in RESERVED or lower.startswith(RESERVED_PREFIXES):
            raise InvalidArgument.for_field(field, "is a header the gateway sets itself")
        if lower in out:
            raise InvalidArgument.for_field(field, "is given twice (names are case-insensitive)")
        out[lower] = field_value(value, field)
        size += len(name) + len(value)
        if size > MAX_BYTES:
            raise InvalidArgument.for_field(field, f"the headers exceed {MAX_BYTES} bytes")
    return out


def bearer(token: Any, where: str) -> str:
    """`Authorization`'s value for a token; InvalidArgument naming `where` unless the
    token is a non-empty field value."""
    if not isinstance(token, str) or not token:
        raise InvalidArgument.for_field(where, "must be a token")
    if len(token) > MAX_BYTES:
        raise InvalidArgument.for_field(where, f"exceeds {MAX_BYTES} bytes")
    return f"Bearer {field_value(token, where)}"


def field_value(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgument.for_field(where, "must be a string")
    if not VALUE.fullmatch(value):
        raise InvalidArgument.for_field(
            where, "is not a header value (a control character, or one Latin-1 lacks)"
        )
    if value != value.strip(" \t"):  # HTTP drops it: the server would see another value
        raise InvalidArgument.for_field(where, "must not begin or end with a space or tab")
    return value


async def refuse_keys(
    headers: dict[str, str],
    fields: dict[str, str],
    configured: Iterable[str],
    stored: Callable[[str], Awaitable[bool]],
) -> None:
    """InvalidArgument naming the field of the first header whose value holds a key of
    this gateway: one of the `configured` secrets anywhere in it, or a token shaped like
    a stored key that `stored` knows (at most MAX_KEY_LOOKUPS asked per header)."""
    secrets = tuple(configured)
    for name, value in headers.items():
        refusal = InvalidArgument.for_field(
            fields[name], "holds a key of this gateway, which never goes to an MCP server"
        )
        if any(secret in value for secret in secrets):
            raise refusal
        tokens = set(STORED_KEY.findall(value))
        if len(tokens) > MAX_KEY_LOOKUPS:
            raise InvalidArgument.for_field(
                fields[name], f"holds more than {MAX_KEY_LOOKUPS} tokens shaped like keys"
            )
        for token in tokens:
            if await stored(token):
                raise refusal
