"""Shutdown with streams longer than the grace period: each ends with an error event
(SSE) or UNAVAILABLE (gRPC) that reaches the caller before its socket closes, and no
ASGI traceback is logged (issue 12, item 6)."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import grpc
import httpx
from gateway.v1 import chat_service_pb2 as chat

from server.base import config
from server.cli import serve
from tests.support.gateways import API_KEY, default_config_dict, wait_for
from tests.support.grpc_stubs import API, Stubs, details

SLOW = {"ttft_ms": 0, "tokens_per_second": 2, "min_reply_tokens": 200, "max_reply_tokens": 200}


async def test_streams_longer_than_the_grace_end_with_an_error_before_the_socket_closes(caplog):
    caplog.set_level(logging.INFO)
    data = default_config_dict()
    drain_s = 4.0
    data["operations"] = {"drain_s": drain_s, "readiness_delay_s": 0}
    for m in data["models"]:
        for p in m["providers"]:
            p["params"] = dict(SLOW)
    running = await serve.start(config.parse(data, "test"))
    sse_events: list[str] = []
    grpc_chunks = 0
    grpc_error: grpc.aio.AioRpcError | None = None

    async def sse_stream() -> None:
        body = {
            "model": "sim-mini",
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.http_port}", timeout=30) as c,
            c.stream(
                "POST", "/v1/chat/completions", json=body, headers={"x-api-key": API_KEY}
            ) as r,
        ):
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    sse_events.append(line[6:])

    async def grpc_stream() -> None:
        nonlocal grpc_chunks, grpc_error
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
            request = chat.StreamChatCompletionRequest(
                model="sim-mini", messages=[chat.ChatMessage(role="user", content="hi")]
            )
            try:
                async for _ in Stubs(channel).chat.StreamChatCompletion(request, metadata=API):
                    grpc_chunks += 1
            except grpc.aio.AioRpcError as exc:
                grpc_error = exc

    clients = [asyncio.ensure_future(sse_stream()), asyncio.ensure_future(grpc_stream())]
    # Both streams under way: what the assertions below need of them before the stop.
    await wait_for(lambda: len(sse_events) > 2 and grpc_chunks > 1)
    started = time.perf_counter()
    await running.stop()
    took = time.perf_counter() - started
    await asyncio.wait_for(asyncio.gather(*clients), 5)

    assert took < drain_s + 2, f"shutdown took {took:.1f}s"
    assert len(sse_events) > 2 and sse_events[-1] != "[DONE]"
    last = json.loads(sse_events[-1])
    assert last["error"]["code"] == "shutting_down", last
    assert grpc_chunks > 1 and grpc_error is not None
    assert grpc_error.code() == grpc.StatusCode.UNAVAILABLE
    assert details(grpc_error)["ErrorInfo"].reason == "SHUTTING_DOWN"  # type: ignore[attr-defined]
    tracebacks = [r for r in caplog.records if r.exc_info or "Exception in ASGI" in r.getMessage()]
    assert not tracebacks, tracebacks
