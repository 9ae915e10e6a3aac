"""Structs read as dicts are kept by their bytes, a check run once: the same Struct
again is the same object, unread; what fails its check is never kept; the store is
bounded in count and in the size of what it keeps. Schemas read through it are
checked as any schema is, and a number JSON cannot hold is a 400 naming the field."""

from __future__ import annotations

import math
from typing import Any

import pytest
from google.protobuf import struct_pb2

from server.application.pipeline import schemas
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
    titled = [struct_of({"title": str(i)}) for i in range(structs.Kept.COUNT + 1)]
    for value in titled[: structs.Kept.COUNT]:
        counting.read(value, "first")
    counting.read(titled[0], "again")  # COUNT kept: the first still is
    counting.read(titled[-1], "first")  # one more pushes out the least recently read
    counting.read(titled[1], "again")
    assert counting.checked.count("first") == structs.Kept.COUNT + 1
    assert counting.checked == [*["first"] * (structs.Kept.COUNT + 1), "again"]

    def of_size(size: int) -> struct_pb2.Struct:
        # A string padded to `size` bytes serialized (the lengths' own bytes vary).
        overhead = len(struct_of({"d": "x" * size}).SerializeToString()) - size
        return struct_of({"d": "x" * (size - overhead)})

    assert len(of_size(structs.Kept.MAX_BYTES).SerializeToString()) == structs.Kept.MAX_BYTES
    for size, checks in ((structs.Kept.MAX_BYTES, 1), (structs.Kept.MAX_BYTES + 1, 2)):
        for _ in range(2):
            counting.read(of_size(size), f"size {size}")
        assert counting.checked.count(f"size {size}") == checks
