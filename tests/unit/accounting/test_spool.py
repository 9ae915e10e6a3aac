"""The ledger's spool on disk: what a process that died leaves behind is adopted, row
for row, by the next process to start, and what a running one writes is never touched
by another; a line the crash cut short is counted, not guessed at; a file that is not
a segment is skipped, never a failed start; a full disk costs no row; a clean close
leaves nothing; the rows stay private."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import replace
from pathlib import Path

from server.accounting.spool import Spool
from tests.support.disks import died_spooling, full_disk, small_filesystem
from tests.unit.accounting.test_ledger import ROW

ROWS = [replace(ROW, request_id=f"r{i}", prompt=f"p{i}") for i in range(3)]


def files(folder) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(p.name for p in folder.iterdir())


def test_a_dead_process_rows_are_adopted_by_the_next_process_once(tmp_path, caplog):
    dead = died_spooling(tmp_path, "worker-1", ROWS)
    assert dead.startswith("worker-1-")
    with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
        spool = Spool(tmp_path, "worker-1")
        recovered = spool.recover()
    assert recovered == ROWS
    assert [r.getMessage() for r in caplog.records] == [
        f"ledger: 3 records recovered from 1 segments in {tmp_path} (0 lines unreadable)"
    ]
    # Adopted under the new process's name, the dead one's lock gone with it.
    assert not [name for name in files(tmp_path) if name.startswith(dead)]
    # A second process starting finds nothing left to adopt.
    other = Spool(tmp_path, "worker-2")
    assert other.recover() == []
    spool.append(replace(ROW, request_id="new"))
    Spool.discard(spool.seal())  # sealed with the adopted ones and written: all gone
    assert [n for n in files(tmp_path) if n.endswith(".jsonl")] == [
        f"{spool.name}.00000002.jsonl", f"{other.name}.00000000.jsonl"
    ]  # fmt: skip


def test_a_running_process_segments_are_never_recovered_by_another(tmp_path):
    running = Spool(tmp_path, "gateway")
    running.append(ROW)
    running.seal()  # a flush under way: sealed, not yet written
    running.append(ROW)
    # Another process given the same base name has a name of its own and takes nothing.
    second = Spool(tmp_path, "gateway")
    assert second.name != running.name
    assert second.recover() == []
    second.append(replace(ROW, request_id="second's"))
    assert len(running.seal()) == 2 and len(second.seal()) == 1
    # Once the first is gone its unwritten rows are adopted; never the second's.
    running.close()
    assert Spool(tmp_path, "gateway").recover() == [ROW, ROW]


def test_lines_cut_short_or_of_another_shape_are_counted_not_read(tmp_path, caplog):
    dead = died_spooling(tmp_path, "w", [ROW])
    with open(tmp_path / f"{dead}.00000000.jsonl", "ab") as segment:
        segment.write(b'[1000.0, "r2", "k1"]\n')  # valid JSON, too few fields
        segment.write(b"7\n")  # not a list at all
        segment.write(b'[1000.0, "r3", "k')  # the crash mid-write
    with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
        assert Spool(tmp_path, "w").recover() == [ROW]
    assert caplog.records[-1].getMessage().endswith("(3 lines unreadable)")


def test_a_stray_file_in_the_folder_is_skipped_with_a_warning_never_a_failed_start(
    tmp_path, caplog
):
    (tmp_path / "gateway.bak.jsonl").write_bytes(b"not a row\n")
    (tmp_path / "notes.jsonl").write_bytes(b"")
    (tmp_path / "gateway.00000001.jsonl.swp").write_bytes(b"x")
    (tmp_path / "old.00000004.jsonl").mkdir()  # named like a segment, not a file
    died_spooling(tmp_path, "gateway", [ROW])
    with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
        spool = Spool(tmp_path, "gateway")
        assert spool.recover() == [ROW]
    said = [r.getMessage() for r in caplog.records]
    strays = sorted(("gateway.bak.jsonl", "notes.jsonl", "old.00000004.jsonl"))
    assert sorted(m for m in said if "not a segment" in m) == [
        f"ledger: {name} in the spool folder is not a segment; skipped" for name in strays
    ]
    # The stray files stay as they were: they are not the spool's to delete, and a flush
    # says nothing more of them.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
        Spool.discard(spool.seal())
    assert caplog.records == []
    assert {"gateway.bak.jsonl", "notes.jsonl", "gateway.00000001.jsonl.swp"} <= set(
        files(tmp_path)
    )


def test_a_full_disk_takes_no_row_and_costs_none_then_the_spool_resumes(tmp_path, caplog):
    with full_disk(tmp_path / "disk", size_kb=64) as disk:
        with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
            spool = Spool(disk.path, "gateway")
            taken = [spool.append(replace(ROW, request_id=f"r{i}")) for i in range(50)]
        assert taken == [False] * 50
        # Said once, not once per row.
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "No space left" in said[0]
        assert said[0].endswith("rows are kept in memory until the database has them")
        disk.make_room()
        Spool.discard(spool.seal())  # the next flush opens a segment again
        assert spool.append(ROW) is True
        sealed = spool.seal()
        assert [p.read_bytes().count(b"\n") for p in sealed] == [1]
        spool.close()


def test_a_line_cut_short_by_the_disk_ends_its_segment(tmp_path, caplog):
    with full_disk(tmp_path / "disk", size_kb=64) as disk:
        spool = Spool(disk.path, "gateway")
        disk.free_page()
        with caplog.at_level(logging.WARNING, logger="server.accounting.spool"):
            taken = [spool.append(replace(ROW, request_id=f"r{i:03d}")) for i in range(40)]
        fit = taken.index(False)
        assert 0 < fit < 40 and not any(taken[fit:])
        assert "bytes written" in caplog.text
        [segment] = spool.seal()
        lines = segment.read_bytes().split(b"\n")
        # The rows that fit, then the one cut short: no row after it joined it.
        assert len(lines) == fit + 1 and lines[-1] and not lines[-1].endswith(b"]")
        spool.close()


def test_a_clean_close_leaves_nothing_and_keeps_unwritten_rows(tmp_path):
    Spool(tmp_path, "idle").close()
    assert files(tmp_path) == []
    busy = Spool(tmp_path, "busy")
    busy.append(ROW)
    busy.close()  # its rows never reached the database: the next start adopts them
    assert files(tmp_path) == [f"{busy.name}.00000000.jsonl"]
    assert Spool(tmp_path, "busy").recover() == [ROW]


def test_segments_and_their_folder_are_their_owner_s_alone(tmp_path):
    spool = Spool(tmp_path / "new" / "spool", "w")  # its folder made as needed
    spool.append(ROW)
    assert stat.S_IMODE((tmp_path / "new" / "spool").stat().st_mode) == 0o700
    for name in (f"{spool.name}.00000000.jsonl", f"{spool.name}.lock"):
        mode = (tmp_path / "new" / "spool" / name).stat().st_mode
        assert stat.S_IMODE(mode) == 0o600, name


def test_a_disk_without_inodes_costs_no_start_and_says_why(tmp_path, caplog):
    # Room for the folder alone: neither the lock nor a segment can be made.
    with (
        small_filesystem(tmp_path / "disk", "size=64k,nr_inodes=1") as path,
        caplog.at_level(logging.WARNING, logger="server.accounting.spool"),
    ):
        spool = Spool(path, "w")
        assert spool.append(ROW) is False
        assert spool.recover() == []
        spool.seal()
        spool.close()
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith(f"ledger: cannot create {path}/{spool.name}.lock (")
    assert "No space left" in said[0]
    assert said[1].startswith(f"ledger: the spool in {path} takes no rows (")
    assert "No space left" in said[1] and len(said) == 2


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_spool_closed_holds_no_descriptor_full_disk_or_not(tmp_path):
    before = open_descriptors()
    Spool(tmp_path / "plain", "w").close()
    with full_disk(tmp_path / "disk", size_kb=64) as disk:
        failed = Spool(disk.path, "w")
        assert failed.append(ROW) is False
        failed.close()
        assert open_descriptors() == before


def test_closing_twice_or_after_the_folder_was_emptied_is_harmless(tmp_path):
    spool = Spool(tmp_path, "w")
    for path in tmp_path.iterdir():  # an operator cleaning the folder under it
        path.unlink()
    spool.close()
    spool.close()
    assert files(tmp_path) == []


def test_a_request_is_found_in_any_process_segment_until_its_segment_goes(tmp_path):
    mine, other = Spool(tmp_path, "w"), Spool(tmp_path, "w")
    mine.append(ROWS[0])
    sealed = mine.seal()  # a flush under way: sealed, not yet written
    mine.append(ROWS[1])
    # Every field set: a line without a single null.
    other.append(replace(ROW, request_id="theirs", cache_input_cost_usd=0.0, ttft_ms=1.0,
                         difficulty=0.5, prompt="q", cache_write_cost_usd=0.0))  # fmt: skip
    dead = died_spooling(tmp_path, "w", [replace(ROW, request_id="dead's")])
    # A line the crash cut short names no request, even one spelled in it.
    with open(tmp_path / f"{dead}.00000000.jsonl", "ab") as segment:
        segment.write(b'[1000.0,"cut","k1"')
    for spool in (mine, other):
        for request_id in ("r0", "r1", "theirs", "dead's"):
            assert spool.holds("k1", request_id), (spool.name, request_id)
            assert not spool.holds("k2", request_id)  # the same id, another key's
        assert not spool.holds("k1", "r2")  # never recorded
        assert not spool.holds("k1", "p1")  # a row's prompt, not its request id
        assert not spool.holds("k1", "cut")
    Spool.discard(sealed)  # its rows are in the database now
    assert not mine.holds("k1", "r0") and not other.holds("k1", "r0")
    assert mine.holds("k1", "r1")
    mine.close()
    other.close()


def test_a_segment_adopted_while_it_is_read_is_looked_for_again(tmp_path, monkeypatch):
    died_spooling(tmp_path, "w", [ROW])
    looking, adopting = Spool(tmp_path, "w"), Spool(tmp_path, "w")
    read = Path.read_bytes

    def adopted_meanwhile(path: Path) -> bytes:
        # Another process starting adopts the dead one's segment between this one's
        # listing of the folder and its read: the path listed is gone.
        monkeypatch.setattr(Path, "read_bytes", read)
        assert adopting.recover() == [ROW]
        return read(path)

    monkeypatch.setattr(Path, "read_bytes", adopted_meanwhile)
    assert looking.holds(ROW.key_id, ROW.request_id)
    looking.close()
    adopting.close()


def test_the_segments_of_other_processes_that_hold_rows(tmp_path, monkeypatch):
    mine, idle, busy = Spool(tmp_path, "w"), Spool(tmp_path, "w"), Spool(tmp_path, "w")
    mine.append(ROW)
    busy.append(ROW)
    sealed = busy.seal()
    busy.append(ROW)
    # Neither this process's own segments nor an idle one's empty current segment.
    assert mine.others() == [busy.folder / f"{busy.name}.{n:08d}.jsonl" for n in (0, 1)]
    assert [p.name.rsplit(".", 2)[0] for p in idle.others()] == sorted(
        [mine.name, busy.name, busy.name]
    )
    Spool.discard(sealed)
    assert mine.others() == [busy.folder / f"{busy.name}.00000001.jsonl"]
    # A segment deleted between the listing and the look at its size (its rows just
    # written by its process) is not among them, and is no error.
    listed = mine._segments()
    Spool.discard([busy.folder / f"{busy.name}.00000001.jsonl"])
    monkeypatch.setattr(mine, "_segments", lambda: listed)
    assert mine.others() == []
    for spool in (mine, idle, busy):
        spool.close()
