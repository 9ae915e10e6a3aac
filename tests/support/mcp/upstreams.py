"""The MCP gateway's test set-up: the SDK-built upstream server over streamable HTTP in
a process of its own, the same server as a stdio child, and a gateway config fronting
both with keys granted different tools."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.support.gateways import ROOT, default_config_dict

ALICE = "gw-mcp-alice-key-0000000"  # every tool of both servers
BOB = "gw-mcp-bob-key-000000000"  # web__echo and web__add only
NOBODY = "gw-mcp-nobody-key-00000"  # no grant
STDIO_ARGS = ["-m", "tests.support.mcp.server", "stdio"]
# The value the stdio child gets as MCP_TEST_TOKEN (by name, in the config), and a
# variable of the gateway's own it must not see.
os.environ.setdefault("GW_TEST_CHILD_TOKEN", "child-token-1234")
os.environ.setdefault("GW_TEST_GATEWAY_SECRET", "the-gateway-keeps-this")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# How long the upstream's process may take to listen (its imports, on a loaded machine).
READY_TIMEOUT_S = 60.0


@contextlib.asynccontextmanager
async def http_upstream(*flags: str, port: int | None = None) -> AsyncIterator[str]:
    """The upstream server on streamable HTTP in its own process (`--handshake-only`:
    as a server of the hand-shake generation), on `port` or a free one; yields its URL
    once it listens. A free port another process took first: another one."""
    for _ in range(3):
        chosen = port or free_port()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.mcp.server", "http", str(chosen), *flags,
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            if await _listening(process, chosen):
                yield f"http://127.0.0.1:{chosen}/mcp"
                return
        finally:
            if process.returncode is None:
                process.terminate()
            await process.wait()
        if port:
            break
    raise RuntimeError(f"the MCP upstream did not start (exit code {process.returncode})")


async def _listening(process: asyncio.subprocess.Process, port: int) -> bool:
    """Whether `process` listens on `port` before it exits or READY_TIMEOUT_S passes."""
    deadline = asyncio.get_running_loop().time() + READY_TIMEOUT_S
    while process.returncode is None and asyncio.get_running_loop().time() < deadline:
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return True
        await asyncio.sleep(0.05)
    return False


def stdio_children() -> tuple[list[int], list[int]]:
    """This process's stdio MCP children: (live pids, zombie pids)."""
    live, zombies = [], []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) != os.getpid():
            continue
        if fields[0] == "Z":
            zombies.append(int(entry.name))
        elif b"tests.support.mcp.server" in argv and b"stdio" in argv:
            live.append(int(entry.name))
    return live, zombies


def mcp_config(url: str, **mcp: Any) -> dict[str, Any]:
    """The default config plus the two servers (`web` over HTTP, `local` over stdio)
    and the three keys."""
    data = default_config_dict()
    # A stdio child's first answer includes its start (its imports): on a loaded machine
    # that takes seconds. Tests of a timeout set their own.
    data["mcp"] = {
        "servers": [
            {"id": "web", "transport": "http", "url": url, "timeout_s": 30,
             "price_per_call": 0.002},
            {"id": "local", "transport": "stdio", "command": sys.executable,
             "args": STDIO_ARGS, "timeout_s": 30, "price_per_call": 0.001,
             "env": {"MCP_TEST_TOKEN": "GW_TEST_CHILD_TOKEN"}, "tools": {"deny": ["hidden"]}},
        ],
        "max_result_bytes": 1024 * 1024,
        **mcp,
    }  # fmt: skip
    data["keys"] = [
        {"name": "alice", "kind": "api", "secret": ALICE, "mcp_tools": ["web__*", "local__*"]},
        {"name": "bob", "kind": "api", "secret": BOB, "mcp_tools": ["web__echo", "web__add"]},
        {"name": "nobody", "kind": "api", "secret": NOBODY},
    ]
    return data


def sdk_client(url: str, key: str, mode: str = "auto") -> Any:
    """The official SDK's client of `url` sending `key` as a Bearer token; `mode` is
    "auto" (2026-07-28 through server/discover) or "legacy" (the hand-shake)."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)
