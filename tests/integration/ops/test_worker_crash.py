"""A worker of `--workers 2` killed with SIGKILL: the other keeps serving, the dead one is
started again, and the ledger rows of the calls it had answered (still buffered, never
flushed) are written by the worker that takes its place, from its spool. A worker that
keeps dying stops the command with one line saying so."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateways import (
    API_KEY,
    GatewayProcess,
    children,
    default_config_dict,
    start_process,
    stop_process,
    write_config,
)

HELLO = {"model": "sim-mini", "messages": [{"role": "user", "content": "hello"}]}


def config(tmp_path: Path) -> dict[str, Any]:
    data = default_config_dict()
    data["storage"] |= {"sqlite_path": str(tmp_path / "gateway.db")}
    # Rows stay buffered until shutdown: only the spool can save a dead worker's.
    data["ledger"] = {"flush_interval_s": 600, "batch_size": 100_000,
                      "spool_dir": str(tmp_path / "spool")}  # fmt: skip
    data["operations"] = {"request_log": False}
    return data


async def answered(port: int, count: int) -> int:
    limits = httpx.Limits(max_connections=16)
    # A request may wait its turn for one of the 16 connections a while on a loaded machine.
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60
    ) as c:

        async def one() -> bool:
            reply = await c.post("/v1/chat/completions", json=HELLO,
                                 headers={"x-api-key": API_KEY})  # fmt: skip
            return reply.status_code == 200

        return sum(await asyncio.gather(*(one() for _ in range(count))))


async def said(gw: GatewayProcess, text: str) -> None:
    """Reads the command's output until a line holds `text`."""
    assert gw.process.stdout is not None
    async with asyncio.timeout(60):
        while True:
            line = await asyncio.to_thread(gw.process.stdout.readline)
            gw.output.append(line)
            if text in line or not line:
                assert text in line, "".join(gw.output)
                return


async def until(predicate: Any, timeout_s: float = 20) -> None:
    for _ in range(int(timeout_s / 0.1)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not met in time")


async def test_a_killed_worker_is_replaced_and_its_answered_rows_survive(tmp_path: Path) -> None:
    gw = start_process("--config", str(write_config(tmp_path, config(tmp_path))),
                       "--workers", "2", timeout_s=60)  # fmt: skip
    try:
        assert gw.http_port, "".join(gw.output)
        first = children(gw.process.pid)
        assert len(first) == 2
        served = await answered(gw.http_port, 300)
        assert served == 300
        os.kill(first[0], signal.SIGKILL)
        # The living worker serves alone meanwhile; fresh connections reach it.
        served += await answered(gw.http_port, 100)
        assert served == 400
        await said(gw, "worker 0 is serving again")
        served += await answered(gw.http_port, 100)
    finally:
        output = stop_process(gw, timeout_s=60)
    assert gw.process.returncode == 0, output
    assert "worker 0 exited (code -9); starting it again" in output
    with sqlite3.connect(tmp_path / "gateway.db") as db:
        rows = db.execute("SELECT COUNT(*) FROM usage_records WHERE status = 'OK'").fetchone()[0]
    assert rows == served == 500, output
    assert re.search(r"\d+ records recovered from \d+ segments", output), output
    assert not list((tmp_path / "spool").glob("*.jsonl"))


@pytest.mark.slow
async def test_a_worker_that_keeps_dying_stops_the_command(tmp_path: Path) -> None:
    gw = start_process("--config", str(write_config(tmp_path, config(tmp_path))),
                       "--workers", "2", timeout_s=60)  # fmt: skip
    try:
        for _ in range(5):
            await until(lambda: len(children(gw.process.pid)) == 2)
            victim = max(children(gw.process.pid))  # the one started last: the same worker
            os.kill(victim, signal.SIGKILL)
            await until(lambda v=victim: v not in children(gw.process.pid))
        code = await asyncio.to_thread(gw.process.wait, 60)
    finally:
        output = stop_process(gw, timeout_s=60)
    assert code == 1
    assert "times in 60s" in output and "stopping" in output
