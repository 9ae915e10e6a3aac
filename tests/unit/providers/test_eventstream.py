"""The AWS event-stream decoder, fed messages encoded by the Bedrock fake's own
encoder (tests/support/upstreams/bedrock.py), split at every byte boundary."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from server.providers.eventstream import Decoder
from server.providers.http import ProtocolViolation
from tests.support.upstreams.bedrock import event, exception, frame

STREAM = [
    event("messageStart", {"role": "assistant"}),
    event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hé"}}),
    exception("throttlingException", "Slow down."),
]
WHOLE = b"".join(STREAM)


def decoded(pieces: list[bytes], limit: int = 1 << 20) -> list[tuple[str, dict]]:
    decoder = Decoder(limit)
    out = []
    for piece in pieces:
        for message in decoder.feed(piece):
            kind = message.headers.get(":event-type") or message.headers[":exception-type"]
            out.append((kind, json.loads(message.payload)))
    decoder.close()
    return out


def test_messages_split_anywhere_decode_the_same():
    whole = decoded([WHOLE])
    assert [k for k, _ in whole] == ["messageStart", "contentBlockDelta", "throttlingException"]
    assert whole[1][1]["delta"] == {"text": "Hé"}
    for cut in range(1, len(WHOLE)):
        assert decoded([WHOLE[:cut], WHOLE[cut:]]) == whole
    assert decoded([WHOLE[i : i + 1] for i in range(len(WHOLE))]) == whole


def test_a_bad_crc_is_refused():
    broken = bytearray(STREAM[1])
    broken[-6] ^= 0xFF  # a payload byte: the message CRC no longer matches
    with pytest.raises(ProtocolViolation, match="^event-stream message CRC mismatch$"):
        decoded([STREAM[0], bytes(broken)])
    prelude = bytearray(STREAM[0])
    prelude[3] ^= 0x01
    with pytest.raises(ProtocolViolation, match="^event-stream prelude CRC mismatch$"):
        decoded([bytes(prelude)])


def test_an_oversized_message_is_refused_before_it_is_read():
    big = frame({":event-type": "contentBlockDelta"}, b"x" * 5000)
    decoder = Decoder(1024)
    with pytest.raises(ProtocolViolation, match="exceeds 1024 bytes"):
        list(decoder.feed(big[:12]))  # the prelude alone says it is too long


def test_a_stream_cut_inside_a_message_is_refused():
    with pytest.raises(ProtocolViolation, match="^the event stream ended inside a message$"):
        decoded([WHOLE[:-3]])


def test_inconsistent_lengths_and_unknown_header_types_are_refused():
    prelude = struct.pack(">II", 20, 50)
    with pytest.raises(ProtocolViolation, match="^event-stream message lengths are inconsistent$"):
        decoded([prelude + struct.pack(">I", zlib.crc32(prelude)) + b"\0" * 8])
    # Headers that would run into the message's CRC.
    prelude = struct.pack(">II", 20, 5)
    with pytest.raises(ProtocolViolation, match="inconsistent"):
        decoded([prelude + struct.pack(">I", zlib.crc32(prelude)) + b"\0" * 8])
    odd = frame({"a": "b"}, b"{}")
    headers_at = 12
    tampered = bytearray(odd)
    tampered[headers_at + 2] = 42  # the header's type byte
    body = bytes(tampered[:-4])
    tampered[-4:] = struct.pack(">I", zlib.crc32(body))
    with pytest.raises(ProtocolViolation, match="header type 42"):
        decoded([bytes(tampered)])


def message(headers: bytes, payload: bytes = b"") -> bytes:
    """A message around headers already encoded, as AWS describes the framing."""
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def header(name: str, kind: int, value: bytes = b"") -> bytes:
    return struct.pack(">B", len(name)) + name.encode() + bytes([kind]) + value


def test_every_header_type_is_read_by_its_own_size():
    uuid = bytes(range(16))
    headers = b"".join([
        header("yes", 0), header("no", 1),
        header("byte", 2, b"\x07"), header("short", 3, b"\x00\x08"),
        header("int", 4, b"\x00\x00\x00\x09"), header("long", 5, b"\x00" * 7 + b"\x0a"),
        header("bytes", 6, b"\x00\x03\x01\x02\x03"), header("text", 7, b"\x00\x03h\xc3\xa9"),
        header("time", 8, b"\x00" * 7 + b"\x0b"), header("uuid", 9, uuid),
    ])  # fmt: skip
    (decoded_message,) = Decoder(1 << 20).feed(message(headers, b"{}"))
    assert decoded_message.headers == {
        "yes": True, "no": False, "byte": b"\x07", "short": b"\x00\x08",
        "int": b"\x00\x00\x00\x09", "long": b"\x00" * 7 + b"\x0a", "bytes": b"\x01\x02\x03",
        "text": "hé", "time": b"\x00" * 7 + b"\x0b", "uuid": uuid,
    }  # fmt: skip
    assert decoded_message.payload == b"{}"


def test_a_header_value_longer_than_32k_is_read_by_its_unsigned_length():
    value = b"x" * 40_000
    (read,) = Decoder(1 << 20).feed(
        message(header("big", 6, struct.pack(">H", len(value)) + value))
    )
    assert read.headers == {"big": value}


def test_the_smallest_messages_and_lengths_at_their_bounds():
    # No headers and no payload: 16 bytes, the least a message can be.
    (empty,) = Decoder(16).feed(message(b""))
    assert (empty.headers, empty.payload) == ({}, b"")
    # Headers that fill the message exactly: no payload.
    (only,) = Decoder(1 << 20).feed(message(header("a", 0)))
    assert (only.headers, only.payload) == ({"a": True}, b"")
    too_short = struct.pack(">II", 15, 0)
    with pytest.raises(ProtocolViolation, match="inconsistent"):
        list(Decoder(1 << 20).feed(too_short + struct.pack(">I", zlib.crc32(too_short))))
    # A message exactly at the bound is read; one byte more is refused.
    payload = message(header(":event-type", 7, b"\x00\x01x"), b"y" * 40)
    assert len(list(Decoder(len(payload)).feed(payload))) == 1
    with pytest.raises(ProtocolViolation, match=f"exceeds {len(payload) - 1} bytes"):
        list(Decoder(len(payload) - 1).feed(payload))


@pytest.mark.parametrize(
    "headers",
    [
        header("cut", 7, b"\x00\x09abc"),  # a string longer than what is left
        header("cut", 4, b"\x00\x00"),  # an int cut short
        b"\x05ab",  # a name cut short
        header("bad", 7, b"\x00\x02\xff\xfe"),  # a string that is not UTF-8
        header("no type", 0)[:-1],  # the type byte missing
    ],
)
def test_malformed_headers_are_refused(headers: bytes):
    with pytest.raises(ProtocolViolation, match="^event-stream headers are malformed$"):
        list(Decoder(1 << 20).feed(message(headers)))
