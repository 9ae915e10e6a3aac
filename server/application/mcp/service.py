"""McpService: the MCP tools over gRPC (and `/v1/mcp/tools`), the same filtered set
`/mcp` serves. The caller is identified without a ledger row of the RPC's own: a tool
call writes its row in `Tools`, as it does whichever way it came."""

from __future__ import annotations

from gateway.v1 import mcp_service_pb2 as mcp_pb

from server.accounting.accounts import Accounts
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
