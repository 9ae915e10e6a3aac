"""ModelService: the models the gateway serves."""

from __future__ import annotations

from gateway.v1 import model_service_pb2 as models

from server.accounting.accounts import Accounts
from server.accounting.admission import check_model
from server.application.pipeline.state import Live, Snapshot
from server.base.call import Call
from server.base.config import ModelConfig
from server.base.errors import InvalidArgument


class ModelService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def list_models(
        self, request: models.ListModelsRequest, call: Call
    ) -> models.ListModelsResponse:
        state = self.live.current
        await admit_listing(self.accounts, call, state)
        return models.ListModelsResponse(
            object="list", data=[_model(m) for m in state.config.models]
        )

    async def get_model(
        self, request: models.GetModelRequest, call: Call
    ) -> models.GetModelResponse:
        state = self.live.current
        await admit_listing(self.accounts, call, state)
        if not request.model:
            raise InvalidArgument.for_field("model", "is required")
        m = state.catalog.model(request.model)
        # A key reads only the models it may call (what a session asks before it opens).
        if call.record.principal is not None:
            check_model(call.record.principal, m.id)
        return models.GetModelResponse(
            id=m.id,
            object="model",
            created=m.created,
            owned_by=m.owned_by,
            capabilities=m.capabilities or (),
        )


async def admit_listing(accounts: Accounts, call: Call, state: Snapshot) -> None:
    """Authenticates a listing's caller; counts it against the key's rate limit only
    when `limits.count_listings` says so (a listing generates nothing)."""
    if state.config.limits.count_listings:
        await accounts.admit(call, "api", state.keys)
    else:
        await accounts.identify(call, "api", state.keys)


def _model(m: ModelConfig) -> models.Model:
    return models.Model(
        id=m.id,
        object="model",
        created=m.created,
        owned_by=m.owned_by,
        capabilities=m.capabilities or (),
    )
