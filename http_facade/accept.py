"""uvicorn's server on a listening socket of the gateway's own, accepting every
connection that waits each time the socket is ready.

uvloop accepts one connection per turn of its loop. A worker saturated by its streams
turns slowly (tens of milliseconds a turn), so new callers waited in the kernel's
queue: with 1,000 streams opened on one worker, half of them waited over ten seconds
for their first byte while the streams already open ran at full speed. Here, whenever
the socket is ready, everything waiting (up to ACCEPT_PER_TURN) is accepted and handed
to the loop as accepted sockets, served by uvicorn's protocol as before, so a worker
that cannot keep up slows its old and new streams alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from typing import Any

import uvicorn

log = logging.getLogger(__name__)
ACCEPT_PER_TURN = 1024
# Out of file descriptors: accepting pauses this long (the callers wait in the queue).
PAUSE_S = 1.0
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
# uvicorn's tick: how often the main loop updates the Date header and looks for exit.
TICK_S = 0.1
# How often a shutdown looks whether the last connection and task have ended.
SHUTDOWN_POLL_S = 0.005


class AcceptingServer(uvicorn.Server):
    """Serves `config` on `sock` (bound, not yet listening)."""

    def __init__(self, config: uvicorn.Config, sock: socket.socket) -> None:
        super().__init__(config)
        self.sock = sock
        self._opening: set[asyncio.Task[Any]] = set()
        self._exiting = asyncio.Event()

    async def main_loop(self) -> None:
        """uvicorn's ticks (the Date header, once a second), but `exit_now` ends them
        at once rather than at the next tenth of a second."""
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exiting.wait(), TICK_S)

    def exit_now(self) -> None:
        """Starts the graceful shutdown `should_exit` starts, without waiting a tick."""
        self.should_exit = True
        self._exiting.set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # uvicorn itself listens on nothing
        config, state = self.config, self.server_state

        def protocol() -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=state, app_state=self.lifespan.state
            )

        self._protocol = protocol
        self.sock.setblocking(False)
        self.sock.listen(config.backlog)
        asyncio.get_running_loop().add_reader(self.sock.fileno(), self._accept)

    def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(ACCEPT_PER_TURN):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno not in OUT_OF_FILES:
                    return  # the caller gave up before it was accepted (ECONNABORTED)
                log.warning("accepting connections paused for %gs: %s", PAUSE_S, exc)
                loop.remove_reader(self.sock.fileno())
                loop.call_later(PAUSE_S, self._resume)
                return
            conn.setblocking(False)
            task = loop.create_task(loop.connect_accepted_socket(self._protocol, conn))
            self._opening.add(task)
            task.add_done_callback(self._opened)

    def _resume(self) -> None:
        if self.sock.fileno() != -1:
            asyncio.get_running_loop().add_reader(self.sock.fileno(), self._accept)

    def _opened(self, task: asyncio.Task[Any]) -> None:
        self._opening.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("a connection closed as it opened: %r", task.exception())

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's graceful shutdown, without its fixed pauses: it sleeps a tenth of a
        second after asking connections to close, and looks again every tenth, so
        every stop (and every worker of a rolling restart) took that long at least."""
        if self.sock.fileno() != -1:
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
            self.sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                # uvicorn's state offers no event to wait on: it is looked at.
                while (state.connections or state.tasks) and not self.force_exit:  # noqa: ASYNC110
                    await asyncio.sleep(SHUTDOWN_POLL_S)
        except TimeoutError:
            log.error("cancelling %d running task(s): the graceful shutdown ran out",
                      len(state.tasks))  # fmt: skip
            for task in state.tasks:
                task.cancel(msg="the graceful shutdown ran out")
        if not self.force_exit:
            await self.lifespan.shutdown()
