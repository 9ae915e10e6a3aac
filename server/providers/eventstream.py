"""The AWS event-stream framing (application/vnd.amazon.eventstream), decoded as the
bytes arrive and bounded: Bedrock's ConverseStream answers in it.

A message: total length and headers length (uint32, big-endian), the CRC-32 of those
8 bytes, the headers, the payload, and the CRC-32 of everything before it. A header:
its name's length (uint8), the name, a type (uint8) and a value of that type. A message
longer than the bound is refused as soon as its prelude says so, so nothing larger is
ever buffered; a bad CRC or a message cut short is a ProtocolViolation.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from server.providers.http import ProtocolViolation, Response

PRELUDE = 12  # two lengths and the prelude's CRC
# The sizes of fixed-size header values by type; types 6 and 7 (bytes, string) carry a
# uint16 length instead, and types 0 and 1 (true, false) no value.
FIXED = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


@dataclass(frozen=True, slots=True)
class EventMessage:
    headers: dict[str, Any]
    payload: bytes


class Decoder:
    """Messages of an event stream fed in pieces of any size."""

    def __init__(self, max_message_bytes: int) -> None:
        self._limit = max_message_bytes
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> Iterator[EventMessage]:
        buffer = self._buffer
        buffer += chunk
        while len(buffer) >= PRELUDE:
            total, headers_size, crc = struct.unpack_from(">III", buffer)
            if zlib.crc32(buffer[:8]) != crc:
                raise ProtocolViolation("event-stream prelude CRC mismatch")
            if total > self._limit:
                raise ProtocolViolation(f"an event-stream message exceeds {self._limit} bytes")
            if total < PRELUDE + 4 or headers_size > total - PRELUDE - 4:
                raise ProtocolViolation("event-stream message lengths are inconsistent")
            if len(buffer) < total:
                return
            message = bytes(buffer[:total])
            del buffer[:total]
            (crc,) = struct.unpack_from(">I", message, total - 4)
            if zlib.crc32(message[:-4]) != crc:
                raise ProtocolViolation("event-stream message CRC mismatch")
            headers = _headers(message[PRELUDE : PRELUDE + headers_size])
            yield EventMessage(headers, message[PRELUDE + headers_size : -4])

    def close(self) -> None:
        if self._buffer:
            raise ProtocolViolation("the event stream ended inside a message")


def _headers(raw: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    at = 0
    try:
        while at < len(raw):
            size = raw[at]
            name = raw[at + 1 : at + 1 + size].decode()
            at += 1 + size
            kind = raw[at]
            at += 1
            if kind in (0, 1):
                headers[name] = kind == 0
            elif kind in (6, 7):
                (length,) = struct.unpack_from(">H", raw, at)
                value = raw[at + 2 : at + 2 + length]
                headers[name] = value.decode() if kind == 7 else value
                at += 2 + length
            elif kind in FIXED:
                headers[name] = raw[at : at + FIXED[kind]]
                at += FIXED[kind]
            else:
                raise ProtocolViolation(f"event-stream header type {kind} is unknown")
        if at > len(raw):  # a size said more than the headers hold (slices do not tell)
            raise IndexError
    except (IndexError, struct.error, UnicodeDecodeError):
        raise ProtocolViolation("event-stream headers are malformed") from None
    return headers


async def messages(response: Response, max_message_bytes: int) -> AsyncIterator[EventMessage]:
    decoder = Decoder(max_message_bytes)
    async for chunk in response.aiter_bytes():
        for message in decoder.feed(chunk):
            yield message
    decoder.close()
