"""Gemini CLI in non-interactive mode, pointed at the gateway with
GOOGLE_GEMINI_BASE_URL and served by a simulated model: its real requests (a 30 kB
system instruction, function declarations in JSON Schema, thinking config, topK)
through a whole tool loop that reads a file.

The CLI is an npm package: `make gemini-cli` installs the pinned version under
build/gemini-cli (CI does); without it this test is skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.gateways import API_KEY, ROOT, default_config_dict, running_gateway

INSTALLED = ROOT / "build" / "gemini-cli" / "node_modules" / ".bin" / "gemini"


def gemini_binary() -> str | None:
    found = os.environ.get("GEMINI_CLI_BIN") or (str(INSTALLED) if INSTALLED.exists() else None)
    return found or shutil.which("gemini")


pytestmark = pytest.mark.skipif(
    gemini_binary() is None, reason="Gemini CLI is not installed (make gemini-cli)"
)
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "tools": {"core": ["read_file"]},
}


async def test_non_interactive_tool_loop(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    (work / "notes.txt").write_text("banana is the first word\n")
    async with running_gateway(default_config_dict()) as gw:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "GEMINI_API_KEY": API_KEY,
            "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{gw.http_port}",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "NO_COLOR": "1",
        }
        argv = [str(gemini_binary()), "-p", "Read the file notes.txt", "-m", "sim-mini",
                "--output-format", "json"]  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=work,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)
        await gw.gateway.accounts.ledger.flush()
        rows = await gw.gateway.store.db.fetch("SELECT method, status, model FROM usage_records")
    assert process.returncode == 0, err.decode()[-2000:]
    result = json.loads(out[out.index(b"{") :])
    # The simulated model calls read_file, gets its result, then answers.
    assert result["response"].startswith("(simulated)")
    tools = result["stats"]["tools"]
    assert tools["byName"]["read_file"]["count"] >= 1
    usage = result["stats"]["models"]["sim-mini"]
    assert usage["api"]["totalRequests"] >= 2 and usage["api"]["totalErrors"] == 0
    assert usage["tokens"]["prompt"] > 0 and usage["tokens"]["candidates"] > 0
    streamed = [r for r in rows if r["method"] == "StreamGenerateContent"]
    assert len(streamed) >= 2
    assert all(r["status"] == "OK" and r["model"] == "sim-mini" for r in streamed)
