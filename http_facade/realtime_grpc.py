"""OpenAI's Realtime API over gRPC (`gateway.v1.RealtimeService/Converse`), for internal
callers: one bidirectional stream a session, each message one event (a Struct holding
the event's JSON). The session is the WebSocket's (http_facade/realtime.py: the same
conversation or relay, admission, accounting and bounds); only its frames differ:

- the first message names the model; the key comes in the call's metadata. The key,
  the model and the sessions the key and instance may hold are checked before
  `session.created`, a refusal ending the call with its status;
- frames past the rate get an error event, as over WebSocket; a session that reaches
  its length or idle bound ends DEADLINE_EXCEEDED, one the gateway stops UNAVAILABLE,
  each with the reason; a caller that reads nothing for `send_timeout_s` is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import orjson
from gateway.v1 import realtime_service_pb2 as rt
from google.protobuf import json_format, struct_pb2

from http_facade.backends import InProcess
from http_facade.context import Exchange
from http_facade.realtime import RealtimeSocket
from http_facade.sockets import (
    NORMAL,
    POLICY,
    RESTARTING,
    TOO_BIG,
    Bucket,
    Closed,
    Finished,
    Sessions,
    error_event,
)
from server.application.realtime_relay import RealtimeRelays
from server.base.call import PEER, request_id_or_new
from server.base.config import ServerConfig
from server.base.errors import GatewayError, InvalidArgument, RateLimited
from server.base.pipeline import RpcMethod

SERVICE = "gateway.v1.RealtimeService"
# A close code's status over gRPC (the reason goes in its details).
_STATUS = {NORMAL: grpc.StatusCode.DEADLINE_EXCEEDED, POLICY: grpc.StatusCode.DEADLINE_EXCEEDED,
           RESTARTING: grpc.StatusCode.UNAVAILABLE,
           TOO_BIG: grpc.StatusCode.RESOURCE_EXHAUSTED}  # fmt: skip


def realtime_service(
    table: dict[str, RpcMethod],
    settings: ServerConfig,
    sessions: Sessions,
    relays: RealtimeRelays | None,
    stopping: asyncio.Future[None] | None,
) -> grpc.GenericRpcHandler | None:
    """The service's handler over the table's handlers (in-process); None when the
    table serves no streamed Responses or GetModel."""
    backend = InProcess(table, settings.request_timeout_s)
    served = [method.descriptor for method in table.values()]
    socket = RealtimeSocket.over(served, backend, settings, sessions, relays)
    if socket is None:
        return None
    method = grpc.stream_stream_rpc_method_handler(
        _Converse(socket, stopping).serve,
        request_deserializer=rt.ConverseRequest.FromString,
        response_serializer=rt.ConverseResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(SERVICE, {"Converse": method})


class _Converse:
    def __init__(self, socket: RealtimeSocket, stopping: asyncio.Future[None] | None) -> None:
        self.socket = socket
        self.stopping = stopping

    async def serve(
        self, requests: AsyncIterator[rt.ConverseRequest], context: grpc.aio.ServicerContext
    ) -> None:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        request_id = request_id_or_new(metadata.get("x-request-id"))
        metadata["x-request-id"] = request_id
        metadata[PEER] = context.peer() or ""
        exchange = Exchange(request_id, metadata)
        settings, sessions = self.socket.settings, self.socket.sessions
        try:
            async with asyncio.timeout(settings.websockets.idle_timeout_s):
                first = await anext(aiter(requests), None)
            if first is None:
                raise InvalidArgument.for_field("model", "is required in the first message")
            await self.socket.admit(exchange, first.model, "the first message")
            held = sessions.hold(exchange)
            held.__enter__()
        except GatewayError as error:
            await context.abort(_status(error), error.message)
            return
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "no first message")
            return
        frames = _Frames(context, requests, first, settings, self.stopping,
                         sessions.frames_of(exchange))  # fmt: skip
        try:
            with contextlib.suppress(Closed):
                await self.socket.converse(frames, exchange, first.model)
        finally:
            frames.end()
            held.__exit__(None, None, None)
        if frames.ended is not None:
            code, reason = frames.ended
            await context.abort(_STATUS.get(code, grpc.StatusCode.UNAVAILABLE), reason)


def _status(error: GatewayError) -> grpc.StatusCode:
    return next(s for s in grpc.StatusCode if s.value[0] == int(error.code))


class _Frames:
    """A session's frames over a gRPC stream (http_facade/sockets.py Frames)."""

    def __init__(
        self,
        context: grpc.aio.ServicerContext,
        requests: AsyncIterator[rt.ConverseRequest],
        first: rt.ConverseRequest,
        settings: ServerConfig,
        stopping: asyncio.Future[None] | None,
        key_frames: Bucket | None,
    ) -> None:
        self.context = context
        self.limits = settings.websockets
        self.send_timeout_s = settings.send_timeout_s
        self.stopping = stopping
        self._loop = asyncio.get_running_loop()
        self.ends_at = self._loop.time() + self.limits.max_session_s
        self._frames = Bucket(self.limits.frames_per_s)
        self._key_frames = key_frames
        # The caller's messages, read by one task into a queue: a read given up (a
        # response ended first) loses nothing.
        self._inbox: asyncio.Queue[rt.ConverseRequest | None] = asyncio.Queue()
        if first.HasField("event"):
            self._inbox.put_nowait(first)
        self._reader = asyncio.ensure_future(self._read(requests))
        # The close code and reason the session ended with, when a bound ended it.
        self.ended: tuple[int, str] | None = None

    async def _read(self, requests: AsyncIterator[rt.ConverseRequest]) -> None:
        try:
            async for request in requests:
                await self._inbox.put(request)
        finally:
            await self._inbox.put(None)

    async def receive(self) -> dict[str, Any]:
        while True:
            await self.check()
            left = self.ends_at - self._loop.time()
            waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._inbox.get())}
            if self.stopping is not None:
                waits.add(self.stopping)
            getting = next(iter(w for w in waits if w is not self.stopping))
            try:
                done, _ = await asyncio.wait(
                    waits, timeout=min(left, self.limits.idle_timeout_s),
                    return_when=asyncio.FIRST_COMPLETED,
                )  # fmt: skip
            finally:
                if not getting.done():
                    getting.cancel()
            if getting not in done:
                await self.check()
                await self.close(
                    NORMAL, f"no frame for {self.limits.idle_timeout_s:g}s; session closed"
                )
            request = getting.result()
            if request is None:
                raise Finished  # the caller closed its side; it reads on
            # The server takes messages as large as an upload; an event is a frame,
            # bounded as a WebSocket's is.
            if request.ByteSize() > self.limits.max_frame_bytes:
                await self.close(
                    TOO_BIG, f"an event exceeds {self.limits.max_frame_bytes} bytes; session closed"
                )
            if not self._frames.take() or (
                self._key_frames is not None and not self._key_frames.take()
            ):
                await self.send(error_event(RateLimited("past the frame rate; frame dropped")))
                continue
            return _plain(json_format.MessageToDict(request.event))

    async def send(self, event: dict[str, Any]) -> None:
        message = rt.ConverseResponse(event=json_format.ParseDict(event, struct_pb2.Struct()))
        try:
            async with asyncio.timeout(self.send_timeout_s):
                await self.context.write(message)
        except (TimeoutError, asyncio.InvalidStateError, grpc.aio.AioRpcError) as exc:
            raise Closed from exc

    async def send_raw(self, text: str) -> None:
        await self.send(orjson.loads(text))

    async def check(self) -> None:
        if self.stopping is not None and self.stopping.done():
            await self.close(RESTARTING, "the gateway is shutting down; reconnect")
        if self._loop.time() >= self.ends_at:
            await self.close(POLICY, "the session reached its maximum length")

    async def close(self, code: int, reason: str) -> None:
        self.ended = (code, reason)
        raise Closed

    def end(self) -> None:
        self._reader.cancel()


def _plain(value: Any) -> Any:
    """A Struct's JSON with its whole numbers as integers (a Struct holds doubles)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
