"""Request decoding that cannot fail loudly: an undecodable gRPC message (corrupt wire
format, a string field that is not UTF-8) becomes INVALID_ARGUMENT naming the field
when one can be found, instead of gRPC's UNKNOWN with a traceback in the log. A
service that refuses unknown fields (`refuse_unknown`) gets UNKNOWN_PARAMETER for a
field number its message lacks, named by its path (`limits.#9`), where protobuf would
keep it aside unread. A message past its method's bound (`server.max_body_bytes`, or an
upload's bound) is REQUEST_TOO_LARGE before it is parsed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from server.base.errors import InvalidArgument, TooLarge, UnknownParameter

# Nested messages followed when looking for the bad field (Struct is recursive).
MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class Undecodable:
    """Stands for a request that could not be decoded; the handler answers with `error`."""

    error: InvalidArgument


def decoder(
    message_type: type[Message],
    refuse_unknown: bool = False,
    max_bytes: int | None = None,
    upload_field: str = "",
) -> Callable[[bytes], Message | Undecodable]:
    """A request_deserializer that returns Undecodable instead of raising; past
    `max_bytes`, TooLarge naming `upload_field` when the method takes an upload."""

    def decode(raw: bytes) -> Message | Undecodable:
        if max_bytes is not None and len(raw) > max_bytes:
            return Undecodable(_too_large(max_bytes, upload_field))
        try:
            message = message_type.FromString(raw)
        except Exception:
            field = _bad_string(raw, message_type.DESCRIPTOR, "", 0)
            if field is not None:
                return Undecodable(InvalidArgument.for_field(field, "is not valid UTF-8"))
            return Undecodable(
                InvalidArgument(f"the request is not a valid {message_type.DESCRIPTOR.name}")
            )
        if refuse_unknown:
            unknown = _unknown_field(raw, message_type.DESCRIPTOR, "")
            if unknown is not None:
                path, owner = unknown
                return Undecodable(UnknownParameter.for_field(path, f"is not a field of {owner}"))
        return message

    return decode


def _too_large(max_bytes: int, upload_field: str) -> TooLarge:
    if upload_field:
        return TooLarge(
            f"{upload_field}: the request exceeds {max_bytes} bytes", {"field": upload_field}
        )
    return TooLarge(f"the request exceeds {max_bytes} bytes", {})


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


def _fields(raw: bytes) -> Iterator[tuple[int, bytes | None]]:
    """Each field of an encoded message, in order: its number, and its bytes when it is
    length-delimited (None otherwise). Ends at a group (after its number) or at a
    truncated field."""
    i = 0
    try:
        while i < len(raw):
            key, i = _varint(raw, i)
            number, wire = key >> 3, key & 7
            chunk = None
            if wire == 0:
                _, i = _varint(raw, i)
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            elif wire == 2:
                size, i = _varint(raw, i)
                chunk, i = raw[i : i + size], i + size
            else:  # a group: its number, and nothing read past it
                yield number, None
                return
            yield number, chunk
    except (IndexError, ValueError):
        return


def _named(
    raw: bytes, descriptor: Descriptor, prefix: str
) -> Iterator[tuple[FieldDescriptor | None, str, bytes | None]]:
    """Each field of an encoded `descriptor` with its descriptor (None: a number the
    message lacks) and its path, a repeated field's with its index."""
    counts: dict[str, int] = {}
    for number, chunk in _fields(raw):
        field = descriptor.fields_by_number.get(number)
        if field is None:
            yield None, f"{prefix}#{number}", chunk
            continue
        name = prefix + field.name
        if field.is_repeated:
            index = counts.get(name, 0)
            counts[name] = index + 1
            name = f"{name}[{index}]"
        yield field, name, chunk


def _bad_string(raw: bytes, descriptor: Descriptor, prefix: str, depth: int) -> str | None:
    """The path of the first string field whose bytes are not UTF-8, or None."""
    if depth > MAX_DEPTH:
        return None
    for field, name, chunk in _named(raw, descriptor, prefix):
        if field is None or chunk is None:
            continue
        if field.type == FieldDescriptor.TYPE_STRING:
            try:
                chunk.decode()
            except UnicodeDecodeError:
                return name
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            found = _bad_string(chunk, field.message_type, name + ".", depth + 1)
            if found is not None:
                return found
    return None


def _unknown_field(raw: bytes, descriptor: Descriptor, prefix: str) -> tuple[str, str] | None:
    """The path of the first field number its message lacks, with that message's name;
    None when every field is known. Only a message protobuf decoded comes here, so its
    nesting is within protobuf's bound."""
    for field, name, chunk in _named(raw, descriptor, prefix):
        if field is None:
            return name, descriptor.full_name
        if chunk is not None and field.type == FieldDescriptor.TYPE_MESSAGE:
            found = _unknown_field(chunk, field.message_type, name + ".")
            if found is not None:
                return found
    return None
