"""The REST surface: one route per `google.api.http` binding of the served RPCs.

Nothing here names a path: the annotations in proto/gateway/v1 are the one record.
`python -m http_facade.routes` prints the table.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.descriptor import MethodDescriptor
from starlette.routing import BaseRoute, Route

from http_facade.backends import Backend
from http_facade.bindings import bindings
from http_facade.endpoint import Endpoint, Limits


def routes(
    methods: Iterable[MethodDescriptor], backend: Backend, limits: Limits
) -> list[BaseRoute]:
    table: list[BaseRoute] = []
    for binding in bindings(methods):
        route = Route(
            binding.route_path,
            Endpoint(binding, backend, limits).handle,
            methods=[binding.verb],
            name=binding.rpc.path,
        )
        route.methods = {binding.verb}  # exactly the annotated verb (no implicit HEAD)
        table.append(route)
    return table


if __name__ == "__main__":
    from server.base.pipeline import methods as all_methods

    for b in bindings(all_methods()):
        stream = f"  (stream: true -> {b.stream_rpc.path})" if b.stream_rpc else ""
        print(f"{b.verb:6} {b.template:48} {b.rpc.path}{stream}")
