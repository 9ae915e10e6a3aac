"""Request decoding that cannot fail loudly: an undecodable gRPC message (corrupt wire
format, a string field that is not UTF-8) becomes INVALID_ARGUMENT naming the field
when one can be found, instead of gRPC's UNKNOWN with a traceback in the log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from server.base.errors import InvalidArgument

# Nested messages followed when looking for the bad field (Struct is recursive).
MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class Undecodable:
    """Stands for a request that could not be decoded; the handler answers with `error`."""

    error: InvalidArgument


def decoder(message_type: type[Message]) -> Callable[[bytes], Message | Undecodable]:
    """A request_deserializer that returns Undecodable instead of raising."""

    def decode(raw: bytes) -> Message | Undecodable:
        try:
            return message_type.FromString(raw)
        except Exception:
            field = _bad_string(raw, message_type.DESCRIPTOR, "", 0)
            if field is not None:
                return Undecodable(InvalidArgument.for_field(field, "is not valid UTF-8"))
            return Undecodable(
                InvalidArgument(f"the request is not a valid {message_type.DESCRIPTOR.name}")
            )

    return decode


def _varint(raw: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = raw[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _bad_string(raw: bytes, descriptor: Descriptor, prefix: str, depth: int) -> str | None:
    """The path of the first string field whose bytes are not UTF-8, or None."""
    if depth > MAX_DEPTH:
        return None
    i, counts = 0, dict[str, int]()
    try:
        while i < len(raw):
            key, i = _varint(raw, i)
            number, wire = key >> 3, key & 7
            if wire == 0:
                _, i = _varint(raw, i)
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            elif wire == 2:
                size, i = _varint(raw, i)
                chunk, i = raw[i : i + size], i + size
                field = descriptor.fields_by_number.get(number)
                if field is None:
                    continue
                name = prefix + field.name
                if field.is_repeated:
                    index = counts.get(name, 0)
                    counts[name] = index + 1
                    name = f"{name}[{index}]"
                if field.type == FieldDescriptor.TYPE_STRING:
                    try:
                        chunk.decode()
                    except UnicodeDecodeError:
                        return name
                elif field.type == FieldDescriptor.TYPE_MESSAGE:
                    found = _bad_string(chunk, field.message_type, name + ".", depth + 1)
                    if found is not None:
                        return found
            else:
                return None
    except (IndexError, ValueError):
        return None
    return None
