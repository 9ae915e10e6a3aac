"""gRPC client helpers for tests."""

from __future__ import annotations

import grpc
from gateway.v1 import (
    chat_service_pb2_grpc,
    completion_service_pb2_grpc,
    deployment_service_pb2_grpc,
    model_service_pb2_grpc,
    provider_service_pb2_grpc,
    router_service_pb2_grpc,
)
from google.rpc import error_details_pb2, status_pb2

from tests.support.gateways import API_KEY, ROUTER_KEY

API = (("x-api-key", API_KEY),)
ROUTER = (("x-router-key", ROUTER_KEY),)


class Stubs:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.chat = chat_service_pb2_grpc.ChatServiceStub(channel)
        self.completions = completion_service_pb2_grpc.CompletionServiceStub(channel)
        self.models = model_service_pb2_grpc.ModelServiceStub(channel)
        self.providers = provider_service_pb2_grpc.ProviderServiceStub(channel)
        self.router = router_service_pb2_grpc.RouterServiceStub(channel)
        self.deployments = deployment_service_pb2_grpc.DeploymentServiceStub(channel)


def details(error: grpc.aio.AioRpcError) -> dict[str, object]:
    """Unpacks the google.rpc details of an error, by type name."""
    raw = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert isinstance(raw, bytes), "the error carries no rich status"
    status = status_pb2.Status.FromString(raw)
    assert status.code == error.code().value[0]
    found: dict[str, object] = {}
    for packed in status.details:
        for kind in (
            error_details_pb2.ErrorInfo,
            error_details_pb2.BadRequest,
            error_details_pb2.RetryInfo,
        ):
            if packed.Is(kind.DESCRIPTOR):
                message = kind()
                packed.Unpack(message)
                found[kind.__name__] = message
    return found
