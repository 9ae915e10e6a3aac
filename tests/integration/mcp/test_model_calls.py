"""MCP tools inside model calls, run by the gateway for every model: the Responses
API's `mcp` tool and Anthropic's MCP connector, through the openai, Agents and anthropic
SDKs, against the embedded default's simulated models (which call the tools the
question names and answer once the results are in) and a real MCP server."""

from __future__ import annotations

import json

import grpc
import httpx
import openai
import pytest
from gateway.v1 import responses_pb2 as rpb
from gateway.v1 import responses_service_pb2 as rs
from gateway.v1 import responses_service_pb2_grpc
from google.protobuf import struct_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from server.ops import tracing
from tests.support.gateways import running_gateway
from tests.support.mcp.upstreams import ALICE, BOB, NOBODY, http_upstream, mcp_config
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import serving
from tests.support.upstreams.config import model, provider
from tests.support.upstreams.openai import OpenAIWire
from tests.support.upstreams.shapes import ARGUMENTS

CAROL = "gw-mcp-carol-key-0000000"  # a budget that runs out mid-chain
NEVER = "never"


def config(url: str) -> dict:
    data = mcp_config(url, max_rounds=3)
    data["keys"].append(
        {"name": "carol", "kind": "api", "secret": CAROL, "mcp_tools": ["web__*"],
         "budget_usd": 0.0035}
    )  # fmt: skip
    return data


@pytest.fixture(scope="module")
async def gw():
    async with http_upstream() as url, running_gateway(config(url)) as running:
        yield running


def sdk(gw, key: str = ALICE) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=key, max_retries=0
    )


def web(approval: object = NEVER, **more: object) -> dict:
    return {"type": "mcp", "server_label": "web", "require_approval": approval, **more}


async def rows(gw, response_id: str) -> list[dict]:
    await gw.gateway.accounts.ledger.flush()
    found = await gw.gateway.store.db.fetch(
        "SELECT method, model, mcp_server, mcp_tool, mcp_outcome, prompt_tokens, "
        "completion_tokens, total_cost_usd, status, error_reason FROM usage_records "
        "WHERE response_id = ? ORDER BY id", response_id,
    )  # fmt: skip
    return [dict(r) for r in found]


async def test_a_call_runs_in_the_gateway_and_the_model_answers_with_its_result(gw) -> None:
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="Please echo the word hello", tools=[web()]
        )
    kinds = [item.type for item in response.output]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"]
    listed, call, message = response.output
    assert {t.name for t in listed.tools} >= {"echo", "add"}
    assert "web__echo" not in {t.name for t in listed.tools}  # the server's own names
    assert (call.server_label, call.name, call.status) == ("web", "echo", "completed")
    assert call.output.startswith("tests:") and call.error is None
    assert message.content[0].text.startswith("(simulated)")
    assert response.status == "completed"


async def test_three_calls_are_five_rows_that_sum_to_the_usage(gw) -> None:
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="echo hello, add 2 and 3, and whoami", tools=[web()]
        )
    calls = [item for item in response.output if item.type == "mcp_call"]
    assert sorted(c.name for c in calls) == ["add", "echo", "whoami"]
    found = await rows(gw, response.id)
    models = [r for r in found if r["method"] == "CreateResponse"]
    tools = [r for r in found if r["method"] == "CallTool"]
    assert len(models) == 2 and len(tools) == 3
    assert sorted(r["mcp_tool"] for r in tools) == ["add", "echo", "whoami"]
    assert all(r["mcp_outcome"] == "ok" for r in tools)
    usage = response.usage
    assert sum(r["prompt_tokens"] for r in models) == usage.input_tokens
    assert sum(r["completion_tokens"] for r in models) == usage.output_tokens
    spent = sum(r["total_cost_usd"] for r in models)
    assert spent == pytest.approx(usage.model_extra["total_cost_usd"], abs=1e-12)
    tool_cost = sum(r["total_cost_usd"] for r in tools)
    assert tool_cost == pytest.approx(3 * 0.002)


async def test_a_stream_carries_the_mcp_events_in_order(gw) -> None:
    async with (
        sdk(gw) as client,
        client.responses.stream(
            model="sim-mini", input="Please echo the word hello", tools=[web()]
        ) as stream,
    ):
        types = [event.type async for event in stream]
        final = await stream.get_final_response()
    expected = [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed", "response.output_item.done",
        "response.output_item.added", "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
        "response.mcp_call.completed", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]] == expected
    assert [item.type for item in final.output] == ["mcp_list_tools", "mcp_call", "message"]
    found = await rows(gw, final.id)
    assert sorted(r["method"] for r in found) == ["CallTool", "StreamResponse", "StreamResponse"]


@pytest.mark.parametrize("approve", [True, False])
async def test_an_approval_request_continues_approved_or_denied(gw, approve: bool) -> None:
    async with sdk(gw) as client:
        asked = await client.responses.create(
            model="sim-mini", input="Please echo the word hello", tools=[web("always")]
        )
        assert [i.type for i in asked.output] == ["mcp_list_tools", "mcp_approval_request"]
        request = asked.output[1]
        assert (request.server_label, request.name) == ("web", "echo")
        answer = {"type": "mcp_approval_response", "approval_request_id": request.id,
                  "approve": approve}  # fmt: skip
        went_on = await client.responses.create(
            model="sim-mini", previous_response_id=asked.id, input=[answer],
            tools=[web("always")],
        )  # fmt: skip
        kinds = [i.type for i in went_on.output]
        if approve:
            assert kinds == ["mcp_list_tools", "mcp_call", "message"]
            call = went_on.output[1]
            assert call.approval_request_id == request.id and call.output.startswith("tests:")
        else:
            assert kinds == ["mcp_list_tools", "message"]
        found = await rows(gw, went_on.id)
        assert [r["method"] for r in found].count("CallTool") == (1 if approve else 0)
        # The same answer again answers a request already answered.
        with pytest.raises(openai.BadRequestError) as again:
            await client.responses.create(
                model="sim-mini", previous_response_id=went_on.id, input=[answer],
                tools=[web("always")],
            )  # fmt: skip
    assert again.value.body["param"] == "input[0].approval_request_id"


async def test_approvals_per_tool_name(gw) -> None:
    approval = {"never": {"tool_names": ["add"]}}
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="echo hello and add 1 and 2", tools=[web(approval)]
        )
    kinds = {(i.type, getattr(i, "name", None)) for i in response.output}
    assert ("mcp_call", "add") in kinds and ("mcp_approval_request", "echo") in kinds


async def test_a_tool_failing_is_an_error_item_and_the_chain_goes_on(gw) -> None:
    local = {"type": "mcp", "server_label": "local", "require_approval": "never"}
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="fail please", tools=[local]
        )
        died = await client.responses.create(model="sim-mini", input="die now", tools=[local])
        timed_out = await client.responses.create(
            model="sim-mini", input="slow down",
            tools=[web(allowed_tools=["slow"])],
        )  # fmt: skip
    call = response.output[1]
    assert call.type == "mcp_call" and call.status == "failed"
    assert call.error.type == "mcp_tool_execution_error"
    assert response.output[-1].type == "message"
    crashed = died.output[1]
    assert crashed.status == "failed" and crashed.error.type == "mcp_protocol_error"
    assert died.output[-1].type == "message" and died.status == "completed"
    assert timed_out.output[-1].type == "message"


async def test_the_round_limit_ends_the_response_incomplete(gw) -> None:
    # Each round the model calls the tool the question names; the results never make
    # it stop when a tool is required, so the third round is cut by mcp.max_rounds.
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="echo hello", tools=[web()], tool_choice="required"
        )
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_tool_calls"
    calls = [i for i in response.output if i.type == "mcp_call"]
    assert [c.status for c in calls][-1] == "incomplete"
    found = await rows(gw, response.id)
    assert [r["method"] for r in found].count("CreateResponse") == 3


async def test_a_budget_running_out_mid_chain_stops_it_with_the_items_so_far(gw) -> None:
    async with (
        sdk(gw, CAROL) as client,
        client.responses.stream(
            model="sim-mini", input="echo hello, add 2 and 3, and whoami", tools=[web()]
        ) as stream,
    ):
        events = [event async for event in stream]
    failed = events[-1]
    assert failed.type == "response.failed"
    assert failed.response.error.code == "rate_limit_exceeded"
    assert failed.response.output[0].type == "mcp_list_tools"
    found = await rows(gw, failed.response.id)
    refused = [r for r in found if r["error_reason"] == "BUDGET_EXHAUSTED"]
    assert refused and refused[0]["method"] == "CallTool"


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        ({"type": "mcp", "server_label": "nowhere"}, "tools[0].server_label"),
        (web(allowed_tools=["echo", "nothing"]), "tools[0].allowed_tools[1]"),
        ({**web(), "server_url": "https://example.com/mcp"}, "tools[0].server_url"),
        (web(require_approval="sometimes"), "tools[0].require_approval"),
    ],
)
async def test_bad_mcp_tools_are_refused_by_field(gw, tool: dict, field: str) -> None:
    async with sdk(gw) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(model="sim-mini", input="echo hi", tools=[tool])
    assert refused.value.body["param"] == field


async def test_a_tool_not_granted_is_refused_and_an_ungranted_key_sees_none(gw) -> None:
    async with sdk(gw, BOB) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(
                model="sim-mini", input="whoami", tools=[web(allowed_tools=["whoami"])]
            )
    assert refused.value.body["param"] == "tools[0].allowed_tools[0]"
    async with sdk(gw, NOBODY) as client:
        response = await client.responses.create(model="sim-mini", input="echo hi", tools=[web()])
    assert [i.type for i in response.output] == ["mcp_list_tools", "message"]
    assert response.output[0].tools == []


async def test_the_gateway_url_and_the_server_url_name_the_configured_server(gw) -> None:
    own = f"http://127.0.0.1:{gw.http_port}/mcp/web"
    async with sdk(gw) as client:
        for url in (own, "gateway:web"):
            response = await client.responses.create(
                model="sim-mini", input="echo hello", tools=[web(server_url=url)]
            )
            assert response.output[1].type == "mcp_call"


async def test_the_agents_sdk_hosted_mcp_tool(gw) -> None:
    from agents import Agent, HostedMCPTool, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    client = sdk(gw)
    agent = Agent(
        name="assistant",
        instructions="Use the tools.",
        model=OpenAIResponsesModel(model="sim-mini", openai_client=client),
        tools=[HostedMCPTool(tool_config=web())],
    )
    result = await Runner.run(agent, "Please echo hello", max_turns=3)
    kinds = [getattr(item.raw_item, "type", None) for item in result.new_items]
    assert kinds == ["mcp_list_tools", "mcp_call", "message"]
    assert str(result.final_output).startswith("(simulated)")


async def test_the_anthropic_sdk_mcp_connector(gw) -> None:
    import anthropic

    client = anthropic.AsyncAnthropic(
        base_url=f"http://127.0.0.1:{gw.http_port}", api_key=ALICE, max_retries=0
    )
    servers = [{"type": "url", "url": "gateway:web", "name": "web"}]
    tools = [{"type": "mcp_toolset", "mcp_server_name": "web",
              "configs": {"whoami": {"enabled": False}}}]  # fmt: skip
    async with client:
        message = await client.beta.messages.create(
            model="sim-mini", max_tokens=200, mcp_servers=servers, tools=tools,
            messages=[{"role": "user", "content": "Please echo hello"}],
            betas=["mcp-client-2025-11-20"],
        )  # fmt: skip
        kinds = [block.type for block in message.content]
        assert kinds == ["mcp_tool_use", "mcp_tool_result", "text"]
        use, result = message.content[0], message.content[1]
        assert (use.name, use.server_name) == ("echo", "web")
        assert result.tool_use_id == use.id and not result.is_error
        assert result.content[0].text.startswith("tests:")
        async with client.beta.messages.stream(
            model="sim-mini", max_tokens=200, mcp_servers=servers, tools=tools,
            messages=[{"role": "user", "content": "Please echo hello"}],
            betas=["mcp-client-2025-11-20"],
        ) as stream:  # fmt: skip
            final = await stream.get_final_message()
        assert [b.type for b in final.content] == kinds
        rows_of = await rows(gw, message.id)
        assert sorted(r["method"] for r in rows_of) == [
            "CallTool",
            "CreateMessage",
            "CreateMessage",
        ]
        assert message.usage.output_tokens == sum(r["completion_tokens"] for r in rows_of)
        with pytest.raises(anthropic.BadRequestError) as refused:
            await client.messages.create(
                model="sim-mini", max_tokens=200, tools=tools,  # type: ignore[list-item]
                messages=[{"role": "user", "content": "Please echo hello"}],
                extra_body={"mcp_servers": servers},
            )  # fmt: skip
    assert "mcp_servers" in str(refused.value)


@pytest.mark.parametrize(
    ("servers", "tools", "field"),
    [
        ([{"type": "url", "url": "http://169.254.169.254/mcp", "name": "web"}],
         [{"type": "mcp_toolset", "mcp_server_name": "web"}], "mcp_servers[0].url"),
        ([{"type": "url", "url": "gateway:web", "name": "web"}],
         [{"type": "mcp_toolset", "mcp_server_name": "other"}], "mcp_servers[0]"),
        ([{"type": "url", "url": "gateway:web", "name": "web"}],
         [{"type": "mcp_toolset", "mcp_server_name": "web",
           "configs": {"nothing": {"enabled": True}}}], "tools[0].configs.nothing"),
    ],
)  # fmt: skip
async def test_bad_mcp_servers_are_refused_by_field(
    gw, servers: list, tools: list, field: str
) -> None:
    body = {"model": "sim-mini", "max_tokens": 50, "mcp_servers": servers, "tools": tools,
            "messages": [{"role": "user", "content": "echo hi"}]}  # fmt: skip
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"http://127.0.0.1:{gw.http_port}/v1/messages", json=body,
            headers={"x-api-key": ALICE, "anthropic-beta": "mcp-client-2025-11-20",
                     "anthropic-version": "2023-06-01"},
        )  # fmt: skip
    assert reply.status_code == 400
    assert reply.json()["error"]["message"].startswith(field + ":")


async def test_a_remote_url_only_when_the_config_lists_it(gw) -> None:
    url = gw.gateway.live.current.config.mcp.server("web").url
    async with http_upstream() as other:
        tool = {"type": "mcp", "server_label": "elsewhere", "server_url": other,
                "require_approval": "never", "authorization": "caller-token"}  # fmt: skip
        async with sdk(gw) as client:
            with pytest.raises(openai.BadRequestError) as refused:
                await client.responses.create(model="sim-mini", input="echo", tools=[tool])
        assert refused.value.body["param"] == "tools[0].server_url"
        data = config(url)
        data["mcp"]["remote_urls"] = [other]
        data["keys"][0]["mcp_tools"].append("elsewhere__*")
        async with running_gateway(data) as second, sdk(second) as client:
            response = await client.responses.create(
                model="sim-mini", input="Please call headers", tools=[tool]
            )
    call = next(i for i in response.output if i.type == "mcp_call")
    assert call.server_label == "elsewhere" and "caller-token" in call.output


async def test_rest_answers_carry_the_items_for_raw_http_callers(gw) -> None:
    body = {"model": "sim-mini", "input": "echo hi", "tools": [web()], "store": False}
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            f"http://127.0.0.1:{gw.http_port}/v1/responses", json=body,
            headers={"authorization": f"Bearer {ALICE}"},
        )  # fmt: skip
    assert reply.status_code == 200
    call = reply.json()["output"][1]
    assert call["type"] == "mcp_call" and call["error"] is None


def output_tokens_metric(gw) -> float:
    text = gw.gateway.render_metrics().decode()  # what /metrics answers
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("gen_ai_client_token_usage_sum{") and 'token_type="output"' in line
    )


async def test_one_trace_holds_a_span_per_round_and_per_call_and_metrics_count_all() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        async with http_upstream() as url, running_gateway(config(url)) as traced:
            async with sdk(traced) as client:
                response = await client.responses.create(
                    model="sim-mini", input="echo hello and add 2 and 3", tools=[web()]
                )
            counted = output_tokens_metric(traced)
    finally:
        tracing.enable(None)
    finished = exporter.get_finished_spans()
    rounds = [s for s in finished if s.name == "gateway.mcp.round"]
    calls = [s for s in finished if s.name.startswith("execute_tool web__")]
    assert len(rounds) == 2 and len(calls) == 2
    assert len({s.context.trace_id for s in (*rounds, *calls)}) == 1
    assert {dict(s.attributes or {})["gateway.response_id"] for s in rounds} == {response.id}
    assert counted == response.usage.output_tokens


async def test_a_stored_chain_is_replayed_to_the_model_on_continuation(gw) -> None:
    async with sdk(gw) as client:
        first = await client.responses.create(
            model="sim-mini", input="Please echo the word hello", tools=[web()]
        )
        again = await client.responses.create(
            model="sim-mini", previous_response_id=first.id, input="thanks",
        )  # fmt: skip
        items = await client.responses.input_items.list(again.id)
        stored = await client.responses.retrieve(first.id)
        fresh = await client.responses.create(model="sim-mini", input="thanks")
    # The continuation's prompt holds the call and its result besides the question.
    assert again.usage.input_tokens > fresh.usage.input_tokens + 20
    assert [i.type for i in items.data] == ["message"]
    assert [i.type for i in stored.output] == ["mcp_list_tools", "mcp_call", "message"]


async def test_a_whole_response_whose_budget_runs_out_is_the_usual_429(gw) -> None:
    async with sdk(gw, CAROL) as client:
        with pytest.raises(openai.RateLimitError) as refused:
            await client.responses.create(
                model="sim-mini", input="echo hello, add 2 and 3, and whoami", tools=[web()]
            )
    assert refused.value.body["code"] == "budget_exhausted"


async def test_an_approval_answering_no_request_is_refused(gw) -> None:
    answer = {"type": "mcp_approval_response", "approval_request_id": "mcpr_nothing",
              "approve": True}  # fmt: skip
    async with sdk(gw) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(
                model="sim-mini", input=[{"role": "user", "content": "echo"}, answer],
                tools=[web()],
            )  # fmt: skip
    assert refused.value.body["param"] == "input[1].approval_request_id"


async def test_over_grpc_the_items_and_events_are_typed_as_other(gw) -> None:
    tool = struct_pb2.Struct()
    tool.update(web())
    request = rs.StreamResponseRequest(
        model="sim-mini", input_items=[rpb.InputItem(role="user", content="echo hello")],
        tools=[tool],
    )  # fmt: skip
    metadata = (("x-api-key", ALICE),)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        stub = responses_service_pb2_grpc.ResponsesServiceStub(channel)
        events = [e async for e in stub.StreamResponse(request, metadata=metadata)]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    progress = next(e for e in events if e.type == "response.mcp_call.completed")
    assert progress.WhichOneof("event") == "other" and "item_id" in progress.other
    final = events[-1].response_event.response
    kinds = [item.other["type"] for item in final.output if item.WhichOneof("kind") == "other"]
    assert kinds == ["mcp_list_tools", "mcp_call"]


async def test_an_approval_given_with_the_items_replayed_without_storage(gw) -> None:
    async with sdk(gw) as client:
        asked = await client.responses.create(
            model="sim-mini", input="Please echo the word hello", tools=[web("always")],
            store=False,
        )  # fmt: skip
        request = asked.output[-1]
        replayed = [
            {"role": "user", "content": "Please echo the word hello"},
            *(item.model_dump(exclude_none=True) for item in asked.output),
            {"type": "mcp_approval_response", "approval_request_id": request.id,
             "approve": True},
        ]  # fmt: skip
        went_on = await client.responses.create(
            model="sim-mini", input=replayed, tools=[web("always")], store=False
        )
    assert [i.type for i in went_on.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert went_on.output[1].approval_request_id == request.id


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_the_chain_over_strict_upstreams_of_each_wire_format(fmt: str) -> None:
    """The fakes refuse what the real APIs refuse (a tool result answering no call, a
    call without an id...): every round the chain sends is a valid conversation."""
    wire = OpenAIWire() if fmt == "openai" else AnthropicWire()
    async with http_upstream() as url, serving(wire) as fake:
        data = config(url)
        data["models"].append(model("fake-model", provider("fake-p", fmt, fake.url)))
        async with running_gateway(data) as running, sdk(running) as client:
            response = await client.responses.create(
                model="fake-model", input="echo", tools=[web(allowed_tools=["echo"])]
            )
    assert not fake.problems, fake.problems
    kinds = [i.type for i in response.output]  # Anthropic's fake writes a line first
    assert kinds[0] == "mcp_list_tools" and kinds[-1] == "message"
    (call,) = [i for i in response.output if i.type == "mcp_call"]
    assert (call.name, call.arguments) == ("echo", json.dumps(ARGUMENTS))
    first, second = (seen.body for seen in fake.seen)
    assert len(second["messages"]) == len(first["messages"]) + 2
    made, result = second["messages"][-2:]
    if fmt == "openai":
        assert made["role"] == "assistant" and result["role"] == "tool"
        assert result["tool_call_id"] == made["tool_calls"][0]["id"]
        assert made["tool_calls"][0]["function"]["name"] == "web__echo"
    else:
        assert (made["role"], result["role"]) == ("assistant", "user")
        assert result["content"][0]["tool_use_id"] == made["content"][-1]["id"]
