"""Listing and calling MCP tools for a key, whichever transport asked.

A listing is each server's tools (less what its filter leaves out) whose exposed
name, `{server}__{tool}`, the key's grant matches, read from the current config on
every request: a grant a reload removes is gone from the next request on. A call:

1. is refused as not found, alike for a tool that does not exist and one the key may
   not use, before anything else (no existence leak, no upstream work);
2. counts against the key's rate limit and reserves the server's price_per_call
   against its budget (`Accounts.hold`, the code every call goes through);
3. runs on the owning server under the tool's own name, in an `execute_tool` span;
4. settles the reservation (the price when the server answered, nothing otherwise)
   and writes one ledger row, which the metrics hear of too.

The caller's credentials are never sent upstream: a server's client sends only the
headers its config names.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from server.accounting.accounts import Accounts
from server.application.mcp.grants import exposes, granted
from server.application.mcp.toolbox import Toolbox, Upstream
from server.application.pipeline.state import Live
from server.base import upstream_headers
from server.base.caller import Principal
from server.base.config import TOOL_NAME, McpServerConfig, exposed_tool_name
from server.base.errors import (
    DeadlineExceeded,
    GatewayError,
    NotFound,
    ToolNotFound,
    UpstreamError,
    status_of,
)
from server.base.record import UsageRecord, new_ticket
from server.base.spans import span
from server.base.tools import ExposedTool, Tool, ToolAnswer, ToolServerError, ToolTimeout
from server.guardrails.guard import Guard

# The ledger's method for a tool call, whichever transport it came by.
METHOD = "CallTool"
# This instance's latest calls kept for the admin page.
RECENT_CALLS = 50


@dataclass(slots=True)
class Tally:
    """This instance's calls to one server, for the admin page."""

    calls: int = 0
    errors: int = 0
    cost_usd: float = 0.0


def exposed_name(server: McpServerConfig, tool: str) -> str | None:
    """The name a caller sees for `tool`, or None when the server's filter leaves it
    out or the name is not one every model API accepts."""
    name = exposed_tool_name(server.id, tool)
    if not tool or not TOOL_NAME.fullmatch(name) or not exposes(server.tools, tool):
        return None
    return name


def not_found(name: str) -> ToolNotFound:
    return ToolNotFound(f"tool {name!r} not found", {"tool": name})


class Tools:
    def __init__(
        self,
        live: Live,
        accounts: Accounts,
        toolbox: Toolbox,
        report: Callable[[UsageRecord], None] = lambda row: None,
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.toolbox = toolbox
        # Hears of every call's ledger row (the metrics).
        self.report = report
        self.tallies: dict[str, Tally] = {}
        self.recent: deque[UsageRecord] = deque(maxlen=RECENT_CALLS)

    def _current(self) -> Toolbox:
        """The toolbox, on the current config's servers."""
        self.toolbox.reconcile(self.live.current.config.mcp)
        return self.toolbox

    def _upstreams(self, server: str | None) -> list[Upstream]:
        toolbox = self._current()
        if server is None:
            return toolbox.upstreams()
        upstream = toolbox.upstream(server)
        if upstream is None:
            raise NotFound(f"MCP server {server!r} not found", {"server": server})
        return [upstream]

    async def list_tools(
        self, principal: Principal, server: str | None = None
    ) -> list[ExposedTool]:
        """The tools `principal` may call, of every server or of `server` (NotFound
        when there is no such server); a server that cannot list is left out."""
        upstreams = self._upstreams(server)
        grant = principal.mcp_tools
        if not grant:
            return []
        listed = await asyncio.gather(*(self.toolbox.listed(u) for u in upstreams))
        out: list[ExposedTool] = []
        for upstream, tools in zip(upstreams, listed, strict=True):
            out.extend(_exposed(principal, upstream, tools))
        return out

    def upstream(self, server_id: str) -> Upstream | None:
        """The configured server `server_id`, on the current config."""
        return self._current().upstream(server_id)

    def transient(self, config: McpServerConfig, headers: dict[str, str]) -> Upstream:
        """A client of a server for one request, with that request's own `headers`."""
        return self.toolbox.transient(config, headers)

    def retire(self, upstream: Upstream) -> None:
        """Closes a client `transient` made, in the background."""
        self.toolbox.retire(upstream)

    async def refuse_keys(self, headers: dict[str, str], fields: dict[str, str]) -> None:
        """InvalidArgument naming the field (`fields`, by header) of a header whose value
        holds a key of this gateway, configured or stored."""
        secrets = [key.secret for key in self.live.current.config.keys]
        known = self.accounts.admission.keys.known
        await upstream_headers.refuse_keys(headers, fields, secrets, known)

    async def listing(self, principal: Principal, upstream: Upstream) -> list[ExposedTool]:
        """The tools of one server `principal` may call; ToolServerError when the
        server cannot list them."""
        if not principal.mcp_tools:
            return []
        return _exposed(principal, upstream, await upstream.list_tools())

    async def call_tool(
        self,
        principal: Principal,
        name: str,
        arguments: dict[str, Any],
        *,
        request_id: str,
        response_metadata: dict[str, str],
        server: str | None = None,
        response_id: str = "",
        via: Upstream | None = None,
    ) -> ToolAnswer:
        """Calls the exposed tool `name` for `principal` (only among `server`'s tools
        when given; on `via`, a client made for one request, instead of the configured
        server of that id). A tool's own failure is an answer; everything else that
        stops the call is a GatewayError: ToolNotFound, RateLimited or BudgetExhausted,
        DeadlineExceeded, UpstreamError (the server failed or its result is too large).
        Its ledger row carries `response_id`, the response it ran inside, if any."""
        started, clock = time.time(), time.perf_counter()
        server_id, _, tool = name.partition("__")
        upstream = via if via is not None and via.config.id == server_id else None
        upstream = upstream or self._current().upstream(server_id)
        # A name no server holds is the caller's text: kept short, and no server named.
        known = server_id if upstream is not None else ""
        ledger = LedgerRow(principal, request_id, started, clock, known, tool[:64], response_id)
        if (
            upstream is None
            or server not in (None, server_id)
            or exposed_name(upstream.config, tool) != name
            or not granted(principal.mcp_tools, name)
        ):
            self._write(ledger.ended("denied", 0.0, 0, not_found(name)))
            raise not_found(name)
        guard = self.live.current.guardrails.guard(principal, [], {}, True, response_metadata)
        if guard is not None:
            try:
                arguments = await _scanned(guard, arguments, "tool_calls")
            except GatewayError as refused:  # a guardrail blocks the arguments
                self._write(ledger.ended("denied", 0.0, 0, refused))
                raise
        price = upstream.config.price_per_call
        try:
            reservation = await self.accounts.hold(
                principal, new_ticket(), response_metadata, price
            )
        except GatewayError as refused:
            self._write(ledger.ended("denied", 0.0, 0, refused))
            raise
        outcome, cost, size = "", 0.0, 0
        error: BaseException | None = None
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                      "mcp.server": server_id}  # fmt: skip
        try:
            with span(f"execute_tool {name}", **attributes) as traced:
                answer = await self._run(upstream, name, tool, arguments)
                if guard is not None:  # the result, before the caller or a model reads it
                    result = await _scanned(guard, answer.result, "tool_results")
                    answer = replace(answer, result=result)
                    guard.report()
                outcome = "tool_error" if answer.is_error else "ok"
                cost, size = price, answer.size
                if traced is not None:
                    traced.set_attribute("gateway.mcp.outcome", outcome)
                return replace(answer, cost_usd=cost)
        except GatewayError as exc:
            error, outcome = exc, exc.metadata.get("outcome", "denied")
            cost = price if outcome == "too_large" else 0.0  # the server did the work
            raise
        except BaseException as exc:  # the caller went away (or a bug): nothing charged
            error = exc
            outcome = "cancelled" if isinstance(exc, asyncio.CancelledError) else "upstream_error"
            raise
        finally:
            self.accounts.release(reservation, cost)
            self._write(ledger.ended(outcome, cost, size, error))

    async def _run(
        self, upstream: Upstream, name: str, tool: str, arguments: dict[str, Any]
    ) -> ToolAnswer:
        """The call on its server; its failures as gateway errors naming the server and
        carrying the ledger's outcome."""
        meta = {"server": upstream.config.id, "tool": name}
        try:
            tools = await upstream.list_tools()
            if not any(t["name"] == tool for t in tools):
                tools = await upstream.list_tools(fresh=True)
            if not any(t["name"] == tool for t in tools):
                raise not_found(name)
            return await upstream.client.call_tool(tool, arguments)
        except ToolTimeout as exc:
            raise DeadlineExceeded(str(exc), {**meta, "outcome": exc.outcome}) from None
        except ToolServerError as exc:
            raise UpstreamError(str(exc), {**meta, "outcome": exc.outcome}) from None

    def servers(self, server: str | None) -> list[Upstream]:
        """Every server of the current config, or `server` alone (NotFound when none)."""
        return self._upstreams(server)

    def write(self, row: UsageRecord) -> None:
        """Records a row of MCP work: the ledger, this instance's tallies, and the tool
        metrics when it is a tool call (a resource's URI is no metric label)."""
        self._write(row)

    def _write(self, row: UsageRecord) -> None:
        self.accounts.ledger.record(row)
        if row.method == METHOD:
            self.report(row)
        self.recent.append(row)
        if row.mcp_server:
            tally = self.tallies.setdefault(row.mcp_server, Tally())
            tally.calls += 1
            tally.errors += row.mcp_outcome not in ("ok", "tool_error")
            tally.cost_usd += row.total_cost_usd or 0.0


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """What a call's ledger row knows before the call ends (a tool call's, or a
    resource read's or prompt get's: `method`)."""

    principal: Principal
    request_id: str
    started: float
    clock: float
    server: str
    tool: str
    response_id: str
    method: str = METHOD

    def ended(
        self, outcome: str, cost: float, size: int, error: BaseException | None
    ) -> UsageRecord:
        status, reason = ("OK", "") if error is None else status_of(error)
        return UsageRecord(
            ts=self.started, request_id=self.request_id, key_id=self.principal.key_id,
            key_name=self.principal.name, method=self.method, model="", provider=self.server,
            prompt_tokens=0, completion_tokens=0, total_tokens=0, input_cost_usd=None,
            output_cost_usd=None, cache_input_cost_usd=None, total_cost_usd=cost,
            latency_ms=round((time.perf_counter() - self.clock) * 1000, 3), ttft_ms=None,
            status=status, error_reason=reason, mcp_server=self.server, mcp_tool=self.tool,
            mcp_outcome=outcome, result_bytes=size, response_id=self.response_id,
            team_id=self.principal.team_id, org_id=self.principal.org_id,
            user_id=self.principal.user_id,
        )  # fmt: skip


def _exposed(principal: Principal, upstream: Upstream, tools: list[Tool]) -> list[ExposedTool]:
    """Of a server's tools, those its filter lets through and `principal`'s grant
    covers, each once, under its exposed name."""
    out: list[ExposedTool] = []
    seen: set[str] = set()
    for tool in tools:
        name = exposed_name(upstream.config, tool["name"])
        if name is None or name in seen or not granted(principal.mcp_tools, name):
            continue
        seen.add(name)
        out.append(ExposedTool(name, upstream.config.id, tool["name"], {**tool, "name": name}))
    return out


async def _scanned(guard: Guard, value: Any, phase: str) -> Any:
    """`value` past the call's guardrails for `phase` (a model's scan off the loop)."""
    if guard.slow:
        return await asyncio.to_thread(guard.value, value, phase)
    return guard.value(value, phase)
