"""Anthropic's MCP connector, run by the gateway for every model: `mcp_servers`
(`{type: "url", url, name, authorization_token}`) with `mcp_toolset` tools
(`mcp_server_name`, `default_config`, `configs`) under the `anthropic-beta` value
that introduces them (`mcp-client-2025-11-20`; the earlier `mcp-client-2025-04-04`,
whose servers carry `tool_configuration` instead, too). Every refusal names its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from server.application.dialects.messages.request import BETA_HEADER, AnyRequest
from server.application.pipeline.offer import ServerUse, server_named
from server.base import structs, upstream_headers
from server.base.config import McpConfig
from server.base.errors import InvalidArgument

BETA = "mcp-client-2025-11-20"
EARLIER_BETA = "mcp-client-2025-04-04"
TOOLSET = "mcp_toolset"
SERVER_KEYS = frozenset({"type", "url", "name", "authorization_token", "tool_configuration"})
TOOLSET_KEYS = frozenset({"mcp_server_name", "default_config", "configs", "cache_control"})


def toolsets(request: AnyRequest) -> list[tuple[int, dict[str, Any]]]:
    """The request's `mcp_toolset` tools, each with its index in `tools`."""
    return [
        (i, structs.to_dict(tool.other))
        for i, tool in enumerate(request.tools)
        if tool.HasField("type") and tool.type == TOOLSET
    ]


def uses(request: AnyRequest, metadata: Mapping[str, str], config: McpConfig) -> list[ServerUse]:
    """The servers a request's `mcp_servers` name, each narrowed by its toolset."""
    betas = {b.strip() for b in metadata.get(BETA_HEADER, "").split(",")}
    earlier = EARLIER_BETA in betas and BETA not in betas
    if BETA not in betas and not earlier:
        raise InvalidArgument.for_field(
            "mcp_servers", f"needs the {BETA_HEADER} header to name {BETA}"
        )
    sets = {}
    for i, toolset in toolsets(request):
        where = f"tools[{i}]"
        if extra := sorted(set(toolset) - TOOLSET_KEYS):
            raise InvalidArgument.for_field(f"{where}.{extra[0]}", "is not a field of a toolset")
        name = toolset.get("mcp_server_name")
        if not isinstance(name, str) or not name:
            raise InvalidArgument.for_field(f"{where}.mcp_server_name", "is required")
        if name in sets:
            raise InvalidArgument.for_field(
                f"{where}.mcp_server_name", f"{name!r} has a toolset already"
            )
        sets[name] = (where, toolset)
    out = []
    names = set()
    for i, given in enumerate(request.mcp_servers):
        where = f"mcp_servers[{i}]"
        server = structs.read(given, where)
        use = _server(server, where, config)
        names.add(use.label)
        if earlier:
            out.append(_configured(use, server.get("tool_configuration"), where))
        elif use.label in sets:
            out.append(_narrowed(use, *sets[use.label]))
        else:
            raise InvalidArgument.for_field(where, f"no {TOOLSET} tool names {use.label!r}")
    for name, (where, _) in sets.items():
        if name not in names:
            raise InvalidArgument.for_field(
                f"{where}.mcp_server_name", f"names no server of mcp_servers ({name!r})"
            )
    return out


def _server(server: dict[str, Any], where: str, config: McpConfig) -> ServerUse:
    if extra := sorted(set(server) - SERVER_KEYS):
        raise InvalidArgument.for_field(f"{where}.{extra[0]}", "is not a field of an MCP server")
    if server.get("type", "url") != "url":
        raise InvalidArgument.for_field(f"{where}.type", "must be url")
    name, url = server.get("name"), server.get("url")
    if not isinstance(name, str) or not name:
        raise InvalidArgument.for_field(f"{where}.name", "is required")
    if not isinstance(url, str) or not url:
        raise InvalidArgument.for_field(f"{where}.url", "is required")
    headers, fields = {}, {}
    if (token := server.get("authorization_token")) is not None:
        fields["authorization"] = f"{where}.authorization_token"
        headers["authorization"] = upstream_headers.bearer(token, fields["authorization"])
    configured = server_named(config, name, url, where, "name", "url", fields)
    return ServerUse(where, name, configured, headers, header_fields=fields)


def _narrowed(use: ServerUse, where: str, toolset: dict[str, Any]) -> ServerUse:
    """A server's tools as its toolset enables them: `configs` per tool over
    `default_config` (every tool enabled when neither says)."""
    default = toolset.get("default_config") or {}
    if not isinstance(default, dict):
        raise InvalidArgument.for_field(f"{where}.default_config", "must be an object")
    configs = toolset.get("configs") or {}
    if not isinstance(configs, dict):
        raise InvalidArgument.for_field(f"{where}.configs", "must map tool names to configs")
    enabled = {}
    for name, tool in configs.items():
        if not isinstance(tool, dict):
            raise InvalidArgument.for_field(f"{where}.configs.{name}", "must be an object")
        enabled[name] = tool.get("enabled", default.get("enabled", True)) is not False
    named = tuple(enabled)
    if default.get("enabled", True) is False:
        allowed = tuple(n for n, on in enabled.items() if on)
        return replace(use, allowed=allowed, named=named, named_where=f"{where}.configs.{{name}}")
    denied = frozenset(n for n, on in enabled.items() if not on)
    return replace(use, named=named, named_where=f"{where}.configs.{{name}}", denied=denied)


def _configured(use: ServerUse, configuration: Any, where: str) -> ServerUse:
    """The earlier beta's `tool_configuration: {enabled, allowed_tools}`."""
    if configuration is None:
        return use
    if not isinstance(configuration, dict):
        raise InvalidArgument.for_field(f"{where}.tool_configuration", "must be an object")
    if configuration.get("enabled", True) is False:
        return replace(use, allowed=())
    allowed = configuration.get("allowed_tools")
    if allowed is None:
        return use
    if not isinstance(allowed, list) or not all(isinstance(n, str) for n in allowed):
        raise InvalidArgument.for_field(
            f"{where}.tool_configuration.allowed_tools", "must list tool names"
        )
    named_where = f"{where}.tool_configuration.allowed_tools[{{j}}]"
    return replace(use, allowed=tuple(allowed), named=tuple(allowed), named_where=named_where)
