"""`gateway --workers 2` serving /mcp: a hand-shake session opened on one worker
continues on the other (they share the signing secret), and each worker runs its own
one child per stdio server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.support.gateways import children, start_process, stop_process, write_config
from tests.support.mcp.upstreams import ALICE, mcp_config


def is_stdio_server(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"tests.support.mcp.server" in argv and b"stdio" in argv


async def test_a_session_continues_on_any_worker_and_each_has_one_child(tmp_path) -> None:
    data = mcp_config("http://127.0.0.1:9/mcp")
    data["mcp"]["servers"] = data["mcp"]["servers"][1:]  # the stdio server only
    gw = start_process("--config", str(write_config(tmp_path, data)), "--workers", "2",
                       timeout_s=60)  # fmt: skip
    try:
        assert gw.http_port, "".join(gw.output)
        url = f"http://127.0.0.1:{gw.http_port}/mcp"
        headers = {
            "authorization": f"Bearer {ALICE}",
            "accept": "application/json, text/event-stream",
        }
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
        async with httpx.AsyncClient() as http:
            opened = await http.post(url, json=init, headers=headers)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "local__add", "arguments": {"a": 2, "b": 2}}}  # fmt: skip

        async def on_a_new_connection() -> int:
            async with httpx.AsyncClient(timeout=30) as http:
                answer = await http.post(url, json=call, headers=headers)
                assert answer.json()["result"]["structuredContent"] == {"sum": 4}, answer.text
                return answer.status_code

        assert set(await asyncio.gather(*(on_a_new_connection() for _ in range(40)))) == {200}
        workers = children(gw.process.pid)
        assert len(workers) == 2
        # Both workers served calls, each with one child of its own.
        per_worker = [[c for c in children(w) if is_stdio_server(c)] for w in workers]
        assert [len(found) for found in per_worker] == [1, 1], per_worker
    finally:
        stop_process(gw)
