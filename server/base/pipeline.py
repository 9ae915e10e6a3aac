"""The handler pipeline: every method of the contract, bound to its handler and wrapped
in one ordered list of middlewares.

Both transports serve the same table (the gRPC servicer and the REST facade in-process),
so whatever a middleware does (accounting, metrics, tracing, request logs) happens
alike for every call, whichever way it came in. Middlewares wrap in list order: the
first is the outermost.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import gateway.v1
import orjson
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message

from server.base.call import Call


def _contract_services() -> tuple[ServiceDescriptor, ...]:
    """Every service of the contract: those of each `*_service_pb2` module generated
    from proto/gateway/v1, in module name order. Found, not listed, so a new service
    (a new ingress dialect's) adds no line here."""
    names = sorted(
        module.name
        for module in pkgutil.iter_modules(gateway.v1.__path__)
        if module.name.endswith("_service_pb2")
    )
    return tuple(
        service
        for name in names
        for service in importlib.import_module(
            f"{gateway.v1.__name__}.{name}"
        ).DESCRIPTOR.services_by_name.values()
    )


def _session(service: ServiceDescriptor) -> bool:
    """A service whose methods stream both ways holds sessions (RealtimeService): its
    own handler serves it, each message its own account, not the table."""
    return any(m.client_streaming for m in service.methods)


SERVICES = tuple(s for s in _contract_services() if not _session(s))
SESSION_SERVICES = tuple(s for s in _contract_services() if _session(s))

UnaryHandler = Callable[[Any, Call], Awaitable[Any]]
StreamHandler = Callable[[Any, Call], AsyncGenerator[Any, None]]
Handler = UnaryHandler | StreamHandler


@dataclass(slots=True)
class Encoded:
    """What a streaming handler may yield instead of a response message when its call
    `writes_json`: the next events, each already the JSON of one, as a relayed
    upstream's are (the transport frames them, and sends them as they are), with their
    names where the stream names its events."""

    events: list[bytes]
    names: list[str] | None = None


def encoded_json(event: Any) -> bytes:
    """One relayed event's JSON for an `Encoded`."""
    try:
        return orjson.dumps(event)
    except orjson.JSONEncodeError:  # an integer past 64 bits, which JSON allows
        return json.dumps(event).encode()


@dataclass(frozen=True)
class RpcMethod:
    """One contract method and the (wrapped) handler that serves it."""

    descriptor: MethodDescriptor
    request_type: type[Message]
    response_type: type[Message]
    handler: Handler

    @property
    def path(self) -> str:
        """The gRPC path: /gateway.v1.ChatService/CreateChatCompletion."""
        return f"/{self.descriptor.containing_service.full_name}/{self.descriptor.name}"

    @property
    def name(self) -> str:
        """The method's short name: CreateChatCompletion."""
        return self.descriptor.name

    @property
    def server_streaming(self) -> bool:
        return self.descriptor.server_streaming

    def unary(self, request: Message, call: Call) -> Awaitable[Message]:
        """Runs a unary method's handler."""
        return cast(UnaryHandler, self.handler)(request, call)

    def stream(self, request: Message, call: Call) -> AsyncGenerator[Message, None]:
        """Runs a streaming method's handler; closing the generator stops its work."""
        return cast(StreamHandler, self.handler)(request, call)


class Middleware:
    """Cross-cutting work around every handler. Override either method; the defaults
    pass the call through untouched."""

    def wrap_unary(self, method: MethodDescriptor, handler: UnaryHandler) -> UnaryHandler:
        return handler

    def wrap_stream(self, method: MethodDescriptor, handler: StreamHandler) -> StreamHandler:
        return handler


def methods(services: Iterable[ServiceDescriptor] = SERVICES) -> Iterable[MethodDescriptor]:
    for service in services:
        yield from service.methods


def rpc_table(
    handlers: Mapping[str, Handler], middlewares: Sequence[Middleware] = ()
) -> dict[str, RpcMethod]:
    """Binds each contract method to its handler in `handlers` (keyed by the method's
    full name), wrapped in `middlewares`, keyed by gRPC path, in the order of
    `handlers` (the order REST matches paths in: the busiest first). A method without a
    handler, or a handler for no method, is a start-up error."""
    declared = {method.full_name: method for method in methods()}
    if missing := declared.keys() - handlers.keys():
        raise LookupError(f"no handler for {', '.join(sorted(missing))}")
    if extra := handlers.keys() - declared.keys():
        raise LookupError(f"handlers for methods the contract lacks: {', '.join(sorted(extra))}")
    table = {}
    for name, handler in handlers.items():
        method = declared[name]
        for middleware in reversed(middlewares):
            if method.server_streaming:
                handler = middleware.wrap_stream(method, handler)  # type: ignore[arg-type]
            else:
                handler = middleware.wrap_unary(method, handler)  # type: ignore[arg-type]
        bound = RpcMethod(
            method,
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
            handler,
        )
        table[bound.path] = bound
    return table
