"""A caller's JSON Schema (tool parameters, a structured-output format), checked before
anything walks it: bounded in depth and size, and every keyword the gateway reads has
the type JSON Schema gives it. A bad schema is a 400 naming the keyword's path, never a
500 from deep inside a provider."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from google.protobuf import struct_pb2

from server.base import structs
from server.base.errors import InvalidArgument

# Far beyond any real schema (pydantic's deepest nesting is a few dozen levels), and
# small enough that every later walk of an accepted schema is cheap.
MAX_DEPTH = 64
MAX_NODES = 20_000
COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
SCHEMA_OR_BOOL = ("additionalProperties", "items", "not", "contains", "if", "then", "else")
TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})


def read(value: struct_pb2.Struct, where: str) -> dict[str, Any]:
    """The checked JSON Schema a Struct carries, as a dict (kept: see structs.Kept)."""
    return read_kept(_schemas, value, where, lambda schema: check(schema, where))


def read_kept(
    kept: structs.Kept, value: struct_pb2.Struct, where: str,
    check: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:  # fmt: skip
    """What `kept` reads of `value`, checked; a number JSON cannot hold (Infinity or
    NaN, which gRPC can carry) is a 400 naming `where`."""
    try:
        return kept.read(value, check)
    except ValueError:
        raise structs.not_finite(where) from None


def check(schema: Any, where: str) -> None:
    """InvalidArgument naming `where` plus the keyword's path when `schema` is not a
    JSON Schema the gateway can use."""
    _Checker(where).schema(schema, "", 0)


class _Checker:
    def __init__(self, where: str) -> None:
        self.where = where
        self.nodes = 0

    def fail(self, path: str, why: str) -> InvalidArgument:
        return InvalidArgument.for_field(self.where + path, why)

    def schema(self, node: Any, path: str, depth: int) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail("", f"is too large (more than {MAX_NODES} schemas)")
        if depth > MAX_DEPTH:
            raise self.fail(path, f"nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, bool):
            return  # `true` and `false` are schemas too
        if not isinstance(node, dict):
            raise self.fail(path, "must be a JSON Schema object")
        self.keywords(node, path)
        for key in SCHEMA_LISTS:
            if key in node:
                items = node[key]
                if not isinstance(items, list):
                    raise self.fail(f"{path}.{key}", "must be an array of schemas")
                for i, item in enumerate(items):
                    self.schema(item, f"{path}.{key}[{i}]", depth + 1)
        for key in SCHEMA_MAPS:
            if key in node:
                entries = node[key]
                if not isinstance(entries, dict):
                    raise self.fail(f"{path}.{key}", "must be an object of schemas")
                for name, item in entries.items():
                    self.schema(item, f"{path}.{key}.{name}", depth + 1)
        for key in SCHEMA_OR_BOOL:
            if key in node:
                item = node[key]
                if key == "items" and isinstance(item, list):  # the older tuple form
                    for i, sub in enumerate(item):
                        self.schema(sub, f"{path}.items[{i}]", depth + 1)
                else:
                    self.schema(item, f"{path}.{key}", depth + 1)

    def keywords(self, node: dict[str, Any], path: str) -> None:
        kind = node.get("type")
        if kind is not None:
            kinds = kind if isinstance(kind, list) else [kind]
            if not kinds or not all(isinstance(k, str) and k in TYPES for k in kinds):
                raise self.fail(f"{path}.type", f"must be one of {', '.join(sorted(TYPES))}")
        for key in COUNTS:
            value = node.get(key)
            if value is not None and not _count(value):
                raise self.fail(f"{path}.{key}", "must be a non-negative integer")
        for key in NUMBERS:
            value = node.get(key)
            if value is not None and not _number(value):
                raise self.fail(f"{path}.{key}", "must be a finite number")
        required = node.get("required")
        if required is not None and not (
            isinstance(required, list) and all(isinstance(r, str) for r in required)
        ):
            raise self.fail(f"{path}.required", "must be an array of property names")
        enum = node.get("enum")
        if enum is not None and not isinstance(enum, list):
            raise self.fail(f"{path}.enum", "must be an array")
        ref = node.get("$ref")
        if ref is not None and not isinstance(ref, str):
            raise self.fail(f"{path}.$ref", "must be a string")
        if isinstance(node.get("format"), bool | int | float | list | dict):
            raise self.fail(f"{path}.format", "must be a string")


def _count(value: Any) -> bool:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_schemas = structs.Kept()
