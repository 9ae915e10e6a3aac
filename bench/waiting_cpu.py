"""What a call waiting for a rate limit's room (`traffic.*.max_wait_s`) costs the
gateway: its process's CPU time over a few seconds while N calls wait, against the
same seconds idle. Waiting is a sleep on the event loop, so the two should match.

Run: python -m bench.waiting_cpu [--waiting N] [--seconds S]
Writes bench/results/waiting_cpu.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.gateways import default_config_dict, start_process, stop_process, write_config

RESULTS = Path(__file__).resolve().parent / "results" / "waiting_cpu.md"
KEY = "gw-bench-waiting-key-000001"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """The process's user and system CPU time, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def waiting(http: httpx.AsyncClient) -> float:
    text = (await http.get("/metrics")).text
    found = re.search(r"^gateway_calls_waiting (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def run(count: int, seconds: float) -> str:
    data = default_config_dict()
    # One request a minute: every call after the first waits for up to max_wait_s.
    data["keys"].append({"name": "bench", "kind": "api", "secret": KEY, "requests_per_minute": 1})
    data["traffic"] = {
        "keys": {"bench": {"max_wait_s": 120, "max_waiting": count}},
        "max_waiting": count,
    }
    data["operations"] = {"request_log": False}
    with tempfile.TemporaryDirectory() as folder:
        gw = start_process("--config", str(write_config(Path(folder), data)))
        try:
            base = f"http://127.0.0.1:{gw.http_port}"
            pid = gw.process.pid
            body = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}
            limits = httpx.Limits(max_connections=count + 10)
            async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as http:
                headers = {"x-api-key": KEY}
                await http.post("/v1/chat/completions", json=body, headers=headers)
                before = cpu_s(pid)
                await asyncio.sleep(seconds)
                idle = cpu_s(pid) - before
                calls = [
                    asyncio.create_task(
                        http.post("/v1/chat/completions", json=body, headers=headers)
                    )
                    for _ in range(count)
                ]
                for _ in range(600):  # until every call waits (at most a minute)
                    if await waiting(http) >= count:
                        break
                    await asyncio.sleep(0.1)
                before, started = cpu_s(pid), time.monotonic()
                await asyncio.sleep(seconds)
                busy = cpu_s(pid) - before
                spent = time.monotonic() - started
                assert await waiting(http) == count, "the calls stopped waiting"
                for call in calls:
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
        finally:
            stop_process(gw)
    return (
        "# CPU of calls waiting for a rate limit's room\n\n"
        f"`python -m bench.waiting_cpu --waiting {count} --seconds {seconds:g}`: the gateway "
        "process's CPU time (user + system, from /proc) over the same span, idle and with "
        f"{count} calls waiting (`max_wait_s`).\n\n"
        "| state | CPU s | over s | CPU share |\n|---|---|---|---|\n"
        f"| idle | {idle:.2f} | {seconds:g} | {idle / seconds:.1%} |\n"
        f"| {count} waiting | {busy:.2f} | {spent:.1f} | {busy / spent:.1%} |\n\n"
        f"Per waiting call: {(busy - idle) / count / spent * 1000:.3f} ms of CPU a second.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--waiting", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=5)
    args = parser.parse_args()
    report = asyncio.run(run(args.waiting, args.seconds))
    RESULTS.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
