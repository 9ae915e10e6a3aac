"""The ledger's rows on disk between the answer and the database, so a process that
dies (a worker killed, the machine's OOM killer) loses none of the rows it recorded.

Each row is appended, as one JSON line, to the current segment file before the call's
answer goes out (`write` to an O_APPEND file: the page cache keeps it when the process
dies). A flush seals the segments holding every row buffered so far, writes those rows
to the database and deletes the sealed segments.

Every process spools under a name of its own (`{base}-{pid}-{random}`), held by an
exclusive lock on `{name}.lock` for as long as it runs, so no two processes ever write
or read one segment. A process starting adopts the segments of every name whose lock
nobody holds (a process that died): it renames them to its own name under that lock
and hands their rows back to its ledger, so each row is written once.

The spool never costs an answer or a row: a segment the disk cannot take (full, gone
read-only) makes `append` answer False, and the ledger keeps that row in memory only
(bounded, counted); the failure is logged once per interval. A file in the folder that
is not a segment (`x.bak.jsonl`) is skipped with a warning, as is a line that is not a
row.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import secrets
from dataclasses import fields
from pathlib import Path

import orjson

from server.base.record import UsageRecord
from server.base.throttle import warn_throttled

log = logging.getLogger(__name__)
FIELDS = tuple(f.name for f in fields(UsageRecord))
KEY_ID, REQUEST_ID = FIELDS.index("key_id"), FIELDS.index("request_id")
# `{owner}.{serial}.jsonl`: the only files the spool reads.
SEGMENT = re.compile(r"^(?P<owner>.+)\.(?P<serial>\d{8,})\.jsonl$")


class Spool:
    # The current segment: its path, its descriptor (None when the disk took none), and
    # whether a row went into it (set by `_open`).
    _current: Path
    _fd: int | None
    _written: bool

    def __init__(self, folder: str | Path, base: str) -> None:
        self.folder = Path(folder)
        self.name = f"{base}-{os.getpid()}-{secrets.token_hex(3)}"
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = _hold(self.folder / f"{self.name}.lock")
        self._next = 0
        self._open()

    def append(self, row: UsageRecord) -> bool:
        """Puts `row` on disk; False when the disk did not take it (the caller keeps it)."""
        if self._fd is None:
            return False
        line = orjson.dumps([getattr(row, name) for name in FIELDS]) + b"\n"
        try:
            written = os.write(self._fd, line)
        except OSError as exc:
            return self._failed(exc)
        self._written = True
        if written != len(line):
            # A line cut short ends this segment: the next row must not join it.
            return self._failed(OSError(f"{written} of {len(line)} bytes written"))
        return True

    def recover(self) -> list[UsageRecord]:
        """The rows of the processes that died, their segments adopted (they stay until
        sealed and written like any other); lines that are not rows are counted."""
        rows: list[UsageRecord] = []
        unreadable = 0
        adopted = self._adopt()
        for path in adopted:
            try:
                lines = path.read_bytes().splitlines()
            except OSError as exc:
                log.warning("ledger: spool segment %s unreadable (%s); skipped", path.name, exc)
                continue
            for line in lines:
                try:
                    rows.append(UsageRecord(*orjson.loads(line)))
                except (orjson.JSONDecodeError, TypeError):
                    unreadable += 1
        if rows or unreadable:
            log.warning(
                "ledger: %d records recovered from %d segments in %s (%d lines unreadable)",
                len(rows), len(adopted), self.folder, unreadable,
            )  # fmt: skip
        return rows

    def seal(self) -> list[Path]:
        """Every segment holding rows appended so far; new rows go to a new one."""
        sealed = [p for p in self._own() if p != self._current]
        if self._written or self._fd is None:  # (one that failed holds a line at most)
            if self._fd is not None:
                os.close(self._fd)
            sealed.append(self._current)
            self._open()
        return sealed

    def holds(self, key_id: str, request_id: str) -> bool:
        """Whether a segment in the folder, this process's or another's, holds a row
        of this key's request: one not in the database yet, or just written there (a
        segment goes once the database has its rows)."""
        needle = orjson.dumps(request_id)
        wanted = (key_id, request_id)
        for _ in range(3):  # a segment renamed (adopted) while read: look again
            try:
                for _owner, path in self._segments():
                    for line in path.read_bytes().splitlines():
                        if needle in line and _key_and_request(line) == wanted:
                            return True
                return False
            except FileNotFoundError:
                continue
        return False

    def others(self) -> list[Path]:
        """The segments of other processes that hold rows now: each goes once the
        database has its rows."""
        out = []
        for owner, path in self._segments():
            with contextlib.suppress(OSError):
                if owner != self.name and path.stat().st_size:
                    out.append(path)
        return out

    @staticmethod
    def discard(sealed: list[Path]) -> None:
        """Deletes sealed segments, once their rows are in the database."""
        for path in sealed:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        """Closes the current segment (deleted when it holds nothing) and gives up the
        name; a second close does nothing."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if not self._written:
            self._current.unlink(missing_ok=True)
        if self._lock is not None:
            (self.folder / f"{self.name}.lock").unlink(missing_ok=True)
            os.close(self._lock)
            self._lock = None

    # -- segments ----------------------------------------------------------------

    def _path(self, serial: int) -> Path:
        return self.folder / f"{self.name}.{serial:08d}.jsonl"

    def _open(self) -> None:
        """A new current segment; on a disk that takes none, no segment (rows are then
        kept in memory by the ledger) until the next seal tries again."""
        self._current, self._written = self._path(self._next), False
        self._next += 1
        try:
            self._fd = os.open(self._current, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            self._fd = None
            self._failed(exc)

    def _failed(self, exc: OSError) -> bool:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        warn_throttled(
            log, f"spool:{self.folder}",
            f"ledger: the spool in {self.folder} takes no rows ({exc}); rows are kept in "
            "memory until the database has them",
        )  # fmt: skip
        return False

    def _own(self) -> list[Path]:
        return [path for owner, path in self._segments() if owner == self.name]

    def _segments(self, warn: bool = False) -> list[tuple[str, Path]]:
        """(owner, path) of every segment in the folder, in order; anything else there
        is left alone (and, with `warn`, named in the log)."""
        found = []
        for path in self.folder.glob("*.jsonl"):
            match = SEGMENT.match(path.name)
            if match is None or not path.is_file():
                if warn:
                    log.warning("ledger: %s in the spool folder is not a segment; skipped",
                                path.name)  # fmt: skip
                continue
            found.append((match["owner"], int(match["serial"]), path))
        return [(owner, path) for owner, _, path in sorted(found)]

    def _adopt(self) -> list[Path]:
        """Renames to this spool's name the segments of every owner whose lock is free
        (it died), each under that lock; returns them, in their order."""
        by_owner: dict[str, list[Path]] = {}
        for owner, path in self._segments(warn=True):
            if owner != self.name:
                by_owner.setdefault(owner, []).append(path)
        adopted = []
        for owner, paths in by_owner.items():
            lock_path = self.folder / f"{owner}.lock"
            lock = _hold(lock_path)
            if lock is None:
                continue  # a process that runs: its segments are its own
            try:
                for path in paths:
                    mine = self._path(self._next)
                    self._next += 1
                    try:
                        path.rename(mine)
                    except FileNotFoundError:
                        continue  # another process adopted it first
                    adopted.append(mine)
            finally:
                lock_path.unlink(missing_ok=True)
                os.close(lock)
        return adopted


def _key_and_request(line: bytes) -> tuple[object, object] | None:
    """A row's key id and request id; None for a line that is not a row."""
    try:
        row = orjson.loads(line)
        return row[KEY_ID], row[REQUEST_ID]
    except (orjson.JSONDecodeError, LookupError, TypeError):
        return None


def _hold(path: Path) -> int | None:
    """An open descriptor holding an exclusive lock on `path`; None when another
    process holds it (or the folder takes no file)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        log.warning("ledger: cannot create %s (%s)", path, exc)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
