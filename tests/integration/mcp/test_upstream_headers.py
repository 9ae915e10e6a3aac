"""What a caller's headers for an upstream MCP server may be, seen from the server: a
raw-socket server that keeps every header line and request it receives. A header that
is not a valid HTTP field, or that the gateway sets itself, is a 400 naming it and
reaches nothing; the gateway's own `/mcp/{server}` takes no headers; no header carries
a key of the gateway; a remote server cannot take a configured one's name; a stdio
server takes no headers and keeps its one child; the result bound is exact."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Any

import anthropic
import grpc
import openai
import pytest
from gateway.v1 import responses_pb2 as rpb
from gateway.v1 import responses_service_pb2 as rs
from gateway.v1 import responses_service_pb2_grpc
from google.protobuf import struct_pb2
from mcp.shared.exceptions import MCPError

from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import details
from tests.support.mcp.raw import raw_mcp_server
from tests.support.mcp.upstreams import ALICE, BOB, mcp_config, sdk_client, stdio_children

os.environ.setdefault("GW_TEST_RAW_TOKEN", "Bearer raw-configured")
NEVER = "never"
# A token shaped like a stored key that no store holds.
KEYLIKE = "gw-api-" + "A" * 43


def config(web: str, partner: str) -> dict[str, Any]:
    """`web` is the raw server (with its configured credential), `local` the SDK's over
    stdio, and `partner` a remote the config allows."""
    data = mcp_config(web, remote_urls=[partner])
    data["mcp"]["servers"][0]["headers"] = {"Authorization": "GW_TEST_RAW_TOKEN"}
    data["keys"][0]["mcp_tools"].append("partner__*")
    return data


@pytest.fixture(scope="module")
async def servers():
    async with (
        raw_mcp_server() as web,
        raw_mcp_server() as partner,
        running_gateway(config(web.url, partner.url)) as gw,
    ):
        yield gw, web, partner


@pytest.fixture
def gw(servers):
    gw, web, partner = servers
    web.requests.clear()
    partner.requests.clear()
    return gw


@pytest.fixture
def web(servers):
    return servers[1]


@pytest.fixture
def partner(servers):
    return servers[2]


def sdk(gw, key: str = ALICE) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{gw.http_port}/v1", api_key=key, max_retries=0
    )


def tool(label: str = "web", **more: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": label, "require_approval": NEVER, **more}


async def refused(gw, tools: list[dict[str, Any]], key: str = ALICE) -> dict[str, Any]:
    """The 400 a Responses request with `tools` gets."""
    async with sdk(gw, key) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.responses.create(model="sim-mini", input="echo hi", tools=tools)
    assert caught.value.body["type"] == "invalid_request_error"
    return caught.value.body


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert "Traceback" not in caplog.text


BAD = "tools[0].headers"
TOO_MANY = {f"X-H{i}": "v" for i in range(33)}


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"headers": {"X-Probe": "a\r\nX-Injected: 1"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": "a\nX-Injected: 1"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": "a\rX-Injected: 1"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": "a\r\n\r\nPOST /smuggled HTTP/1.1\r\nhost: x\r\n\r\n"}},
         f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": "nul\x00"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": "del\x7f"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": "next\x85line"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": "雪"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": " padded"}}, f"{BAD}.X-Probe"),
        ({"headers": {"X-Probe": 7}}, f"{BAD}.X-Probe"),
        ({"headers": {"X Probe": "v"}}, f"{BAD}.X Probe"),
        ({"headers": {"X-Probe:": "v"}}, f"{BAD}.X-Probe:"),
        ({"headers": {"Host": "elsewhere.example"}}, f"{BAD}.Host"),
        ({"headers": {"Content-Length": "0"}}, f"{BAD}.Content-Length"),
        ({"headers": {"Transfer-Encoding": "chunked"}}, f"{BAD}.Transfer-Encoding"),
        ({"headers": {"Connection": "close"}}, f"{BAD}.Connection"),
        ({"headers": {"Upgrade": "h2c"}}, f"{BAD}.Upgrade"),
        ({"headers": {"TE": "trailers"}}, f"{BAD}.TE"),
        ({"headers": {"Keep-Alive": "timeout=5"}}, f"{BAD}.Keep-Alive"),
        ({"headers": {"Proxy-Authorization": "Basic eA=="}}, f"{BAD}.Proxy-Authorization"),
        ({"headers": {"Mcp-Session-Id": "someone-elses"}}, f"{BAD}.Mcp-Session-Id"),
        ({"headers": {"MCP-Protocol-Version": "2024-11-05"}}, f"{BAD}.MCP-Protocol-Version"),
        ({"headers": {"Accept": "text/html"}}, f"{BAD}.Accept"),
        ({"headers": {"Content-Type": "text/plain"}}, f"{BAD}.Content-Type"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, f"{BAD}.x-a"),
        ({"headers": TOO_MANY}, BAD),
        ({"headers": {"X-A": "a" * 9000, "X-B": "b" * 9000}}, f"{BAD}.X-B"),
        ({"headers": ["X-A", "1"]}, BAD),
        ({"authorization": "tok\r\nX-Injected: 1"}, "tools[0].authorization"),
        ({"authorization": "雪"}, "tools[0].authorization"),
        ({"authorization": "x" * 17000}, "tools[0].authorization"),
        ({"authorization": "b", "headers": {"Authorization": "Bearer a"}},
         "tools[0].authorization"),
    ],
)  # fmt: skip
async def test_a_header_that_is_no_valid_field_is_refused_by_name_and_reaches_nothing(
    gw, web, caplog, given: dict[str, Any], field: str
) -> None:
    caplog.set_level(logging.DEBUG)
    body = await refused(gw, [tool(**given)])
    assert body["param"] == field
    assert body["message"].startswith(f"{field}: ")
    assert web.requests == []
    no_traceback(caplog)


async def test_over_grpc_and_the_messages_api_alike(gw, web, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    given = struct_pb2.Struct()
    given.update(tool(headers={"X-Probe": "a\r\nX-Injected: 1"}))
    request = rs.CreateResponseRequest(
        model="sim-mini", input_items=[rpb.InputItem(role="user", content="echo hello")],
        tools=[given],
    )  # fmt: skip
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        stub = responses_service_pb2_grpc.ResponsesServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateResponse(request, metadata=(("x-api-key", ALICE),))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(caught.value)["ErrorInfo"].metadata["field"] == "tools[0].headers.X-Probe"
    client = anthropic.AsyncAnthropic(
        base_url=f"http://127.0.0.1:{gw.http_port}", api_key=ALICE, max_retries=0
    )
    async with client:
        for token in ("tok\r\nX-Injected: 1", "雪", "nul\x00"):
            with pytest.raises(anthropic.BadRequestError) as bad:
                await client.beta.messages.create(
                    model="sim-mini", max_tokens=50,
                    mcp_servers=[{"type": "url", "url": web.url, "name": "web",
                                  "authorization_token": token}],
                    tools=[{"type": "mcp_toolset", "mcp_server_name": "web"}],
                    messages=[{"role": "user", "content": "echo hi"}],
                    betas=["mcp-client-2025-11-20"],
                )  # fmt: skip
            message = bad.value.body["error"]["message"]
            assert message.startswith("mcp_servers[0].authorization_token: ")
    assert web.requests == []
    no_traceback(caplog)


async def test_valid_headers_arrive_once_each_as_given(gw, web) -> None:
    headers = {"X-Tenant": "acme café", "X-Note": "a\tb", "X-Empty": ""}
    given = tool(server_url=web.url, headers=headers, authorization="caller-token")
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="Please echo hello", tools=[given]
        )
    assert [i.type for i in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert web.requests and all(r.line == "POST /mcp HTTP/1.1" for r in web.requests)
    for received in web.requests:
        assert received.values("x-tenant") == ["acme café"]
        assert received.values("x-note") == ["a\tb"]
        assert received.values("x-empty") == [""]
        assert received.values("authorization") == ["Bearer caller-token"]
        assert received.values("host") == [f"127.0.0.1:{web.port}"]


async def test_the_gateways_own_url_takes_no_headers_and_calls_with_its_credential(gw, web) -> None:
    own = f"http://127.0.0.1:{gw.http_port}/mcp/web"
    body = await refused(gw, [tool(server_url=own, authorization=ALICE)])
    assert body["param"] == "tools[0].authorization"
    body = await refused(gw, [tool(server_url="gateway:web", headers={"X-Key": "x"})])
    assert body["param"] == "tools[0].headers.X-Key"
    client = anthropic.AsyncAnthropic(
        base_url=f"http://127.0.0.1:{gw.http_port}", api_key=ALICE, max_retries=0
    )
    async with client:
        with pytest.raises(anthropic.BadRequestError) as bad:
            await client.beta.messages.create(
                model="sim-mini", max_tokens=50,
                mcp_servers=[{"type": "url", "url": own, "name": "web",
                              "authorization_token": ALICE}],
                tools=[{"type": "mcp_toolset", "mcp_server_name": "web"}],
                messages=[{"role": "user", "content": "echo hi"}],
                betas=["mcp-client-2025-11-20"],
            )  # fmt: skip
    assert bad.value.body["error"]["message"].startswith("mcp_servers[0].authorization_token: ")
    assert web.requests == []
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="Please echo hello", tools=[tool(server_url=own)]
        )
    assert response.output[1].type == "mcp_call"
    assert web.requests
    assert all(r.values("authorization") == ["Bearer raw-configured"] for r in web.requests)
    assert not [v for v in web.header_values() if ALICE in v]


async def test_a_header_holding_a_key_of_the_gateway_is_refused(gw, web, partner) -> None:
    store = gw.gateway.store.keys
    _, stored = await store.create(kind="api", name="stored-for-headers")
    gone, revoked = await store.create(kind="admin", name="revoked-for-headers")
    await store.revoke(gone.id)
    cases = [
        (tool(headers={"X-Forward": f"token={ALICE};"}), "tools[0].headers.X-Forward"),
        (tool(headers={"X-Forward": f"{BOB}"}), "tools[0].headers.X-Forward"),
        (tool(authorization=stored), "tools[0].authorization"),
        (tool(headers={"X-Keys": f"a {KEYLIKE} b,{stored}"}), "tools[0].headers.X-Keys"),
        (tool(authorization=revoked), "tools[0].authorization"),
        (tool("partner", server_url=partner.url, authorization=BOB), "tools[0].authorization"),
        (tool(headers={"X-Keys": " ".join([KEYLIKE[:-1] + c for c in "BCDEF"])}),
         "tools[0].headers.X-Keys"),
    ]  # fmt: skip
    for given, field in cases:
        body = await refused(gw, [given])
        assert body["param"] == field, given
    assert web.requests == [] and partner.requests == []
    # A token shaped like a key that is none goes where it was sent.
    async with sdk(gw) as client:
        await client.responses.create(
            model="sim-mini", input="hi", tools=[tool(authorization=KEYLIKE)]
        )
    assert web.requests[0].values("authorization") == [f"Bearer {KEYLIKE}"]


async def test_a_remote_cannot_take_a_configured_servers_name(gw, web, partner) -> None:
    taken = tool(server_url=partner.url)
    for key in (ALICE, BOB):
        body = await refused(gw, [taken], key)
        assert body["param"] == "tools[0].server_label"
    assert partner.requests == [] and web.requests == []
    # Under a label of its own, a remote's grant and ledger rows are its own.
    own = tool("partner", server_url=partner.url)
    async with sdk(gw, BOB) as client:  # granted web__echo and web__add
        response = await client.responses.create(
            model="sim-mini", input="Please echo hello", tools=[own]
        )
    assert response.output[0].tools == []
    async with sdk(gw) as client:
        response = await client.responses.create(
            model="sim-mini", input="Please echo hello", tools=[own]
        )
    assert response.output[1].type == "mcp_call" and response.output[1].output.startswith("raw:")
    await gw.gateway.accounts.ledger.flush()
    rows = await gw.gateway.store.db.fetch(
        "SELECT mcp_server, mcp_tool, total_cost_usd FROM usage_records "
        "WHERE response_id = ? AND method = 'CallTool'", response.id,
    )  # fmt: skip
    assert [dict(r) for r in rows] == [
        {"mcp_server": "partner", "mcp_tool": "echo", "total_cost_usd": 0.0}
    ]
    assert web.requests == []


async def test_a_stdio_server_takes_no_headers_and_sixty_calls_share_its_child(caplog) -> None:
    caplog.set_level(logging.INFO, logger="server.providers.mcp_stdio")
    local = tool("local")
    async with raw_mcp_server() as web, running_gateway(mcp_config(web.url)) as gw:
        async with sdk(gw) as client:

            async def given_headers() -> Any:
                with pytest.raises(openai.BadRequestError) as caught:
                    await client.responses.create(
                        model="sim-mini", input="Please echo hello",
                        tools=[{**local, "headers": {"X-Tenant": "a"}}],
                    )  # fmt: skip
                return caught.value.body["param"]

            fields = await asyncio.gather(*(given_headers() for _ in range(60)))
            assert fields == ["tools[0].headers.X-Tenant"] * 60
            assert stdio_children() == ([], [])

            async def echo() -> int:
                response = await client.responses.create(
                    model="sim-mini", input="Please echo hello", tools=[local]
                )
                return int(response.output[1].output.split(":")[1])

            pids = await asyncio.gather(*(echo() for _ in range(60)))
        assert len(set(pids)) == 1
        assert stdio_children() == ([pids[0]], [])
    started = [r for r in caplog.records if "started (pid" in r.getMessage()]
    assert len(started) == 1


@pytest.mark.parametrize("transport", ["json", "sse", "stdio"])
async def test_the_result_bound_is_exact_on_the_whole_message(transport: str) -> None:
    limit = 4096
    async with raw_mcp_server(sse=transport == "sse") as raw:
        server: dict[str, Any] = {"id": "raw", "timeout_s": 30}
        if transport == "stdio":
            server |= {"transport": "stdio", "command": sys.executable,
                       "args": ["-m", "tests.support.mcp.raw"]}  # fmt: skip
        else:
            server |= {"transport": "http", "url": raw.url}
        data = mcp_config(raw.url)
        data["mcp"] = {"servers": [server], "max_result_bytes": limit}
        data["keys"][0]["mcp_tools"] = ["raw__*"]
        async with (
            running_gateway(data) as gw,
            sdk_client(f"http://127.0.0.1:{gw.http_port}/mcp", ALICE) as client,
        ):
            answer = await client.call_tool("raw__sized", {"bytes": limit})
            assert len(answer.content[0].text) > limit - 100
            with pytest.raises(MCPError) as over:
                await client.call_tool("raw__sized", {"bytes": limit + 1})
            assert over.value.error.data == {"server": "raw", "reason": "too_large"}
            await gw.gateway.accounts.ledger.flush()
            rows = await gw.gateway.store.db.fetch(
                "SELECT mcp_outcome, result_bytes FROM usage_records WHERE method = 'CallTool'"
            )
    assert [(r["mcp_outcome"], r["result_bytes"]) for r in rows] == [
        ("ok", limit), ("too_large", 0)
    ]  # fmt: skip
