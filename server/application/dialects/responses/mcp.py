"""The Responses API's `mcp` tool, run by the gateway for every model: its fields
read (`server_label`, `server_url`, `allowed_tools`, `require_approval`, `headers`,
`authorization`), and the caller's `mcp_approval_response` items matched with the
requests they answer. Every refusal names its field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from server.application.dialects.responses.request import Item, resolve
from server.application.pipeline.chain import Approval, Toolset
from server.application.pipeline.offer import ServerUse, server_named
from server.base import upstream_headers
from server.base.config import McpConfig
from server.base.errors import InvalidArgument
from server.base.generation import ToolCall

MCP_TOOL_KEYS = frozenset(
    {"type", "server_label", "server_url", "allowed_tools", "require_approval", "headers",
     "authorization", "server_description"}
)  # fmt: skip


def uses(declared: Sequence[tuple[str, dict[str, Any]]], config: McpConfig) -> list[ServerUse]:
    """The servers a request's `mcp` tools name."""
    return [_use(tool, where, config) for where, tool in declared]


def _use(tool: dict[str, Any], where: str, config: McpConfig) -> ServerUse:
    if extra := sorted(set(tool) - MCP_TOOL_KEYS):
        raise InvalidArgument.for_field(f"{where}.{extra[0]}", "is not a field of an mcp tool")
    label = tool.get("server_label")
    if not isinstance(label, str) or not label:
        raise InvalidArgument.for_field(f"{where}.server_label", "is required")
    url = tool.get("server_url")
    if url is not None and not isinstance(url, str):
        raise InvalidArgument.for_field(f"{where}.server_url", "must be a string")
    headers, fields = _headers(tool, where)
    server = server_named(config, label, url, where, "server_label", "server_url", fields)
    allowed, allowed_where = _allowed(tool.get("allowed_tools"), f"{where}.allowed_tools")
    approval = _approval(tool.get("require_approval", "always"), f"{where}.require_approval")
    return ServerUse(where, label, server, headers, allowed, allowed or (), allowed_where + "[{j}]",
                     approval=approval, header_fields=fields)  # fmt: skip


def _headers(tool: dict[str, Any], where: str) -> tuple[dict[str, str], dict[str, str]]:
    """The tool's `headers` and `authorization` as the headers sent upstream, and the
    field each came in."""
    given = tool.get("headers")
    headers = upstream_headers.checked({} if given is None else given, f"{where}.headers")
    fields = {name.lower(): f"{where}.headers.{name}" for name in given or {}}
    if (token := tool.get("authorization")) is not None:
        if "authorization" in headers:
            raise InvalidArgument.for_field(
                f"{where}.authorization", "and headers.Authorization cannot both be given"
            )
        headers["authorization"] = upstream_headers.bearer(token, f"{where}.authorization")
        fields["authorization"] = f"{where}.authorization"
    return headers, fields


def _allowed(value: Any, where: str) -> tuple[tuple[str, ...] | None, str]:
    """`allowed_tools` as names (a list, or `{tool_names: [...]}`); None: every tool."""
    if value is None:
        return None, where
    if isinstance(value, dict):
        if set(value) - {"tool_names", "read_only"}:
            raise InvalidArgument.for_field(where, "takes tool_names and read_only")
        value, where = value.get("tool_names", []), f"{where}.tool_names"
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise InvalidArgument.for_field(where, "must list tool names")
    return tuple(value), where


def _approval(value: Any, where: str) -> Callable[[str], bool]:
    """`require_approval`: `always`, `never`, or `{always: {tool_names}, never: {...}}`
    (a tool named in neither waits for approval, as with `always`)."""
    if value == "always":
        return lambda name: True
    if value == "never":
        return lambda name: False
    if not isinstance(value, dict) or set(value) - {"always", "never"}:
        raise InvalidArgument.for_field(where, "must be always, never or an object")
    named: dict[str, set[str]] = {}
    for key, names in value.items():
        listed = names.get("tool_names", []) if isinstance(names, dict) else None
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            raise InvalidArgument.for_field(f"{where}.{key}.tool_names", "must list tool names")
        named[key] = set(listed)
    never = named.get("never", set())
    return lambda name: name not in never


def approvals(history: Sequence[Item], items: Sequence[Item], toolset: Toolset) -> list[Approval]:
    """The caller's answers to approval requests, in the order given: each must answer
    one request of the conversation, once, for a tool this request still offers."""
    earlier = {str(i["id"]): i for i in resolve(history) if i.get("type") == "mcp_approval_request"}
    answered = {
        str(i.get("approval_request_id"))
        for i in resolve(history)
        if i.get("type") in ("mcp_approval_response", "mcp_call") and i.get("approval_request_id")
    }
    asked = dict(earlier)
    out: list[Approval] = []
    for k, item in enumerate(items):
        kind = item.get("type")
        if kind == "mcp_approval_request":
            asked[str(item["id"])] = item
            continue
        if kind != "mcp_approval_response":
            continue
        where = f"input[{k}].approval_request_id"
        request_id = str(item["approval_request_id"])
        request = asked.get(request_id)
        if request is None:
            raise InvalidArgument.for_field(where, f"answers no approval request ({request_id!r})")
        if request_id in answered:
            raise InvalidArgument.for_field(where, f"{request_id!r} is answered already")
        answered.add(request_id)
        label, name = request["server_label"], request["name"]
        tool = next((t for t in toolset.tools.values() if (t.label, t.name) == (label, name)),
                    None)  # fmt: skip
        if tool is None:
            raise InvalidArgument.for_field(
                where, f"answers a call of {request['name']!r}, which this request does not offer"
            )
        call = ToolCall(f"call_{request_id}", tool.spec.name, str(request.get("arguments", "")))
        out.append(Approval(request_id, call, tool, bool(item.get("approve"))))
    return out
