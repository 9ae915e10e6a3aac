"""The ledger's own bookkeeping against real databases: what a key still has in the
buffer (its pending cost, whether a request is there), a full buffer and a full batch,
the spool of a process that died, and what a shutdown says it could not write,
counted exactly, with and without a spool."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from server.accounting.ledger import Ledger
from server.accounting.spool import Spool
from server.base.record import UsageRecord
from server.storage.db import connect
from server.storage.migrations import migrate
from server.storage.usage import UsageStore
from tests.support.disks import died_spooling, full_disk
from tests.support.faults import tcp_proxy
from tests.support.gateways import wait_for

ROW = UsageRecord(
    ts=1000.0, request_id="r1", key_id="k1", key_name="one", method="/chat", model="m",
    provider="p", prompt_tokens=10, completion_tokens=5, total_tokens=15,
    input_cost_usd=0.25, output_cost_usd=0.5, cache_input_cost_usd=None,
    total_cost_usd=0.75, latency_ms=1.0, ttft_ms=None, status="OK",
)  # fmt: skip


@asynccontextmanager
async def proxied_postgres(pg_url: str) -> AsyncIterator[tuple[Any, Any]]:
    """The test database behind a fault proxy: (proxy, connection), migrated."""
    target = urlsplit(pg_url)
    async with tcp_proxy("127.0.0.1", target.port or 5432) as proxy:
        db = await connect(f"postgresql://postgres@127.0.0.1:{proxy.port}{target.path}", "")
        await migrate(db)
        try:
            yield proxy, db
        finally:
            proxy.up()
            proxy.resume()
            await db.close()


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
    async with proxied_postgres(pg_url) as (proxy, db):
        spool = Spool(tmp_path / "spool", "test") if spooled else None
        ledger = Ledger(UsageStore(db), flush_interval_s=3600, spool=spool)
        for i in range(7):
            ledger.record(replace(ROW, request_id=f"r{i}"))
        proxy.stall()  # the database stops answering mid-conversation
        with caplog.at_level(logging.ERROR, logger="server.accounting.ledger"):
            await ledger.aclose(timeout_s=0.5)
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


async def sqlite_usage(tmp_path: Path) -> tuple[Any, UsageStore]:
    db = await connect(None, str(tmp_path / "ledger.db"))
    await migrate(db)
    return db, UsageStore(db)


async def test_a_full_buffer_drops_its_oldest_records_and_says_so_first_then_every_thousandth(
    tmp_path, caplog
):
    db, usage = await sqlite_usage(tmp_path)
    ledger = Ledger(usage, batch_size=10_000, max_buffered=3)  # never started: nothing writes
    try:
        with caplog.at_level(logging.ERROR, logger="server.accounting.ledger"):
            for i in range(2003):
                ledger.record(replace(ROW, request_id=f"r{i}"))
        assert ledger.dropped == 2000 and ledger.pending == 3
        assert [ledger.holds("k1", f"r{i}") for i in (1999, 2000, 2001, 2002)] == [
            False, True, True, True
        ]  # fmt: skip
        said = [r.getMessage() for r in caplog.records if r.name == "server.accounting.ledger"]
        assert said == [f"ledger buffer full: {n} records dropped so far" for n in (1, 1000, 2000)]
    finally:
        await db.close()


async def test_a_full_batch_is_written_at_once_and_a_partial_one_waits(tmp_path):
    db, usage = await sqlite_usage(tmp_path)
    ledger = Ledger(usage, batch_size=3, flush_interval_s=3600)
    ledger.start()
    try:
        for i in range(2):
            ledger.record(replace(ROW, request_id=f"r{i}"))
        await asyncio.sleep(0.2)
        assert ledger.written == 0  # two of three: they wait for the interval
        ledger.record(replace(ROW, request_id="r2"))
        deadline = time.monotonic() + 5
        while ledger.written < 3:
            assert time.monotonic() < deadline, "a full batch was not written"
            await asyncio.sleep(0.01)
    finally:
        await ledger.aclose()
        await db.close()


async def test_one_flusher_task_and_none_without_a_store(tmp_path):
    db, usage = await sqlite_usage(tmp_path)

    def flushers() -> int:
        return sum(t.get_name() == "ledger-flusher" for t in asyncio.all_tasks())

    try:
        Ledger(None).start()
        assert flushers() == 0
        ledger = Ledger(usage)
        ledger.start()
        ledger.start()
        assert flushers() == 1
        await ledger.aclose()
        await ledger.aclose()  # closing twice is closing once
        assert flushers() == 0
    finally:
        await db.close()


async def test_records_spooled_by_a_process_that_died_are_written_once_by_the_next(
    tmp_path, caplog
):
    db, usage = await sqlite_usage(tmp_path)
    try:
        # A process spools three records and dies: nothing written, the spool keeps them.
        died_spooling(
            tmp_path / "spool", "w1", [replace(ROW, request_id=f"r{i}") for i in range(3)]
        )
        nxt = Ledger(usage, flush_interval_s=3600, spool=Spool(tmp_path / "spool", "w1"))
        nxt.start()
        assert [nxt.holds("k1", f"r{i}") for i in range(3)] == [True] * 3
        nxt.record(replace(ROW, request_id="r3"))
        with caplog.at_level(logging.INFO, logger="server.accounting.ledger"):
            await nxt.aclose()
        rows = await db.fetch("SELECT request_id FROM usage_records ORDER BY id")
        assert [r["request_id"] for r in rows] == ["r0", "r1", "r2", "r3"]
        said = [r.getMessage() for r in caplog.records if r.name == "server.accounting.ledger"]
        assert said == ["ledger: drained; 4 records written"]
        # Written, the spool's segments are gone: a third start recovers nothing.
        assert Spool(tmp_path / "spool", "w1").recover() == []
    finally:
        await db.close()


@pytest.mark.postgres
async def test_a_shutdown_retries_a_failing_database_then_says_why_it_gave_up(pg_url, caplog):
    async with proxied_postgres(pg_url) as (proxy, db):
        ledger = Ledger(UsageStore(db), flush_interval_s=0.05)
        ledger.start()
        for i in range(4):
            ledger.record(replace(ROW, request_id=f"r{i}"))
        proxy.down()  # every connection reset, new ones closed: each write fails fast
        with caplog.at_level(logging.INFO, logger="server.accounting.ledger"):
            await asyncio.sleep(0.5)  # the flusher retries, waiting twice as long each time
            refused = proxy.refused
            started = time.monotonic()
            await asyncio.wait_for(ledger.aclose(timeout_s=1.0), 5)
        # Retried after 0.1, 0.2 and 0.4 s; the next pause would outlast the second.
        assert 0.6 < time.monotonic() - started < 1.5
        assert proxy.refused > refused, "no write was retried at shutdown"
    said = [r.getMessage() for r in caplog.records if r.name == "server.accounting.ledger"]
    assert len(said) >= 3, said
    for message, wait in zip(said, ("0.1", "0.2"), strict=False):
        # The failure's type, whatever the driver calls it, and the next wait.
        pattern = rf"ledger: cannot write 4 records \((?!None)\w+\); retrying in {wait}s"
        assert re.fullmatch(pattern, message), said
    assert said[-1].startswith("ledger: 4 records lost at shutdown (")
    # Why, in the failure's own words ("[Errno 104] Connection reset by peer", say), not
    # its type's name, nor None.
    reason = said[-1].removeprefix("ledger: 4 records lost at shutdown (").removesuffix(")")
    assert " " in reason, said[-1]


@pytest.mark.postgres
async def test_a_row_recorded_while_shutdown_drains_is_written_too(pg_url):
    async with proxied_postgres(pg_url) as (proxy, db):
        ledger = Ledger(UsageStore(db), flush_interval_s=3600)
        ledger.record(replace(ROW, request_id="drain-1"))
        proxy.stall()  # the drain's first write waits on the database
        closing = asyncio.ensure_future(ledger.aclose(timeout_s=5))
        await asyncio.sleep(0.2)
        ledger.record(replace(ROW, request_id="drain-2"))  # a call settled meanwhile
        proxy.resume()
        await asyncio.wait_for(closing, 10)
        assert ledger.written == 2 and not ledger.holds(ROW.key_id, "drain-2")


@pytest.mark.postgres
async def test_a_shutdown_does_not_wait_on_a_write_the_database_never_answers(pg_url, caplog):
    async with proxied_postgres(pg_url) as (proxy, db):
        ledger = Ledger(UsageStore(db), batch_size=1, flush_interval_s=3600)
        ledger.start()
        proxy.stall()  # the database stops answering
        ledger.record(ROW)  # a full batch: the flusher's write hangs on it
        await asyncio.sleep(0.2)
        with caplog.at_level(logging.ERROR):
            started = time.monotonic()
            await asyncio.wait_for(ledger.aclose(timeout_s=0.5), 5)
            # Half a second for the stuck write, a tenth for the last try, and room for a
            # loaded machine: not the hung write's whole time (it never ends).
            assert time.monotonic() - started < 3
    with caplog.at_level(logging.ERROR):
        await asyncio.sleep(0.1)  # the abandoned write ends as its connection closes
    said = [r.getMessage() for r in caplog.records if r.name == "server.accounting.ledger"]
    assert said == ["ledger: 1 records lost at shutdown (the database did not answer)"]
    # ... quietly: its outcome was taken care of (no "exception in callback" or "never
    # retrieved" from the event loop).
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


class AnswersLate(UsageStore):
    """The real store, whose answer comes 0.3 s after its rows are in the database (a
    slow network on the way back)."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.inserted = asyncio.Event()

    async def insert(self, records: Any) -> None:
        await super().insert(records)
        self.inserted.set()
        await asyncio.sleep(0.3)


async def test_a_shutdown_during_a_write_writes_its_rows_once(tmp_path):
    db = await connect(None, str(tmp_path / "ledger.db"))
    await migrate(db)
    store = AnswersLate(db)
    ledger = Ledger(store, batch_size=1, flush_interval_s=3600)
    ledger.start()
    try:
        ledger.record(ROW)  # a full batch: the flusher writes it at once
        await store.inserted.wait()  # the row is in; the database's answer is on its way
        await ledger.aclose(timeout_s=5)
        counted = await db.fetchrow("SELECT COUNT(*) AS n FROM usage_records")
        assert counted is not None and counted["n"] == 1
        assert ledger.written == 1
    finally:
        await db.close()


async def test_a_full_spool_disk_costs_no_record_each_goes_to_the_database(tmp_path, caplog):
    db, usage = await sqlite_usage(tmp_path)
    try:
        with full_disk(tmp_path / "spool") as disk:
            ledger = Ledger(usage, flush_interval_s=0.05, spool=Spool(disk.path, "w"))
            ledger.start()
            with caplog.at_level(logging.WARNING):
                for i in range(40):
                    ledger.record(replace(ROW, request_id=f"r{i}"))
                    await asyncio.sleep(0.005)  # flushes run between them
                await ledger.aclose()
        rows = await db.fetch("SELECT request_id FROM usage_records ORDER BY id")
        assert [r["request_id"] for r in rows] == [f"r{i}" for i in range(40)]
        assert ledger.unspooled == 40
        said = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert [r.name for r in said] == ["server.accounting.spool"]  # once, no traceback
        assert said[0].exc_info is None
    finally:
        await db.close()


class WritesWhenLetGo(UsageStore):
    """The real store, whose writes wait until the test lets them go: a write under
    way, held there as long as the test needs."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.writing = asyncio.Event()
        self.go = asyncio.Event()

    async def insert(self, records: Any) -> None:
        self.writing.set()
        await self.go.wait()
        await super().insert(records)


async def test_a_flush_writes_the_rows_buffered_when_it_began_and_holds_them_until_written(
    tmp_path,
):
    db = await connect(None, str(tmp_path / "ledger.db"))
    await migrate(db)
    usage = WritesWhenLetGo(db)
    ledger = Ledger(usage, flush_interval_s=3600, spool=Spool(tmp_path / "spool", "w"))
    try:
        ledger.record(replace(ROW, request_id="first"))
        flush = asyncio.ensure_future(ledger.flush())
        await usage.writing.wait()
        # Out of the buffer, not in the database yet: still the ledger's.
        assert ledger.pending == 0 and ledger.holds("k1", "first")
        assert not ledger.holds("k2", "first") and await ledger.has("k1", "first")
        ledger.record(replace(ROW, request_id="second"))  # a call settled meanwhile
        usage.go.set()
        await flush
        # The flush wrote the rows buffered when it began; the next one waits its turn,
        # on disk as in memory.
        rows = await db.fetch("SELECT request_id FROM usage_records")
        assert [r["request_id"] for r in rows] == ["first"] and ledger.written == 1
        assert not ledger.holds("k1", "first") and ledger.holds("k1", "second")
        assert ledger.spool is not None
        assert not ledger.spool.holds("k1", "first") and ledger.spool.holds("k1", "second")
        await ledger.flush()
        assert ledger.written == 2 and not ledger.holds("k1", "second")
        assert ledger.spool.others() == [] and not ledger.spool.holds("k1", "second")
    finally:
        await ledger.aclose(1)
        await db.close()


async def test_a_request_is_found_wherever_its_row_is(tmp_path):
    db, usage = await sqlite_usage(tmp_path)
    spooled = tmp_path / "spool"
    try:
        await usage.insert([replace(ROW, request_id="stored")])
        other = Spool(spooled, "w")  # another worker's, its row not written yet
        other.append(replace(ROW, request_id="theirs"))
        ledger = Ledger(usage, flush_interval_s=3600, spool=Spool(spooled, "w"))
        ledger.record(replace(ROW, request_id="mine"))
        unspooled = Ledger(usage, flush_interval_s=3600)
        unspooled.record(replace(ROW, request_id="in memory"))
        for request_id in ("stored", "theirs", "mine"):
            assert await ledger.has("k1", request_id), request_id
            assert not await ledger.has("k2", request_id), request_id
        assert not await ledger.has("k1", "in memory") and not await ledger.has("k1", "never")
        assert await unspooled.has("k1", "in memory") and await unspooled.has("k1", "stored")
        assert not await unspooled.has("k1", "theirs")  # no spool: no other worker's
        # Without a database nothing is recorded, and nothing found.
        nowhere = Ledger(None)
        nowhere.record(replace(ROW, request_id="lost"))
        assert not await nowhere.has("k1", "lost") and not await nowhere.has("k1", "stored")
        other.close()
        await ledger.aclose(1)
    finally:
        await db.close()


async def test_caught_up_writes_its_own_rows_and_waits_for_the_other_workers(tmp_path):
    db, usage = await sqlite_usage(tmp_path)
    spooled = tmp_path / "spool"
    other = Ledger(usage, flush_interval_s=3600, spool=Spool(spooled, "w"))
    ledger = Ledger(usage, flush_interval_s=3600, spool=Spool(spooled, "w"))
    try:
        other.record(replace(ROW, request_id="theirs"))
        ledger.record(replace(ROW, request_id="mine"))
        waiting = asyncio.ensure_future(ledger.caught_up(10))
        await wait_for(lambda: ledger.written == 1)
        await asyncio.sleep(0.1)  # a few of its looks at the other's segment
        assert not waiting.done()  # the other worker's row is not written yet
        await other.flush()
        await asyncio.wait_for(waiting, 30)
        rows = await db.fetch("SELECT request_id FROM usage_records ORDER BY request_id")
        assert [r["request_id"] for r in rows] == ["mine", "theirs"]
        # A row of the other's that is never written: TimeoutError, after the time given.
        other.record(replace(ROW, request_id="later"))
        ledger_alone = Ledger(usage, flush_interval_s=3600, spool=Spool(spooled, "w"))
        stuck = asyncio.ensure_future(ledger_alone.caught_up(0.1))
        done, _ = await asyncio.wait({stuck}, timeout=30)
        assert done and isinstance(stuck.exception(), TimeoutError)
        await ledger_alone.aclose(1)
        # Without a spool, its own rows only.
        alone = Ledger(usage, flush_interval_s=3600)
        alone.record(replace(ROW, request_id="alone"))
        await asyncio.wait_for(alone.caught_up(10), 30)
        assert alone.written == 1
    finally:
        for each in (other, ledger):
            await each.aclose(1)
        await db.close()
