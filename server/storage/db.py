"""One small async database interface over SQLite (aiosqlite) and PostgreSQL (asyncpg).

SQL is written once with `?` placeholders; the PostgreSQL side rewrites them to `$n`.
Rows come back as plain dicts.

Every text argument is made storable on the way in (`storable`): PostgreSQL refuses NUL
and neither database takes an unpaired surrogate, and one such value (a `model` sent
by a caller, say) must not fail a whole ledger batch. `rejects_row` tells an error
caused by the rows themselves from one caused by the database being away.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from itertools import chain
from pathlib import Path
from typing import Any, Literal, Protocol

from server.base.config import ConfigError

Row = dict[str, Any]
# Seconds a PostgreSQL pool may take to close gracefully before it is terminated.
CLOSE_TIMEOUT_S = 5.0
Dialect = Literal["sqlite", "postgresql"]


class Executor(Protocol):
    async def execute(self, sql: str, *args: Any) -> None: ...
    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...


class Database(Protocol):
    dialect: Dialect

    async def execute(self, sql: str, *args: Any) -> None: ...
    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...
    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...
    async def fetchrow(self, sql: str, *args: Any) -> Row | None: ...
    def transaction(self, lock_id: int | None = None) -> Any: ...
    async def close(self) -> None: ...


def storable(text: str) -> str:
    """`text` as both databases can store it: NUL becomes U+FFFD, and so does every
    unpaired surrogate (which no UTF-8 encoder accepts)."""
    if text.isascii():
        return text.replace("\x00", "\ufffd") if "\x00" in text else text
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _args(args: Sequence[Any]) -> tuple[Any, ...]:
    # A list first: a ledger row's forty values, and a generator resumes for each.
    return tuple([storable(a) if isinstance(a, str) else a for a in args])


def rejects_row(exc: BaseException) -> bool:
    """Whether the database refused the values themselves (a retry of the same rows
    fails again), as opposed to being slow, away or out of connections."""
    if isinstance(exc, UnicodeError | OverflowError | TypeError | ValueError):
        return True
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.DataError | sqlite3.InterfaceError):
        return True
    try:
        import asyncpg
    except ImportError:  # pragma: no cover - asyncpg is a dependency
        return False
    # Class 22 (data exception: NUL, out of range...) and 23 (integrity violation).
    return isinstance(exc, asyncpg.DataError | asyncpg.IntegrityConstraintViolationError)


# An INSERT of one row of parameters: SQLite takes many rows in one statement instead.
_INSERT = re.compile(r"^(INSERT INTO \w+ \([\w, ]+\) VALUES )(\(\?(?:, \?)*\))$")
# SQLite's default bound on one statement's parameters (since 3.32).
MAX_VARIABLES = 32766
# Rows in one statement at most: a prepared statement's program (kept in the statement
# cache) grows with its rows, and 64 already take a batch of 500 ledger rows in 8.
MAX_ROWS = 64


def _numbered(sql: str) -> str:
    counter = iter(range(1, 10_000))
    return re.sub(r"\?", lambda _: f"${next(counter)}", sql)


class SQLiteDatabase:
    """One connection (aiosqlite runs it on its own thread), serialised by a lock.
    WAL mode lets the CLI and a running gateway use the same file."""

    dialect: Dialect = "sqlite"

    def __init__(self, connection: Any) -> None:
        self._conn = connection
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: str) -> SQLiteDatabase:
        import aiosqlite

        if path != ":memory:":
            path = await asyncio.to_thread(_prepare_file, path)
        conn = await aiosqlite.connect(path)
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA busy_timeout = 10000")
        if path != ":memory:":
            await conn.execute("PRAGMA journal_mode = WAL")
        await conn.commit()
        return cls(conn)

    async def execute(self, sql: str, *args: Any) -> None:
        async with self._lock:
            await self._conn.execute(sql, _args(args))
            await self._conn.commit()

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        values = [_args(r) for r in rows]
        async with self._lock:
            try:
                insert = _INSERT.match(sql)
                if insert is None or len(values) < 2:
                    await self._conn.executemany(sql, values)
                else:
                    await self._insert_all(insert[1], insert[2], values)
            except BaseException:
                # All or nothing, as on PostgreSQL: a later commit must not keep half.
                await self._conn.rollback()
                raise
            await self._conn.commit()

    async def _insert_all(self, head: str, marks: str, values: list[tuple[Any, ...]]) -> None:
        """The rows of one INSERT in a few many-row statements, not one step per row:
        each step lets go of the interpreter's lock and takes it back from the event
        loop's thread (under load, two context switches per ledger row). Statements
        hold a power of two of rows, so the few texts there are stay prepared in the
        connection's statement cache instead of being compiled for each batch."""
        most = 1 << (max(1, min(MAX_ROWS, MAX_VARIABLES // marks.count("?"))).bit_length() - 1)
        first = 0
        while first < len(values):
            size = min(most, 1 << ((len(values) - first).bit_length() - 1))
            chunk = values[first : first + size]
            first += size
            flat = list(chain.from_iterable(chunk))
            await self._conn.execute(f"{head}{', '.join([marks] * size)}", flat)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        async with self._lock:
            cursor = await self._conn.execute(sql, _args(args))
            return [dict(r) for r in await cursor.fetchall()]

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    @asynccontextmanager
    async def transaction(self, lock_id: int | None = None) -> AsyncIterator[Executor]:
        async with self._lock:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SQLiteTx(self._conn)
            except BaseException:
                await self._conn.rollback()
                raise
            await self._conn.commit()

    async def close(self) -> None:
        await self._conn.close()


class _SQLiteTx:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> None:
        await self._conn.execute(sql, _args(args))

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        cursor = await self._conn.execute(sql, _args(args))
        return [dict(r) for r in await cursor.fetchall()]


def _prepare_file(path: str) -> str:
    """Expands `~` and creates the file's folder; returns the path to open."""
    full = Path(path).expanduser()
    full.parent.mkdir(parents=True, exist_ok=True)
    return str(full)


class PostgresDatabase:
    """A connection pool; each statement borrows a connection for its own duration."""

    dialect: Dialect = "postgresql"

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, url: str, pgbouncer: bool = False) -> PostgresDatabase:
        """A pool on `url`; with `pgbouncer` (transaction mode) no statement cache,
        whose named statements would meet another server connection."""
        import asyncpg

        cache = {"statement_cache_size": 0} if pgbouncer else {}
        try:
            pool = await asyncpg.create_pool(
                url, min_size=1, max_size=10, command_timeout=30, **cache
            )
        except (OSError, TimeoutError, ValueError, asyncpg.PostgresError) as exc:
            # One line naming the setting, never the URL (it may hold a password).
            why = str(exc) or type(exc).__name__
            raise ConfigError(f"storage.database_url: cannot reach PostgreSQL ({why})") from None
        return cls(pool)

    async def execute(self, sql: str, *args: Any) -> None:
        await self._pool.execute(_numbered(sql), *_args(args))

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        # asyncpg runs executemany atomically: all rows or none.
        await self._pool.executemany(_numbered(sql), [_args(r) for r in rows])

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return [dict(r) for r in await self._pool.fetch(_numbered(sql), *_args(args))]

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        row = await self._pool.fetchrow(_numbered(sql), *_args(args))
        return None if row is None else dict(row)

    @asynccontextmanager
    async def transaction(self, lock_id: int | None = None) -> AsyncIterator[Executor]:
        async with self._pool.acquire() as conn, conn.transaction():
            if lock_id is not None:
                # Serialises this transaction with any other instance taking the same lock.
                await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_id)
            yield _PostgresTx(conn)

    async def close(self) -> None:
        # A database that stopped answering must not hold up shutdown (and a cancelled
        # close may itself wait on it, hence no wait_for).
        closing = asyncio.ensure_future(self._pool.close())
        done, _ = await asyncio.wait({closing}, timeout=CLOSE_TIMEOUT_S)
        if not done:
            self._pool.terminate()
            closing.cancel()
            await asyncio.wait({closing}, timeout=1)
        elif closing.exception() is not None:
            self._pool.terminate()


class _PostgresTx:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> None:
        await self._conn.execute(_numbered(sql), *_args(args))

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return [dict(r) for r in await self._conn.fetch(_numbered(sql), *_args(args))]


async def connect(database_url: str | None, sqlite_path: str, pgbouncer: bool = False) -> Database:
    """PostgreSQL when a URL is given (`pgbouncer`: behind pgbouncer in transaction
    mode), else the SQLite file (created if missing)."""
    if database_url:
        if not database_url.startswith(("postgres://", "postgresql://")):
            raise ConfigError("storage.database_url: only postgresql:// URLs are supported")
        return await PostgresDatabase.open(database_url, pgbouncer)
    return await SQLiteDatabase.open(sqlite_path)
