"""The request log's writer thread: lines written in order, in few writes, none lost at
stop, and a stream that fails does not stop the lines after it."""

from __future__ import annotations

import io
import json
import logging
import select
import subprocess
import sys
import threading
import time

import pytest

from server.ops import requestlog


class Recording(io.StringIO):
    """A stream that counts its writes and can be told to fail the next one."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.texts: list[str] = []
        self.fail_next = False
        self.writers: set[str] = set()

    def write(self, text: str) -> int:
        self.writes += 1
        self.writers.add(threading.current_thread().name)
        if self.fail_next:
            self.fail_next = False
            raise BrokenPipeError(32, "Broken pipe")
        self.texts.append(text)
        return super().write(text)


@pytest.fixture
def installed():
    logger = logging.getLogger(requestlog.LOGGER)
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    stream = Recording()
    requestlog.install(stream)
    yield stream
    requestlog.stop()
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def log_lines(first: int, count: int) -> None:
    for n in range(first, first + count):
        requestlog.write_unknown_route("GET", f"/{n}", "127.0.0.1", 404)


def paths(stream: Recording) -> list[str]:
    return [json.loads(line)["path"] for line in stream.getvalue().splitlines()]


def test_lines_go_out_in_order_in_few_writes_and_none_is_lost_at_stop(installed):
    log_lines(0, 1000)
    requestlog.stop()  # at once: what is queued is written before it returns
    assert paths(installed) == [f"/{n}" for n in range(1000)]
    # The burst went out in pipe-sized writes of whole lines, not a write per line: a
    # pipe takes each whole, so another writer's line never lands inside one.
    assert all(len(w.encode()) <= select.PIPE_BUF and w.endswith("\n") for w in installed.texts)
    size = len(installed.getvalue().encode())
    assert installed.writes <= size // (select.PIPE_BUF // 2) + 3
    assert installed.writers == {"request-log"}  # never the caller's thread


def test_a_line_longer_than_a_pipe_takes_whole_goes_alone(installed):
    long = "x" * select.PIPE_BUF
    logging.getLogger(requestlog.LOGGER).info(long)
    log_lines(0, 2)
    requestlog.stop()
    assert installed.texts[0] == long + "\n"
    assert [w.count("\n") for w in installed.texts] == [1, 2]


def test_a_line_is_written_within_the_interval(installed):
    log_lines(0, 1)
    deadline = time.monotonic() + 10 * requestlog.WRITE_EVERY_S
    while not installed.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert paths(installed) == ["/0"]


def test_a_failed_write_loses_its_lines_only(installed):
    installed.fail_next = True
    log_lines(0, 5)
    deadline = time.monotonic() + 10
    while installed.writes == 0 and time.monotonic() < deadline:  # the failed write
        time.sleep(0.01)
    log_lines(5, 5)
    requestlog.stop()
    assert paths(installed) == [f"/{n}" for n in range(5, 10)]


def test_lines_reach_no_other_handler(installed):
    seen: list[logging.LogRecord] = []
    root = logging.getLogger()
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    root.addHandler(handler)
    try:
        log_lines(0, 1)
        requestlog.stop()
    finally:
        root.removeHandler(handler)
    assert paths(installed) == ["/0"] and seen == []  # not again in the other logs' format


def test_a_handler_added_to_the_request_logger_sees_every_line_too(installed):
    seen: list[str] = []
    logger = logging.getLogger(requestlog.LOGGER)
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    log_lines(0, 1)
    logger.addHandler(handler)
    try:
        log_lines(1, 2)
    finally:
        logger.removeHandler(handler)
    log_lines(3, 1)
    requestlog.stop()
    assert paths(installed) == ["/0", "/1", "/2", "/3"]
    assert [json.loads(line)["path"] for line in seen] == ["/1", "/2"]


def test_a_process_that_never_stops_the_writer_still_exits():
    code = "from server.ops import requestlog; requestlog.install(); print('served')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout == "served\n"
