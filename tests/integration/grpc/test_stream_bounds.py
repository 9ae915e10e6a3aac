"""gRPC has REST's bounds: a stream whose caller reads nothing ends after
`server.send_timeout_s` (its upstream released, its ledger row written), a message
larger than `server.max_body_bytes` is refused before any handler runs, and a caller
that cancels leaves no stack trace and no work behind. The ledger records an abandoned
stream as CANCELLED, as it does over REST, with the tokens sent before it ended."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from gateway.v1 import chat_service_pb2 as chat

from server.cli.serve import Running
from tests.support.gateways import default_config_dict, running_gateway
from tests.support.grpc_stubs import API, Stubs, details

LONG = 20_000  # tokens: far more than a flow-control window holds


def config() -> dict[str, Any]:
    data = default_config_dict()
    data["server"].update(send_timeout_s=1, max_body_bytes=64 * 1024)
    params = {"ttft_ms": 0, "tokens_per_second": 0, "min_reply_tokens": LONG,
              "max_reply_tokens": LONG}  # fmt: skip
    data["models"].append({
        "id": "endless", "owned_by": "test", "created": 0,
        "providers": [{"id": "endless-primary", "type": "primary", "adapter": "simulated",
                       "params": params}],
    })  # fmt: skip
    return data


@pytest.fixture
async def gw() -> AsyncIterator[Running]:
    async with running_gateway(config()) as running:
        yield running


def endless() -> chat.StreamChatCompletionRequest:
    return chat.StreamChatCompletionRequest(
        model="endless", messages=[chat.ChatMessage(role="user", content="talk")]
    )


async def settled(gw: Running, timeout_s: float = 30) -> None:
    assert gw.gateway is not None
    deadline = asyncio.get_running_loop().time() + timeout_s
    while gw.gateway.observer.in_flight:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{gw.gateway.observer.in_flight} calls still in flight")
        await asyncio.sleep(0.05)


async def test_a_stream_nobody_reads_ends_after_the_send_timeout(gw: Running) -> None:
    # Without BDP probing the caller's window stays at its initial 64 KiB.
    options = [("grpc.http2.bdp_probe", 0)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}", options=options) as channel:
        call = Stubs(channel).chat.StreamChatCompletion(endless(), metadata=API)
        await asyncio.sleep(2.5)  # read nothing: the window fills, the writes wait
        await settled(gw)
        received = 0
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async for _ in call:
                received += 1
    assert 0 < received < LONG
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert details(ended.value)["ErrorInfo"].reason == "SEND_TIMEOUT"  # type: ignore[attr-defined]
    assert gw.gateway is not None
    ledger = gw.gateway.accounts.ledger
    await ledger.flush()
    assert gw.gateway.store is not None
    rows = await gw.gateway.store.db.fetch(
        "SELECT status, error_reason, completion_tokens FROM usage_records "
        "WHERE method = 'StreamChatCompletion'"
    )
    # As over REST: the caller abandoned the stream, and what it was sent is billed.
    assert [(r["status"], r["error_reason"]) for r in rows] == [("CANCELLED", "CANCELLED")]
    assert 0 < rows[0]["completion_tokens"] < LONG


async def test_a_message_beyond_the_body_limit_is_refused(gw: Running) -> None:
    big = chat.CreateChatCompletionRequest(
        model="sim-mini", messages=[chat.ChatMessage(role="user", content="x" * 100_000)]
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await Stubs(channel).chat.CreateChatCompletion(big, metadata=API)
    # REST's 413: the method's bound, not a rate limit (an edge tier answers 413 for it).
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(refused.value)["ErrorInfo"].reason == "REQUEST_TOO_LARGE"  # type: ignore[attr-defined]
    assert refused.value.details() == f"the request exceeds {64 * 1024} bytes"
    assert gw.gateway is not None and gw.gateway.observer.in_flight == 0


async def test_cancelled_streams_leave_no_trace(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.WARNING)
    options = [("grpc.http2.bdp_probe", 0)]
    data = config()
    data["server"]["send_timeout_s"] = 60  # the callers cancel; no write times out first
    async with (
        running_gateway(data) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}", options=options) as channel,
    ):
        stubs = Stubs(channel)
        calls = [stubs.chat.StreamChatCompletion(endless(), metadata=API) for _ in range(50)]
        for call in calls[:25]:
            await call.read()  # started and then unread: each write waits on its caller
        await asyncio.sleep(0.3)
        for call in calls:
            call.cancel()
        await settled(gw)
        assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
        assert "Traceback" not in capfd.readouterr().err
        assert gw.gateway is not None
        provider = gw.gateway.live.current.catalog.upstreams["endless"][0].provider
        assert provider.in_flight == 0  # type: ignore[attr-defined]
