"""SQLite takes a many-row INSERT (the ledger's batches) in as few statements as its
parameter bound allows: every row arrives, in order, and a row it refuses leaves none of
the others written (the ledger then bisects around it)."""

from __future__ import annotations

import sqlite3

import pytest

from server.storage import db as storage
from server.storage.db import SQLiteDatabase

INSERT = "INSERT INTO t (n, text) VALUES (?, ?)"


@pytest.fixture
async def database(tmp_path):  # type: ignore[no-untyped-def]
    opened = await SQLiteDatabase.open(str(tmp_path / "t.db"))
    await opened.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER UNIQUE, text TEXT)")
    yield opened
    await opened.close()


async def rows(database: SQLiteDatabase) -> list[tuple[int, str]]:
    return [(r["n"], r["text"]) for r in await database.fetch("SELECT n, text FROM t ORDER BY id")]


async def test_rows_past_one_statements_bound_all_arrive_in_order(database, monkeypatch):
    monkeypatch.setattr(storage, "MAX_VARIABLES", 6)  # three rows of two per statement
    many = [(n, f"row {n}\x00") for n in range(10)]
    await database.executemany(INSERT, many)
    # Each text is stored as it would be alone (NUL made U+FFFD).
    assert await rows(database) == [(n, f"row {n}\ufffd") for n in range(10)]


async def test_a_refused_row_leaves_none_of_the_batch(database, monkeypatch):
    monkeypatch.setattr(storage, "MAX_VARIABLES", 4)
    await database.executemany(INSERT, [(1, "first")])
    with pytest.raises(sqlite3.IntegrityError):
        # The refused row (a second n=1) is in the second statement of three.
        await database.executemany(INSERT, [(2, "a"), (3, "b"), (1, "again"), (4, "c"), (5, "d")])
    assert await rows(database) == [(1, "first")]
    await database.executemany(INSERT, [(2, "a"), (3, "b")])
    assert await rows(database) == [(1, "first"), (2, "a"), (3, "b")]


async def test_other_statements_run_row_by_row(database):
    await database.executemany(INSERT, [(1, "a"), (2, "b")])
    await database.executemany("UPDATE t SET text = ? WHERE n = ?", [("x", 1), ("y", 2)])
    assert await rows(database) == [(1, "x"), (2, "y")]


async def test_rows_go_in_statements_of_a_power_of_two_of_rows(database, monkeypatch):
    """Few texts (each stays prepared in the statement cache), as many rows each as the
    bounds on parameters and rows allow; fewer than two rows take the plain path."""
    monkeypatch.setattr(storage, "MAX_VARIABLES", 9)  # four rows of two
    run: list[str] = []
    await database._conn.set_trace_callback(run.append)
    await database.executemany(INSERT, [(n, "x") for n in range(11)])  # 4 + 4 + 2 + 1
    await database.executemany(INSERT, [(20, "x"), (21, "x")])  # 2
    await database.executemany(INSERT, [(30, "x")])  # 1, as itself
    # The trace has each statement as it ran, its values in place of the marks.
    inserts = [sql for sql in run if sql.startswith("INSERT")]
    assert [sql.count("'x')") for sql in inserts] == [4, 4, 2, 1, 2, 1]
    assert len(await rows(database)) == 14
    # A bound below two rows: one row a statement.
    monkeypatch.setattr(storage, "MAX_VARIABLES", 3)
    run.clear()
    await database.executemany(INSERT, [(40, "x"), (41, "x"), (42, "x")])
    assert [sql.count("'x')") for sql in run if sql.startswith("INSERT")] == [1, 1, 1]
    # A bound on rows below the parameters' own.
    monkeypatch.setattr(storage, "MAX_VARIABLES", 100)
    monkeypatch.setattr(storage, "MAX_ROWS", 3)
    run.clear()
    await database.executemany(INSERT, [(50 + n, "x") for n in range(5)])
    assert [sql.count("'x')") for sql in run if sql.startswith("INSERT")] == [2, 2, 1]
