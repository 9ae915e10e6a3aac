"""Server-Sent Events, framed as SPEC.md section 4 says, for every streaming RPC.

    data: {chunk}\\n\\n ... data: [DONE]\\n\\n

A dialect with named events (the `gateway.v1.sse` method option) frames each as
`event: {name}\\ndata: {chunk}\\n\\n`, its keep-alive as an event of its own, and an
error after the first event as `event: error` in its error format.

The first chunk is pulled before the response starts, so an error before it is an
ordinary HTTP error (the caller of `EventStream` does that). After it, an error is one
last `data: {"error": {...}}` event and the stream ends without [DONE]. While the next
chunk is slow, a `: keep-alive` comment goes out every `keepalive_s` without
disturbing the pending read. When the client goes away, the chunk source is closed,
which cancels the work behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
from google.protobuf.message import Message
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from http_facade.codec import to_dict
from http_facade.errors import OPENAI, internal, stream_error_body
from http_facade.protocol import CONNECTION_SEND, unless_gone
from server.base.errors import Cancelled, GatewayError, ShuttingDown
from server.base.pipeline import Encoded

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keep-alive\n\n"
HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}
_END = object()
SHUTTING_DOWN = ShuttingDown("the gateway is shutting down; retry the request")


def event(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def named(name: str, payload: dict[str, Any]) -> bytes:
    return _head(name) + orjson.dumps(payload) + b"\n\n"


def _head(name: str) -> bytes:
    head = _HEADS.get(name)
    if head is None:
        head = b"event: " + name.encode() + b"\ndata: "
        if len(_HEADS) < 256:
            _HEADS[name] = head
    return head


# Each event name's first bytes, made once: a dialect has a few dozen names.
_HEADS: dict[str, bytes] = {}


@dataclass(frozen=True)
class Framing:
    """How one streaming RPC's events are written (from its `gateway.v1.sse` option and
    its service's error format)."""

    # Ends the stream with `data: [DONE]`.
    done: bool = True
    # The payload key whose value names each event; empty for unnamed events.
    name_field: str = ""
    # The keep-alive event's name; empty for a comment.
    keepalive_event: str = ""
    error_format: int = OPENAI
    # Writes the events as one JSON array unless the request asks `alt=sse`.
    json_array_unless_alt_sse: bool = False
    # Writes the events as JSON Lines, each line this field of the message (empty: SSE).
    json_lines_field: str = ""

    def event(self, payload: dict[str, Any]) -> bytes:
        if not self.name_field:
            return event(payload)
        return named(str(payload.get(self.name_field, "message")), payload)

    def encoded(self, chunk: Encoded) -> bytes:
        """Events already JSON (a relayed upstream's), framed alike."""
        if not self.name_field:
            return b"".join([b"data: " + data + b"\n\n" for data in chunk.events])
        if chunk.names is None:
            return b"".join([self.event(orjson.loads(data)) for data in chunk.events])
        return b"".join(
            [
                _head(name) + data + b"\n\n"
                for name, data in zip(chunk.names, chunk.events, strict=True)
            ]
        )

    def error(self, error: GatewayError, sequence: int) -> bytes:
        """The error event that ends a stream after `sequence` events."""
        body = stream_error_body(error, self.error_format, sequence)
        return named("error", body) if self.name_field else event(body)

    @property
    def keepalive(self) -> bytes:
        if not self.keepalive_event:
            return KEEPALIVE
        return named(self.keepalive_event, {"type": self.keepalive_event})

    def first(self, payload: dict[str, Any]) -> bytes:
        return self.event(payload)

    def first_encoded(self, chunk: Encoded) -> bytes:
        return self.encoded(chunk)

    @property
    def end(self) -> bytes:
        """What follows the last event of a stream that ended well."""
        return DONE if self.done else b""

    @property
    def headers(self) -> Mapping[str, str]:
        return HEADERS

    def for_query(self, alt: str | None) -> Framing:
        """The framing a request gets: one JSON array (JSON_ARRAY) when the RPC writes
        one unless asked `alt=sse`, as Google's APIs stream."""
        if self.json_array_unless_alt_sse and alt != "sse":
            return JsonArray(error_format=self.error_format)
        if self.json_lines_field:
            return JsonLines(error_format=self.error_format, json_lines_field=self.json_lines_field)
        return self


PLAIN = Framing()


@dataclass(frozen=True)
class JsonArray(Framing):
    """A stream as one JSON array, each event an element written as it comes
    (`[{...},\r\n{...}]`); an error after the first event is the last element."""

    def first(self, payload: dict[str, Any]) -> bytes:
        return b"[" + orjson.dumps(payload)

    def event(self, payload: dict[str, Any]) -> bytes:
        return b",\r\n" + orjson.dumps(payload)

    def encoded(self, chunk: Encoded) -> bytes:
        return b"".join([b",\r\n" + data for data in chunk.events])

    def first_encoded(self, chunk: Encoded) -> bytes:
        return b"[" + b",\r\n".join(chunk.events)

    def error(self, error: GatewayError, sequence: int) -> bytes:
        return self.event(stream_error_body(error, self.error_format, sequence)) + b"]"

    @property
    def keepalive(self) -> bytes:
        return b"\n"  # whitespace between elements: valid JSON, and bytes on the wire

    @property
    def end(self) -> bytes:
        return b"]"

    @property
    def headers(self) -> Mapping[str, str]:
        return ARRAY_HEADERS


ARRAY_HEADERS = {**HEADERS, "content-type": "application/json"}


@dataclass(frozen=True)
class JsonLines(Framing):
    """A stream as JSON Lines: one object per line, nothing between them (an export,
    not a conversation: no keep-alive), an error after the first line as a last
    `{"error": ...}` line."""

    def first(self, payload: dict[str, Any]) -> bytes:
        return self.event(payload)

    def event(self, payload: dict[str, Any]) -> bytes:
        return orjson.dumps(payload.get(self.json_lines_field, {})) + b"\n"

    def encoded(self, chunk: Encoded) -> bytes:
        return b"".join([self.event(orjson.loads(data)) for data in chunk.events])

    def error(self, error: GatewayError, sequence: int) -> bytes:
        return orjson.dumps(stream_error_body(error, self.error_format, sequence)) + b"\n"

    @property
    def keepalive(self) -> bytes:
        return b""

    @property
    def end(self) -> bytes:
        return b""

    @property
    def headers(self) -> Mapping[str, str]:
        return LINES_HEADERS


LINES_HEADERS = {**HEADERS, "content-type": "application/jsonl"}


# Events read ahead of a slow client before the reading pauses.
MAX_AHEAD = 64


async def events(
    first: Message | Encoded,
    chunks: AsyncGenerator[Message, None],
    keepalive_s: float,
    request_id: str,
    framing: Framing = PLAIN,
    stopping: asyncio.Future[None] | None = None,
) -> AsyncGenerator[bytes, None]:
    """The SSE byte stream: `first`, then the rest of `chunks`, then [DONE] unless the
    framing has none (or an error event). Closes `chunks` however it ends. When
    `stopping` completes (the server's grace period is running out), the stream ends
    with a SHUTTING_DOWN error event, before the server closes the socket.

    One task per stream reads `chunks` and encodes each as it comes; whatever is ready
    when the response can write goes out in one write (an instant upstream's twenty
    chunks in one or two, paced tokens one by one). One keep-alive timer per stream,
    re-armed when it fires rather than set and cancelled around every event, wakes the
    writer once nothing has been written for `keepalive_s`."""
    loop = asyncio.get_running_loop()
    encode, encoded = framing.event, framing.encoded
    ready: list[bytes] = []
    waiter: list[asyncio.Future[bool]] = []  # the writer waiting for events, if any
    space: list[asyncio.Future[None]] = []  # the reader waiting for room, if any
    finished = False
    # Events so far, `first` included: an error event's sequence number.
    sent = len(first.events) if type(first) is Encoded else 1
    timer: asyncio.TimerHandle | None = None

    def wake(timed_out: bool = False) -> None:
        if waiter and not waiter[0].done():
            waiter[0].set_result(timed_out)

    async def read() -> None:
        nonlocal finished, sent
        try:
            async for chunk in chunks:
                if type(chunk) is Encoded:
                    ready.append(encoded(chunk))
                    sent += len(chunk.events)
                else:
                    ready.append(encode(to_dict(chunk)))
                    sent += 1
                wake()
                if len(ready) >= MAX_AHEAD:
                    room = loop.create_future()
                    space[:] = [room]
                    await room
            if framing.end:
                ready.append(framing.end)
        except GatewayError as exc:
            ready.append(framing.error(exc, sent))
        except Exception as exc:
            ready.append(framing.error(internal(exc, request_id), sent))
        finally:
            finished = True
            wake()

    def idle() -> None:
        nonlocal timer
        due = last + keepalive_s
        if loop.time() >= due:
            wake(True)
            due = loop.time() + keepalive_s
        timer = loop.call_at(due, idle)

    reader: asyncio.Task[None] | None = None

    def on_stop(_: asyncio.Future[None]) -> None:
        wake()

    if stopping is not None:
        stopping.add_done_callback(on_stop)
    try:
        if type(first) is Encoded:
            yield framing.first_encoded(first)
        else:
            yield framing.first(to_dict(first))
        last = loop.time()  # when the writer last wrote
        idle()
        reader = asyncio.ensure_future(read())
        while True:
            if stopping is not None and stopping.done() and not finished:
                yield framing.error(SHUTTING_DOWN, sent)
                return
            if ready:
                out = ready[0] if len(ready) == 1 else b"".join(ready)
                ready.clear()
                if space and not space[0].done():
                    space[0].set_result(None)
                yield out
                last = loop.time()
                continue
            if finished:
                break
            waiting = loop.create_future()
            waiter[:] = [waiting]
            try:
                timed_out = await waiting
            finally:
                waiter.clear()
            if timed_out and not ready:
                yield framing.keepalive
                last = loop.time()
    finally:
        if timer is not None:
            timer.cancel()
        # Runs on client disconnect too, inside a cancelled scope: shield the clean-up.
        with anyio.CancelScope(shield=True):
            if stopping is not None:
                stopping.remove_done_callback(on_stop)
            if reader is not None and not reader.done():
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
            await chunks.aclose()


class EventStream(StreamingResponse):
    """A StreamingResponse that always closes its event source, even when the client
    disconnected while an event was being sent. It stops when the connection's
    CONNECTION_GONE future completes (a server without it streams to the end), instead
    of a task group reading the disconnect (a quarter of a 20-chunk stream's floor)."""

    body_iterator: AsyncGenerator[bytes, None]

    def __init__(
        self,
        content: AsyncGenerator[bytes, None],
        headers: Mapping[str, str],
        framing_headers: Mapping[str, str] = HEADERS,
    ) -> None:
        super().__init__(content, headers={**headers, **framing_headers})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            connection_send = scope.get(CONNECTION_SEND)
            send_body = (connection_send and connection_send()) or send
            await unless_gone(scope, self._stream(send, send_body))
        except Cancelled:
            pass  # the client went away: nobody to send the rest to
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()

    async def _stream(self, send: Send, send_body: Send) -> None:
        """The head through every middleware (they note that the response started and
        add their headers); the events straight to the connection, past four wrappers
        that pass a body on untouched (none rewrites one: CORS and the request id are
        headers), which each relayed event would otherwise cross."""
        start = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        await send(start)
        async for chunk in self.body_iterator:
            await send_body({"type": "http.response.body", "body": chunk, "more_body": True})
        await send_body({"type": "http.response.body", "body": b"", "more_body": False})
