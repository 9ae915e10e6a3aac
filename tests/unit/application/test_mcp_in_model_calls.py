"""How each dialect names the MCP servers of a model call (which server, which of its
tools, which calls wait for approval, which headers go to it), how the caller's
approvals are matched, and the chain's own arithmetic: every refusal names its field
and says why."""

from __future__ import annotations

from typing import Any

import pytest
from gateway.v1 import messages_service_pb2 as service
from gateway.v1 import usage_pb2

from http_facade import codec
from server.application.dialects.messages import mcp as messages_mcp
from server.application.dialects.responses import mcp as responses_mcp
from server.application.pipeline.chain import (
    CallEnded,
    ChainTool,
    ToolError,
    Toolset,
    fed_text,
    result_text,
    spec_of,
    sum_usage,
)
from server.application.pipeline.offer import server_named
from server.base.config import McpConfig, McpServerConfig
from server.base.errors import InvalidArgument
from server.base.tools import ExposedTool

WEB = "https://mcp.example.com/mcp"
REMOTE = "https://partner.example.org/mcp"
CONFIG = McpConfig(
    servers=[McpServerConfig(id="web", transport="http", url=WEB)], remote_urls=[REMOTE]
)
BETA = {"anthropic-beta": "mcp-client-2025-11-20"}


def refusal(work: Any) -> tuple[str | None, str]:
    with pytest.raises(InvalidArgument) as refused:
        work()
    return refused.value.param, refused.value.message


# -- which server --------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", [None, WEB, "http://gateway.internal:8080/mcp/web", "/mcp/web/", "gateway:web"]
)
def test_a_configured_server_by_label_its_url_the_gateways_or_the_scheme(url: str | None) -> None:
    assert (
        server_named(CONFIG, "web", url, "tools[0]", "server_label", "server_url", {}).id == "web"
    )


def test_a_listed_remote_url_is_a_server_named_by_its_label() -> None:
    server = server_named(CONFIG, "partner", REMOTE, "tools[0]", "server_label", "server_url", {})
    assert (server.id, server.url, server.transport) == ("partner", REMOTE, "http")


@pytest.mark.parametrize(
    ("label", "url", "field", "message"),
    [
        ("nowhere", None, "tools[0].server_label",
         "tools[0].server_label: no MCP server 'nowhere' is configured"),
        ("web", "https://else.example.com/mcp", "tools[0].server_url",
         "tools[0].server_url: 'https://else.example.com/mcp' is not a configured MCP server "
         "(mcp.remote_urls lists the others a request may name)"),
        ("web", "http://gateway.internal/mcp/nowhere", "tools[0].server_url", None),
        ("web", "gateway:nowhere", "tools[0].server_url", None),
        ("Bad Label", REMOTE, "tools[0].server_label",
         "tools[0].server_label: must match [a-z0-9-]{1,24}"),
    ],
)  # fmt: skip
def test_any_other_server_is_refused_by_field(
    label: str, url: str | None, field: str, message: str | None
) -> None:
    param, said = refusal(
        lambda: server_named(CONFIG, label, url, "tools[0]", "server_label", "server_url", {})
    )
    assert param == field
    if message is not None:
        assert said == message


# -- the Responses API's mcp tool ------------------------------------------------------


def responses_use(tool: dict[str, Any]) -> Any:
    return responses_mcp.uses([("tools[0]", {"type": "mcp", "server_label": "web", **tool})],
                              CONFIG)[0]  # fmt: skip


def test_an_mcp_tool_reads_its_tools_approvals_and_headers() -> None:
    use = responses_use({
        "allowed_tools": ["echo", "add"], "headers": {"X-Team": "blue"},
        "authorization": "secret-token",
        "require_approval": {"never": {"tool_names": ["add"]}},
    })  # fmt: skip
    assert (use.where, use.label, use.server.id) == ("tools[0]", "web", "web")
    assert use.allowed == use.named == ("echo", "add")
    assert use.named_where.format(j=1, name="add") == "tools[0].allowed_tools[1]"
    # Names as HTTP compares them; each with the field it came in.
    assert use.headers == {"x-team": "blue", "authorization": "Bearer secret-token"}
    assert use.header_fields == {"x-team": "tools[0].headers.X-Team",
                                 "authorization": "tools[0].authorization"}  # fmt: skip
    assert (use.approval("echo"), use.approval("add")) == (True, False)


def test_the_defaults_allow_every_tool_and_ask_approval_for_each() -> None:
    use = responses_use({})
    assert (use.allowed, use.named, use.headers, use.denied) == (None, (), {}, frozenset())
    assert use.approval("anything") is True
    assert responses_use({"require_approval": "never"}).approval("anything") is False
    always = responses_use({"require_approval": {"always": {"tool_names": ["echo"]}}})
    assert always.approval("echo") and always.approval("add")


def test_allowed_tools_as_an_object() -> None:
    use = responses_use({"allowed_tools": {"tool_names": ["echo"], "read_only": True}})
    assert use.allowed == ("echo",)
    assert use.named_where.format(j=0, name="echo") == "tools[0].allowed_tools.tool_names[0]"


@pytest.mark.parametrize(
    ("tool", "field", "message"),
    [
        ({"connector_id": "x"}, "tools[0].connector_id", "is not a field of an mcp tool"),
        ({"server_label": ""}, "tools[0].server_label", "is required"),
        ({"server_label": 3}, "tools[0].server_label", "is required"),
        ({"server_url": 3}, "tools[0].server_url", "must be a string"),
        ({"headers": ["x"]}, "tools[0].headers", "must map header names to strings"),
        ({"headers": {"x": 1}}, "tools[0].headers.x", "must be a string"),
        ({"authorization": ""}, "tools[0].authorization", "must be a token"),
        ({"authorization": 5}, "tools[0].authorization", "must be a token"),
        ({"authorization": "b", "headers": {"Authorization": "Bearer a"}},
         "tools[0].authorization", "and headers.Authorization cannot both be given"),
        ({"authorization": "b", "headers": {"AUTHORIZATION": "Bearer a"}},
         "tools[0].authorization", "and headers.Authorization cannot both be given"),
        ({"allowed_tools": "echo"}, "tools[0].allowed_tools", "must list tool names"),
        ({"allowed_tools": [1]}, "tools[0].allowed_tools", "must list tool names"),
        ({"allowed_tools": {"names": []}}, "tools[0].allowed_tools",
         "takes tool_names and read_only"),
        ({"allowed_tools": {"tool_names": "x"}}, "tools[0].allowed_tools.tool_names",
         "must list tool names"),
        ({"require_approval": "sometimes"}, "tools[0].require_approval",
         "must be always, never or an object"),
        ({"require_approval": {"maybe": {}}}, "tools[0].require_approval",
         "must be always, never or an object"),
        ({"require_approval": {"never": {"tool_names": "add"}}},
         "tools[0].require_approval.never.tool_names", "must list tool names"),
        ({"require_approval": {"never": ["add"]}},
         "tools[0].require_approval.never.tool_names", "must list tool names"),
    ],
)  # fmt: skip
def test_a_bad_mcp_tool_is_refused_by_field(tool: dict[str, Any], field: str, message: str) -> None:
    assert refusal(lambda: responses_use(tool)) == (field, f"{field}: {message}")


# -- approvals --------------------------------------------------------------------------


def chain_tool(label: str, name: str) -> ChainTool:
    exposed = ExposedTool(f"{label}__{name}", label, name, {"name": f"{label}__{name}"})
    return ChainTool(spec_of(exposed), label, name, True, exposed)


TOOLSET = Toolset(tools={"web__echo": chain_tool("web", "echo")})
ASKED = {"id": "mcpr_1", "type": "mcp_approval_request", "server_label": "web", "name": "echo",
         "arguments": '{"text": "hi"}'}  # fmt: skip


def answer(request_id: str = "mcpr_1", approve: bool = True) -> dict[str, Any]:
    return {"type": "mcp_approval_response", "approval_request_id": request_id,
            "approve": approve}  # fmt: skip


def test_an_answer_to_a_stored_request_becomes_the_call_it_approves() -> None:
    (found,) = responses_mcp.approvals([ASKED], [answer()], TOOLSET)
    assert (found.request_id, found.approve, found.tool.name) == ("mcpr_1", True, "echo")
    assert (found.call.id, found.call.name, found.call.arguments) == (
        "call_mcpr_1", "web__echo", '{"text": "hi"}'
    )  # fmt: skip
    (denied,) = responses_mcp.approvals([], [ASKED, answer(approve=False)], TOOLSET)
    assert denied.approve is False


@pytest.mark.parametrize(
    ("history", "items", "field", "message"),
    [
        ([], [answer()], "input[0].approval_request_id",
         "answers no approval request ('mcpr_1')"),
        ([ASKED, answer()], [answer()], "input[0].approval_request_id",
         "'mcpr_1' is answered already"),
        ([ASKED, {"type": "mcp_call", "approval_request_id": "mcpr_1"}], [answer()],
         "input[0].approval_request_id", "'mcpr_1' is answered already"),
        ([ASKED], [{"type": "message"}, answer(), answer()], "input[2].approval_request_id",
         "'mcpr_1' is answered already"),
        ([{**ASKED, "name": "add"}], [answer()], "input[0].approval_request_id",
         "answers a call of 'add', which this request does not offer"),
        ([{**ASKED, "server_label": "other"}], [answer()], "input[0].approval_request_id",
         "answers a call of 'echo', which this request does not offer"),
    ],
)  # fmt: skip
def test_an_answer_must_answer_one_request_once(
    history: list[dict[str, Any]], items: list[dict[str, Any]], field: str, message: str
) -> None:
    assert refusal(lambda: responses_mcp.approvals(history, items, TOOLSET)) == (
        field, f"{field}: {message}"
    )  # fmt: skip


# -- Anthropic's MCP connector ---------------------------------------------------------


def messages_request(servers: list[Any], tools: list[Any]) -> service.CreateMessageRequest:
    body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}],
            "mcp_servers": servers, "tools": tools}  # fmt: skip
    message = service.CreateMessageRequest()
    codec.from_dict(body, message, strict=True)
    return message


SERVER = {"type": "url", "url": "gateway:web", "name": "web"}


def messages_use(toolset: dict[str, Any], server: dict[str, Any] = SERVER) -> Any:
    request = messages_request([server], [{"type": "mcp_toolset", "mcp_server_name": "web",
                                           **toolset}])  # fmt: skip
    return messages_mcp.uses(request, BETA, CONFIG)[0]


def test_a_toolset_enables_every_tool_less_those_its_configs_turn_off() -> None:
    use = messages_use({"configs": {"echo": {"enabled": False}, "add": {"enabled": True}}})
    assert (use.where, use.label, use.server.id, use.headers) == (
        "mcp_servers[0]",
        "web",
        "web",
        {},
    )
    assert (use.allowed, use.denied) == (None, frozenset({"echo"}))
    assert sorted(use.named) == ["add", "echo"]
    assert use.named_where.format(j=0, name="echo") == "tools[0].configs.echo"
    assert use.approval("echo") is False  # the connector has no approvals


def test_a_toolset_off_by_default_enables_only_what_its_configs_turn_on() -> None:
    use = messages_use({"default_config": {"enabled": False},
                        "configs": {"echo": {"enabled": True}, "add": {}}})  # fmt: skip
    assert (use.allowed, use.denied) == (("echo",), frozenset())
    assert sorted(use.named) == ["add", "echo"]
    on = messages_use({"default_config": {"enabled": False},
                       "configs": {"add": {"enabled": True}}})  # fmt: skip
    assert on.allowed == ("add",)
    assert on.named_where.format(j=0, name="add") == "tools[0].configs.add"


def test_a_config_that_says_nothing_follows_the_default() -> None:
    use = messages_use({"configs": {"add": {}}})
    assert (use.allowed, use.denied) == (None, frozenset())


def test_betas_are_a_comma_separated_list() -> None:
    request = messages_request([SERVER], [{"type": "mcp_toolset", "mcp_server_name": "web"}])
    headers = {"anthropic-beta": "files-api-2025-04-14,mcp-client-2025-11-20"}
    assert [u.label for u in messages_mcp.uses(request, headers, CONFIG)] == ["web"]


def test_a_token_goes_to_its_server_as_a_bearer() -> None:
    use = messages_use({}, {**SERVER, "url": WEB, "authorization_token": "tok"})
    assert use.headers == {"authorization": "Bearer tok"}
    assert use.header_fields == {"authorization": "mcp_servers[0].authorization_token"}
    assert (use.allowed, use.named, use.denied) == (None, (), frozenset())


def test_a_connector_server_names_a_configured_server_or_a_remote_by_its_name() -> None:
    untyped = {"url": WEB, "name": "web"}  # `type` defaults to url
    use = messages_use({}, untyped)
    assert (use.server.id, use.server.url) == ("web", WEB)
    request = messages_request([{"type": "url", "url": REMOTE, "name": "partner"}],
                               [{"type": "mcp_toolset", "mcp_server_name": "partner"}])  # fmt: skip
    (remote,) = messages_mcp.uses(request, BETA, CONFIG)
    assert (remote.label, remote.server.id, remote.server.url) == ("partner", "partner", REMOTE)


@pytest.mark.parametrize(
    ("server", "field", "message"),
    [
        ({"url": "https://else.example.com/mcp"}, "mcp_servers[0].url",
         "'https://else.example.com/mcp' is not a configured MCP server (mcp.remote_urls lists "
         "the others a request may name)"),
        ({"url": REMOTE, "name": "Bad Name"}, "mcp_servers[0].name",
         "must match [a-z0-9-]{1,24}"),
        ({"url": REMOTE}, "mcp_servers[0].name",
         "'web' is a configured MCP server's id: a remote one needs a label of its own"),
        ({"authorization_token": "tok"}, "mcp_servers[0].authorization_token",
         "is for the gateway's own MCP server 'web', which the gateway calls with its "
         "configured credentials: it takes no headers"),
    ],
)  # fmt: skip
def test_a_connector_server_is_refused_by_its_own_fields(
    server: dict[str, Any], field: str, message: str
) -> None:
    given = {**SERVER, **server}
    request = messages_request([given], [{"type": "mcp_toolset", "mcp_server_name": given["name"]}])
    assert refusal(lambda: messages_mcp.uses(request, BETA, CONFIG)) == (
        field, f"{field}: {message}"
    )  # fmt: skip


def test_the_earlier_beta_reads_tool_configuration() -> None:
    earlier = {"anthropic-beta": "other-beta, mcp-client-2025-04-04"}
    server = {**SERVER, "tool_configuration": {"allowed_tools": ["echo"]}}
    (use,) = messages_mcp.uses(messages_request([server], []), earlier, CONFIG)
    assert use.allowed == use.named == ("echo",)
    assert use.named_where.format(j=0, name="echo") == (
        "mcp_servers[0].tool_configuration.allowed_tools[0]"
    )  # fmt: skip
    off = {**SERVER, "tool_configuration": {"enabled": False}}
    (none,) = messages_mcp.uses(messages_request([off], []), earlier, CONFIG)
    assert none.allowed == ()
    (every,) = messages_mcp.uses(messages_request([SERVER], []), earlier, CONFIG)
    assert every.allowed is None
    bare = {**SERVER, "tool_configuration": {"enabled": True}}
    (all_of_it,) = messages_mcp.uses(messages_request([bare], []), earlier, CONFIG)
    assert all_of_it.allowed is None


@pytest.mark.parametrize(
    ("servers", "tools", "headers", "field", "message"),
    [
        ([SERVER], [], {}, "mcp_servers",
         "needs the anthropic-beta header to name mcp-client-2025-11-20"),
        ([SERVER], [], BETA, "mcp_servers[0]", "no mcp_toolset tool names 'web'"),
        ([SERVER], [{"type": "mcp_toolset", "mcp_server_name": "web", "x": 1}], BETA,
         "tools[0].x", "is not a field of a toolset"),
        ([SERVER], [{"type": "mcp_toolset"}], BETA, "tools[0].mcp_server_name", "is required"),
        ([SERVER], [{"type": "mcp_toolset", "mcp_server_name": "web"},
                    {"type": "mcp_toolset", "mcp_server_name": "web"}], BETA,
         "tools[1].mcp_server_name", "'web' has a toolset already"),
        ([SERVER], [{"type": "mcp_toolset", "mcp_server_name": "web"},
                    {"type": "mcp_toolset", "mcp_server_name": "gone"}], BETA,
         "tools[1].mcp_server_name", "names no server of mcp_servers ('gone')"),
        ([{**SERVER, "extra": 1}], [], BETA, "mcp_servers[0].extra",
         "is not a field of an MCP server"),
        ([{**SERVER, "type": "stdio"}], [], BETA, "mcp_servers[0].type", "must be url"),
        ([{**SERVER, "name": ""}], [], BETA, "mcp_servers[0].name", "is required"),
        ([{**SERVER, "url": ""}], [], BETA, "mcp_servers[0].url", "is required"),
        ([{**SERVER, "authorization_token": ""}], [], BETA,
         "mcp_servers[0].authorization_token", "must be a token"),
        ([SERVER], [{"type": "mcp_toolset", "mcp_server_name": "web", "default_config": 1}],
         BETA, "tools[0].default_config", "must be an object"),
        ([SERVER], [{"type": "mcp_toolset", "mcp_server_name": "web", "configs": [1]}],
         BETA, "tools[0].configs", "must map tool names to configs"),
        ([SERVER], [{"type": "mcp_toolset", "mcp_server_name": "web", "configs": {"a": 1}}],
         BETA, "tools[0].configs.a", "must be an object"),
    ],
)  # fmt: skip
def test_a_bad_connector_is_refused_by_field(
    servers: list[Any], tools: list[Any], headers: dict[str, str], field: str, message: str
) -> None:
    request = messages_request(servers, tools)
    assert refusal(lambda: messages_mcp.uses(request, headers, CONFIG)) == (
        field, f"{field}: {message}"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("configuration", "field", "message"),
    [
        (1, "mcp_servers[0].tool_configuration", "must be an object"),
        ({"allowed_tools": "echo"}, "mcp_servers[0].tool_configuration.allowed_tools",
         "must list tool names"),
        ({"allowed_tools": [1]}, "mcp_servers[0].tool_configuration.allowed_tools",
         "must list tool names"),
    ],
)  # fmt: skip
def test_a_bad_tool_configuration_is_refused_by_field(
    configuration: Any, field: str, message: str
) -> None:
    request = messages_request([{**SERVER, "tool_configuration": configuration}], [])
    earlier = {"anthropic-beta": "mcp-client-2025-04-04"}
    assert refusal(lambda: messages_mcp.uses(request, earlier, CONFIG)) == (
        field, f"{field}: {message}"
    )  # fmt: skip


# -- the chain's arithmetic ------------------------------------------------------------


def test_a_result_as_text() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image", "data": "x"},
             {"type": "text", "text": "b"}]  # fmt: skip
    assert result_text({"content": parts}) == 'a\n{"type": "image", "data": "x"}\nb'
    assert result_text({"content": [], "structuredContent": {"sum": 3}}) == '{"sum": 3}'
    assert result_text({}) == ""
    assert result_text({"content": [{"type": "text"}]}) == ""


def test_what_the_model_reads_of_a_call() -> None:
    tool = TOOLSET.tools["web__echo"]
    assert fed_text(CallEnded("c", tool, "{}", "completed", output="hi")) == "hi"
    assert fed_text(CallEnded("c", tool, "{}", "completed")) == ""
    failed = CallEnded("c", tool, "{}", "failed", error=ToolError("tool", "it broke"))
    assert fed_text(failed) == "Error: it broke"


def test_a_listed_tool_as_a_function() -> None:
    exposed = ExposedTool("web__add", "web", "add", {
        "name": "web__add", "description": "Adds.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}},
    })  # fmt: skip
    spec = spec_of(exposed)
    assert (spec.name, spec.description) == ("web__add", "Adds.")
    assert spec.parameters == {"type": "object", "properties": {"a": {"type": "integer"}}}
    bare = spec_of(ExposedTool("web__x", "web", "x", {"name": "web__x", "description": 3}))
    assert bare.parameters == {"type": "object", "properties": {}}
    assert bare.description is None


def test_usages_sum_field_by_field_but_the_first_token_time() -> None:
    first = usage_pb2.Usage(prompt_tokens=10, completion_tokens=2, total_tokens=12,
                            total_cost_usd=0.5, latency_ms=3.0, ttft_ms=1.0)  # fmt: skip
    first.prompt_tokens_details.cached_tokens = 4
    second = usage_pb2.Usage(prompt_tokens=20, completion_tokens=3, total_tokens=23,
                             input_cost_usd=0.25, total_cost_usd=0.75, latency_ms=5.0,
                             ttft_ms=9.0, response_cached=True)  # fmt: skip
    second.prompt_tokens_details.cached_tokens = 6
    summed = sum_usage([first, second])
    assert (summed.prompt_tokens, summed.completion_tokens, summed.total_tokens) == (30, 5, 35)
    assert (summed.total_cost_usd, summed.input_cost_usd) == (1.25, 0.25)
    assert (summed.latency_ms, summed.ttft_ms) == (8.0, 1.0)
    assert summed.prompt_tokens_details.cached_tokens == 10
    assert not summed.response_cached
    assert sum_usage([]) == usage_pb2.Usage()
    assert sum_usage([first]) == first
