"""Hostile text and poison rows against the real ledger: text no database can store is
made storable before it gets there, and a batch the database refuses for one row
writes every row around it (issue 12, item 1)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from urllib.parse import urlsplit

import asyncpg
import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat

from server.accounting.ledger import Ledger
from server.base.config import StorageConfig
from server.storage import open_store
from server.storage.db import rejects_row, storable
from server.storage.usage import UsageRecord
from tests.support.faults import tcp_proxy
from tests.support.gateways import (
    API_KEY,
    running_gateway,
    start_process,
    stop_process,
    write_config,
)
from tests.support.grpc_stubs import API, Stubs
from tests.support.shared_state import AdminClient, config_with

HELLO = [chat.ChatMessage(role="user", content="hello")]


def test_storable_text():
    assert storable("plain") == "plain"
    assert storable("a\x00b") == "a\ufffdb"
    assert storable("\ud800x\udfff") == "\ufffdx\ufffd"
    assert storable("é\x00\ud83d") == "é\ufffd\ufffd"
    assert storable("😀") == "😀"  # a real pair stays


def _record(i: int, **changes) -> UsageRecord:  # type: ignore[no-untyped-def]
    row = UsageRecord(
        ts=time.time(), request_id=f"req-{i}", key_id="k", key_name="k", method="M",
        model="m", provider="p", prompt_tokens=1, completion_tokens=1, total_tokens=2,
        input_cost_usd=None, output_cost_usd=None, cache_input_cost_usd=None,
        total_cost_usd=None, latency_ms=1.0, ttft_ms=None, status="OK",
    )  # fmt: skip
    return dataclasses.replace(row, **changes)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_batch_lines_second_row_is_refused_quietly_and_counted_apart(
    backend, pg_url, caplog
):
    # A line retried after its first row was written: the database takes one row per
    # line by design, which is no error (the log would fill under load) nor poison.
    url = pg_url if backend == "postgresql" else None
    store = await open_store(StorageConfig(database_url=url, sqlite_path=":memory:"))
    try:
        ledger = Ledger(store.usage, batch_size=100)
        batch = f"batch_{uuid.uuid4().hex}"
        for i in range(3):
            ledger.record(_record(i, batch_id=batch, custom_id="line-1"))
        ledger.record(_record(3, batch_id=batch, custom_id="line-2"))
        ledger.record(_record(4, prompt_tokens=2**70))  # a poison row still is one
        with caplog.at_level("INFO", logger="server.accounting.ledger"):
            await ledger.flush()
        assert (ledger.second_rows, ledger.poisoned, ledger.written) == (2, 1, 2)
        rows = await store.db.fetch("SELECT custom_id FROM usage_records WHERE batch_id = ?", batch)
        assert sorted(r["custom_id"] for r in rows) == ["line-1", "line-2"]
        errors = [r for r in caplog.records if r.levelname == "ERROR"]
        assert len(errors) == 1 and "req-4" in errors[0].getMessage()
    finally:
        await store.aclose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_poison_rows_are_dropped_and_the_rows_around_them_written(backend, pg_url):
    url = pg_url if backend == "postgresql" else None
    store = await open_store(StorageConfig(database_url=url, sqlite_path=":memory:"))
    try:
        before = await store.usage.count()
        ledger = Ledger(store.usage, batch_size=100)
        poison = {7, 50, 51, 99, 150}
        for i in range(230):
            # 2**70 fits no INTEGER column: the database refuses that row alone.
            ledger.record(_record(i, prompt_tokens=2**70) if i in poison else _record(i))
        # Text that neither database would take is stored, not refused.
        ledger.record(_record(1000, model="nul\x00model", key_name="\ud800"))
        await ledger.flush()
        assert ledger.poisoned == len(poison) and ledger.pending == 0
        assert ledger.written == 231 - len(poison)
        assert await store.usage.count() == before + 231 - len(poison)
        row = await store.db.fetchrow(
            "SELECT model, key_name FROM usage_records WHERE request_id = ?", "req-1000"
        )
        assert row == {"model": "nul\ufffdmodel", "key_name": "\ufffd"}
    finally:
        await store.aclose()


async def test_a_database_outage_mid_bisection_loses_and_duplicates_nothing(pg_url):
    """A batch with a poison row is being split around it when the connection to
    PostgreSQL is reset, in the middle of the statement that carries row 50: nothing
    written before is written again, nothing not yet written is lost."""
    run = uuid.uuid4().hex[:10]
    target = urlsplit(pg_url)
    async with tcp_proxy("127.0.0.1", target.port or 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}{target.path}"
        store = await open_store(StorageConfig(database_url=url))
        try:
            ledger = Ledger(store.usage, batch_size=64)
            for i in range(64):
                row = _record(i, request_id=f"{run}-{i:03d}")
                ledger.record(dataclasses.replace(row, prompt_tokens=2**70) if i == 40 else row)
            proxy.cut_on(f"{run}-050".encode())
            with pytest.raises(Exception) as failed:  # noqa: B017 - whatever the driver raises
                await ledger.flush()
            assert not rejects_row(failed.value), repr(failed.value)
            assert proxy.marker_cuts == 1
            # Mid-bisection: the rows before the poison row were written, the rest wait.
            assert 0 < ledger.written < 63 and ledger.poisoned == 1
            assert ledger.pending == 63 - ledger.written
            await ledger.flush()
            assert (ledger.written, ledger.poisoned, ledger.pending) == (63, 1, 0)
            ids = [
                r["request_id"]
                for r in await store.db.fetch(
                    "SELECT request_id FROM usage_records WHERE request_id LIKE ?", f"{run}-%"
                )
            ]
            assert sorted(ids) == [f"{run}-{i:03d}" for i in range(64) if i != 40]
        finally:
            await store.aclose()


async def test_a_nul_in_the_model_does_not_stop_the_postgres_ledger(pg_url):
    data = config_with(database_url=pg_url, ledger={"flush_interval_s": 0.05})
    async with running_gateway(data) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            admin = AdminClient(channel)
            _, secret = await admin.create("nul\x00owner-key")
            stubs, mine = Stubs(channel), (("x-api-key", secret),)
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await stubs.chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model="gpt\x00x", messages=HELLO),
                    metadata=(*mine, ("x-request-id", "nul-1")),
                )
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            for i in range(5):
                await stubs.chat.CreateChatCompletion(
                    chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO),
                    metadata=(*mine, ("x-request-id", f"after-{i}")),
                )
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as client:
            # A lone surrogate in a field the facade does not read reaches nothing.
            reply = await client.post(
                "/v1/chat/completions",
                content=b'{"model": "no\\u0000such", "messages": [], "user": "\\ud800"}',
                headers={"x-api-key": API_KEY, "content-type": "application/json",
                         "x-request-id": "nul-2"},
            )  # fmt: skip
            assert reply.status_code in (400, 404), reply.text
        ledger = gw.gateway.accounts.ledger
        deadline = time.monotonic() + 5
        while ledger.pending:
            assert time.monotonic() < deadline, "the ledger is stuck"
            await asyncio.sleep(0.05)
        assert ledger.poisoned == 0
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch(
            "SELECT request_id, model, key_name FROM usage_records "
            "WHERE request_id IN ('nul-1', 'nul-2') OR request_id LIKE 'after-%'"
        )
    finally:
        await conn.close()
    got = {r["request_id"]: (r["model"], r["key_name"]) for r in rows}
    assert got["nul-1"] == ("gpt\ufffdx", "nul\ufffdowner-key")
    assert all(f"after-{i}" in got for i in range(5))


async def test_sigterm_drains_past_a_poison_row(tmp_path, pg_url):
    data = config_with(
        database_url=pg_url, ledger={"flush_interval_s": 3600, "batch_size": 100_000}
    )
    gw = start_process("--config", str(write_config(tmp_path, data)))
    try:
        assert gw.grpc_port, "".join(gw.output)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            stubs = Stubs(channel)

            async def one(i: int) -> None:
                model = "bad\x00model" if i % 10 == 0 else "sim-mini"
                request = chat.CreateChatCompletionRequest(model=model, messages=HELLO)
                meta = (*API, ("x-request-id", f"drain-{tmp_path.name}-{i}"))
                try:
                    await stubs.chat.CreateChatCompletion(request, metadata=meta)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.NOT_FOUND

            await asyncio.gather(*(one(i) for i in range(30)))
    finally:
        output = stop_process(gw)
    assert gw.process.returncode == 0, output
    assert "drained; 30 records written" in output, output
    conn = await asyncpg.connect(pg_url)
    try:
        n = await conn.fetchval(
            "SELECT COUNT(*) FROM usage_records WHERE request_id LIKE $1",
            f"drain-{tmp_path.name}-%",
        )
    finally:
        await conn.close()
    assert n == 30
