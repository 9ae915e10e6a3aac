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
    """The served path a near miss meant, when there is exactly one idea of it."""
    trimmed = path.rstrip("/") or "/"
    candidates = [trimmed, re.sub(r"^(/v1)+", "/v1", trimmed)]
    if not trimmed.startswith("/v1"):
        candidates.append("/v1" + trimmed)
    for candidate in candidates:
        if candidate == path:
            continue
        for route in routes:
            if isinstance(route, Route) and route.path_regex.match(candidate):
                verbs = sorted(route.methods or ())
                if method in verbs or not verbs:
                    return f"{method} {candidate}"
                return f"{verbs[0]} {candidate}"
    return None
