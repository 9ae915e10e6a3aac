"""Liveness and readiness.

Alive: the process answers. Ready: not draining, the config is loaded, storage answers,
and every model has at least one enabled provider whose circuit is not open. On SIGTERM
readiness turns false first (and gRPC health NOT_SERVING), so load balancers stop
sending new calls while the calls in flight finish.

The edge tier's readiness (the remote gateway's gRPC health) is in
http_facade/edge_health.py.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from server.application.pipeline.state import Live
from server.storage import Store

STORAGE_TIMEOUT_S = 1.0


class Readiness(Protocol):
    draining: bool

    async def problems(self) -> list[str]: ...


class GatewayHealth:
    """Readiness of a gateway that serves calls itself."""

    def __init__(self, live: Live, store: Store | None) -> None:
        self.live = live
        self.store = store
        self.draining = False

    async def problems(self) -> list[str]:
        """Why the gateway is not ready; empty when it is."""
        found = ["draining: shutting down"] if self.draining else []
        store = self.store
        if store is not None:
            try:
                await asyncio.wait_for(store.db.fetchrow("SELECT 1"), STORAGE_TIMEOUT_S)
            except Exception as exc:
                found.append(f"storage: unreachable ({type(exc).__name__})")
        for model_id, upstreams in self.live.current.catalog.upstreams.items():
            if not any(u.config.enabled and u.health != "open" for u in upstreams):
                found.append(f"model {model_id}: no enabled provider with a closed circuit")
        return found
