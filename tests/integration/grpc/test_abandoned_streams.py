"""A gRPC stream whose caller has left is ended quietly: whatever ends it then (the
send timeout, an upstream failure, the shutdown), no status is sent to nobody and no
grpc traceback (ExecuteBatchError) reaches the log; its ledger row is written."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest

from tests.integration.grpc.test_stream_bounds import config, endless, settled
from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import API, Stubs


async def test_a_stream_whose_caller_left_ends_without_a_traceback(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    options = [("grpc.http2.bdp_probe", 0)]
    async with running_gateway(config()) as gw:
        # Callers that read nothing, then leave at moments around the send timeout (1 s):
        # some before it fires, some as it fires, some after.
        channels = []
        for _ in range(24):
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}", options=options)
            call = Stubs(channel).chat.StreamChatCompletion(endless(), metadata=API)
            await call.read()
            channels.append(channel)
        await asyncio.sleep(0.8)
        for channel in channels:
            await asyncio.sleep(0.025)
            await channel.close(grace=None)
        await settled(gw)
        assert gw.gateway is not None and gw.gateway.store is not None
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT status FROM usage_records WHERE method = 'StreamChatCompletion'"
        )
    said = caplog.text + capfd.readouterr().err
    errors = [line for line in said.splitlines() if "ERROR" in line or "Traceback" in line]
    assert errors == [], "\n".join(errors[:20])
    assert len(rows) == 24
