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
    with pytest.raises(ProtocolViolation, match="message CRC"):
        decoded([STREAM[0], bytes(broken)])
    prelude = bytearray(STREAM[0])
    prelude[3] ^= 0x01
    with pytest.raises(ProtocolViolation, match="prelude CRC"):
        decoded([bytes(prelude)])


def test_an_oversized_message_is_refused_before_it_is_read():
    big = frame({":event-type": "contentBlockDelta"}, b"x" * 5000)
    decoder = Decoder(1024)
    with pytest.raises(ProtocolViolation, match="exceeds 1024 bytes"):
        list(decoder.feed(big[:12]))  # the prelude alone says it is too long


def test_a_stream_cut_inside_a_message_is_refused():
    with pytest.raises(ProtocolViolation, match="ended inside a message"):
        decoded([WHOLE[:-3]])


def test_inconsistent_lengths_and_unknown_header_types_are_refused():
    prelude = struct.pack(">II", 20, 50)
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
