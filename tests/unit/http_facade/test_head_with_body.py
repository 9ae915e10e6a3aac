"""A response's head waits for its body when a content-length says the body follows at
once: the whole answer is one write. A stream's head, a 100 Continue and a body sent in
parts go out as they come, and a close sends a head still held."""

from __future__ import annotations

from types import SimpleNamespace

from http_facade.protocol import HeadWithBody


class Recording:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


class Cycle(SimpleNamespace):
    """uvicorn's response cycle as it is when it writes: its head's framing decided."""


def cycle(length: int | None, method: str = "POST") -> Cycle:
    return Cycle(
        scope={"method": method},
        response_started=False,
        chunked_encoding=None if length is None else False,
        expected_content_length=length or 0,
    )


def test_a_head_with_a_content_length_goes_out_with_its_body():
    raw, response = Recording(), cycle(None)
    transport = HeadWithBody(raw, response)  # type: ignore[arg-type]
    transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # before the response: as it is
    response.response_started, response.chunked_encoding = True, False
    response.expected_content_length = 4
    transport.write(b"HEAD\r\n\r\n")
    assert raw.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    transport.write(b"body")
    transport.write(b"")
    assert raw.writes[1:] == [b"HEAD\r\n\r\nbody", b""]
    assert transport.get_extra_info("peername") == "info peername"


def test_a_streams_head_and_its_parts_go_out_as_they_come():
    raw, response = Recording(), cycle(None)
    transport = HeadWithBody(raw, response)  # type: ignore[arg-type]
    response.response_started, response.chunked_encoding = True, True
    for part in (b"HEAD", b"5\r\nfirst\r\n", b"0\r\n\r\n"):
        transport.write(part)
        assert raw.writes[-1] == part


def test_only_the_head_is_held_and_a_close_sends_it():
    raw, response = Recording(), cycle(10)
    transport = HeadWithBody(raw, response)  # type: ignore[arg-type]
    response.response_started = True
    transport.write(b"HEAD")
    transport.write(b"part")
    transport.write(b"rest!!")  # the body's second part is not held
    assert raw.writes == [b"HEADpart", b"rest!!"]
    head_request = cycle(10, "HEAD")
    head_only = HeadWithBody(Recording(), head_request)  # type: ignore[arg-type]
    head_request.response_started = True
    head_only.write(b"HEAD")  # a HEAD request's body is never written: not held
    assert head_only._transport.writes == [b"HEAD"]  # type: ignore[attr-defined]
    held = HeadWithBody(Recording(), response)  # type: ignore[arg-type]
    held.write(b"HEAD")
    held.close()  # the handler failed before its body: the head is not lost
    assert held._transport.writes == [b"HEAD"] and held._transport.closed  # type: ignore[attr-defined]
