"""Where the facade sends an RPC: to the handlers in this process, or to a remote gRPC
gateway (the edge tier). Both answer the same way: a response message or an async
iterator of chunks, GatewayError on failure, and the RPC's response metadata
(x-ratelimit-*, retry-after) in `exchange.response_headers`, on success and on error.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message

from http_facade.bindings import Rpc
from http_facade.context import Exchange
from http_facade.errors import internal, response_headers
from http_facade.remote_status import from_rpc_error
from server.base.call import Call
from server.base.errors import GatewayError
from server.base.pipeline import RpcMethod


class Backend(Protocol):
    async def unary(self, rpc: Rpc, request: Message, exchange: Exchange) -> Message: ...

    def stream(
        self, rpc: Rpc, request: Message, exchange: Exchange
    ) -> AsyncGenerator[Message, None]: ...

    async def aclose(self) -> None: ...


class InProcess:
    """Calls the core's handlers directly: no network hop."""

    def __init__(self, table: dict[str, RpcMethod], timeout_s: float) -> None:
        self._table = table
        self._timeout_s = timeout_s

    def _call(self, exchange: Exchange) -> Call:
        call = Call.with_timeout(exchange.metadata, self._timeout_s, exchange.request_id)
        call.response_metadata = exchange.response_headers
        call.writes_json = True
        return call

    async def unary(self, rpc: Rpc, request: Message, exchange: Exchange) -> Message:
        try:
            response = await self._table[rpc.path].unary(request, self._call(exchange))
        except GatewayError:
            raise
        except Exception as exc:
            raise internal(exc, exchange.request_id) from None
        return response

    async def stream(
        self, rpc: Rpc, request: Message, exchange: Exchange
    ) -> AsyncGenerator[Message, None]:
        chunks = self._table[rpc.path].stream(request, self._call(exchange))
        try:
            async for chunk in chunks:
                yield chunk
        except GatewayError:
            raise
        except Exception as exc:
            raise internal(exc, exchange.request_id) from None
        finally:
            # Closing the handler's generator stops the work behind it (upstream included).
            await chunks.aclose()

    async def aclose(self) -> None:
        return None


class Remote:
    """Forwards to a remote gateway over gRPC with generic (descriptor-driven) stubs."""

    def __init__(self, target: str, timeout_s: float) -> None:
        # No bound of gRPC's own either way: the facade bounds what it sends (a body, an
        # upload) and the core what it takes and answers (several images of up to
        # 50 MB each), where gRPC's 4 MB default on answers refused two large images.
        unbounded = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        self._channel = grpc.aio.insecure_channel(target, options=unbounded)
        self._timeout_s = timeout_s
        self._stubs: dict[str, Callable[..., Any]] = {}

    def _stub(self, rpc: Rpc) -> Callable[..., Any]:
        stub = self._stubs.get(rpc.path)
        if stub is None:
            make = self._channel.unary_stream if rpc.server_streaming else self._channel.unary_unary
            stub = self._stubs[rpc.path] = make(
                rpc.path,
                request_serializer=rpc.request_type.SerializeToString,
                response_deserializer=rpc.response_type.FromString,
            )
        return stub

    def _start(self, rpc: Rpc, request: Message, exchange: Exchange) -> Any:
        metadata = tuple(exchange.metadata.items())
        return self._stub(rpc)(request, metadata=metadata, timeout=self._timeout_s)

    async def unary(self, rpc: Rpc, request: Message, exchange: Exchange) -> Message:
        call = self._start(rpc, request, exchange)
        try:
            response: Message = await call
        except grpc.aio.AioRpcError as exc:
            raise _failed(exc, exchange) from None
        finally:
            call.cancel()  # a no-op once finished; stops the remote work when we are cancelled
        exchange.response_headers.update(response_headers(await call.initial_metadata()))
        return response

    async def stream(
        self, rpc: Rpc, request: Message, exchange: Exchange
    ) -> AsyncGenerator[Message, None]:
        call = self._start(rpc, request, exchange)
        first = True
        try:
            while True:
                try:
                    chunk = await call.read()
                except grpc.aio.AioRpcError as exc:
                    raise _failed(exc, exchange) from None
                if chunk is grpc.aio.EOF:
                    return
                if first:
                    exchange.response_headers.update(
                        response_headers(await call.initial_metadata())
                    )
                    first = False
                yield chunk
        finally:
            call.cancel()

    async def aclose(self) -> None:
        await self._channel.close()


def _failed(exc: grpc.aio.AioRpcError, exchange: Exchange) -> GatewayError:
    exchange.response_headers.update(response_headers(exc.trailing_metadata() or ()))
    return from_rpc_error(exc)
