"""The operator's HTTP paths beside the contract's: /healthz, /readyz, /metrics and the
admin page (/admin).

They are not RPCs (a load balancer and Prometheus call them without keys), so they are
plain routes, added to the facade and to the metrics-only listener of a gRPC-only
gateway. The admin page is static: it asks the operator for an admin key and calls the
admin API (AdminService) with it, so it holds no data of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from server.ops.health import Readiness

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def ops_routes(readiness: Readiness, metrics: Callable[[], bytes] | None = None) -> list[BaseRoute]:
    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(request: Request) -> Response:
        problems = await readiness.problems()
        if problems:
            return JSONResponse({"ready": False, "problems": problems}, status_code=503)
        return JSONResponse({"ready": True, "problems": []})

    async def admin(request: Request) -> Response:
        # No caching: a new page after an upgrade; no framing by other sites.
        headers = {"cache-control": "no-store", "x-frame-options": "DENY"}
        return HTMLResponse(admin_page(), headers=headers)

    table: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/admin", admin, methods=["GET"]),
    ]
    if metrics is not None:

        async def render(request: Request) -> Response:
            return Response(metrics(), media_type=CONTENT_TYPE)

        table.append(Route("/metrics", render, methods=["GET"]))
    return table


@cache
def admin_page() -> str:
    return resources.files("server.ops").joinpath("admin.html").read_text()
