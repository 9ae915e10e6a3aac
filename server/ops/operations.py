"""Attaches the operator's view to a gateway: tracing and the observing middleware
(metrics, request log), outermost in that order; readiness; the metrics' sampled gauges."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from server.ops import requestlog, tracing
from server.ops.health import GatewayHealth
from server.ops.metrics import Metrics, multiprocess_dir
from server.ops.observe import Observer, Sink

if TYPE_CHECKING:
    from server.application.handlers import Gateway


class Operations:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.metrics = Metrics()
        self.health = GatewayHealth(gateway)
        sinks: list[Sink] = [self.metrics.observe, gateway.dashboard.recent.observe, self._log]
        self.observer = Observer(sinks, with_text=lambda: gateway.config.operations.log_text)
        gateway.control.on_reload = lambda result: self.metrics.reloads.labels(result).inc()
        self._sampler: asyncio.Task[None] | None = None

    @classmethod
    def attach(cls, gateway: Gateway) -> Operations:
        """Creates the operations of `gateway` and puts the observer outermost in its
        middlewares (it reads the tab the accounting middleware closes); call before
        building the RPC table."""
        ops = cls(gateway)
        gateway.middlewares.insert(0, ops.observer)
        # Outermost: the call's span is current while everything else runs.
        gateway.middlewares.insert(0, tracing.Tracing())
        tracing.instrument(gateway)
        if multiprocess_dir():
            ops._sampler = asyncio.create_task(
                ops.metrics.sample_every(gateway, lambda: ops.observer.in_flight)
            )
        return ops

    def _log(self, outcome) -> None:  # noqa: ANN001
        if self.gateway.config.operations.request_log:
            requestlog.write(outcome)

    def render_metrics(self) -> bytes:
        self.metrics.sample(self.gateway, self.observer.in_flight)
        return self.metrics.render()

    async def aclose(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
