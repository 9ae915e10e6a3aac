"""opencode (npm `opencode-ai`) against the gateway as a custom provider through the
Vercel AI SDK's OpenAI-compatible package, as its docs set one up (opencode.json),
non-interactively (`opencode run --format json`), offline, on a simulated model: its
tool loop (a `read` call, its result, the answer).

`make opencode` installs the pinned CLI under build/opencode (CI does); OPENCODE_BIN or
an `opencode` on PATH work too. Without it the test is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.gateways import API_KEY, ROOT, running_gateway

INSTALLED = ROOT / "build" / "opencode" / "node_modules" / ".bin" / "opencode"
OPENCODE = os.environ.get("OPENCODE_BIN") or (
    str(INSTALLED) if INSTALLED.exists() else shutil.which("opencode")
)


def config(port: int) -> dict[str, object]:
    """opencode.json: the gateway as a provider of OpenAI's chat API, its key from the
    environment."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "gateway": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Model gateway",
                "options": {
                    "baseURL": f"http://127.0.0.1:{port}/v1",
                    "apiKey": "{env:GATEWAY_API_KEY}",
                },
                "models": {"sim-mini": {"name": "sim-mini (simulated)"}},
            }
        },
        "model": "gateway/sim-mini",
        "autoupdate": False,
    }


@pytest.mark.slow
@pytest.mark.skipif(OPENCODE is None, reason="opencode not installed (make opencode)")
async def test_opencode_run_tool_loop(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    async with running_gateway() as gw:
        (work / "opencode.json").write_text(json.dumps(config(gw.http_port)))
        assert OPENCODE is not None
        process = await asyncio.create_subprocess_exec(
            OPENCODE, "run", "--format", "json", "Read the file notes.txt",
            cwd=work, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(home),
                 "GATEWAY_API_KEY": API_KEY},
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 90)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT method, status FROM usage_records")
    assert process.returncode == 0, err.decode()[-2000:]
    events = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    parts = [e["part"] for e in events if "part" in e]
    tools = [p["tool"] for p in parts if p["type"] == "tool"]
    texts = [p["text"] for p in parts if p["type"] == "text"]
    assert tools == ["read"] and texts and texts[-1].startswith("(simulated)")
    turns = [r for r in rows if r["method"] in ("CreateChatCompletion", "StreamChatCompletion")]
    assert len(turns) >= 2 and all(r["status"] == "OK" for r in turns), rows
