"""One JSON line per request on the `gateway.requests` logger.

Fields: ts, request_id, rpc, key_id, model, provider, status, reason, prompt_tokens,
completion_tokens, cost_usd, latency_ms, ttft_ms, upstream_ms, failovers (and route,
prompt, completion and guardrail counts when they apply). Key ids only, never a secret; prompt and
completion text only with `operations.log_text`. The line is built from a flat dict
with orjson: a few microseconds on the hot path.
"""

from __future__ import annotations

import contextlib
import logging
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from queue import Empty, SimpleQueue
from typing import Any

import orjson

from server.ops.observe import Outcome

LOGGER = "gateway.requests"
log = logging.getLogger(LOGGER)


def line(o: Outcome) -> str:
    fields: dict[str, Any] = {
        "ts": round(time.time(), 3),
        "request_id": o.request_id,
        "rpc": o.rpc,
        "key_id": o.key_id,
        "model": o.model,
        "provider": o.provider,
        "status": o.status,
        "reason": o.reason,
        "prompt_tokens": o.prompt_tokens,
        "completion_tokens": o.completion_tokens,
        "cost_usd": o.cost_usd,
        "latency_ms": round(o.latency_s * 1000, 3),
        "ttft_ms": None if o.ttft_s is None else round(o.ttft_s * 1000, 3),
        "upstream_ms": round(o.upstream_s * 1000, 3),
    }
    if o.failovers:
        fields["failovers"] = [f"{p}:{c}" for p, c in o.failovers]
    if o.route is not None:
        fields["route"] = {"profile": o.route[0], "model": o.route[1]}
    if o.prompt is not None:
        fields["prompt"] = o.prompt
    if o.completion is not None:
        fields["completion"] = o.completion
    if o.guardrails is not None and o.guardrails.counts:
        # Counts per kind found, never the text: `{"input:redact:EMAIL": 2}`.
        counted: dict[str, int] = {}
        for (_, entity, phase, action), n in o.guardrails.counts.items():
            label = f"{phase}:{action}:{entity}"
            counted[label] = counted.get(label, 0) + n
        fields["guardrails"] = counted
    return orjson.dumps(fields).decode()


def write(o: Outcome) -> None:
    if log.isEnabledFor(logging.INFO):
        _emit(line(o))


def _emit(text: str) -> None:
    """To the writer's queue at once while it is the logger's only reader (a record
    would cost more than the line); else through logging, for every handler."""
    if _writer is not None and log.handlers == _writer.handlers and not log.filters:
        _writer.queue.put(text)
    else:
        # makeRecord + handle: log.info would also walk the stack for the caller's
        # file and line, which the line does not show.
        log.handle(log.makeRecord(LOGGER, logging.INFO, "", 0, text, (), None))


def write_unknown_route(method: str, path: str, client: str, status: int) -> None:
    """One line for a request no route serves: what was asked and by whom (the path
    without its query, which may hold a secret)."""
    if log.isEnabledFor(logging.INFO):
        fields = {
            "ts": round(time.time(), 3), "rpc": "", "status": "NOT_FOUND" if status == 404
            else "METHOD_NOT_ALLOWED", "reason": "NO_ROUTE", "method": method[:16],
            "path": path[:200], "client": client,
        }  # fmt: skip
        _emit(orjson.dumps(fields).decode())


# How often the writer thread writes what was queued. A thread woken for every line
# cost each request two context switches and a handful of futex calls (more than the
# line itself); a line now waits at most this long.
WRITE_EVERY_S = 0.1


def _chunks(lines: list[str]) -> Iterator[str]:
    """`lines` in writes of whole lines of at most PIPE_BUF bytes each (a longer line
    alone). A pipe takes such a write whole, so a status line another thread writes to
    the same pipe lands between two lines, never inside one (a larger write goes in
    pieces when the pipe is full, and another writer's line could land between them)."""
    chunk: list[str] = []
    size = 0
    for line in lines:
        length = len(line.encode()) + 1
        if chunk and size + length > select.PIPE_BUF:
            yield "\n".join(chunk) + "\n"
            chunk, size = [], 0
        chunk.append(line)
        size += length
    if chunk:
        yield "\n".join(chunk) + "\n"


class _Writer:
    """The writer thread: every WRITE_EVERY_S, the queued lines in one write; `stop()`
    writes what is left. It takes no signals, so a write is never cut short by one
    (unbuffered, a cut write would lose the rest)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.queue: SimpleQueue[str] = SimpleQueue()
        # The logger's handlers while this is their only one.
        self.handlers: list[logging.Handler] = [_Enqueue(self.queue)]
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        while not self._stopping.wait(WRITE_EVERY_S):
            self._write_queued()
        self._write_queued()

    def _write_queued(self) -> None:
        lines = []
        with contextlib.suppress(Empty):
            while True:
                lines.append(self.queue.get_nowait())
        for chunk in _chunks(lines):
            try:
                self._stream.write(chunk)
                self._stream.flush()
            except (OSError, ValueError):
                pass  # the stream is gone (closed, a broken pipe): nowhere to write them

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()


_writer: _Writer | None = None


def install(stream: Any = None) -> None:
    """Sends request lines, bare (one JSON object per line), to stderr, apart from the
    other logs' `time level name: message` format. The event loop only queues a record;
    a thread writes them, so a slow terminal or pipe never stalls requests. `stop()`
    writes out what is queued."""
    global _writer
    if _writer is not None:
        return
    _writer = _Writer(stream or sys.stderr)
    log.addHandler(_writer.handlers[0])
    log.setLevel(logging.INFO)
    log.propagate = False


class _Enqueue(logging.Handler):
    def __init__(self, queue: SimpleQueue[str]) -> None:
        super().__init__()
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        self.queue.put(record.getMessage())  # final already: no formatting


def stop() -> None:
    """Writes every queued line, then stops the writer (at shutdown: no line is lost)."""
    global _writer
    if _writer is not None:
        _writer.stop()
        _writer = None
