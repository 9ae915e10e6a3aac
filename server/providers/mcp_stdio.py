"""A client of one MCP server run as a child process, speaking newline-delimited
JSON-RPC on its stdin and stdout.

The child's life, one per server per worker:

    (none) --first call--> starting --handshake--> running --exits--> (none)
                                                      |
                                           aclose: SIGTERM, then SIGKILL, reaped

- Started lazily, by the first call, in a process group of its own, with only the
  environment the config gives it (plus PATH, HOME and the locale).
- A child that exits fails the calls it was answering, once each; the next call starts
  another after a backoff, at most RESTARTS_PER_MINUTE a minute.
- `aclose` stops it: SIGTERM to its group, SIGKILL after STOP_GRACE_S, then waits for
  it, so no zombie is left. One lock serializes starting and stopping, so one client
  never has two live children; a client replacing another (a reload) starts its child
  only once the old one is gone (`after`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import time
from collections import deque
from typing import Any

import orjson

from server.base.config import McpServerConfig
from server.base.tools import ToolServerError, ToolTooLarge
from server.providers import mcp_client

log = logging.getLogger(__name__)

RESTARTS_PER_MINUTE = 5
STOP_GRACE_S = 2.0
# The first restart waits this long, each next one twice as long, up to BACKOFF_MAX_S.
BACKOFF_S = 0.1
BACKOFF_MAX_S = 5.0
# Variables a child inherits from the gateway, besides the configured ones.
INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
READ_CHUNK = 256 * 1024
# Where an answer's id is, near its start, when the answer itself is too large to parse.
_ID = re.compile(rb'"id"\s*:\s*(\d+)')


class _Child:
    """One running child process and the calls waiting on its answers."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.pending: dict[int, asyncio.Future[tuple[Any, int]]] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.ids = 0

    def fail_all(self, error: Exception) -> None:
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()


class StdioMcpClient(mcp_client.McpClient):
    def __init__(
        self,
        config: McpServerConfig,
        max_result_bytes: int,
        after: asyncio.Task[None] | None = None,
    ) -> None:
        super().__init__(config.id, config.timeout_s, max_result_bytes)
        assert config.command is not None
        self.argv = [config.command, *config.args]
        self.env = {name: os.environ[name] for name in INHERITED if name in os.environ}
        self.env.update({name: os.environ.get(env, "") for name, env in config.env.items()})
        # The stop of the client this one replaces: its child must be gone first.
        self.after = after
        self._child: _Child | None = None
        self._lock = asyncio.Lock()
        self._starts: deque[float] = deque()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The running child's pid (None when there is none)."""
        return self._child.process.pid if self._child is not None else None

    # -- a call --------------------------------------------------------------------

    async def exchange(self, method: str, params: dict[str, Any] | None) -> tuple[Any, int]:
        child = await self._running()
        return await self._request(child, method, params)

    async def _request(
        self, child: _Child, method: str, params: dict[str, Any] | None
    ) -> tuple[Any, int]:
        child.ids += 1
        request_id = child.ids
        future: asyncio.Future[tuple[Any, int]] = asyncio.get_running_loop().create_future()
        child.pending[request_id] = future
        try:
            self._write(child, mcp_client.request(request_id, method, params))
            return await future
        except asyncio.CancelledError:
            # The caller went away (or timed out): tell the server to stop working on it.
            if child.pending.pop(request_id, None) is not None:
                with contextlib.suppress(ToolServerError):
                    self._write(child, _cancelled(request_id))
            raise
        finally:
            child.pending.pop(request_id, None)

    def _write(self, child: _Child, message: bytes) -> None:
        stdin = child.process.stdin
        if stdin is None or stdin.is_closing():
            raise ToolServerError(f"{self.server}: the server process is gone")
        stdin.write(message + b"\n")

    # -- the child's life ----------------------------------------------------------

    async def _running(self) -> _Child:
        child = self._child
        if child is not None and child.process.returncode is None:
            return child
        async with self._lock:
            if self._closed:
                raise ToolServerError(f"{self.server}: the server was removed from the config")
            child = self._child
            if child is not None and child.process.returncode is None:
                return child
            if self.after is not None:
                await asyncio.shield(self.after)
                self.after = None
            self._child = await self._start()
            return self._child

    async def _start(self) -> _Child:
        now = time.monotonic()
        while self._starts and now - self._starts[0] > 60:
            self._starts.popleft()
        if len(self._starts) >= RESTARTS_PER_MINUTE:
            wait = 60 - (now - self._starts[0])
            raise ToolServerError(
                f"{self.server}: the server process was restarted {RESTARTS_PER_MINUTE} times "
                f"in the last minute; next start in {wait:.0f}s"
            )
        if self._starts:  # a restart: back off, longer each time in the window
            await asyncio.sleep(min(BACKOFF_S * 2 ** (len(self._starts) - 1), BACKOFF_MAX_S))
        self._starts.append(time.monotonic())
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.env, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise ToolServerError(
                f"{self.server}: cannot start the server: {exc.strerror}"
            ) from None
        child = _Child(process)
        child.tasks = [
            asyncio.create_task(self._read_answers(child), name=f"mcp-{self.server}-stdout"),
            asyncio.create_task(self._read_log(child), name=f"mcp-{self.server}-stderr"),
        ]
        log.info("MCP server %s started (pid %d)", self.server, process.pid)
        try:
            message, _ = await asyncio.wait_for(
                self._request(child, "initialize", mcp_client.initialize_params()), self.timeout_s
            )
            mcp_client.result_of(self.server, message)
            self._write(child, mcp_client.notification("notifications/initialized"))
        except BaseException as exc:
            await self._stop(child)
            if isinstance(exc, TimeoutError):
                raise ToolServerError(f"{self.server}: the server did not shake hands") from None
            raise
        return child

    async def _read_answers(self, child: _Child) -> None:
        """Hands each answer to the call waiting on it, until the child's stdout ends."""
        stdout = child.process.stdout
        assert stdout is not None
        limit = self.max_result_bytes  # the whole message, envelope and all
        line = bytearray()
        skipping = False  # inside a line too large to keep
        while chunk := await stdout.read(READ_CHUNK):
            while chunk:
                end = chunk.find(b"\n")
                part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
                if not skipping:
                    line += part
                    if len(line) > limit + 1:  # room for the CR of a CRLF
                        self._refuse_too_large(child, bytes(line[:200]))
                        skipping, line = True, bytearray()
                if end >= 0:
                    message = bytes(line.removesuffix(b"\r"))
                    if skipping:
                        pass
                    elif len(message) > limit:
                        self._refuse_too_large(child, message[:200])
                    elif message.strip():
                        self._answer(child, message)
                    skipping, line = False, bytearray()
        code = await child.process.wait()
        child.fail_all(ToolServerError(f"{self.server}: the server process exited (code {code})"))
        log.warning("MCP server %s exited (pid %d, code %s)", self.server, child.process.pid, code)

    def _answer(self, child: _Child, line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.warning("MCP server %s wrote a line that is not JSON", self.server)
            return
        if not isinstance(message, dict):
            return
        request_id = message.get("id")
        if "method" in message:
            if request_id is not None:  # a request of the server's own: none is served
                error = {"code": -32601, "message": "the gateway serves no requests"}
                with contextlib.suppress(ToolServerError):
                    self._write(child, orjson.dumps({"jsonrpc": "2.0", "id": request_id,
                                                     "error": error}))  # fmt: skip
            return
        future = child.pending.pop(request_id, None) if isinstance(request_id, int) else None
        if future is not None and not future.done():
            future.set_result((message, len(line)))

    def _refuse_too_large(self, child: _Child, head: bytes) -> None:
        error = ToolTooLarge(
            f"{self.server}: the result exceeds mcp.max_result_bytes ({self.max_result_bytes})"
        )
        found = _ID.search(head)
        future = child.pending.pop(int(found.group(1)), None) if found else None
        if future is not None:
            if not future.done():
                future.set_exception(error)
        else:  # whose answer it was cannot be told: every waiting call learns of it
            child.fail_all(error)

    async def _read_log(self, child: _Child) -> None:
        stderr = child.process.stderr
        assert stderr is not None
        with contextlib.suppress(ValueError):  # a line past the reader's limit ends it
            while line := await stderr.readline():
                log.debug("MCP server %s: %s", self.server, line[:500].decode(errors="replace"))
        while await stderr.read(READ_CHUNK):
            pass

    async def _stop(self, child: _Child) -> None:
        process = child.process
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            except TimeoutError:
                _signal_group(process.pid, signal.SIGKILL)
                await process.wait()
        else:
            _signal_group(process.pid, signal.SIGKILL)  # what it left in its group
        for task in child.tasks:
            task.cancel()
        await asyncio.gather(*child.tasks, return_exceptions=True)
        child.fail_all(ToolServerError(f"{self.server}: the server process was stopped"))

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            child, self._child = self._child, None
            if child is not None:
                await self._stop(child)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _cancelled(request_id: int) -> bytes:
    return mcp_client.notification(
        "notifications/cancelled", {"requestId": request_id, "reason": "the caller went away"}
    )
