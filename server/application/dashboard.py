"""AdminService.GetDashboard: what the admin page shows, gathered in one call."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from gateway.v1 import admin_service_pb2 as admin_pb

from server.accounting.admission import Principal
from server.accounting.budget import BudgetSpec
from server.base.call import Call
from server.ops.recent import Recent

if TYPE_CHECKING:
    from server.application.handlers import Gateway

USAGE_RANGE_S = 30 * 86400


class Dashboard:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.recent = Recent()

    async def get_dashboard(
        self, request: admin_pb.GetDashboardRequest, call: Call
    ) -> admin_pb.GetDashboardResponse:
        gateway = self.gateway
        principal = await gateway.admission.admit(call.metadata, "admin", call.response_metadata)
        if call.tab is not None:
            call.tab.principal = principal
        now = time.time()
        answer = admin_pb.GetDashboardResponse(time=int(now))
        for upstreams in gateway.catalog.upstreams.values():
            for u in upstreams:
                calls, errors, mean = self.recent.provider(u.id)
                stats = admin_pb.ProviderStats(
                    id=u.id, model=u.model.id, type=u.config.type, enabled=u.config.enabled,
                    health=u.health, requests=calls, errors=errors,
                    error_rate=round(errors / calls, 4) if calls else 0.0,
                )  # fmt: skip
                if mean is not None:
                    stats.mean_latency_ms = round(mean * 1000, 3)
                answer.providers.append(stats)
        for m in gateway.config.models:
            price = admin_pb.ModelPrice(id=m.id, owned_by=m.owned_by)
            if m.price is not None:
                price.input, price.output = m.price.input, m.price.output
                cached = m.price.cached_input
                price.cached_input = m.price.input if cached is None else cached
            answer.models.append(price)
        answer.keys.extend(await self._keys(now))
        for minute in self.recent.last_hour():
            answer.minutes.append(
                admin_pb.MinuteStats(
                    start_time=minute.start,
                    requests=minute.requests,
                    errors=minute.errors,
                    cost_usd=round(minute.cost_usd, 9),
                )  # fmt: skip
            )
        for ts, request_id, profile, model in reversed(self.recent.routes):
            answer.routes.append(
                admin_pb.RoutingRecord(
                    time=int(ts), request_id=request_id, profile=profile, model=model
                )
            )
        return answer

    async def _keys(self, now: float) -> list[admin_pb.KeySummary]:
        gateway = self.gateway
        principals = [Principal.of_config(k) for k in gateway.config.keys]
        store = gateway.store
        if store is not None:
            # This instance's recent calls first reach the database.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(gateway.accounts.ledger.flush(), 2.0)
            principals += [Principal.of_record(k) for k in await store.keys.list()]
        out = []
        for p in principals:
            summary = admin_pb.KeySummary(id=p.key_id, name=p.name, kind=p.kind)
            if store is not None:
                buckets = await store.usage.buckets(p.key_id, now - USAGE_RANGE_S, now + 1)
                summary.requests = sum(b.requests for b in buckets)
                summary.cost_usd = round(sum(b.cost_usd for b in buckets), 9)
            if p.budget_usd is not None:
                spec = BudgetSpec(p.key_id, p.name, p.budget_usd, p.budget_period)
                spent, _ = await gateway.accounts.budgets.status(spec)
                summary.budget_usd = p.budget_usd
                summary.remaining_usd = round(max(0.0, p.budget_usd - spent), 9)
            out.append(summary)
        return out
