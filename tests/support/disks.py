"""Disks as the spool meets them: a real small filesystem filled to its last byte, and
a real process that spools rows and dies without closing anything."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from server.base.record import UsageRecord


class FullDisk:
    """A tmpfs mounted at `path`, full: every write there fails with ENOSPC until
    `make_room()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._filler = path / "filler.bin"
        self._page = path / "page.bin"

    def fill(self) -> None:
        self._page.write_bytes(b"\0")  # holds one page, for free_page()
        with open(self._filler, "ab", buffering=0) as filler:
            while True:
                try:
                    filler.write(b"\0" * 4096)
                except OSError:
                    break
            while True:  # the last few bytes a page could not take
                try:
                    filler.write(b"\0")
                except OSError:
                    return

    def make_room(self) -> None:
        self._filler.unlink(missing_ok=True)

    def free_page(self) -> None:
        """Room for one page (4 KiB) more: the write that crosses it is cut short."""
        self._page.unlink(missing_ok=True)


@contextmanager
def small_filesystem(path: Path, options: str) -> Iterator[Path]:
    """A real tmpfs at `path` (made as needed) mounted with `options`; skips the test
    where this machine cannot mount one (mounting needs root)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"{options},mode=0700", "tmpfs", str(path)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.decode()[:200]}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextmanager
def full_disk(path: Path, size_kb: int = 256) -> Iterator[FullDisk]:
    """A real small filesystem at `path`, filled to its last byte."""
    with small_filesystem(path, f"size={size_kb}k"):
        disk = FullDisk(path)
        disk.fill()
        yield disk


# Run in a child: spool the rows given on stdin, then die as a killed process does.
_DIE_SPOOLING = """
import os, sys, orjson
from server.accounting.spool import Spool
from server.base.record import UsageRecord
spool = Spool(sys.argv[1], sys.argv[2])
for fields in orjson.loads(sys.stdin.buffer.read()):
    spool.append(UsageRecord(**fields))
print(spool.name, flush=True)
os._exit(0)
"""


def died_spooling(folder: Path, base: str, rows: Sequence[UsageRecord]) -> str:
    """Spools `rows` in a real process that exits without closing its spool (its lock
    freed by its death, its segments left); returns that process's spool name."""
    done = subprocess.run(
        [sys.executable, "-c", _DIE_SPOOLING, str(folder), base],
        input=orjson.dumps([dataclasses.asdict(r) for r in rows]),
        capture_output=True, check=True, env={**os.environ},
    )  # fmt: skip
    return done.stdout.decode().strip()
