"""Decoding a gRPC request: a string field that is not UTF-8 named by its path, and,
for a service that refuses unknown fields, the first field number its message lacks,
wherever it sits and whatever fields come before it."""

from __future__ import annotations

from gateway.v1 import admin_service_pb2 as admin_pb
from google.protobuf import struct_pb2, wrappers_pb2

from server.base.errors import UnknownParameter
from server.grpc_api.decode import MAX_DEPTH, Undecodable, decoder


def varint(value: int) -> bytes:
    out = b""
    while value > 0x7F:
        out += bytes([value & 0x7F | 0x80])
        value >>= 7
    return out + bytes([value])


def field(number: int, wire: int, payload: bytes) -> bytes:
    """One encoded field; a length-delimited payload gets its length."""
    if wire == 2:
        payload = varint(len(payload)) + payload
    return varint(number << 3 | wire) + payload


def refused(raw: bytes, message_type: type) -> str:
    """The field an undecodable request names."""
    answer = decoder(message_type, refuse_unknown=True)(raw)
    assert isinstance(answer, Undecodable), answer
    return str(answer.error.param)


def test_an_unknown_number_after_fields_of_every_width_is_named() -> None:
    cases = {
        "varint": (wrappers_pb2.Int64Value, wrappers_pb2.Int64Value(value=300)),
        "fixed64": (wrappers_pb2.DoubleValue, wrappers_pb2.DoubleValue(value=2.5)),
        "fixed32": (wrappers_pb2.FloatValue, wrappers_pb2.FloatValue(value=1.5)),
        "bytes": (wrappers_pb2.StringValue, wrappers_pb2.StringValue(value="héllo")),
    }
    for why, (message_type, known) in cases.items():
        raw = known.SerializeToString() + field(9, 0, varint(1))
        answer = decoder(message_type, refuse_unknown=True)(raw)
        assert isinstance(answer, Undecodable), why
        assert isinstance(answer.error, UnknownParameter), why
        assert answer.error.message == (
            f"#9: is not a field of {message_type.DESCRIPTOR.full_name}"
        ), why


def test_unknown_numbers_inside_nested_repeated_and_map_fields() -> None:
    limits = admin_pb.Limits(models=["a", "b"]).SerializeToString() + field(40, 2, b"x")
    raw = field(1, 2, b"acme") + field(2, 2, limits)
    assert admin_pb.CreateOrganizationRequest.DESCRIPTOR.fields_by_number[2].name == "limits"
    assert refused(raw, admin_pb.CreateOrganizationRequest) == "limits.#40"
    # Struct: a map of Values, each possibly a list; the path goes through each.
    inner = struct_pb2.Value(string_value="s").SerializeToString() + field(12, 0, b"\x01")
    listed = struct_pb2.ListValue(values=[struct_pb2.Value(number_value=1)]).SerializeToString()
    listed += field(1, 2, inner)
    entry = field(1, 2, b"k") + field(2, 2, field(6, 2, listed))
    assert (
        refused(field(1, 2, entry), struct_pb2.Struct) == "fields[0].value.list_value.values[1].#12"
    )


def test_a_known_message_without_unknown_fields_decodes() -> None:
    known = admin_pb.CreateKeyRequest(name="k", kind="api", budget_usd=1.5, requests_per_minute=9)
    decoded = decoder(admin_pb.CreateKeyRequest, refuse_unknown=True)(known.SerializeToString())
    assert decoded == known
    # Without refuse_unknown, protobuf keeps an unknown field aside and nothing is said.
    raw = known.SerializeToString() + field(99, 0, varint(3))
    kept = decoder(admin_pb.CreateKeyRequest)(raw)
    assert isinstance(kept, admin_pb.CreateKeyRequest) and kept.name == "k"


def test_an_unknown_group_is_named_by_its_number() -> None:
    raw = wrappers_pb2.Int64Value(value=1).SerializeToString() + field(7, 3, b"") + field(7, 4, b"")
    assert refused(raw, wrappers_pb2.Int64Value) == "#7"


def test_a_string_that_is_not_utf8_is_named_after_other_fields() -> None:
    bad = b"\xff\xfe"
    # After a varint, a string field sent as a varint (protobuf sets it aside), an
    # unknown field and a repeated string: still found, indexed.
    raw = (field(10, 0, varint(5)) + field(1, 0, varint(5)) + field(99, 2, b"zz") + field(1, 2, b"name")
           + field(2, 2, field(3, 0, varint(7)) + field(5, 2, b"ok") + field(5, 2, bad)))  # fmt: skip
    assert refused(raw, admin_pb.CreateOrganizationRequest) == "limits.models[1]"


def nested(depth: int, leaf: bytes) -> bytes:
    """A Struct whose string value sits `depth` message levels down (each Struct level
    is three: the Struct, its map entry, the Value)."""
    raw = field(3, 2, leaf)  # Value.string_value
    level = 2
    while level < depth:
        entry = field(1, 2, b"k") + field(2, 2, raw)
        raw = field(5, 2, field(1, 2, entry))  # Value.struct_value.fields
        level += 3
    return field(1, 2, field(1, 2, b"k") + field(2, 2, raw))


def test_a_bad_string_is_looked_for_down_to_the_bound_only() -> None:
    deepest = MAX_DEPTH - MAX_DEPTH % 3 + 2  # a Value's level at or below the bound
    if deepest > MAX_DEPTH:
        deepest -= 3
    named = decoder(struct_pb2.Struct)(nested(deepest, b"\xff"))
    assert isinstance(named, Undecodable) and named.error.param is not None
    assert named.error.param.endswith("string_value")
    beyond = decoder(struct_pb2.Struct)(nested(deepest + 3, b"\xff"))
    assert isinstance(beyond, Undecodable) and beyond.error.param is None
    assert beyond.error.message == "the request is not a valid Struct"
