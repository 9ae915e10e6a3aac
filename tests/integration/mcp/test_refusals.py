"""Bad input to /mcp gets a clear answer and changes nothing: each refusal with its
HTTP status and JSON-RPC error, through raw HTTP (the SDK's clients never send most
of these)."""

from __future__ import annotations

import httpx
import pytest

from tests.support.gateways import running_gateway
from tests.support.mcp.upstreams import ALICE, BOB, mcp_config

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
ACCEPT = "application/json, text/event-stream"


@pytest.fixture(scope="module")
async def http():
    data = mcp_config("http://127.0.0.1:9/mcp", allowed_origins=["https://app.example.com"])
    data["server"]["max_body_bytes"] = 64 * 1024
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as client,
    ):
        client.gateway = gw
        yield client


def modern(method: str, name: str | None = None, **params) -> tuple[dict, dict]:
    """A 2026-07-28 request and its headers."""
    headers = {"authorization": f"Bearer {ALICE}", "accept": ACCEPT,
               "mcp-protocol-version": MODERN, "mcp-method": method}  # fmt: skip
    if name is not None:
        headers["mcp-name"] = name
        params["name"] = name
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": method,
        "params": {**params, "_meta": dict(META)},
    }, headers


def rpc_error(answer: httpx.Response) -> dict:
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body
    return body["error"]


async def test_no_key_and_a_wrong_key_are_401(http) -> None:
    body, headers = modern("tools/list")
    for key_headers in (
        {},
        {"authorization": "Bearer gw-nope-000000000000"},
        {"x-api-key": "nope"},
    ):
        sent = {k: v for k, v in headers.items() if k != "authorization"} | key_headers
        answer = await http.post("/mcp", json=body, headers=sent)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
        assert rpc_error(answer)["code"] == -32000


async def test_the_key_as_x_api_key(http) -> None:
    body, headers = modern("tools/list")
    headers = {k: v for k, v in headers.items() if k != "authorization"} | {"x-api-key": BOB}
    answer = await http.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 200
    assert answer.json()["result"]["tools"] == []  # the web server is down here


@pytest.mark.parametrize(
    ("raw", "code", "status"),
    [
        (b"{not json", -32700, 400),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', -32600, 400),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', -32600, 400),
        (b'{"jsonrpc": "2.0", "id": 1}', -32600, 400),
        (b'{"jsonrpc": "2.0", "id": [1], "method": "tools/list"}', -32600, 400),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}', -32600, 400),
        (b'"just a string"', -32600, 400),
    ],
)
async def test_malformed_bodies(http, raw, code, status) -> None:
    headers = {"authorization": f"Bearer {ALICE}", "accept": ACCEPT,
               "content-type": "application/json"}  # fmt: skip
    answer = await http.post("/mcp", content=raw, headers=headers)
    assert answer.status_code == status
    error = rpc_error(answer)
    assert error["code"] == code and error["message"]
    assert answer.json()["id"] is None


async def test_headers_that_do_not_mirror_the_body(http) -> None:
    body, headers = modern("tools/call", "local__echo", arguments={"text": "x"})
    for wrong in ({"mcp-method": "tools/list"}, {"mcp-name": "local__add"},
                  {"mcp-protocol-version": "2025-11-25"}):  # fmt: skip
        answer = await http.post("/mcp", json=body, headers=headers | wrong)
        assert answer.status_code == 400, wrong
        assert rpc_error(answer)["code"] == -32020
    missing = {k: v for k, v in headers.items() if k != "mcp-name"}
    assert (await http.post("/mcp", json=body, headers=missing)).status_code == 400


async def test_an_unsupported_protocol_version_lists_the_supported_ones(http) -> None:
    body, headers = modern("tools/list")
    answer = await http.post(
        "/mcp", json=body, headers=headers | {"mcp-protocol-version": "2099-01-01"}
    )
    assert answer.status_code == 400
    error = rpc_error(answer)
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2099-01-01"
    assert set(error["data"]["supported"]) >= {"2025-06-18", "2025-11-25", MODERN}


async def test_accept_must_list_both_types(http) -> None:
    body, headers = modern("tools/list")
    for accept in ("application/json", "text/event-stream", ""):
        answer = await http.post("/mcp", json=body, headers=headers | {"accept": accept})
        assert answer.status_code == 406


async def test_origins(http) -> None:
    body, headers = modern("tools/list")
    refused = await http.post(
        "/mcp", json=body, headers=headers | {"origin": "https://evil.example"}
    )
    assert refused.status_code == 403
    allowed = await http.post(
        "/mcp", json=body, headers=headers | {"origin": "https://app.example.com"}
    )
    assert allowed.status_code == 200


async def test_a_body_over_the_limit_is_413(http) -> None:
    body, headers = modern("tools/call", "local__echo", arguments={"text": "x" * 70_000})
    answer = await http.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 413


async def test_unknown_server_path_is_404(http) -> None:
    body, headers = modern("tools/list")
    answer = await http.post("/mcp/nope", json=body, headers=headers)
    assert answer.status_code == 404


async def test_unknown_method_and_bad_params(http) -> None:
    body, headers = modern("resources/subscribe")
    answer = await http.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 404 and rpc_error(answer)["code"] == -32601
    body, headers = modern("tools/call", "local__echo", arguments=[1, 2])
    answer = await http.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 400 and rpc_error(answer)["code"] == -32602
    body, headers = modern("tools/call")  # no name
    answer = await http.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 400 and rpc_error(answer)["code"] == -32602


async def test_the_envelope_is_required_in_the_stateless_generation(http) -> None:
    body, headers = modern("tools/list")
    del body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    answer = await http.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 400 and rpc_error(answer)["code"] == -32602


async def test_handshake_sessions(http) -> None:
    headers = {"authorization": f"Bearer {ALICE}", "accept": ACCEPT}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}  # fmt: skip
    opened = await http.post("/mcp", json=init, headers=headers)
    assert opened.status_code == 200
    assert opened.json()["result"]["protocolVersion"] == "2025-06-18"
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    # No session: 400; a session this gateway did not sign, or another key's: 404.
    assert (await http.post("/mcp", json=listing, headers=headers)).status_code == 400
    forged = session[:-4] + ("AAAA" if not session.endswith("AAAA") else "BBBB")
    for bad, key in ((forged, ALICE), (session, BOB)):
        sent = headers | {"mcp-session-id": bad, "authorization": f"Bearer {key}"}
        assert (await http.post("/mcp", json=listing, headers=sent)).status_code == 404
    good = await http.post("/mcp", json=listing, headers=headers | {"mcp-session-id": session})
    assert good.status_code == 200 and "tools" in good.json()["result"]
    # An initialize asking for a version the gateway does not speak gets its newest.
    init["params"]["protocolVersion"] = "1999-01-01"
    newest = await http.post("/mcp", json=init, headers=headers)
    assert newest.json()["result"]["protocolVersion"] == "2025-11-25"
    # A notification is acknowledged with nothing.
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    acked = await http.post("/mcp", json=note, headers=headers | {"mcp-session-id": session})
    assert acked.status_code == 202 and acked.content == b""
    # GET and DELETE are for sessions only.
    assert (await http.get("/mcp", headers=headers)).status_code == 405
    assert (await http.delete("/mcp", headers=headers)).status_code == 405
    gone = await http.delete("/mcp", headers=headers | {"mcp-session-id": forged})
    assert gone.status_code == 404
    assert (
        await http.delete("/mcp", headers=headers | {"mcp-session-id": session})
    ).status_code == 204
    async with http.stream("GET", "/mcp", headers=headers | {"mcp-session-id": session}) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert (await anext(stream.aiter_bytes())).startswith(b": keep-alive")


async def test_refusals_leave_no_trace_upstream_and_one_ledger_row_each(http) -> None:
    gw = http.gateway
    before = len(gw.gateway.tools.recent)
    body, headers = modern("tools/call", "local__nonexistent", arguments={})
    answer = await http.post("/mcp", json=body, headers=headers)
    assert rpc_error(answer)["message"] == "Unknown tool: local__nonexistent"
    rows = list(gw.gateway.tools.recent)[before:]
    assert [(r.mcp_outcome, r.status, r.total_cost_usd) for r in rows] == [
        ("denied", "NOT_FOUND", 0.0)
    ]
