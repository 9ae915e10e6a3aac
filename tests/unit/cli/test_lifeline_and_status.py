"""A worker asks the kernel for SIGTERM when its supervisor exits, and stops at once
when it already has; a status line whose reader went away is dropped (the stream
pointed at /dev/null) instead of ending the process."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterator

import pytest

from server.cli import lifeline
from server.cli.status import say

PR_GET_PDEATHSIG = 2


def death_signal() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    found = ctypes.c_int(-1)
    assert libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(found), 0, 0, 0) == 0
    return found.value


@pytest.fixture
def unbound() -> Iterator[None]:
    """This test process's own death signal, as it was, afterwards."""
    before = death_signal()
    yield
    ctypes.CDLL(None).prctl(lifeline.PR_SET_PDEATHSIG, before, 0, 0, 0)


def test_a_worker_follows_its_supervisor(monkeypatch, unbound) -> None:
    monkeypatch.delenv(lifeline.SUPERVISOR, raising=False)
    ctypes.CDLL(None).prctl(lifeline.PR_SET_PDEATHSIG, 0, 0, 0, 0)
    lifeline.follow_supervisor()  # not a worker: nothing asked
    assert death_signal() == 0
    monkeypatch.setenv(lifeline.SUPERVISOR, str(os.getppid()))
    lifeline.follow_supervisor()
    assert death_signal() == signal.SIGTERM
    monkeypatch.setenv(lifeline.SUPERVISOR, str(os.getppid() + 1))
    with pytest.raises(SystemExit) as gone:
        lifeline.follow_supervisor()
    assert gone.value.code == "gateway: the supervisor has exited; this worker stops"


def test_a_line_whose_reader_went_away_is_dropped() -> None:
    read, write = os.pipe()
    with os.fdopen(write, "w") as stream:
        say("gateway: ready", stream)
        assert os.read(read, 100) == b"gateway: ready\n"  # the line and its newline
        os.close(read)  # the reader goes away
        say("gateway: shutting down", stream)
        say("gateway: stopped", stream)
        assert os.path.samestat(os.fstat(stream.fileno()), os.stat(os.devnull))
