"""A stream's chunks on their way to a gRPC caller.

A task reads the handler's chunks as they come, merging text that arrives together
(coalesce.py); the call's own task writes whatever is ready. So an upstream that sends
twenty chunks at once costs a few gRPC messages, and a paced one costs one message per
token, as before. Reading pauses when a caller that reads slowly leaves MAX_AHEAD
chunks unsent.

A caller that reads nothing fills its flow-control window and the write waits; as over
REST, after send_timeout_s the stream and its upstream end. One timer per stream checks
that (every quarter of the timeout), rather than a timeout around every write.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator

import grpc
from google.protobuf.message import Message

from server.base.call import Call
from server.grpc_api.coalesce import Merge

# Chunks read ahead of a caller that reads slowly before reading pauses.
MAX_AHEAD = 16


class Relay:
    def __init__(
        self,
        chunks: AsyncGenerator[Message, None],
        merge: Merge | None,
        task: asyncio.Task[object],
        send_timeout_s: float,
    ) -> None:
        self._chunks = chunks
        self._merge = merge
        self._task = task
        self._send_timeout_s = send_timeout_s
        self._loop = asyncio.get_running_loop()
        self._ready: deque[Message] = deque()
        self._last_is_copy = False  # the last ready chunk is a merged copy, ours to change
        self._finished = False
        self._failure: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None  # the writer, waiting for chunks
        self._room: asyncio.Future[None] | None = None  # the reader, waiting for room
        self._reader: asyncio.Task[None] | None = None
        self._writing_since: float | None = None
        self._watch: asyncio.TimerHandle | None = None
        self._closing: asyncio.Future[None] | None = None
        # Set when the caller read nothing for send_timeout_s and the call was cancelled.
        self.timed_out = False

    async def write(self, context: grpc.aio.ServicerContext, call: Call) -> None:
        """Sends every chunk, then returns; raises what the handler raised, after the
        chunks it yielded before. A write to a caller that went away raises gRPC's
        own error (grpc.aio.InternalError)."""
        self._reader = asyncio.ensure_future(self._read())
        self._watch = self._loop.call_later(self._send_timeout_s / 4, self._check)
        ready = self._ready
        started = False
        while True:
            while ready:
                chunk = ready.popleft()
                if not ready:
                    self._last_is_copy = False
                if self._room is not None and not self._room.done():
                    self._room.set_result(None)
                if not started:
                    if call.response_metadata:
                        await context.send_initial_metadata(tuple(call.response_metadata.items()))
                    started = True
                self._writing_since = self._loop.time()
                await context.write(chunk)
                self._writing_since = None
            if self._finished:
                if self._failure is not None:
                    raise self._failure
                return
            self._waiter = self._loop.create_future()
            await self._waiter

    async def close(self) -> None:
        """Stops reading and closes the chunk source, which cancels the work behind it.
        Runs to the end even when the call is cancelled again meanwhile (a caller that
        cancels can be seen twice: by a failed write and by gRPC cancelling the call)."""
        if self._watch is not None:
            self._watch.cancel()
        if self._reader is None or self._reader.done():
            await self._chunks.aclose()  # nothing runs any more: this cannot be interrupted
            return
        self._closing = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._closing)

    async def _stop(self) -> None:
        assert self._reader is not None
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self._chunks.aclose()

    async def _read(self) -> None:
        ready = self._ready
        try:
            async for chunk in self._chunks:
                if ready and self._merge is not None:
                    merged = self._merge(ready[-1], chunk, self._last_is_copy)
                    if merged is not None:
                        ready[-1] = merged
                        self._last_is_copy = True
                        continue
                ready.append(chunk)
                self._last_is_copy = False
                self._wake()
                if len(ready) >= MAX_AHEAD:
                    self._room = self._loop.create_future()
                    await self._room
        except Exception as exc:  # the writer raises it, after the chunks before it
            self._failure = exc
        finally:
            self._finished = True
            self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _check(self) -> None:
        since = self._writing_since
        if since is not None and self._loop.time() - since >= self._send_timeout_s:
            self.timed_out = True
            self._task.cancel()
            return
        self._watch = self._loop.call_later(self._send_timeout_s / 4, self._check)
