"""What the MCP gateway adds to a tool call, and what an open hand-shake session costs.

The upstream is the tests' MCP server (tests/support/mcp/server.py, built with the
official SDK) on streamable HTTP in its own process; the gateway (`gateway --config`)
in another, fronting it. The same 2026-07-28 `tools/call` request (`echo`) is sent
straight to the upstream (the baseline) and through the gateway's /mcp, one at a time
and C at a time, in one run: the latency each way, and the CPU the gateway process
spends per call (read from /proc around each run). Then N hand-shake sessions are
opened (`initialize`), and M of them keep a GET stream open: the gateway's resident
memory before and after, per session. Writes bench/results/mcp.md.

Run: python -m bench.mcp [--requests N] [--sessions N] [--streams M]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.overhead import free_port, measure, spawn, wait_port

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-mcp-key-0000000000"
TICKS = os.sysconf("SC_CLK_TCK")
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
ACCEPT = "application/json, text/event-stream"


def call(name: str) -> tuple[dict[str, Any], dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": {"text": "hello"}, "_meta": META}}  # fmt: skip
    headers = {"accept": ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call",
               "mcp-name": name, "authorization": f"Bearer {KEY}"}  # fmt: skip
    return body, headers


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def config(upstream: str, http_port: int) -> dict[str, Any]:
    return {
        "server": {"host": "127.0.0.1", "grpc_port": free_port(), "http_port": http_port},
        "operations": {"request_log": False},
        "models": [{"id": "sim", "owned_by": "bench", "created": 0,
                    "providers": [{"id": "sim", "type": "primary", "adapter": "simulated"}]}],
        "routing": {"profiles": {p: ["sim"] for p in ("economy", "balanced", "quality")}},
        "keys": [{"name": "bench", "kind": "api", "secret": KEY, "mcp_tools": ["*"]}],
        "mcp": {"servers": [{"id": "up", "transport": "http", "url": upstream,
                             "price_per_call": 0.001}]},
    }  # fmt: skip


async def calls(client: httpx.AsyncClient, upstream: str, gateway: str, pid: int,
                requests: int, concurrency: int) -> list[str]:  # fmt: skip
    direct_body, direct_headers = call("echo")
    via_body, via_headers = call("up__echo")

    async def direct() -> None:
        answer = await client.post(upstream, json=direct_body, headers=direct_headers)
        assert answer.status_code == 200 and "result" in answer.json(), answer.text

    async def through() -> None:
        answer = await client.post(gateway, json=via_body, headers=via_headers)
        assert answer.status_code == 200 and "result" in answer.json(), answer.text

    baseline, base_rate = await measure(direct, requests, concurrency)
    before = cpu_s(pid)
    latencies, rate = await measure(through, requests, concurrency)
    # measure() warms up with up to 50 calls before timing: they count in the CPU too.
    cpu_ms = (cpu_s(pid) - before) * 1000 / (requests + min(50, requests))
    base = statistics.median(baseline)
    p50 = statistics.median(latencies)
    return [
        f"| upstream directly | {concurrency} | {base:.2f} | "
        f"{statistics.quantiles(baseline, n=100)[98]:.2f} | {base_rate:.0f} | baseline | - |",
        f"| through the gateway | {concurrency} | {p50:.2f} | "
        f"{statistics.quantiles(latencies, n=100)[98]:.2f} | {rate:.0f} | "
        f"{p50 - base:+.2f} ms ({p50 / base:.2f}x) | {cpu_ms:.3f} ms |",
    ]


async def sessions(gateway: str, pid: int, count: int, streams: int) -> list[str]:
    headers = {"accept": ACCEPT, "authorization": f"Bearer {KEY}"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}}}  # fmt: skip
    limits = httpx.Limits(max_connections=streams + 8, max_keepalive_connections=streams + 8)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        for _ in range(20):
            await client.post(gateway, json=init, headers=headers)  # warm up
        await asyncio.sleep(0.5)
        start = rss_kb(pid)
        ids = []
        for _ in range(count):
            answer = await client.post(gateway, json=init, headers=headers)
            ids.append(answer.headers["mcp-session-id"])
        await asyncio.sleep(0.5)
        opened = rss_kb(pid)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        for session in ids[:50]:  # every one of them still works
            answer = await client.post(gateway, json=listing,
                                       headers=headers | {"mcp-session-id": session})  # fmt: skip
            assert answer.status_code == 200, answer.text
        before_streams = rss_kb(pid)
        held = []
        for session in ids[:streams]:
            request = client.build_request("GET", gateway,
                                           headers=headers | {"mcp-session-id": session})  # fmt: skip
            held.append(await client.send(request, stream=True))
        await asyncio.sleep(1.0)
        streaming = rss_kb(pid)
        for response in held:
            await response.aclose()
    per_session = (opened - start) * 1024 / count
    per_stream = (streaming - before_streams) * 1024 / streams
    return [
        f"| {count} sessions opened (initialize), no stream | {start / 1024:.1f} MB | "
        f"{opened / 1024:.1f} MB | {per_session:.0f} bytes |",
        f"| {streams} of them with an open GET stream | {before_streams / 1024:.1f} MB | "
        f"{streaming / 1024:.1f} MB | {per_stream / 1024:.1f} KB |",
    ]


async def run(requests: int, concurrency: list[int], count: int, streams: int) -> list[str]:
    upstream_port, http_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{upstream_port}/mcp"
    gateway = f"http://127.0.0.1:{http_port}/mcp"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(config(upstream, http_port), f)
    processes = [
        spawn("-m", "tests.support.mcp.server", "http", str(upstream_port)),
        spawn("-m", "server.cli.main", "--config", f.name, "--log-level", "WARNING"),
    ]
    try:
        for port in (upstream_port, http_port):
            await wait_port(port)
        pid = processes[1].pid
        lines = ["| path | concurrency | p50 ms | p99 ms | calls/s | added p50 | gateway CPU per call |",
                 "|---|---|---|---|---|---|---|"]  # fmt: skip
        for c in concurrency:
            limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
            async with httpx.AsyncClient(timeout=30, limits=limits) as client:
                lines += await calls(client, upstream, gateway, pid, requests, c)
        lines += ["", "| hand-shake sessions | gateway RSS before | after | per session |",
                  "|---|---|---|---|"]  # fmt: skip
        lines += await sessions(gateway, pid, count, streams)
        return lines
    finally:
        for p in processes:
            p.terminate()
            p.wait(10)
        os.unlink(f.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--streams", type=int, default=500)
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d")
    lines = [
        "# MCP tool calls through the gateway",
        "",
        f"{args.requests} `tools/call` requests (2026-07-28, `echo`) per line on "
        f"{os.cpu_count()} cores ({started}); the upstream is the SDK's streamable-HTTP",
        "server in its own process, the gateway in another; the baseline calls the",
        "upstream directly in the same run.",
        "",
        *asyncio.run(run(args.requests, args.concurrency, args.sessions, args.streams)),
        "",
    ]
    report = "\n".join(lines)
    print(report)
    (ROOT / "bench" / "results" / "mcp.md").write_text(report)


if __name__ == "__main__":
    main()
