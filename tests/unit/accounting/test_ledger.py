"""The ledger's own bookkeeping against real databases: what a key still has in the
buffer (its pending cost, whether a request is there), and what a shutdown says it
could not write, counted exactly, with and without a spool."""

from __future__ import annotations

import logging
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from server.accounting.ledger import Ledger
from server.accounting.spool import Spool
from server.base.record import UsageRecord
from server.storage.db import connect
from server.storage.migrations import migrate
from server.storage.usage import UsageStore
from tests.support.faults import tcp_proxy

ROW = UsageRecord(
    ts=1000.0, request_id="r1", key_id="k1", key_name="one", method="/chat", model="m",
    provider="p", prompt_tokens=10, completion_tokens=5, total_tokens=15,
    input_cost_usd=0.25, output_cost_usd=0.5, cache_input_cost_usd=None,
    total_cost_usd=0.75, latency_ms=1.0, ttft_ms=None, status="OK",
)  # fmt: skip


async def test_what_a_key_still_has_in_the_buffer(tmp_path):
    db = await connect(None, str(tmp_path / "ledger.db"))
    await migrate(db)
    ledger = Ledger(UsageStore(db), flush_interval_s=3600)
    try:
        ledger.record(ROW)
        ledger.record(replace(ROW, request_id="r2", ts=2000.0, total_cost_usd=2.0))
        ledger.record(replace(ROW, request_id="r3", key_id="k2", total_cost_usd=8.0))
        ledger.record(replace(ROW, request_id="r4", total_cost_usd=None))
        assert ledger.pending_cost("k1", 0) == 2.75
        assert ledger.pending_cost("k1", 1500) == 2.0  # only rows since `since`
        assert ledger.pending_cost("k1", 2000) == 2.0  # since is inclusive
        assert ledger.pending_cost("k2", 0) == 8.0
        assert ledger.pending_cost("k9", 0) == 0.0
        assert ledger.holds("k1", "r2") and not ledger.holds("k2", "r2")
        assert not ledger.holds("k1", "r3") and ledger.holds("k2", "r3")
        await ledger.flush()
        assert ledger.pending_cost("k1", 0) == 0.0 and not ledger.holds("k1", "r1")
    finally:
        await db.close()


@pytest.mark.postgres
@pytest.mark.parametrize("spooled", [False, True])
async def test_a_shutdown_says_how_many_records_it_could_not_write(
    pg_url, tmp_path, caplog, spooled
):
    target = urlsplit(pg_url)
    async with tcp_proxy("127.0.0.1", target.port or 5432) as proxy:
        db = await connect(f"postgresql://postgres@127.0.0.1:{proxy.port}{target.path}", "")
        await migrate(db)
        spool = Spool(tmp_path / "spool", "test") if spooled else None
        ledger = Ledger(UsageStore(db), flush_interval_s=3600, spool=spool)
        try:
            for i in range(7):
                ledger.record(replace(ROW, request_id=f"r{i}"))
            proxy.stall()  # the database stops answering mid-conversation
            with caplog.at_level(logging.ERROR, logger="server.accounting.ledger"):
                await ledger.aclose(timeout_s=0.5)
        finally:
            proxy.resume()
            await db.close()
    said = [r.getMessage() for r in caplog.records if r.name == "server.accounting.ledger"]
    if spooled:
        assert said == ["ledger: 7 records left in the spool for the next start "
                        "(the database did not answer)"]  # fmt: skip
    else:
        assert said == ["ledger: 7 records lost at shutdown (the database did not answer)"]


async def test_refused_rows_are_dropped_and_told_first_ten_then_every_thousandth(caplog):
    db = await connect(None, ":memory:")
    await migrate(db)
    ledger = Ledger(UsageStore(db), batch_size=5000)
    try:
        # 2**70 fits no INTEGER column: the database refuses each such row alone.
        for i in range(1000):
            ledger.record(replace(ROW, request_id=f"bad{i}", prompt_tokens=2**70))
        ledger.record(replace(ROW, request_id="good"))
        with caplog.at_level(logging.ERROR, logger="server.accounting.ledger"):
            await ledger.flush()
    finally:
        await db.close()
    assert (ledger.poisoned, ledger.written) == (1000, 1)
    said = [r.getMessage() for r in caplog.records if r.name == "server.accounting.ledger"]
    assert len(said) == 11  # the first ten, then the thousandth
    assert said[0].startswith("ledger: dropped a record the database refuses (request bad0: ")
    assert said[0].endswith("); 1 dropped so far")
    assert said[9].endswith("); 10 dropped so far") and said[10].endswith("; 1000 dropped so far")
    # The driver's own words say why: here SQLite's, for an integer it cannot hold.
    assert "OverflowError: Python int too large to convert to SQLite INTEGER" in said[0]
