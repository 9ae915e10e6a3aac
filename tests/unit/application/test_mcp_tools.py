"""The MCP core over in-memory tool servers: what each call charges, reserves and writes
to the ledger for every way it can end, what a key lists, and how a reload keeps or
replaces the servers' clients. (The integration tests run the same core against real
servers and clients.)"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from server.accounting.accounts import Accounts
from server.accounting.admission import Admission, KeyDirectory
from server.accounting.budget import MemoryBudgets
from server.accounting.ledger import Ledger
from server.accounting.ratelimit import BucketLimiter
from server.application.mcp.toolbox import Toolbox
from server.application.mcp.tools import Tools
from server.application.pipeline.state import Live, snapshot_of
from server.base import config
from server.base.caller import Principal
from server.base.errors import (
    BudgetExhausted,
    DeadlineExceeded,
    NotFound,
    RateLimited,
    ToolNotFound,
    UpstreamError,
)
from server.base.record import UsageRecord
from server.base.tools import (
    ToolAnswer,
    ToolRefused,
    ToolServerError,
    ToolTimeout,
    ToolTooLarge,
)
from server.providers import registry
from server.routing.policies import build_router
from tests.support.gateways import default_config_dict

OK = ToolAnswer({"content": [{"type": "text", "text": "fine"}]}, 120)
TOOL_ERROR = ToolAnswer({"content": [], "isError": True}, 30)


class MemoryServer:
    """A ToolServer answering from a script: what `answers[name]` holds (an answer, or
    an exception to raise, or an Event to wait on)."""

    def __init__(self, server_id: str, tools: list[str]) -> None:
        self.server_id = server_id
        self.tools = [{"name": n, "description": n, "inputSchema": {"type": "object"}}
                      for n in tools]  # fmt: skip
        self.answers: dict[str, Any] = {}
        self.calls: list[tuple[str, dict]] = []
        self.listings = 0
        self.closed = False
        self.up = True
        self.down = False

    async def list_tools(self) -> list[dict]:
        self.listings += 1
        if self.down:
            self.up = False
            raise ToolServerError(f"{self.server_id}: refused")
        return self.tools

    async def call_tool(self, name: str, arguments: dict) -> ToolAnswer:
        self.calls.append((name, arguments))
        answer = self.answers.get(name, OK)
        if isinstance(answer, asyncio.Event):
            await answer.wait()
            return OK
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def aclose(self) -> None:
        self.closed = True


def mcp_section(**changes) -> dict:
    return {
        "servers": [
            {"id": "web", "transport": "http", "url": "http://127.0.0.1:9/mcp",
             "price_per_call": 0.25, "tools": {"deny": ["secret"]}},
            {"id": "files", "transport": "http", "url": "http://127.0.0.1:9/files"},
        ],
        **changes,
    }  # fmt: skip


class World:
    def __init__(self, section: dict) -> None:
        data = default_config_dict()
        data["mcp"] = section
        self.live = Live(snapshot_of(config.parse(data, "test"), registry.build, build_router))
        self.servers: dict[str, MemoryServer] = {}
        self.built: list[MemoryServer] = []
        self.budgets = MemoryBudgets(self._spent)
        self.accounts = Accounts(
            Admission(KeyDirectory(), BucketLimiter(window_s=60)), Ledger(None), self.budgets
        )
        self.rows: list[UsageRecord] = []
        self.toolbox = Toolbox(self._build, self.live.current.config.mcp)
        self.tools = Tools(self.live, self.accounts, self.toolbox, report=self.rows.append)

    async def _spent(self, key_id: str, since: float) -> float:
        return 0.0

    def _build(self, server: config.McpServerConfig, limit: int, after: Any) -> MemoryServer:
        names = {"web": ["echo", "search", "secret", "bad.name", "echo"],
                 "files": ["read_file", "write_file"]}[server.id]  # fmt: skip
        made = MemoryServer(server.id, names)
        self.servers[server.id] = made
        self.built.append(made)
        return made

    def reload(self, section: dict) -> None:
        data = default_config_dict()
        data["mcp"] = section
        self.live.current = snapshot_of(config.parse(data, "test"), registry.build, build_router)
        self.toolbox.reconcile(self.live.current.config.mcp)

    async def call(self, principal: Principal, name: str, **kw: Any) -> ToolAnswer:
        return await self.tools.call_tool(principal, name, {"q": 1}, request_id="r-1",
                                          response_metadata={}, **kw)  # fmt: skip

    async def spent(self, principal: Principal) -> tuple[float, float]:
        await asyncio.sleep(0)  # the settlement runs in the background
        assert principal.budget is not None
        return await self.budgets.status(principal.budget)


def key(*grant: str, **limits: Any) -> Principal:
    return Principal("key-1", "k", "api", mcp_tools=tuple(grant), **limits)


def outcome(row: UsageRecord) -> tuple:
    return (row.mcp_server, row.mcp_tool, row.mcp_outcome, row.total_cost_usd, row.status,
            row.error_reason, row.result_bytes)  # fmt: skip


async def test_a_call_that_answers_is_charged_its_price() -> None:
    world = World(mcp_section())
    principal = key("web__*", budget_usd=1.0)
    answer = await world.call(principal, "web__echo")
    assert answer.result == OK.result and answer.cost_usd == 0.25
    assert world.servers["web"].calls == [("echo", {"q": 1})]
    (row,) = world.rows
    assert outcome(row) == ("web", "echo", "ok", 0.25, "OK", "", 120)
    assert (row.method, row.provider, row.key_id, row.request_id) == (
        "CallTool",
        "web",
        "key-1",
        "r-1",
    )
    assert (row.prompt_tokens, row.model) == (0, "")
    assert await world.spent(principal) == (0.25, 0.0)


async def test_a_tools_own_failure_is_an_answer_and_charged() -> None:
    world = World(mcp_section())
    world.toolbox.reconcile(world.live.current.config.mcp)
    world.servers["web"].answers["echo"] = TOOL_ERROR
    answer = await world.call(key("*"), "web__echo")
    assert answer.is_error
    assert outcome(world.rows[0]) == ("web", "echo", "tool_error", 0.25, "OK", "", 30)


@pytest.mark.parametrize(
    ("name", "grant", "scope", "server"),
    [
        ("web__echo", (), None, "web"),  # no grant
        ("web__echo", ("files__*",), None, "web"),  # another server's
        ("web__secret", ("*",), None, "web"),  # the server's deny list
        ("web__bad.name", ("*",), None, "web"),  # not a function name
        ("nowhere__echo", ("*",), None, ""),  # no such server
        ("web__echo", ("*",), "files", "web"),  # not on this path's server
        ("webecho", ("*",), None, ""),
        ("web__", ("*",), None, "web"),
    ],
)
async def test_refused_before_anything_runs(name, grant, scope, server) -> None:
    world = World(mcp_section())
    principal = key(*grant, requests_per_minute=1, budget_usd=1.0)
    with pytest.raises(ToolNotFound) as refused:
        await world.call(principal, name, server=scope)
    assert refused.value.message == f"tool {name!r} not found"
    assert world.servers["web"].calls == [] and world.servers["web"].listings == 0
    (row,) = world.rows
    assert (row.mcp_server, row.mcp_outcome, row.total_cost_usd, row.status, row.error_reason) == (
        server, "denied", 0.0, "NOT_FOUND", "TOOL_NOT_FOUND",
    )  # fmt: skip
    # Nothing was counted or reserved: the one request a minute is still there.
    await world.call(replace(principal, mcp_tools=("*",)), "web__echo")
    assert await world.spent(principal) == (0.25, 0.0)


async def test_a_granted_name_no_server_has_is_not_found_and_released() -> None:
    world = World(mcp_section())
    principal = key("web__*", budget_usd=1.0)
    with pytest.raises(ToolNotFound):
        await world.call(principal, "web__gone")
    assert world.servers["web"].calls == []
    assert world.servers["web"].listings == 2  # the kept list, then a fresh one
    assert outcome(world.rows[0]) == (
        "web",
        "gone",
        "denied",
        0.0,
        "NOT_FOUND",
        "TOOL_NOT_FOUND",
        0,
    )
    assert await world.spent(principal) == (0.0, 0.0)


async def test_a_long_name_is_cut_in_the_ledger() -> None:
    world = World(mcp_section())
    with pytest.raises(ToolNotFound):
        await world.call(key("*"), "web__" + "x" * 500)
    assert world.rows[0].mcp_tool == "x" * 64


@pytest.mark.parametrize(
    ("error", "raised", "ending", "charged"),
    [
        (ToolTimeout("web: no answer within 1s"), DeadlineExceeded, "timeout", 0.0),
        (ToolTooLarge("web: too large"), UpstreamError, "too_large", 0.25),
        (ToolServerError("web: crashed"), UpstreamError, "upstream_error", 0.0),
        (ToolRefused("web: refused", -32602), UpstreamError, "upstream_error", 0.0),
    ],
)
async def test_failures_name_the_server_and_charge_what_ran(error, raised, ending, charged) -> None:
    world = World(mcp_section())
    world.toolbox.reconcile(world.live.current.config.mcp)
    world.servers["web"].answers["echo"] = error
    principal = key("*", budget_usd=1.0)
    with pytest.raises(raised) as failed:
        await world.call(principal, "web__echo")
    assert failed.value.message == str(error)
    assert failed.value.metadata == {"server": "web", "tool": "web__echo", "outcome": ending}
    row = world.rows[0]
    assert (row.mcp_outcome, row.total_cost_usd, row.status) == (
        ending, charged, raised.code.name,
    )  # fmt: skip
    assert await world.spent(principal) == (charged, 0.0)


async def test_a_caller_gone_mid_call_is_cancelled_and_not_charged() -> None:
    world = World(mcp_section())
    world.toolbox.reconcile(world.live.current.config.mcp)
    world.servers["web"].answers["echo"] = asyncio.Event()
    principal = key("*", budget_usd=1.0)
    task = asyncio.create_task(world.call(principal, "web__echo"))
    await asyncio.sleep(0.01)
    assert await world.spent(principal) == (0.0, 0.25)  # reserved while it runs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert outcome(world.rows[0])[:5] == ("web", "echo", "cancelled", 0.0, "CANCELLED")
    assert await world.spent(principal) == (0.0, 0.0)


async def test_the_budget_and_the_rate_limit_refuse_before_the_server_is_called() -> None:
    world = World(mcp_section())
    poor = key("*", budget_usd=0.3)
    await world.call(poor, "web__echo")
    with pytest.raises(BudgetExhausted):
        await world.call(poor, "web__echo")
    assert [r.error_reason for r in world.rows] == ["", "BUDGET_EXHAUSTED"]
    assert world.rows[1].mcp_outcome == "denied"
    # A free server's tool still fits: the budget holds prices, not calls.
    await world.call(poor, "files__read_file")
    hasty = Principal("key-2", "h", "api", requests_per_minute=1, mcp_tools=("*",))
    await world.call(hasty, "files__read_file")
    with pytest.raises(RateLimited):
        await world.call(hasty, "files__read_file")
    assert world.rows[-1].mcp_outcome == "denied" and world.rows[-1].error_reason == "RATE_LIMITED"
    assert len(world.servers["web"].calls) == 1 and len(world.servers["files"].calls) == 2


async def test_listing_a_keys_tools() -> None:
    world = World(mcp_section())
    everything = await world.tools.list_tools(key("*"))
    # Less the deny list, the invalid name and the duplicate; in config order.
    assert [t.name for t in everything] == [
        "web__echo", "web__search", "files__read_file", "files__write_file",
    ]  # fmt: skip
    echo = everything[0]
    assert (echo.server, echo.upstream_name) == ("web", "echo")
    assert echo.definition == {"name": "web__echo", "description": "echo",
                               "inputSchema": {"type": "object"}}  # fmt: skip
    assert world.servers["web"].tools[0]["name"] == "echo"  # the server's own untouched
    some = await world.tools.list_tools(key("files__read*", "web__search"))
    assert [t.name for t in some] == ["web__search", "files__read_file"]
    only = await world.tools.list_tools(key("*"), "files")
    assert [t.server for t in only] == ["files", "files"]
    with pytest.raises(NotFound) as unknown:
        await world.tools.list_tools(key("*"), "nope")
    assert unknown.value.message == "MCP server 'nope' not found"
    assert unknown.value.metadata == {"server": "nope"}
    listings = world.servers["web"].listings
    assert await world.tools.list_tools(key()) == []
    assert world.servers["web"].listings == listings  # an empty grant asks no server
    world.servers["web"].down = True
    world.servers["web"].tools = []
    world.toolbox.upstream("web").listed_at = -1.0
    assert [t.server for t in await world.tools.list_tools(key("*"))] == ["files", "files"]
    assert world.toolbox.health() == {"web": False, "files": True}


async def test_a_reload_keeps_unchanged_clients_and_closes_the_rest() -> None:
    world = World(mcp_section())
    web, files = world.servers["web"], world.servers["files"]
    world.reload(mcp_section())
    assert (
        world.toolbox.upstream("web").client is web
        and world.toolbox.upstream("files").client is files
    )
    changed = mcp_section()
    changed["servers"][0]["price_per_call"] = 0.5
    changed["servers"].pop()
    world.reload(changed)
    await asyncio.sleep(0)
    assert web.closed and files.closed
    assert (
        world.toolbox.upstream("web").client is not web and world.toolbox.upstream("files") is None
    )
    newer = world.toolbox.upstream("web").client
    world.reload(mcp_section(max_result_bytes=2048, servers=changed["servers"]))
    assert world.toolbox.upstream("web").client is not newer
    await world.toolbox.aclose()
    assert all(server.closed for server in world.built)
