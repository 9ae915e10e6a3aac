"""ProviderService: a model's providers, with their state and capabilities."""

from __future__ import annotations

from gateway.v1 import provider_service_pb2 as providers
from google.protobuf import struct_pb2

from server.accounting.accounts import Accounts
from server.application.model import admit_listing
from server.application.pipeline.catalog import Upstream
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.errors import InvalidArgument


def provider_message(upstream: Upstream) -> providers.Provider:
    """A provider as every API shows it (ListProviders, Enable/DisableProvider)."""
    params = struct_pb2.Struct()
    params.update(upstream.config.params)
    return providers.Provider(
        id=upstream.id, type=upstream.config.type, enabled=upstream.config.enabled,
        params=params, adapter=upstream.config.adapter, health=upstream.health,
        capabilities=sorted(upstream.capabilities),
    )  # fmt: skip


class ProviderService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def list_providers(
        self, request: providers.ListProvidersRequest, call: Call
    ) -> providers.ListProvidersResponse:
        state = self.live.current
        await admit_listing(self.accounts, call, state)
        if not request.model:
            raise InvalidArgument.for_field("model", "is required")
        model = state.catalog.model(request.model)
        return providers.ListProvidersResponse(
            providers=[provider_message(u) for u in state.catalog.upstreams[model.id]]
        )
