"""A pooled HTTP/1.1 client for one upstream origin: asyncio's transports and the
httptools parser uvicorn serves with, and nothing between them and the adapters.

An upstream call through aiohttp's client cost 0.07-0.17 ms of CPU against an instant
upstream; through this one, 0.02-0.08 ms (`python -m bench.upstream_client`), which
made a unary gateway request up to a fifth cheaper. It does what the adapters need
and no more: keep-alive connections pooled up to a limit, TLS, a connect timeout and a
read timeout, chunked and gzip or deflate bodies, reading paused while a body is read
slower than it arrives. No redirects, proxies or cookies: the gateway never used them.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import zlib
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from urllib.parse import quote, urlsplit

import httptools

# Reading pauses while this much of a body waits unread (a caller slower than the upstream).
HIGH_WATER = 256 * 1024
# An answer's head (status line and headers, interim answers included), its number of
# headers and one header's name and value may not exceed these: an upstream sending
# headers without end is a bad answer, never buffered.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 128
MAX_HEADER_BYTES = 16 * 1024
# A compressed body may inflate to at most this, and past the first INFLATE_FREE bytes
# to at most MAX_RATIO times what came compressed (a gzip bomb is a bad answer, found
# after about a megabyte of work, not a gigabyte). Inflated a slice at a time.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
INFLATE_FREE = 1 << 20
MAX_RATIO = 200
INFLATE_SLICE = 256 * 1024
# Seconds a host's resolved addresses are used before it is resolved again.
DNS_TTL_S = 300
# What a path may hold unescaped; anything else is %-escaped, as a URL library would.
PATH_SAFE = "/:@!$&'()*+,;=?%"


class TransportError(Exception):
    """The connection failed the request (not an HTTP status: those are answers)."""


class ConnectTimeout(TransportError):
    """No connection within the connect timeout: none opened, or none freed in the pool."""


class ConnectFailed(TransportError):
    """The upstream refused the connection, or its name did not resolve."""


class ReadTimeout(TransportError):
    """The upstream sent nothing for the read timeout while an answer was awaited."""


class Disconnected(TransportError):
    """The connection closed before the answer ended."""


class BadAnswer(TransportError):
    """What came back is not an HTTP/1.1 answer this client can read."""


class Headers(Mapping[str, str]):
    """An answer's headers, looked up by any case; repeated ones joined by commas."""

    __slots__ = ("_items",)

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        items: dict[str, str] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            items[key] = f"{items[key]}, {text}" if key in items else text
        self._items = items

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class _Connection(asyncio.Protocol):
    """One connection and the answer it is reading. The parser's callbacks fill the
    answer; one waiter at a time is woken when there is something new to read."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.busy = False
        self.closed = False
        self.idle_since = 0.0
        self.requests = 0  # how many were sent on it
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False  # read as the answer completes: the parser forgets after
        self.error: TransportError | None = None
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.heard = 0.0  # when the upstream last sent something
        self.heard_any = False
        self.head_bytes = 0
        self.waiter: asyncio.Future[None] | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.busy:  # nothing was asked: an idle connection is not reused after this
            self.close()
            return
        self.heard = self.pool.loop.time()
        self.heard_any = True
        if not self.headers_done:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.fail(BadAnswer(f"unreadable HTTP answer ({exc})"))
        except httptools.HttpParserUpgrade:
            self.fail(BadAnswer("an upgrade was answered"))
        if not self.headers_done and self.head_bytes > MAX_HEAD_BYTES:
            self.fail(BadAnswer(f"an answer head larger than {MAX_HEAD_BYTES} bytes"))

    def eof_received(self) -> bool:
        return False  # close: a half-closed upstream will send nothing more

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.busy and not self.complete and self.error is None:
            if self.headers_done and self._ends_at_close():
                self.complete = True  # a body delimited by the connection's end
            else:
                self.error = Disconnected("upstream closed the connection mid-answer")
        self._wake()
        self.pool.lost(self)

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request: parsing stops, and then reuse
            raise BadAnswer  # (seen by feed_data as a callback's error)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > MAX_HEADER_BYTES:
            self.fail(BadAnswer(f"an answer header larger than {MAX_HEADER_BYTES} bytes"))
            raise BadAnswer  # parsing stops (seen by feed_data as a callback's error)
        if len(self.raw_headers) >= MAX_HEADERS:
            self.fail(BadAnswer(f"an answer with more than {MAX_HEADERS} headers"))
            raise BadAnswer
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            self.raw_headers = []
            return
        self.status = status
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.headers_done:
            self.complete = True
            self.keep_alive = self.parser.should_keep_alive()
            self._wake()

    # the answer's side

    def header(self, name: bytes) -> bytes | None:
        """The first value of a header, by its lowercase name."""
        for key, value in self.raw_headers:
            if key.lower() == name:
                return value
        return None

    def _ends_at_close(self) -> bool:
        return self.header(b"content-length") is None and self.header(b"transfer-encoding") is None

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: TransportError) -> None:
        if self.error is None:
            self.error = error
        self.close()
        self._wake()

    async def wait(self) -> None:
        """Until the parser has something new, or the connection failed; raises the
        failure only when there is nothing left to read before it."""
        if self.error is not None:
            raise self.error
        self.waiter = self.pool.loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def take(self) -> bytes:
        """Every body byte read so far, at once; reading resumes if it was paused."""
        body = self.body
        data = body.popleft() if len(body) == 1 else b"".join(body)
        body.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    def begin(self) -> None:
        self._reset()
        self.busy = True
        self.requests += 1
        self.heard = self.pool.loop.time()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Answer:
    """An upstream's answer: status and headers read, the body read on demand. Given back
    with `release()`: its connection returns to the pool when the body was read to its
    end, and closes otherwise."""

    __slots__ = ("_conn", "_headers", "_pool", "status_code")

    def __init__(self, conn: _Connection, pool: Pool) -> None:
        self._conn = conn
        self._pool = pool
        self._headers: Headers | None = None
        self.status_code = conn.status

    @property
    def headers(self) -> Headers:
        if self._headers is None:  # built when asked: most answers are read for their body only
            self._headers = Headers(self._conn.raw_headers)
        return self._headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives, decompressed; ends at its end."""
        conn = self._conn
        encoding = (
            (conn.header(b"content-encoding") or b"identity").strip().lower().decode("latin-1")
        )
        inflate = None
        if encoding in ("gzip", "x-gzip", "deflate"):
            inflate = _Inflate()
        elif encoding != "identity":
            raise BadAnswer(f"an unsupported content-encoding: {encoding[:40]}")
        while True:
            if conn.body:
                data = conn.take()
                if inflate is None:
                    yield data
                    continue
                for piece in inflate.feed(data):
                    yield piece
            elif conn.complete:
                return
            else:
                await conn.wait()

    def release(self) -> None:
        self._pool.release(self._conn)


class _Inflate:
    """A gzip or zlib body inflated a slice at a time, within MAX_INFLATED_BYTES and
    MAX_RATIO."""

    __slots__ = ("_inflate", "_taken", "_given")

    def __init__(self) -> None:
        self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by its header
        self._taken = 0  # compressed bytes in
        self._given = 0  # inflated bytes out

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                piece = self._inflate.decompress(data, INFLATE_SLICE)
            except zlib.error:
                raise BadAnswer("a body that does not decompress") from None
            rest = self._inflate.unconsumed_tail
            self._taken += len(data) - len(rest)  # what this slice was inflated from
            data = rest
            self._given += len(piece)
            if self._given > MAX_INFLATED_BYTES:
                raise BadAnswer(f"a body inflating past {MAX_INFLATED_BYTES} bytes")
            if self._given > INFLATE_FREE and self._given > MAX_RATIO * self._taken:
                raise BadAnswer(f"a body inflating more than {MAX_RATIO} times (a gzip bomb)")
            if piece:
                yield piece


class Pool:
    """Connections to one origin, at most `limit` open; the idle ones reused newest
    first and closed after `keepalive_s` unused."""

    def __init__(
        self,
        base_url: str,
        limit: int,
        connect_timeout_s: float,
        read_timeout_s: float,
        keepalive_s: float = 60,
    ) -> None:
        url = urlsplit(base_url)
        self.secure = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.secure else 80)
        default_port = url.port is None or url.port == (443 if self.secure else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = host if default_port else f"{host}:{self.port}"
        self.base_path = quote(url.path, safe=PATH_SAFE)
        self.limit = limit
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.keepalive_s = keepalive_s
        self.loop = asyncio.get_running_loop()
        self._ssl = ssl.create_default_context() if self.secure else None
        self._idle: list[_Connection] = []
        self._open = 0  # connections open or opening
        self._waiting: deque[asyncio.Future[_Connection | None]] = deque()
        self._closed = False
        self._busy: set[_Connection] = set()
        self._watchdog: asyncio.TimerHandle | None = None
        self._resolved: list[str] = []
        self._resolved_until = 0.0

    async def request(self, method: str, target: str, head: bytes, body: bytes) -> Answer:
        """Sends `method target` with `head` (its header lines, CRLF-ended) and `body`,
        and returns once the answer's status and headers are in."""
        prefix = f"{method} {self.base_path}{target} HTTP/1.1\r\nhost: {self.authority}\r\n"
        length = f"content-length: {len(body)}\r\n\r\n"  # every adapter's request is a POST
        request = (prefix.encode("latin-1"), head, length.encode(), body)
        while True:
            conn = await self._acquire()
            reused = conn.requests > 0
            try:
                self._begin(conn)
                assert conn.transport is not None
                conn.transport.writelines(request)
                while not conn.headers_done:
                    await conn.wait()
                return Answer(conn, self)
            except Disconnected:
                self.release(conn)
                if reused and not conn.heard_any:
                    continue  # closed by the upstream as it lay idle, not an answer: again
                raise
            except BaseException:
                conn.close()
                self.release(conn)
                raise

    def _begin(self, conn: _Connection) -> None:
        conn.begin()
        self._busy.add(conn)
        if self._watchdog is None:
            self._watchdog = self.loop.call_later(self.read_timeout_s / 4, self._watch)

    def _watch(self) -> None:
        """Fails each answer awaited from an upstream silent for the read timeout. One
        timer per pool, looking a quarter of the timeout apart while requests are under
        way (so a timeout fires within 1.25 times its length), instead of a timer armed
        and cancelled around every read."""
        now = self.loop.time()
        for conn in list(self._busy):
            if conn.waiter is not None and now - conn.heard >= self.read_timeout_s:
                conn.fail(ReadTimeout())
        self._watchdog = None
        if self._busy:
            self._watchdog = self.loop.call_later(self.read_timeout_s / 4, self._watch)

    async def _acquire(self) -> _Connection:
        if self._closed:
            raise ConnectFailed("cannot connect (the client is closed)")
        now = self.loop.time()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.keepalive_s:
                return conn
            conn.close()  # out of the idle list: lost() will not count it again
            self._open -= 1
        if self._open >= self.limit:
            freed = await self._wait_for_one()
            if freed is not None:
                return freed
        else:
            self._open += 1
        try:  # the slot counted as this request's: a new connection
            return await self._connect()
        except BaseException:
            self._put_back(None)
            raise

    async def _wait_for_one(self) -> _Connection | None:
        """A connection another request freed, or None with the slot to open one (counted
        for this request already), waited for at most twice the connect timeout."""
        future: asyncio.Future[_Connection | None] = self.loop.create_future()
        self._waiting.append(future)
        try:
            async with asyncio.timeout(self.connect_timeout_s * 2):
                return await future
        except BaseException as exc:
            if future in self._waiting:
                self._waiting.remove(future)
            elif not future.cancelled():  # handed one as the wait ended
                self._put_back(future.result())
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout from None
            raise

    async def _connect(self) -> _Connection:
        """A new connection to the first of the host's addresses that accepts one."""
        failure: OSError | None = None
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                for address in await self._addresses():
                    try:
                        _, conn = await self.loop.create_connection(
                            lambda: _Connection(self), address, self.port,
                            ssl=self._ssl, server_hostname=self.host if self._ssl else None,
                        )  # fmt: skip
                        return conn
                    except OSError as exc:  # refused, unreachable, TLS refused
                        failure = exc
        except TimeoutError:
            raise ConnectTimeout from None
        except OSError as exc:  # no such name
            failure = exc
        raise ConnectFailed(
            f"cannot connect ({type(failure).__name__ if failure else 'no address'})"
        )

    async def _addresses(self) -> list[str]:
        """The host's addresses, resolved at most every DNS_TTL_S seconds: a gateway
        opening thousands of connections asks its resolver once, not thousands of times."""
        now = self.loop.time()
        if now >= self._resolved_until:
            found = await self.loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            self._resolved = list(dict.fromkeys(str(info[4][0]) for info in found))
            self._resolved_until = now + DNS_TTL_S
        return self._resolved

    def release(self, conn: _Connection) -> None:
        """`conn` back after a request: pooled when its answer was read to the end and
        the upstream keeps it alive, closed otherwise."""
        if not conn.busy:
            return
        conn.busy = False
        self._busy.discard(conn)
        reusable = (
            conn.complete and not conn.closed and not self._closed
            and conn.error is None and conn.keep_alive
        )  # fmt: skip
        if not reusable:
            conn.close()
        self._put_back(conn if reusable else None)

    def _put_back(self, conn: _Connection | None) -> None:
        """A connection free again, or with None a slot: to the first waiter, or idle."""
        if conn is None:
            self._open -= 1
            self._hand_on(None)
            return
        conn.idle_since = self.loop.time()
        if not self._hand_on(conn):
            self._idle.append(conn)

    def lost(self, conn: _Connection) -> None:
        """An idle connection the upstream closed leaves the pool (a busy one leaves
        it on release)."""
        if not conn.busy and conn in self._idle:
            self._idle.remove(conn)
            self._put_back(None)

    def _hand_on(self, conn: _Connection | None) -> bool:
        """Gives the first waiter `conn`, or with None the slot to open one (counted
        for it); False when nobody waits."""
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                if conn is None:
                    self._open += 1
                future.set_result(conn)
                return True
        return False

    def aclose(self) -> None:
        """Closes the idle connections; busy ones close as their requests end."""
        self._closed = True
        if self._watchdog is not None and not self._busy:
            self._watchdog.cancel()
            self._watchdog = None
        for conn in self._idle:
            conn.close()
        self._open -= len(self._idle)
        self._idle.clear()
