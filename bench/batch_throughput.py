"""Batch lines per second one gateway runs through the simulated models while it serves
interactive load, and what the interactive p50 does meanwhile.

One gateway (SQLite in a temporary folder, simulated models answering after `--ttft-ms`)
serves `--clients` interactive callers in a closed loop, first alone (the baseline p50),
then while it runs a batch of `--lines` lines (the p50 during, and the batch's lines per
second from its creation to `completed`). Writes bench/results/batch_throughput.md.

Run: python -m bench.batch_throughput [--lines 1000] [--clients 8] [--ttft-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
import orjson

from tests.support.gateways import API_KEY, default_config_dict, running_gateway

RESULTS = Path(__file__).resolve().parent / "results" / "batch_throughput.md"


def config(folder: Path, ttft_ms: int, per_batch: int) -> dict[str, Any]:
    data = default_config_dict()
    data["storage"] = {"sqlite_path": str(folder / "gateway.db"), "timeout_s": 10.0}
    data["batches"] = {"files_dir": str(folder / "files"), "poll_s": 0.05,
                       "concurrency_per_batch": per_batch, "concurrency_per_key": per_batch,
                       "concurrency": per_batch}  # fmt: skip
    for key in data.get("keys", []):  # the figure is the gateway's pace, not a key's limit
        key.pop("requests_per_minute", None)
        key.pop("tokens_per_minute", None)
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": ttft_ms, "tokens_per_second": 0}
    return data


async def interactive(sdk: openai.AsyncOpenAI, stop: asyncio.Event, seen: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await sdk.chat.completions.create(
            model="sim-mini", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
        seen.append(time.perf_counter() - started)


async def load(sdk: openai.AsyncOpenAI, clients: int, seconds: float | None,
               until: asyncio.Event | None = None) -> list[float]:  # fmt: skip
    stop = until or asyncio.Event()
    seen: list[float] = []
    tasks = [asyncio.create_task(interactive(sdk, stop, seen)) for _ in range(clients)]
    if seconds is not None:
        await asyncio.sleep(seconds)
        stop.set()
    await asyncio.gather(*tasks)
    return seen


async def run(lines: int, clients: int, ttft_ms: int, per_batch: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        async with running_gateway(config(Path(folder), ttft_ms, per_batch)) as gw:
            sdk = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{gw.http_port}/v1",
                                     api_key=API_KEY, max_retries=0)  # fmt: skip
            async with sdk:
                await load(sdk, clients, 1.0)  # warm up
                alone = await load(sdk, clients, 5.0)
                data = b"".join(
                    orjson.dumps({"custom_id": f"l{i}", "method": "POST",
                                  "url": "/v1/chat/completions",
                                  "body": {"model": "sim-mini", "max_tokens": 8,
                                           "messages": [{"role": "user", "content": f"item {i}"}]}})
                    + b"\n" for i in range(lines)
                )  # fmt: skip
                uploaded = await sdk.files.create(file=("b.jsonl", io.BytesIO(data)),
                                                  purpose="batch")  # fmt: skip
                done = asyncio.Event()
                during_task = asyncio.create_task(load(sdk, clients, None, done))
                started = time.perf_counter()
                batch = await sdk.batches.create(input_file_id=uploaded.id,
                                                 endpoint="/v1/chat/completions",
                                                 completion_window="24h")  # fmt: skip
                while True:
                    if (await sdk.batches.retrieve(batch.id)).status == "completed":
                        break
                    await asyncio.sleep(0.1)
                elapsed = time.perf_counter() - started
                done.set()
                during = await during_task
    return {
        "lines_per_s": lines / elapsed,
        "p50_alone_ms": statistics.median(alone) * 1000,
        "p50_during_ms": statistics.median(during) * 1000,
        "interactive_per_s_alone": len(alone) / 5.0,
        "interactive_per_s_during": len(during) / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ttft-ms", type=int, default=20)
    parser.add_argument("--per-batch", type=int, default=4)
    args = parser.parse_args()
    found = asyncio.run(run(args.lines, args.clients, args.ttft_ms, args.per_batch))
    table = "\n".join(f"| {k} | {v:.1f} |" for k, v in found.items())
    text = (
        "# Batch lines beside interactive load\n\n"
        f"`python -m bench.batch_throughput --lines {args.lines} --clients {args.clients} "
        f"--ttft-ms {args.ttft_ms} --per-batch {args.per_batch}`: one gateway, SQLite, "
        "simulated models.\n\n| figure | value |\n|---|---|\n" + table + "\n"
    )
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
