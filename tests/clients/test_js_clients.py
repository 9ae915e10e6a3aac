"""The JavaScript clients, each a node script under tests/js that drives the gateway the
way its docs set it up (the openai and anthropic SDKs, the OpenAI Agents SDK, the Vercel
AI SDK with its OpenAI, Anthropic and OpenAI-compatible providers, LangChain) and checks
what it gets back, against the embedded default's simulated models; and the official MCP
SDK's client against `/mcp` fronting the test MCP servers, in both protocol generations.

The SDKs' versions are pinned in tests/js/package-lock.json; `make js-clients` installs
them (CI does). Without them, or without node, these tests are skipped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.gateways import API_KEY, ROOT, running_gateway
from tests.support.mcp.upstreams import ALICE, http_upstream, mcp_config

SCRIPTS = ROOT / "tests" / "js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (SCRIPTS / "node_modules").is_dir(),
    reason="node or the JavaScript clients are not installed (make js-clients)",
)


@pytest.fixture(scope="module")
async def base_url() -> AsyncIterator[str]:
    async with running_gateway() as gw:
        yield f"http://127.0.0.1:{gw.http_port}"


@pytest.mark.parametrize(
    "script", ["openai.mjs", "anthropic.mjs", "agents.mjs", "vercel-ai.mjs", "langchain.mjs"]
)
async def test_client_script(base_url: str, script: str) -> None:
    await run_script(script, {"GATEWAY_URL": base_url, "GATEWAY_API_KEY": API_KEY})


@pytest.fixture(scope="module")
async def mcp_base_url() -> AsyncIterator[str]:
    async with http_upstream() as url, running_gateway(mcp_config(url)) as gw:
        yield f"http://127.0.0.1:{gw.http_port}"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_sdk_client(mcp_base_url: str, mode: str) -> None:
    """Tools, resources, templates and prompts of both test servers, as the key that is
    granted them all sees them; 'auto' negotiates the stateless generation."""
    env = {"GATEWAY_URL": mcp_base_url, "GATEWAY_API_KEY": ALICE, "MCP_MODE": mode}
    await run_script("mcp.mjs", env)


async def run_script(script: str, extra_env: dict[str, str]) -> None:
    assert NODE is not None
    env = {**os.environ, **extra_env}
    process = await asyncio.create_subprocess_exec(
        NODE, str(Path(SCRIPTS, script)), cwd=SCRIPTS, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=110)
    assert process.returncode == 0, (out.decode() + err.decode())[-3000:]
    assert "FAILED" not in out.decode() and out.decode().count("ok ") >= 2
