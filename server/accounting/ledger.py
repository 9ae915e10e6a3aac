"""The usage ledger: one record per request, success or failure, written in batches
off the request path.

A request only appends its record to a bounded in-memory buffer; a background task
writes the buffer to the database every `ledger.flush_interval_s` or as soon as a
batch fills. A slow or unavailable database therefore never slows a request: the
buffer grows (up to `ledger.max_buffered`, then the oldest records are dropped and
counted in the log) and failed batches are retried. A graceful shutdown drains it.

A batch the database refuses for its values (not for being away) is split in halves
until the rows it refuses are alone: those are logged, dropped and counted in
`poisoned`, and every row around them is written. One bad record never blocks the
ledger.

With a spool (server/accounting/spool.py), each record is also on disk from before the
answer goes out until it is in the database, so a process that dies loses none: the
next one to start writes them. A record the spool's disk cannot take (full, say) is
kept in the buffer all the same and counted in `unspooled`: the answer and the row
never wait on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from server.accounting.spool import Spool
from server.base.caller import account_fields
from server.base.record import UsageRecord
from server.base.spans import span
from server.storage.db import rejects_row
from server.storage.usage import UsageStore

log = logging.getLogger(__name__)
RETRY_MAX_S = 5.0
# How often `caught_up` looks whether the other workers wrote their records.
CATCH_UP_POLL_S = 0.02


class Ledger:
    def __init__(
        self,
        store: UsageStore | None,
        batch_size: int = 500,
        flush_interval_s: float = 0.5,
        max_buffered: int = 100_000,
        spool: Spool | None = None,
    ) -> None:
        self.store = store
        self.spool = spool
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_buffered = max_buffered
        self._buffer: deque[UsageRecord] = deque()
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.written = 0
        self.dropped = 0
        # Records the database refused for their values, dropped one by one.
        self.poisoned = 0
        # Second rows of a batch line (a line retried after its first row was written),
        # which the database refuses by design: not errors, counted apart.
        self.second_rows = 0
        # Records the spool's disk did not take: buffered in memory only.
        self.unspooled = 0
        # Records taken from the buffer by a write still in progress: still this
        # ledger's to answer for (`holds`) until the database has them.
        self._writing: list[UsageRecord] = []
        # Set by aclose: the flusher ends after the write under way, if any.
        self._closing = False

    def start(self) -> None:
        if self.store is not None and self._task is None:
            if self.spool is not None:
                self._buffer.extendleft(reversed(self.spool.recover()))
            self._task = asyncio.create_task(self._run(), name="ledger-flusher")

    def record(self, row: UsageRecord) -> None:
        """Buffers one record; never waits."""
        if self.store is None:
            return
        with span("gateway.ledger.write"):
            if self.spool is not None and not self.spool.append(row):
                self.unspooled += 1
            self._buffer_row(row)

    def _buffer_row(self, row: UsageRecord) -> None:
        if len(self._buffer) >= self.max_buffered:
            self._buffer.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.error("ledger buffer full: %d records dropped so far", self.dropped)
        self._buffer.append(row)
        if len(self._buffer) >= self.batch_size:
            self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def pending_cost(self, account: str, since: float) -> float:
        """The cost of an account's records (a key's, or a level's: `account_of`) still
        in the buffer, since `since`."""
        match = tuple(account_fields(account).items())
        return sum(
            r.total_cost_usd or 0.0
            for r in self._buffer
            if r.ts >= since and all(getattr(r, column) == value for column, value in match)
        )

    def holds(self, key_id: str, request_id: str) -> bool:
        """Whether a record of this key's request is still in memory: buffered, or
        being written (the database may not have it yet)."""
        return any(
            r.key_id == key_id and r.request_id == request_id
            for rows in (self._buffer, self._writing)
            for r in rows
        )

    async def has(self, key_id: str, request_id: str) -> bool:
        """Whether this key's request has a record, wherever it is now: in memory, in
        another worker's spool, or in the database. Looked up in that order, which is
        the order a record leaves them (a worker deletes a segment once the database
        has its rows), so a record is found the moment its answer was sent."""
        if self.holds(key_id, request_id):
            return True
        if self.spool is not None and self.spool.holds(key_id, request_id):
            return True
        return self.store is not None and await self.store.holds(key_id, request_id)

    async def caught_up(self, timeout_s: float) -> None:
        """Returns once every record answered before the call is in the database,
        this worker's (written now) and the other workers' (their segments gone), or
        raises TimeoutError after `timeout_s`."""
        async with asyncio.timeout(timeout_s):
            others = self.spool.others() if self.spool is not None else []
            await self.flush()
            while others:
                await asyncio.sleep(CATCH_UP_POLL_S)
                others = [path for path in others if path.exists()]

    async def flush(self) -> None:
        """Writes everything buffered now; raises when the database refuses."""
        async with self._flushing:
            # Exactly the rows of the sealed segments: those buffered now.
            sealed = self.spool.seal() if self.spool is not None else []
            left = len(self._buffer)
            while left and self._buffer:
                batch = [self._buffer.popleft() for _ in range(min(self.batch_size, left))]
                left -= len(batch)
                self._writing = batch
                try:
                    await self._write(batch)
                except BaseException:
                    self._buffer.extendleft(reversed(batch))
                    raise
                finally:
                    self._writing = []
            Spool.discard(sealed)

    async def _write(self, batch: list[UsageRecord]) -> None:
        """Writes `batch`, bisecting around rows the database refuses. Raises (with
        nothing of `batch` written twice) when the database itself fails: the rows not
        written yet are then at the front of `batch` (the caller re-buffers them)."""
        assert self.store is not None
        todo = [batch[:]]
        while todo:
            part = todo.pop()
            try:
                await self.store.insert(part)
            except BaseException as exc:
                if not (isinstance(exc, Exception) and rejects_row(exc)):
                    batch[:] = part + [row for chunk in reversed(todo) for row in chunk]
                    raise
                if len(part) == 1:
                    self._poison(part[0], exc)
                    continue
                middle = len(part) // 2
                todo += [part[middle:], part[:middle]]
                continue
            self.written += len(part)

    def _poison(self, row: UsageRecord, exc: Exception) -> None:
        if row.batch_id and "unique" in str(exc).lower():
            self.second_rows += 1
            log.info("ledger: batch %s line %r has its row already; the second is not written",
                     row.batch_id, row.custom_id)  # fmt: skip
            return
        self.poisoned += 1
        if self.poisoned <= 10 or self.poisoned % 1000 == 0:
            log.error(
                "ledger: dropped a record the database refuses (request %s: %s: %s); "
                "%d dropped so far",
                row.request_id, type(exc).__name__, str(exc)[:200], self.poisoned,
            )  # fmt: skip

    async def _run(self) -> None:
        backoff = self.flush_interval_s
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), backoff)
            self._wake.clear()
            if self._closing:
                return
            try:
                await self.flush()
            except Exception as exc:
                backoff = min(RETRY_MAX_S, backoff * 2)
                log.warning(
                    "ledger: cannot write %d records (%s); retrying in %.1fs",
                    len(self._buffer), type(exc).__name__, backoff,
                )  # fmt: skip
            else:
                backoff = self.flush_interval_s

    async def aclose(self, timeout_s: float = 15.0) -> None:
        """Stops the flusher and drains the buffer, retrying until `timeout_s`. A
        database that stopped answering cannot hold shutdown past that: a write stuck
        on it is abandoned (never awaited: a driver may hang cancelling it)."""
        deadline = time.monotonic() + timeout_s
        if self._task is not None:
            # A write under way runs to its end: cancelled, its rows could be in the
            # database and back in the buffer, and the drain would write them again.
            self._closing = True
            self._wake.set()
            await asyncio.wait({self._task}, timeout=max(0.1, deadline - time.monotonic()))
            if not self._task.done():  # a write stuck on a database that stopped answering
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=max(0.1, deadline - time.monotonic()))
            self._task = None
        if self.store is None:
            return
        delay = 0.1
        while self._buffer or self._writing:
            flush = asyncio.ensure_future(self.flush())
            done, _ = await asyncio.wait({flush}, timeout=max(0.1, deadline - time.monotonic()))
            if not done:
                flush.cancel()
                flush.add_done_callback(_retrieve)
                self._lost("the database did not answer")
                return
            exc = flush.exception()
            if exc is None:
                continue
            if time.monotonic() + delay >= deadline:
                self._lost(str(exc) or type(exc).__name__)
                return
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)
        if self.spool is not None:
            self.spool.close()
        log.info("ledger: drained; %d records written", self.written)

    def _lost(self, why: str) -> None:
        lost = len(self._buffer) + len(self._writing)
        if self.spool is not None:
            log.error("ledger: %d records left in the spool for the next start (%s)", lost, why)
            return
        log.error("ledger: %d records lost at shutdown (%s)", lost, why)


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()
