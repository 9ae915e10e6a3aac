"""The JavaScript clients, each a node script under tests/js that drives the gateway the
way its docs set it up (the openai and anthropic SDKs, the OpenAI Agents SDK, the Vercel
AI SDK with its OpenAI, Anthropic and OpenAI-compatible providers, LangChain) and checks
what it gets back, against the embedded default's simulated models.

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
    assert NODE is not None
    env = {**os.environ, "GATEWAY_URL": base_url, "GATEWAY_API_KEY": API_KEY}
    process = await asyncio.create_subprocess_exec(
        NODE, str(Path(SCRIPTS, script)), cwd=SCRIPTS, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=110)
    assert process.returncode == 0, (out.decode() + err.decode())[-3000:]
    assert "FAILED" not in out.decode() and out.decode().count("ok ") >= 2
