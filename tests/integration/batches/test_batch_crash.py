"""Two gateway processes sharing one database (SQLite and PostgreSQL): the one running a
batch is killed with SIGKILL mid-batch, the other (which left the leased batch alone)
takes it over once the lease lapses, and the ledger holds exactly one row per line."""

from __future__ import annotations

import io
import signal
import time
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from server.storage.db import connect
from tests.support.gateways import (
    API_KEY,
    default_config_dict,
    eventually,
    start_process,
    stop_process,
    write_config,
)

LINES = 40
LEASE_S = 1.0


def config(tmp_path: Path, database_url: str | None) -> dict[str, Any]:
    data = default_config_dict()
    data["storage"] = {"sqlite_path": str(tmp_path / "gateway.db"), "timeout_s": 10.0}
    if database_url:
        data["storage"]["database_url"] = database_url
    data["batches"] = {"files_dir": str(tmp_path / "files"), "poll_s": 0.05,
                       "lease_s": LEASE_S, "concurrency_per_batch": 2}  # fmt: skip
    for model in data["models"]:
        for provider in model["providers"]:
            provider["params"] = {"ttft_ms": 60, "tokens_per_second": 0}
    return data


def batch_input() -> bytes:
    return b"".join(
        orjson.dumps({"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions",
                      "body": {"model": "sim-mini", "max_tokens": 8,
                               "messages": [{"role": "user", "content": f"item {i}"}]}}) + b"\n"
        for i in range(LINES)
    )  # fmt: skip


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str | None:
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("pg_url"))


async def holder_pid(db: Any, batch_id: str) -> int:
    """The process holding the batch's lease (its owner is `host:pid:nonce`)."""
    row = await db.fetchrow("SELECT lease_owner FROM batches WHERE id = ?", batch_id)
    assert row is not None and row["lease_owner"], row
    return int(row["lease_owner"].split(":")[1])


async def test_a_batch_survives_its_instance_killed(
    tmp_path: Path, database_url: str | None
) -> None:
    path = str(write_config(tmp_path, config(tmp_path, database_url)))
    gateways = [start_process("--config", path) for _ in range(2)]
    db = None
    try:
        for gw in gateways:
            assert gw.http_port, "".join(gw.output)
        sdks = [openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{gw.http_port}/v1",
                                   api_key=API_KEY, max_retries=0) for gw in gateways]  # fmt: skip
        uploaded = await sdks[0].files.create(file=("in.jsonl", io.BytesIO(batch_input())),
                                              purpose="batch")  # fmt: skip
        batch = await sdks[0].batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        db = await connect(database_url, str(tmp_path / "gateway.db"))

        async def some_done() -> int:
            done = (await sdks[1].batches.retrieve(batch.id)).request_counts
            assert done is not None and 3 <= done.completed < LINES - 5, done
            return done.completed

        await eventually(some_done)
        pid = await holder_pid(db, batch.id)
        [killed] = [gw for gw in gateways if gw.process.pid == pid]
        [survivor] = [gw for gw in gateways if gw is not killed]
        other = sdks[gateways.index(survivor)]
        killed.process.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        killed.process.wait(timeout=10)
        at_kill = (await other.batches.retrieve(batch.id)).request_counts
        assert at_kill is not None
        before = at_kill.completed

        async def resumed() -> None:
            done = (await other.batches.retrieve(batch.id)).request_counts
            assert done is not None and done.completed > before

        await eventually(resumed)
        resume_s = time.monotonic() - killed_at
        assert await holder_pid(db, batch.id) == survivor.process.pid

        async def completed() -> Any:
            found = await other.batches.retrieve(batch.id)
            assert found.status == "completed", found.status
            return found

        found = await eventually(completed, timeout_s=60)
        assert found.request_counts.completed == LINES
        output = (await other.files.content(found.output_file_id)).content
        assert sorted(orjson.loads(x)["custom_id"] for x in output.splitlines()) == sorted(
            f"line-{i}" for i in range(LINES)
        )
        rows = await db.fetch(
            "SELECT custom_id, COUNT(*) AS n FROM usage_records WHERE batch_id = ? "
            "GROUP BY custom_id", batch.id,
        )  # fmt: skip
        assert len(rows) == LINES and {r["n"] for r in rows} == {1}
        assert found.usage.total_tokens > 0
        print(f"rows per line after kill -9: 1 ({LINES} lines, {len(rows)} rows); "
              f"resumed {resume_s:.2f}s after the kill (lease {LEASE_S}s)")  # fmt: skip
        for sdk in sdks:
            await sdk.close()
    finally:
        if db is not None:
            await db.close()
        for gw in gateways:
            if gw.process.poll() is None:
                output = stop_process(gw)
                assert gw.process.returncode == 0, output
