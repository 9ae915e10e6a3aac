"""The workers' shared limits and budgets (`gateway serve --workers N` without Redis):
the parent's one limiter and one set of budgets, reached over a Unix socket. Limits
hold exactly across workers calling at once; a call that fails in the parent fails
alone; an answer to a call given up is dropped; a parent gone fails what is in flight
with a clear error and the next call connects again; frames are bounded to the byte.
(That each backend answers as the in-memory one does is in test_budgets_and_limits.)"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import AsyncIterator

import orjson
import pytest

from server.accounting.shared import (
    MAX_MESSAGE,
    SharedBudgets,
    SharedLimiter,
    StateServer,
)
from server.base.caller import BudgetSpec
from server.base.errors import BudgetExhausted, Internal
from tests.unit.accounting.test_budgets_and_limits import Ledger

LENGTH = struct.Struct(">I")
MONTHLY = BudgetSpec("k1", "team-a", 1.0, "monthly")


def frame(message: object) -> bytes:
    body = orjson.dumps(message)
    return LENGTH.pack(len(body)) + body


async def test_workers_calling_at_once_share_one_limit_exactly(parents):
    first = await parents.client()
    path = first.path
    workers = [SharedLimiter(first), SharedLimiter(parents.worker(path))]
    decisions = await asyncio.gather(
        *(workers[i % 2].acquire("key", 10, None, 0, f"t{i}") for i in range(30))
    )
    assert sum(d.allowed for d in decisions) == 10
    assert sorted(d.requests_remaining for d in decisions if d.allowed) == list(range(10))
    budgets = [SharedBudgets(parents.worker(path)), SharedBudgets(parents.worker(path))]
    held = await asyncio.gather(
        *(budgets[i % 2].reserve(MONTHLY, 0.125) for i in range(12)), return_exceptions=True
    )
    assert sum(isinstance(h, BudgetExhausted) for h in held) == 4  # 8 x 0.125 fill $1
    assert await budgets[1].status(MONTHLY) == (0, 1.0)
    await budgets[0].settle(held[0], 0.5)  # type: ignore[arg-type]
    assert await budgets[1].status(MONTHLY) == (0.5, 0.875)


async def test_a_worker_tells_the_parent_it_is_ready(parents):
    client = await parents.client()
    assert await client.call("ready", 3) is None
    assert parents.servers[0].ready.get_nowait() == 3


async def test_a_call_that_fails_in_the_parent_fails_alone(parents, caplog):
    client = await parents.client()
    with (
        caplog.at_level(logging.ERROR, logger="server.accounting.shared"),
        pytest.raises(Internal) as failed,
    ):
        await client.call("no-such-op")
    assert failed.value.message == "the shared limit service failed"
    assert [r.getMessage() for r in caplog.records] == ["shared state: no-such-op failed"]
    # The same connection goes on answering.
    assert await SharedBudgets(client).status(MONTHLY) == (0, 0)


class Slow(Ledger):
    """A ledger that says when it is asked, and answers once `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.reading, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self, key_id: str, since: float) -> float:
        self.asked.append((key_id, since))
        self.reading.set()
        await self.release.wait()
        return self.spent


async def test_an_answer_to_a_call_given_up_is_dropped(parents):
    ledger = Slow()
    client = await parents.client(ledger)
    budgets = SharedBudgets(client)
    waiting = asyncio.create_task(budgets.reserve(MONTHLY, 0.5))
    await ledger.reading.wait()
    waiting.cancel()  # the caller went away while the parent was reading the ledger
    ledger.release.set()
    # The parent still made the reservation; its answer finds no one and is dropped.
    assert await budgets.status(MONTHLY) == (0, 0.5)
    assert (await budgets.reserve(MONTHLY, 0.25)).amount == 0.25


@pytest.fixture
async def dying_parent() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A parent that reads one call, then answers `said` (if anything) and goes."""
    folder = tempfile.mkdtemp(prefix="gw-state-")  # short: a Unix socket's path
    path = f"{folder}/state.sock"
    said: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (size,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
        await reader.readexactly(size)
        for data in said:
            writer.write(data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(serve, path)
    try:
        yield path, said
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    "said, lost",
    [
        ([], "IncompleteReadError"),  # gone without a word
        ([LENGTH.pack(MAX_MESSAGE + 1)], "ValueError"),  # a frame no answer can be
        ([LENGTH.pack(10) + b"[1,"], "IncompleteReadError"),  # gone mid-answer
        ([frame([1, 2])[:-1] + b"}"], "JSONDecodeError"),
    ],
)
async def test_a_parent_gone_fails_the_call_in_flight_and_the_next_one_connects_again(
    dying_parent, parents, caplog, said, lost
):
    path, answers = dying_parent
    answers.extend(said)
    client = parents.worker(path)
    with (
        caplog.at_level(logging.ERROR, logger="server.accounting.shared"),
        pytest.raises(Internal) as failed,
    ):
        await SharedLimiter(client).acquire("key", 1, None, 0, "t")
    assert failed.value.message == "the shared limit service is unavailable"
    assert [r.getMessage() for r in caplog.records] == [f"shared state connection lost: {lost}"]
    # A parent at that path again (here the real one): the next call reaches it.
    os.unlink(path)
    server = StateServer(path, Ledger(), 60)
    await server.start()
    parents.servers.append(server)
    assert (await SharedLimiter(client).acquire("key", 1, None, 0, "t")).allowed


async def test_a_closed_client_connects_again_on_its_next_call(parents):
    client = await parents.client()
    assert await client.call("status", ["k", "n", 1.0, "none"]) == [0, 0]
    await client.aclose()
    await client.aclose()  # twice is harmless
    assert await client.call("status", ["k", "n", 1.0, "none"]) == [0, 0]


async def test_the_parent_reads_frames_up_to_the_bound_and_drops_a_longer_one(parents, caplog):
    client = await parents.client()
    await client.aclose()
    # A call of exactly MAX_MESSAGE bytes: a key name long enough to fill it.
    empty = len(orjson.dumps([1, "status", ["", "n", 1.0, "none"]]))
    largest = frame([1, "status", ["k" * (MAX_MESSAGE - empty), "n", 1.0, "none"]])
    assert len(largest) == LENGTH.size + MAX_MESSAGE
    reader, writer = await asyncio.open_unix_connection(client.path)
    writer.write(largest)
    (size,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
    assert orjson.loads(await reader.readexactly(size)) == [1, [0, 0]]
    # One byte more and the parent closes the connection without reading it.
    with caplog.at_level(logging.ERROR, logger="server.accounting.shared"):
        writer.write(LENGTH.pack(MAX_MESSAGE + 1))
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        # So it does with a frame that is not JSON.
        reader, writer = await asyncio.open_unix_connection(client.path)
        writer.write(LENGTH.pack(2) + b"[1")
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
    assert [r.getMessage() for r in caplog.records] == [
        "shared state: a worker's connection dropped (a message of 1048577 bytes, over 1048576)",
        "shared state: a worker's connection dropped (unexpected end of data: line 1 column 3 (char 2))",
    ]


async def test_a_closed_parent_takes_no_more_connections():
    path = f"{tempfile.mkdtemp(prefix='gw-state-')}/state.sock"
    server = StateServer(path, Ledger(), 60)
    await server.aclose()  # before it started: nothing to close
    await server.start()
    await server.aclose()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_unix_connection(path)
    shutil.rmtree(path.rpartition("/")[0])


async def test_answers_are_matched_to_calls_by_id(dying_parent, parents):
    path, answers = dying_parent
    # An answer to no call (a stray id), then the call's own.
    allowed = [True, 1, 0, None, 0, 0.0, 60.0, 0.0]
    answers.extend([frame([7, [False, 1, 0, None, 0, 9.0, 60.0, 0.0]]), frame([1, allowed])])
    limiter = SharedLimiter(parents.worker(path))
    decision = await asyncio.wait_for(limiter.acquire("key", 1, None, 0, "t"), 5)
    assert decision.allowed and decision.retry_after_s == 0.0
