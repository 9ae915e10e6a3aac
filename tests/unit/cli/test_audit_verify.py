"""`gateway audit verify` against what was noted of the log (`--count`, `--last-hash`):
a chain whose tail was cut, or emptied, is not intact; one that grew since is; the
options are checked and named."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from server.base.config import StorageConfig
from server.cli import audit
from server.cli.main import parse_args
from server.storage import open_store


async def chain(path: Path, events: int) -> list[str]:
    """A log of `events` events; their hashes."""
    store = await open_store(StorageConfig(sqlite_path=str(path)))
    hashes = []
    try:
        for i in range(events):
            async with store.audit.change() as tx:
                event = await store.audit.append(
                    tx, ts=1000.0 + i, actor="key:a", actor_address="", action="org.create",
                    target=f"org:o{i}", before=None, after={"i": i}, request_id=f"r{i}",
                )  # fmt: skip
                hashes.append(event.hash)
    finally:
        await store.aclose()
    return hashes


async def verify(path: Path, *options: str) -> int:
    return await audit.run(parse_args(["audit", "verify", "--sqlite-path", str(path), *options]))


async def test_verify_against_what_was_noted(tmp_path: Path, capsys) -> None:
    path = tmp_path / "gw.db"
    hashes = await chain(path, 3)
    assert await verify(path, "--count", "3", "--last-hash", hashes[2]) == 0
    assert (
        capsys.readouterr().out == f"gateway: audit log intact: 3 events chained (sqlite {path})\n"
    )
    assert await verify(path, "--count", "2", "--last-hash", hashes[1]) == 0  # grown since
    assert await verify(path, "--count", "3") == 0
    assert await verify(path, "--last-hash", hashes[0]) == 0
    capsys.readouterr()
    cases = [
        (["--count", "4"], "3 events chained, 4 noted: events were removed from its end"),
        (["--last-hash", "a" * 64],
         f"no event has the noted hash {'a' * 64}: events were removed from its end"),
        (["--count", "3", "--last-hash", "a" * 64], "no event has the noted hash"),
        (["--count", "2", "--last-hash", hashes[2]], "the noted hash is event 3's, not event 2's"),
        (["--count", "3", "--last-hash", hashes[1]], "the noted hash is event 2's, not event 3's"),
    ]  # fmt: skip
    for options, why in cases:
        assert await verify(path, *options) == 1
        out = capsys.readouterr().out
        assert out.startswith(f"gateway: audit log not intact (sqlite {path}): {why}"), out
    # An event edited in the database: named, with what fits before it.
    with sqlite3.connect(path) as db:
        db.execute("UPDATE audit_events SET target = '' WHERE seq = 2")
    assert await verify(path, "--count", "3") == 1
    assert capsys.readouterr().out == (
        "gateway: audit event 2 (org.create of - at 1001.000) does not fit the chain: its "
        "content does not match its hash; 1 events before it fit\n"
    )
    empty = tmp_path / "empty.db"
    assert await verify(empty) == 0  # the chain alone cannot tell
    assert await verify(empty, "--count", "1") == 1
    assert "0 events chained, 1 noted" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (["--count", "0"], "argument --count: must be a whole number of events, at least 1"),
        (["--count", "-2"], "argument --count: must be a whole number of events"),
        (["--count", "٣"], "argument --count: must be a whole number of events"),
        (["--count", "x"], "argument --count: must be a whole number of events"),
        (["--last-hash", "a" * 63], "argument --last-hash: must be an event's hash: 64 lower"),
        (["--last-hash", "a" * 65], "argument --last-hash: must be an event's hash"),
        (["--last-hash", "A" * 64], "argument --last-hash: must be an event's hash"),
        (["--last-hash", "g" * 64], "argument --last-hash: must be an event's hash"),
        (["--last-hash", "X" * 64], "argument --last-hash: must be an event's hash"),
    ],
)
def test_what_was_noted_is_checked(options, why, capsys) -> None:
    with pytest.raises(SystemExit) as refused:
        parse_args(["audit", "verify", *options])
    assert refused.value.code == 2
    assert why in capsys.readouterr().err
