"""The REST surface: one route per `google.api.http` binding of the served RPCs.

Nothing here names a path: the annotations in proto/gateway/v1 are the one record.
`python -m http_facade.routes` prints the table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from google.protobuf.descriptor import MethodDescriptor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from http_facade.backends import Backend
from http_facade.bindings import Binding, bindings
from http_facade.endpoint import Endpoint, Limits
from server.base.errors import NotFound

Handle = Callable[[Request], Awaitable[Response]]


def routes(
    methods: Iterable[MethodDescriptor], backend: Backend, limits: Limits
) -> list[BaseRoute]:
    """One route per verb and path; bindings that share one are told apart by the
    header each asks for (`when_header`), the one asking for none serving the rest."""
    grouped: dict[tuple[str, str], list[Binding]] = {}
    for binding in bindings(methods):
        grouped.setdefault((binding.verb, binding.route_path), []).append(binding)
    table: list[BaseRoute] = []
    for (verb, path), group in grouped.items():
        group.sort(key=lambda b: not b.when_header)  # header-selected ones first
        handles: list[tuple[str, Handle]] = [
            (b.when_header, Endpoint(b, backend, limits).handle) for b in group
        ]
        route = Route(path, _by_header(handles), methods=[verb], name=group[-1].rpc.path)
        route.methods = {verb}  # exactly the annotated verb (no implicit HEAD)
        table.append(route)
    return table


def _by_header(handles: list[tuple[str, Handle]]) -> Handle:
    if len(handles) == 1 and not handles[0][0]:
        return handles[0][1]

    async def handle(request: Request) -> Response:
        for header, endpoint in handles:
            if not header or header in request.headers:
                return await endpoint(request)
        raise NotFound(f"no route for {request.method} {request.url.path}")

    return handle


if __name__ == "__main__":
    from server.base.pipeline import methods as all_methods

    for b in bindings(all_methods()):
        stream = f"  (stream: true -> {b.stream_rpc.path})" if b.stream_rpc else ""
        print(f"{b.verb:6} {b.template:48} {b.rpc.path}{stream}")
