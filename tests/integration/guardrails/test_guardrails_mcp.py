"""Guardrails on MCP tool calls: a call's arguments pass them before the tool's server
sees them (`on_tool_calls`), its result before the caller does (`on_tool_results`), and
a block refuses the call with its ledger row."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.support.gateways import running_gateway
from tests.support.mcp.upstreams import ALICE, http_upstream, mcp_config, sdk_client

EMAIL = "alice@example.com"


def config(url: str, **guardrail: Any) -> dict[str, Any]:
    data = mcp_config(url)
    data["guardrails"] = [{"id": "pii", **guardrail}]
    data["default_guardrails"] = ["pii"]
    return data


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize(
    "guardrail,seen",
    [
        ({"on_tool_results": "off"}, "[EMAIL_1]"),  # the server got the placeholder
        ({"on_tool_calls": "off"}, "[EMAIL_1]"),  # it got the address; its answer is redacted
        ({"on_tool_calls": "off", "on_tool_results": "off"}, EMAIL),
    ],
)
async def test_arguments_and_results_pass_the_guardrails(
    guardrail: dict[str, Any], seen: str
) -> None:
    async with (
        http_upstream() as url,
        running_gateway(config(url, **guardrail)) as gw,
        sdk_client(f"http://127.0.0.1:{gw.http_port}/mcp", ALICE) as client,
    ):
        result = await client.call_tool("web__echo", {"text": f"mail {EMAIL}"})
    assert text(result).endswith(f":mail {seen}")  # the echo tool names its process first


async def test_a_blocked_argument_refuses_the_call() -> None:
    async with (
        http_upstream() as url,
        running_gateway(config(url, on_tool_calls="block")) as gw,
    ):
        async with sdk_client(f"http://127.0.0.1:{gw.http_port}/mcp", ALICE) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("web__echo", {"text": f"mail {EMAIL}"})
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT mcp_outcome, error_reason FROM usage_records WHERE method = 'CallTool'"
        )
    assert "EMAIL" in str(refused.value) and EMAIL not in str(refused.value)
    assert [(r["mcp_outcome"], r["error_reason"]) for r in rows] == [
        ("denied", "GUARDRAIL_BLOCKED")
    ]
