"""The operator's HTTP paths beside the contract's: /healthz, /readyz and /metrics.

They are not RPCs (a load balancer and Prometheus call them without keys), so they are
plain routes, added to the facade and to the metrics-only listener of a gRPC-only
gateway.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
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

    table: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
    if metrics is not None:

        async def render(request: Request) -> Response:
            return Response(metrics(), media_type=CONTENT_TYPE)

        table.append(Route("/metrics", render, methods=["GET"]))
    return table
