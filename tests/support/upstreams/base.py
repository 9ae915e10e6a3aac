"""A fake upstream HTTP server on loopback, with fault injection.

A raw ASGI app served by uvicorn in the test's event loop on an ephemeral port. Each
wire format's module beside this one (openai.py, responses.py, anthropic.py, gemini.py,
vertex.py, bedrock.py, azure.py, tgi.py) says how to answer; this module applies
the faults, records every request, and notes when a client closes its connection while
an answer is still in progress (to measure cancellation).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import uvicorn

FaultKind = Literal[
    "ok", "status", "slow_headers", "slow_body", "cut", "abort", "malformed", "hang"
]


class _QuietAborts(logging.Filter):
    """Drops uvicorn's traceback for the connection drops this module injects."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], InjectedAbort))


class InjectedAbort(ConnectionAbortedError):
    """Raised by the `abort` fault: uvicorn then drops the connection mid-body."""


logging.getLogger("uvicorn.error").addFilter(_QuietAborts())

TEXT = ("Hello", ",", " world", "!", " This", " is", " a", " fake", " reply", ".")


@dataclass
class Fault:
    """How to answer one request.

    ok            a whole, well-formed answer
    status        an error status with the wire format's error body (and Retry-After)
    slow_headers  `delay_s` before the status line, then ok
    slow_body     `delay_s` before each token, then ok
    cut           a stream that ends cleanly after `after_tokens` tokens, without its
                  terminal event (a unary answer: a body cut short, valid HTTP)
    abort         the connection dropped after `after_tokens` tokens (bad chunked body)
    malformed     200 with a body that is not valid JSON (a stream: an event whose data
                  is not JSON after `after_tokens` tokens)
    hang          never answers (until the client goes away)
    """

    kind: FaultKind = "ok"
    status: int = 500
    retry_after: str | None = None
    delay_s: float = 0.0
    after_tokens: int = 2


@dataclass
class Usage:
    prompt_tokens: int = 20
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    # Of the writes, those made to live an hour (formats with cache lifetimes).
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class Reply:
    """What the wire format will send for one request."""

    tokens: list[str]
    finish: str  # "stop" or "length", mapped to the format's own value
    usage: Usage


class Wire(Protocol):
    """One wire format's answers."""

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
        """The real API's answer to a request it refuses (checks.Refusal), or None."""
        ...

    def is_stream(self, path: str, body: dict[str, Any]) -> bool: ...

    def max_tokens(self, body: dict[str, Any]) -> int | None: ...

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        """Extra headers and the JSON answer."""
        ...

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        """SSE frames: before the tokens, one per token, after the tokens (terminal)."""
        ...

    def error(self, status: int) -> Any: ...


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    query: str = ""


def sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


@dataclass
class FakeUpstream:
    wire: Wire
    # Faults for the next requests, in order; then `pick()` when set, else `default`.
    faults: list[Fault] = field(default_factory=list)
    default: Fault = field(default_factory=Fault)
    pick: Callable[[], Fault] | None = None
    usage: Usage = field(default_factory=Usage)
    text: tuple[str, ...] = TEXT
    seen: list[Seen] = field(default_factory=list)
    # What the wire format refused in requests, as its real API would (checks.py).
    problems: list[str] = field(default_factory=list)
    # perf_counter() times at which a client closed a connection mid-answer.
    disconnects: list[float] = field(default_factory=list)
    # Requests being answered now, and the most there were at once.
    in_flight: int = 0
    peak_in_flight: int = 0
    port: int = 0
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def next_fault(self) -> Fault:
        if self.faults:
            return self.faults.pop(0)
        return self.pick() if self.pick is not None else self.default

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        # For wires that check a signature over the exact bytes (Bedrock's SigV4): a
        # key no HTTP header can have.
        headers[":body-sha256"] = hashlib.sha256(raw).hexdigest()
        # A wire that reads other bodies than JSON (multipart forms) parses its own.
        parse = getattr(self.wire, "parse", None)
        body = parse(headers, raw) if parse is not None else json.loads(raw) if raw else {}
        query = scope.get("query_string", b"").decode()
        self.seen.append(Seen(scope["path"], headers, body, query))
        fault = self.next_fault()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            # The wires see the path as sent (escapes kept, for signatures) and the query
            # (Azure's api-version).
            sent = scope.get("raw_path", b"").decode() or scope["path"]
            path = sent + (f"?{query}" if query else "")
            serve = asyncio.ensure_future(self._answer(path, headers, body, fault, send))
            watch = asyncio.ensure_future(receive())
            await asyncio.wait({serve, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not serve.done():
                self.disconnects.append(time.perf_counter())
                serve.cancel()
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            with suppress(asyncio.CancelledError):
                await serve
        finally:
            self.in_flight -= 1

    def _reply(self, body: dict[str, Any]) -> Reply:
        tokens, finish = list(self.text), "stop"
        limit = self.wire.max_tokens(body)
        if limit is not None and limit < len(tokens):
            tokens, finish = tokens[:limit], "length"
        return Reply(tokens, finish, self.usage)

    async def _answer(
        self, path: str, headers: dict[str, str], body: dict[str, Any], fault: Fault, send: Any
    ) -> None:
        # Every wire checks a request as its real API does: the credential, the fields
        # and their types; a request the API would refuse gets the API's own answer.
        refused = self.wire.refusal(path, headers, body)
        if refused is not None:
            self.problems.append(refused.why)
            if refused.text:
                await _send_text(send, refused.status, refused.body, refused.headers)
            else:
                await _send_json(send, refused.status, refused.body, refused.headers)
            return
        if fault.kind == "hang":
            await asyncio.Event().wait()
        if fault.kind == "slow_headers":
            await asyncio.sleep(fault.delay_s)
        if fault.kind == "status":
            extra = {"retry-after": fault.retry_after} if fault.retry_after else {}
            await _send_json(send, fault.status, self.wire.error(fault.status), extra)
            return
        reply = self._reply(body)
        if not self.wire.is_stream(path, body):
            await self._unary(path, body, reply, fault, send)
        else:
            await self._stream(path, body, reply, fault, send)

    async def _unary(
        self, path: str, body: dict[str, Any], reply: Reply, fault: Fault, send: Any
    ) -> None:
        extra, answer = self.wire.unary(path, body, reply)
        raw = json.dumps(answer).encode()
        if fault.kind == "malformed":
            raw = raw[: len(raw) // 2]
        if fault.kind == "slow_body":
            await _start(send, 200, "application/json", extra)
            for i in range(0, len(raw), 16):
                await asyncio.sleep(fault.delay_s)
                await send(
                    {"type": "http.response.body", "body": raw[i : i + 16], "more_body": True}
                )
            await send({"type": "http.response.body", "body": b""})
            return
        if fault.kind in ("cut", "abort"):
            await _start(send, 200, "application/json", extra)
            await send({"type": "http.response.body", "body": raw[:10], "more_body": True})
            if fault.kind == "abort":
                raise InjectedAbort("fault: connection dropped")
            await send({"type": "http.response.body", "body": b""})
            return
        await _start(send, 200, "application/json", {**extra, "content-length": str(len(raw))})
        await send({"type": "http.response.body", "body": raw})

    async def _stream(
        self, path: str, body: dict[str, Any], reply: Reply, fault: Fault, send: Any
    ) -> None:
        before, per_token, after = self.wire.stream(path, body, reply)
        kind = getattr(self.wire, "stream_content_type", "text/event-stream")
        await _start(send, 200, kind, {"cache-control": "no-cache"})

        async def emit(frame: bytes) -> None:
            await send({"type": "http.response.body", "body": frame, "more_body": True})

        for frame in before:
            await emit(frame)
        for sent, frame in enumerate(per_token):
            if fault.kind == "malformed" and sent == fault.after_tokens:
                await emit(b"data: {not json\n\n")
            if fault.kind in ("cut", "abort") and sent >= fault.after_tokens:
                if fault.kind == "abort":
                    raise InjectedAbort("fault: connection dropped")
                await send({"type": "http.response.body", "body": b""})
                return
            if fault.kind == "slow_body":
                await asyncio.sleep(fault.delay_s)
            await emit(frame)
        for frame in after:
            await emit(frame)
        await send({"type": "http.response.body", "body": b""})

    async def start(self) -> None:
        config = uvicorn.Config(
            self, host="127.0.0.1", port=0, log_level="critical", lifespan="off",
            timeout_graceful_shutdown=1,
        )  # fmt: skip
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                await self._task
            await asyncio.sleep(0.005)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            await self._task


async def _start(send: Any, status: int, content_type: str, extra: dict[str, str]) -> None:
    headers = [(b"content-type", content_type.encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def _send_text(send: Any, status: int, text: str, extra: dict[str, str]) -> None:
    raw = text.encode()
    await _start(send, status, "text/plain; charset=utf-8",
                 {**extra, "content-length": str(len(raw))})  # fmt: skip
    await send({"type": "http.response.body", "body": raw})


async def _send_json(send: Any, status: int, answer: Any, extra: dict[str, str]) -> None:
    raw = json.dumps(answer).encode()
    await _start(send, status, "application/json", {**extra, "content-length": str(len(raw))})
    await send({"type": "http.response.body", "body": raw})


@asynccontextmanager
async def serving(wire: Wire, **kwargs: Any) -> AsyncIterator[FakeUpstream]:
    upstream = FakeUpstream(wire, **kwargs)
    await upstream.start()
    try:
        yield upstream
    finally:
        await upstream.stop()


def refused_url() -> str:
    """A loopback URL nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
