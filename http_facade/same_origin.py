"""Changes the admin page's session cookie authenticates come from the page itself.

The cookie is SameSite=Lax, which keeps other sites' forms away from it but not pages
of the same site (another host under the same domain): a change made with it needs the
browser's word that the page is the gateway's own (`Sec-Fetch-Site: same-origin`, or an
`Origin` equal to the gateway's), else 403, and a JSON body, which no HTML form can
send, else 415. A call with a key (a header a page elsewhere cannot set without CORS's
leave) is not the cookie's and needs neither.
"""

from __future__ import annotations

from starlette.requests import Request

from http_facade.errors import UnsupportedMediaType
from server.base.errors import PermissionDenied


def own_origin(request: Request) -> str:
    """The origin the browser reached the gateway at: scheme and Host."""
    return f"{request.url.scheme}://{request.url.netloc}"


def check_origin(request: Request) -> None:
    """PermissionDenied unless the browser says the request comes from the gateway's
    own pages."""
    if request.headers.get("sec-fetch-site") == "same-origin":
        return
    if request.headers.get("origin") != own_origin(request):
        raise PermissionDenied(
            "a change signed in with the admin page's cookie must come from the gateway's "
            "own pages (Sec-Fetch-Site: same-origin, or its own Origin)",
            {"field": "origin"},
        )


def check_cookie_change(request: Request) -> None:
    """A change authenticated by the session cookie: from the gateway's own pages, with
    a JSON body. A GET changes nothing: the cookie reads with it wherever it is sent
    (the contract binds no other safe method)."""
    if request.method == "GET":
        return
    check_origin(request)
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(
            "a change signed in with the admin page's cookie must send "
            "Content-Type: application/json",
            {"field": "content-type"},
        )
