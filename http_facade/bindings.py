"""The REST mapping, read from the `google.api.http` annotations of the contract.

Each annotated RPC (and each of its additional bindings) becomes one Binding: an HTTP
verb, a path template and where the request fields come from (path, body, query). The
annotations are the only record of the REST surface; nothing here names a path.

A unary RPC at `P` whose streaming sibling is annotated at `P:stream` (same verb) also
takes `"stream": true` in its body, which dispatches to the sibling, as the spec's
`stream` parameter asks. A binding whose method sets `gateway.v1.rest_method`'s
`when_header` shares its verb and path with another method's: it serves the requests
that carry that header (or its `when_query` parameter).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from gateway.v1 import rest_pb2, sse_pb2
from google.api import annotations_pb2, http_pb2
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from starlette.convertors import Convertor, register_url_convertor

from http_facade.sse import PLAIN, Framing

STREAM_SUFFIX = ":stream"
_VERBS = ("get", "put", "post", "delete", "patch")
_VARIABLE = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_.]*)(?:=([^}]*))?\}")


class _Segment(Convertor[str]):
    """One path segment, as `{field}` or `{field=*}` means in google.api.http: no `/`,
    and no `:`, which starts the custom verb (`/v1/keys/{key_id}:revoke`)."""

    regex = "[^/:]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


SEGMENT = "http_rule_segment"
register_url_convertor(SEGMENT, _Segment())


@dataclass(frozen=True)
class Rpc:
    """One contract method, as the facade sees it."""

    descriptor: MethodDescriptor
    request_type: type[Message]
    response_type: type[Message]
    # From its service's `gateway.v1.rest` option: unknown body keys refused, and the
    # dialect's keys the gateway cannot honour (refused by name).
    strict: bool = False
    refused_fields: frozenset[str] = frozenset()
    # Query parameters and bodies refused too (`refuse_unknown`): nothing is ignored.
    refuse_unknown: bool = False
    error_format: int = rest_pb2.ERROR_FORMAT_UNSPECIFIED
    # How a streaming RPC's events are written (its `gateway.v1.sse` option).
    framing: Framing = PLAIN
    # The dialect's request headers passed on as call metadata (`forwarded_headers`).
    forwarded_headers: tuple[str, ...] = ()
    # The query parameter that may carry the caller's key (`key_query_parameter`).
    key_query: str = ""

    @property
    def path(self) -> str:
        """The gRPC path: /gateway.v1.ChatService/CreateChatCompletion."""
        return f"/{self.descriptor.containing_service.full_name}/{self.descriptor.name}"

    @property
    def server_streaming(self) -> bool:
        return bool(self.descriptor.server_streaming)

    @classmethod
    def of(cls, descriptor: MethodDescriptor) -> Rpc:
        service = descriptor.containing_service.GetOptions()
        rest = service.Extensions[rest_pb2.RestOptions.rest]
        sse = descriptor.GetOptions().Extensions[sse_pb2.SseOptions.sse]
        framing = Framing(
            not sse.omit_done, sse.event_name_field, sse.keepalive_event, rest.error_format,
            sse.json_array_unless_alt_sse, sse.json_lines_field,
        )  # fmt: skip
        return cls(
            descriptor,
            message_factory.GetMessageClass(descriptor.input_type),
            message_factory.GetMessageClass(descriptor.output_type),
            rest.strict or rest.refuse_unknown,
            frozenset(rest.refused_fields),
            rest.refuse_unknown,
            rest.error_format,
            framing,
            tuple(h.lower() for h in rest.forwarded_headers),
            rest.key_query_parameter,
        )


@dataclass(frozen=True)
class Binding:
    """One HTTP route of one RPC."""

    verb: str  # upper case: GET, POST...
    template: str  # as annotated: /v1/deployments/{deployment_id}/invoke
    rpc: Rpc
    # "*" (the whole body is the request), a field name, or "" (no body).
    body: str
    # Starlette path and its parameter names -> request field paths.
    route_path: str
    path_fields: dict[str, str] = field(default_factory=dict)
    # The streaming RPC that `"stream": true` in the body dispatches to, if any.
    stream_rpc: Rpc | None = None
    # The response field written as the whole HTTP body ("": the whole message).
    response_body: str = ""
    # The request header (or query parameter) that selects this binding over another
    # of the same verb and path ("": none, the default binding).
    when_header: str = ""
    when_query: str = ""


def bindings(methods: Iterable[MethodDescriptor]) -> list[Binding]:
    """Every HTTP binding of every annotated method; unannotated methods get none."""
    found = [one for descriptor in methods for one in _method_bindings(descriptor)]
    by_route = {(b.verb, b.template, b.when_header, b.when_query): b for b in found}
    if len(by_route) != len(found):
        raise ValueError(
            "two RPCs are annotated with the same verb, path, header and query parameter"
        )
    paired = []
    for b in found:
        sibling = by_route.get((b.verb, b.template + STREAM_SUFFIX, b.when_header, b.when_query))
        if not b.rpc.server_streaming and sibling is not None and sibling.rpc.server_streaming:
            b = replace(b, stream_rpc=sibling.rpc)
        paired.append(b)
    return paired


@functools.cache
def _method_bindings(descriptor: MethodDescriptor) -> tuple[Binding, ...]:
    """A method's bindings, read from its options once: every start and reload of the
    facade asks again, and reading options is most of a start's work."""
    options = descriptor.GetOptions()
    if not options.HasExtension(annotations_pb2.http):
        return ()
    rule = options.Extensions[annotations_pb2.http]
    rpc = Rpc.of(descriptor)
    return tuple(_binding(one, rpc) for one in (rule, *rule.additional_bindings))


def _binding(rule: http_pb2.HttpRule, rpc: Rpc) -> Binding:
    kind = rule.WhichOneof("pattern")
    if kind in _VERBS:
        verb, template = kind.upper(), getattr(rule, kind)
    elif kind == "custom":
        verb, template = rule.custom.kind.upper(), rule.custom.path
    else:
        raise ValueError(f"{rpc.path}: google.api.http rule without a pattern")
    route_path, path_fields = _route_path(template, rpc.path)
    for name in (*path_fields.values(), *([rule.body] if rule.body not in ("", "*") else [])):
        if not _has_field(rpc.request_type, name):
            raise ValueError(f"{rpc.path}: the http rule names {name!r}, not a request field")
    if rule.response_body and not _has_field(rpc.response_type, rule.response_body):
        raise ValueError(f"{rpc.path}: response_body {rule.response_body!r} is not a field")
    method = rpc.descriptor.GetOptions().Extensions[rest_pb2.RestMethodOptions.rest_method]
    return Binding(
        verb, template, rpc, rule.body, route_path, path_fields,
        response_body=rule.response_body, when_header=method.when_header.lower(),
        when_query=method.when_query,
    )  # fmt: skip


def _has_field(message_type: type[Message], path: str) -> bool:
    descriptor = message_type.DESCRIPTOR
    *parents, leaf = path.split(".")
    for part in parents:
        parent = descriptor.fields_by_name.get(part)
        if parent is None or parent.message_type is None:
            return False
        descriptor = parent.message_type
    return leaf in descriptor.fields_by_name


def _route_path(template: str, where: str) -> tuple[str, dict[str, str]]:
    """Turns `/v1/x/{a.b}` into a Starlette path `/v1/x/{a__b}` and {a__b: a.b}."""
    fields: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        name, pattern = match.group(1), match.group(2)
        param = name.replace(".", "__")
        fields[param] = name
        if pattern in (None, "*"):
            return "{" + param + ":" + SEGMENT + "}"
        if pattern == "**":
            return "{" + param + ":path}"
        raise ValueError(f"{where}: path pattern {pattern!r} is not supported")

    return _VARIABLE.sub(replace, template), fields
