"""Server-Sent Events, framed as SPEC.md section 4 says, for every streaming RPC.

    data: {chunk}\\n\\n ... data: [DONE]\\n\\n

The first chunk is pulled before the response starts, so an error before it is an
ordinary HTTP error (the caller of `EventStream` does that). After it, an error is one
last `data: {"error": {...}}` event and the stream ends without [DONE]. While the next
chunk is slow, a `: keep-alive` comment goes out every `keepalive_s` without
disturbing the pending read. When the client goes away, the chunk source is closed,
which cancels the work behind it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
from google.protobuf.message import Message
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from http_facade.codec import to_dict
from http_facade.errors import error_object, internal
from server.core.errors import GatewayError, ShuttingDown

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
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


async def _next(chunks: AsyncIterator[Message]) -> Any:
    return await anext(chunks, _END)


async def events(
    first: Message,
    chunks: AsyncIterator[Message],
    keepalive_s: float,
    request_id: str,
    done: bool = True,
    stopping: asyncio.Future[None] | None = None,
) -> AsyncIterator[bytes]:
    """The SSE byte stream: `first`, then the rest of `chunks`, then [DONE] unless
    `done` is false (or an error event). Closes `chunks` however it ends. When
    `stopping` completes (the server's grace period is running out), the stream ends
    with a SHUTTING_DOWN error event, before the server closes the socket."""
    pending: asyncio.Task[Any] | None = None
    try:
        yield event(to_dict(first))
        while True:
            pending = asyncio.ensure_future(_next(chunks))
            waiting: set[asyncio.Future[Any]] = {pending}
            if stopping is not None:
                waiting.add(stopping)
            while not pending.done():
                if stopping is not None and stopping.done():
                    yield event({"error": error_object(SHUTTING_DOWN)})
                    return
                if not (
                    await asyncio.wait(
                        waiting, timeout=keepalive_s, return_when=asyncio.FIRST_COMPLETED
                    )
                )[0]:
                    yield KEEPALIVE
            chunk, pending = pending.result(), None
            if chunk is _END:
                break
            yield event(to_dict(chunk))
        if done:
            yield DONE
    except GatewayError as exc:
        yield event({"error": error_object(exc)})
    except Exception as exc:
        yield event({"error": error_object(internal(exc, request_id))})
    finally:
        # Runs on client disconnect too, inside a cancelled scope: shield the clean-up.
        with anyio.CancelScope(shield=True):
            if pending is not None:
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()


class EventStream(StreamingResponse):
    """A StreamingResponse that always closes its event source, even when the client
    disconnected while an event was being sent."""

    body_iterator: AsyncIterator[bytes]

    def __init__(self, content: AsyncIterator[bytes], headers: Mapping[str, str]) -> None:
        super().__init__(content, headers={**headers, **HEADERS})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                aclose = getattr(self.body_iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
