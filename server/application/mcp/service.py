"""McpService: the MCP tools, resources, resource templates and prompts over gRPC (and
`/v1/mcp/...`), the same filtered sets `/mcp` serves. The caller is identified without
a ledger row of the RPC's own: a tool call, resource read or prompt get writes its row
in `Tools` or `Catalog`, as it does whichever way it came."""

from __future__ import annotations

from typing import Any

from gateway.v1 import mcp_service_pb2 as mcp_pb

from server.accounting.accounts import Accounts
from server.application.mcp.catalog import Catalog, owner_of
from server.application.mcp.tools import ExposedTool, Tools
from server.application.pipeline.state import Live
from server.base import structs
from server.base.call import Call
from server.base.caller import Principal
from server.base.errors import InvalidArgument


class McpService:
    def __init__(self, live: Live, accounts: Accounts, tools: Tools) -> None:
        self.live = live
        self.accounts = accounts
        self.tools = tools
        self.catalog = Catalog(tools)

    async def _caller(self, call: Call, counted: bool) -> Principal:
        state = self.live.current
        if counted and state.config.limits.count_listings:
            return await self.accounts.check(call, "api", state.keys)
        return await self.accounts.admission.identify(call.metadata, "api", state.keys)

    async def list_tools(
        self, request: mcp_pb.ListToolsRequest, call: Call
    ) -> mcp_pb.ListToolsResponse:
        principal = await self._caller(call, counted=True)
        found = await self.tools.list_tools(principal, request.server or None)
        return mcp_pb.ListToolsResponse(tools=[_tool(t) for t in found])

    async def call_tool(
        self, request: mcp_pb.CallToolRequest, call: Call
    ) -> mcp_pb.CallToolResponse:
        principal = await self._caller(call, counted=False)
        if not request.name:
            raise InvalidArgument.for_field("name", "is required")
        arguments = structs.read(request.arguments, "arguments")
        answer = await self.tools.call_tool(
            principal, request.name, arguments, request_id=call.request_id,
            response_metadata=call.response_metadata,
        )  # fmt: skip
        out = mcp_pb.CallToolResponse(is_error=answer.is_error, cost_usd=answer.cost_usd)
        structs.fill_struct(out.result, answer.result)
        return out

    async def list_resources(
        self, request: mcp_pb.ListResourcesRequest, call: Call
    ) -> mcp_pb.ListResourcesResponse:
        found = await self._listed(call, "resources", request.server)
        return mcp_pb.ListResourcesResponse(resources=[_resource(r) for r in found])

    async def list_resource_templates(
        self, request: mcp_pb.ListResourceTemplatesRequest, call: Call
    ) -> mcp_pb.ListResourceTemplatesResponse:
        found = await self._listed(call, "resourceTemplates", request.server)
        return mcp_pb.ListResourceTemplatesResponse(
            resource_templates=[_template(t) for t in found]
        )

    async def list_prompts(
        self, request: mcp_pb.ListPromptsRequest, call: Call
    ) -> mcp_pb.ListPromptsResponse:
        found = await self._listed(call, "prompts", request.server)
        return mcp_pb.ListPromptsResponse(prompts=[_prompt(p) for p in found])

    async def _listed(self, call: Call, kind: str, server: str) -> list[dict[str, Any]]:
        principal = await self._caller(call, counted=True)
        return await self.catalog.listed(principal, kind, server or None)

    async def read_resource(
        self, request: mcp_pb.ReadResourceRequest, call: Call
    ) -> mcp_pb.ReadResourceResponse:
        principal = await self._caller(call, counted=False)
        if not request.uri:
            raise InvalidArgument.for_field("uri", "is required")
        answer = await self.catalog.read_resource(
            principal, request.uri, request_id=call.request_id,
            response_metadata=call.response_metadata,
        )  # fmt: skip
        out = mcp_pb.ReadResourceResponse()
        structs.fill_struct(out.result, answer.result)
        return out

    async def get_prompt(
        self, request: mcp_pb.GetPromptRequest, call: Call
    ) -> mcp_pb.GetPromptResponse:
        principal = await self._caller(call, counted=False)
        if not request.name:
            raise InvalidArgument.for_field("name", "is required")
        arguments = structs.read(request.arguments, "arguments")
        for key, value in arguments.items():  # MCP's prompt arguments are strings
            if not isinstance(value, str):
                raise InvalidArgument.for_field(f"arguments.{key[:64]}", "must be a string")
        answer = await self.catalog.get_prompt(
            principal, request.name, arguments, request_id=call.request_id,
            response_metadata=call.response_metadata,
        )  # fmt: skip
        out = mcp_pb.GetPromptResponse()
        structs.fill_struct(out.result, answer.result)
        return out


def _text(entry: dict[str, Any], key: str) -> str:
    value = entry.get(key)
    return value if isinstance(value, str) else ""


def _resource(entry: dict[str, Any]) -> mcp_pb.McpResource:
    server, upstream_uri = owner_of(entry["uri"]) or ("", "")
    out = mcp_pb.McpResource(
        name=entry["name"], server=server, uri=entry["uri"], upstream_uri=upstream_uri,
        description=_text(entry, "description"), mime_type=_text(entry, "mimeType"),
    )  # fmt: skip
    structs.fill_struct(out.definition, entry)
    return out


def _template(entry: dict[str, Any]) -> mcp_pb.McpResourceTemplate:
    server, upstream = owner_of(entry["uriTemplate"]) or ("", "")
    out = mcp_pb.McpResourceTemplate(
        name=entry["name"], server=server, uri_template=entry["uriTemplate"],
        upstream_uri_template=upstream, description=_text(entry, "description"),
        mime_type=_text(entry, "mimeType"),
    )  # fmt: skip
    structs.fill_struct(out.definition, entry)
    return out


def _prompt(entry: dict[str, Any]) -> mcp_pb.McpPrompt:
    server, _, upstream_name = entry["name"].partition("__")
    out = mcp_pb.McpPrompt(
        name=entry["name"], server=server, upstream_name=upstream_name,
        description=_text(entry, "description"),
    )  # fmt: skip
    structs.fill_struct(out.definition, entry)
    return out


def _tool(tool: ExposedTool) -> mcp_pb.McpTool:
    out = mcp_pb.McpTool(name=tool.name, server=tool.server, upstream_name=tool.upstream_name)
    description = tool.definition.get("description")
    if isinstance(description, str):
        out.description = description
    schema = tool.definition.get("inputSchema")
    if isinstance(schema, dict):
        structs.fill_struct(out.input_schema, schema)
    structs.fill_struct(out.definition, tool.definition)
    return out
