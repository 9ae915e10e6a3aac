"""Grants and tool-call rows in SQLite and PostgreSQL: a stored key keeps its globs, a
tool call's row keeps its server, tool, outcome, bytes and price, and that price counts
in what the key has spent when budgets load it after a restart."""

from __future__ import annotations

import time

import pytest

from server.accounting.admission import KeyDirectory, KeyRing
from server.base.config import StorageConfig
from server.base.errors import Unauthenticated
from server.base.record import UsageRecord
from server.storage import open_store


@pytest.fixture(params=["sqlite", "postgresql"])
def storage(request, tmp_path, pg_url):
    if request.param == "sqlite":
        return StorageConfig(sqlite_path=str(tmp_path / "mcp.db"))
    return StorageConfig(database_url=pg_url)


async def test_a_stored_key_keeps_its_grant(storage) -> None:
    store = await open_store(storage)
    try:
        granted, _ = await store.keys.create(kind="api", name="agent-7",
                                             mcp_tools=("files__read*", "web__*"))  # fmt: skip
        plain, _ = await store.keys.create(kind="api", name="plain-7")
        assert (await store.keys.get(granted.id)).mcp_tools == ("files__read*", "web__*")
        assert (await store.keys.by_digest(granted.digest)) == granted
        assert (await store.keys.get(plain.id)).mcp_tools == ()
        # An OAuth token's subject names a stored key by its id, never by its name.
        keys = KeyDirectory(store.keys)
        principal = await keys.by_id(granted.id, "api", KeyRing([]))
        assert principal.mcp_tools == ("files__read*", "web__*")
        with pytest.raises(Unauthenticated, match="by its id"):
            await keys.by_id("agent-7", "api", KeyRing([]))
        with pytest.raises(Unauthenticated):
            await KeyDirectory(store.keys).by_id(granted.id, "router", KeyRing([]))
        assert (await keys.by_id(plain.id, "api", KeyRing([]))).key_id == plain.id
        # Revoked: the cached answer is dropped at once on this instance.
        await store.keys.revoke(plain.id)
        keys.forget(plain.id)
        with pytest.raises(Unauthenticated):
            await keys.by_id(plain.id, "api", KeyRing([]))
    finally:
        await store.aclose()


async def test_a_tool_calls_row_and_its_price(storage) -> None:
    store = await open_store(storage)
    now = time.time()
    row = UsageRecord(
        ts=now, request_id="req-mcp-1", key_id="key_mcp_storage", key_name="k", method="CallTool",
        model="", provider="web", prompt_tokens=0, completion_tokens=0, total_tokens=0,
        input_cost_usd=None, output_cost_usd=None, cache_input_cost_usd=None,
        total_cost_usd=0.25, latency_ms=3.5, ttft_ms=None, status="OK", mcp_server="web",
        mcp_tool="search", mcp_outcome="tool_error", result_bytes=1234,
    )  # fmt: skip
    try:
        await store.usage.insert([row])
        found = await store.db.fetch(
            "SELECT mcp_server, mcp_tool, mcp_outcome, result_bytes FROM usage_records "
            "WHERE key_id = ?", "key_mcp_storage",
        )  # fmt: skip
        assert [dict(r) for r in found] == [
            {"mcp_server": "web", "mcp_tool": "search", "mcp_outcome": "tool_error",
             "result_bytes": 1234}
        ]  # fmt: skip
        assert await store.usage.spent_since("key_mcp_storage", now - 1) == pytest.approx(0.25)
    finally:
        await store.db.execute("DELETE FROM usage_records WHERE key_id = ?", "key_mcp_storage")
        await store.aclose()


def test_the_keys_command_grants_tools(tmp_path) -> None:
    import json
    import subprocess
    import sys

    from tests.support.gateways import COMMAND_TIMEOUT_S, ROOT

    def keys(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "server.cli.main", "keys", *args, "--sqlite-path",
             str(tmp_path / "cli.db")],
            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, cwd=ROOT,
        )  # fmt: skip

    made = keys("create", "--name", "agent", "--kind", "api", "--mcp-tool", "web__*",
                "--mcp-tool", "files__read_file", "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["mcp_tools"] == ["web__*", "files__read_file"]
    assert json.loads(keys("show", "agent", "--json").stdout)["mcp_tools"] == [
        "web__*", "files__read_file",
    ]  # fmt: skip
    refused = keys("create", "--name", "b", "--kind", "api", "--mcp-tool", "web/x")
    assert refused.returncode == 2 and "--mcp-tool [0]: 'web/x' is not a glob" in refused.stderr
