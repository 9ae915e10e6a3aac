"""server.grpc_max_connection_age_s: the server asks a client to reconnect (GOAWAY)
once its connection is that old, and the channel reconnects by itself, so long-lived
clients spread over replicas added since."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.gateways import default_config_dict, running_gateway

SERVING = health_pb2.HealthCheckResponse.SERVING


async def test_an_old_connection_gets_goaway_and_the_channel_reconnects():
    data = default_config_dict()
    data["server"] |= {"grpc_max_connection_age_s": 0.5, "grpc_max_connection_age_grace_s": 5}
    async with (
        running_gateway(data) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        health = health_pb2_grpc.HealthStub(channel)
        for _ in range(2):  # each connection ends by age, and a call opens the next
            answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert answer.status == SERVING
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            state = grpc.ChannelConnectivity.READY
            async with asyncio.timeout(30):  # the age, jitter, and a loaded machine
                while state == grpc.ChannelConnectivity.READY:
                    await channel.wait_for_state_change(state)
                    state = channel.get_state()
            assert state == grpc.ChannelConnectivity.IDLE
