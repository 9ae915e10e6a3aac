"""`GET /openapi.json`: the REST surface as OpenAPI 3.1, generated from the contract.

Paths, verbs, path and query parameters and request bodies come from the same
`google.api.http` bindings the routes are built from; every schema comes from a
message descriptor, written as the codec writes and reads JSON (snake_case names,
int64 as JSON integers, enums by name, Struct as an object). Nothing is written by hand
but the error bodies, which are the facade's own (OpenAI's shape, or Anthropic's for a
service whose error format it is). Fuzzers (schemathesis) read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gateway.v1 import json_mapping_pb2, rest_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor

from http_facade.bindings import Binding, bindings
from server.accounting.admission import HEADER

_T = FieldDescriptor
_INT32 = {_T.TYPE_INT32, _T.TYPE_SINT32, _T.TYPE_SFIXED32}
_UINT32 = {_T.TYPE_UINT32, _T.TYPE_FIXED32}
_INT64 = {_T.TYPE_INT64, _T.TYPE_SINT64, _T.TYPE_SFIXED64}
_UINT64 = {_T.TYPE_UINT64, _T.TYPE_FIXED64}
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
}
ANTHROPIC_ERROR = {
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"type": "string", "enum": ["error"]},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"type": "string"},
                "param": {"type": ["string", "null"]},
            },
        }
    },
}
# Each key kind's header, and the same keys as `authorization: Bearer <key>`.
SECURITY_SCHEMES: dict[str, dict[str, str]] = {
    **{name: {"type": "apiKey", "in": "header", "name": name} for name in HEADER.values()},
    "bearer": {"type": "http", "scheme": "bearer"},
}


def document(methods: Iterable[MethodDescriptor], title: str = "Model gateway") -> dict[str, Any]:
    """The OpenAPI document of every binding of `methods`."""
    schemas: dict[str, Any] = {"Error": ERROR, "AnthropicError": ANTHROPIC_ERROR}
    paths: dict[str, dict[str, Any]] = {}
    for binding in bindings(methods):
        if binding.when_header or binding.when_query:
            continue  # a dialect's answer on another binding's path: one operation per path
        path = _openapi_path(binding)
        paths.setdefault(path, {})[binding.verb.lower()] = _operation(binding, schemas)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "v1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": SECURITY_SCHEMES,
        },
    }


def _openapi_path(binding: Binding) -> str:
    path = binding.template
    for param, field_path in binding.path_fields.items():
        # `{name}`, `{name=*}` and `{name=**}` alike: OpenAPI names the variable only.
        path = re.sub(r"\{" + re.escape(field_path) + r"(=[^}]*)?\}", "{" + param + "}", path)
    return path


def _operation(binding: Binding, schemas: dict[str, Any]) -> dict[str, Any]:
    rpc = binding.rpc
    request = rpc.descriptor.input_type
    parameters: list[dict[str, Any]] = []
    for param, field_path in binding.path_fields.items():
        field = _field(request, field_path)
        parameters.append({"name": param, "in": "path", "required": True, "schema": _scalar(field)})
    operation: dict[str, Any] = {
        "operationId": rpc.descriptor.full_name,
        "summary": f"{rpc.descriptor.containing_service.name}.{rpc.descriptor.name}",
        "security": [{name: []} for name in SECURITY_SCHEMES],
    }
    if binding.body == "*":
        skip = frozenset(binding.path_fields.values())
        body = _message(request, schemas, skip)
        if binding.stream_rpc is not None:
            body = {**body, "properties": {**body["properties"], "stream": {"type": "boolean"}}}
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": body}},
        }
    elif not binding.body:
        for field in request.fields:
            if field.message_type is None and field.name not in binding.path_fields.values():
                schema = _scalar(field)
                if field.is_repeated:
                    schema = {"type": "array", "items": schema}
                parameters.append({"name": field.name, "in": "query", "schema": schema})
    if parameters:
        operation["parameters"] = parameters
    ok: dict[str, Any]
    if rpc.server_streaming:
        ok = {"text/event-stream": {"schema": {"type": "string"}}}
    else:
        ok = {"application/json": {"schema": _ref(rpc.descriptor.output_type, schemas)}}
        if binding.stream_rpc is not None:
            ok["text/event-stream"] = {"schema": {"type": "string"}}
    shape = "AnthropicError" if rpc.error_format == rest_pb2.ERROR_FORMAT_ANTHROPIC else "Error"
    error = {"application/json": {"schema": {"$ref": f"#/components/schemas/{shape}"}}}
    operation["responses"] = {
        "200": {"description": "The RPC's response", "content": ok},
        "default": {"description": "An error (the status from the gRPC code)", "content": error},
    }
    return operation


def _field(descriptor: Descriptor, path: str) -> FieldDescriptor:
    *parents, leaf = path.split(".")
    for part in parents:
        descriptor = descriptor.fields_by_name[part].message_type
    return descriptor.fields_by_name[leaf]


def _ref(descriptor: Descriptor, schemas: dict[str, Any]) -> dict[str, Any]:
    if descriptor.full_name in _WELL_KNOWN:
        return dict(_WELL_KNOWN[descriptor.full_name])
    name = descriptor.full_name.removeprefix("gateway.v1.").replace(".", "_")
    if name not in schemas:
        schemas[name] = {}  # placeholder first: messages may refer to themselves
        schemas[name] = _message(descriptor, schemas)
    return {"$ref": f"#/components/schemas/{name}"}


def _message(
    descriptor: Descriptor, schemas: dict[str, Any], skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The object as the codec writes it: a field that shares a key (json_key) is one
    more form of that key, a field that may be null is nullable, and an inline field's
    keys are the object's own; an `other_keys` field makes it an open object."""
    properties: dict[str, Any] = {}
    schema: dict[str, Any]
    for field in descriptor.fields:
        if field.name in skip or _option(field, json_mapping_pb2.other_keys):
            continue
        if _option(field, json_mapping_pb2.inline):
            if field.message_type.full_name not in _WELL_KNOWN:
                inner = _message(field.message_type, schemas)["properties"]
                for key, schema in inner.items():
                    _add(properties, key, schema)
            continue
        schema = _value(field, schemas)
        if _option(field, json_mapping_pb2.null_when_unset) or _option(
            field, json_mapping_pb2.null_when_empty
        ):
            schema = {"anyOf": [schema, {"type": "null"}]}
        options = field.GetOptions()
        shared = options.HasExtension(json_mapping_pb2.json_key)
        _add(properties, options.Extensions[json_mapping_pb2.json_key] if shared else field.name,
             schema)  # fmt: skip
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if any(_option(field, json_mapping_pb2.other_keys) for field in descriptor.fields):
        out["additionalProperties"] = True  # its other keys are kept
    return out


def _option(field: FieldDescriptor, extension: Any) -> bool:
    options = field.GetOptions()
    return options.HasExtension(extension) and bool(options.Extensions[extension])


def _add(properties: dict[str, Any], key: str, schema: dict[str, Any]) -> None:
    """Adds a key's schema; a key with several forms takes any of them."""
    known = properties.get(key)
    if known is None or known == schema:
        properties[key] = schema
        return
    forms = known["anyOf"] if set(known) == {"anyOf"} else [known]
    properties[key] = {"anyOf": [*forms, schema]}


def _value(field: FieldDescriptor, schemas: dict[str, Any]) -> dict[str, Any]:
    if field.type == _T.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _value(value, schemas)}
    one = _ref(field.message_type, schemas) if field.type == _T.TYPE_MESSAGE else _scalar(field)
    if field.is_repeated:
        return {"type": "array", "items": one}
    return one


def _scalar(field: FieldDescriptor) -> dict[str, Any]:
    kind = field.type
    if kind == _T.TYPE_STRING:
        return {"type": "string"}
    if kind == _T.TYPE_BOOL:
        return {"type": "boolean"}
    if kind in _INT32:
        return {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
    if kind in _UINT32:
        return {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}
    if kind in _INT64:
        return {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
    if kind in _UINT64:
        return {"type": "integer", "minimum": 0, "maximum": 2**64 - 1}
    if kind in (_T.TYPE_DOUBLE, _T.TYPE_FLOAT):
        return {"type": "number"}
    if kind == _T.TYPE_ENUM:
        return {"type": "string", "enum": [v.name for v in field.enum_type.values]}
    if kind == _T.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    return {}
