"""Every connection waiting to be accepted is accepted when the listening socket is
ready, on uvloop too, which accepts one per turn of its loop by itself: a saturated
worker (a turn of tens of milliseconds) left new callers queued for seconds while the
streams already open ran at full speed."""

from __future__ import annotations

import asyncio
import socket

import uvloop

from server.base.config import ServerConfig
from server.cli.serve import start_http

WAITING = 200


async def answer(scope, receive, send):  # type: ignore[no-untyped-def]
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def accepted_within_a_few_turns() -> int:
    listener = await start_http(answer, ServerConfig(http_port=0))
    try:
        # Connected while the loop does nothing else (the kernel completes them): as a
        # busy worker sees callers arrive between two turns of its loop.
        callers = [socket.create_connection(("127.0.0.1", listener.port)) for _ in range(WAITING)]
        for _ in range(5):
            await asyncio.sleep(0)
        served = len(listener.server.server_state.connections)
        for caller in callers:
            caller.close()
        return served
    finally:
        await listener.stop()


def test_a_worker_accepts_every_waiting_caller_in_one_turn_of_its_loop() -> None:
    assert uvloop.run(accepted_within_a_few_turns()) == WAITING
