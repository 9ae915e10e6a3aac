"""The MCP gateway through real clients: the official SDK's in both protocol
generations, fastmcp's, gRPC stubs, grpcurl and the REST listing; two upstream servers
built with the SDK (streamable HTTP and a stdio child)."""

from __future__ import annotations

import asyncio
import json

import grpc
import httpx
import pytest
from gateway.v1 import mcp_service_pb2 as mcp_pb
from gateway.v1 import mcp_service_pb2_grpc
from google.protobuf import json_format
from mcp.shared.exceptions import MCPError

from tests.support.gateways import ROOT, running_gateway
from tests.support.mcp.upstreams import ALICE, BOB, NOBODY, http_upstream, mcp_config, sdk_client

GENERATIONS = ["auto", "legacy"]
ALICE_TOOLS = {f"web__{t}" for t in ("add", "echo", "record", "whoami", "headers", "hidden",
               "slow", "fail", "big", "die")} | {f"local__{t}" for t in ("add", "echo", "record",
               "whoami", "headers", "slow", "fail", "big", "die")}  # fmt: skip


@pytest.fixture(scope="module")
async def gw():
    async with http_upstream() as url, running_gateway(mcp_config(url)) as running:
        yield running


def mcp_url(gw, server: str | None = None) -> str:
    return f"http://127.0.0.1:{gw.http_port}/mcp" + (f"/{server}" if server else "")


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_two_keys_see_their_own_grants(gw, mode) -> None:
    async with sdk_client(mcp_url(gw), ALICE, mode) as alice:
        assert {t.name for t in (await alice.list_tools()).tools} == ALICE_TOOLS
    async with sdk_client(mcp_url(gw), BOB, mode) as bob:
        assert {t.name for t in (await bob.list_tools()).tools} == {"web__echo", "web__add"}
    async with sdk_client(mcp_url(gw), NOBODY, mode) as nobody:
        assert (await nobody.list_tools()).tools == []


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_calls_reach_each_server_with_results_unchanged(gw, mode) -> None:
    async with sdk_client(mcp_url(gw), ALICE, mode) as client:
        for server in ("web", "local"):
            added = await client.call_tool(f"{server}__add", {"a": 2, "b": 40})
            assert added.structured_content == {"sum": 42} and not added.is_error
            echoed = await client.call_tool(f"{server}__echo", {"text": "héllo"})
            assert echoed.content[0].text.startswith("tests:") and echoed.content[0].text.endswith(
                ":héllo"
            )
            # A tool's own failure is a result, not an error.
            failed = await client.call_tool(f"{server}__fail", {"reason": "no such city"})
            assert failed.is_error and failed.content[0].text == "no such city"


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_not_granted_and_missing_tools_answer_alike(gw, mode) -> None:
    answers = []
    async with sdk_client(mcp_url(gw), BOB, mode) as client:
        for name in (
            "web__slow",
            "web__nonexistent",
            "local__echo",
            "nowhere__echo",
            "web__hidden",
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {})
            answers.append(
                (refused.value.error.code, refused.value.error.message.replace(name, "N"))
            )
    assert set(answers) == {(-32602, "Unknown tool: N")}


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_one_servers_path_serves_only_its_tools(gw, mode) -> None:
    async with sdk_client(mcp_url(gw, "local"), ALICE, mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {n for n in ALICE_TOOLS if n.startswith("local__")}
        assert (await client.call_tool("local__add", {"a": 1, "b": 1})).structured_content == {
            "sum": 2
        }
        with pytest.raises(MCPError) as refused:
            await client.call_tool("web__add", {"a": 1, "b": 1})
        assert refused.value.error.code == -32602


async def test_listed_definitions_are_the_servers_under_the_exposed_name(gw) -> None:
    async with sdk_client(mcp_url(gw), ALICE) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    add = tools["local__add"]
    assert add.description == "Adds two whole numbers."
    assert add.input_schema["properties"]["a"] == {"title": "A", "type": "integer"}
    assert add.input_schema["required"] == ["a", "b"]


async def test_fastmcp_client(gw) -> None:
    from fastmcp import Client

    async with Client(mcp_url(gw), auth=BOB) as client:
        assert {t.name for t in await client.list_tools()} == {"web__echo", "web__add"}
        result = await client.call_tool("web__add", {"a": 20, "b": 22})
        assert result.structured_content == {"sum": 42}
        assert await client.list_resources() == []  # granted none
        assert await client.list_resource_templates() == []
        assert await client.list_prompts() == []
    async with Client(mcp_url(gw), auth=ALICE) as client:
        prompts = {p.name for p in await client.list_prompts()}
        assert prompts == {"web__greet", "local__greet"}
        read = await client.read_resource("gateway://web/note://readme")
        assert read[0].text == "tests: read me"  # type: ignore[union-attr]


async def test_grpc_and_rest_serve_the_same_filtered_set(gw) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        stub = mcp_service_pb2_grpc.McpServiceStub(channel)
        listed = await stub.ListTools(mcp_pb.ListToolsRequest(), metadata=(("x-api-key", BOB),))
        assert {t.name for t in listed.tools} == {"web__echo", "web__add"}
        echo = next(t for t in listed.tools if t.name == "web__echo")
        assert (echo.server, echo.upstream_name) == ("web", "echo")
        assert json_format.MessageToDict(echo.input_schema)["required"] == ["text"]
        request = mcp_pb.CallToolRequest(name="web__add")
        request.arguments.update({"a": 3, "b": 4})
        answer = await stub.CallTool(request, metadata=(("x-api-key", BOB),))
        assert json_format.MessageToDict(answer.result)["structuredContent"] == {"sum": 7}
        assert answer.cost_usd == pytest.approx(0.002) and not answer.is_error
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.CallTool(mcp_pb.CallToolRequest(name="web__slow"),
                                metadata=(("x-api-key", BOB),))  # fmt: skip
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as unknown_server:
            await stub.ListTools(mcp_pb.ListToolsRequest(server="nope"),
                                 metadata=(("x-api-key", BOB),))  # fmt: skip
        assert unknown_server.value.code() == grpc.StatusCode.NOT_FOUND
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
        page = await http.get("/v1/mcp/tools", headers={"x-api-key": BOB})
        assert page.status_code == 200
        assert {t["name"] for t in page.json()["tools"]} == {"web__echo", "web__add"}
        only = await http.get("/v1/mcp/tools", params={"server": "local"},
                              headers={"x-api-key": ALICE})  # fmt: skip
        assert {t["server"] for t in only.json()["tools"]} == {"local"}
        called = await http.post("/v1/mcp/tools:call", headers={"x-api-key": BOB},
                                 json={"name": "web__add", "arguments": {"a": 1, "b": 2}})  # fmt: skip
        assert called.status_code == 200, called.text
        assert called.json()["result"]["structuredContent"] == {"sum": 3}
        refused = await http.post("/v1/mcp/tools:call", headers={"x-api-key": BOB},
                                  json={"name": "local__add"})  # fmt: skip
        assert refused.status_code == 404
        assert refused.json()["error"] == {"message": "tool 'local__add' not found",
                                           "type": "not_found_error", "code": "tool_not_found",
                                           "param": None}  # fmt: skip


async def test_grpcurl_lists_and_calls(gw) -> None:
    grpcurl = str(ROOT / ".venv" / "bin" / "grpcurl")
    target = f"127.0.0.1:{gw.grpc_port}"
    for argv, check in (
        (["-d", "{}", target, "gateway.v1.McpService/ListTools"],
         lambda body: {t["name"] for t in body["tools"]} == {"web__echo", "web__add"}),
        (["-d", '{"name": "web__echo", "arguments": {"text": "hi"}}', target,
          "gateway.v1.McpService/CallTool"],
         lambda body: body["result"]["content"][0]["text"].endswith(":hi")),
    ):  # fmt: skip
        process = await asyncio.create_subprocess_exec(
            grpcurl, "-plaintext", "-H", f"x-api-key: {BOB}", *argv,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        assert check(json.loads(out))


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_every_list_method_answers_alike_in_both_generations(gw, mode) -> None:
    """Hosts call the list methods without checking capabilities: nothing granted is
    an empty list in both generations, never -32601."""
    async with sdk_client(mcp_url(gw), NOBODY, mode) as client:
        assert (await client.list_resources()).resources == []
        assert (await client.list_resource_templates()).resource_templates == []
        assert (await client.list_prompts()).prompts == []
        await client.send_ping()


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_resources_and_prompts_of_every_server_through_the_gateway(gw, mode) -> None:
    async with sdk_client(mcp_url(gw), ALICE, mode) as client:
        resources = {r.name: str(r.uri) for r in (await client.list_resources()).resources}
        assert resources == {"web__readme": "gateway://web/note://readme",
                             "local__readme": "gateway://local/note://readme"}  # fmt: skip
        templates = (await client.list_resource_templates()).resource_templates
        assert {t.name: t.uri_template for t in templates} == {
            "web__note": "gateway://web/note://{note_id}",
            "local__note": "gateway://local/note://{note_id}",
        }
        for server in ("web", "local"):  # each read and get on the server that owns it
            read = await client.read_resource(f"gateway://{server}/note://readme")
            assert read.contents[0].text == "tests: read me"
            read = await client.read_resource(f"gateway://{server}/note://7")
            assert read.contents[0].text == "tests: note 7"
        prompts = (await client.list_prompts()).prompts
        assert {p.name for p in prompts} == {"web__greet", "local__greet"}
        got = await client.get_prompt("local__greet", {"name": "Ada"})
        assert got.messages[0].content.text == "Hello, Ada, from tests."


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_resources_and_prompts_are_granted_per_key(gw, mode) -> None:
    """Bob's grant (two of web's tools) covers no resource or prompt: each is refused
    as missing, alike for what exists and what does not."""
    async with sdk_client(mcp_url(gw), BOB, mode) as client:
        assert (await client.list_resources()).resources == []
        assert (await client.list_prompts()).prompts == []
        answers = set()
        for uri in ("gateway://web/note://readme", "gateway://web/nothing", "note://readme"):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            answers.add((refused.value.error.code, refused.value.error.message.replace(uri, "U")))
        assert answers == {(-32002, "Resource not found: U")}
        for name in ("web__greet", "web__nothing"):
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, {"name": "Ada"})
            assert refused.value.error.code == -32602


async def test_grpc_and_rest_serve_resources_and_prompts(gw) -> None:
    """McpService lists, reads and gets what `/mcp` does, granted alike: Alice sees both
    servers' resources and prompts, Bob none, and what he may not read is not found."""
    alice, bob = (("x-api-key", ALICE),), (("x-api-key", BOB),)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
        stub = mcp_service_pb2_grpc.McpServiceStub(channel)
        resources = await stub.ListResources(mcp_pb.ListResourcesRequest(), metadata=alice)
        assert {(r.name, r.server, r.uri, r.upstream_uri, r.mime_type)
                for r in resources.resources} == {
            ("web__readme", "web", "gateway://web/note://readme", "note://readme", "text/plain"),
            ("local__readme", "local", "gateway://local/note://readme", "note://readme",
             "text/plain"),
        }  # fmt: skip
        templates = await stub.ListResourceTemplates(
            mcp_pb.ListResourceTemplatesRequest(server="local"), metadata=alice
        )
        assert [(t.name, t.uri_template, t.upstream_uri_template)
                for t in templates.resource_templates] == [
            ("local__note", "gateway://local/note://{note_id}", "note://{note_id}")
        ]  # fmt: skip
        prompts = await stub.ListPrompts(mcp_pb.ListPromptsRequest(), metadata=alice)
        assert {(p.name, p.server, p.upstream_name) for p in prompts.prompts} == {
            ("web__greet", "web", "greet"), ("local__greet", "local", "greet")
        }  # fmt: skip
        greet = json_format.MessageToDict(prompts.prompts[0].definition)
        assert [a["name"] for a in greet["arguments"]] == ["name"]
        read = await stub.ReadResource(
            mcp_pb.ReadResourceRequest(uri="gateway://web/note://9"), metadata=alice
        )
        assert json_format.MessageToDict(read.result)["contents"][0]["text"] == "tests: note 9"
        request = mcp_pb.GetPromptRequest(name="local__greet")
        request.arguments.update({"name": "Ada"})
        got = await stub.GetPrompt(request, metadata=alice)
        message = json_format.MessageToDict(got.result)["messages"][0]
        assert message["content"]["text"] == "Hello, Ada, from tests."
        assert (await stub.ListPrompts(mcp_pb.ListPromptsRequest(), metadata=bob)).prompts == []
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ReadResource(
                mcp_pb.ReadResourceRequest(uri="gateway://web/note://readme"), metadata=bob
            )
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as unnamed:
            await stub.GetPrompt(mcp_pb.GetPromptRequest(), metadata=alice)
        assert unnamed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "name" in (unnamed.value.details() or "")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
        listed = await http.get("/v1/mcp/resources", params={"server": "web"},
                                headers={"x-api-key": ALICE})  # fmt: skip
        assert listed.status_code == 200, listed.text
        assert [r["uri"] for r in listed.json()["resources"]] == ["gateway://web/note://readme"]
        templates = await http.get("/v1/mcp/resource_templates", headers={"x-api-key": ALICE})
        assert {t["name"] for t in templates.json()["resource_templates"]} == {
            "web__note", "local__note"
        }  # fmt: skip
        prompts = await http.get("/v1/mcp/prompts", headers={"x-api-key": ALICE})
        assert {p["name"] for p in prompts.json()["prompts"]} == {"web__greet", "local__greet"}
        read = await http.post("/v1/mcp/resources:read", headers={"x-api-key": ALICE},
                               json={"uri": "gateway://local/note://readme"})  # fmt: skip
        assert read.status_code == 200, read.text
        assert read.json()["result"]["contents"][0]["text"] == "tests: read me"
        got = await http.post("/v1/mcp/prompts:get", headers={"x-api-key": ALICE},
                              json={"name": "web__greet", "arguments": {"name": "Bo"}})  # fmt: skip
        assert got.json()["result"]["messages"][0]["content"]["text"] == "Hello, Bo, from tests."
        assert (await http.get("/v1/mcp/resources", headers={"x-api-key": BOB})).json() == {
            "resources": []
        }
        refused = await http.post("/v1/mcp/prompts:get", headers={"x-api-key": BOB},
                                  json={"name": "web__greet"})  # fmt: skip
        assert refused.status_code == 404
        bad = await http.post("/v1/mcp/prompts:get", headers={"x-api-key": ALICE},
                              json={"name": "web__greet", "arguments": {"name": 3}})  # fmt: skip
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "arguments.name"
