"""What every WebSocket session of the façade shares: the upgrade's checks, the
session's bounds, and its frames in and out.

An upgrade is checked before the socket opens, so a refusal is an HTTP answer a client
reads (401, 403, 404, 429) and not a socket closed after the fact: the mode must be
turned on (426 otherwise: a client that can fall back to HTTP does so at once), the key
must be one the gateway knows (checked as a model listing is, through the backend, so an
edge tier asks its gateway), and the key and the instance must have a session to spare.

Once open, a session is bounded: its client's frames by size (the server's
`ws_max_size`, 1009 past it) and rate, its own and all its key's sessions' together
(an error event, the frame dropped), its length and its silence (closed with a
reason), and its slow reader (a send that waits past
`send_timeout_s` ends the session, as a slow SSE reader's stream ends). A gateway
stopping closes every session with 1012 and a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

import orjson
from starlette.responses import Response
from starlette.types import Send
from starlette.websockets import WebSocket

from http_facade.context import Exchange, exchange_for
from http_facade.errors import error_object, error_response, error_status
from server.accounting.admission import KEY_HEADERS
from server.base.call import request_id_or_new
from server.base.config import ServerConfig, WebSocketsConfig
from server.base.errors import GatewayError, InvalidArgument, RateLimited

# Close codes (RFC 6455 and IANA's registry).
NORMAL = 1000
POLICY = 1008
TOO_BIG = 1009
RESTARTING = 1012
# A close frame's reason holds at most this many bytes.
MAX_REASON_BYTES = 123
# The browser's way to give a key: a subprotocol, as OpenAI's Realtime API takes it.
KEY_SUBPROTOCOL = "openai-insecure-api-key."


class _DenialIsAnAnswer(logging.Filter):
    """uvicorn logs an upgrade answered with an HTTP refusal (the ASGI denial response)
    as an error, as if the app had dropped it; every refusal here is one of those."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


logging.getLogger("uvicorn.error").addFilter(_DenialIsAnAnswer())


class Closed(Exception):
    """The session is over: its client left, or a bound closed it."""


class Finished(Closed):
    """The client sent its last frame and still reads (a gRPC stream half-closed):
    the responses under way run to their end, then the session is over."""


class Frames(Protocol):
    """A session's frames, whatever carries them: a WebSocket (Session) or a gRPC
    stream (http_facade/realtime_grpc.py)."""

    async def receive(self) -> dict[str, Any]:
        """The client's next event; Closed when the session is over."""
        ...

    async def send(self, event: dict[str, Any]) -> None: ...

    async def send_raw(self, text: str) -> None:
        """One event already JSON."""
        ...

    async def check(self) -> None:
        """Closed once the session must end (its length, a gateway stopping)."""
        ...

    async def close(self, code: int, reason: str) -> None:
        """Ends the session with a WebSocket close code and a reason; raises Closed."""
        ...


def exchange_of(websocket: WebSocket, forwarded: tuple[str, ...] = ()) -> Exchange:
    """The upgrade's exchange (its key headers as call metadata), as an HTTP request's."""
    state = websocket.scope.setdefault("state", {})
    state.setdefault("request_id", request_id_or_new(websocket.headers.get("x-request-id", "")))
    exchange = exchange_for(websocket.scope, forwarded)
    if not any(exchange.metadata.get(h) for h in KEY_HEADERS):
        # Azure OpenAI's header, and the browser's subprotocol, as OpenAI's Realtime
        # API takes them.
        key = websocket.headers.get("api-key", "")
        for offered in _subprotocols(websocket):
            if not key and offered.startswith(KEY_SUBPROTOCOL):
                key = offered[len(KEY_SUBPROTOCOL) :]
        if key:
            exchange.metadata["authorization"] = f"Bearer {key}"
    return exchange


def _subprotocols(websocket: WebSocket) -> list[str]:
    return [p.strip() for p in websocket.scope.get("subprotocols", ()) if p.strip()]


def chosen_subprotocol(websocket: WebSocket) -> str | None:
    """The subprotocol the answer names: the first offered that is not the key (the
    key is never echoed; a client offering only it gets none, which it accepts)."""
    return next((p for p in _subprotocols(websocket) if not p.startswith(KEY_SUBPROTOCOL)), None)


def upgrade_required(mode: str) -> Response:
    """426: the mode is turned off here; a client falls back to HTTP."""
    body = {
        "error": {
            "message": f"{mode} over WebSocket is turned off on this gateway; use HTTP",
            "type": "invalid_request_error",
            "code": "websocket_disabled",
            "param": None,
        }
    }
    return Response(orjson.dumps(body), 426, media_type="application/json")


def refusal(error: GatewayError, exchange: Exchange) -> Response:
    return error_response(error, exchange.response_headers)


class Bucket:
    """A token bucket of frames: `rate` a second, as many at once."""

    __slots__ = ("rate", "_tokens", "_refilled")

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._tokens = rate
        self._refilled = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


class Sessions:
    """The sessions open on this instance, per key and in all."""

    def __init__(self, limits: WebSocketsConfig) -> None:
        self.limits = limits
        self.open = 0
        # Sessions opened since the start.
        self.opened = 0
        self._per_key: Counter[str] = Counter()
        # Each key's frames, shared by its open sessions (with frames_per_s_per_key).
        self._frames: dict[str, Bucket] = {}

    def frames_of(self, exchange: Exchange) -> Bucket | None:
        """The bucket all of the key's sessions draw their frames from; None without
        a per-key bound. Held while the key has a session open."""
        rate = self.limits.frames_per_s_per_key
        if rate is None:
            return None
        return self._frames.setdefault(_credential(exchange), Bucket(rate))

    @contextlib.contextmanager
    def hold(self, exchange: Exchange) -> Iterator[None]:
        """One session of the key that `exchange` carries, for as long as it lasts;
        RateLimited (429) when the key or the instance has none to spare."""
        key = _credential(exchange)
        if self.open >= self.limits.sessions_per_instance:
            raise RateLimited("this gateway holds as many sessions as it may; retry later")
        if self._per_key[key] >= self.limits.sessions_per_key:
            raise RateLimited(
                f"this key has {self.limits.sessions_per_key} sessions open, as many as it "
                "may; close one first"
            )
        self.open += 1
        self.opened += 1
        self._per_key[key] += 1
        try:
            yield
        finally:
            self.open -= 1
            self._per_key[key] -= 1
            if not self._per_key[key]:
                del self._per_key[key]
                self._frames.pop(key, None)


async def serve_session(
    websocket: WebSocket,
    send: Send,
    settings: ServerConfig,
    sessions: Sessions,
    exchange: Exchange,
    admit: Callable[[], Awaitable[None]],
    conversation: Callable[[Session], Awaitable[None]],
) -> None:
    """Opens a session once `admit` passes and the key and instance have a session to
    spare (a GatewayError of either refuses the upgrade: 401/403/429 before the socket
    opens), then runs `conversation` on it until it ends."""
    try:
        await admit()
        held = sessions.hold(exchange)
        held.__enter__()
    except GatewayError as error:
        await websocket.send_denial_response(refusal(error, exchange))
        return
    try:
        await websocket.accept(chosen_subprotocol(websocket))
        stopping = getattr(websocket.app.state, "stopping", None)
        session = Session(websocket, send, settings, stopping, sessions.frames_of(exchange))
        await session.run(conversation(session))
    finally:
        held.__exit__(None, None, None)


def _credential(exchange: Exchange) -> str:
    """The key's fingerprint (never the key itself in memory longer than needed)."""
    raw = next((exchange.metadata[h] for h in KEY_HEADERS if exchange.metadata.get(h)), "")
    return hashlib.sha256(raw.encode()).hexdigest()


class Session:
    """One open socket's frames, within its bounds."""

    def __init__(
        self,
        websocket: WebSocket,
        send: Send,
        settings: ServerConfig,
        stopping: asyncio.Future[None] | None,
        key_frames: Bucket | None = None,
    ) -> None:
        self.websocket = websocket
        # The server's own send: each event goes out past Starlette's state checks.
        self._send = send
        self.limits = settings.websockets
        self.send_timeout_s = settings.send_timeout_s
        self.stopping = stopping
        # When the send under way began (None: none is), and whether the watchdog
        # found it stalled. One timer per session, re-armed when it fires, bounds every
        # send instead of a timeout set and cancelled around each event.
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._sending_since: float | None = None
        self._stalled = False
        self._watchdog = self._loop.call_later(self.send_timeout_s, self._watch)
        self.ends_at = asyncio.get_running_loop().time() + self.limits.max_session_s
        # The session's frames, and its key's (all its sessions') when bounded.
        self._frames = Bucket(self.limits.frames_per_s)
        self._key_frames = key_frames
        self._early: dict[str, Any] | None = None

    async def check(self) -> None:
        """Between a response's events: Closed (the socket closed with the reason) once
        the gateway is stopping or the session is past its length, so neither waits for
        the response to end."""
        if self.stopping is not None and self.stopping.done():
            await self.close(RESTARTING, "the gateway is shutting down; reconnect")
        if self._loop.time() >= self.ends_at:
            await self.close(POLICY, "the session reached its maximum length")

    async def receive(self) -> dict[str, Any]:
        """The client's next frame, a JSON object; Closed when the client left, went
        quiet past the idle bound, or the session reached its length or the gateway is
        stopping (each closed here with its reason)."""
        while True:
            left = self.ends_at - self._loop.time()
            if left <= 0:
                await self.close(POLICY, "the session reached its maximum length")
            wait = min(left, self.limits.idle_timeout_s)
            message = await self._next(wait, left)
            if message["type"] == "websocket.disconnect":
                raise Closed
            if not self._frames.take():
                await self.send(error_event(RateLimited(
                    f"more than {self.limits.frames_per_s:g} frames a second; frame dropped"
                )))  # fmt: skip
                continue
            if self._key_frames is not None and not self._key_frames.take():
                await self.send(error_event(RateLimited(
                    f"more than {self._key_frames.rate:g} frames a second from this key's "
                    "sessions together; frame dropped"
                )))  # fmt: skip
                continue
            text = message.get("text")
            raw = (message.get("bytes") or b"") if text is None else text.encode()
            try:
                frame = orjson.loads(raw)
            except ValueError:
                await self.send(error_event(_invalid("the frame is not valid JSON")))
                continue
            if not isinstance(frame, dict):
                await self.send(error_event(_invalid("a frame must be a JSON object")))
                continue
            return frame

    async def _next(self, wait: float, left: float) -> dict[str, Any]:
        if self._early is not None:
            message, self._early = self._early, None
            return message
        receiving = asyncio.ensure_future(self.websocket.receive())
        waiting: set[asyncio.Future[Any]] = {receiving}
        if self.stopping is not None:
            waiting.add(self.stopping)
        try:
            done, _ = await asyncio.wait(waiting, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # A read given up (a response ended first): a frame it already took is
            # the next one read, not lost.
            if receiving.done() and not receiving.cancelled():
                self._early = dict(receiving.result())
            receiving.cancel()
            raise
        if receiving in done:
            return dict(receiving.result())
        receiving.cancel()
        if self.stopping is not None and self.stopping.done():
            await self.close(RESTARTING, "the gateway is shutting down; reconnect")
        if wait >= left:
            await self.close(POLICY, "the session reached its maximum length")
        await self.close(NORMAL, f"no frame for {self.limits.idle_timeout_s:g}s; session closed")
        raise AssertionError("unreachable")

    async def send(self, event: dict[str, Any]) -> None:
        await self.send_raw(orjson.dumps(event).decode())

    async def send_raw(self, text: str) -> None:
        """One frame; Closed when the client is gone or reads nothing for
        `send_timeout_s` (the session then ends and the server closes the connection,
        as it does a slow SSE reader's)."""
        self._sending_since = self._loop.time()
        try:
            await self._send({"type": "websocket.send", "text": text})
        except asyncio.CancelledError:
            if not self._stalled:
                raise
            # The watchdog cancelled the session's task; a send from another task of
            # the session (a response running beside the reads) was cancelled by it.
            if self._task is not None and asyncio.current_task() is self._task:
                self._task.uncancel()
            raise Closed from None
        except (OSError, RuntimeError):
            raise Closed from None
        except Exception as exc:  # the server's own "connection closed" error
            if type(exc).__name__ == "ClientDisconnected":
                raise Closed from None
            raise
        finally:
            self._sending_since = None

    def _watch(self) -> None:
        since = self._sending_since
        now = self._loop.time()
        if since is not None and now - since >= self.send_timeout_s and self._task is not None:
            self._stalled = True
            self._task.cancel()
            return
        due = (since if since is not None else now) + self.send_timeout_s
        self._watchdog = self._loop.call_at(due, self._watch)

    def end(self) -> None:
        """Stops the session's timer (its task is over)."""
        self._watchdog.cancel()

    async def run(self, work: Awaitable[None]) -> None:
        """Runs the session's `work` to its end; a stalled reader's session ends there
        (the watchdog's cancel landing past the send it stopped, too)."""
        try:
            await work
        except asyncio.CancelledError:
            if not self._stalled:
                raise
            if self._task is not None:
                self._task.uncancel()
        finally:
            self.end()

    async def close(self, code: int, reason: str) -> None:
        """Closes the socket with `code` and `reason`, then raises Closed."""
        with contextlib.suppress(Exception):  # already gone: nothing to tell it
            async with asyncio.timeout(self.send_timeout_s):
                await self.websocket.close(code, reason)
        raise Closed


def close_reason(message: str) -> str:
    """`message` cut to what a close frame's reason holds (123 bytes)."""
    data = message.encode()
    if len(data) <= MAX_REASON_BYTES:
        return message
    return data[: MAX_REASON_BYTES - 3].decode(errors="ignore") + "..."


def error_event(error: GatewayError, **extra: Any) -> dict[str, Any]:
    """An error as a session's event: its HTTP status beside OpenAI's error object, as
    Codex and the Realtime API's clients read one."""
    return {"type": "error", "status": error_status(error), "error": error_object(error), **extra}


def _invalid(message: str) -> GatewayError:
    return InvalidArgument(message)
