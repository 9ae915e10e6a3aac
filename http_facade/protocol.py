"""uvicorn's HTTP/1.1 protocol (its httptools parser), with the bounds it lacks on the
caller's side.

    header_timeout_s  a connection must send a whole request head within this time of
                      opening (or of its head's first byte, after a response): one that
                      drips its headers (slowloris) is answered 408 and closed, one that
                      sends nothing is closed
    idle_timeout_s    a kept-alive connection may wait this long for its next request
                      (uvicorn's keep-alive bound); longer than the common clients' pool
                      expiry (5 s for httpx and Node), so a client does not send on a
                      connection the gateway is closing
    send_timeout_s    a client that reads nothing while the gateway has data waiting
                      for it has its connection closed after this long: a stream it does
                      not read ends (the facade sees a disconnect and releases the
                      upstream) instead of holding a provider connection until the
                      request deadline
    MAX_HEAD_BYTES    a request head (request line and headers) larger than this is
                      answered 400 and closed, not buffered
    malformed framing is answered with the usual JSON error body, not plain text
    LINGER_S          a request answered before its body was read (a 413 on its
                      content-length) ends its connection: the answer goes out, the
                      write side closes (so the client reads the answer, not a reset),
                      and what it still sends is read and dropped, up to LINGER_BYTES
                      or this long; never parsed as another request

An idle bound that fires as a request waits in the socket (the loop was busy past it:
uvloop runs due timers before it polls) does not close the connection: the request is
read and served.

Each request's scope carries the connection's CONNECTION_GONE future, completed when
the client closes the connection: the facade cancels a request's work on it directly,
instead of a task per request reading `http.disconnect` (a task and, for a stream,
Starlette's task group and cancel scope: 0.1 ms of a 20-chunk stream's 0.4 ms floor).
It carries CONNECTION_SEND too, the connection's own send, which a stream's events
take past the middlewares' wrappers (they only look at a response's head).

Header values are parsed leniently, as h11 does: a malformed `x-request-id` (a DEL
byte, say) is replaced by a fresh id, not refused with a bare 400. The body read
timeout is the facade's own (http_facade/endpoint.py), as it is an ASGI matter.
"""

from __future__ import annotations

import asyncio
import logging
import select
import time
import weakref
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from http_facade.errors import RequestTimeout, error_json, should_retry
from server.base.errors import Cancelled, InvalidArgument

log = logging.getLogger(__name__)
# The largest request head read, as a browser or SDK never comes near it.
MAX_HEAD_BYTES = 32 * 1024
# What a connection answered before its request's body was read may still send.
LINGER_S = 2.0
LINGER_BYTES = 16 * 1024 * 1024
# The scope key of the future completed when the request's connection is lost.
CONNECTION_GONE = "gateway.connection_gone"
# The scope key of the connection's own ASGI send (a weak reference to it), beneath
# every middleware's wrapper.
CONNECTION_SEND = "gateway.connection_send"
T = TypeVar("T")
# uvicorn warns once per malformed request: a caller could flood the log with them.
MALFORMED_WARN_EVERY_S = 10.0


class _ThrottleMalformed(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._last = -MALFORMED_WARN_EVERY_S

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() != "Invalid HTTP request received.":
            return True
        now = time.monotonic()
        if now - self._last < MALFORMED_WARN_EVERY_S:
            return False
        self._last = now
        return True


logging.getLogger("uvicorn.error").addFilter(_ThrottleMalformed())


async def unless_gone(scope: Mapping[str, Any], work: Awaitable[T]) -> T:
    """Awaits `work` in this task, cancelling it when the request's connection is lost
    first: then Cancelled. Under a server without CONNECTION_GONE, the work runs to its
    end."""
    gone: asyncio.Future[None] | None = scope.get(CONNECTION_GONE)
    if gone is None:
        return await work
    task = asyncio.current_task()
    assert task is not None
    waiting, fired = True, False

    def cancel(_: asyncio.Future[None]) -> None:
        nonlocal fired
        if waiting:  # not once the work is over: a cancel then would hit what follows
            fired = True
            task.cancel()

    gone.add_done_callback(cancel)
    try:
        return await work
    except asyncio.CancelledError:
        if fired and task.uncancel() == 0:
            raise Cancelled("the client closed the request") from None
        raise
    finally:
        waiting = False
        gone.remove_done_callback(cancel)


class HeadWithBody:
    """A response's transport that holds its head until its body: uvicorn writes each
    as it gets it, two writes and two segments to the client where one does. Only a
    head with a content-length is held (a whole body follows at once, in the same step
    of the handler); a stream's head and everything after go out as they come."""

    __slots__ = ("_transport", "_cycle", "_head", "_headed")

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport = transport
        # Weak: the cycle holds this as its transport, and a cycle of references would
        # leave every request's objects to the garbage collector (10 MB more RSS).
        self._cycle = weakref.ref(cycle)
        self._head: bytes | None = None
        self._headed = False  # whether the head was written (or is held)

    def write(self, data: bytes) -> None:
        if self._head is not None:
            data, self._head = self._head + data, None
        elif not self._headed and (cycle := self._cycle()) is not None and cycle.response_started:
            self._headed = True  # a 100 Continue goes before, as it is
            if (
                cycle.chunked_encoding is False
                and cycle.expected_content_length > 0
                and cycle.scope["method"] != "HEAD"  # whose body is never written
            ):
                self._head = data
                return
        self._transport.write(data)

    def close(self) -> None:
        if self._head is not None:
            head, self._head = self._head, None
            self._transport.write(head)
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def bounded_protocol(
    header_timeout_s: float, idle_timeout_s: float, send_timeout_s: float
) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn (`uvicorn.Config(http=...)`)."""

    class BoundedProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None
        _send_timer: asyncio.TimerHandle | None = None
        # Bytes of the request head arrived since the last response (or the connection).
        _head_bytes = 0
        _in_head = True
        _head_too_large = False
        # Answered before its request's body was read: the bytes dropped since.
        _lingered: int | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.parser.set_dangerous_leniencies(lenient_headers=True)
            # uvicorn's config takes whole seconds; its timer (call_later) takes any.
            self.timeout_keep_alive = idle_timeout_s  # type: ignore[assignment]

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._gone: asyncio.Future[None] = self.loop.create_future()
            self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_timers()
            super().connection_lost(exc)
            # uvicorn cancels its keep-alive timer on a clean close only: after a reset
            # it would fire on the closed socket.
            if self.timeout_keep_alive_task is not None:
                self.timeout_keep_alive_task.cancel()
                self.timeout_keep_alive_task = None
            if not self._gone.done():
                self._gone.set_result(None)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope[CONNECTION_GONE] = self._gone  # type: ignore[literal-required]

        def data_received(self, data: bytes) -> None:
            if self._lingered is not None:
                self._lingered += len(data)
                if self._lingered > LINGER_BYTES:
                    self.transport.close()
                return
            if self._in_head:
                if not self._head_bytes and self._header_timer is None:
                    self._arm_header_timer()  # the next request's head has begun
                self._head_bytes += len(data)
            super().data_received(data)
            # Still no whole head (the body may have come in the same read: not counted).
            if (
                self._in_head
                and self._head_bytes > MAX_HEAD_BYTES
                and not self.transport.is_closing()
            ):
                message = f"the request head exceeds {MAX_HEAD_BYTES} bytes"
                self._respond(400, InvalidArgument(message))

        def on_headers_complete(self) -> None:
            self._in_head = False
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            # A whole head can arrive in one read, past the check in data_received.
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if size > MAX_HEAD_BYTES:
                self._head_too_large = True
                raise ValueError("request head too large")  # the parser stops: a 400
            super().on_headers_complete()
            if self.cycle is not None and self.cycle.scope is self.scope:
                self.cycle.transport = HeadWithBody(self.transport, self.cycle)  # type: ignore[assignment]
                # Weak: the cycle holds the scope, and a cycle of references would leave
                # every request's objects to the garbage collector (5 MB more RSS).
                send = weakref.WeakMethod(self.cycle.send)
                self.scope[CONNECTION_SEND] = send  # type: ignore[literal-required]

        def on_response_complete(self) -> None:
            unread = self.cycle is not None and self.cycle.more_body
            super().on_response_complete()
            if self.transport.is_closing():
                return
            if unread:
                self._linger()
                return
            self._head_bytes, self._in_head = 0, True
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None  # idle now: uvicorn's keep-alive bound applies

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._send_timer is None:
                self._send_timer = self.loop.call_later(send_timeout_s, self._send_timed_out)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._send_timer is not None:
                self._send_timer.cancel()
                self._send_timer = None

        def timeout_keep_alive_handler(self) -> None:
            if self._request_waiting():
                self.timeout_keep_alive_task = None
                return  # read next; its head has the header bound
            super().timeout_keep_alive_handler()

        def send_400_response(self, msg: str) -> None:
            if self._head_too_large:
                message = f"the request head exceeds {MAX_HEAD_BYTES} bytes"
                self._respond(400, InvalidArgument(message))
                return
            self._respond(400, InvalidArgument(f"malformed HTTP request: {msg}"))

        # -- bounds ------------------------------------------------------------------

        def _arm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timed_out)

        def _linger(self) -> None:
            """Ends a connection whose request was answered before its body was read
            (see LINGER_S): nothing it sends after is another request."""
            self._lingered = 0
            self._cancel_timers()
            if self.timeout_keep_alive_task is not None:
                self.timeout_keep_alive_task.cancel()
                self.timeout_keep_alive_task = None
            if self.transport.can_write_eof():
                self.transport.write_eof()  # once the answer is out
            self._header_timer = self.loop.call_later(LINGER_S, self.transport.close)

        def _cancel_timers(self) -> None:
            for timer in (self._header_timer, self._send_timer):
                if timer is not None:
                    timer.cancel()
            self._header_timer = self._send_timer = None

        def _header_timed_out(self) -> None:
            self._header_timer = None
            if self.transport.is_closing():
                return
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a request is being served: its own bounds apply
            if self._head_bytes:
                message = f"no complete request head within {header_timeout_s:g}s"
                self._respond(408, RequestTimeout(message))
            elif self._request_waiting():
                self._arm_header_timer()  # its bytes are read next
            else:
                # Nothing asked (a silent connection): an unasked 408 could be read as
                # the answer to a request crossing it; just close.
                self.transport.close()

        def _request_waiting(self) -> bool:
            """Whether the socket holds bytes not yet read (or the client's end)."""
            sock = self.transport.get_extra_info("socket")
            if sock is None:
                return False
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))

        def _send_timed_out(self) -> None:
            self._send_timer = None
            if not self.transport.is_closing():
                log.info("closing a connection whose client read nothing for %gs", send_timeout_s)
                self.transport.abort()

        def _respond(self, status: int, error: InvalidArgument) -> None:
            """Writes a whole JSON error response by hand (the parser may be in a state that
            refuses to frame one) and closes the connection."""
            body = error_json(error)
            phrase = {400: b"Bad Request", 408: b"Request Timeout"}[status]
            retry = b"true" if should_retry(error, status) else b"false"
            head = (
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nx-should-retry: %s\r\nconnection: close\r\n\r\n"
            ) % (status, phrase, len(body), retry)
            self.transport.write(head + body)
            self.transport.close()

    return BoundedProtocol
