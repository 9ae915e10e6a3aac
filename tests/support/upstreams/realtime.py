"""OpenAI's Realtime API over WebSocket, strict as the real service, on a loopback port:
a real `websockets` server. OpenAI's path is `/v1/realtime?model=` with the key as
`Authorization: Bearer`; Azure's is `/openai/realtime?api-version=&deployment=` with
the key in `api-key`. A wrong path is a 404 and a wrong or missing key a 401, before
the socket opens, as the real services answer. Once open, it speaks the GA protocol:
`session.created` first; `session.update` needs `session.type` `realtime` and a model,
when given, that is its own; a conversation item needs its type, role and typed parts;
audio appended must be base64; a client event of an unknown type is an error event.
Each `response.create` is answered with `response.created`, the text in deltas (or
its transcript and audio, for an audio response), and `response.done` with USAGE
(text, audio and cached tokens apart, as OpenAI reports them); with server-side turn
detection on, appended audio ends a turn and is answered so without a
`response.create`."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from tests.support.upstreams.checks import KEY

MODEL = "gpt-fake"
DEPLOYMENT = "gpt-fake-deployment"
API_VERSION = "2025-04-01-preview"
# One response's usage: 120 tokens in (80 text, 40 audio; 64 of them cached, 48 text
# and 16 audio), 30 out (10 text, 20 audio).
USAGE = {
    "total_tokens": 150, "input_tokens": 120, "output_tokens": 30,
    "input_token_details": {
        "text_tokens": 80, "audio_tokens": 40, "image_tokens": 0, "cached_tokens": 64,
        "cached_tokens_details": {"text_tokens": 48, "audio_tokens": 16, "image_tokens": 0},
    },
    "output_token_details": {"text_tokens": 10, "audio_tokens": 20},
}  # fmt: skip
ANSWER = ("Hello", " from", " upstream")
CLIENT_EVENTS = frozenset({
    "session.update", "conversation.item.create", "conversation.item.retrieve",
    "conversation.item.truncate", "conversation.item.delete", "input_audio_buffer.append",
    "input_audio_buffer.commit", "input_audio_buffer.clear", "output_audio_buffer.clear",
    "response.create", "response.cancel",
})  # fmt: skip


@dataclass
class RealtimeUpstream:
    """The fake; `azure` serves Azure's path and key header instead of OpenAI's."""

    azure: bool = False
    url: str = ""
    # The headers of each upgrade taken, every client frame, and what it refused.
    upgrades: list[dict[str, str]] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Every event sent, in order.
    sent: list[dict[str, Any]] = field(default_factory=list)
    # Set: a response's `response.done` waits for it (cleared: no wait).
    hold: asyncio.Event | None = None
    # The text of every answer, in its deltas.
    answer: tuple[str, ...] = ANSWER
    _responses: int = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[RealtimeUpstream]:
        async with serve(self._session, "127.0.0.1", 0, process_request=self._check) as server:
            port = server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            yield self

    def _check(self, connection: ServerConnection, request: Request) -> Response | None:
        url = urlsplit(request.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        headers = {k.lower(): v for k, v in request.headers.raw_items()}
        if self.azure:
            where = url.path == "/openai/realtime" and query.get("deployment") == DEPLOYMENT
            where = where and query.get("api-version") == API_VERSION
            signed = headers.get("api-key") == KEY
        else:
            where = url.path == "/v1/realtime" and query.get("model") == MODEL
            signed = headers.get("authorization") == f"Bearer {KEY}"
        if not where:
            self.problems.append(f"wrong path {request.path}")
            return _refusal(connection, HTTPStatus.NOT_FOUND, "Not found")
        if not signed:
            self.problems.append("bad credential")
            return _refusal(connection, HTTPStatus.UNAUTHORIZED, "Incorrect API key provided")
        self.upgrades.append(headers)
        return None

    async def _session(self, ws: ServerConnection) -> None:
        session = {"type": "realtime", "object": "realtime.session", "id": "sess_up",
                   "model": MODEL, "output_modalities": ["text"], "instructions": ""}  # fmt: skip
        await self._send(ws, {"type": "session.created", "session": session})
        items = 0
        async for message in ws:
            frame = json.loads(message)
            self.frames.append(frame)
            kind = frame.get("type")
            problem = self._problem(frame)
            if problem is not None:
                self.problems.append(problem)
                await self._send(ws, {"type": "error", "error": {
                    "type": "invalid_request_error", "code": "invalid_value",
                    "message": problem, "event_id": frame.get("event_id")}})  # fmt: skip
            elif kind == "session.update":
                session = {**session, **frame["session"]}
                await self._send(ws, {"type": "session.updated", "session": session})
            elif kind == "conversation.item.create":
                items += 1
                item = {"id": f"item_up{items}", "object": "realtime.item", "status": "completed",
                        **frame["item"]}  # fmt: skip
                for name in ("conversation.item.added", "conversation.item.done"):
                    await self._send(ws, {"type": name, "item": item})
            elif kind == "response.create":
                audio = (frame.get("response") or {}).get("output_modalities") == ["audio"]
                await self._respond(ws, audio)
            elif kind == "input_audio_buffer.append" and _detects_turns(session):
                # Server-side turn detection: the speech heard ends a turn, answered.
                await self._send(ws, {"type": "input_audio_buffer.committed",
                                      "item_id": f"item_heard{len(self.frames)}"})  # fmt: skip
                await self._respond(ws, False)

    def _problem(self, frame: dict[str, Any]) -> str | None:
        kind = frame.get("type")
        if kind not in CLIENT_EVENTS:
            return f"Invalid value: '{kind}'. Supported values are: {sorted(CLIENT_EVENTS)}"
        if kind == "session.update":
            session = frame.get("session")
            if not isinstance(session, dict) or session.get("type") != "realtime":
                return "Missing required parameter: 'session.type'."
            if "model" in session and session["model"] != MODEL:
                return f"Invalid value: 'session.model' {session['model']!r}"
        if kind == "conversation.item.create":
            item = frame.get("item")
            if not isinstance(item, dict) or item.get("type") not in (
                "message", "function_call", "function_call_output"
            ):  # fmt: skip
                return "Missing required parameter: 'item.type'."
            if item["type"] == "message":
                parts = item.get("content")
                if item.get("role") not in ("user", "assistant", "system") or not parts:
                    return "Missing required parameter: 'item.role' or 'item.content'."
                if any(p.get("type") not in ("input_text", "input_audio", "text") for p in parts):
                    return "Invalid value: 'item.content[].type'."
        if kind == "input_audio_buffer.append":
            try:
                base64.b64decode(frame.get("audio") or "", validate=True)
            except (binascii.Error, ValueError):
                return "Invalid 'audio'. Expected base64-encoded audio bytes."
        return None

    async def _respond(self, ws: ServerConnection, audio: bool) -> None:
        self._responses += 1
        rid, iid = f"resp_up{self._responses}", f"item_out{self._responses}"
        at = {"response_id": rid, "item_id": iid, "output_index": 0, "content_index": 0}
        text = "".join(self.answer)
        part = {"type": "output_audio", "transcript": text} if audio else {
            "type": "output_text", "text": text}  # fmt: skip
        item = {"id": iid, "object": "realtime.item", "type": "message", "status": "completed",
                "role": "assistant", "content": [part]}  # fmt: skip
        response = {"object": "realtime.response", "id": rid, "status": "in_progress",
                    "output": [], "conversation_id": "conv_up",
                    "output_modalities": ["audio" if audio else "text"]}  # fmt: skip
        await self._send(ws, {"type": "response.created", "response": response})
        await self._send(ws, {"type": "response.output_item.added", "response_id": rid,
                              "output_index": 0, "item": {**item, "status": "in_progress",
                                                          "content": []}})  # fmt: skip
        await self._send(ws, {"type": "response.content_part.added", **at, "part": part})
        name = "response.output_audio_transcript" if audio else "response.output_text"
        for piece in self.answer:
            # `obfuscation`: a field of the upstream's own, which a relay keeps.
            await self._send(ws, {"type": f"{name}.delta", **at, "delta": piece,
                                  "obfuscation": "x1"})  # fmt: skip
        if audio:
            pcm = base64.b64encode(bytes(4800)).decode()
            await self._send(ws, {"type": "response.output_audio.delta", **at, "delta": pcm})
            await self._send(ws, {"type": "response.output_audio.done", **at})
            await self._send(ws, {"type": f"{name}.done", **at, "transcript": text})
        else:
            await self._send(ws, {"type": f"{name}.done", **at, "text": text})
        await self._send(ws, {"type": "response.content_part.done", **at, "part": part})
        await self._send(ws, {"type": "response.output_item.done", "response_id": rid,
                              "output_index": 0, "item": item})  # fmt: skip
        if self.hold is not None:
            await self.hold.wait()
        done = {**response, "status": "completed", "output": [item], "usage": USAGE}
        await self._send(ws, {"type": "response.done", "response": done})

    async def _send(self, ws: ServerConnection, event: dict[str, Any]) -> None:
        event = {"event_id": f"event_up{len(self.sent)}", **event}
        self.sent.append(event)
        await ws.send(json.dumps(event))


def _detects_turns(session: dict[str, Any]) -> bool:
    audio = session.get("audio") or {}
    return bool((audio.get("input") or {}).get("turn_detection"))


def _refusal(connection: ServerConnection, status: HTTPStatus, message: str) -> Response:
    body = json.dumps({"error": {"type": "invalid_request_error", "message": message}})
    response = connection.respond(status, body)
    response.headers["Content-Type"] = "application/json"
    return response


LIVE_PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
LIVE_MODEL = "models/gemini-fake"
# One Live turn's usageMetadata: 50 tokens in (30 text, 20 audio; 20 cached, 8 of them
# audio), 12 out.
LIVE_USAGE = {
    "promptTokenCount": 50, "responseTokenCount": 12, "totalTokenCount": 62,
    "cachedContentTokenCount": 20,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 30},
                            {"modality": "AUDIO", "tokenCount": 20}],
    "cacheTokensDetails": [{"modality": "TEXT", "tokenCount": 12},
                           {"modality": "AUDIO", "tokenCount": 8}],
    "responseTokensDetails": [{"modality": "TEXT", "tokenCount": 12}],
}  # fmt: skip


@dataclass
class LiveUpstream:
    """Gemini's Live API, strict: its path and `x-goog-api-key` (404 and 401 before the
    socket opens otherwise), `setup` first naming its own model (else it closes 1007),
    then each turn the client ends (`clientContent` with `turnComplete`,
    `realtimeInput.text`) answered with modelTurn text parts and a `turnComplete`
    carrying LIVE_USAGE."""

    url: str = ""
    upgrades: list[dict[str, str]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[LiveUpstream]:
        async with serve(self._session, "127.0.0.1", 0, process_request=self._check) as server:
            self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            yield self

    def _check(self, connection: ServerConnection, request: Request) -> Response | None:
        headers = {k.lower(): v for k, v in request.headers.raw_items()}
        if urlsplit(request.path).path != LIVE_PATH:
            self.problems.append(f"wrong path {request.path}")
            return _refusal(connection, HTTPStatus.NOT_FOUND, "Not found")
        if headers.get("x-goog-api-key") != KEY:
            self.problems.append("bad credential")
            return _refusal(connection, HTTPStatus.UNAUTHORIZED, "API key not valid")
        self.upgrades.append(headers)
        return None

    async def _session(self, ws: ServerConnection) -> None:
        async for raw in ws:
            message = json.loads(raw)
            self.messages.append(message)
            if len(self.messages) == 1:
                setup = message.get("setup")
                if not isinstance(setup, dict) or setup.get("model") != LIVE_MODEL:
                    self.problems.append(f"bad setup {message}")
                    await ws.close(1007, "setup must be first and name a model served")
                    return
                await ws.send(json.dumps({"setupComplete": {}}))
                continue
            content = message.get("clientContent") or message.get("client_content") or {}
            given = message.get("realtimeInput") or message.get("realtime_input") or {}
            if content.get("turnComplete") or content.get("turn_complete") or "text" in given:
                for piece in ANSWER:
                    await ws.send(
                        json.dumps({"serverContent": {"modelTurn": {"parts": [{"text": piece}]}}})
                    )
                await ws.send(json.dumps({"serverContent": {"generationComplete": True}}))
                await ws.send(json.dumps({"serverContent": {"turnComplete": True},
                                          "usageMetadata": LIVE_USAGE}))  # fmt: skip
