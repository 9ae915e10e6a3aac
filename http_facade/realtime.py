"""OpenAI's Realtime API (`GET /v1/realtime?model=` upgraded), text sessions over every
model of the catalog.

The session holds the conversation (its items in the Realtime API's form) and its
settings (`session.update`); each `response.create` runs the conversation as one
streamed Responses request (the same handler as `POST /v1/responses`, so the same
admission, model allowlist, rate limits, budget reserved per response, guardrails on
the text, and one ledger row per response, written when the response ends whatever
the client does next), and its events are written as the Realtime API's:
`response.created`, `response.output_item.added`, `conversation.item.added`,
`response.content_part.added`, `response.output_text.delta`…`.done`,
`response.function_call_arguments.delta`…`.done`, `response.output_item.done`,
`conversation.item.done`, and `response.done` with the usage split as the Realtime API
splits it (text, audio, cached). A function call's output goes back as a
`function_call_output` item, as the API has it.

Audio: `input_audio_buffer.append`…`commit` (PCM16 at 24 kHz, `audio/pcm`) makes a
user message of an `input_audio` part, which the model hears as its transcript
(`conversation.item.input_audio_transcription.completed` when transcription is on);
an `audio` output modality answers with `response.output_audio.delta` (PCM16) and
`response.output_audio_transcript.delta`…`.done` beside it. Both go to the pipeline
as the request's `realtime_audio` (the audio tokens heard, the answer spoken), which
only a provider that speaks takes (the simulated provider: server/base/realtime_audio.py);
elsewhere the response is refused naming `realtime_audio`. Refused by name: other
audio formats, server-side turn detection (the client commits), audio with text in
one response's modalities.

A model whose upstream serves the Realtime API itself (OpenAI, Azure OpenAI) has its
sessions relayed there instead, events as written (http_facade/realtime_relay.py).

The upgrade is checked before the socket opens: the key (401), the model (400 when
missing, 404 unknown, 403 outside the key's allowlist), the sessions the key and the
instance may hold (429), the mode turned on (426). The key may come in
`Authorization`, `api-key`, or the browser's subprotocol
`openai-insecure-api-key.<key>`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid
from collections.abc import AsyncGenerator, Awaitable, Iterable
from typing import Any

import orjson
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from starlette.routing import WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from http_facade import codec
from http_facade.backends import Backend
from http_facade.bindings import Rpc, bindings
from http_facade.context import Exchange
from http_facade.errors import internal
from http_facade.realtime_relay import Relay
from http_facade.sockets import (
    Closed,
    Finished,
    Frames,
    Sessions,
    error_event,
    exchange_of,
    serve_session,
    upgrade_required,
)
from server.application.realtime_relay import RealtimeRelays
from server.base import realtime_audio as audio
from server.base.config import ServerConfig
from server.base.errors import GatewayError, InvalidArgument, Unsupported
from server.base.pipeline import Encoded

# The Responses stream's terminal events, and the Realtime status each becomes.
_ENDS = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
# Session settings a session.update may set (the rest of OpenAI's are refused).
_SETTINGS = frozenset(
    {"type", "model", "instructions", "tools", "tool_choice", "output_modalities",
     "max_output_tokens", "temperature", "tracing", "prompt", "include", "audio"}
)  # fmt: skip
# The one audio format served, both ways.
PCM = {"type": "audio/pcm", "rate": audio.RATE}
# Audio a session's buffer holds before a commit, at most (OpenAI's bound of one append).
MAX_BUFFERED_BYTES = 15 * 1024 * 1024
# The spoken answer's audio goes out in deltas of this many bytes (a quarter second).
AUDIO_DELTA_BYTES = audio.BYTES_PER_SECOND // 4


class RealtimeSocket:
    def __init__(
        self,
        stream_rpc: Rpc,
        model_rpc: Rpc,
        backend: Backend,
        settings: ServerConfig,
        sessions: Sessions,
        relays: RealtimeRelays | None = None,
    ) -> None:
        self.rpc = stream_rpc
        self.model_rpc = model_rpc
        self.backend = backend
        self.settings = settings
        self.sessions = sessions
        # Where sessions on a model whose upstream serves the Realtime API are relayed
        # (in-process only: an edge tier serves every session itself).
        self.relays = relays

    @classmethod
    def over(
        cls,
        served: Iterable[MethodDescriptor],
        backend: Backend,
        settings: ServerConfig,
        sessions: Sessions,
        relays: RealtimeRelays | None = None,
    ) -> RealtimeSocket | None:
        """The sessions over the served RPCs (streamed Responses, and GetModel to check
        the upgrade); None when either is not served."""
        by_name = {b.rpc.descriptor.full_name: b for b in bindings(served)}
        create = by_name.get("gateway.v1.ResponsesService.CreateResponse")
        model = by_name.get("gateway.v1.ModelService.GetModel")
        if create is None or create.stream_rpc is None or model is None:
            return None
        return cls(create.stream_rpc, model.rpc, backend, settings, sessions, relays)

    def route(self) -> WebSocketRoute:
        return WebSocketRoute("/v1/realtime", self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.serve(WebSocket(scope, receive, send), send)

    async def serve(self, websocket: WebSocket, send: Send) -> None:
        if not self.settings.websockets.realtime:
            await websocket.send_denial_response(upgrade_required("The Realtime API"))
            return
        exchange = exchange_of(websocket, self.rpc.forwarded_headers)
        model = websocket.query_params.get("model", "")
        await serve_session(
            websocket, send, self.settings, self.sessions, exchange,
            lambda: self.admit(exchange, model, "the query"),
            lambda session: self.converse(session, exchange, model),
        )  # fmt: skip

    async def admit(self, exchange: Exchange, model: str, where: str) -> None:
        """The key, and the model as the key may use it (a GatewayError refuses the
        session); `where` the model is asked for."""
        if not model:
            raise InvalidArgument.for_field("model", f"is required in {where}")
        asked = self.model_rpc.request_type()
        codec.set_field(asked, "model", model)
        await self.backend.unary(self.model_rpc, asked, exchange)

    def converse(self, frames: Frames, exchange: Exchange, model: str) -> Awaitable[None]:
        """The session over `frames`: relayed to the model's upstream when it serves
        the Realtime API, else served here."""
        target = self.relays.target(model) if self.relays is not None else None
        if self.relays is not None and target is not None:
            return Relay(self.relays, target, frames, exchange, model).run()
        return _Conversation(self, frames, exchange, model).run()


class _Conversation:
    def __init__(
        self, socket: RealtimeSocket, session: Frames, exchange: Exchange, model: str
    ) -> None:
        self.socket = socket
        self.session = session
        self.exchange = exchange
        self.id = f"sess_{uuid.uuid4().hex[:24]}"
        self.settings: dict[str, Any] = {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": model,
            "output_modalities": ["text"],
            "instructions": "",
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
            "audio": {
                "input": {"format": PCM, "transcription": None, "turn_detection": None},
                "output": {"format": PCM, "voice": "alloy", "speed": 1.0},
            },
        }
        self.items: list[dict[str, Any]] = []
        # The input audio buffer, and each committed audio item's id -> what the model
        # hears in it and its audio tokens.
        self.buffer = bytearray()
        self.heard: dict[str, tuple[str, int]] = {}
        # Frames that came while a response ran, taken after it.
        self.later: list[dict[str, Any]] = []
        # Event ids: the session's own prefix and a count (unique, and no random
        # draw per event).
        self._event_prefix = f"event_{uuid.uuid4().hex[:12]}"
        self._events = 0

    async def send(self, event: dict[str, Any]) -> None:
        self._events += 1
        await self.session.send({"event_id": f"{self._event_prefix}{self._events:x}", **event})

    async def run(self) -> None:
        try:
            await self.send({"type": "session.created", "session": self.settings})
            while True:
                frame = self.later.pop(0) if self.later else await self.session.receive()
                try:
                    await self._take(frame)
                except GatewayError as error:
                    await self.send(error_event(error, client_event_id=frame.get("event_id")))
        except Closed:
            return

    async def _take(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "session.update":
            self._update(frame.get("session"))
            await self.send({"type": "session.updated", "session": self.settings})
        elif kind == "conversation.item.create":
            item = self._item(frame.get("item"), "item")
            previous = self.items[-1]["id"] if self.items else None
            self.items.append(item)
            for name in ("conversation.item.added", "conversation.item.done"):
                await self.send({"type": name, "previous_item_id": previous, "item": item})
        elif kind == "conversation.item.delete":
            item_id = frame.get("item_id")
            before = len(self.items)
            self.items = [i for i in self.items if i["id"] != item_id]
            if len(self.items) == before:
                raise InvalidArgument.for_field("item_id", f"no item {item_id!r} in the session")
            await self.send({"type": "conversation.item.deleted", "item_id": item_id})
        elif kind == "response.create":
            await self._respond(frame.get("response") or {})
        elif kind == "response.cancel":
            return  # no response is running: nothing to cancel
        elif kind == "input_audio_buffer.append":
            self._append(frame.get("audio"))
        elif kind == "input_audio_buffer.clear":
            self.buffer.clear()
            await self.send({"type": "input_audio_buffer.cleared"})
        elif kind == "input_audio_buffer.commit":
            await self._commit()
        else:
            raise InvalidArgument.for_field("type", f"unknown client event {kind!r}")

    def _update(self, changes: Any) -> None:
        if not isinstance(changes, dict):
            raise InvalidArgument.for_field("session", "must be an object")
        for key, value in changes.items():
            if key not in _SETTINGS:
                raise Unsupported.for_field(f"session.{key}", "is not supported by this gateway")
            if key == "model" and value != self.settings["model"]:
                raise InvalidArgument.for_field("session.model", "is set by the URL's model")
            if key == "output_modalities":
                _modalities(value, "session.output_modalities")
            if key == "audio":
                self.settings["audio"] = _audio_settings(value, self.settings["audio"])
            if key in ("tools", "tool_choice", "instructions", "max_output_tokens",
                       "output_modalities", "temperature"):  # fmt: skip
                self.settings[key] = value

    def _append(self, given: Any) -> None:
        if not isinstance(given, str):
            raise InvalidArgument.for_field("audio", "must be base64 of PCM16 audio")
        try:
            pcm = base64.b64decode(given, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument.for_field("audio", "is not valid base64") from None
        if len(self.buffer) + len(pcm) > MAX_BUFFERED_BYTES:
            raise InvalidArgument.for_field(
                "audio", f"the buffer holds at most {MAX_BUFFERED_BYTES} bytes before a commit"
            )
        self.buffer += pcm

    async def _commit(self) -> None:
        """The buffer becomes a user message the model hears as its transcript."""
        if audio.duration_ms(len(self.buffer)) < audio.MS_PER_INPUT_TOKEN:
            raise InvalidArgument.for_field(
                "audio", f"the buffer holds {audio.duration_ms(len(self.buffer))} ms of "
                f"audio; a commit needs at least {audio.MS_PER_INPUT_TOKEN} ms",
            )  # fmt: skip
        pcm = bytes(self.buffer)
        self.buffer.clear()
        transcript = audio.heard(pcm)
        transcribing = self.settings["audio"]["input"].get("transcription") is not None
        item: dict[str, Any] = {
            "id": f"item_{uuid.uuid4().hex[:24]}", "object": "realtime.item",
            "type": "message", "status": "completed", "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }  # fmt: skip
        self.heard[item["id"]] = (transcript, audio.input_tokens(len(pcm)))
        previous = self.items[-1]["id"] if self.items else None
        self.items.append(item)
        await self.send({"type": "input_audio_buffer.committed",
                         "previous_item_id": previous, "item_id": item["id"]})  # fmt: skip
        for name in ("conversation.item.added", "conversation.item.done"):
            await self.send({"type": name, "previous_item_id": previous, "item": item})
        if transcribing:
            item["content"][0]["transcript"] = transcript
            await self.send({
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item["id"], "content_index": 0, "transcript": transcript,
                "usage": {"type": "duration", "seconds": audio.duration_ms(pcm) / 1000},
            })  # fmt: skip

    def _item(self, item: Any, where: str) -> dict[str, Any]:
        """A client's conversation item, checked, with an id."""
        if not isinstance(item, dict):
            raise InvalidArgument.for_field(where, "must be an object")
        kind = item.get("type")
        if kind == "message":
            for n, part in enumerate(item.get("content") or []):
                if not isinstance(part, dict) or part.get("type") not in (
                    "input_text", "output_text", "text", "output_audio"
                ):  # fmt: skip
                    raise Unsupported.for_field(
                        f"{where}.content[{n}].type",
                        "only text parts are served in an item (audio comes through "
                        "input_audio_buffer)",
                    )
        elif kind not in ("function_call", "function_call_output"):
            raise InvalidArgument.for_field(f"{where}.type", f"unknown item type {kind!r}")
        return {"id": item.get("id") or f"item_{uuid.uuid4().hex[:24]}",
                "object": "realtime.item", "status": "completed", **item}  # fmt: skip

    async def _respond(self, asked: dict[str, Any]) -> None:
        settings = {**self.settings, **{k: v for k, v in asked.items() if k in _SETTINGS}}
        spoken = _modalities(settings.get("output_modalities"), "response.output_modalities")
        into_conversation = asked.get("conversation", "auto") != "none"
        items = (
            [self._item(i, f"response.input[{n}]") for n, i in enumerate(asked["input"])]
            if isinstance(asked.get("input"), list)
            else self.items
        )
        message = self._request(settings, items)
        message.realtime_audio.output_audio = spoken
        message.realtime_audio.input_audio_tokens = sum(
            self.heard[i["id"]][1] for i in items if i["id"] in self.heard
        )
        chunks = self.socket.backend.stream(self.socket.rpc, message, self.exchange)
        translate = _Translation(self, settings, into_conversation, spoken)
        # The response runs while the client's frames are read: `response.cancel` ends
        # it; any other frame is taken once it is over, in order.
        work = asyncio.ensure_future(self._stream(chunks, translate))
        try:
            while not work.done():
                reading = asyncio.ensure_future(self.session.receive())
                done, _ = await asyncio.wait({work, reading}, return_when=asyncio.FIRST_COMPLETED)
                if reading not in done:
                    reading.cancel()
                    await asyncio.gather(reading, return_exceptions=True)
                    break
                if isinstance(reading.exception(), Finished):
                    await work  # the client reads on: the response ends first
                    raise Finished
                frame = reading.result()
                if frame.get("type") != "response.cancel":
                    self.later.append(frame)
                    continue
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                if translate.started:
                    await translate.cancelled()
                return
            work.result()
        finally:
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)

    async def _stream(self, chunks: AsyncGenerator[Message, None], translate: _Translation) -> None:
        try:
            async for chunk in chunks:
                await self.session.check()
                if type(chunk) is Encoded:
                    for data in chunk.events:
                        await translate.event(orjson.loads(data))
                else:
                    await translate.event(codec.to_dict(chunk))
        except GatewayError as error:
            # Before its first event nothing started: the error alone says why.
            if translate.started:
                await translate.failed(error)
            raise
        except (Closed, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise internal(exc, self.exchange.request_id) from None
        finally:
            await chunks.aclose()

    def _request(self, settings: dict[str, Any], items: list[dict[str, Any]]) -> Message:
        payload: dict[str, Any] = {
            "model": settings["model"],
            "input": [_as_input(i, self.heard) for i in items],
            "stream": True,
            "store": False,
        }
        if settings.get("instructions"):
            payload["instructions"] = settings["instructions"]
        if settings.get("tools"):
            payload["tools"] = settings["tools"]
            payload["tool_choice"] = settings.get("tool_choice", "auto")
        limit = settings.get("max_output_tokens")
        if isinstance(limit, int):
            payload["max_output_tokens"] = limit
        if settings.get("temperature") is not None:
            payload["temperature"] = settings["temperature"]
        message = self.socket.rpc.request_type()
        codec.from_dict(payload, message, strict=self.socket.rpc.strict)
        return message


def _modalities(modalities: Any, field: str) -> bool:
    """Whether the answer is spoken: `["audio"]` (its transcript beside it) or
    `["text"]`, as the Realtime API takes them."""
    if modalities is None:
        return False
    if modalities not in (["text"], ["audio"]):
        raise Unsupported.for_field(field, 'is ["text"] or ["audio"]')
    return modalities == ["audio"]


def _audio_settings(given: Any, current: dict[str, Any]) -> dict[str, Any]:
    """A session.update's `audio`, over the session's: PCM both ways, no server-side
    turn detection, transcription on or off."""
    if not isinstance(given, dict):
        raise InvalidArgument.for_field("session.audio", "must be an object")
    merged = {side: dict(current[side]) for side in ("input", "output")}
    for side, changes in given.items():
        if side not in merged or not isinstance(changes, dict):
            raise InvalidArgument.for_field(f"session.audio.{side}", "is input or output, objects")
        for key, value in changes.items():
            where = f"session.audio.{side}.{key}"
            if key == "format":
                kind = value.get("type") if isinstance(value, dict) else None
                rate = value.get("rate", audio.RATE) if isinstance(value, dict) else None
                if kind != "audio/pcm" or rate != audio.RATE:
                    raise Unsupported.for_field(where, f"only audio/pcm at {audio.RATE} Hz")
                value = PCM
            elif key == "turn_detection" and side == "input":
                if value is not None:
                    raise Unsupported.for_field(
                        where, "is null: commit the buffer with input_audio_buffer.commit"
                    )
            elif key == "transcription" and side == "input":
                if value is not None and not isinstance(value, dict):
                    raise InvalidArgument.for_field(where, "must be an object or null")
            elif key not in ("voice", "speed", "noise_reduction"):
                raise Unsupported.for_field(where, "is not supported by this gateway")
            merged[side][key] = value
    return merged


def _as_input(item: dict[str, Any], heard: dict[str, tuple[str, int]]) -> dict[str, Any]:
    """A Realtime conversation item as a Responses input item."""
    kind = item["type"]
    if kind == "function_call":
        return {"type": "function_call", "call_id": item.get("call_id", ""),
                "name": item.get("name", ""), "arguments": item.get("arguments", "")}  # fmt: skip
    if kind == "function_call_output":
        return {"type": "function_call_output", "call_id": item.get("call_id", ""),
                "output": item.get("output", "")}  # fmt: skip
    role = item.get("role", "user")
    text_kind = "output_text" if role == "assistant" else "input_text"
    parts = [
        {"type": text_kind, "text": part.get("text") or part.get("transcript") or ""}
        for part in item.get("content") or []
    ]
    if item["id"] in heard:  # what the model hears in a committed audio buffer
        parts = [{"type": "input_text", "text": heard[item["id"]][0]}]
    return {"type": "message", "role": role, "content": parts}


class _Translation:
    """One response's Responses events, written as the Realtime API's."""

    def __init__(
        self,
        conversation: _Conversation,
        settings: dict[str, Any],
        into_conversation: bool,
        spoken: bool,
    ) -> None:
        self.conversation = conversation
        self.settings = settings
        self.into_conversation = into_conversation
        # A spoken answer: its text is the transcript, its audio the simulated voice.
        self.spoken = spoken
        self.started = False
        self.response_id = ""
        self.output: list[dict[str, Any]] = []
        # Function call item id -> its call_id, which the Realtime API's argument
        # events carry and the Responses API's do not.
        self.calls: dict[str, str] = {}

    async def send(self, event: dict[str, Any]) -> None:
        await self.conversation.send(event)

    def _response(self, status: str, **more: Any) -> dict[str, Any]:
        return {
            "object": "realtime.response",
            "id": self.response_id,
            "status": status,
            "conversation_id": self.conversation.id if self.into_conversation else None,
            "output_modalities": ["audio"] if self.spoken else ["text"],
            "max_output_tokens": self.settings.get("max_output_tokens", "inf"),
            "output": self.output,
            **more,
        }

    async def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        where = {
            "response_id": self.response_id,
            "item_id": event.get("item_id"),
            "output_index": event.get("output_index", 0),
        }
        if kind == "response.created":
            self.started = True
            self.response_id = event["response"]["id"]
            await self.send({"type": "response.created", "response": self._response("in_progress")})
        elif kind == "response.output_item.added":
            item = _as_item(event["item"], "in_progress", self.spoken)
            if item["type"] == "function_call":
                self.calls[str(item["id"])] = str(item["call_id"])
            await self.send({"type": "response.output_item.added", "response_id": self.response_id,
                             "output_index": event.get("output_index", 0), "item": item})  # fmt: skip
            if self.into_conversation:
                await self.send({"type": "conversation.item.added", "item": item})
        elif kind == "response.content_part.added":
            await self.send({"type": "response.content_part.added", **where,
                             "content_index": event.get("content_index", 0),
                             "part": self._part("")})  # fmt: skip
        elif kind == "response.output_text.delta":
            name = "output_audio_transcript" if self.spoken else "output_text"
            await self.send({"type": f"response.{name}.delta", **where,
                             "content_index": event.get("content_index", 0),
                             "delta": event.get("delta", "")})  # fmt: skip
        elif kind == "response.output_text.done":
            at = {**where, "content_index": event.get("content_index", 0)}
            if self.spoken:
                await self._speak(at, event.get("text", ""))
            else:
                await self.send({"type": "response.output_text.done", **at,
                                 "text": event.get("text", "")})  # fmt: skip
        elif kind == "response.content_part.done":
            part = event.get("part") or {}
            await self.send({"type": "response.content_part.done", **where,
                             "content_index": event.get("content_index", 0),
                             "part": self._part(part.get("text", ""))})  # fmt: skip
        elif kind in ("response.function_call_arguments.delta",
                      "response.function_call_arguments.done"):  # fmt: skip
            body: dict[str, Any] = {
                k: event[k] for k in ("delta", "arguments", "name") if k in event
            }
            await self.send({"type": kind, **where, "call_id": self._call_id(event), **body})
        elif kind == "response.output_item.done":
            item = _as_item(event["item"], "completed", self.spoken)
            self.output.append(item)
            await self.send({"type": "response.output_item.done", "response_id": self.response_id,
                             "output_index": event.get("output_index", 0), "item": item})  # fmt: skip
            if self.into_conversation:
                self.conversation.items.append(item)
                await self.send({"type": "conversation.item.done", "item": item})
        elif kind in _ENDS:
            response = event.get("response") or {}
            done = self._response(
                _ENDS[kind], usage=_usage(response.get("usage") or {}),
                status_details=_details(response), metadata=response.get("metadata"),
            )  # fmt: skip
            await self.send({"type": "response.done", "response": done})

    def _part(self, text: str) -> dict[str, Any]:
        return (
            {"type": "audio", "transcript": text} if self.spoken else {"type": "text", "text": text}
        )

    async def _speak(self, at: dict[str, Any], transcript: str) -> None:
        """The spoken answer's audio (the simulated voice, server/base/realtime_audio.py), then
        the ends of its audio and its transcript."""
        pcm = audio.tone(transcript)
        for start in range(0, len(pcm), AUDIO_DELTA_BYTES):
            chunk = base64.b64encode(pcm[start : start + AUDIO_DELTA_BYTES]).decode()
            await self.send({"type": "response.output_audio.delta", **at, "delta": chunk})
        await self.send({"type": "response.output_audio.done", **at})
        await self.send({"type": "response.output_audio_transcript.done", **at,
                         "transcript": transcript})  # fmt: skip

    def _call_id(self, event: dict[str, Any]) -> str:
        return self.calls.get(str(event.get("item_id")), "")

    async def cancelled(self) -> None:
        details = {"type": "cancelled", "reason": "client_cancelled"}
        done = self._response("cancelled", status_details=details)
        await self.send({"type": "response.done", "response": done})

    async def failed(self, error: GatewayError) -> None:
        done = self._response("failed", status_details={
            "type": "failed", "error": {"type": error.reason.lower(), "code": error.reason.lower(),
                                        "message": error.message}})  # fmt: skip
        await self.send({"type": "response.done", "response": done})


def _as_item(item: dict[str, Any], status: str, spoken: bool) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "function_call":
        return {"id": item.get("id"), "object": "realtime.item", "type": "function_call",
                "status": status, "call_id": item.get("call_id"), "name": item.get("name"),
                "arguments": item.get("arguments", "")}  # fmt: skip
    parts = [
        {"type": "output_audio", "transcript": p.get("text", "")}
        if spoken
        else {"type": "output_text", "text": p.get("text", "")}
        for p in item.get("content") or []
        if p.get("type") == "output_text"
    ]
    return {"id": item.get("id"), "object": "realtime.item", "type": "message",
            "status": status, "role": "assistant", "content": parts}  # fmt: skip


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    """The Responses usage as the Realtime API splits it: text and audio apart (the
    cached tokens are text: the gateway's audio is never read from a prompt cache)."""
    inputs = int(usage.get("input_tokens") or 0)
    outputs = int(usage.get("output_tokens") or 0)
    input_details = usage.get("input_tokens_details") or {}
    cached = int(input_details.get("cached_tokens") or 0)
    heard = int(input_details.get("audio_tokens") or 0)
    spoken = int((usage.get("output_tokens_details") or {}).get("audio_tokens") or 0)
    return {
        "total_tokens": inputs + outputs,
        "input_tokens": inputs,
        "output_tokens": outputs,
        "input_token_details": {
            "text_tokens": inputs - heard, "audio_tokens": heard, "image_tokens": 0,
            "cached_tokens": cached,
            "cached_tokens_details": {"text_tokens": cached, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": outputs - spoken, "audio_tokens": spoken},
    }  # fmt: skip


def _details(response: dict[str, Any]) -> dict[str, Any] | None:
    status = response.get("status")
    if status == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return {"type": "incomplete", "reason": reason}
    if status == "failed":
        return {"type": "failed", "error": response.get("error")}
    return None
