"""The MCP tools a model call offers its model: the servers a request names (in its
dialect's words), each resolved to a configured server (or to a remote one the config
allows), listed for the caller's key, and narrowed to the tools the request allows.

A request never makes the gateway reach an address of its choosing: a URL must be a
configured server's own, the gateway's `/mcp/{server}`, `gateway:{server}`, or one
of `mcp.remote_urls`. A request's own headers (its `authorization`) go to that server
only, on a client made for that request: never to a stdio server, nor to one named
through the gateway, and never holding a key of the gateway.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from server.application.pipeline.chain import ChainTool, Listed, ToolServers, Toolset, spec_of
from server.base.caller import Principal
from server.base.config import MCP_SERVER_ID, McpConfig, McpServerConfig
from server.base.errors import InvalidArgument
from server.base.tools import ToolServerError

# The scheme that names a configured server without a URL.
GATEWAY_SCHEME = "gateway:"
# The path of the gateway's own `/mcp/{server}` (at whatever host), and the server.
GATEWAY_PATH = re.compile(r"(?:^|/)mcp/([^/]+)/*$")


@dataclass(frozen=True)
class ServerUse:
    """One server a request names: where (`tools[0]`), the label its items carry, the
    server, the request's own headers for it, and which of its tools the model gets."""

    where: str
    label: str
    server: McpServerConfig
    headers: dict[str, str] = field(default_factory=dict)
    # Tool names the request allows (None: every one, less `denied`).
    allowed: tuple[str, ...] | None = None
    # The tool names the request lists (each must be a tool the key may use), and where
    # each is (a format of its index `j` and `name`).
    named: tuple[str, ...] = ()
    named_where: str = ""
    denied: frozenset[str] = frozenset()
    # Whether a call of a tool (by its name on the server) waits for approval.
    approval: Callable[[str], bool] = lambda name: False
    # The request field each of `headers` came in (by its lower-case name).
    header_fields: dict[str, str] = field(default_factory=dict)


def server_named(
    config: McpConfig,
    label: str,
    url: str | None,
    where: str,
    label_field: str,
    url_field: str,
    header_fields: dict[str, str],
) -> McpServerConfig:
    """The server a request names by `url` (when given) or by `label`. InvalidArgument
    naming the field when it is neither configured nor allowed remote, when a remote
    takes a configured server's id as its label, or when the request gives headers
    (`header_fields`: each one's field) to a server that takes none."""
    if url is None:
        server = config.server(label)
        if server is None:
            raise InvalidArgument.for_field(
                f"{where}.{label_field}", f"no MCP server {label!r} is configured"
            )
        return _takes_headers(server, header_fields)
    for server in config.servers:
        if server.url is not None and server.url == url:
            return server  # an HTTP server's: it takes headers
    if url in config.remote_urls:
        if not MCP_SERVER_ID.fullmatch(label):
            raise InvalidArgument.for_field(
                f"{where}.{label_field}", f"must match {MCP_SERVER_ID.pattern}"
            )
        if config.server(label) is not None:  # its grants and its ledger rows are its own
            raise InvalidArgument.for_field(
                f"{where}.{label_field}",
                f"{label!r} is a configured MCP server's id: a remote one needs a label of its own",
            )
        return McpServerConfig(id=label, transport="http", url=url)
    named = gateway_named(config, url)
    if named is None:
        raise InvalidArgument.for_field(
            f"{where}.{url_field}",
            f"{url!r} is not a configured MCP server (mcp.remote_urls lists the others a "
            "request may name)",
        )
    if header_fields:  # the caller's headers are for the gateway, never for its server
        raise InvalidArgument.for_field(
            next(iter(header_fields.values())),
            f"is for the gateway's own MCP server {named.id!r}, which the gateway calls "
            "with its configured credentials: it takes no headers",
        )
    return named


def gateway_named(config: McpConfig, url: str) -> McpServerConfig | None:
    """The configured server `url` names through the gateway (`gateway:{server}`, or
    the gateway's own `/mcp/{server}` at whatever host), if any."""
    if url.startswith(GATEWAY_SCHEME):
        return config.server(url.removeprefix(GATEWAY_SCHEME))
    found = GATEWAY_PATH.search(urlsplit(url).path)
    return config.server(found.group(1)) if found else None


def _takes_headers(server: McpServerConfig, header_fields: dict[str, str]) -> McpServerConfig:
    """`server`, unless it is a child process given headers: its one child per worker
    serves every call alike."""
    if header_fields and server.transport == "stdio":
        raise InvalidArgument.for_field(
            next(iter(header_fields.values())),
            f"MCP server {server.id!r} runs as a child process and takes no headers",
        )
    return server


async def offered(tools: ToolServers, principal: Principal, uses: list[ServerUse]) -> Toolset:
    """The tools of every server `uses` names that the key may call and the request
    allows. A server that cannot list its tools offers none (its listing says why)."""
    toolset = Toolset()
    try:
        await _offer(tools, principal, uses, toolset)
    except BaseException:
        for upstream in toolset.own.values():  # the clients made for it
            tools.retire(upstream)
        raise
    return toolset


async def _offer(
    tools: ToolServers, principal: Principal, uses: list[ServerUse], toolset: Toolset
) -> None:
    for use in uses:  # before any server is reached
        if use.headers:
            await tools.refuse_keys(use.headers, use.header_fields)
    seen: dict[str, str] = {}
    for use in uses:
        server_id = use.server.id
        if server_id in seen:
            raise InvalidArgument.for_field(
                use.where, f"names the same MCP server as {seen[server_id]}"
            )
        seen[server_id] = use.where
        configured = tools.upstream(server_id)
        # A stdio server's one child serves every call, even one parsed before a reload.
        shared = use.server.transport == "stdio" or (
            configured is not None and configured.config == use.server
        )
        if configured is not None and shared and not use.headers:
            upstream = configured
        else:
            upstream = tools.transient(use.server, use.headers)
            toolset.own[server_id] = upstream
        try:
            listed = await tools.listing(principal, upstream)
        except ToolServerError as exc:
            toolset.listed.append(Listed(use.label, (), str(exc)))
            continue
        names = {t.upstream_name for t in listed}
        for j, name in enumerate(use.named):
            if name not in names:
                raise InvalidArgument.for_field(
                    use.named_where.format(j=j, name=name),
                    f"names no tool of MCP server {use.label!r} this key may use ({name!r})",
                )
        kept = [
            t for t in listed
            if (use.allowed is None or t.upstream_name in use.allowed)
            and t.upstream_name not in use.denied
        ]  # fmt: skip
        for tool in kept:
            chained = ChainTool(spec_of(tool), use.label, tool.upstream_name,
                                use.approval(tool.upstream_name), tool)  # fmt: skip
            toolset.tools[tool.name] = chained
        definitions = tuple({**t.definition, "name": t.upstream_name} for t in kept)
        toolset.listed.append(Listed(use.label, definitions))
