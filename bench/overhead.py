"""What the gateway adds to a call: the same requests sent straight to an upstream
(the baseline) and through the gateway (REST and gRPC), in one run.

The upstream is bench/upstream.py, an OpenAI-compatible server that answers at once, so
every millisecond above the baseline is the gateway's. Writes bench/results/overhead.md.

Run: python -m bench.overhead [--requests N] [--concurrency C]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import httpx
import yaml
from gateway.v1 import chat_service_pb2, chat_service_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
KEY = "bench-api-key-000000000000"
BODY = {"model": "bench", "messages": [{"role": "user", "content": "Say hello"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gateway_config(upstream_port: int, stream_upstream: bool) -> dict:
    provider = {
        "id": "bench-upstream", "type": "primary", "adapter": "openai",
        "params": {"base_url": f"http://127.0.0.1:{upstream_port}/v1", "model": "bench",
                   "stream": stream_upstream},
    }  # fmt: skip
    return {
        "server": {"host": "127.0.0.1", "grpc_port": free_port(), "http_port": free_port()},
        "models": [{"id": "bench", "owned_by": "bench", "created": 0,
                    "price": {"input": 1, "output": 2}, "providers": [provider]}],
        "routing": {"profiles": {p: ["bench"] for p in ("economy", "balanced", "quality")}},
        "keys": [{"name": "bench", "kind": "api", "secret": KEY}],
    }  # fmt: skip


def spawn(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.DEVNULL)


async def wait_port(port: int) -> None:
    for _ in range(300):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


async def measure(
    send: Callable[[], Awaitable[None]], requests: int, concurrency: int
) -> tuple[list[float], float]:
    """Sends `requests` calls, `concurrency` at a time; returns latencies (ms) and rate."""
    for _ in range(min(50, requests)):
        await send()  # warm up connections and caches
    latencies: list[float] = []
    queue = iter(range(requests))

    async def worker() -> None:
        for _ in queue:
            started = time.perf_counter()
            await send()
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, requests / (time.perf_counter() - started)


def row(name: str, latencies: list[float], rate: float, baseline: list[float] | None) -> str:
    p50 = statistics.median(latencies)
    p99 = statistics.quantiles(latencies, n=100)[98]
    if baseline is None:
        extra = "baseline | 1.00"
    else:
        base = statistics.median(baseline)
        extra = f"{p50 - base:+.2f} | {p50 / base:.2f}"
    return f"| {name} | {p50:.2f} | {p99:.2f} | {rate:.0f} | {extra} |"


async def run(requests: int, concurrency: int, stream_upstream: bool) -> list[str]:
    upstream_port = free_port()
    config = gateway_config(upstream_port, stream_upstream)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(config, f)
    processes = [
        spawn("-m", "bench.upstream", str(upstream_port)),
        spawn("-m", "server.cli.main", "--config", f.name, "--log-level", "WARNING"),
    ]
    try:
        grpc_port, http_port = config["server"]["grpc_port"], config["server"]["http_port"]
        for port in (upstream_port, grpc_port, http_port):
            await wait_port(port)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with (
            httpx.AsyncClient(limits=limits, timeout=30) as client,
            grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
        ):
            stub = chat_service_pb2_grpc.ChatServiceStub(channel)
            grpc_request = chat_service_pb2.CreateChatCompletionRequest(
                model="bench", messages=[{"role": "user", "content": "Say hello"}]
            )

            async def direct() -> None:
                r = await client.post(
                    f"http://127.0.0.1:{upstream_port}/v1/chat/completions", json=BODY
                )
                r.raise_for_status()

            async def rest() -> None:
                r = await client.post(
                    f"http://127.0.0.1:{http_port}/v1/chat/completions", json=BODY,
                    headers={"x-api-key": KEY},
                )  # fmt: skip
                r.raise_for_status()

            async def over_grpc() -> None:
                await stub.CreateChatCompletion(grpc_request, metadata=(("x-api-key", KEY),))

            rows = []
            baseline, rate = await measure(direct, requests, concurrency)
            rows.append(row("upstream directly", baseline, rate, None))
            for name, send in (("gateway, REST", rest), ("gateway, gRPC", over_grpc)):
                latencies, rate = await measure(send, requests, concurrency)
                rows.append(row(name, latencies, rate, baseline))
            return rows
    finally:
        for p in processes:
            p.terminate()
            p.wait(10)
        os.unlink(f.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    lines = [
        "# Gateway overhead",
        "",
        f"{args.requests} unary chat completions per line, on {os.cpu_count()} cores; the",
        "upstream answers at once, so the difference to the baseline is the gateway's.",
        "",
    ]
    for stream_upstream in (False, True):
        for concurrency in args.concurrency:
            lines += [
                f"## concurrency {concurrency}, gateway reads the upstream "
                + ("as a stream" if stream_upstream else "unary"),
                "",
                "| path | p50 ms | p99 ms | req/s | added p50 ms | p50 ratio |",
                "|---|---|---|---|---|---|",
                *asyncio.run(run(args.requests, concurrency, stream_upstream)),
                "",
            ]
    report = "\n".join(lines)
    print(report)
    (ROOT / "bench" / "results" / "overhead.md").write_text(report)


if __name__ == "__main__":
    main()
