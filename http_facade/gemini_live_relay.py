"""A Gemini Live session relayed to a Gemini upstream's own Live API (its
`BidiGenerateContent` socket, opened with the provider's key): the client's messages go
up and the upstream's come down as written, apart from what the gateway sets: the
setup's model (the provider's name for it), the guardrails on the text going up (a
turn's text and `realtimeInput.text`; a block ends the session, 1008 with the reason),
and each turn's account: its worst cost reserved when the client ends a turn
(`turnComplete`, `realtimeInput.text`, `toolResponse`) or, for a turn the upstream's
activity detection began, when its first answer comes (a budget that cannot take it
ends the session, 1008 naming the level), and one ledger row when its `usageMetadata`
and `turnComplete` have come, with the upstream's counts (text and audio by modality,
cached, thoughts)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from http_facade.context import Exchange
from http_facade.sockets import POLICY, Closed, Frames, close_reason
from server.application.realtime_relay import Metered, RealtimeRelays, Target, live_counts
from server.base.errors import Cancelled, GatewayError, UpstreamError
from server.guardrails.guard import Guard

log = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 10.0
UPSTREAM_FAILED = 1011


class LiveRelay:
    def __init__(
        self,
        relays: RealtimeRelays,
        target: Target,
        frames: Frames,
        exchange: Exchange,
        setup: dict[str, Any],
    ) -> None:
        self.relays = relays
        self.target = target
        self.frames = frames
        self.exchange = exchange
        self.setup = setup
        self.guard: Guard | None = None
        # The turn under way, its latest usageMetadata, and whether it has ended.
        self.turn: Metered | None = None
        self.usage: dict[str, Any] | None = None
        self.ended = False

    async def run(self) -> None:
        with contextlib.suppress(Closed):
            await self._relay()

    async def _relay(self) -> None:
        try:
            self.guard = await self.relays.guard(self.exchange.metadata, self.target)
            upstream = await self._open()
        except GatewayError as error:
            await self.frames.close(UPSTREAM_FAILED, close_reason(error.message))
            return
        try:
            model = f"models/{self.target.upstream_model}"
            await upstream.send(orjson.dumps({"setup": {**self.setup, "model": model}}).decode())
            down = asyncio.ensure_future(self._down(upstream))
            try:
                await self._up(upstream, down)
            finally:
                down.cancel()
                await asyncio.gather(down, return_exceptions=True)
                failure = down.exception() if not down.cancelled() else None
                if failure is not None and not isinstance(failure, Closed):
                    # A fault of the relay's own (an upstream message it could not
                    # read): said, never swallowed with the session.
                    log.error("Live relay of %s failed", self.target.upstream.id,
                              exc_info=failure)  # fmt: skip
        finally:
            await upstream.close()
            self._settle(Cancelled("the session ended before the turn did"))

    async def _open(self) -> Any:
        try:
            return await websockets.connect(
                self.target.url, additional_headers=self.target.headers,
                open_timeout=OPEN_TIMEOUT_S, compression=None,
            )  # fmt: skip
        except InvalidStatus as exc:
            why = f"it answered {exc.response.status_code}"
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            why = type(exc).__name__
        provider = self.target.upstream.id
        raise UpstreamError(f"{provider}: the Live session could not be opened ({why})",
                            {"provider": provider})  # fmt: skip

    async def _up(self, upstream: Any, down: asyncio.Future[None]) -> None:
        while True:
            receiving = asyncio.ensure_future(self.frames.receive())
            waiting: set[asyncio.Future[Any]] = {receiving, down}
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if receiving not in done:  # the upstream closed
                receiving.cancel()
                await asyncio.gather(receiving, return_exceptions=True)
                await self.frames.close(UPSTREAM_FAILED, "the upstream closed the session")
            message = receiving.result()
            try:
                if _ends_turn(message):
                    message = self._guarded(message)
                    await self._begin()
            except GatewayError as error:
                await self.frames.close(POLICY, close_reason(error.message))
            try:
                await upstream.send(orjson.dumps(message).decode())
            except ConnectionClosed:
                await self.frames.close(UPSTREAM_FAILED, "the upstream closed the session")

    async def _down(self, upstream: Any) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for raw in upstream:
                text = raw if isinstance(raw, str) else raw.decode()
                message = orjson.loads(text)
                content = message.get("serverContent") if isinstance(message, dict) else None
                if isinstance(content, dict) and self.turn is None and not self.ended:
                    try:
                        await self._begin()  # a turn the upstream's activity detection began
                    except GatewayError as error:
                        await self.frames.close(POLICY, close_reason(error.message))
                if isinstance(message, dict) and isinstance(message.get("usageMetadata"), dict):
                    self.usage = message["usageMetadata"]
                if isinstance(content, dict) and (
                    content.get("turnComplete") or content.get("interrupted")
                ):
                    self.ended = True
                if self.ended and self.usage is not None:
                    self._settle(None)  # its row before the client hears the turn is over
                await self.frames.send_raw(text)

    async def _begin(self) -> None:
        if self.turn is not None:
            return
        self.turn = await self.relays.response(
            self.exchange.metadata, self.exchange.request_id, self.target, 0, None
        )
        self.usage, self.ended = None, False

    def _settle(self, error: GatewayError | None) -> None:
        turn, self.turn = self.turn, None
        if turn is not None:
            counts = live_counts(self.usage) if self.usage is not None else None
            turn.counted(counts, error if counts is None else None)
        self.usage, self.ended = None, False

    def _guarded(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.guard is None or not self.guard.active("input"):
            return message
        return _texts(message, lambda text: self.guard.text(text, "input") if self.guard else text)


def _ends_turn(message: dict[str, Any]) -> bool:
    content = message.get("clientContent") or message.get("client_content")
    if isinstance(content, dict):
        return bool(content.get("turnComplete") or content.get("turn_complete"))
    given = message.get("realtimeInput") or message.get("realtime_input")
    if isinstance(given, dict) and given.get("text") is not None:
        return True
    return "toolResponse" in message or "tool_response" in message


def _texts(value: Any, change: Any) -> Any:
    """`value` with every `text` string through `change`."""
    if isinstance(value, dict):
        return {k: change(v) if k == "text" and isinstance(v, str) else _texts(v, change)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_texts(v, change) for v in value]
    return value
