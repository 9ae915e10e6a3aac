"""What the MCP gateway does when upstreams fail, grow, vanish or change: a stdio child
killed mid-call, a slow or oversized answer, a server that is down, fifty reloads, a
grant a reload takes away, and a session continued by another gateway."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from server.base import config
from tests.support.gateways import eventually, running_gateway
from tests.support.mcp.upstreams import (
    ALICE,
    BOB,
    http_upstream,
    mcp_config,
    sdk_client,
    stdio_children,
)
from tests.support.ports import steady_port


def mcp_url(gw) -> str:
    return f"http://127.0.0.1:{gw.http_port}/mcp"


def pid_of(result) -> int:
    return int(result.content[0].text.split(":")[1])


@pytest.fixture(scope="module")
async def upstream():
    async with http_upstream() as url:
        yield url


async def test_a_child_killed_mid_call_fails_that_call_once_and_the_next_succeeds(upstream) -> None:
    async with (
        running_gateway(mcp_config(upstream)) as gw,
        sdk_client(mcp_url(gw), ALICE) as client,
    ):
        first = pid_of(await client.call_tool("local__echo", {"text": "a"}))
        slow = asyncio.create_task(client.call_tool("local__slow", {"seconds": 5}))
        await asyncio.sleep(0.5)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(MCPError) as failed:
            await slow
        assert failed.value.error.code == -32603
        assert failed.value.error.data == {"server": "local", "reason": "upstream_error"}
        assert "local: the server process exited" in failed.value.error.message
        second = pid_of(await client.call_tool("local__echo", {"text": "b"}))
        assert second != first
        # A tool that kills its own process: one error, then a new child answers.
        with pytest.raises(MCPError):
            await client.call_tool("local__die", {})
        third = pid_of(await client.call_tool("local__echo", {"text": "c"}))
        assert third not in (first, second)
        assert stdio_children() == ([third], [])
    assert stdio_children() == ([], [])


async def test_the_child_sees_only_what_the_config_gives_it(upstream) -> None:
    async with (
        running_gateway(mcp_config(upstream)) as gw,
        sdk_client(mcp_url(gw), ALICE) as client,
    ):
        seen = (await client.call_tool("local__whoami", {})).content[0].text
    assert seen == repr([("MCP_TEST_TOKEN", "child-token-1234")])


async def test_the_callers_credentials_never_go_upstream(upstream) -> None:
    data = mcp_config(upstream)
    os.environ["GW_TEST_UPSTREAM_TOKEN"] = "Bearer upstream-secret"
    data["mcp"]["servers"][0]["headers"] = {"Authorization": "GW_TEST_UPSTREAM_TOKEN"}
    async with running_gateway(data) as gw, sdk_client(mcp_url(gw), ALICE) as client:
        sent = (await client.call_tool("web__headers", {})).structured_content
    assert sent["authorization"] == "Bearer upstream-secret"
    assert ALICE not in repr(sent)


async def test_a_slow_answer_is_a_timeout_naming_the_server(upstream) -> None:
    # A stdio child's first answer includes its start, and a timed-out child is started
    # again: its bound leaves room for a start on a loaded machine.
    bounds = {"web": 2.5, "local": 15}
    data = mcp_config(upstream)
    for server in data["mcp"]["servers"]:
        server["timeout_s"] = bounds[server["id"]]
    async with running_gateway(data) as gw, sdk_client(mcp_url(gw), ALICE) as client:
        for server, bound in bounds.items():

            async def started(server: str = server) -> None:
                try:
                    answer = await client.call_tool(f"{server}__add", {"a": 1, "b": 2})
                except MCPError as error:
                    raise AssertionError(error.error.message) from None
                assert answer.structured_content == {"sum": 3}

            await eventually(started, 60)
            with pytest.raises(MCPError) as slow:
                await client.call_tool(f"{server}__slow", {"seconds": 60})
            assert slow.value.error.data == {"server": server, "reason": "timeout"}
            assert slow.value.error.message.startswith(f"{server}: no answer within {bound:g}s")


async def test_an_oversized_answer_is_refused_and_a_larger_limit_relays_it(upstream) -> None:
    data = mcp_config(upstream)
    for server in data["mcp"]["servers"]:
        server["timeout_s"] = 60  # a 5 MiB answer on a loaded machine
    async with running_gateway(data) as gw, sdk_client(mcp_url(gw), ALICE) as client:
        for server in ("web", "local"):
            with pytest.raises(MCPError) as big:
                await client.call_tool(f"{server}__big", {})
            assert big.value.error.data == {"server": server, "reason": "too_large"}
            assert "mcp.max_result_bytes" in big.value.error.message
            # The server is still there for the next call.
            assert (
                await client.call_tool(f"{server}__add", {"a": 1, "b": 2})
            ).structured_content == {"sum": 3}
    # The text comes twice: as content and as structured content.
    data["mcp"]["max_result_bytes"] = 12 * 1024 * 1024
    data["server"]["max_body_bytes"] = 8 * 1024 * 1024
    async with running_gateway(data) as gw, sdk_client(mcp_url(gw), ALICE) as client:
        for server in ("web", "local"):
            answer = await client.call_tool(f"{server}__big", {})
            assert answer.content[0].text == "x" * (5 * 1024 * 1024)


async def test_a_down_server_is_left_out_and_reported_down(upstream) -> None:
    data = mcp_config("http://127.0.0.1:9/mcp")
    async with running_gateway(data) as gw, sdk_client(mcp_url(gw), ALICE) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names and all(n.startswith("local__") for n in names)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("web__echo", {"text": "x"})
        assert refused.value.error.data == {"server": "web", "reason": "upstream_error"}
        async with httpx.AsyncClient() as http:
            scraped = (await http.get(f"http://127.0.0.1:{gw.http_port}/metrics")).text
    assert 'gateway_mcp_server_up{server="web"} 0.0' in scraped
    assert 'gateway_mcp_server_up{server="local"} 1.0' in scraped


@pytest.mark.slow
async def test_fifty_reloads_leave_one_child_per_server(upstream) -> None:
    data = mcp_config(upstream)
    async with running_gateway(data) as gw, sdk_client(mcp_url(gw), ALICE) as client:
        control = gw.gateway.control
        current = {"data": data}
        control.source = lambda: (config.parse(current["data"], "test"), "test")
        for i in range(50):
            # Every other reload changes the stdio server's settings: a new client,
            # whose child starts only once the old one is gone.
            changed = mcp_config(upstream)
            changed["mcp"]["servers"][1]["timeout_s"] = 30 + i % 2  # room for a start
            current["data"] = changed
            await control.reload()
            if i % 10 == 0:
                await client.call_tool("local__echo", {"text": str(i)})
        answer = await client.call_tool("local__echo", {"text": "last"})

        async def one_child_left() -> None:  # the last retired child stops in its time
            assert stdio_children() == ([pid_of(answer)], [])

        await eventually(one_child_left)
    assert stdio_children() == ([], [])


async def test_a_grant_removed_by_reload_stops_the_next_call_in_an_open_session(upstream) -> None:
    data = mcp_config(upstream)
    async with running_gateway(data) as gw:
        control = gw.gateway.control
        reduced = mcp_config(upstream)
        reduced["keys"][1]["mcp_tools"] = ["web__add"]
        control.source = lambda: (config.parse(reduced, "test"), "test")
        async with sdk_client(mcp_url(gw), BOB, "legacy") as client:
            await client.call_tool("web__echo", {"text": "before"})
            await control.reload()
            with pytest.raises(MCPError) as refused:
                await client.call_tool("web__echo", {"text": "after"})
            assert refused.value.error.code == -32602
            assert {t.name for t in (await client.list_tools()).tools} == {"web__add"}


async def test_a_session_opened_on_one_gateway_continues_on_another(upstream, monkeypatch) -> None:
    monkeypatch.setenv("GW_TEST_SESSION_SECRET", "one secret for every replica of the gateway")
    shared = mcp_config(upstream, session_secret_env="GW_TEST_SESSION_SECRET")
    headers = {"authorization": f"Bearer {BOB}", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "web__add", "arguments": {"a": 1, "b": 1}}}  # fmt: skip
    async with (
        running_gateway(shared) as one,
        running_gateway(shared) as two,
        running_gateway(mcp_config(upstream)) as other,
        httpx.AsyncClient(timeout=30) as http,
    ):
        opened = await http.post(mcp_url(one), json=init, headers=headers)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        answer = await http.post(mcp_url(two), json=call, headers=headers | session)
        assert answer.status_code == 200
        assert answer.json()["result"]["structuredContent"] == {"sum": 2}
        # A gateway with another secret does not know the session.
        assert (
            await http.post(mcp_url(other), json=call, headers=headers | session)
        ).status_code == 404


@pytest.mark.parametrize("flags", [(), ("--handshake-only",)], ids=["stateless", "handshake"])
async def test_upstreams_of_either_generation(flags) -> None:
    """The gateway speaks 2026-07-28 to a server that answers server/discover, and shakes
    hands with one that does not (keeping its session)."""
    async with (
        http_upstream(*flags) as url,
        running_gateway(mcp_config(url)) as gw,
        sdk_client(mcp_url(gw), ALICE) as client,
    ):
        sent = (await client.call_tool("web__headers", {})).structured_content
        again = (await client.call_tool("web__headers", {})).structured_content
        assert (await client.call_tool("web__add", {"a": 1, "b": 2})).structured_content == {
            "sum": 3
        }
    if flags:
        assert sent["mcp-protocol-version"] == "2025-11-25"
        assert sent["mcp-session-id"] and sent["mcp-session-id"] == again["mcp-session-id"]
    else:
        assert sent["mcp-protocol-version"] == "2026-07-28"
        assert sent["mcp-method"] == "tools/call" and sent["mcp-name"] == "headers"
        assert "mcp-session-id" not in sent


async def test_a_restarted_upstream_that_forgot_the_session_gets_a_new_hand_shake() -> None:
    port = steady_port()
    data = mcp_config(f"http://127.0.0.1:{port}/mcp")
    async with running_gateway(data) as gw, sdk_client(mcp_url(gw), ALICE) as client:
        async with http_upstream("--handshake-only", port=port):
            first = (await client.call_tool("web__headers", {})).structured_content
        async with http_upstream("--handshake-only", port=port):
            second = (await client.call_tool("web__headers", {})).structured_content
    assert first["mcp-session-id"] and second["mcp-session-id"]
    assert first["mcp-session-id"] != second["mcp-session-id"]
