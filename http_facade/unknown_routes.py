"""Requests for a path the facade does not serve: reported (the caller's hook: the
request log and a metric) and answered with the path to use instead when one is near.

Clients knock on the paths of other APIs and on near misses of ours (`/chat/completions`
without `/v1`, a trailing slash, `/v1/v1/...`); saying which path would have answered
saves the caller a trip to the docs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from starlette.routing import BaseRoute, Route

# (method, path, client address, status) of each request no route served.
UnknownRouteHook = Callable[[str, str, str, int], None]


def nearest(path: str, method: str, routes: Iterable[BaseRoute]) -> str | None:
    """The served path a near miss meant, when there is exactly one idea of it: a route
    that serves the request's method if one matches (`POST /models/m:generateContent`
    is told the Gemini route, not `GET /v1/models/{model}` whose pattern also matches),
    else the first route whose path matches, with its own method."""
    trimmed = path.rstrip("/") or "/"
    candidates = [trimmed, re.sub(r"^(/v1)+", "/v1", trimmed)]
    if not trimmed.startswith("/v1"):
        candidates.append("/v1" + trimmed)
    candidates = [c for c in dict.fromkeys(candidates) if c != path]
    served = [r for r in routes if isinstance(r, Route)]
    matches = [(c, r) for c in candidates for r in served if r.path_regex.match(c)]
    for candidate, route in matches:
        if not route.methods or method in route.methods:
            return f"{method} {candidate}"
    for candidate, route in matches:
        return f"{sorted(route.methods or ())[0]} {candidate}"
    return None
