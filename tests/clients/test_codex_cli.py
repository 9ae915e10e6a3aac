"""Codex CLI (npm `@openai/codex`) against the gateway as a custom model provider,
non-interactively (`codex exec`), offline, on a simulated model.

The CLI ships a 400 MB binary, so it is not part of `make setup`: install it with
`npm install @openai/codex` in a folder of your choice and point CODEX_BIN at its
`node_modules/.bin/codex` (or put `codex` on PATH); without it the test is skipped.
Codex's multi-agent and web-search tools are built-in tools that only upstreams
serving the Responses API natively can run, so they are turned off here."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.support.gateways import API_KEY, running_gateway

CODEX = os.environ.get("CODEX_BIN") or shutil.which("codex")

CONFIG = """model = "sim-pro"
model_provider = "gateway"

[model_providers.gateway]
name = "Model gateway"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "GATEWAY_API_KEY"
wire_api = "responses"
"""


@pytest.mark.slow
@pytest.mark.skipif(CODEX is None, reason="Codex CLI not installed (set CODEX_BIN)")
async def test_codex_exec(tmp_path: Path) -> None:
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    async with running_gateway() as gw:
        (home / "config.toml").write_text(CONFIG.format(port=gw.http_port))
        assert CODEX is not None
        process = await asyncio.create_subprocess_exec(
            CODEX, "exec", "--skip-git-repo-check", "--disable", "multi_agent",
            "-c", 'web_search="disabled"', "Say hello",
            cwd=work, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "CODEX_HOME": str(home), "GATEWAY_API_KEY": API_KEY},
        )  # fmt: skip
        output, _ = await asyncio.wait_for(process.communicate(), 90)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-2000:]
    assert "(simulated)" in text, text[-2000:]
