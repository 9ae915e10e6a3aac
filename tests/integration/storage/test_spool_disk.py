"""The spool never costs an answer or a row: a gateway whose spool sits on a full disk
answers every call and writes every row to the database, saying so once, and a file
in the spool folder that is not a segment never stops it from starting."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import httpx

from tests.integration.ops.test_worker_crash import HELLO, config
from tests.support.disks import full_disk
from tests.support.gateways import API_KEY, start_process, stop_process, write_config


async def test_a_full_spool_disk_costs_no_answer_and_no_row(tmp_path: Path) -> None:
    data = config(tmp_path)
    data["ledger"]["flush_interval_s"] = 0.2
    with full_disk(tmp_path / "spool") as disk:
        (disk.path / "gateway.bak.jsonl").write_bytes(b"")  # a stray file, made before full
        gw = start_process("--config", str(write_config(tmp_path, data)), "--http-port", "0",
                           "--grpc-port", "0")  # fmt: skip
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as c:

                async def one() -> int:
                    reply = await c.post("/v1/chat/completions", json=HELLO,
                                         headers={"x-api-key": API_KEY})  # fmt: skip
                    return reply.status_code

                statuses = await asyncio.gather(*(one() for _ in range(150)))
        finally:
            output = stop_process(gw, timeout_s=30)
    assert statuses == [200] * 150, output
    assert gw.process.returncode == 0, output
    with sqlite3.connect(tmp_path / "gateway.db") as db:
        rows = db.execute("SELECT COUNT(*) FROM usage_records WHERE status = 'OK'").fetchone()[0]
    assert rows == 150, output
    assert "Traceback" not in output
    assert output.count("takes no rows") == 1, output
    assert "gateway.bak.jsonl in the spool folder is not a segment; skipped" in output
