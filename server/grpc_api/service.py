"""The gRPC transport: serves every method of the RPC table as a generic handler.

A servicer method only translates: it reads the metadata and deadline into a Call,
awaits the handler, and turns a GatewayError into a rich status.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from gateway.v1 import rest_pb2
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from server.base.call import PEER, Call, request_id_or_new
from server.base.errors import Code, GatewayError, Internal, ShuttingDown
from server.base.pipeline import RpcMethod
from server.base.uploads import UPLOADS, message_bound
from server.grpc_api.coalesce import merger
from server.grpc_api.decode import Undecodable, decoder
from server.grpc_api.relay import Relay
from server.grpc_api.status import abort_args

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """The bounds the REST facade has too (server config)."""

    # Bounds a call whose caller set no deadline (and a shorter one wins).
    request_timeout_s: float
    # Seconds a caller may leave sent messages unread before its stream ends.
    send_timeout_s: float
    # Bounds a request message; a method that takes an upload has its upload's bound.
    max_body_bytes: int = 1 << 20


class SendTimeout(GatewayError):
    code = Code.DEADLINE_EXCEEDED
    reason = "SEND_TIMEOUT"


def _call(context: grpc.aio.ServicerContext, timeout_s: float) -> Call:
    metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
    remaining = context.time_remaining()
    if remaining is not None:
        timeout_s = min(timeout_s, remaining)
    request_id = request_id_or_new(metadata.get("x-request-id"))
    metadata["x-request-id"] = request_id
    # The transport's own word on who connected, never the caller's (the audit log's).
    metadata[PEER] = context.peer() or ""
    return Call.with_timeout(metadata, timeout_s, request_id)


def _internal(exc: BaseException, call: Call) -> Internal:
    log.error("request %s failed", call.request_id, exc_info=exc)
    return Internal(f"internal error (request {call.request_id})", {"request_id": call.request_id})


async def _abort(context: grpc.aio.ServicerContext, error: GatewayError, call: Call) -> None:
    """Ends the call with `error`'s status (by raising, as gRPC's abort does); returns
    when its caller has left, as nobody is there to be told (the call's record carries
    the error all the same)."""
    if context.done() or context.cancelled():
        return
    code, message, trailers = abort_args(error, call.response_metadata)
    try:
        await context.abort(code, message, trailers)
    except grpc.aio.InternalError:
        return  # the caller left as the status went out: gRPC could not send it


def _unary(method: RpcMethod, limits: Limits) -> grpc.RpcMethodHandler:
    async def handle(request: Message, context: grpc.aio.ServicerContext) -> Message:
        call = _call(context, limits.request_timeout_s)
        try:
            if isinstance(request, Undecodable):
                raise request.error
            response = await method.unary(request, call)
        except GatewayError as exc:
            error: GatewayError = exc
        except Exception as exc:
            error = _internal(exc, call)
        else:
            if call.response_metadata:  # else the response carries empty headers itself
                await context.send_initial_metadata(tuple(call.response_metadata.items()))
            return response
        await _abort(context, error, call)
        raise asyncio.CancelledError  # the caller left: nothing to answer

    return grpc.unary_unary_rpc_method_handler(
        handle,
        request_deserializer=_decoder(method, limits),
        response_serializer=method.response_type.SerializeToString,
    )


def _streaming(
    method: RpcMethod, limits: Limits, stopping: asyncio.Future[None] | None
) -> grpc.RpcMethodHandler:
    new_merge = merger(method.response_type)

    async def handle(request: Message, context: grpc.aio.ServicerContext) -> None:
        call = _call(context, limits.request_timeout_s)
        chunks = method.stream(request, call)
        task = asyncio.current_task()
        assert task is not None
        merge = new_merge() if new_merge is not None else None
        relay = Relay(chunks, merge, task, limits.send_timeout_s)

        def interrupt(_: object) -> None:
            task.cancel()

        if stopping is not None:
            stopping.add_done_callback(interrupt)
        try:
            if isinstance(request, Undecodable):
                raise request.error
            await relay.write(context, call)
            return
        except GatewayError as exc:
            error: GatewayError = exc
        except grpc.aio.InternalError:
            # A write failed: the stream is gone, most often because its caller left
            # before gRPC marked the call closed (then it would log the error with a
            # traceback). Nothing can be sent on it any more, so end it as cancelled.
            raise asyncio.CancelledError from None
        except asyncio.CancelledError:
            if relay.timed_out:
                error = SendTimeout(
                    f"the caller read nothing for {limits.send_timeout_s:g}s; the stream ended",
                    {},
                )
            elif stopping is None or not stopping.done():
                return  # the caller cancelled: nothing to report, nobody to report it to
            else:  # the grace period is running out: say so (UNAVAILABLE), not CANCELLED
                error = ShuttingDown("the gateway is shutting down; retry the request")
        except Exception as exc:
            error = _internal(exc, call)
        finally:
            if stopping is not None:
                stopping.remove_done_callback(interrupt)
            # A cancelled call stops its work now, all the way to the upstream.
            await relay.close()
        await _abort(context, error, call)

    return grpc.unary_stream_rpc_method_handler(
        handle,
        request_deserializer=_decoder(method, limits),
        response_serializer=method.response_type.SerializeToString,
    )


def _decoder(method: RpcMethod, limits: Limits) -> Callable[[bytes], Message | Undecodable]:
    name = method.descriptor.full_name
    upload = UPLOADS.get(name)
    return decoder(
        method.request_type,
        _refuses_unknown(method),
        message_bound(name, limits.max_body_bytes),
        upload.field if upload is not None else "",
    )


def _refuses_unknown(method: RpcMethod) -> bool:
    """Whether the method's service refuses fields its messages lack (the contract's
    `refuse_unknown`), as its REST binding does."""
    return _service_refuses_unknown(method.descriptor.containing_service)


@functools.cache
def _service_refuses_unknown(service: ServiceDescriptor) -> bool:
    # Read once per service: reading options costs more than building the handler.
    return bool(service.GetOptions().Extensions[rest_pb2.RestOptions.rest].refuse_unknown)


def grpc_handlers(
    table: dict[str, RpcMethod], limits: Limits, stopping: asyncio.Future[None] | None = None
) -> list[grpc.GenericRpcHandler]:
    """One generic handler per service, serving every method of the table. When
    `stopping` completes, streams still running end with UNAVAILABLE (SHUTTING_DOWN)."""
    by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
    for method in table.values():
        service = method.descriptor.containing_service.full_name
        handler = (
            _streaming(method, limits, stopping)
            if method.server_streaming
            else _unary(method, limits)
        )
        by_service.setdefault(service, {})[method.descriptor.name] = handler
    return [grpc.method_handlers_generic_handler(s, h) for s, h in by_service.items()]
