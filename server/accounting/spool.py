"""The ledger's rows on disk between the answer and the database, so a process that
dies (a worker killed, the machine's OOM killer) loses none of the rows it recorded.

Each row is appended, as one JSON line, to the current segment file before the call's
answer goes out (`write` to an O_APPEND file: the page cache keeps it when the process
dies). A flush seals the segments holding every row buffered so far, writes those rows
to the database and deletes the sealed segments. A process starting with the same
name finds the segments a dead one left and hands their rows back to its ledger.
"""

from __future__ import annotations

import logging
import os
from dataclasses import fields
from pathlib import Path

import orjson

from server.base.record import UsageRecord

log = logging.getLogger(__name__)
FIELDS = tuple(f.name for f in fields(UsageRecord))


class Spool:
    def __init__(self, folder: str | Path, name: str) -> None:
        self.folder = Path(folder)
        self.name = name
        self.folder.mkdir(parents=True, exist_ok=True)
        serials = [self._serial(p) for p in self._segments()]
        self._next = max(serials, default=-1) + 1
        self._current, self._fd, self._written = self._open()

    def append(self, row: UsageRecord) -> None:
        line = orjson.dumps([getattr(row, name) for name in FIELDS]) + b"\n"
        os.write(self._fd, line)
        self._written = True

    def recover(self) -> list[UsageRecord]:
        """The rows a process of this name left unwritten (its segments stay until
        they are sealed and written like any other); a line cut short by the crash
        is counted and logged."""
        rows: list[UsageRecord] = []
        unreadable = 0
        for path in self._segments():
            if path == self._current:
                continue
            for line in path.read_bytes().splitlines():
                try:
                    rows.append(UsageRecord(*orjson.loads(line)))
                except (orjson.JSONDecodeError, TypeError):
                    unreadable += 1
        if rows or unreadable:
            log.warning(
                "ledger: %d records recovered from %s's spool (%d lines unreadable)",
                len(rows), self.name, unreadable,
            )  # fmt: skip
        return rows

    def seal(self) -> list[Path]:
        """Every segment holding rows appended so far; new rows go to a new one."""
        sealed = [p for p in self._segments() if p != self._current]
        if self._written:
            os.close(self._fd)
            sealed.append(self._current)
            self._current, self._fd, self._written = self._open()
        return sealed

    @staticmethod
    def discard(sealed: list[Path]) -> None:
        """Deletes sealed segments, once their rows are in the database."""
        for path in sealed:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        os.close(self._fd)
        if not self._written:
            self._current.unlink(missing_ok=True)

    def _open(self) -> tuple[Path, int, bool]:
        path = self.folder / f"{self.name}.{self._next:08d}.jsonl"
        self._next += 1
        return path, os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), False

    def _segments(self) -> list[Path]:
        return sorted(self.folder.glob(f"{self.name}.*.jsonl"), key=self._serial)

    @staticmethod
    def _serial(path: Path) -> int:
        return int(path.name.rsplit(".", 2)[1])
