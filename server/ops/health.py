"""Liveness and readiness.

Alive: the process answers. Ready: not draining, the config is loaded, storage answers,
and every model has at least one enabled provider whose circuit is not open. On SIGTERM
readiness turns false first (and gRPC health NOT_SERVING), so load balancers stop
sending new calls while the calls in flight finish.

The edge tier (the facade forwarding to a remote gateway) is ready when the remote
gateway's gRPC health says SERVING.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

if TYPE_CHECKING:
    from server.core.handlers import Gateway

STORAGE_TIMEOUT_S = 1.0


class Readiness(Protocol):
    draining: bool

    async def problems(self) -> list[str]: ...


class GatewayHealth:
    """Readiness of a gateway that serves calls itself."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.draining = False

    async def problems(self) -> list[str]:
        """Why the gateway is not ready; empty when it is."""
        found = ["draining: shutting down"] if self.draining else []
        store = self.gateway.store
        if store is not None:
            try:
                await asyncio.wait_for(store.db.fetchrow("SELECT 1"), STORAGE_TIMEOUT_S)
            except Exception as exc:
                found.append(f"storage: unreachable ({type(exc).__name__})")
        for model_id, upstreams in self.gateway.catalog.upstreams.items():
            if not any(u.config.enabled and u.health != "open" for u in upstreams):
                found.append(f"model {model_id}: no enabled provider with a closed circuit")
        return found


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
