"""Admin changes that reach every worker of `gateway serve --workers N`.

A reload or a provider switch made through the admin API is made by the worker that
serves it; `WorkerRelay.everywhere` then sends it through the supervisor's hub
(server/cli/relay_hub.py) to every other worker, which makes it too and acks. Fewer
than N workers making it in time is ChangeNotEverywhere (503): the caller may send it
again (both changes are idempotent). A single process (`Alone`) is everywhere already.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from server.accounting.shared import framed, read_message
from server.base.errors import ChangeNotEverywhere

log = logging.getLogger(__name__)
Change = dict[str, Any]
# Beyond the hub's own bound (30 s): its answer, or the supervisor gone.
ANSWER_TIMEOUT_S = 35.0


class Relay(Protocol):
    async def everywhere(self, change: Change) -> None: ...


class Alone:
    """The relay of a gateway of one process."""

    async def everywhere(self, change: Change) -> None:
        return None


class WorkerRelay:
    """A worker's connection to the hub: sends its changes, makes the others'."""

    def __init__(self, path: str, workers: int, apply: Callable[[Change], Awaitable[None]]):
        self.path = path
        self.workers = workers
        self.apply = apply
        self._ids = itertools.count(1)
        self._answers: dict[int, asyncio.Future[int]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        """Connects, and makes the switches made before this worker started."""
        reader, self._writer = await asyncio.open_unix_connection(self.path)
        self._writer.write(framed(["hello"]))
        _, switches = await read_message(reader)
        for change in switches:
            await self.apply(change)
        self._keep(self._listen(reader))

    async def everywhere(self, change: Change) -> None:
        message_id = next(self._ids)
        answer = self._answers[message_id] = asyncio.get_running_loop().create_future()
        made = 1
        try:
            if self._writer is not None and not self._writer.is_closing():
                self._writer.write(framed(["change", message_id, change]))
                async with asyncio.timeout(ANSWER_TIMEOUT_S):
                    made = await answer
        except TimeoutError:
            pass
        finally:
            self._answers.pop(message_id, None)
        if made < self.workers:
            raise ChangeNotEverywhere(
                f"the change was made on {made} of {self.workers} workers: the others did "
                "not confirm it in time; send it again",
                {"made": str(made), "workers": str(self.workers)},
            )

    async def _listen(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                kind, message_id, body = await read_message(reader)
                if kind == "apply":
                    self._keep(self._make(message_id, body))
                elif (answer := self._answers.get(message_id)) and not answer.done():
                    answer.set_result(int(body))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            log.error("relay of admin changes lost: %s", type(exc).__name__)
            if self._writer is not None:
                self._writer.close()  # later changes fail at once
            for answer in self._answers.values():
                if not answer.done():
                    answer.set_result(1)

    async def _make(self, message_id: int, change: Change) -> None:
        """Makes a change another worker relayed, then acks whether it took."""
        try:
            await self.apply(change)
            made = True
        except Exception as exc:
            log.error("relayed change %s not made here: %s", change.get("op"), exc)
            made = False
        if self._writer is not None:
            with contextlib.suppress(ConnectionError):
                self._writer.write(framed(["ack", message_id, made]))

    def _keep(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
