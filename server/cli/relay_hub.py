"""The supervisor's side of relayed admin changes (`gateway serve --workers N`).

An admin change (a config reload, a provider enabled or disabled) reaches the one
worker that serves it; that worker makes it, then sends it here, and the hub passes it
to every other worker and gathers their acks within RELAY_TIMEOUT_S. The worker answers
its caller 200 only when all N made it (server/application/relay.py).

Each worker holds one connection over a Unix socket, opened before it reports ready.
Framing as server/accounting/shared.py's. A worker says `["hello"]` and is answered
`["welcome", changes]`: the provider switches made so far, which a worker started
again (after a crash) makes before it serves, as the config file does not hold them.
Then, from a worker: `["change", id, change]`, answered `["done", id, made]` (how
many workers made it, the sender included); `["ack", id, ok]` for each
`["apply", id, change]` the hub sent it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from typing import Any

from server.accounting.shared import framed, read_message

log = logging.getLogger(__name__)
# Seconds every other worker gets to confirm a change.
RELAY_TIMEOUT_S = 30.0


class _Worker:
    """One worker's connection and the acks it owes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.owed: dict[int, asyncio.Future[bool]] = {}

    def gone(self) -> None:
        for future in self.owed.values():
            if not future.done():
                future.set_result(False)
        self.owed.clear()


class RelayHub:
    def __init__(self, path: str, timeout_s: float = RELAY_TIMEOUT_S) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._workers: set[_Worker] = set()
        # The latest switch of each provider, for workers started again.
        self._switches: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, self.path)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        for task in list(self._tasks):
            task.cancel()
        for worker in list(self._workers):
            worker.gone()
            worker.writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        worker = _Worker(writer)
        try:
            if (await read_message(reader))[0] != "hello":
                return
            writer.write(framed(["welcome", list(self._switches.values())]))
            self._workers.add(worker)
            while True:
                kind, message_id, body = await read_message(reader)
                if kind == "ack":
                    owed = worker.owed.pop(message_id, None)
                    if owed is not None and not owed.done():
                        owed.set_result(body is True)
                elif kind == "change":
                    self._keep(self._relay(worker, message_id, body))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, TypeError):
            pass  # a worker gone (or one that spoke out of turn): it acks nothing more
        finally:
            self._workers.discard(worker)
            worker.gone()
            writer.close()

    def _keep(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _relay(self, sender: _Worker, message_id: int, change: dict[str, Any]) -> None:
        """Passes `change` to every worker but its sender; tells the sender how many
        made it within the bound."""
        if change.get("op") == "provider":
            self._switches[str(change.get("provider"))] = change
        acks = []
        for worker in self._workers - {sender}:
            ack_id = next(self._ids)
            acks.append(worker.owed.setdefault(ack_id, asyncio.get_running_loop().create_future()))
            worker.writer.write(framed(["apply", ack_id, change]))
        if acks:
            await asyncio.wait(acks, timeout=self.timeout_s)
        made = 1 + sum(1 for ack in acks if ack.done() and ack.result())
        with contextlib.suppress(ConnectionError):
            sender.writer.write(framed(["done", message_id, made]))
