"""Readiness of the edge tier (the facade forwarding to a remote gateway): ready when
the remote gateway's gRPC health says SERVING, and not while this facade drains."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


class EdgeHealth:
    """Readiness of the edge tier: the remote gateway's gRPC health."""

    def __init__(self, target: str) -> None:
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = health_pb2_grpc.HealthStub(self._channel)
        self.draining = False

    async def problems(self) -> list[str]:
        found = ["draining: shutting down"] if self.draining else []
        try:
            answer = await self._stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
        except grpc.aio.AioRpcError as exc:
            return [*found, f"remote gateway: unreachable ({exc.code().name})"]
        if answer.status != health_pb2.HealthCheckResponse.SERVING:
            status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
            found.append(f"remote gateway: {status}")
        return found

    async def aclose(self) -> None:
        await self._channel.close()
