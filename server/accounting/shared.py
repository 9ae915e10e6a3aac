"""Rate limits and budgets shared by the worker processes of one `gateway serve
--workers N`, without Redis.

The parent process holds the one BucketLimiter and MemoryBudgets and serves them
over a Unix socket (`StateServer`); each worker's `SharedLimiter` and `SharedBudgets`
forward every check to it (`StateClient`). The parent's event loop handles one message
at a time, so check-and-reserve stays atomic across workers and the limits hold exactly,
never multiplied by the worker count. With `storage.redis_url` set the workers use
Redis instead and this is not started.

Framing: a 4-byte big-endian length, then an orjson array `[id, op, *args]`; the
answer is `[id, result]`, or `[id, None, refusal]` for an error: a budget's refusal as
`[message, metadata, retry_after_s]`, any other failure as null. One connection per
worker carries every call, matched by id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from server.accounting.budget import MemoryBudgets, SpentLoader
from server.accounting.ratelimit import BucketLimiter, Decision
from server.accounting.traffic import MemoryInFlight
from server.base.caller import BudgetSpec, Reservation
from server.base.errors import BudgetExhausted, Internal

log = logging.getLogger(__name__)
_LENGTH = struct.Struct(">I")
MAX_MESSAGE = 1 << 20


async def read_message(reader: asyncio.StreamReader) -> Any:
    head = await reader.readexactly(_LENGTH.size)
    (size,) = _LENGTH.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes, over {MAX_MESSAGE}")
    return orjson.loads(await reader.readexactly(size))


def framed(message: Any) -> bytes:
    body = orjson.dumps(message)
    return _LENGTH.pack(len(body)) + body


class Batch:
    """Frames for one connection, written together at the end of the loop's turn."""

    __slots__ = ("writer", "_frames")

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._frames: list[bytes] = []

    def add(self, message: Any) -> None:
        if not self._frames:
            asyncio.get_running_loop().call_soon(self._flush)
        self._frames.append(framed(message))

    def _flush(self) -> None:
        frames, self._frames = self._frames, []
        if not self.writer.is_closing():
            self.writer.write(b"".join(frames))


def _spec(raw: list[Any]) -> BudgetSpec:
    return BudgetSpec(raw[0], raw[1], float(raw[2]), raw[3], *raw[4:7])


class StateServer:
    """The parent's side: the one limiter and the one set of budgets."""

    def __init__(self, path: str, load_spent: SpentLoader, window_s: float) -> None:
        self.path = path
        self.limiter = BucketLimiter(window_s=window_s)
        self.budgets = MemoryBudgets(load_spent)
        self.in_flight = MemoryInFlight()
        self.ready: asyncio.Queue[int] = asyncio.Queue()
        self._server: asyncio.AbstractServer | None = None
        self._ops: dict[str, Callable[..., Awaitable[Any]]] = {
            "acquire": self._acquire,
            "settle": self._settle,
            "reserve": self._reserve,
            "reserve_all": self._reserve_all,
            "release": self._release,
            "release_all": self._release_all,
            "status": self._status,
            "enter": self.in_flight.enter,
            "leave": self.in_flight.leave,
            "count": self.in_flight.count,
            "ready": self._ready,
        }

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, self.path)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answers = Batch(writer)
        try:
            while True:
                call_id, op, *args = await read_message(reader)
                try:
                    answer = [call_id, await self._ops[op](*args)]
                except BudgetExhausted as exc:
                    answer = [call_id, None, [exc.message, exc.metadata, exc.retry_after_s]]
                except Exception:
                    log.exception("shared state: %s failed", op)
                    answer = [call_id, None, None]
                answers.add(answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except ValueError as exc:  # a frame too long or not JSON: no call can be read
            log.error("shared state: a worker's connection dropped (%s)", exc)
        finally:
            writer.close()

    async def _acquire(self, key: str, rpm: Any, tpm: Any, tokens: int, ticket: str) -> list[Any]:
        d = self.limiter.hit(key, rpm, tpm, tokens, ticket)
        return [d.allowed, d.requests_limit, d.requests_remaining, d.tokens_limit,
                d.tokens_remaining, d.retry_after_s, d.reset_requests_s, d.reset_tokens_s]  # fmt: skip

    async def _settle(self, key: str, ticket: str, tokens: int) -> None:
        await self.limiter.settle(key, ticket, tokens)

    async def _reserve(self, spec: list[Any], amount: float) -> list[Any]:
        reservation = await self.budgets.reserve(_spec(spec), amount)
        return [reservation.period_start, reservation.ticket]

    async def _reserve_all(self, specs: list[list[Any]], amount: float) -> list[list[Any]]:
        held = await self.budgets.reserve_all([_spec(s) for s in specs], amount)
        return [[r.period_start, r.ticket] for r in held]

    async def _release(
        self, spec: list[Any], period_start: float, ticket: str, actual: float
    ) -> float | None:
        return await self.budgets.settle(
            Reservation(_spec(spec), period_start, 0.0, ticket), actual
        )

    async def _release_all(self, held: list[list[Any]], actual: float) -> list[float | None]:
        reservations = [
            Reservation(_spec(spec), start, 0.0, ticket) for spec, start, ticket in held
        ]
        return await self.budgets.settle_all(reservations, actual)

    async def _status(self, spec: list[Any]) -> list[float]:
        return list(await self.budgets.status(_spec(spec)))

    async def _ready(self, worker: int) -> None:
        self.ready.put_nowait(worker)


class StateClient:
    """A worker's connection to the parent's StateServer, opened on first use."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._calls: Batch | None = None  # on the open connection's writer
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._opening: asyncio.Lock | None = None

    async def _connect(self) -> Batch:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            calls = self._calls
            if calls is None or calls.writer.is_closing():
                reader, writer = await asyncio.open_unix_connection(self.path)
                calls = self._calls = Batch(writer)
                self._reader_task = asyncio.create_task(self._read_answers(reader))
        return calls

    async def _read_answers(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                call_id, result, *error = await read_message(reader)
                future = self._pending.pop(call_id, None)
                if future is None or future.done():
                    continue
                if error:
                    future.set_exception(_error(error[0]))
                else:
                    future.set_result(result)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            failure = Internal("the shared limit service is unavailable")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(failure)
            self._pending.clear()
            log.error("shared state connection lost: %s", type(exc).__name__)
            if self._calls is not None:
                self._calls.writer.close()

    async def call(self, op: str, *args: Any) -> Any:
        calls = self._calls
        if calls is None or calls.writer.is_closing():
            calls = await self._connect()
        self._next_id += 1
        call_id = self._next_id
        future = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        calls.add([call_id, op, *args])
        return await future

    async def aclose(self) -> None:
        if self._calls is not None:
            self._calls.writer.close()
            self._calls = None
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
            self._reader_task = None


def _error(refusal: list[Any] | None) -> Exception:
    """The parent's error: a budget's refusal as it was made, anything else INTERNAL."""
    if refusal is None:
        return Internal("the shared limit service failed")
    message, metadata, retry = refusal
    return BudgetExhausted(message, metadata, retry_after_s=retry)


class SharedLimiter:
    """The Limiter protocol, answered by the parent process."""

    def __init__(self, client: StateClient) -> None:
        self.client = client

    async def acquire(
        self, key: str, rpm: int | None, tpm: int | None, tokens: int, ticket: str
    ) -> Decision:
        return Decision(*await self.client.call("acquire", key, rpm, tpm, tokens, ticket))

    async def settle(self, key: str, ticket: str, tokens: int) -> None:
        await self.client.call("settle", key, ticket, tokens)

    async def aclose(self) -> None:
        return None


class SharedInFlight:
    """The InFlight protocol (server/accounting/traffic.py), answered by the parent."""

    def __init__(self, client: StateClient) -> None:
        self.client = client

    async def enter(self, account: str, cap: int, ticket: str, weight: float = 1.0) -> int | None:
        count: int | None = await self.client.call("enter", account, cap, ticket, weight)
        return count

    async def leave(self, account: str, ticket: str) -> int:
        count: int = await self.client.call("leave", account, ticket)
        return count

    async def count(self, account: str) -> int:
        count: int = await self.client.call("count", account)
        return count


class SharedBudgets:
    """The Budgets protocol, answered by the parent process."""

    def __init__(self, client: StateClient) -> None:
        self.client = client

    @staticmethod
    def _spec(spec: BudgetSpec) -> list[Any]:
        return [
            spec.key_id, spec.key_name, spec.limit_usd, spec.period, spec.level, spec.level_id,
            spec.slot,
        ]  # fmt: skip

    async def reserve(self, spec: BudgetSpec, amount: float) -> Reservation:
        period_start, ticket = await self.client.call("reserve", self._spec(spec), amount)
        return Reservation(spec, period_start, amount, ticket)

    async def reserve_all(self, specs: Sequence[BudgetSpec], amount: float) -> list[Reservation]:
        held = await self.client.call("reserve_all", [self._spec(s) for s in specs], amount)
        return [
            Reservation(spec, start, amount, ticket)
            for spec, (start, ticket) in zip(specs, held, strict=True)
        ]

    async def settle(self, reservation: Reservation, actual: float) -> float | None:
        spent: float | None = await self.client.call(
            "release", self._spec(reservation.spec), reservation.period_start,
            reservation.ticket, actual,
        )  # fmt: skip
        return spent

    async def settle_all(
        self, reservations: Sequence[Reservation], actual: float
    ) -> list[float | None]:
        held = [[self._spec(r.spec), r.period_start, r.ticket] for r in reservations]
        spent: list[float | None] = await self.client.call("release_all", held, actual)
        return spent

    async def status(self, spec: BudgetSpec) -> tuple[float, float]:
        spent, reserved = await self.client.call("status", self._spec(spec))
        return spent, reserved

    async def aclose(self) -> None:
        return None
