"""A Realtime session relayed to an upstream that serves OpenAI's Realtime API.

The upstream's socket opens once the client's has (its URL and credentials are the
provider's: the caller's key never leaves the gateway), and frames go both ways as
they were written, apart from what the gateway sets:
- the session's model: the upstream's name for it in a `session.update` going up, the
  name the client asked for in `session.created`/`session.updated` coming down;
- a `response.create`: its worst cost is reserved first (server/application/
  realtime_relay.py); one the key's limits or budget cannot take is not forwarded and
  the client gets an error event naming the level. A key under a budget gets the
  response bounded (`max_output_tokens`) to what the reservation covers;
- guardrails on text: a conversation item's text, instructions and a response's input
  going up (redacted or refused as configured, an error event then and nothing
  forwarded); a text or transcript's `.done` coming down is scanned, and one the
  guardrails block is not forwarded: the client gets an error event and the response
  is cancelled upstream. Deltas before it have gone out, and audio passes unexamined.

Each upstream `response.done` is one ledger row, its usage as the upstream reports
it, a response the upstream began of its own (server-side turn detection) included: its
cost is reserved when its `response.created` comes, and one the budget cannot take is
cancelled upstream, the client told by an error event. A client gone while responses run leaves the upstream socket open until they end
(at most DRAIN_S), so they are metered (one that half-closed, over gRPC, still gets
their events); the session's bounds (frames, length, idle,
slow reader, shutdown) are the gateway's own (http_facade/sockets.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

import orjson
import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from http_facade.context import Exchange
from http_facade.sockets import Closed, Finished, Frames, error_event
from server.application.realtime_relay import Metered, RealtimeRelays, Target, text_tokens
from server.base import realtime_audio as audio
from server.base.errors import Cancelled, GatewayError, UpstreamError
from server.guardrails.guard import Guard

log = logging.getLogger(__name__)
# How long the upstream's socket stays open for responses under way once the client left.
DRAIN_S = 10.0
# Seconds to open the upstream's socket.
OPEN_TIMEOUT_S = 10.0
# The largest frame taken from the upstream (its audio deltas are well under it).
UPSTREAM_MAX_FRAME_BYTES = 16 * 1024 * 1024
# Close code when the upstream failed (RFC 6455: an unexpected condition).
UPSTREAM_FAILED = 1011
# Downstream events whose text the output guardrails read, and where it is.
_DONE_TEXT = {"response.output_text.done": "text", "response.output_audio_transcript.done":
              "transcript"}  # fmt: skip


class Relay:
    """One relayed session: the client's frames up, the upstream's down."""

    def __init__(
        self,
        relays: RealtimeRelays,
        target: Target,
        session: Frames,
        exchange: Exchange,
        model: str,
    ) -> None:
        self.relays = relays
        self.target = target
        self.session = session
        self.exchange = exchange
        self.model = model
        self.guard: Guard | None = None
        # Responses asked for and not yet created upstream (in order), and those
        # running, by the upstream's id.
        self.asked: deque[Metered] = deque()
        self.running: dict[str, Metered] = {}
        # Responses the upstream began that the budget could not take (cancelled).
        self.refused: set[str] = set()
        # What the upstream holds of the conversation, in tokens: known after each
        # response.done, estimated for what was added since; a reservation's prompt.
        self.context_tokens = 0
        # The client's side is over (it left, or sent its last frame and still reads).
        self.closing = False
        self.client_gone = False
        self._sending = asyncio.Lock()

    async def run(self) -> None:
        with contextlib.suppress(Closed):
            await self._relay()

    async def _relay(self) -> None:
        try:
            self.guard = await self.relays.guard(self.exchange.metadata, self.target)
            upstream = await self._open()
        except GatewayError as error:
            await self._to_client(error_event(error))
            await self.session.close(UPSTREAM_FAILED, "the upstream's session did not open")
            return
        down = asyncio.ensure_future(self._down(upstream))
        try:
            await self._up(upstream, down)
        except Closed as ended:
            self.closing = True
            self.client_gone = self.client_gone or not isinstance(ended, Finished)
        finally:
            if self.closing and self._pending() and not down.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(down), DRAIN_S)
            down.cancel()
            await asyncio.gather(down, return_exceptions=True)
            await upstream.close()
            self._end_pending(Cancelled("the session ended before the response did"))
        failure = down.exception() if down.done() and not down.cancelled() else None
        if failure is not None:  # a fault of the relay's own: said, never swallowed
            log.error("realtime relay of %s failed", self.target.upstream.id, exc_info=failure)
            await self.session.close(UPSTREAM_FAILED, "the relay failed; reconnect")
        if down.done() and not down.cancelled() and failure is None and down.result():
            await self.session.close(UPSTREAM_FAILED, "the upstream closed the session")

    async def _open(self) -> Any:
        try:
            return await websockets.connect(
                self.target.url, additional_headers=self.target.headers,
                open_timeout=OPEN_TIMEOUT_S, max_size=UPSTREAM_MAX_FRAME_BYTES, compression=None,
            )  # fmt: skip
        except InvalidStatus as exc:
            why = f"it answered {exc.response.status_code}"
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            why = type(exc).__name__
        provider = self.target.upstream.id
        log.warning("realtime upstream %s not opened: %s", provider, why)
        raise UpstreamError(f"{provider}: the Realtime session could not be opened ({why})",
                            {"provider": provider})  # fmt: skip

    # -- the client's frames, up -----------------------------------------------------

    async def _up(self, upstream: Any, down: asyncio.Future[bool]) -> None:
        while True:
            receiving = asyncio.ensure_future(self.session.receive())
            waiting: set[asyncio.Future[Any]] = {receiving, down}
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if receiving not in done:  # the upstream ended the session
                receiving.cancel()
                await asyncio.gather(receiving, return_exceptions=True)
                return
            frame = receiving.result()
            try:
                out = await self._outgoing(frame)
            except GatewayError as error:
                await self._to_client(error_event(error, client_event_id=frame.get("event_id")))
                continue
            try:
                await upstream.send(orjson.dumps(out).decode())
            except ConnectionClosed:
                return

    async def _outgoing(self, frame: dict[str, Any]) -> dict[str, Any]:
        """The frame as it goes upstream (GatewayError: it does not)."""
        kind = frame.get("type")
        if kind == "session.update" and isinstance(frame.get("session"), dict):
            session = dict(frame["session"])
            if "model" in session:
                session["model"] = self.target.upstream_model
            if isinstance(session.get("instructions"), str):
                session["instructions"] = self._input_text(session["instructions"])
            frame = {**frame, "session": session}
        elif kind == "conversation.item.create" and isinstance(frame.get("item"), dict):
            frame = {**frame, "item": self._item(frame["item"])}
        elif kind == "input_audio_buffer.append" and isinstance(frame.get("audio"), str):
            self.context_tokens += audio.input_tokens(_decoded_size(frame["audio"]))
        elif kind == "response.create":
            frame = await self._response(frame)
        return frame

    async def _response(self, frame: dict[str, Any]) -> dict[str, Any]:
        asked = frame.get("response")
        asked = dict(asked) if isinstance(asked, dict) else {}
        if isinstance(asked.get("instructions"), str):
            asked["instructions"] = self._input_text(asked["instructions"])
        added = 0
        if isinstance(asked.get("input"), list):
            items = [self._item(i) if isinstance(i, dict) else i for i in asked["input"]]
            asked["input"] = items
            added = sum(text_tokens(_item_text(i)) for i in items if isinstance(i, dict))
        limit = asked.get("max_output_tokens")
        metered = await self.relays.response(
            self.exchange.metadata, self.exchange.request_id, self.target,
            self.context_tokens + added, limit if isinstance(limit, int) else None,
        )  # fmt: skip
        self.asked.append(metered)
        if metered.max_output_tokens is not None and not isinstance(limit, int):
            asked["max_output_tokens"] = metered.max_output_tokens
        return {**frame, "response": asked}

    def _item(self, item: dict[str, Any]) -> dict[str, Any]:
        """A conversation item going up, its text through the input guardrails."""
        content = item.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part = {**part, "text": self._input_text(part["text"])}
                parts.append(part)
            item = {**item, "content": parts}
        if isinstance(item.get("output"), str):  # a function call's output
            item = {**item, "output": self._guarded(item["output"], "tool_results")}
        self.context_tokens += text_tokens(_item_text(item))
        return item

    def _input_text(self, text: str) -> str:
        return self._guarded(text, "input")

    def _guarded(self, text: str, phase: str) -> str:
        if self.guard is None or not self.guard.active(phase):
            return text
        return self.guard.text(text, phase)

    # -- the upstream's events, down -------------------------------------------------

    async def _down(self, upstream: Any) -> bool:
        """Relays the upstream's events until it closes (True) or, once the client
        has left, until the responses under way have ended (False)."""
        try:
            async for message in upstream:
                text = message if isinstance(message, str) else message.decode()
                forwarded = await self._incoming(text, upstream)
                if forwarded is not None and not self.client_gone:
                    try:
                        await self.session.check()
                        await self._to_client_raw(forwarded)
                    except Closed:
                        self.client_gone = self.closing = True
                if self.closing and not self._pending():
                    return False
        except ConnectionClosed:
            pass
        self._end_pending(UpstreamError("the upstream closed the session during the response"))
        return True

    async def _incoming(self, text: str, upstream: Any) -> str | None:
        """The upstream's event as it goes to the client (None: it does not), metered."""
        try:
            event = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text  # not the gateway's to judge: passed as written
        if not isinstance(event, dict):
            return text
        kind = event.get("type")
        if kind in ("session.created", "session.updated"):
            session = event.get("session")
            if isinstance(session, dict) and "model" in session:
                event["session"] = {**session, "model": self.model}
                return orjson.dumps(event).decode()
        elif kind == "response.created":
            response_id = str((event.get("response") or {}).get("id") or "")
            try:
                began = self.asked.popleft() if self.asked else await self._unasked()
            except GatewayError as error:
                # The budget cannot take a response the upstream began of its own (its
                # turn detection heard the end of a turn): it is cancelled there.
                self.refused.add(response_id)
                self._cancel(upstream, response_id)
                return orjson.dumps(error_event(error)).decode()
            began.began(response_id)
            self.running[response_id] = began
        elif kind == "response.done":
            response = event.get("response") or {}
            response_id = str(response.get("id") or "")
            if response_id in self.refused:
                self.refused.discard(response_id)
                return None
            metered = self.running.pop(response_id, None)
            if metered is None and self.asked:  # a response that failed before it began
                metered = self.asked.popleft()
            if metered is not None:
                metered.finish(response)
            usage = response.get("usage") or {}
            if isinstance(usage.get("total_tokens"), int):
                self.context_tokens = usage["total_tokens"]
        elif kind in _DONE_TEXT and self.guard is not None:
            try:
                self._guarded(str(event.get(_DONE_TEXT[kind]) or ""), "output")
            except GatewayError as error:
                self._cancel(upstream, event.get("response_id"))
                return orjson.dumps(error_event(error)).decode()
        return text

    async def _unasked(self) -> Metered:
        """The account of a response the upstream began without a response.create
        (its server-side turn detection), reserved as it begins."""
        return await self.relays.response(
            self.exchange.metadata, self.exchange.request_id, self.target,
            self.context_tokens, None,
        )  # fmt: skip

    def _cancel(self, upstream: Any, response_id: Any) -> None:
        cancel = {"type": "response.cancel"}
        if isinstance(response_id, str):
            cancel["response_id"] = response_id
        task = asyncio.ensure_future(upstream.send(orjson.dumps(cancel).decode()))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    # -- both ------------------------------------------------------------------------

    def _pending(self) -> bool:
        return bool(self.asked or self.running)

    def _end_pending(self, error: GatewayError) -> None:
        for metered in [*self.asked, *self.running.values()]:
            metered.finish(None, error)
        self.asked.clear()
        self.running.clear()

    async def _to_client(self, event: Mapping[str, Any]) -> None:
        await self._to_client_raw(orjson.dumps(event).decode())

    async def _to_client_raw(self, text: str) -> None:
        # Two tasks write to the client (the relay down, and error events up): one
        # frame at a time.
        async with self._sending:
            await self.session.send_raw(text)


def _decoded_size(given: str) -> int:
    """The bytes a base64 text holds (counted, not decoded: the upstream checks it)."""
    return len(given.rstrip("=")) * 3 // 4


def _item_text(item: Mapping[str, Any]) -> str:
    parts = item.get("content")
    texts = [
        str(p.get("text") or p.get("transcript") or "")
        for p in (parts if isinstance(parts, list) else [])
        if isinstance(p, dict)
    ]
    return " ".join([*texts, str(item.get("output") or ""), str(item.get("arguments") or "")])
