"""A deterministic JSON value valid against a JSON Schema, for the simulated provider.

Covers what tool definitions and structured-output schemas use: `type` (one or a list),
`enum`, `const`, `properties` with `required` (every property is filled, which also
satisfies strict schemas), `items` with `minItems`/`maxItems`, `anyOf`/`oneOf` (the
first branch that is not null), `allOf` (merged), `$ref` into `$defs`/`definitions`
(pydantic's nested models), numeric bounds (a `number` is whole where they allow),
string lengths and common `format`s.
`pattern` is not honoured. The same schema and seed always give the same value.

The work and the answer are bounded whatever the schema asks (a `$ref` cycle,
`minLength: 200000000`, `minItems: 10**9`): at most MAX_NODES values, MAX_CHARS
characters of strings in all and arrays of MAX_ITEMS items; past that the value is cut
short rather than valid. Real schemas (a pydantic model's) stay far inside.
"""

from __future__ import annotations

import math
import random
from typing import Any

MAX_DEPTH = 8
MAX_NODES = 256
MAX_CHARS = 4_096
MAX_ITEMS = 16
# String formats a validator may check, with a fixed valid example each.
FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "simulated@example.com",
    "uri": "https://example.com/simulated",
    "url": "https://example.com/simulated",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
    "hostname": "example.com",
}


def instance(schema: dict[str, Any] | None, seed: int = 0, words: tuple[str, ...] = ("x",)) -> Any:
    """A value valid against `schema` (any object when it is None or empty)."""
    root = schema or {"type": "object"}
    return _Maker(root, random.Random(seed), words).make(root, 0)


class _Maker:
    def __init__(self, root: dict[str, Any], rng: random.Random, words: tuple[str, ...]) -> None:
        self.root = root
        self.rng = rng
        self.words = words
        self.nodes = 0
        self.chars_left = MAX_CHARS

    def make(self, schema: Any, depth: int) -> Any:
        self.nodes += 1
        if not isinstance(schema, dict) or depth > MAX_DEPTH or self.nodes > MAX_NODES:
            return None
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][self.rng.randrange(len(schema["enum"]))]
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                return self.make(self.first_not_null(schema[key]), depth + 1)
        if schema.get("allOf"):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                part = self.resolve(part)
                merged.update(
                    {k: v for k, v in part.items() if k not in ("properties", "required")}
                )
                merged.setdefault("properties", {}).update(part.get("properties", {}))
                merged.setdefault("required", []).extend(part.get("required", []))
            return self.make(merged, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = (
                "object" if "properties" in schema else "array" if "items" in schema else "string"
            )
        return getattr(self, f"make_{kind}", self.make_null)(schema, depth)

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        for _ in range(MAX_DEPTH):
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#"):
                return schema
            target: Any = self.root
            for part in ref[2:].split("/") if len(ref) > 2 else ():
                target = target.get(part, {}) if isinstance(target, dict) else {}
            if not isinstance(target, dict):
                return {}
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings} if siblings else target
        return schema

    def first_not_null(self, branches: Any) -> Any:
        first = None
        for branch in branches if isinstance(branches, list) else ():
            if not isinstance(branch, dict):
                continue
            branch = self.resolve(branch)
            if branch.get("type") != "null":
                return branch
            first = first or branch
        return first

    @property
    def spent(self) -> bool:
        return self.nodes > MAX_NODES

    def make_object(self, schema: dict[str, Any], depth: int) -> Any:
        out: dict[str, Any] = {}
        for name, sub in (schema.get("properties") or {}).items():
            if self.spent:
                return out
            out[name] = self.make(sub, depth + 1)
        for name in schema.get("required") or ():
            if self.spent:
                return out
            out.setdefault(name, self.make({}, depth + 1))
        if not out and schema.get("additionalProperties") not in (False, None):
            extra = schema["additionalProperties"]
            if isinstance(extra, dict):
                out["key"] = self.make(extra, depth + 1)
        return out

    def make_array(self, schema: dict[str, Any], depth: int) -> Any:
        low = min(_whole(schema.get("minItems"), 1), MAX_ITEMS)
        high = _whole(schema.get("maxItems"), max(low, 2))
        count = max(low, min(high, 2))
        items = schema.get("items") or {}
        if isinstance(items, list):  # a tuple schema
            return [self.make(i, depth + 1) for i in items]
        return [self.make(items, depth + 1) for _ in range(count)]

    def make_string(self, schema: dict[str, Any], depth: int) -> Any:
        if schema.get("format") in FORMATS:
            return FORMATS[schema["format"]]
        text = "(simulated) " + " ".join(self.rng.choice(self.words) for _ in range(3))
        low = min(_whole(schema.get("minLength"), 0), self.chars_left)
        if len(text) < low:
            text += "x" * (low - len(text))
        if "maxLength" in schema:
            text = text[: _whole(schema["maxLength"], len(text))]
        text = text[: max(self.chars_left, 0)]
        self.chars_left -= len(text)
        return text

    def make_integer(self, schema: dict[str, Any], depth: int) -> Any:
        low, high = _bounds(schema, integer=True)
        return self.rng.randint(low, high)

    def make_number(self, schema: dict[str, Any], depth: int) -> Any:
        """A whole number when the bounds hold one, as models write counts and
        milliseconds (clients often read a `number` into an integer type); else a
        fraction within them."""
        low, high = _bounds(schema, integer=False)
        if math.ceil(low) <= math.floor(high):
            return self.rng.randint(math.ceil(low), math.floor(high))
        return round(self.rng.uniform(low, high), 2) if low < high else low

    def make_boolean(self, schema: dict[str, Any], depth: int) -> Any:
        return self.rng.random() < 0.5

    def make_null(self, schema: dict[str, Any], depth: int) -> Any:
        return None


def _whole(value: Any, default: int) -> int:
    """A non-negative count from a schema, `default` when it is not one."""
    if isinstance(value, float) and math.isfinite(value):
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else default


def _finite(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def _bounds(schema: dict[str, Any], integer: bool) -> tuple[Any, Any]:
    step = 1 if integer else 0.01
    low = _finite(schema.get("minimum"))
    if (exclusive := _finite(schema.get("exclusiveMinimum"))) is not None:
        low = exclusive + step
    high = _finite(schema.get("maximum"))
    if (exclusive := _finite(schema.get("exclusiveMaximum"))) is not None:
        high = exclusive - step
    low = 0 if low is None else low
    high = low + 100 if high is None else high
    if integer:
        return math.ceil(low), max(math.ceil(low), math.floor(high))
    return float(low), float(max(low, high))
