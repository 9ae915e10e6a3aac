"""The RPC table: every method of the contract, bound to its core handler.

Built from the proto descriptors, so the gRPC server and the REST facade serve exactly
the methods the contract declares, through the same handlers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc
from gateway.v1 import (
    admin_service_pb2,
    chat_service_pb2,
    completion_service_pb2,
    deployment_service_pb2,
    model_service_pb2,
    provider_service_pb2,
    router_service_pb2,
    usage_service_pb2,
)
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message

from server.call import Call
from server.errors import GatewayError, Internal
from server.status import abort_args

log = logging.getLogger(__name__)

SERVICES: tuple[ServiceDescriptor, ...] = tuple(
    service
    for module in (
        chat_service_pb2,
        completion_service_pb2,
        model_service_pb2,
        provider_service_pb2,
        router_service_pb2,
        deployment_service_pb2,
        admin_service_pb2,
        usage_service_pb2,
    )
    for service in module.DESCRIPTOR.services_by_name.values()
)

Handler = Callable[[Any, Call], Any]


@dataclass(frozen=True)
class RpcMethod:
    descriptor: MethodDescriptor
    request_type: type[Message]
    response_type: type[Message]
    handler: Handler

    @property
    def path(self) -> str:
        """The gRPC path: /gateway.v1.ChatService/CreateChatCompletion."""
        return f"/{self.descriptor.containing_service.full_name}/{self.descriptor.name}"

    @property
    def server_streaming(self) -> bool:
        return self.descriptor.server_streaming


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def methods(services: Iterable[ServiceDescriptor] = SERVICES) -> Iterable[MethodDescriptor]:
    for service in services:
        yield from service.methods


def rpc_table(*cores: object) -> dict[str, RpcMethod]:
    """Binds each contract method to `<core>.<snake_case name>` on the first of `cores`
    that has it, keyed by gRPC path. A method no core implements is a start-up error."""
    table = {}
    for method in methods():
        name = snake_case(method.name)
        core = next((c for c in cores if hasattr(c, name)), None)
        if core is None:
            raise LookupError(f"no handler for {method.full_name} ({name})")
        bound = RpcMethod(
            method,
            message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type),
            getattr(core, name),
        )
        table[bound.path] = bound
    return table


# -- gRPC transport -------------------------------------------------------------------


def _call(context: grpc.aio.ServicerContext, timeout_s: float) -> Call:
    metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
    remaining = context.time_remaining()
    if remaining is not None:
        timeout_s = min(timeout_s, remaining)
    return Call.with_timeout(metadata, timeout_s, metadata.get("x-request-id"))


def _internal(exc: BaseException, call: Call) -> Internal:
    log.error("request %s failed", call.request_id, exc_info=exc)
    return Internal(f"internal error (request {call.request_id})", {"request_id": call.request_id})


async def _abort(context: grpc.aio.ServicerContext, error: GatewayError, call: Call) -> None:
    code, message, trailers = abort_args(error, call.response_metadata)
    await context.abort(code, message, trailers)


def _unary(method: RpcMethod, timeout_s: float) -> grpc.RpcMethodHandler:
    async def handle(request: Message, context: grpc.aio.ServicerContext) -> Message:
        call = _call(context, timeout_s)
        try:
            response = await method.handler(request, call)
        except GatewayError as exc:
            error: GatewayError = exc
        except Exception as exc:
            error = _internal(exc, call)
        else:
            await context.send_initial_metadata(tuple(call.response_metadata.items()))
            return response
        await _abort(context, error, call)
        raise AssertionError("abort returns only by raising")

    return grpc.unary_unary_rpc_method_handler(
        handle,
        request_deserializer=method.request_type.FromString,
        response_serializer=method.response_type.SerializeToString,
    )


def _streaming(method: RpcMethod, timeout_s: float) -> grpc.RpcMethodHandler:
    async def handle(request: Message, context: grpc.aio.ServicerContext) -> AsyncIterator[Message]:
        call = _call(context, timeout_s)
        started = False
        try:
            async for chunk in method.handler(request, call):
                if not started:
                    await context.send_initial_metadata(tuple(call.response_metadata.items()))
                    started = True
                yield chunk
            return
        except GatewayError as exc:
            error: GatewayError = exc
        except Exception as exc:
            error = _internal(exc, call)
        await _abort(context, error, call)

    return grpc.unary_stream_rpc_method_handler(
        handle,
        request_deserializer=method.request_type.FromString,
        response_serializer=method.response_type.SerializeToString,
    )


def grpc_handlers(table: dict[str, RpcMethod], timeout_s: float) -> list[grpc.GenericRpcHandler]:
    """One generic handler per service, serving every method of the table."""
    by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
    for method in table.values():
        wrap = _streaming if method.server_streaming else _unary
        service = method.descriptor.containing_service.full_name
        by_service.setdefault(service, {})[method.descriptor.name] = wrap(method, timeout_s)
    return [grpc.method_handlers_generic_handler(s, h) for s, h in by_service.items()]
