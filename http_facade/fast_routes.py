"""The façade's fixed paths served from the app's entry, past the framework's layers.

A request for a route of the contract without path parameters (POST
/v1/chat/completions, /v1/messages, /v1/responses, /v1/embeddings...) goes to its
endpoint directly, its request id settled and its errors answered as RequestContext
and the exception handlers do, without Starlette's error and exception middleware,
FastAPI's exit stack, the router's match and the route's own wrappers. Every other
request, and every request while CORS is configured (its middleware must see each
one), takes the framework's way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from http_facade.context import RequestContext
from http_facade.errors import EXCEPTION_HANDLERS

Handle = Callable[[Request], Awaitable[Response]]


class Facade(FastAPI):
    """FastAPI, with the apps of `fixed` (by verb and path) called directly."""

    fixed: Mapping[tuple[str, str], ASGIApp] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            app = self.fixed.get((scope["method"], scope["path"]))
            if app is not None:
                scope["app"] = self
                await app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def direct(handle: Handle) -> ASGIApp:
    """An endpoint as an ASGI app, answering its errors as the framework would."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        try:
            response = await handle(request)
        except Exception as exc:
            answer = next(
                (EXCEPTION_HANDLERS[c] for c in type(exc).__mro__ if c in EXCEPTION_HANDLERS), None
            )
            if answer is None:
                raise  # RequestContext answers 500
            response = await answer(request, exc)
        await response(scope, receive, send)

    return RequestContext(app)
