"""`gateway serve --workers 2`: two processes on both ports, one rate limit and one
budget between them (no Redis), and a ledger that loses nothing on SIGTERM."""

from __future__ import annotations

import asyncio
import math
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
from gateway.v1 import chat_service_pb2 as chat

from tests.support.gateways import (
    children,
    default_config_dict,
    start_process,
    stop_process,
    write_config,
)
from tests.support.grpc_stubs import Stubs
from tests.support.shared_state import MAX_TOKENS, reservation

BURST = "burst-key-000000000000000"
SPENDER = "spender-key-0000000000000"
RPM = 30
HELLO = {"role": "user", "content": "hello"}


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def test_two_workers_share_ports_limits_budget_and_drain_the_ledger(tmp_path):
    limit = round(reservation() * 5.5, 9)
    data = default_config_dict()
    data["storage"] |= {"sqlite_path": str(tmp_path / "gateway.db")}
    # Records stay buffered until shutdown: only the SIGTERM drain writes them.
    data["ledger"] = {"flush_interval_s": 600, "batch_size": 100_000}
    data["keys"] += [
        {"name": "burst", "kind": "api", "secret": BURST, "requests_per_minute": RPM},
        {"name": "spender", "kind": "api", "secret": SPENDER, "budget_usd": limit},
    ]
    path = str(write_config(tmp_path, data))
    gw = start_process("--config", path, "--workers", "2")
    try:
        assert gw.http_port and gw.grpc_port, "".join(gw.output)
        workers = children(gw.process.pid)
        assert len(workers) == 2, "".join(gw.output)
        before = {pid: cpu_ticks(pid) for pid in workers}

        # One rate limit: 100 concurrent requests over many connections (REST and gRPC).
        limits = httpx.Limits(max_connections=40)
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", limits=limits) as c,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
        ):
            stubs = Stubs(channel)

            async def rest(key: str, body: dict) -> tuple[int, float]:
                r = await c.post("/v1/chat/completions", json=body, headers={"x-api-key": key})
                return r.status_code, r.json().get("usage", {}).get("total_cost_usd", 0.0)

            async def over_grpc() -> int:
                request = chat.CreateChatCompletionRequest(
                    model="sim-mini", messages=[chat.ChatMessage(**HELLO)]
                )
                try:
                    await stubs.chat.CreateChatCompletion(request, metadata=(("x-api-key", BURST),))
                except grpc.aio.AioRpcError as exc:
                    return 429 if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else 500
                return 200

            mini = {"model": "sim-mini", "messages": [HELLO]}
            calls = [rest(BURST, mini) for _ in range(80)]
            started = time.monotonic()
            answers = await asyncio.gather(*calls, *(over_grpc() for _ in range(20)))
            took = time.monotonic() - started
            codes = [a[0] if isinstance(a, tuple) else a for a in answers]
            served = codes.count(200)
            # The bucket's RPM, and what it refilled while the burst lasted.
            assert RPM <= served <= RPM + math.ceil(took * RPM / 60) + 1, (took, codes)
            assert codes.count(429) == 100 - served, codes

            # One budget: concurrent spends through both workers stay within it.
            pro = {"model": "sim-pro", "messages": [HELLO], "max_tokens": MAX_TOKENS}
            spent = await asyncio.gather(*(rest(SPENDER, pro) for _ in range(30)))
            paid = [cost for status, cost in spent if status == 200]
            assert 1 <= len(paid) <= 5, spent
            assert {status for status, _ in spent} <= {200, 429}
            assert sum(paid) <= limit + 1e-12

        # Both workers served.
        assert all(cpu_ticks(pid) > before[pid] for pid in workers)
    finally:
        output = stop_process(gw, timeout_s=60)
    assert gw.process.returncode == 0, output

    # The ledger lost nothing: every request above, refused ones included.
    with sqlite3.connect(tmp_path / "gateway.db") as db:
        rows = dict(
            db.execute(
                "SELECT status, COUNT(*) FROM usage_records WHERE key_name = 'burst' "
                "GROUP BY status"
            ).fetchall()
        )
        spends = db.execute(
            "SELECT COUNT(*) FROM usage_records WHERE key_name = 'spender'"
        ).fetchone()[0]
    assert rows == {"OK": served, "RESOURCE_EXHAUSTED": 100 - served}
    assert spends == 30


def test_workers_must_be_positive(tmp_path):
    path = str(write_config(tmp_path, default_config_dict()))
    done = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "--config", path, "--workers", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--workers: must be at least 1" in done.stderr
