"""JSON values into and out of google.protobuf.Struct and Value.

The contract carries every JSON Schema and tool input as a Struct, so an agent's
request converts dozens of them each way; json_format does it generically, at some
200 us a schema in and 100 out. These read and write the fields directly.

Out of a Struct, keys come sorted: a Struct is a map whose own order changes from one
process to the next, and with it the bytes sent upstream (a tool list that differs by
worker misses the upstream's prompt cache from its first byte). A JSON Schema's
`properties` follow its `required` list first, the order schema generators write
both in and the order a model fills them in. Whole numbers come back as integers (a
Struct keeps every number as a double, and `"maxItems": 2.0` is not what was sent).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from google.protobuf import struct_pb2

from server.base.errors import InvalidArgument

# Objects and arrays nested in one value: protobuf's own bound of 100 messages deep
# (a Struct and a Value per level), which a gRPC peer would refuse to parse.
MAX_DEPTH = 50
# Whole doubles below this are integers exactly.
_EXACT = 2**53


class TooDeep(ValueError):
    pass


def fill_struct(target: struct_pb2.Struct, value: dict[str, Any]) -> None:
    """Sets `target` to the JSON object `value`. Raises TooDeep past MAX_DEPTH,
    UnicodeError for a string no UTF-8 holds (an unpaired surrogate) and TypeError for
    what is not JSON. A number beyond a double becomes infinite, as `1e309` does: read
    back, it is refused as not finite."""
    _object(target, value, 1)


def fill_value(target: struct_pb2.Value, value: Any) -> None:
    """Sets `target` to the JSON value `value` (errors as fill_struct)."""
    _fill(target, value, 0)


def _object(target: struct_pb2.Struct, value: dict[str, Any], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TooDeep(f"nests deeper than {MAX_DEPTH} levels")
    fields = target.fields
    for key, item in value.items():
        _fill(fields[key], item, depth)


def _fill(target: struct_pb2.Value, value: Any, depth: int) -> None:
    if isinstance(value, str):
        target.string_value = value
    elif value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif value is True or value is False:
        target.bool_value = value
    elif isinstance(value, float):
        target.number_value = value
    elif isinstance(value, int):
        try:
            target.number_value = value
        except OverflowError:
            target.number_value = math.inf if value > 0 else -math.inf
    elif isinstance(value, dict):
        struct = target.struct_value
        struct.SetInParent()  # an empty object is still an object
        _object(struct, value, depth + 1)
    elif isinstance(value, list):
        if depth + 1 > MAX_DEPTH:
            raise TooDeep(f"nests deeper than {MAX_DEPTH} levels")
        values = target.list_value
        values.SetInParent()
        add = values.values.add
        for item in value:
            _fill(add(), item, depth + 1)
    else:
        raise TypeError(f"a {type(value).__name__} is not a JSON value")


def to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    """The Struct as a JSON object. Raises ValueError for a number that is not finite
    (a gRPC caller can send one; JSON cannot hold it)."""
    fields = struct.fields
    return _schema_order({key: to_python(fields[key]) for key in sorted(fields)})


def read(struct: struct_pb2.Struct, where: str) -> dict[str, Any]:
    """to_dict for a caller's Struct: a number JSON cannot hold is a 400 naming `where`."""
    try:
        return to_dict(struct)
    except ValueError:
        raise not_finite(where) from None


def not_finite(where: str) -> InvalidArgument:
    """The refusal of a Struct holding Infinity or NaN: gRPC can carry them, JSON cannot."""
    return InvalidArgument.for_field(where, "holds a number that is not finite")


def to_python(value: struct_pb2.Value) -> Any:
    """The Value as JSON (None for null or unset); errors as to_dict."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "struct_value":
        return to_dict(value.struct_value)
    if kind == "number_value":
        number = value.number_value
        if number.is_integer():
            return int(number) if abs(number) < _EXACT else number
        if not math.isfinite(number):
            raise ValueError("a number that is not finite")
        return number
    if kind == "bool_value":
        return value.bool_value
    if kind == "list_value":
        return [to_python(item) for item in value.list_value.values]
    return None


class Kept:
    """Structs read as dicts, remembered by their bytes: an agent sends the same tools
    with every turn (and a streamed response echoes them three times), and reading a
    schema costs some fifteen times what serializing its Struct for the lookup does.
    What is kept is shared, so nothing may modify it (nothing does: requests and
    responses are read, never changed). A `check` runs on what is read before it is
    kept, and what fails it is not kept; one Kept serves one kind of check. Bounded in
    count and in the size of what it keeps."""

    COUNT = 256
    MAX_BYTES = 32 * 1024

    def __init__(self) -> None:
        self._kept: OrderedDict[bytes, dict[str, Any]] = OrderedDict()

    def read(
        self, value: struct_pb2.Struct, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """As to_dict, errors included."""
        key = value.SerializeToString()
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        read = to_dict(value)
        if check is not None:
            check(read)
        if len(key) <= self.MAX_BYTES:
            self._kept[key] = read
            if len(self._kept) > self.COUNT:
                self._kept.popitem(last=False)
        return read


def tidy(value: Any) -> Any:
    """A JSON value (json_format's reading of a message holding Structs) as to_dict
    writes one: keys in the same order, whole numbers as integers."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT:
        return int(value)
    if isinstance(value, dict):
        return _schema_order({key: tidy(value[key]) for key in sorted(value)})
    if isinstance(value, list):
        return [tidy(item) for item in value]
    return value


def _schema_order(out: dict[str, Any]) -> dict[str, Any]:
    properties, required = out.get("properties"), out.get("required")
    if isinstance(properties, dict) and isinstance(required, list):
        listed = {k: properties[k] for k in required if isinstance(k, str) and k in properties}
        out["properties"] = listed | properties
    return out
