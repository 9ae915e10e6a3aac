"""JSON values into and out of Struct and Value: the same messages json_format makes,
read back in one order whatever the map's, every JSON type, and bounded."""

from __future__ import annotations

import math
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2

from server.base import structs
from server.base.errors import InvalidArgument

EVERY_KIND: dict[str, Any] = {
    "text": "héllo", "empty_text": "", "none": None, "yes": True, "no": False,
    "int": 3, "negative": -7, "float": 2.5, "big": 2**60, "object": {"a": [1, {"b": None}]},
    "empty_object": {}, "empty_list": [], "list": [1, "two", [3.5], {}, [], None, False],
}  # fmt: skip


def filled(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    structs.fill_struct(struct, value)
    return struct


def test_the_struct_is_the_one_json_format_makes_and_reads_back_the_same() -> None:
    expected = json_format.ParseDict(EVERY_KIND, struct_pb2.Struct())
    struct = filled(EVERY_KIND)
    assert struct == expected
    back = structs.to_dict(struct)
    assert back == {**EVERY_KIND, "big": float(2**60)}  # past 2**53 a double is no integer
    assert isinstance(back["int"], int) and isinstance(back["float"], float)
    value = struct_pb2.Value()
    structs.fill_value(value, ["a", 1])
    assert structs.to_python(value) == ["a", 1]
    assert structs.to_python(struct_pb2.Value()) is None  # no kind set reads as null


def test_keys_come_out_sorted_and_a_schemas_properties_in_required_order() -> None:
    schema = {
        "type": "object",
        "properties": {"zeta": {"type": "string"}, "mid": {}, "alpha": {"type": "number"}},
        "required": ["zeta", "alpha", "missing", 3],
        "additionalProperties": False,
    }
    back = structs.to_dict(filled(schema))
    assert list(back) == ["additionalProperties", "properties", "required", "type"]
    assert list(back["properties"]) == ["zeta", "alpha", "mid"]
    assert structs.tidy(json_format.MessageToDict(filled(schema))) == back
    assert list(structs.tidy({"b": 1.0, "a": [2.0, 2.5]})) == ["a", "b"]
    assert structs.tidy({"b": 1.0, "a": [2.0, 2.5]}) == {"a": [2, 2.5], "b": 1}
    # Past 2**53 a double is no exact integer: it stays a double, as to_python keeps it.
    assert isinstance(structs.tidy(float(2**53)), float)
    assert isinstance(structs.tidy(float(2**53 - 1)), int)


def test_nesting_is_bounded_where_protobuf_bounds_it() -> None:
    def nested(levels: int, inner: Any) -> Any:
        value = inner
        for _ in range(levels - 1):
            value = {"a": value}
        return value

    for at_the_bound in ({}, []):  # objects and arrays count alike
        assert structs.to_dict(filled(nested(structs.MAX_DEPTH, at_the_bound)))
        with pytest.raises(structs.TooDeep, match="deeper than 50 levels"):
            filled(nested(structs.MAX_DEPTH + 1, at_the_bound))
    lists: Any = []
    for _ in range(structs.MAX_DEPTH - 1):
        lists = [lists]
    value = struct_pb2.Value()
    structs.fill_value(value, lists)  # exactly the bound
    assert structs.to_python(value) == lists
    with pytest.raises(structs.TooDeep, match="deeper than 50 levels"):
        structs.fill_value(struct_pb2.Value(), [lists])


def test_what_json_cannot_hold_is_refused() -> None:
    with pytest.raises(UnicodeError):
        filled({"a": "\ud800"})
    with pytest.raises(UnicodeError):
        filled({"\ud800": 1})
    with pytest.raises(TypeError, match="a object is not a JSON value"):
        filled({"a": object()})
    # A number beyond a double is infinite, as `1e309` parses; reading it back refuses it.
    huge = filled({"a": 10**400, "b": -(10**400)})
    assert huge.fields["a"].number_value == math.inf
    assert huge.fields["b"].number_value == -math.inf
    with pytest.raises(ValueError, match="^a number that is not finite$"):
        structs.to_dict(huge)
    nan = struct_pb2.Struct()
    nan.fields["a"].number_value = math.nan
    with pytest.raises(ValueError, match="^a number that is not finite$"):
        structs.to_dict(nan)
    # A caller's Struct: a 400 naming where it was.
    with pytest.raises(InvalidArgument) as refused:
        structs.read(nan, "tools[2].input")
    assert refused.value.metadata == {"field": "tools[2].input"}
    assert refused.value.message == "tools[2].input: holds a number that is not finite"
