"""Every status code, through both transports, to its HTTP status and error body.

A stand-in ListProviders handler raises the error whose code its `model` names; the
same table is served over gRPC, over REST in-process, and over REST as an edge tier in
front of that gRPC server. The expectations are written out below from the contract
(DESIGN.md, "Contract decisions where the spec is silent"), not read from the code
under test: a change to the gateway's table fails here until the contract says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
import uvicorn
from gateway.v1 import provider_service_pb2, provider_service_pb2_grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from http_facade.app import create_app
from server.application.rpcs import handlers
from server.base.call import Call
from server.base.config import ServerConfig, parse
from server.base.errors import Code, GatewayError
from server.base.pipeline import rpc_table
from server.cli.serve import build_gateway, start_grpc, start_http
from tests.support.gateways import default_config_dict

# The contract's gRPC code -> HTTP status (DESIGN.md); the four codes it does not name
# take google.rpc.Code's documented HTTP mapping (google/rpc/code.proto).
CONTRACT_HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "FAILED_PRECONDITION": 400,
    "ABORTED": 409,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "CANCELLED": 499,
    # Not in DESIGN.md: code.proto's mapping.
    "UNKNOWN": 500,
    "ALREADY_EXISTS": 409,
    "OUT_OF_RANGE": 400,
    "DATA_LOSS": 500,
}
# UNAVAILABLE when an upstream answered badly (DESIGN.md: "502 when an upstream
# answered badly").
ANSWERED_BADLY = 502
# OpenAI's `error.type` per status, so OpenAI clients raise their matching class: the
# types OpenAI's API sends (invalid_request_error, authentication_error,
# permission_error, not_found_error, rate_limit_error), then the gateway's own words for
# the conditions OpenAI has no type for, and `api_error` for server faults.
CONTRACT_ERROR_TYPE = {
    "INVALID_ARGUMENT": "invalid_request_error",
    "FAILED_PRECONDITION": "invalid_request_error",
    "OUT_OF_RANGE": "invalid_request_error",
    "UNAUTHENTICATED": "authentication_error",
    "PERMISSION_DENIED": "permission_error",
    "NOT_FOUND": "not_found_error",
    "RESOURCE_EXHAUSTED": "rate_limit_error",
    "DEADLINE_EXCEEDED": "timeout_error",
    "CANCELLED": "cancelled",
    "UNAVAILABLE": "upstream_error",
    "ABORTED": "api_error",
    "UNIMPLEMENTED": "api_error",
    "INTERNAL": "api_error",
    "UNKNOWN": "api_error",
    "ALREADY_EXISTS": "api_error",
    "DATA_LOSS": "api_error",
}
# `x-should-retry` per code, as the official SDKs read it: a retry may help after a rate
# limit, a timeout or a failure on the serving side; never after a refused request, a
# cancelled one or a method the API does not have.
CONTRACT_SHOULD_RETRY = {
    "RESOURCE_EXHAUSTED": "true",
    "DEADLINE_EXCEEDED": "true",
    "UNAVAILABLE": "true",
    "INTERNAL": "true",
    "UNKNOWN": "true",
    "DATA_LOSS": "true",
} | {
    name: "false"
    for name in ("INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE", "UNAUTHENTICATED",
                 "PERMISSION_DENIED", "NOT_FOUND", "ABORTED", "ALREADY_EXISTS", "CANCELLED",
                 "UNIMPLEMENTED")
}  # fmt: skip
CODES = [code for code in Code if code != Code.OK]
# An error's `model` names its code; this suffix makes it one an upstream answered.
ANSWERED = "_ANSWERED"


def test_the_oracle_names_every_code():
    assert set(CONTRACT_HTTP_STATUS) == set(CONTRACT_ERROR_TYPE) == {c.name for c in CODES}
    assert set(CONTRACT_SHOULD_RETRY) == set(CONTRACT_HTTP_STATUS)


class Raised(GatewayError):
    """An error of any code, as a handler would raise it."""


async def raise_named_code(request: provider_service_pb2.ListProvidersRequest, call: Call) -> Any:
    name = request.model.removesuffix(ANSWERED)
    error = Raised(
        f"failed with {request.model}",
        {"model": request.model},
        upstream_answered=request.model.endswith(ANSWERED),
    )
    error.code = Code[name]
    error.reason = f"TEST_{name}"
    raise error


@pytest.fixture(scope="module")
async def servers() -> AsyncIterator[dict[str, Any]]:
    gateway = build_gateway(parse(default_config_dict(), "test"))
    table = rpc_table(
        {
            **handlers(gateway.services),
            "gateway.v1.ProviderService.ListProviders": raise_named_code,
        },
        gateway.middlewares,
    )
    settings = ServerConfig(host="127.0.0.1", grpc_port=0, http_port=0)
    grpc_server, grpc_port = await start_grpc(table, settings)
    started: list[uvicorn.Server] = []
    urls = {}
    for mode, app in (
        ("in_process", create_app(settings, table=table)),
        ("edge", create_app(settings, grpc_target=f"127.0.0.1:{grpc_port}")),
    ):
        server, _, port = await start_http(app, settings)
        started.append(server)
        urls[mode] = f"http://127.0.0.1:{port}"
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
    try:
        yield {"urls": urls, "stub": provider_service_pb2_grpc.ProviderServiceStub(channel)}
    finally:
        await channel.close()
        for server in started:
            server.should_exit = True
        await grpc_server.stop(None)
        await gateway.aclose()


@pytest.mark.parametrize("code", CODES, ids=lambda c: c.name)
async def test_grpc_carries_the_code_and_rich_status(servers: dict[str, Any], code: Code) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await servers["stub"].ListProviders(
            provider_service_pb2.ListProvidersRequest(model=code.name)
        )
    assert raised.value.code().value[0] == code
    status = rpc_status.from_call(raised.value)
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain, dict(info.metadata)) == (
        f"TEST_{code.name}",
        "gateway.v1",
        {"model": code.name},
    )


@pytest.mark.parametrize("mode", ["in_process", "edge"])
@pytest.mark.parametrize("code", CODES, ids=lambda c: c.name)
async def test_rest_maps_the_code_to_its_status_and_body(
    servers: dict[str, Any], code: Code, mode: str
) -> None:
    async with httpx.AsyncClient(base_url=servers["urls"][mode], timeout=10) as http:
        response = await http.get("/v1/providers", params={"model": code.name})
    assert response.status_code == CONTRACT_HTTP_STATUS[code.name], response.text
    assert response.headers["x-should-retry"] == CONTRACT_SHOULD_RETRY[code.name]
    assert response.json() == {
        "error": {
            "message": f"failed with {code.name}",
            "type": CONTRACT_ERROR_TYPE[code.name],
            "code": f"test_{code.name.lower()}",
            "param": None,
        }
    }


@pytest.mark.parametrize("mode", ["in_process", "edge"])
async def test_an_upstream_that_answered_badly_is_a_502(servers: dict[str, Any], mode: str):
    async with httpx.AsyncClient(base_url=servers["urls"][mode], timeout=10) as http:
        answered = await http.get("/v1/providers", params={"model": "UNAVAILABLE" + ANSWERED})
        # Any other code keeps its own status, answered or not.
        refused = await http.get("/v1/providers", params={"model": "INVALID_ARGUMENT" + ANSWERED})
    assert answered.status_code == ANSWERED_BADLY, answered.text
    assert answered.json()["error"]["type"] == "upstream_error"
    assert refused.status_code == 400, refused.text


def test_every_reason_the_gateway_emits_is_in_the_contract() -> None:
    from gateway.v1 import errors_pb2

    import http_facade.errors
    import http_facade.mcp_oauth
    import server.grpc_api.status

    # Their error classes are loaded.
    assert http_facade.errors and http_facade.mcp_oauth and server.grpc_api.status

    def subclasses(cls: type) -> list[type]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    emitted = {
        c.reason
        for c in subclasses(GatewayError)
        if c.__module__.startswith(("server", "http_facade"))
    }
    emitted.add("UNKNOWN")  # the edge tier's reason for an error without ErrorInfo
    declared = {
        name.removeprefix("ERROR_REASON_")
        for name in errors_pb2.ErrorReason.DESCRIPTOR.values_by_name
    }
    assert emitted - declared == set()
    assert declared - emitted == {"UNSPECIFIED"}
