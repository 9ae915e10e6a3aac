"""AdminService.GetDashboard: what the admin page shows, gathered in one call."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Protocol

from gateway.v1 import admin_service_pb2 as admin_pb

from server.accounting.accounts import Accounts
from server.accounting.admission import principal_of
from server.application.mcp.tools import Tally, Tools
from server.application.pipeline.state import Live
from server.base.caller import Principal
from server.base.config import KeyConfig
from server.storage import Store


class MinuteView(Protocol):
    start: int
    requests: int
    errors: int
    cost_usd: float


class RecentView(Protocol):
    """This instance's recent traffic, as the operations layer observes it."""

    @property
    def routes(self) -> Sequence[tuple[float, str, str, str]]:
        """(time, request id, profile, model) of the latest routing decisions."""
        ...

    def provider(self, provider_id: str) -> tuple[int, int, float | None]:
        """(calls, errors, mean latency in seconds) of a provider's last calls."""
        ...

    def last_hour(self) -> Iterable[MinuteView]: ...


USAGE_RANGE_S = 30 * 86400


class Dashboard:
    """What the admin page shows, gathered in one call."""

    def __init__(
        self, live: Live, accounts: Accounts, store: Store | None, recent: RecentView, tools: Tools
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store
        self.recent = recent
        self.tools = tools

    async def gather(self) -> admin_pb.GetDashboardResponse:
        state = self.live.current
        now = time.time()
        answer = admin_pb.GetDashboardResponse(time=int(now))
        for upstreams in state.catalog.upstreams.values():
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
        for m in state.config.models:
            price = admin_pb.ModelPrice(id=m.id, owned_by=m.owned_by)
            if m.price is not None:
                price.input, price.output = m.price.input, m.price.output
                cached = m.price.cached_input
                price.cached_input = m.price.input if cached is None else cached
            answer.models.append(price)
        answer.keys.extend(await self._keys(state.config.keys, now))
        for minute in self.recent.last_hour():
            answer.minutes.append(
                admin_pb.MinuteStats(
                    start_time=minute.start,
                    requests=minute.requests,
                    errors=minute.errors,
                    cost_usd=round(minute.cost_usd, 9),
                )  # fmt: skip
            )
        self._tool_calls(answer)
        for ts, request_id, profile, model in reversed(self.recent.routes):
            answer.routes.append(
                admin_pb.RoutingRecord(
                    time=int(ts), request_id=request_id, profile=profile, model=model
                )
            )
        return answer

    def _tool_calls(self, answer: admin_pb.GetDashboardResponse) -> None:
        tools = self.tools
        for upstream in tools.toolbox.upstreams():
            server = upstream.config
            tally = tools.tallies.get(server.id, Tally())
            answer.mcp_servers.append(
                admin_pb.McpServerStats(
                    id=server.id,
                    transport=server.transport,
                    up=upstream.up,
                    tools=len(upstream.tools),
                    calls=tally.calls,
                    errors=tally.errors,
                    cost_usd=round(tally.cost_usd, 9),
                )  # fmt: skip
            )
        for row in reversed(tools.recent):
            answer.mcp_calls.append(
                admin_pb.McpCallRecord(
                    time=int(row.ts),
                    key=row.key_name,
                    server=row.mcp_server,
                    tool=row.mcp_tool,
                    outcome=row.mcp_outcome,
                    latency_ms=row.latency_ms,
                    cost_usd=row.total_cost_usd or 0.0,
                )  # fmt: skip
            )

    async def _keys(self, configured: Iterable[KeyConfig], now: float) -> list[admin_pb.KeySummary]:
        principals = [Principal.of_config(k) for k in configured]
        store = self.store
        if store is not None:
            # The recent calls of this worker and the others first reach the database.
            with contextlib.suppress(Exception):
                await self.accounts.ledger.caught_up(2.0)
            principals += [principal_of(k) for k in await store.keys.list()]
        out = []
        for p in principals:
            summary = admin_pb.KeySummary(id=p.key_id, name=p.name, kind=p.kind)
            if store is not None:
                buckets = await store.usage.buckets(p.key_id, now - USAGE_RANGE_S, now + 1)
                summary.requests = sum(b.requests for b in buckets)
                summary.cost_usd = round(sum(b.cost_usd for b in buckets), 9)
            if (spec := p.budget) is not None:
                spent, _ = await self.accounts.budgets.status(spec)
                summary.budget_usd = spec.limit_usd
                summary.remaining_usd = round(max(0.0, spec.limit_usd - spent), 9)
            out.append(summary)
        return out
