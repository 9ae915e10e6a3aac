"""JSON <-> proto, derived from the message descriptors (no second schema).

Writing (`to_dict`): snake_case field names (lowerCamelCase in a file with the
`camel_case_json` option, as Google's APIs write JSON); int64 as JSON numbers (OpenAI clients
parse `created` and token counts as integers); fields without presence (plain proto3
scalars, repeated fields) always written, so `index: 0` appears; fields with presence
(`optional` scalars, messages) written only when set, so `finish_reason` and `ttft_ms`
are absent where unset. Well-known types (Struct...) take their canonical JSON form.
Field options (gateway/v1/json_mapping.proto) cover dialect shapes proto3 JSON cannot
express: `omit_empty` leaves an empty repeated field out (`tool_calls`),
`null_when_empty` writes an empty string as null (a tool-call reply's `content`),
`json_key` lets a field share another field's key (`content` holds a string or an
array of parts; `tool_choice` a string or an object): the set one is written there.
`null_when_unset` writes an unset field with presence as null (a response's `error`),
`inline` writes a set message field's keys into the enclosing object (the member of a
oneof that gives an output item the keys of its kind), and `other_keys` marks a Struct
that is written so too and read from the keys no field names (an object with an open
set of keys).

Reading (`from_dict`): `null` means unset, and a value of the wrong type is
InvalidArgument naming the field (`messages[0].role`). Under a `json_key` key, an array
goes to the repeated field that shares it, an object to the message field that shares
it, anything else (or what no sharer takes) to the plain field. Unknown keys go to the
`other_keys` field when the message has one; else they are ignored by default, and
with `strict=True` (the OpenAI generation paths, as OpenAI itself does) a non-null
unknown key is InvalidArgument naming it.

Each message type's plan is computed once and cached: this runs for every SSE chunk.
"""

from __future__ import annotations

import base64
import keyword
import math
from collections.abc import Callable
from typing import Any, cast

from gateway.v1 import json_mapping_pb2
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from server.base import structs
from server.base.errors import InvalidArgument, UnknownParameter

_T = FieldDescriptor
_INTS = {
    _T.TYPE_INT32: (-(2**31), 2**31 - 1),
    _T.TYPE_SINT32: (-(2**31), 2**31 - 1),
    _T.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    _T.TYPE_UINT32: (0, 2**32 - 1),
    _T.TYPE_FIXED32: (0, 2**32 - 1),
    _T.TYPE_INT64: (-(2**63), 2**63 - 1),
    _T.TYPE_SINT64: (-(2**63), 2**63 - 1),
    _T.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    _T.TYPE_UINT64: (0, 2**64 - 1),
    _T.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOATS = {_T.TYPE_DOUBLE, _T.TYPE_FLOAT}

# How a field is written.
_ALWAYS, _IF_SET, _REPEATED, _MAP, _IF_ANY, _OR_NULL, _SET_OR_NULL, _INLINE = range(8)

Convert = Callable[[Any], Any]
# (field name, JSON key, how, converter)
_Plan = tuple[tuple[str, str, int, Convert | None], ...]
_plans: dict[Descriptor, _Plan] = {}
# Per message type: its fields by JSON key, the fields that borrow each key, and the
# field that takes unknown keys (other_keys), if any.
_Reader = tuple[
    dict[str, FieldDescriptor], dict[str, list[FieldDescriptor]], FieldDescriptor | None
]
_readers: dict[Descriptor, _Reader] = {}
# Whether a field is a map, per field (asked for every value read).
_maps: dict[FieldDescriptor, bool] = {}


def _is_well_known(descriptor: Descriptor) -> bool:
    return descriptor.full_name.startswith("google.protobuf.")


def _json_key(field: FieldDescriptor) -> str:
    """The key another field lends this one (json_key option), or ''."""
    options = field.GetOptions()
    if not options.HasExtension(json_mapping_pb2.json_key):
        return ""
    return str(options.Extensions[json_mapping_pb2.json_key])


def _option(field: FieldDescriptor, extension: Any) -> bool:
    options = field.GetOptions()
    return options.HasExtension(extension) and bool(options.Extensions[extension])


def _omit_empty(field: FieldDescriptor) -> bool:
    return _option(field, json_mapping_pb2.omit_empty)


def _is_map(field: FieldDescriptor) -> bool:
    known = _maps.get(field)
    if known is None:
        known = _maps[field] = bool(
            field.type == _T.TYPE_MESSAGE
            and field.is_repeated
            and field.message_type.GetOptions().map_entry
        )
    return known


# -- proto -> dict ----------------------------------------------------------------------


_compiled: dict[Descriptor, Callable[[Message], dict[str, Any]]] = {}


def to_dict(message: Message) -> dict[str, Any]:
    """Maps a message to a JSON-ready dict (see the module docstring for the rules)."""
    convert = _compiled.get(message.DESCRIPTOR)
    if convert is None:
        convert = _compiled[message.DESCRIPTOR] = _compile(message.DESCRIPTOR)
    return convert(message)


def _compile(descriptor: Descriptor) -> Callable[[Message], dict[str, Any]]:
    """The message type's plan as one straight-line Python function (no loop over the
    fields, no branch per field kind): this runs for every response and SSE chunk."""
    plan = _plans.get(descriptor)
    if plan is None:
        plan = _plans[descriptor] = _plan(descriptor)
    env: dict[str, Any] = {}
    head: list[str] = []  # fields written before the first conditional one: one literal
    body: list[str] = []
    # Inline members of one oneof: one WhichOneof, not a HasField per member.
    members: dict[str, dict[str, int]] = {}
    for i, (name, _, how, _) in enumerate(plan):
        oneof = descriptor.fields_by_name[name].containing_oneof
        if how == _INLINE and oneof is not None:
            members.setdefault(oneof.name, {})[name] = i
    for i, (name, key, how, convert) in enumerate(plan):
        env[f"c{i}"] = convert
        get = f"getattr(m, {name!r})" if keyword.iskeyword(name) else f"m.{name}"

        def conv(value: str, i: int = i, convert: Convert | None = convert) -> str:
            return value if convert is None else f"c{i}({value})"

        # Repeated fields are read by slice, not iteration: upb containers have no
        # __iter__ (Python would index them until IndexError).
        items = f"{get}[:]" if convert is None else f"[c{i}(v) for v in {get}[:]]"
        if how == _ALWAYS:
            value = conv(get)
        elif how == _REPEATED:
            value = items
        elif how == _MAP:
            value = f"{{str(k): {conv('v')} for k, v in {get}.items()}}"
        elif how == _IF_SET:
            body += [f"    if m.HasField({name!r}):", f"        out[{key!r}] = {conv(get)}"]
            continue
        elif how == _OR_NULL:
            body += [f"    v = {get}", f"    out[{key!r}] = {conv('v')} if v else None"]
            continue
        elif how == _SET_OR_NULL:
            body += [f"    out[{key!r}] = {conv(get)} if m.HasField({name!r}) else None"]
            continue
        elif how == _INLINE:
            oneof = descriptor.fields_by_name[name].containing_oneof
            if oneof is None:
                body += [f"    if m.HasField({name!r}):", f"        out.update({conv(get)})"]
            elif min(members[oneof.name].values()) == i:
                env[f"o{i}"] = {n: env_convert(plan[j][3]) for n, j in members[oneof.name].items()}
                body += [
                    f"    k = m.WhichOneof({oneof.name!r})",
                    "    if k is not None:",
                    f"        out.update(o{i}[k](getattr(m, k)))",
                ]
            continue
        else:  # _IF_ANY
            body += [f"    if len({get}):", f"        out[{key!r}] = {items}"]
            continue
        if body:
            body.append(f"    out[{key!r}] = {value}")
        else:
            head.append(f"{key!r}: {value}")
    source = "\n".join(
        ["def convert(m):", f"    out = {{{', '.join(head)}}}", *body, "    return out"]
    )
    exec(compile(source, f"<to_dict {descriptor.full_name}>", "exec"), env)
    return cast(Callable[[Message], dict[str, Any]], env["convert"])


def env_convert(convert: Convert | None) -> Convert:
    return convert if convert is not None else _same


def _same(value: Any) -> Any:
    return value


def _camel_case(descriptor: Descriptor) -> bool:
    options = descriptor.file.GetOptions()
    return options.HasExtension(json_mapping_pb2.camel_case_json) and bool(
        options.Extensions[json_mapping_pb2.camel_case_json]
    )


def _plan(descriptor: Descriptor) -> _Plan:
    plan = []
    camel = _camel_case(descriptor)
    # Fields sharing a key come after the plain field, so when set they win it.
    ordered = sorted(descriptor.fields, key=lambda f: bool(_json_key(f)))
    for field in ordered:
        key = _json_key(field) or (field.json_name if camel else field.name)
        if _option(field, json_mapping_pb2.other_keys):
            plan.append((field.name, key, _INLINE, _writer(field)))
        elif _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            plan.append((field.name, key, _MAP, _writer(value_field)))
        elif field.is_repeated:
            how = _IF_ANY if _omit_empty(field) or _json_key(field) else _REPEATED
            plan.append((field.name, key, how, _writer(field)))
        elif _option(field, json_mapping_pb2.inline):
            plan.append((field.name, key, _INLINE, _writer(field)))
        elif field.has_presence and _option(field, json_mapping_pb2.null_when_unset):
            plan.append((field.name, key, _SET_OR_NULL, _writer(field)))
        elif field.has_presence:
            plan.append((field.name, key, _IF_SET, _writer(field)))
        elif _option(field, json_mapping_pb2.null_when_empty):
            plan.append((field.name, key, _OR_NULL, _writer(field)))
        else:
            plan.append((field.name, key, _ALWAYS, _writer(field)))
    return tuple(plan)


def _writer(field: FieldDescriptor) -> Convert | None:
    if field.type == _T.TYPE_MESSAGE:
        if _is_well_known(field.message_type):
            return _well_known_to_json
        return to_dict
    if field.type == _T.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, number)
    if field.type == _T.TYPE_BYTES:
        return lambda raw: base64.b64encode(raw).decode()
    return None


def _well_known_to_json(message: Message) -> Any:
    """A Struct or Value as server/base/structs.py writes it: keys in one order (the
    same value is the same bytes), whole numbers as integers (3, not 3.0)."""
    if isinstance(message, struct_pb2.Struct):
        # A large one is most likely a tool a response echoes (three times a stream).
        if message.ByteSize() >= _KEPT_FROM_BYTES:
            return _echoed.read(message)
        return structs.to_dict(message)
    return structs.to_python(cast(struct_pb2.Value, message))


_echoed = structs.Kept()
_KEPT_FROM_BYTES = 1024


# -- dict -> proto ----------------------------------------------------------------------


def from_dict(
    data: dict[str, Any], message: Message, prefix: str = "", strict: bool = False
) -> Message:
    """Fills `message` from a decoded JSON object; returns it. With `strict`, a
    non-null key that names no field is InvalidArgument naming it."""
    plain, shared, other = _reader(message.DESCRIPTOR)
    unknown: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue
        sharer = _sharer(shared.get(key), value)
        if sharer is not None:
            field, where = sharer, key
        else:
            field = plain.get(key)
            if field is None:
                if other is not None:
                    unknown[key] = value
                elif strict:
                    raise UnknownParameter.for_field(prefix + key, "is not a known parameter")
                continue
            where = field.name
        _set(message, field, value, prefix + where, strict)
    if unknown and other is not None:
        _message_value(getattr(message, other.name), other, unknown, prefix.rstrip("."), strict)
    return message


def _sharer(fields: list[FieldDescriptor] | None, value: Any) -> FieldDescriptor | None:
    """The field sharing a key that takes `value`: an array goes to a repeated field,
    an object to a message (or map) field; None when none does."""
    if not fields or not isinstance(value, list | dict):
        return None
    for field in fields:
        repeated = field.is_repeated and not _is_map(field)
        if repeated if isinstance(value, list) else not repeated:
            return field
    return None


def _reader(descriptor: Descriptor) -> _Reader:
    """The fields by JSON key (name or camelCase name), those reached only through a
    key another field lends them (json_key), and the one taking unknown keys."""
    reader = _readers.get(descriptor)
    if reader is None:
        plain: dict[str, FieldDescriptor] = {}
        shared: dict[str, list[FieldDescriptor]] = {}
        other = None
        for field in descriptor.fields:
            key = _json_key(field)
            if _option(field, json_mapping_pb2.other_keys):
                other = field
            elif key:
                shared.setdefault(key, []).append(field)
            else:
                plain[field.name] = field
                plain.setdefault(field.camelcase_name, field)
        reader = _readers[descriptor] = (plain, shared, other)
    return reader


def set_field(message: Message, path: str, value: Any) -> None:
    """Sets a possibly nested field (`a.b`, by name or camelCase name) from JSON or
    path/query text."""
    *parents, leaf = path.split(".")
    target = message
    for part in parents:
        target = getattr(target, _reader(target.DESCRIPTOR)[0][part].name)
    field = _reader(target.DESCRIPTOR)[0][leaf]
    _set(target, field, value, path, False)


def from_text(field: FieldDescriptor, text: str, where: str) -> Any:
    """Parses a path or query parameter into the JSON value its field expects."""
    if field.type in _INTS:
        try:
            return int(text)
        except ValueError:
            raise InvalidArgument.for_field(where, "must be an integer") from None
    if field.type in _FLOATS:
        try:
            return float(text)
        except ValueError:
            raise InvalidArgument.for_field(where, "must be a number") from None
    if field.type == _T.TYPE_BOOL:
        if text.lower() not in ("true", "false", "1", "0"):
            raise InvalidArgument.for_field(where, "must be true or false")
        return text.lower() in ("true", "1")
    return text


def field_for(descriptor: Descriptor, path: str) -> FieldDescriptor | None:
    """The descriptor of a possibly nested field (`a.b`, by name or camelCase
    name), or None."""
    *parents, leaf = path.split(".")
    for part in parents:
        parent = _reader(descriptor)[0].get(part)
        if parent is None or parent.message_type is None:
            return None
        descriptor = parent.message_type
    return _reader(descriptor)[0].get(leaf)


def _set(message: Message, field: FieldDescriptor, value: Any, where: str, strict: bool) -> None:
    if _is_map(field):
        if not isinstance(value, dict):
            raise InvalidArgument.for_field(where, "must be an object")
        target = getattr(message, field.name)
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        for k, v in value.items():
            key = from_text(key_field, _unicode(k, where), f"{where}.{k}")
            if value_field.type == _T.TYPE_MESSAGE:
                _message_value(target[key], value_field, v, f"{where}.{k}", strict)
            else:
                target[key] = _scalar(value_field, v, f"{where}.{k}")
        return
    if field.is_repeated:
        if not isinstance(value, list):
            if field.type == _T.TYPE_MESSAGE:
                raise InvalidArgument.for_field(where, "must be an array")
            value = [value]  # `"stop": "\n"` as OpenAI accepts it
        target = getattr(message, field.name)
        for i, item in enumerate(value):
            if item is None:
                raise InvalidArgument.for_field(f"{where}[{i}]", "must not be null")
            if field.type == _T.TYPE_MESSAGE:
                _message_value(target.add(), field, item, f"{where}[{i}]", strict)
            else:
                target.append(_scalar(field, item, f"{where}[{i}]"))
        return
    if field.type == _T.TYPE_MESSAGE:
        sub = getattr(message, field.name)
        sub.SetInParent()
        _message_value(sub, field, value, where, strict)
        return
    setattr(message, field.name, _scalar(field, value, where))


def _unicode(text: str, where: str) -> str:
    """`text` when it is valid Unicode; JSON's `\\ud800` escapes decode to unpaired
    surrogates, which no proto string (and no UTF-8 anywhere) can hold."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise InvalidArgument.for_field(
                where, "is not valid Unicode (it holds an unpaired surrogate)"
            ) from None
    return text


def _message_value(
    target: Message, field: FieldDescriptor, value: Any, where: str, strict: bool
) -> None:
    if _is_well_known(field.message_type):
        try:
            if isinstance(target, struct_pb2.Struct):
                if not isinstance(value, dict):
                    raise InvalidArgument.for_field(where, "must be an object")
                structs.fill_struct(target, value)
            else:
                structs.fill_value(cast(struct_pb2.Value, target), value)
        except structs.TooDeep:
            raise InvalidArgument.for_field(where, "nests too deeply") from None
        except UnicodeError:
            raise InvalidArgument.for_field(
                where, "is not valid Unicode (it holds an unpaired surrogate)"
            ) from None
        return
    if not isinstance(value, dict):
        raise InvalidArgument.for_field(where, "must be an object")
    from_dict(value, target, where + ".", strict)


def _scalar(field: FieldDescriptor, value: Any, where: str) -> Any:
    kind = field.type
    if kind == _T.TYPE_STRING:
        if not isinstance(value, str):
            raise InvalidArgument.for_field(where, "must be a string")
        return _unicode(value, where)
    if kind == _T.TYPE_BOOL:
        if not isinstance(value, bool):
            raise InvalidArgument.for_field(where, "must be a boolean")
        return value
    if kind in _INTS:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidArgument.for_field(where, "must be an integer")
        low, high = _INTS[kind]
        if not low <= value <= high:
            raise InvalidArgument.for_field(where, "is out of range")
        return value
    if kind in _FLOATS:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise InvalidArgument.for_field(where, "must be a number")
        if not math.isfinite(value):
            raise InvalidArgument.for_field(where, "must be a finite number")
        return float(value)
    if kind == _T.TYPE_ENUM:
        if isinstance(value, str):
            known = field.enum_type.values_by_name.get(value)
            if known is not None:
                return known.number
        elif isinstance(value, int) and not isinstance(value, bool):
            return value
        raise InvalidArgument.for_field(where, "is not a known value")
    if kind == _T.TYPE_BYTES:
        if not isinstance(value, str):
            raise InvalidArgument.for_field(where, "must be a base64 string")
        try:
            return base64.b64decode(value, validate=True)
        except ValueError:
            raise InvalidArgument.for_field(where, "must be a base64 string") from None
    raise InvalidArgument.for_field(where, "has an unsupported type")
