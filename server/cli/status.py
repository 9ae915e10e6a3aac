"""The gateway's own status lines ("gateway: ready") on stdout, or stderr for failures."""

from __future__ import annotations

import os
import sys
from typing import TextIO


def say(line: str, stream: TextIO | None = None) -> None:
    """Writes `line` and its newline in one call. Request lines go to stderr from a
    thread, and the two streams often share one pipe: print() writes the newline
    apart, which unbuffered (PYTHONUNBUFFERED, as in most containers) let a request
    line land inside a status line, where no JSON reader finds it."""
    out = stream or sys.stdout
    try:
        out.write(line + "\n")
        out.flush()
    except BrokenPipeError:
        # Its reader went away: the gateway serves and stops as before, saying nothing
        # more there (an exception here would end a supervisor and orphan its workers).
        _silence(out)


def _silence(stream: TextIO) -> None:
    """Points `stream` at /dev/null: what it holds and all it writes from now on go."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)
