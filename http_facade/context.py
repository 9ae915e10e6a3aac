"""Per-request context: the request id, the allow-listed caller headers, and the
response metadata the RPC produces.

`RequestContext` is the outermost facade middleware: it settles the request id (the
caller's `x-request-id` when well-formed, else a new one), adds it to every response,
and turns any exception that escaped everything else into a generic 500.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from http_facade.errors import error_response, internal
from server.accounting.admission import KEY_HEADERS
from server.application.governance.signin import COOKIE, SESSION
from server.application.pipeline.fields import TAGS_HEADER
from server.base.call import PEER, request_id_or_new
from server.base.config import SESSION_HEADERS
from server.guardrails.guard import HEADER as GUARDRAILS_HEADER

REQUEST_ID = "x-request-id"
# Headers forwarded to the RPC as metadata: the key headers the core reads (the
# `authorization` Bearer form included), the W3C trace context, the session headers
# cache affinity reads (its defaults), the response cache's Cache-Control, the ask to
# skip guardrails, a routed request's tags, plus the request id; nothing else crosses
# (grpc-gateway's header matcher).
FORWARDED = tuple(
    sorted(
        {
            *KEY_HEADERS,
            "traceparent",
            "tracestate",
            "cache-control",
            *SESSION_HEADERS,
            GUARDRAILS_HEADER,
            TAGS_HEADER,
            "if-match",
        }
    )  # fmt: skip
)


@dataclass
class Exchange:
    """What one HTTP request carries into its RPC, and what comes back besides the
    response message."""

    request_id: str
    metadata: dict[str, str]
    # Filled by the backend: x-ratelimit-*, retry-after.
    response_headers: dict[str, str] = field(default_factory=dict)


def exchange_for(scope: Scope, dialect_headers: tuple[str, ...] = ()) -> Exchange:
    """The request's exchange; `dialect_headers` (its service's `forwarded_headers`)
    cross as metadata too. Each header's first value counts (an empty one crosses
    nothing); the headers are read in one pass, not once per name that may cross."""
    wanted = _crossing(dialect_headers)
    seen: set[str] = set()
    metadata: dict[str, str] = {}
    cookie = ""
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        if name not in wanted or name in seen:
            continue
        seen.add(name)
        if name == "cookie":
            cookie = raw_value.decode("latin-1")
        elif raw_value:
            metadata[name] = raw_value.decode("latin-1")
    request_id = scope["state"]["request_id"]
    metadata[REQUEST_ID] = request_id
    client = scope.get("client")
    metadata[PEER] = f"{client[0]}:{client[1]}" if client else ""
    # The admin page's session: the one cookie that crosses, as metadata of its own.
    if session := _cookie(cookie, COOKIE):
        metadata[SESSION] = session
    exchange = Exchange(request_id, metadata)
    scope["state"]["exchange"] = exchange
    return exchange


@functools.cache
def _crossing(dialect_headers: tuple[str, ...]) -> frozenset[str]:
    """The headers read from a request: those that cross as metadata, and the cookie
    (never itself metadata)."""
    return frozenset((*FORWARDED, *dialect_headers, "cookie"))


def _cookie(header: str, name: str) -> str:
    """One cookie's value from a Cookie header ("" when it is not there)."""
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value.strip()
    return ""


class RequestContext:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = Headers(scope=scope).get(REQUEST_ID, "")
        request_id = request_id_or_new(asked)
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message)[REQUEST_ID] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if started:
                raise
            response = error_response(internal(exc, request_id))
            await response(scope, receive, send_with_id)
