"""The Claude Code CLI in non-interactive print mode, pointed at the gateway with
ANTHROPIC_BASE_URL and served by a simulated model of the embedded default, as the
README runs it: its real requests (an 18,000-token first turn: system blocks with
cache_control, its default tool set, adaptive thinking, effort, context management, a
mid-conversation system turn, metadata.user_id, anthropic-beta) through a whole tool
loop; a wrong key, which it gives up on at once; and the gateway as its MCP server
(`claude mcp add --transport http`), a granted tool called in print mode.

The CLI is an npm package with a native binary: `make claude-code` installs the pinned
version under build/claude-code (CI does); without it this test is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
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


async def claude(tmp_path: Path, port: int, key: str, prompt: str) -> tuple[int, str, str]:
    """Runs `claude -p PROMPT --model sim-mini` in a fresh home and work folder; its exit
    code, its stream-json output and its stderr."""
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "work").mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path / "home"),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_SMALL_FAST_MODEL": "sim-mini",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    argv = [str(claude_binary()), "-p", prompt, "--model", "sim-mini",
            "--output-format", "stream-json", "--verbose"]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=tmp_path / "work",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_print_mode_tool_loop(tmp_path: Path) -> None:
    data = default_config_dict()
    # The names Claude Code asks for on its own (its small, fast model) map to sim-mini.
    data["models"][0]["aliases"] = ["claude-haiku-4-5", "claude-haiku-4-5-20251001"]
    async with running_gateway(data) as gw:
        code, out, err = await claude(tmp_path, gw.http_port, API_KEY, "Read the file notes.txt")
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch(
            "SELECT method, status, model, prompt_tokens FROM usage_records"
        )
    assert code == 0, err[-2000:]
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
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
    # Its whole default tool set came along: a first turn larger than 16,384 tokens.
    assert max(r["prompt_tokens"] for r in generations) > 16_384


async def test_a_wrong_key_ends_the_run_at_once(tmp_path: Path) -> None:
    async with running_gateway() as gw:
        started = time.monotonic()
        code, out, err = await claude(tmp_path, gw.http_port, "gw-wrong-key-0000000000", "Hi")
        took = time.monotonic() - started
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT status FROM usage_records")
    # x-should-retry: false on the 401: no ten retries over minutes.
    assert code != 0 and took < 30, (took, out[-1000:], err[-1000:])
    assert len(rows) <= 2 and all(r["status"] == "UNAUTHENTICATED" for r in rows), rows


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
