"""Fair shares of a saturated model: sim-mini capped at `--slots` calls in flight
(`traffic.models.sim-mini.max_in_flight`, calls wait up to 30 s for a slot), an
upstream answering after `--ttft-ms`. Six keys share it, so a key's share is a sixth
of the slots. Five keys send steadily (one call at a time each) while a sixth floods
with ten times its share in concurrent calls; the five's p50 is compared with theirs
unloaded (the flooder silent). Then the same with the flooder in the `batch` class.

Run: python -m bench.fair_share [--slots N] [--ttft-ms MS] [--seconds S]
Writes bench/results/fair_share.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateways import default_config_dict, start_process, stop_process, write_config

RESULTS = Path(__file__).resolve().parent / "results" / "fair_share.md"
BODY = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
STEADY = [f"gw-bench-fair-steady-{i:04d}" for i in range(5)]
FLOOD = "gw-bench-fair-flood-00000"


def config(slots: int, ttft_ms: int, flood_class: str | None) -> dict[str, Any]:
    data = default_config_dict()
    data["operations"] = {"request_log": False}
    data["response_cache"] = {"keys": []}
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": ttft_ms, "tokens_per_second": 0}
    names = {secret: f"steady-{i}" for i, secret in enumerate(STEADY)} | {FLOOD: "flood"}
    data["keys"] += [{"name": n, "kind": "api", "secret": s} for s, n in names.items()]
    keys: dict[str, Any] = {}
    if flood_class:
        keys["flood"] = {"priority": flood_class}
    data["traffic"] = {
        "models": {"sim-mini": {"max_in_flight": slots, "max_wait_s": 30, "max_waiting": 1000}},
        "keys": keys,
    }
    return data


async def steady(http: httpx.AsyncClient, key: str, until: float, took: list[float]) -> None:
    while time.monotonic() < until:
        started = time.perf_counter()
        answer = await http.post("/v1/chat/completions", json=BODY, headers={"x-api-key": key})
        assert answer.status_code == 200, answer.text
        took.append((time.perf_counter() - started) * 1000)


async def flood(http: httpx.AsyncClient, until: float, served: list[int]) -> None:
    while time.monotonic() < until:
        answer = await http.post("/v1/chat/completions", json=BODY, headers={"x-api-key": FLOOD})
        served.append(answer.status_code)


async def phase(base: str, seconds: float, flooders: int) -> tuple[list[float], int]:
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
        until = time.monotonic() + seconds
        took: list[float] = []
        served: list[int] = []
        await asyncio.gather(
            *(steady(http, key, until, took) for key in STEADY),
            *(flood(http, until, served) for _ in range(flooders)),
        )
    return took, served.count(200)


async def run(slots: int, ttft_ms: int, seconds: float, workers: int) -> str:
    share = slots / 6
    flooders = max(1, round(10 * share))
    lines = []
    for flood_class in (None, "batch"):
        with tempfile.TemporaryDirectory() as folder:
            data = config(slots, ttft_ms, flood_class)
            data["storage"]["sqlite_path"] = str(Path(folder) / "gw.db")
            path = str(write_config(Path(folder), data))
            gw = start_process("--config", path, "--workers", str(workers))
            try:
                base = f"http://127.0.0.1:{gw.http_port}"
                await phase(base, 1, 0)  # warm-up
                alone, _ = await phase(base, seconds, 0)
                loaded, flooded = await phase(base, seconds, flooders)
            finally:
                stop_process(gw)
        p50_alone, p50_loaded = statistics.median(alone), statistics.median(loaded)
        cls = flood_class or "default"
        lines.append(
            f"| {cls} | {p50_alone:.1f} | {p50_loaded:.1f} | {p50_loaded / p50_alone:.2f}x "
            f"| {len(loaded)} | {flooded} |"
        )
    return (
        "# Fair shares of a saturated model\n\n"
        f"`python -m bench.fair_share --slots {slots} --ttft-ms {ttft_ms} --seconds "
        f"{seconds:g} --workers {workers}`: sim-mini capped at {slots} calls in flight, upstream answering "
        f"after {ttft_ms} ms; five keys send one call at a time each; the sixth floods "
        f"with {flooders} concurrent calls (ten times its share of {share:.2f} slots). "
        f"One gateway of {workers} worker(s); the clients run in the bench's own process.\n\n"
        "| flooder's class | steady p50 alone ms | steady p50 flooded ms | ratio | "
        "steady calls | flooder's calls |\n|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slots", type=int, default=6)
    parser.add_argument("--ttft-ms", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    report = asyncio.run(run(args.slots, args.ttft_ms, args.seconds, args.workers))
    results = RESULTS if args.workers == 1 else RESULTS.with_stem(f"fair_share_{args.workers}w")
    results.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
