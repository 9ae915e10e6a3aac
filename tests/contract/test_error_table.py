"""Every status code, through both transports, to its HTTP status and error body.

A stand-in ListProviders handler raises the error whose code its `model` names; the
same table is served over gRPC, over REST in-process, and over REST as an edge tier in
front of that gRPC server. Each must agree with the one table in server/base/errors.py.
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
from http_facade.errors import ERROR_TYPE
from server.application.rpcs import handlers
from server.base.call import Call
from server.base.config import ServerConfig, parse
from server.base.errors import HTTP_STATUS, Code, GatewayError
from server.base.pipeline import rpc_table
from server.cli.serve import build_gateway, start_grpc, start_http
from tests.support.gateways import default_config_dict

CODES = [code for code in Code if code != Code.OK]


class Raised(GatewayError):
    """An error of any code, as a handler would raise it."""


async def raise_named_code(request: provider_service_pb2.ListProvidersRequest, call: Call) -> Any:
    error = Raised(f"failed with {request.model}", {"model": request.model})
    error.code = Code[request.model]
    error.reason = f"TEST_{request.model}"
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


def expected_http(code: Code) -> int:
    return HTTP_STATUS.get(code, 500)


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
    assert response.status_code == expected_http(code), response.text
    assert response.json() == {
        "error": {
            "message": f"failed with {code.name}",
            "type": ERROR_TYPE.get(code, "api_error"),
            "code": f"test_{code.name.lower()}",
            "param": None,
        }
    }


def test_every_reason_the_gateway_emits_is_in_the_contract() -> None:
    from gateway.v1 import errors_pb2

    import http_facade.errors
    import server.grpc_api.status

    assert http_facade.errors and server.grpc_api.status  # their error classes are loaded

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
