"""The Claude Code CLI in non-interactive print mode, pointed at the gateway with
ANTHROPIC_BASE_URL and served by a simulated model: its real requests (system blocks
with cache_control, adaptive thinking, effort, context management, a mid-conversation
system turn, tools, metadata.user_id, anthropic-beta) through a whole tool loop; and
the gateway as its MCP server (`claude mcp add --transport http`), a granted tool
called in print mode.

The CLI is an npm package with a native binary: `make claude-code` installs the pinned
version under build/claude-code (CI does); without it this test is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.gateways import API_KEY, ROOT, default_config_dict, running_gateway

INSTALLED = ROOT / "build" / "claude-code" / "node_modules" / ".bin" / "claude"


def claude_binary() -> str | None:
    found = os.environ.get("CLAUDE_CODE_BIN") or (str(INSTALLED) if INSTALLED.exists() else None)
    return found or shutil.which("claude")


pytestmark = pytest.mark.skipif(
    claude_binary() is None, reason="the Claude Code CLI is not installed (make claude-code)"
)


async def test_print_mode_tool_loop(tmp_path: Path) -> None:
    data = default_config_dict()
    # The names Claude Code asks for on its own (its small, fast model) map to sim-mini.
    data["models"][0]["aliases"] = ["claude-haiku-4-5", "claude-haiku-4-5-20251001"]
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    async with running_gateway(data) as gw:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path / "home"),
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{gw.http_port}",
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_SMALL_FAST_MODEL": "sim-mini",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        argv = [str(claude_binary()), "-p", "Read the file notes.txt", "--model", "sim-mini",
                "--tools", "Read", "--output-format", "stream-json", "--verbose"]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=tmp_path / "work",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT method, status, model FROM usage_records")
    assert process.returncode == 0, err.decode()[-2000:]
    events = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    blocks = [
        block
        for e in events
        if e.get("type") in ("assistant", "user")
        for block in e["message"]["content"]
    ]
    kinds = [b["type"] for b in blocks]
    # The simulated model thinks, calls Read, gets its (error) result, then answers.
    assert "tool_use" in kinds and "tool_result" in kinds and kinds[-1] == "text"
    assert any(b["type"] == "thinking" and b["signature"] for b in blocks)
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "success"
    assert result["result"].startswith("(simulated)")
    generations = [r for r in rows if r["method"] in ("CreateMessage", "StreamMessage")]
    assert len(generations) >= 2
    assert all(r["status"] == "OK" and r["model"] == "sim-mini" for r in generations)


async def test_print_mode_calls_a_granted_mcp_tool_through_the_gateway(tmp_path: Path) -> None:
    """`claude mcp add --transport http` with the gateway's /mcp and a key granted two
    tools: in print mode the model calls one, and the call is in the ledger."""
    from tests.support.mcp.upstreams import BOB, http_upstream, mcp_config

    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    async with http_upstream() as url:
        data = mcp_config(url)
        data["models"][0]["aliases"] = ["claude-haiku-4-5", "claude-haiku-4-5-20251001"]
        async with running_gateway(data) as gw:
            base = f"http://127.0.0.1:{gw.http_port}"
            env = {
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(tmp_path / "home"),
                "ANTHROPIC_BASE_URL": base,
                "ANTHROPIC_API_KEY": BOB,
                "ANTHROPIC_SMALL_FAST_MODEL": "sim-mini",
                # The first turn waits for the MCP servers to connect (print mode would
                # start without tools still connecting on a loaded machine).
                "MCP_CONNECTION_NONBLOCKING": "false",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            }
            claude = str(claude_binary())
            added = await asyncio.create_subprocess_exec(
                claude, "mcp", "add", "--transport", "http", "gw", f"{base}/mcp",
                "--header", f"Authorization: Bearer {BOB}", env=env, cwd=tmp_path / "work",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await asyncio.wait_for(added.communicate(), timeout=60)
            assert added.returncode == 0, err.decode()
            argv = [claude, "-p", "Use the echo tool to say hello", "--model", "sim-mini",
                    "--tools", "", "--allowedTools", "mcp__gw__web__echo",
                    "--output-format", "stream-json", "--verbose"]  # fmt: skip
            process = await asyncio.create_subprocess_exec(
                *argv, env=env, cwd=tmp_path / "work",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(process.communicate(), timeout=120)
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT key_name, mcp_server, mcp_tool, mcp_outcome FROM usage_records "
                "WHERE method = 'CallTool'"
            )
    assert process.returncode == 0, err.decode()[-2000:]
    events = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    blocks = [
        block
        for e in events
        if e.get("type") in ("assistant", "user")
        for block in e["message"]["content"]
    ]
    uses = [b for b in blocks if b["type"] == "tool_use"]
    init = next((e for e in events if e.get("subtype") == "init"), {})
    assert [u["name"] for u in uses] == ["mcp__gw__web__echo"], (init.get("mcp_servers"), blocks)
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert len(results) == 1 and not results[0].get("is_error")
    assert "tests:" in json.dumps(results[0]["content"])
    assert [tuple(r.values()) for r in rows] == [("bob", "web", "echo", "ok")]
