"""The Responses API's WebSocket mode: `GET /v1/responses` upgraded, as Codex dials it.

The client sends `{"type": "response.create", ...a Responses request...}` frames, one
response after another on one socket; each runs as `POST /v1/responses` with `"stream":
true` runs (the same RPC, so the same admission, limits, budget, guardrails and ledger
row), and its events go out as frames, the same JSON the SSE stream carries. An error is
an `error` frame with the HTTP status the SSE answer would have had.

What the socket adds over HTTP:

- `previous_response_id` naming a response of this socket continues from what the
  socket holds (that response's input and output), whether or not it was stored, as
  OpenAI's WebSocket mode does; any other id is looked up in the store as over HTTP;
- `generate: false` warms the socket up: nothing is generated or billed, a response
  with no output is announced (`response.created`, `response.completed`) and its input
  held for the next request to continue from;
- `response.processed` frames (the client's acknowledgement) are taken and ignored.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from google.protobuf.message import Message
from starlette.routing import WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from http_facade import codec
from http_facade.backends import Backend
from http_facade.bindings import Rpc
from http_facade.context import Exchange
from http_facade.errors import internal
from http_facade.sockets import (
    Closed,
    Session,
    Sessions,
    error_event,
    exchange_of,
    serve_session,
    upgrade_required,
)
from server.base.config import ServerConfig
from server.base.errors import GatewayError, InvalidArgument
from server.base.pipeline import Encoded

# What only the socket reads, taken off a frame before it becomes a request.
SOCKET_FIELDS = ("type", "generate")
# Responses a socket holds for `previous_response_id`: the latest few are continued.
HELD = 8


class ResponsesSocket:
    def __init__(
        self,
        stream_rpc: Rpc,
        check_rpc: Rpc,
        backend: Backend,
        settings: ServerConfig,
        sessions: Sessions,
    ) -> None:
        self.rpc = stream_rpc
        self.check_rpc = check_rpc
        self.backend = backend
        self.settings = settings
        self.sessions = sessions

    def route(self, path: str) -> WebSocketRoute:
        return WebSocketRoute(path, self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.serve(WebSocket(scope, receive, send), send)

    async def serve(self, websocket: WebSocket, send: Send) -> None:
        if not self.settings.websockets.responses:
            await websocket.send_denial_response(upgrade_required("The Responses API"))
            return
        exchange = exchange_of(websocket, self.rpc.forwarded_headers)

        async def admit() -> None:  # the key
            await self.backend.unary(self.check_rpc, self.check_rpc.request_type(), exchange)

        await serve_session(
            websocket, send, self.settings, self.sessions, exchange, admit,
            lambda session: _Conversation(self, session, exchange).run(),
        )  # fmt: skip


class _Conversation:
    """One socket's responses, one after another."""

    def __init__(self, socket: ResponsesSocket, session: Session, exchange: Exchange) -> None:
        self.socket = socket
        self.session = session
        self.exchange = exchange
        # Response id -> the items a continuation starts from (its input and output).
        self.held: dict[str, list[Any]] = {}

    async def run(self) -> None:
        try:
            while True:
                frame = await self.session.receive()
                kind = frame.get("type")
                if kind == "response.processed":
                    continue
                if kind != "response.create":
                    error = InvalidArgument.for_field(
                        "type", f"must be response.create, not {kind!r}"
                    )
                    await self.session.send(error_event(error))
                    continue
                try:
                    await self._respond(frame)
                except GatewayError as error:
                    await self.session.send(error_event(error))
        except Closed:
            return

    async def _respond(self, frame: dict[str, Any]) -> None:
        payload = {k: v for k, v in frame.items() if k not in SOCKET_FIELDS}
        input_items = _items(payload.get("input"))
        previous = payload.get("previous_response_id")
        if isinstance(previous, str) and previous in self.held:
            input_items = [*self.held[previous], *input_items]
            payload["input"] = input_items
            del payload["previous_response_id"]
        if frame.get("generate") is False:
            await self._warm_up(payload, input_items)
            return
        payload["stream"] = True
        message = self._message(payload)
        chunks = self.socket.backend.stream(self.socket.rpc, message, self.exchange)
        try:
            async for chunk in chunks:
                await self.session.check()
                if type(chunk) is Encoded:
                    for data in chunk.events:
                        await self.session.send_raw(data.decode())
                    continue
                event = codec.to_dict(chunk)
                if event.get("type") == "response.completed":
                    self._hold(event.get("response") or {}, input_items)
                await self.session.send(event)
        except (GatewayError, Closed):
            raise
        except Exception as exc:
            raise internal(exc, self.exchange.request_id) from None
        finally:
            await chunks.aclose()

    def _message(self, payload: dict[str, Any]) -> Message:
        message = self.socket.rpc.request_type()
        for key in self.socket.rpc.refused_fields:
            if payload.get(key) is not None:
                raise InvalidArgument.for_field(key, "is not supported by this gateway")
        codec.from_dict(payload, message, strict=self.socket.rpc.strict)
        return message

    def _hold(self, response: dict[str, Any], input_items: list[Any]) -> None:
        response_id = response.get("id")
        if isinstance(response_id, str):
            self.held[response_id] = [*input_items, *(response.get("output") or [])]
            while len(self.held) > HELD:
                del self.held[next(iter(self.held))]

    async def _warm_up(self, payload: dict[str, Any], input_items: list[Any]) -> None:
        """A response that generates nothing: announced, held, not billed."""
        self._message({**payload, "stream": True})  # refused as the real one would be
        response_id = f"resp_{uuid.uuid4().hex}"
        response = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": payload.get("model", ""),
            "output": [],
            "previous_response_id": payload.get("previous_response_id"),
        }
        await self.session.send(
            {"type": "response.created", "sequence_number": 0, "response": response}
        )
        done = {
            **response,
            "status": "completed",
            "usage": {
                "input_tokens": 0,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 0,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 0,
            },
        }
        await self.session.send(
            {"type": "response.completed", "sequence_number": 1, "response": done}
        )
        self.held[response_id] = input_items


def _items(value: Any) -> list[Any]:
    """A request's input as a list of items (a string is one user message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": value}
        ]}]  # fmt: skip
    if isinstance(value, list):
        return value
    raise InvalidArgument.for_field("input", "must be a string or an array of items")
