"""Gemini Live (`BidiGenerateContent` over WebSocket, at Gemini's path
`/ws/google.ai.generativelanguage.{v1beta,v1alpha}.GenerativeService.BidiGenerateContent`)
over the Realtime session (http_facade/realtime.py): Gemini's messages are read as the
Realtime API's client events and its server events written as Gemini's, so a Live
session runs on every model the Realtime API serves (the gateway's own conversation, or
the relay to a Realtime upstream), each turn one response: admission, budget reserved
per turn, guardrails and one ledger row per turn as there.

The key comes in `x-goog-api-key` or the `key` query parameter, checked before the
socket opens (401, and 429 past the sessions a key or the instance may hold). The first
message is `setup` (its model, `generationConfig` with `responseModalities`,
`temperature`, `maxOutputTokens`, `systemInstruction`, function `tools`); a model the
key may not use closes the session (1008, the reason). Then `clientContent` turns (a
turn ends with `turnComplete`), `realtimeInput.text` (a turn of its own) and
`toolResponse` are answered with `serverContent` (`modelTurn` parts: text, or PCM
audio at 24 kHz with `outputTranscription` beside it), `toolCall`, and a
`turnComplete` with the turn's `usageMetadata`. A model whose upstream is Gemini's own
is relayed to its Live API instead (http_facade/gemini_live_relay.py). An error ends
the session as Gemini ends one: a close frame with code 1008 and the reason. Audio and video input
(`realtimeInput.audio`, `.video`, `mediaChunks`) are refused by name.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from http_facade.backends import Backend
from http_facade.bindings import Rpc
from http_facade.gemini_live_relay import LiveRelay
from http_facade.realtime import RealtimeSocket
from http_facade.sockets import (
    POLICY,
    Frames,
    Session,
    close_reason,
    exchange_of,
    serve_session,
    upgrade_required,
)
from server.accounting.admission import GOOGLE_KEY
from server.base.errors import GatewayError, InvalidArgument, Unsupported

PATH = "/ws/google.ai.generativelanguage.{}.GenerativeService.BidiGenerateContent"
VERSIONS = ("v1beta", "v1alpha")
# Gemini's spoken answer: the Realtime session's PCM16 at 24 kHz.
AUDIO_MIME = "audio/pcm;rate=24000"


class GeminiLive:
    def __init__(self, realtime: RealtimeSocket, check_rpc: Rpc, backend: Backend) -> None:
        self.realtime = realtime
        self.check_rpc = check_rpc
        self.backend = backend

    def routes(self) -> list[BaseRoute]:
        return [WebSocketRoute(PATH.format(version), self) for version in VERSIONS]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        websocket = WebSocket(scope, receive, send)
        settings = self.realtime.settings
        if not settings.websockets.realtime:
            await websocket.send_denial_response(upgrade_required("Gemini Live"))
            return
        exchange = exchange_of(websocket)
        if not exchange.metadata.get(GOOGLE_KEY) and websocket.query_params.get("key"):
            exchange.metadata[GOOGLE_KEY] = websocket.query_params["key"]

        async def admit() -> None:  # the key; the model comes in the setup
            await self.backend.unary(self.check_rpc, self.check_rpc.request_type(), exchange)

        async def session(frames: Session) -> None:
            try:
                setup = _setup(await frames.receive())
                update = _session_update(setup)
                model = str(setup.get("model") or "").removeprefix("models/")
                await self.realtime.admit(exchange, model, "setup.model")
            except GatewayError as error:
                await frames.close(POLICY, close_reason(error.message))
            relays = self.realtime.relays
            target = relays.target(model, "live_socket") if relays is not None else None
            if relays is not None and target is not None:  # a Gemini upstream's own Live API
                await LiveRelay(relays, target, frames, exchange, setup).run()
                return
            await frames.send({"setupComplete": {}})
            await self.realtime.converse(_LiveFrames(frames, update), exchange, model)

        await serve_session(websocket, send, settings, self.realtime.sessions, exchange, admit,
                            session)  # fmt: skip


def _setup(message: dict[str, Any]) -> dict[str, Any]:
    setup = message.get("setup")
    if not isinstance(setup, dict):
        raise InvalidArgument.for_field("setup", "must be the first message")
    return setup


def _get(value: Any, camel: str) -> Any:
    """A field by its JSON name or its proto name (Gemini takes both)."""
    if not isinstance(value, dict):
        return None
    if camel in value:
        return value[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return value.get(snake)


class _LiveFrames:
    """Gemini's messages as a Realtime session's frames (http_facade/sockets.py)."""

    def __init__(self, frames: Frames, update: dict[str, Any]) -> None:
        self.frames = frames
        # Realtime events still to be read, the setup's settings first.
        self.events: deque[dict[str, Any]] = deque([update])

    async def receive(self) -> dict[str, Any]:
        while not self.events:
            message = await self.frames.receive()
            try:
                self.events.extend(_client_events(message))
            except GatewayError as error:
                await self.close(POLICY, close_reason(error.message))
        return self.events.popleft()

    async def send(self, event: dict[str, Any]) -> None:
        try:
            messages = self._messages(event)
        except _Failed as failed:  # Gemini ends a session on an error
            await self.close(POLICY, close_reason(str(failed)))
        for message in messages:
            await self.frames.send(message)

    async def send_raw(self, text: str) -> None:
        await self.send(json.loads(text))

    async def check(self) -> None:
        await self.frames.check()

    async def close(self, code: int, reason: str) -> None:
        await self.frames.close(code, reason)

    def _messages(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            return [{"serverContent": {"modelTurn": {"parts": [{"text": event["delta"]}]}}}]
        if kind == "response.output_audio.delta":
            part = {"inlineData": {"mimeType": AUDIO_MIME, "data": event["delta"]}}
            return [{"serverContent": {"modelTurn": {"parts": [part]}}}]
        if kind == "response.output_audio_transcript.delta":
            return [{"serverContent": {"outputTranscription": {"text": event["delta"]}}}]
        if kind == "response.function_call_arguments.done":
            call = {"id": event.get("call_id"), "name": event.get("name"),
                    "args": json.loads(event.get("arguments") or "{}")}  # fmt: skip
            return [{"toolCall": {"functionCalls": [call]}}]
        if kind == "response.done":
            return _done(event.get("response") or {})
        if kind == "error":
            raise _Failed(str((event.get("error") or {}).get("message") or "error"))
        return []  # the Realtime API's bookkeeping, which Gemini does not send


class _Failed(Exception):
    """An error, which ends a Gemini session."""


def _done(response: dict[str, Any]) -> list[dict[str, Any]]:
    status = response.get("status")
    usage = _usage(response.get("usage") or {})
    if status == "cancelled":
        return [{"serverContent": {"interrupted": True}, "usageMetadata": usage}]
    if status == "failed":
        error = (response.get("status_details") or {}).get("error") or {}
        raise _Failed(str(error.get("message") or "the turn failed"))
    if any(item.get("type") == "function_call" for item in response.get("output") or []):
        return [{"usageMetadata": usage}]  # the turn goes on with the tool's response
    return [
        {"serverContent": {"generationComplete": True}},
        {"serverContent": {"turnComplete": True}, "usageMetadata": usage},
    ]


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    """A Realtime response's usage as Gemini's usageMetadata, by modality."""
    given = usage.get("input_token_details") or {}
    said = usage.get("output_token_details") or {}
    out: dict[str, Any] = {
        "promptTokenCount": usage.get("input_tokens", 0),
        "responseTokenCount": usage.get("output_tokens", 0),
        "totalTokenCount": usage.get("total_tokens", 0),
        "promptTokensDetails": _modalities(given),
        "responseTokensDetails": _modalities(said),
    }
    if given.get("cached_tokens"):
        out["cachedContentTokenCount"] = given["cached_tokens"]
    return out


def _modalities(details: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"modality": modality, "tokenCount": details[key]}
        for modality, key in (("TEXT", "text_tokens"), ("AUDIO", "audio_tokens"))
        if details.get(key)
    ]


def _session_update(setup: dict[str, Any]) -> dict[str, Any]:
    """The setup as the Realtime session's settings."""
    config = _get(setup, "generationConfig") or {}
    modalities = [str(m).upper() for m in _get(config, "responseModalities") or ["TEXT"]]
    if modalities not in (["TEXT"], ["AUDIO"]):
        raise Unsupported.for_field("setup.generationConfig.responseModalities",
                                    'is ["TEXT"] or ["AUDIO"]')  # fmt: skip
    session: dict[str, Any] = {"type": "realtime", "output_modalities": [modalities[0].lower()]}
    instruction = _get(setup, "systemInstruction")
    if instruction is not None:
        session["instructions"] = _text(instruction)
    if (temperature := _get(config, "temperature")) is not None:
        session["temperature"] = temperature
    if (limit := _get(config, "maxOutputTokens")) is not None:
        session["max_output_tokens"] = limit
    tools = [
        {"type": "function", "name": f.get("name"), "description": f.get("description", ""),
         "parameters": _get(f, "parametersJsonSchema") or f.get("parameters") or {}}
        for tool in setup.get("tools") or []
        for f in _get(tool, "functionDeclarations") or []
    ]  # fmt: skip
    if tools:
        session["tools"] = tools
    return {"type": "session.update", "session": session}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = _get(content, "parts") or []
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))


def _client_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One Gemini client message as the Realtime client events it means."""
    if (content := _get(message, "clientContent")) is not None:
        events = [_turn(turn) for turn in _get(content, "turns") or []]
        if _get(content, "turnComplete"):
            events.append({"type": "response.create"})
        return events
    if (given := _get(message, "realtimeInput")) is not None:
        for field in ("audio", "video", "mediaChunks"):
            if _get(given, field) is not None:
                raise Unsupported.for_field(f"realtimeInput.{field}", "is not served: send text")
        text = _get(given, "text")
        if text is None:
            return []  # activity marks and the end of an audio stream: nothing to do
        return [_turn({"role": "user", "parts": [{"text": text}]}), {"type": "response.create"}]
    if (response := _get(message, "toolResponse")) is not None:
        outputs = [
            {"type": "conversation.item.create", "item": {
                "type": "function_call_output", "call_id": r.get("id") or "",
                "output": json.dumps(r.get("response") or {})}}
            for r in _get(response, "functionResponses") or []
        ]  # fmt: skip
        return [*outputs, {"type": "response.create"}]
    if "setup" in message:
        raise InvalidArgument.for_field("setup", "is the first message only")
    raise InvalidArgument(
        "a message is one of clientContent, realtimeInput and toolResponse",
        {"field": "message"},
    )


def _turn(turn: Any) -> dict[str, Any]:
    role = "assistant" if _get(turn, "role") == "model" else "user"
    kind = "output_text" if role == "assistant" else "input_text"
    content = [{"type": kind, "text": _text(turn)}]
    return {"type": "conversation.item.create",
            "item": {"type": "message", "role": role, "content": content}}  # fmt: skip
