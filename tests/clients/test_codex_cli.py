"""Codex CLI (npm `@openai/codex`) against the gateway as a custom model provider,
non-interactively (`codex exec`), offline, on a simulated model, with its default
features: its multi-agent tools come as a `namespace` tool, which every model serves.
Only its `web_search` tool, a built-in tool that only upstreams serving the Responses
API natively run, is turned off.

The CLI ships a 400 MB binary, so it is not part of `make setup`: `make codex-cli`
installs the pinned version under build/codex-cli (CI does); CODEX_BIN or a `codex` on
PATH work too. Without it the test is skipped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.support.gateways import API_KEY, ROOT, running_gateway

INSTALLED = ROOT / "build" / "codex-cli" / "node_modules" / ".bin" / "codex"
CODEX = os.environ.get("CODEX_BIN") or (
    str(INSTALLED) if INSTALLED.exists() else shutil.which("codex")
)

CONFIG = """model = "sim-pro"
model_provider = "gateway"
web_search = "disabled"

[model_providers.gateway]
name = "Model gateway"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "GATEWAY_API_KEY"
wire_api = "responses"
supports_websockets = true
"""


async def codex_exec(tmp_path: Path, port: int, prompt: str) -> str:
    """Runs `codex exec PROMPT` in a fresh home and work folder; its output."""
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    (home / "config.toml").write_text(CONFIG.format(port=port))
    assert CODEX is not None
    process = await asyncio.create_subprocess_exec(
        CODEX, "exec", "--skip-git-repo-check", prompt,
        cwd=work, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "CODEX_HOME": str(home), "GATEWAY_API_KEY": API_KEY},
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), 90)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-2000:]
    return text


@pytest.mark.slow
@pytest.mark.skipif(CODEX is None, reason="Codex CLI not installed (make codex-cli)")
async def test_codex_exec_with_its_default_tools(tmp_path: Path) -> None:
    async with running_gateway() as gw:
        said = await codex_exec(tmp_path, gw.http_port, "Say hello")
        # Its multi-agent namespace: the calls come back as the namespace's functions,
        # which Codex runs (the simulated arguments name no real agent), then it asks
        # again with their results.
        spawned = await codex_exec(tmp_path, gw.http_port, "Spawn an agent")
        assert gw.http is not None
        sockets = gw.http.server.config.app.state.sessions
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT method, status FROM usage_records")
    assert "(simulated)" in said and "(simulated)" in spawned
    assert "Falling back" not in said + spawned
    turns = [r for r in rows if r["method"] in ("CreateResponse", "StreamResponse")]
    assert len(turns) >= 4 and all(r["status"] == "OK" for r in turns), rows
    # Its default transport: each run's turns on one WebSocket, none over HTTP.
    assert sockets.opened >= 2
    assert {r["method"] for r in turns} == {"StreamResponse"}
