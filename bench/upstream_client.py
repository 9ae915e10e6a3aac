"""What one upstream call costs the gateway's HTTP client, against aiohttp's, in one run.

An nginx upstream on the other core answers a fixed chat completion (and a fixed
20-chunk SSE stream) at once; this process, pinned to its own core on uvloop as the
gateway runs, sends the same request through each client for `--seconds`, the clients
alternating within each round, with 1 and 32 requests in flight. It reports calls/s
and this process's CPU per call (user + system), the body read to its end: the client's
whole cost, connection pool, request, parsing and reading included.

    python -m bench.upstream_client [--seconds 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import uvloop

from bench.perf import body, start_nginx
from server.providers.http import Client, HttpParams

Call = Callable[[], Awaitable[int]]


def gateway_client(base: str, stream: bool) -> tuple[Call, Callable[[], Awaitable[None]]]:
    client = Client(HttpParams(base_url=base, model="bench"), {"authorization": "Bearer k"})
    payload = body(stream).encode()

    async def call() -> int:
        async with client.stream("POST", "/chat/completions", content=payload) as answer:
            return sum([len(chunk) async for chunk in answer.aiter_bytes()])

    return call, client.aclose


def aiohttp_client(base: str, stream: bool) -> tuple[Call, Callable[[], Awaitable[None]]]:
    # As the gateway set it up before it had its own client.
    connector = aiohttp.TCPConnector(limit=1000, limit_per_host=1000, ttl_dns_cache=300,
                                     keepalive_timeout=60)  # fmt: skip
    timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_connect=5, sock_read=60)
    session = aiohttp.ClientSession(
        connector=connector, timeout=timeout, trust_env=False, skip_auto_headers=("User-Agent",),
        headers={"content-type": "application/json", "authorization": "Bearer k"},
    )  # fmt: skip
    url = f"{base}/chat/completions"
    payload = body(stream).encode()

    async def call() -> int:
        async with session.request("POST", url, data=payload, allow_redirects=False) as answer:
            return sum([len(chunk) async for chunk in answer.content.iter_any()])

    return call, session.close


async def load(call: Call, concurrency: int, seconds: float) -> tuple[int, float]:
    """Calls made and CPU seconds spent in `seconds`, `concurrency` at a time."""
    for _ in range(20):
        await call()  # connections open, paths warm
    deadline = time.monotonic() + seconds
    calls = 0

    async def worker() -> None:
        nonlocal calls
        while time.monotonic() < deadline:
            if await call() <= 0:
                raise RuntimeError("an empty answer")
            calls += 1

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls, time.process_time() - started


async def run(upstream: int, args: argparse.Namespace) -> dict[tuple[str, int, str], list]:
    results: dict[tuple[str, int, str], list] = {}
    makers = {"gateway": gateway_client, "aiohttp": aiohttp_client}
    for _ in range(args.rounds):
        for mode in ("unary", "stream"):
            base = f"http://127.0.0.1:{upstream}/{mode}/v1"
            for concurrency in (1, 32):
                for name, make in makers.items():
                    call, close = make(base, mode == "stream")
                    try:
                        calls, cpu = await load(call, concurrency, args.seconds)
                    finally:
                        await close()
                    results.setdefault((mode, concurrency, name), []).append(
                        (calls / args.seconds, cpu * 1000 / calls)
                    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    tmp = Path(tempfile.mkdtemp(prefix="bench-client-"))
    nginx, upstream = start_nginx(tmp, "1")
    try:
        results = uvloop.run(run(upstream, args))
    finally:
        nginx.terminate()
        nginx.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    print("Each row: the round with the least CPU per call.\n")
    print("| call | in flight | client | calls/s | CPU ms per call | aiohttp's CPU / ours |")
    print("|---|---|---|---|---|---|")
    for (mode, concurrency, name), rows in results.items():
        rate, cpu = min(rows, key=lambda row: row[1])
        theirs = min(row[1] for row in results[(mode, concurrency, "aiohttp")])
        ratio = f"{theirs / cpu:.2f}x" if name == "gateway" else "-"
        print(f"| {mode} | {concurrency} | {name} | {rate:,.0f} | {cpu:.3f} | {ratio} |")


if __name__ == "__main__":
    main()
