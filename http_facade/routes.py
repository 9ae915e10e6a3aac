"""The REST surface: one route per `google.api.http` binding of the served RPCs.

Nothing here names a path: the annotations in proto/gateway/v1 are the one record.
`python -m http_facade.routes` prints the table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

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
    header (or query parameter) each asks for, the one asking for none serving the
    rest. A path's only binding serves every request."""
    grouped: dict[tuple[str, str], list[Binding]] = {}
    for binding in bindings(methods):
        grouped.setdefault((binding.verb, binding.route_path), []).append(binding)
    table: list[BaseRoute] = []
    for (verb, path), group in grouped.items():
        group.sort(key=lambda b: not (b.when_header or b.when_query))  # selected ones first
        handles: list[tuple[Selector, Handle]] = [
            (Selector(b.when_header, b.when_query) if len(group) > 1 else ANY,
             Endpoint(b, backend, limits).handle)
            for b in group
        ]  # fmt: skip
        route = Route(path, _by_header(handles), methods=[verb], name=group[-1].rpc.path)
        route.methods = {verb}  # exactly the annotated verb (no implicit HEAD)
        table.append(route)
    return table


@dataclass(frozen=True)
class Selector:
    """What a request carries for a binding to serve it: a header or a query parameter
    (neither: every request)."""

    header: str = ""
    query: str = ""

    def __bool__(self) -> bool:
        return bool(self.header or self.query)

    def takes(self, request: Request) -> bool:
        if not self:
            return True
        return (bool(self.header) and self.header in request.headers) or (
            bool(self.query) and self.query in request.query_params
        )


ANY = Selector()


def _by_header(handles: list[tuple[Selector, Handle]]) -> Handle:
    if len(handles) == 1 and not handles[0][0]:
        return handles[0][1]

    async def handle(request: Request) -> Response:
        for selector, endpoint in handles:
            if selector.takes(request):
                return await endpoint(request)
        raise NotFound(f"no route for {request.method} {request.url.path}")

    return handle


if __name__ == "__main__":
    from server.base.pipeline import methods as all_methods

    for b in bindings(all_methods()):
        stream = f"  (stream: true -> {b.stream_rpc.path})" if b.stream_rpc else ""
        print(f"{b.verb:6} {b.template:48} {b.rpc.path}{stream}")
