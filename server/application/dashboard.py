"""AdminService.GetDashboard: what the admin page shows, gathered in one call."""

from __future__ import annotations

import base64
import binascii
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
from server.base.errors import InvalidArgument
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
MAX_KEY_PAGE = 1000


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

    async def gather(
        self, request: admin_pb.GetDashboardRequest | None = None
    ) -> admin_pb.GetDashboardResponse:
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
        await self._keys(answer, request or admin_pb.GetDashboardRequest(), state.config.keys, now)
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

    async def _keys(
        self, answer: admin_pb.GetDashboardResponse, request: admin_pb.GetDashboardRequest,
        configured: Iterable[KeyConfig], now: float,
    ) -> None:  # fmt: skip
        """The key list: every key's figures, or one page's, or those of `key_ids` (the
        usage of only the keys shown is read)."""
        principals = [Principal.of_config(k) for k in configured]
        store = self.store
        if store is not None:
            # The recent calls of this worker and the others first reach the database.
            with contextlib.suppress(Exception):
                await self.accounts.ledger.caught_up(2.0)
            principals += [principal_of(k) for k in await store.keys.list()]
        if request.key_ids:
            wanted = set(request.key_ids)
            principals = [p for p in principals if p.key_id in wanted]
        answer.key_total = len(principals)
        size = request.key_page_size
        if size or request.key_page_token:
            if not 1 <= size <= MAX_KEY_PAGE:
                raise InvalidArgument.for_field("key_page_size", f"must be 1 to {MAX_KEY_PAGE}")
            start = _offset(request.key_page_token)
            if start + size < len(principals):
                answer.key_next_page_token = _token(start + size)
            principals = principals[start : start + size]
        for p in principals:
            summary = admin_pb.KeySummary(id=p.key_id, name=p.name, kind=p.kind)
            if store is not None:
                buckets = await store.usage.buckets(p.key_id, now - USAGE_RANGE_S, now + 1)
                summary.requests = sum(b.requests for b in buckets)
                summary.cost_usd = round(sum(b.cost_usd for b in buckets), 9)
                summary.batch_cost_usd = round(sum(b.batch_cost_usd for b in buckets), 9)
            if (spec := p.budget) is not None:
                spent, _ = await self.accounts.budgets.status(spec)
                summary.budget_usd = spec.limit_usd
                summary.remaining_usd = round(max(0.0, spec.limit_usd - spent), 9)
            answer.keys.append(summary)


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"keys:{offset}".encode()).decode()


def _offset(token: str) -> int:
    """Where a key page starts: the keys are listed in a stable order (the config's,
    then the stored ones by age), so a page is named by its place."""
    if not token:
        return 0
    try:
        kind, _, offset = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if kind != "keys" or not offset.isdigit():
            raise ValueError(token)
        return int(offset)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise InvalidArgument.for_field("key_page_token", "is not a token this API gave") from None
