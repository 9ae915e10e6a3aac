"""The caller's side, bounded, with raw sockets: connections that never send a byte,
slowloris heads, unterminated bodies, malformed framing, and clients that never read
their stream (issue 12, items 5 and 7)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
import uvloop

from server.base import config
from server.cli import serve as app
from tests.support.faults import SSE_HEAD, RawRequest, raw_upstream
from tests.support.gateways import API_KEY, default_config_dict, running_gateway
from tests.support.upstreams.config import model, provider, with_models

BOUNDS = {
    "header_timeout_s": 0.5,
    "idle_timeout_s": 0.5,
    "body_timeout_s": 0.5,
    "send_timeout_s": 0.5,
}


@pytest.fixture(scope="module")
async def gateway():
    data = default_config_dict()
    data["server"].update(BOUNDS)
    async with running_gateway(data) as gw:
        yield gw


async def _read_all(reader: asyncio.StreamReader, timeout_s: float = 5) -> bytes:
    """Everything the server sends until it closes the connection."""
    async with asyncio.timeout(timeout_s):
        return await reader.read()


def _status_and_json(raw: bytes) -> tuple[int, dict]:  # type: ignore[type-arg]
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"application/json" in head.lower(), head
    # A timeout may pass on a retry; a malformed request never does.
    assert f"x-should-retry: {str(status == 408).lower()}".encode() in head.lower(), head
    return status, json.loads(body)


async def test_a_connection_that_never_sends_a_byte_is_closed(gateway):
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.http_port)
    raw = await _read_all(reader)
    writer.close()
    assert time.perf_counter() - started < 3
    assert raw == b""  # closed without a word: nothing was asked


async def test_an_idle_keep_alive_connection_is_closed_without_an_unasked_answer(gateway):
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.http_port)
    writer.write(
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-api-key: " + API_KEY.encode() + b"\r\n\r\n"
    )
    await writer.drain()
    raw = await _read_all(reader)
    writer.close()
    assert raw.startswith(b"HTTP/1.1 200") and raw.count(b"HTTP/1.1") == 1


async def test_slowloris_connections_are_closed(gateway):
    async def drip() -> float:
        started = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.http_port)
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        try:
            for _ in range(100):  # one header byte every 0.1 s: never a whole head
                writer.write(b"x")
                await writer.drain()
                try:
                    async with asyncio.timeout(0.1):
                        if await reader.read(1) == b"":
                            break
                except TimeoutError:
                    continue
                break  # the server answered (408) and closes
        except OSError:
            pass
        finally:
            writer.close()
        return time.perf_counter() - started

    took = await asyncio.gather(*(drip() for _ in range(200)))
    assert max(took) < 5, f"slowest slowloris connection lived {max(took):.1f}s"


async def test_an_unterminated_chunked_body_gets_408(gateway):
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.http_port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"x-api-key: " + API_KEY.encode() + b'\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"mod\r\n'
    )
    await writer.drain()
    raw = await _read_all(reader)
    writer.close()
    status, body = _status_and_json(raw)
    assert status == 408 and body["error"]["code"] == "request_timeout", body


async def test_an_incomplete_head_gets_408(gateway):
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.http_port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
    await writer.drain()
    raw = await _read_all(reader)
    writer.close()
    status, body = _status_and_json(raw)
    assert status == 408 and body["error"]["code"] == "request_timeout", body


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 7\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: x\r\nbad header\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 70000,  # a head too large
        # A whole head over the bound, arriving in one write (with and without a body).
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 91000 + b"\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n"
        + b"".join(b"x-h%d: %s\r\n" % (i, b"b" * 900) for i in range(100))
        + b"\r\n{}",
    ],
)
async def test_malformed_framing_gets_the_json_error_body(gateway, request_bytes):
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.http_port)
    writer.write(request_bytes)
    await writer.drain()
    raw = await _read_all(reader)
    writer.close()
    status, body = _status_and_json(raw)
    assert status == 400 and body["error"]["type"] == "invalid_request_error", body


async def test_a_client_that_never_reads_releases_its_stream_and_upstream():
    released = asyncio.Event()

    async def firehose(request: RawRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD)
        piece = json.dumps({"choices": [{"index": 0, "delta": {"content": "x" * 32768}}]})
        try:
            for _ in range(100_000):  # gigabytes, if anyone kept reading
                writer.write(f"data: {piece}\n\n".encode())
                await writer.drain()
        except OSError:
            pass
        finally:
            released.set()

    async with raw_upstream(firehose) as upstream:
        data = with_models(
            model("m", provider("hose", "openai", upstream.url)), request_timeout_s=120
        )
        data["server"].update(BOUNDS)
        async with running_gateway(data) as gw:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", gw.http_port))
            body = json.dumps(
                {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
            ).encode()
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
                b"\r\nx-api-key: "
                + API_KEY.encode()
                + b"\r\ncontent-length: %d\r\n\r\n" % len(body)
                + body
            )
            started = time.perf_counter()
            try:
                async with asyncio.timeout(30):
                    await released.wait()  # the upstream connection was closed by the gateway
            finally:
                sock.close()
            assert time.perf_counter() - started < 30
            ledger = gw.gateway.accounts.ledger
            await ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT status FROM usage_records WHERE model = 'm'"
            )
    assert [r["status"] for r in rows] == ["CANCELLED"]


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_413_before_the_body_is_read_ends_the_connection_with_no_second_answer(
    framing: str,
) -> None:
    data = default_config_dict()
    data["server"].update(BOUNDS, max_body_bytes=1024)
    body = json.dumps({"model": "sim-mini", "messages": [
        {"role": "user", "content": "a" * 400_000}]}).encode()  # fmt: skip
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"x-api-key: " + API_KEY.encode() + b"\r\n")  # fmt: skip
    if framing == "chunked":
        head += b"transfer-encoding: chunked\r\n\r\n"
        body = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    else:
        head += b"content-length: %d\r\n\r\n" % len(body)
    # What a client pipelines after it: never answered on this connection.
    after = b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-api-key: " + API_KEY.encode() + b"\r\n\r\n"
    async with running_gateway(data) as gw:
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.http_port)
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(0.2)  # answered on its head, before the body is read
        writer.write(body + after)
        await writer.drain()
        raw = await _read_all(reader)  # the connection ends (a FIN: the answer is read)
        writer.close()
    assert raw.count(b"HTTP/1.1 ") == 1, raw
    status, error = _status_and_json(raw)
    assert status == 413 and "exceeds 1024 bytes" in error["error"]["message"]


MODELS_REQUEST = (
    b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-api-key: " + API_KEY.encode() + b"\r\n\r\n"
)


@pytest.mark.parametrize("kept_alive", [False, True], ids=["new-connection", "kept-alive"])
def test_a_request_waiting_in_the_socket_is_served_when_an_idle_bound_fires_late(
    kept_alive: bool,
) -> None:
    """A gateway whose loop was busy past its idle bounds (a loaded machine) finds, when it
    looks again, both a due timer and a request in the socket. uvloop runs due timers
    before it polls the sockets: the connection must not be closed as idle at the moment
    its client sent on it."""
    data = default_config_dict()
    data["server"].update(header_timeout_s=0.5, idle_timeout_s=0.5)
    loop = uvloop.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    gw = asyncio.run_coroutine_threadsafe(app.start(config.parse(data, "test")), loop).result(60)
    busy = threading.Event()
    # Busy in an I/O callback: the loop's next turn starts with its due timers.
    wake, woken = socket.socketpair()

    def block() -> None:
        loop.remove_reader(woken.fileno())
        busy.set()
        time.sleep(1)  # past both bounds: when it returns, their timers are due

    try:
        with socket.create_connection(("127.0.0.1", gw.http_port), timeout=30) as sock:
            if kept_alive:
                sock.sendall(MODELS_REQUEST)
                assert _one_answer(sock).startswith(b"HTTP/1.1 200")
            loop.call_soon_threadsafe(loop.add_reader, woken.fileno(), block)
            wake.send(b"!")
            assert busy.wait(30)
            sock.sendall(MODELS_REQUEST)  # arrives while the loop is busy
            assert _one_answer(sock).startswith(b"HTTP/1.1 200")
    finally:
        asyncio.run_coroutine_threadsafe(gw.stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
        wake.close()
        woken.close()


def _one_answer(sock: socket.socket) -> bytes:
    """Reads one whole response (framed by its content-length), or to the connection's end."""
    raw = b""
    while b"\r\n\r\n" not in raw or len(raw.partition(b"\r\n\r\n")[2]) < _length(raw):
        chunk = sock.recv(65536)
        if not chunk:
            break
        raw += chunk
    return raw


def _length(raw: bytes) -> int:
    for line in raw.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


async def test_a_kept_alive_connection_the_client_reset_ends_quietly_at_its_idle_bound(gateway):
    """A client that resets its connection after an answer (as a load generator does
    when it stops) leaves uvicorn's keep-alive timer armed; when it fires, the closed
    socket must not be polled (its fd is gone: an error in a loop callback)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    try:
        reset = socket.create_connection(("127.0.0.1", gateway.http_port))
        reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        reset.setblocking(False)
        await loop.sock_sendall(reset, MODELS_REQUEST)
        assert (await loop.sock_recv(reset, 65536)).startswith(b"HTTP/1.1 200")
        reset.close()  # linger 0: a reset, not a FIN
        # A connection answered after it is closed for idleness after it: the reset
        # connection's idle timer has fired by then (timers fire in order).
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.http_port)
        writer.write(MODELS_REQUEST)
        raw = await _read_all(reader)
        writer.close()
        assert raw.startswith(b"HTTP/1.1 200")
    finally:
        loop.set_exception_handler(before)
    assert errors == []
