"""The ledger's spool on disk: what a process that died leaves behind is handed back,
row for row, to the next process of its name; a line the crash cut short is counted,
not guessed at; a clean close leaves no empty segment; the rows stay private."""

from __future__ import annotations

import logging
import stat
from dataclasses import replace

from server.accounting.spool import Spool
from tests.unit.accounting.test_ledger import ROW


def segments(folder) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(p.name for p in folder.iterdir())


def test_a_dead_process_rows_come_back_to_the_next_of_its_name(tmp_path, caplog):
    rows = [replace(ROW, request_id=f"r{i}", prompt=f"p{i}") for i in range(3)]
    dead = Spool(tmp_path, "worker-1")
    dead.append(rows[0])
    dead.seal()  # a flush that never reached the database
    dead.append(rows[1])
    dead.append(rows[2])
    # Another worker's rows are its own to recover.
    Spool(tmp_path, "worker-2").append(replace(ROW, request_id="theirs"))
    # The process dies without closing: its segments stay, and a new one takes its name.
    with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
        spool = Spool(tmp_path, "worker-1")
        recovered = spool.recover()
    assert recovered == rows
    assert [r.getMessage() for r in caplog.records] == [
        "ledger: 3 records recovered from worker-1's spool (0 lines unreadable)"
    ]
    # The new process writes after the segments it found, never into one of them.
    assert segments(tmp_path) == [
        "worker-1.00000000.jsonl", "worker-1.00000001.jsonl", "worker-1.00000002.jsonl",
        "worker-2.00000000.jsonl",
    ]  # fmt: skip
    spool.append(replace(ROW, request_id="new"))
    assert spool.recover() == rows  # its own current segment is not a dead one's
    # Sealed with the recovered ones and written, they all go.
    Spool.discard(spool.seal())
    assert segments(tmp_path) == ["worker-1.00000003.jsonl", "worker-2.00000000.jsonl"]


def test_lines_cut_short_or_of_another_shape_are_counted_not_read(tmp_path, caplog):
    dead = Spool(tmp_path, "w")
    dead.append(ROW)
    with open(tmp_path / "w.00000000.jsonl", "ab") as segment:
        segment.write(b'[1000.0, "r2", "k1"]\n')  # valid JSON, too few fields
        segment.write(b'[1000.0, "r3", "k')  # the crash mid-write
    with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
        assert Spool(tmp_path, "w").recover() == [ROW]
    assert [r.getMessage() for r in caplog.records] == [
        "ledger: 1 records recovered from w's spool (2 lines unreadable)"
    ]


def test_nothing_left_behind_says_nothing(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
        assert Spool(tmp_path / "new" / "folder", "w").recover() == []  # made as needed
    assert caplog.records == []


def test_a_name_may_hold_dots(tmp_path):
    dead = Spool(tmp_path, "gw-1.eu.example")
    dead.append(ROW)
    dead.seal()
    spool = Spool(tmp_path, "gw-1.eu.example")
    assert spool.recover() == [ROW]
    spool.append(ROW)
    # The dead one's two segments (the second empty), then its own.
    assert [p.name for p in spool.seal()] == [f"gw-1.eu.example.0000000{i}.jsonl" for i in range(3)]
    assert segments(tmp_path)[-1] == "gw-1.eu.example.00000003.jsonl"


def test_a_clean_close_leaves_no_empty_segment_and_keeps_unwritten_rows(tmp_path):
    Spool(tmp_path, "idle").close()
    assert segments(tmp_path) == []
    busy = Spool(tmp_path, "busy")
    busy.append(ROW)
    busy.close()  # its rows never reached the database: the next start recovers them
    assert segments(tmp_path) == ["busy.00000000.jsonl"]
    assert Spool(tmp_path, "busy").recover() == [ROW]


def test_segments_are_readable_by_their_owner_alone(tmp_path):
    spool = Spool(tmp_path, "w")
    spool.append(ROW)
    mode = (tmp_path / "w.00000000.jsonl").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600
