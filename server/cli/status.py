"""The gateway's own status lines ("gateway: ready") on stdout, or stderr for failures."""

from __future__ import annotations

import sys
from typing import TextIO


def say(line: str, stream: TextIO | None = None) -> None:
    """Writes `line` and its newline in one call. Request lines go to stderr from a
    thread, and the two streams often share one pipe: print() writes the newline
    apart, which unbuffered (PYTHONUNBUFFERED, as in most containers) let a request
    line land inside a status line, where no JSON reader finds it."""
    out = stream or sys.stdout
    out.write(line + "\n")
    out.flush()
