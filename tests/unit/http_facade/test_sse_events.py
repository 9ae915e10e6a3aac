"""The SSE byte stream from a stream of chunks, without a server: what is written and
when, how it ends (DONE, an error event, a shutdown), keep-alives only while waiting,
a slow reader holding the source back, and the source closed however it ends."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import anyio
import pytest
from gateway.v1 import chat_service_pb2 as chat

from http_facade.errors import ANTHROPIC
from http_facade.sse import (
    DONE,
    KEEPALIVE,
    MAX_AHEAD,
    SHUTTING_DOWN,
    EventStream,
    Framing,
    events,
)
from server.base.errors import RateLimited, UpstreamError


def chunk(n: int) -> chat.StreamChatCompletionResponse:
    return chat.StreamChatCompletionResponse(id=f"c{n}", object="chat.completion.chunk")


class Source:
    """Chunks `first`..`last`, each after `delay_s`, then `error` if given; notes when
    it is closed and how far it got."""

    def __init__(self, count: int, delay_s: float = 0.0, error: BaseException | None = None,
                 start: int = 1) -> None:  # fmt: skip
        self.count, self.delay_s, self.error, self.start = count, delay_s, error, start
        self.sent = 0
        self.closed = False
        self.moved = asyncio.Event()  # set at each chunk taken

    async def chunks(self) -> AsyncIterator[chat.StreamChatCompletionResponse]:
        try:
            for n in range(self.start, self.start + self.count):
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                self.sent += 1
                self.moved.set()
                yield chunk(n)
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True


def ids(data: bytes) -> list[str]:
    out = []
    for part in data.split(b"\n\n"):
        if part.startswith(b"data: {"):
            payload = json.loads(part[6:])
            out.append(payload.get("id") or "error:" + payload["error"]["code"])
    return out


async def read_all(stream: AsyncIterator[bytes]) -> list[bytes]:
    return [piece async for piece in stream]


async def test_first_then_the_rest_then_done():
    source = Source(3, start=2)
    gen = source.chunks()
    parts = await read_all(events(chunk(1), gen, 10, "req"))
    assert parts[0].startswith(b'data: {"id":"c1","object":"chat.completion.chunk"')
    assert parts[0].endswith(b"}\n\n") and parts[0].count(b"\n\n") == 1
    whole = b"".join(parts)
    assert ids(whole) == ["c1", "c2", "c3", "c4"]
    assert whole.endswith(DONE) and whole.count(DONE) == 1
    assert KEEPALIVE not in whole and source.closed


async def test_without_done_when_the_framing_has_none():
    framing = Framing(done=False)
    whole = b"".join(await read_all(events(chunk(1), Source(1, start=2).chunks(), 10, "r",
                                           framing)))  # fmt: skip
    assert ids(whole) == ["c1", "c2"] and DONE not in whole


async def test_an_error_after_the_first_chunk_is_the_last_event():
    source = Source(1, error=RateLimited("slow down", {}), start=2)
    whole = b"".join(await read_all(events(chunk(1), source.chunks(), 10, "r")))
    assert ids(whole) == ["c1", "c2", "error:rate_limited"]
    assert DONE not in whole and whole.endswith(b"\n\n") and source.closed


async def test_an_error_in_the_dialects_format():
    framing = Framing(done=False, name_field="object", error_format=ANTHROPIC)
    source = Source(0, error=UpstreamError("upstream broke", {}))
    whole = b"".join(await read_all(events(chunk(1), source.chunks(), 10, "r", framing)))
    assert whole.endswith(
        b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"upstream broke"}}\n\n'
    )


async def test_an_unexpected_failure_is_a_generic_internal_error_event():
    source = Source(0, error=RuntimeError("secret detail"))
    whole = b"".join(await read_all(events(chunk(1), source.chunks(), 10, "req-7")))
    assert b"secret detail" not in whole
    last = json.loads(whole.split(b"\n\n")[-2][6:])
    assert last["error"]["code"] == "internal" and "req-7" in last["error"]["message"]


async def test_keep_alives_only_while_waiting():
    source = Source(2, delay_s=0.25, start=2)
    parts = await read_all(events(chunk(1), source.chunks(), 0.1, "r"))
    whole = b"".join(parts)
    assert ids(whole) == ["c1", "c2", "c3"] and whole.endswith(DONE)
    # About two keep-alives in each 0.25 s wait; every one a whole part of its own.
    assert 2 <= parts.count(KEEPALIVE) <= 6
    assert all(p == KEEPALIVE or KEEPALIVE not in p for p in parts)
    fast = await read_all(events(chunk(1), Source(5, start=2).chunks(), 0.1, "r"))
    assert KEEPALIVE not in b"".join(fast)


async def test_no_keep_alive_while_events_keep_coming():
    # A chunk every 40 ms against a 100 ms keep-alive: the silence never lasts.
    parts = await read_all(events(chunk(1), Source(8, delay_s=0.04, start=2).chunks(), 0.1, "r"))
    assert KEEPALIVE not in b"".join(parts) and len(ids(b"".join(parts))) == 9


async def test_a_reader_that_does_not_read_leaves_the_keep_alive_timer_idle():
    source = Source(1, delay_s=2, start=2)
    stream = events(chunk(1), source.chunks(), 0.02, "r")
    await anext(stream)
    assert await anext(stream) == KEEPALIVE
    # The caller takes nothing for 0.3 s while the source is silent: the timer finds
    # no writer waiting, and checks again one keep-alive period later, not at once
    # (which would spin: this process would use all the CPU it can get meanwhile).
    available = _spinning_share()
    assert await _waiting_share(0.3) < available / 3
    assert await anext(stream) == KEEPALIVE
    await stream.aclose()
    assert source.closed


def _spinning_share(seconds: float = 0.1) -> float:
    """This process's share of a core now: CPU time over wall time while it spins."""
    cpu, wall = time.process_time(), time.monotonic()
    while time.monotonic() - wall < seconds:
        pass
    return (time.process_time() - cpu) / (time.monotonic() - wall)


async def _waiting_share(seconds: float) -> float:
    """CPU time over wall time while this process's event loop runs for `seconds`."""
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    return (time.process_time() - cpu) / (time.monotonic() - wall)


async def test_ready_chunks_go_out_together():
    parts = await read_all(events(chunk(1), Source(20, start=2).chunks(), 10, "r"))
    # The first alone (it is sent before the reading starts), the rest in few writes.
    assert len(parts) <= 4 and ids(b"".join(parts)) == [f"c{n}" for n in range(1, 22)]


async def test_a_slow_reader_holds_the_source_back():
    source = Source(MAX_AHEAD * 3, start=2)
    stream = events(chunk(1), source.chunks(), 10, "r")
    await anext(stream)
    await anext(stream)
    await asyncio.sleep(0.05)
    # The source stopped reading ahead at MAX_AHEAD unsent events (besides the batch
    # the reader took).
    assert MAX_AHEAD <= source.sent <= 2 * MAX_AHEAD + 1 < MAX_AHEAD * 3
    rest = b"".join(await read_all(stream))
    assert len(ids(rest)) + 1 >= MAX_AHEAD * 3 - MAX_AHEAD and rest.endswith(DONE)
    assert source.sent == MAX_AHEAD * 3


async def test_a_reader_leaving_closes_the_source():
    source = Source(100, delay_s=0.05, start=2)
    stream = events(chunk(1), source.chunks(), 10, "r")
    await anext(stream)
    await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert source.closed and source.sent < 100
    # Leaving before the first chunk went out closes it too.
    early = Source(3, start=2)
    unstarted = events(chunk(1), early.chunks(), 10, "r")
    await anext(unstarted)
    await unstarted.aclose()  # type: ignore[attr-defined]
    await asyncio.sleep(0)
    assert early.sent == 0


async def test_a_shutdown_ends_the_stream_with_its_error_event():
    loop = asyncio.get_running_loop()
    stopping: asyncio.Future[None] = loop.create_future()
    source = Source(100, delay_s=0.05, start=2)
    stream = events(chunk(1), source.chunks(), 10, "r", stopping=stopping)
    got = [await anext(stream), await anext(stream)]
    stopping.set_result(None)
    got += await read_all(stream)
    whole = b"".join(got)
    assert ids(whole)[-1] == "error:shutting_down" and DONE not in whole
    assert SHUTTING_DOWN.message.encode() in whole
    assert source.closed and source.sent < 100


async def test_a_shutdown_after_the_end_changes_nothing():
    loop = asyncio.get_running_loop()
    stopping: asyncio.Future[None] = loop.create_future()
    stream = events(chunk(1), Source(1, start=2).chunks(), 10, "r", stopping=stopping)
    whole = b"".join(await read_all(stream))
    stopping.set_result(None)
    assert whole.endswith(DONE) and b"shutting_down" not in whole


@pytest.mark.parametrize("keepalive", [Framing().keepalive, Framing(keepalive_event="ping",
                                                                    name_field="type").keepalive])  # fmt: skip
def test_keepalive_is_a_whole_event(keepalive: bytes) -> None:
    assert keepalive.endswith(b"\n\n") and keepalive.count(b"\n\n") == 1


async def test_the_source_is_closed_even_inside_a_cancelled_scope():
    """A response cancelled mid-stream (the client gone, the server stopping) still
    lets its source finish closing, awaits and all."""
    closed: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            for _ in range(1000):
                yield b"data: 1\n\n"
        finally:
            await asyncio.sleep(0.01)  # a clean-up that waits on something
            closed.append(True)

    async def receive() -> dict[str, str]:
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            scope.cancel()
            await asyncio.sleep(0)  # the cancellation lands here, in the response

    response = EventStream(body(), {})
    with anyio.CancelScope() as scope:
        await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    assert closed == [True]


@pytest.mark.parametrize("before", [0, 2])
async def test_a_responses_stream_error_is_numbered_after_the_events_sent(before):
    """OpenAI's ResponseErrorEvent (the openai package's type is the oracle), named, its
    sequence_number counting every event before it, `first` included."""
    from openai.types.responses import ResponseErrorEvent

    from http_facade.errors import OPENAI_RESPONSES

    framing = Framing(done=False, name_field="object", error_format=OPENAI_RESPONSES)
    source = Source(before, error=RateLimited("slow down", {}), start=2)
    whole = b"".join(await read_all(events(chunk(1), source.chunks(), 10, "r", framing)))
    last = whole.strip().split(b"\n\n")[-1]
    name, data = last.split(b"\n", 1)
    assert name == b"event: error"
    raw = json.loads(data.removeprefix(b"data: "))
    assert set(raw) == set(ResponseErrorEvent.model_fields)  # `param` too, even when null
    error = ResponseErrorEvent.model_validate(raw)
    assert (error.type, error.code, error.message) == ("error", "rate_limited", "slow down")
    assert error.param is None and error.sequence_number == 1 + before


async def test_an_unexpected_failure_is_numbered_and_logged_whole(caplog):
    from http_facade.errors import OPENAI_RESPONSES

    framing = Framing(done=False, name_field="object", error_format=OPENAI_RESPONSES)
    failure = RuntimeError("secret detail")
    source = Source(2, error=failure, start=2)
    whole = b"".join(await read_all(events(chunk(1), source.chunks(), 10, "req-8", framing)))
    error = json.loads(whole.strip().split(b"\n\n")[-1].split(b"\ndata: ")[1])
    assert (error["code"], error["sequence_number"]) == ("internal", 3)
    (logged,) = [r for r in caplog.records if r.name == "http_facade.errors"]
    assert logged.getMessage() == "request req-8 failed" and logged.exc_info[1] is failure


async def test_a_named_stream_ends_without_a_keepalive_when_its_end_comes_late():
    async def late_end() -> AsyncIterator[chat.StreamChatCompletionResponse]:
        yield chunk(2)
        await asyncio.sleep(0.05)  # the source ends a while after its last chunk

    framing = Framing(done=False, name_field="object", keepalive_event="ping")
    whole = b"".join(await read_all(events(chunk(1), late_end(), 10, "r", framing)))
    assert whole.count(b"\n\n") == 2 and b"ping" not in whole


async def test_a_shutdown_wakes_a_waiting_stream_at_once():
    from http_facade.errors import OPENAI_RESPONSES

    framing = Framing(done=False, name_field="object", error_format=OPENAI_RESPONSES)
    stopping: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    source = Source(1, delay_s=30, start=2)  # nothing more for longer than any test
    stream = events(chunk(1), source.chunks(), 10, "r", framing, stopping)
    first = await anext(stream)
    asyncio.get_running_loop().call_later(0.05, stopping.set_result, None)
    rest = await asyncio.wait_for(read_all(stream), 2)  # not at the next keep-alive
    assert len(rest) == 1 and rest[0].startswith(b"event: error\n")
    error = json.loads(rest[0].split(b"\ndata: ")[1])
    assert (error["code"], error["sequence_number"]) == ("shutting_down", 1)
    assert first.count(b"\n\n") == 1 and source.closed


async def started(source: Source) -> tuple[chat.StreamChatCompletionResponse, AsyncIterator]:
    """The first chunk and the rest, as the façade has them: the source already begun."""
    chunks = source.chunks()
    return await anext(chunks), chunks


async def test_a_reader_leaving_after_the_first_event_closes_the_source():
    source = Source(3)
    stream = events(*await started(source), 10, "r")
    await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert source.closed and source.sent == 1


async def reading_held_back(source: Source, **options: object) -> AsyncIterator[bytes]:
    """A stream whose reading has filled its room and waits, the source at a yield."""
    stream = events(*await started(source), 10, "r", **options)  # type: ignore[arg-type]
    await anext(stream)
    await anext(stream)
    while source.sent < MAX_AHEAD:
        source.moved.clear()
        await source.moved.wait()
    await asyncio.sleep(0.01)
    return stream


async def test_a_reader_leaving_while_the_reading_waits_for_room_closes_the_source():
    source = Source(MAX_AHEAD * 3)
    stream = await reading_held_back(source)
    await stream.aclose()  # type: ignore[attr-defined]
    assert source.closed and source.sent < MAX_AHEAD * 3


async def test_the_source_is_closed_when_the_stream_is_closed_inside_a_cancelled_scope():
    source = Source(MAX_AHEAD * 3)
    stream = await reading_held_back(source)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await stream.aclose()  # type: ignore[attr-defined]
    assert source.closed


async def test_a_stream_that_ended_leaves_no_callback_on_the_shutdown_signal():
    stopping: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    assert "cb=" not in repr(stopping)
    whole = b"".join(await read_all(events(*await started(Source(3)), 10, "r",
                                           stopping=stopping)))  # fmt: skip
    assert whole.endswith(DONE)
    # Every stream adds one while it runs: one left behind each would pile up for good.
    assert "cb=" not in repr(stopping)
