"""Admin changes relayed between the workers of `--workers N` through the supervisor's
hub, over a real Unix socket: every other worker makes a change and acks it; one that
fails, stays silent past the bound, or is gone counts as not made (ChangeNotEverywhere,
naming how many made it); a worker connecting later gets the provider switches made so
far; a hub gone or spoken to out of turn fails nothing else."""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from server.accounting.shared import framed, read_message
from server.application.relay import Alone, WorkerRelay
from server.base.errors import ChangeNotEverywhere
from server.cli.relay_hub import RELAY_TIMEOUT_S, RelayHub

RELOAD = {"op": "reload"}
OFF = {"op": "provider", "provider": "p1", "enabled": False}


class Worker:
    """A worker's relay and the changes it made."""

    def __init__(self, path: str, workers: int, fails: bool = False) -> None:
        self.made: list[dict[str, Any]] = []
        self.fails = fails
        self.hold: asyncio.Event | None = None
        self.relay = WorkerRelay(path, workers, self.apply)

    async def apply(self, change: dict[str, Any]) -> None:
        if self.hold is not None:
            await self.hold.wait()
        if self.fails or change.get("refused"):
            raise ValueError("refused here")
        self.made.append(change)


@pytest.fixture
async def hub() -> AsyncIterator[RelayHub]:
    with tempfile.TemporaryDirectory() as folder:
        started = RelayHub(str(Path(folder) / "relay.sock"), timeout_s=5)
        await started.start()
        yield started
        await started.aclose()
        await started.aclose()  # again: nothing left to close
        assert started._server is not None and not started._server.is_serving()
        assert not await asyncio.to_thread(os.path.exists, started.path)  # gone with the hub


async def workers(hub: RelayHub, count: int, total: int | None = None) -> list[Worker]:
    made = [Worker(hub.path, total or count) for _ in range(count)]
    for worker in made:
        await worker.relay.open()
    return made


async def close(*made: Worker) -> None:
    for worker in made:
        await worker.relay.aclose()


async def test_a_change_reaches_every_other_worker(hub: RelayHub) -> None:
    one, two, three = await workers(hub, 3)
    await one.relay.everywhere(RELOAD)
    assert (one.made, two.made, three.made) == ([], [RELOAD], [RELOAD])
    await three.relay.everywhere(OFF)
    assert (one.made, two.made, three.made) == ([OFF], [RELOAD, OFF], [RELOAD])
    await close(one, two, three)


async def test_changes_sent_at_once_are_each_answered(hub: RelayHub) -> None:
    one, two = await workers(hub, 2)
    await asyncio.wait_for(asyncio.gather(*(one.relay.everywhere(RELOAD) for _ in range(3))), 5)
    assert two.made == [RELOAD] * 3
    assert not one.relay._answers  # nothing left waiting
    # Nor any task held once done: the hub's relays, the worker's changes made.
    for _ in range(200):
        if not hub._tasks and len(two.relay._tasks) == 1:  # its listener only
            break
        await asyncio.sleep(0.01)
    assert not hub._tasks and len(two.relay._tasks) == 1
    await close(one, two)


async def test_changes_at_once_each_get_their_own_outcome(hub: RelayHub) -> None:
    one, two = await workers(hub, 2)
    refused = {"op": "reload", "refused": True}
    outcomes = await asyncio.gather(
        one.relay.everywhere(refused), one.relay.everywhere(RELOAD), return_exceptions=True
    )
    assert isinstance(outcomes[0], ChangeNotEverywhere) and outcomes[1] is None
    await close(one, two)


async def test_a_hub_that_answers_late_is_given_up(monkeypatch) -> None:
    monkeypatch.setattr("server.application.relay.ANSWER_TIMEOUT_S", 0.2)

    async def late(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_message(reader)
        writer.write(framed(["welcome", []]))
        await read_message(reader)  # the first change: answered only after the second
        await read_message(reader)
        writer.write(framed(["done", 1, 2]) + framed(["done", 2, 2]))
        await reader.read()

    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "relay.sock")
        server = await asyncio.start_unix_server(late, path)
        (one,) = [Worker(path, 2)]
        await one.relay.open()
        with pytest.raises(ChangeNotEverywhere, match="made on 1 of 2 workers"):
            await asyncio.wait_for(one.relay.everywhere(RELOAD), 5)
        assert not one.relay._answers
        # The late answer to the first is dropped; the second's is read.
        await asyncio.wait_for(one.relay.everywhere(RELOAD), 5)
        await close(one)
        server.close()


async def test_a_worker_that_fails_it_makes_it_not_everywhere(hub: RelayHub, caplog) -> None:
    one, two, three = await workers(hub, 3)
    three.fails = True
    with pytest.raises(ChangeNotEverywhere) as caught:
        await one.relay.everywhere(RELOAD)
    assert caught.value.message == (
        "the change was made on 2 of 3 workers: the others did not confirm it in time; "
        "send it again"
    )
    assert caught.value.metadata == {"made": "2", "workers": "3"}
    assert two.made == [RELOAD]
    assert "relayed change reload not made here: refused here" in caplog.messages
    await close(one, two, three)


async def test_a_worker_silent_past_the_bound_counts_as_not_made() -> None:
    with tempfile.TemporaryDirectory() as folder:
        hub = RelayHub(str(Path(folder) / "relay.sock"), timeout_s=0.2)
        await hub.start()
        one, two = await workers(hub, 2)
        two.hold = asyncio.Event()
        with pytest.raises(ChangeNotEverywhere, match="made on 1 of 2 workers"):
            await one.relay.everywhere(RELOAD)
        two.hold.set()
        await close(one, two)
        await hub.aclose()
    assert RELAY_TIMEOUT_S == 30


async def test_a_worker_missing_or_gone_counts_as_not_made(hub: RelayHub) -> None:
    (one,) = await workers(hub, 1, total=2)
    with pytest.raises(ChangeNotEverywhere, match="made on 1 of 2 workers"):
        await one.relay.everywhere(RELOAD)
    (two,) = await workers(hub, 1, total=2)
    two.hold = asyncio.Event()
    sent = asyncio.ensure_future(one.relay.everywhere(RELOAD))
    await asyncio.sleep(0)
    await close(two)  # gone with its ack owed: not made, without waiting for the bound
    with pytest.raises(ChangeNotEverywhere, match="made on 1 of 2 workers"):
        await asyncio.wait_for(sent, 4)
    await close(one)


async def test_a_worker_gone_is_forgotten(hub: RelayHub) -> None:
    one, two = await workers(hub, 2)
    await close(two)
    (three,) = await workers(hub, 1, total=2)
    # Only the live ones are asked: no wait for the one gone.
    await asyncio.wait_for(one.relay.everywhere(RELOAD), 2)
    assert three.made == [RELOAD]
    await close(one, three)


async def test_an_ack_of_nothing_owed_is_ignored(hub: RelayHub) -> None:
    (one,) = await workers(hub, 1, total=2)
    reader, writer = await asyncio.open_unix_connection(hub.path)
    writer.write(framed(["hello"]))
    assert await read_message(reader) == ["welcome", []]
    writer.write(framed(["ack", 999, True]))  # owed nothing: ignored
    sent = asyncio.ensure_future(one.relay.everywhere(RELOAD))
    kind, ack_id, change = await read_message(reader)
    assert (kind, change) == ("apply", RELOAD)
    writer.write(framed(["ack", ack_id, True]) + framed(["ack", ack_id, True]))
    await asyncio.wait_for(sent, 2)
    writer.close()
    await close(one)


async def test_a_worker_alone_needs_no_one(hub: RelayHub) -> None:
    (one,) = await workers(hub, 1)
    await one.relay.everywhere(RELOAD)
    await close(one)
    assert await Alone().everywhere(RELOAD) is None


async def test_a_worker_started_later_gets_the_switches_made(hub: RelayHub) -> None:
    one, two = await workers(hub, 2)
    on = {"op": "provider", "provider": "p1", "enabled": True}
    other = {"op": "provider", "provider": "p2", "enabled": False}
    for change in (OFF, RELOAD, other, on):
        await one.relay.everywhere(change)
    await close(two)
    (again,) = await workers(hub, 1, total=2)
    # The latest switch of each provider; a reload it made reading the file itself.
    assert again.made == [on, other]
    await close(one, again)


async def test_a_hub_gone_fails_the_change_at_once(caplog) -> None:
    with tempfile.TemporaryDirectory() as folder:
        hub = RelayHub(str(Path(folder) / "relay.sock"))
        await hub.start()
        one, two = await workers(hub, 2)
        two.hold = asyncio.Event()
        sent = asyncio.ensure_future(one.relay.everywhere(RELOAD))
        await asyncio.sleep(0.05)
        await hub.aclose()
        with pytest.raises(ChangeNotEverywhere, match="made on 1 of 2 workers"):
            await asyncio.wait_for(sent, 4)
        # Later changes fail at once too: nothing is listening.
        with pytest.raises(ChangeNotEverywhere, match="made on 1 of 2 workers"):
            await asyncio.wait_for(one.relay.everywhere(RELOAD), 4)
        two.hold.set()
        await close(one, two)
    assert "relay of admin changes lost: IncompleteReadError" in caplog.messages


async def test_a_connection_that_speaks_out_of_turn_is_dropped(hub: RelayHub) -> None:
    reader, writer = await asyncio.open_unix_connection(hub.path)
    body = orjson.dumps(["change", 1, RELOAD])  # no hello first
    writer.write(struct.pack(">I", len(body)) + body)
    assert await reader.read() == b""  # closed, never counted as a worker
    writer.close()
    (one,) = await workers(hub, 1)
    await one.relay.everywhere(RELOAD)
    reader, writer = await asyncio.open_unix_connection(hub.path)
    for message in (["hello"], ["ack"]):  # an ack without its id
        body = orjson.dumps(message)
        writer.write(struct.pack(">I", len(body)) + body)
    assert (await reader.read())[4:] == orjson.dumps(["welcome", []])
    writer.close()
    await close(one)
