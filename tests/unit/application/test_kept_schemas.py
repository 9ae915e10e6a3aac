"""Structs read as dicts are kept by their bytes, a check run once: the same Struct
again is the same object, unread; what fails its check is never kept; the store is
bounded in count and in the size of what it keeps. Schemas read through it are
checked as any schema is, and a number JSON cannot hold is a 400 naming the field."""

from __future__ import annotations

import math
from typing import Any

import pytest
from google.protobuf import struct_pb2

from server.application import schemas
from server.base import structs
from server.base.errors import InvalidArgument


def struct_of(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    structs.fill_struct(struct, value)
    return struct


class Counting:
    def __init__(self) -> None:
        self.kept = structs.Kept()
        self.checked: list[str] = []

    def read(self, value: struct_pb2.Struct, where: str) -> dict[str, Any]:
        def check(read: dict[str, Any]) -> None:
            self.checked.append(where)
            schemas.check(read, where)

        return schemas.read_kept(self.kept, value, where, check)


def test_the_same_struct_again_is_the_kept_object_unread() -> None:
    counting = Counting()
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    first = counting.read(struct_of(schema), "tools[0]")
    again = counting.read(struct_of(schema), "tools[3]")
    assert first == schema and again is first and counting.checked == ["tools[0]"]
    other = counting.read(struct_of({**schema, "required": ["a"]}), "tools[1]")
    assert other is not first and counting.checked == ["tools[0]", "tools[1]"]


def test_what_fails_its_check_is_refused_every_time() -> None:
    counting = Counting()
    bad = struct_of({"type": "string", "minLength": "abc"})
    for where in ("tools[0].parameters", "tools[1].parameters"):
        with pytest.raises(InvalidArgument) as refused:
            counting.read(bad, where)
        assert refused.value.metadata["field"] == f"{where}.minLength"
    assert len(counting.checked) == 2
    not_finite = struct_pb2.Struct()
    not_finite.fields["maximum"].number_value = math.inf
    with pytest.raises(InvalidArgument) as refused:
        schemas.read(not_finite, "response_format.json_schema.schema")
    assert refused.value.metadata["field"] == "response_format.json_schema.schema"
    assert "not finite" in refused.value.message


def test_the_store_is_bounded_in_count_and_size() -> None:
    counting = Counting()
    first = struct_of({"title": "0"})
    counting.read(first, "s")
    for i in range(1, structs.Kept.COUNT + 1):
        counting.read(struct_of({"title": str(i)}), "s")
    counting.read(first, "s")  # pushed out by the newer ones: read again
    assert counting.checked.count("s") == structs.Kept.COUNT + 2
    large = struct_of({"description": "x" * structs.Kept.MAX_BYTES})
    counting.read(large, "large")
    counting.read(large, "large")
    assert counting.checked.count("large") == 2
