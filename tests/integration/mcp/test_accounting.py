"""Every MCP tool call is one ledger row, priced, reserved against the key's budget,
counted against its rate limit, in the metrics, on the admin page and in a trace; keys
get their grants from the config and from the admin API alike."""

from __future__ import annotations

import re

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from server.ops import tracing
from tests.support.gateways import running_gateway
from tests.support.mcp.upstreams import ALICE, BOB, http_upstream, mcp_config, sdk_client

ADMIN_KEY = "gw-mcp-admin-key-0000000"
CAROL = "gw-mcp-carol-key-0000000"  # a budget of two web calls
DAVE = "gw-mcp-dave-key-00000000"  # two requests a minute
ERIN = "gw-mcp-erin-key-00000000"  # two requests a minute, for resources and prompts
ACCEPT = "application/json, text/event-stream"


def config(url: str) -> dict:
    data = mcp_config(url)
    data["keys"] += [
        {"name": "admin", "kind": "admin", "secret": ADMIN_KEY},
        {"name": "carol", "kind": "api", "secret": CAROL, "mcp_tools": ["web__*"],
         "budget_usd": 0.005},
        {"name": "dave", "kind": "api", "secret": DAVE, "mcp_tools": ["local__*"],
         "requests_per_minute": 2},
        {"name": "erin", "kind": "api", "secret": ERIN, "mcp_tools": ["local__*"],
         "requests_per_minute": 2},
    ]  # fmt: skip
    return data


@pytest.fixture(scope="module")
async def gw():
    async with http_upstream() as url, running_gateway(config(url)) as running:
        yield running


def url(gw) -> str:
    return f"http://127.0.0.1:{gw.http_port}/mcp"


def metric_sum(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.index("}")]))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def rows(gw, key: str) -> list[dict]:
    await gw.gateway.accounts.ledger.flush()
    found = await gw.gateway.store.db.fetch(
        "SELECT method, provider, mcp_server, mcp_tool, mcp_outcome, result_bytes, "
        "total_cost_usd, status, error_reason FROM usage_records WHERE key_name = ? "
        "AND method = 'CallTool' ORDER BY id", key,
    )  # fmt: skip
    return [dict(r) for r in found]


async def test_n_calls_are_n_rows_whose_prices_sum_to_the_metric(gw) -> None:
    async with sdk_client(url(gw), ALICE) as client:
        for i in range(3):
            await client.call_tool("web__add", {"a": i, "b": 1})
        for _ in range(2):
            await client.call_tool("local__echo", {"text": "x"})
        await client.call_tool("local__fail", {"reason": "no"})
        with pytest.raises(MCPError):
            await client.call_tool("local__hidden", {})
    found = await rows(gw, "alice")
    assert len(found) == 7
    outcomes = [
        (r["mcp_server"], r["mcp_tool"], r["mcp_outcome"], r["total_cost_usd"]) for r in found
    ]
    assert outcomes == [
        *[("web", "add", "ok", 0.002)] * 3,
        *[("local", "echo", "ok", 0.001)] * 2,
        ("local", "fail", "tool_error", 0.001),
        ("local", "hidden", "denied", 0.0),
    ]
    assert all(r["result_bytes"] > 0 for r in found[:6]) and found[6]["result_bytes"] == 0
    assert found[6]["status"] == "NOT_FOUND" and found[6]["error_reason"] == "TOOL_NOT_FOUND"
    async with httpx.AsyncClient() as http:
        scraped = (await http.get(f"http://127.0.0.1:{gw.http_port}/metrics")).text
    charged = sum(r["total_cost_usd"] for r in await gw.gateway.store.db.fetch(
        "SELECT total_cost_usd FROM usage_records WHERE method = 'CallTool'"))  # fmt: skip
    assert metric_sum(scraped, "gateway_mcp_tool_cost_usd_total") == pytest.approx(charged)
    assert metric_sum(scraped, "gateway_mcp_tool_calls_total", tool="web__add", outcome="ok") >= 3
    assert metric_sum(scraped, "gateway_mcp_tool_calls_total", outcome="tool_error") >= 1
    assert metric_sum(scraped, "gateway_mcp_tool_call_duration_seconds_count", server="web") >= 3


async def test_the_price_is_reserved_against_the_budget(gw) -> None:
    headers = {"authorization": f"Bearer {CAROL}", "accept": ACCEPT}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "web__add", "arguments": {"a": 1, "b": 2}}}  # fmt: skip
    async with httpx.AsyncClient(timeout=30) as http:
        opened = await http.post(url(gw), json=init, headers=headers)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        answers = [await http.post(url(gw), json=call, headers=headers) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    refused = answers[2]
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["data"] == {"reason": "BUDGET_EXHAUSTED"}
    assert "budget" in refused.json()["error"]["message"]
    found = await rows(gw, "carol")
    assert [(r["mcp_outcome"], r["error_reason"]) for r in found] == [
        ("ok", ""), ("ok", ""), ("denied", "BUDGET_EXHAUSTED"),
    ]  # fmt: skip


async def test_resource_reads_and_prompt_gets_are_counted_rows(gw) -> None:
    async with sdk_client(url(gw), ERIN) as client:  # two requests a minute
        read = await client.read_resource("gateway://local/note://readme")
        assert read.contents[0].text == "tests: read me"
        await client.get_prompt("local__greet", {"name": "Ada"})
        with pytest.raises(MCPError) as refused:
            await client.read_resource("gateway://local/note://9")
    assert "rate limit of 2 requests per minute" in str(refused.value)
    await gw.gateway.accounts.ledger.flush()
    found = await gw.gateway.store.db.fetch(
        "SELECT method, mcp_server, mcp_tool, mcp_outcome, total_cost_usd, result_bytes "
        "FROM usage_records WHERE key_name = 'erin' AND method <> 'CallTool' ORDER BY id"
    )
    assert [tuple(dict(r).values()) for r in found][:2] == [
        ("ReadResource", "local", "gateway://local/note://readme", "ok", 0.0,
         found[0]["result_bytes"]),
        ("GetPrompt", "local", "greet", "ok", 0.0, found[1]["result_bytes"]),
    ]  # fmt: skip
    assert found[0]["result_bytes"] > 0 and found[1]["result_bytes"] > 0
    assert [(r["method"], r["mcp_outcome"]) for r in found[2:]] == [("ReadResource", "denied")]


async def test_calls_count_against_the_rate_limit(gw) -> None:
    async with sdk_client(url(gw), DAVE, "legacy") as client:
        await client.call_tool("local__add", {"a": 1, "b": 1})
        await client.call_tool("local__add", {"a": 1, "b": 1})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("local__add", {"a": 1, "b": 1})
    assert "rate limit of 2 requests per minute" in str(refused.value)
    assert [r["mcp_outcome"] for r in await rows(gw, "dave")] == ["ok", "ok", "denied"]


async def test_stored_keys_get_grants_through_the_admin_api(gw) -> None:
    base = f"http://127.0.0.1:{gw.http_port}"
    admin = {"x-admin-key": ADMIN_KEY}
    async with httpx.AsyncClient(base_url=base) as http:
        bad = await http.post("/v1/admin/keys", headers=admin,
                              json={"name": "x", "kind": "api", "mcp_tools": ["web/*"]})  # fmt: skip
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "mcp_tools"
        made = await http.post("/v1/admin/keys", headers=admin,
                               json={"name": "erin", "kind": "api", "mcp_tools": ["local__add"]})  # fmt: skip
        assert made.status_code == 200, made.text
        assert made.json()["key"]["mcp_tools"] == ["local__add"]
        secret = made.json()["secret"]
        fetched = await http.get(f"/v1/admin/keys/{made.json()['key']['id']}", headers=admin)
        assert fetched.json()["key"]["mcp_tools"] == ["local__add"]
        plain = await http.post("/v1/admin/keys", headers=admin, json={"name": "f", "kind": "api"})
        assert "mcp_tools" not in plain.json()["key"] or plain.json()["key"]["mcp_tools"] == []
        nothing = plain.json()["secret"]
    async with sdk_client(url(gw), secret) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["local__add"]
        assert (await client.call_tool("local__add", {"a": 2, "b": 2})).structured_content == {
            "sum": 4
        }
    async with sdk_client(url(gw), nothing) as client:
        assert (await client.list_tools()).tools == []


async def test_the_admin_page_lists_servers_and_calls(gw) -> None:
    async with sdk_client(url(gw), BOB) as client:
        await client.call_tool("web__echo", {"text": "for the page"})
    async with httpx.AsyncClient() as http:
        board = (await http.get(f"http://127.0.0.1:{gw.http_port}/v1/admin/dashboard",
                                headers={"x-admin-key": ADMIN_KEY})).json()  # fmt: skip
    servers = {s["id"]: s for s in board["mcp_servers"]}
    assert servers["web"]["transport"] == "http" and servers["web"]["up"]
    assert servers["web"]["calls"] >= 1 and servers["web"]["tools"] >= 1
    assert servers["local"]["transport"] == "stdio"
    latest = board["mcp_calls"][0]
    assert (latest["key"], latest["server"], latest["tool"], latest["outcome"]) == (
        "bob",
        "web",
        "echo",
        "ok",
    )


async def test_each_call_is_an_execute_tool_span(gw) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        async with sdk_client(url(gw), BOB) as client:
            await client.call_tool("web__add", {"a": 1, "b": 1})
    finally:
        tracing.enable(None)
    found = [s for s in exporter.get_finished_spans() if s.name == "execute_tool web__add"]
    assert len(found) == 1
    attributes = dict(found[0].attributes or {})
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "web__add"
    assert attributes["gateway.mcp.outcome"] == "ok"
