"""The admin page's sign-in routes (`auth.oidc`), beside the contract's:

    GET  /admin/signin             to the identity provider (code flow, PKCE, state, nonce)
    GET  /admin/signin/callback    back from it: a session cookie, then the page
    POST /admin/signout            the session revoked, the cookie cleared
    GET  /admin/session            who is signed in, for the page

The session lives server-side (revocable); the cookie holds only its secret, HttpOnly,
Secure and SameSite=Lax, so no script reads it and no other site's form posts with it.
`RequestContext` hands the cookie's value to the admin API as the `x-gateway-session`
metadata entry and nothing else of the cookie header.
"""

from __future__ import annotations

import html
import ipaddress
import logging

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from http_facade.errors import error_response
from http_facade.same_origin import check_origin
from server.application.governance.oidc import SignInFailed
from server.application.governance.signin import COOKIE, SignIn, call_for
from server.base.call import Call
from server.base.config import OidcConfig
from server.base.errors import GatewayError, PermissionDenied

log = logging.getLogger(__name__)
NO_STORE = {"cache-control": "no-store"}
CALLBACK = "/admin/signin/callback"


def signin_routes(signin: SignIn) -> list[BaseRoute]:
    def call_of(request: Request) -> Call:
        client = request.client
        address = f"{client.host}:{client.port}" if client else ""
        return call_for(address, request.scope.get("state", {}).get("request_id", ""))

    async def begin(request: Request) -> Response:
        try:
            url = await signin.begin(callback_url(signin.config, request))
        except GatewayError as exc:
            return _page(exc.http_status, exc.message)
        return RedirectResponse(url, status_code=302, headers=NO_STORE)

    async def callback(request: Request) -> Response:
        params = request.query_params
        if params.get("error"):
            # The provider's own refusal (the user denied, say): recorded as a failure.
            code, state = "", params.get("state", "")
        else:
            code, state = params.get("code", ""), params.get("state", "")
        try:
            secret, ttl = await signin.finish(
                code, state, callback_url(signin.config, request), call_of(request)
            )
        except SignInFailed as exc:
            return _page(401, f"Sign-in failed: {exc}.")
        except GatewayError as exc:
            return _page(exc.http_status, exc.message)
        response = RedirectResponse("/admin", status_code=302, headers=NO_STORE)
        response.set_cookie(
            COOKIE, secret, max_age=int(ttl), path="/", secure=True, httponly=True, samesite="lax"
        )
        return response

    async def signout(request: Request) -> Response:
        try:
            check_origin(request)  # another page of the site cannot end the session
        except GatewayError as exc:
            return error_response(exc)
        ended = await signin.sign_out(request.cookies.get(COOKIE, ""), call_of(request))
        response = JSONResponse({"signed_out": ended}, headers=NO_STORE)
        response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="lax")
        return response

    async def session(request: Request) -> Response:
        answer: dict[str, object] = {"oidc": signin.config is not None, "signed_in": False}
        found = await signin.actor_of_session(request.cookies.get(COOKIE, ""))
        if found is not None:
            actor, email = found
            answer |= {"signed_in": True, "user": actor.id, "email": email}
        return JSONResponse(answer, headers=NO_STORE)

    return [
        Route("/admin/signin", begin, methods=["GET"]),
        Route(CALLBACK, callback, methods=["GET"]),
        Route("/admin/signout", signout, methods=["POST"]),
        Route("/admin/session", session, methods=["GET"]),
    ]


def callback_url(config: OidcConfig | None, request: Request) -> str:
    """The configured callback URL; without one, this gateway's own as the browser
    reached it, on a loopback address only: elsewhere the Host header, which anyone may
    send, would choose where the provider sends the code."""
    if config is not None and config.redirect_url:
        return config.redirect_url
    if config is not None and not is_loopback(request.url.hostname or ""):
        raise PermissionDenied(
            "sign-in on an address other than loopback needs auth.oidc.redirect_url: "
            f"set it to this gateway's public URL ending in {CALLBACK} (the one "
            "registered at the identity provider)",
            {"field": "auth.oidc.redirect_url"},
        )
    return str(request.base_url).rstrip("/") + CALLBACK


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, without its port) is this machine's."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _page(status: int, message: str) -> Response:
    body = (
        "<!doctype html><meta charset=utf-8><title>Sign-in</title>"
        f"<p id=signin-error>{html.escape(message)}</p><p><a href=/admin>Back</a></p>"
    )
    return HTMLResponse(body, status_code=status, headers=NO_STORE)
