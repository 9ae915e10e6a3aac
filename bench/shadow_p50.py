"""What shadow traffic adds to a caller's latency: the p50 and p95 of chat completions
through one gateway with sim-mini's `shadow` off, then on (every call also sent to
sim-standard), the candidates running beside the callers' calls. The simulated
upstreams answer after `--ttft-ms`.

Run: python -m bench.shadow_p50 [--calls N] [--concurrency C] [--ttft-ms MS]
Writes bench/results/shadow_p50.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateways import API_KEY, default_config_dict, running_gateway

RESULTS = Path(__file__).resolve().parent / "results" / "shadow_p50.md"
BODY = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}


def config(shadow: bool, ttft_ms: int) -> dict[str, Any]:
    data = default_config_dict()
    data["operations"] = {"request_log": False}
    data["response_cache"] = {"keys": []}
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": ttft_ms, "tokens_per_second": 0}
        if shadow and model["id"] == "sim-mini":
            model["shadow"] = {"model": "sim-standard", "share": 1.0}
    return data


async def measure(shadow: bool, calls: int, concurrency: int, ttft_ms: int) -> list[float]:
    async with running_gateway(config(shadow, ttft_ms)) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        headers = {"x-api-key": API_KEY}
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for _ in range(20):  # warm-up
                await http.post("/v1/chat/completions", json=BODY, headers=headers)
            took: list[float] = []

            async def worker(n: int) -> None:
                for _ in range(n):
                    started = time.perf_counter()
                    answer = await http.post("/v1/chat/completions", json=BODY, headers=headers)
                    took.append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200, answer.text

            await asyncio.gather(*(worker(calls // concurrency) for _ in range(concurrency)))
    return took


def row(name: str, took: list[float]) -> str:
    p95 = statistics.quantiles(took, n=20)[-1]
    return f"| {name} | {len(took)} | {statistics.median(took):.1f} | {p95:.1f} |"


async def run(calls: int, concurrency: int, ttft_ms: int) -> str:
    off = await measure(False, calls, concurrency, ttft_ms)
    on = await measure(True, calls, concurrency, ttft_ms)
    added = statistics.median(on) - statistics.median(off)
    return (
        "# Shadow traffic and the caller's latency\n\n"
        f"`python -m bench.shadow_p50 --calls {calls} --concurrency {concurrency} "
        f"--ttft-ms {ttft_ms}`: chat completions of sim-mini (upstreams answer after "
        f"{ttft_ms} ms), shadow off, then on with share 1.0 (every call also sent to "
        "sim-standard), in one process with the client.\n\n"
        "| shadow | calls | p50 ms | p95 ms |\n|---|---|---|---|\n"
        f"{row('off', off)}\n{row('on (share 1.0)', on)}\n\n"
        f"Added p50: {added:+.1f} ms.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--ttft-ms", type=int, default=50)
    args = parser.parse_args()
    report = asyncio.run(run(args.calls, args.concurrency, args.ttft_ms))
    RESULTS.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
