"""What a prompt alone asks the answer to be, for the simulated provider.

Many frameworks ask for JSON in the prompt rather than through response_format:
Instructor's JSON and Markdown-JSON modes put a JSON schema in the system message and
ask for a ```json block, LiteLLM adds "Use this JSON schema: ..." to the last message,
BAML writes a schema of its own (`name: string,` lines, `"A" or "B"` for enums). A
classifier lists its labels ("one of: positive, negative", a list of `- label` or
`0: label` lines) and wants one back, or its index.

`Asked` reads the system and user text for these; the simulated provider then answers
a value valid against the schema (or of the example's shape), fenced when a code block
is asked for, or one of the listed labels (an index within the list when indices are
what is asked). Strings inside JSON stay labelled "(simulated)".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# A prompt's text read at most: the look is bounded whatever a caller sends.
MAX_TEXT = 65_536
# Places a JSON value may start at that are tried.
MAX_STARTS = 64
MAX_LABELS = 64
SCHEMA_KEYS = frozenset({"properties", "$defs", "definitions", "anyOf", "oneOf", "allOf",
                         "items", "enum", "$schema", "required"})  # fmt: skip
JSON_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
JSON_WORD = re.compile(r"\bjson\b", re.IGNORECASE)
# Asking for JSON with no schema, example or keys: "respond in JSON", "a JSON object".
ASKS_JSON = re.compile(
    r"\b(respond|answer|reply|return|output|format\w*|write|give)\b[^.\n]{0,40}\bjson\b"
    r"|\bjson (object|format|only|response)\b|```json",
    re.IGNORECASE,
)
FENCE = re.compile(r"```json|\bcode ?block\b|\bmarkdown\b", re.IGNORECASE)
CLASSIFY = re.compile(
    r"\b(classify|classif\w+|categori[sz]e|categor(y|ies)|labels?|which (one )?of)\b",
    re.IGNORECASE,
)
ONE_OF = re.compile(
    r"\bone of(?: the (?:following|labels|categories|classes|options))?\s*[:\-]?\s*"
    r"([^\n]+)",
    re.IGNORECASE,
)
ITEM_LINE = re.compile(r"^\s*(?:[-*\u2022]|(\d{1,3})\s*[.):])\s*(.+?)\s*$")
INDEX = re.compile(r"\b(index|number of the|integer)\b", re.IGNORECASE)
# BAML's output format: `name: string,` `tags: string[],` `kind: "A" or "B",`.
BAML_FIELD = re.compile(
    r"^\s*\"?([A-Za-z_]\w{0,63})\"?\s*:\s*((?:\"[^\"]*\"(?:\s+or\s+)?)+|[a-z]+(?:\[\])?)"
    r"(\s+or\s+null)?\s*,?\s*(?://.*)?$"
)
BAML_TYPES = {"string": {"type": "string"}, "int": {"type": "integer"},
              "float": {"type": "number"}, "bool": {"type": "boolean"},
              "null": {"type": "null"}}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Asked:
    """What the prompt asks the answer to be."""

    json: bool = False
    schema: dict[str, Any] | None = None
    fenced: bool = False
    labels: tuple[str, ...] = ()
    # Whether the labels are answered by their index (as listed: `0: positive`).
    indices: tuple[int, ...] = ()


def read(text: str) -> Asked:
    """What `text` (the system and user messages) asks for."""
    text = text[:MAX_TEXT]
    labels, indices = _labels(text)
    schema = _schema(text) if JSON_WORD.search(text) else None
    return Asked(
        json=schema is not None or bool(ASKS_JSON.search(text)),
        schema=schema,
        fenced=bool(FENCE.search(text)),
        labels=labels,
        indices=indices,
    )


def bounded(schema: dict[str, Any], indices: tuple[int, ...]) -> dict[str, Any]:
    """`schema` with each integer left unbounded kept to the listed indices, so a
    classifier's answer is one it listed."""
    if not indices:
        return schema
    low, high = min(indices), max(indices)

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items()}
        if out.get("type") == "integer" and not {"minimum", "maximum", "enum"} & out.keys():
            out.update(minimum=low, maximum=high)
        return out

    walked: dict[str, Any] = walk(schema)
    return walked


def fence(text: str) -> str:
    return f"```json\n{text}\n```"


def _schema(text: str) -> dict[str, Any] | None:
    """The first JSON schema or example object in `text`, as a schema; else BAML's."""
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"\{", text)][:MAX_STARTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and value:
            return value if _is_schema(value) else _shape(value)
    return _baml(text)


def _is_schema(value: dict[str, Any]) -> bool:
    kind = value.get("type")
    return bool(SCHEMA_KEYS & value.keys()) or (isinstance(kind, str) and kind in JSON_TYPES)


def _shape(example: Any) -> dict[str, Any]:
    """A schema every value of the example's shape meets."""
    if isinstance(example, dict):
        properties = {str(k): _shape(v) for k, v in example.items()}
        return {"type": "object", "properties": properties, "required": list(properties)}
    if isinstance(example, list):
        return {"type": "array", "items": _shape(example[0]) if example else {}}
    if isinstance(example, bool):
        return {"type": "boolean"}
    if isinstance(example, int):
        return {"type": "integer"}
    if isinstance(example, float):
        return {"type": "number"}
    return {"type": "string"} if isinstance(example, str) else {"type": "null"}


def _baml(text: str) -> dict[str, Any] | None:
    properties: dict[str, Any] = {}
    for line in text.splitlines():
        found = BAML_FIELD.match(line)
        if found is None:
            continue
        name, kind, nullable = found.groups()
        if kind.startswith('"'):
            schema: dict[str, Any] = {"enum": re.findall(r"\"([^\"]*)\"", kind)}
        elif kind.removesuffix("[]") in BAML_TYPES:
            schema = BAML_TYPES[kind.removesuffix("[]")]
            schema = {"type": "array", "items": schema} if kind.endswith("[]") else schema
        else:
            continue
        properties[name] = {"anyOf": [schema, {"type": "null"}]} if nullable else schema
    if not properties:
        return None
    return {"type": "object", "properties": properties, "required": list(properties)}


def _labels(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The labels a classifier lists, and their indices when it asks for an index."""
    if not CLASSIFY.search(text):
        return (), ()
    listed: list[tuple[int | None, str]] = []
    for line in text.splitlines():
        item = ITEM_LINE.match(line)
        if item is not None:
            number, label = item.groups()
            listed.append((int(number) if number else None, label.strip("`'\" ")))
    if not listed and (inline := ONE_OF.search(text)):
        parts = re.split(r"\s*,\s*|\s+or\s+|\s*\|\s*", inline.group(1).rstrip(" ."))
        listed = [(None, p.strip("`'\" ")) for p in parts]
    labels = tuple(label for _, label in listed if label)[:MAX_LABELS]
    numbers = tuple(n for n, _ in listed if n is not None)[:MAX_LABELS]
    if len(labels) < 2:
        return (), ()
    asks_index = bool(INDEX.search(text)) and len(numbers) == len(labels)
    return labels, numbers if asks_index else ()
