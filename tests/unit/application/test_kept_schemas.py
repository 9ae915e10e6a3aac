"""Schemas read from Structs are checked once and kept by their bytes: the same schema
again is the same object, unread; what fails its check is never kept; the store is
bounded in count and in the size of what it keeps."""

from __future__ import annotations

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


def counting() -> tuple[schemas.Kept, list[str]]:
    checked: list[str] = []

    def check(schema: dict[str, Any], where: str) -> None:
        checked.append(where)
        schemas.check(schema, where)

    return schemas.Kept(check), checked


def test_the_same_schema_again_is_the_kept_one_unread() -> None:
    kept, checked = counting()
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    first = kept.read(struct_of(schema), "tools[0]")
    again = kept.read(struct_of(schema), "tools[3]")
    assert first == schema and again is first and checked == ["tools[0]"]
    other = kept.read(struct_of({**schema, "required": ["a"]}), "tools[1]")
    assert other is not first and checked == ["tools[0]", "tools[1]"]


def test_a_schema_that_fails_its_check_is_refused_every_time() -> None:
    kept, checked = counting()
    bad = struct_of({"type": "string", "minLength": "abc"})
    for where in ("tools[0].parameters", "tools[1].parameters"):
        with pytest.raises(InvalidArgument) as refused:
            kept.read(bad, where)
        assert refused.value.metadata["field"] == f"{where}.minLength"
    assert len(checked) == 2


def test_the_store_is_bounded_in_count_and_size() -> None:
    kept, checked = counting()
    first = struct_of({"title": "0"})
    kept.read(first, "s")
    for i in range(1, schemas.KEPT + 1):
        kept.read(struct_of({"title": str(i)}), "s")
    kept.read(first, "s")  # pushed out by the newer ones: read again
    assert checked.count("s") == schemas.KEPT + 2
    large = struct_of({"description": "x" * schemas.KEPT_BYTES})
    kept.read(large, "large")
    kept.read(large, "large")
    assert checked.count("large") == 2
