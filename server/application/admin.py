"""AdminService: keys (the key store), live configuration (reload, providers on and
off) and the admin page's data. Every method takes an admin key."""

from __future__ import annotations

import time

from gateway.v1 import admin_service_pb2 as admin_pb

from server.accounting.accounts import Accounts
from server.application.control import Control
from server.application.dashboard import Dashboard
from server.application.pipeline.state import Live
from server.application.provider import provider_message
from server.application.retrain import retrain_from_ledger
from server.base.call import Call
from server.base.config import check_tool_globs
from server.base.errors import Internal, InvalidArgument, NotFound
from server.storage import Store
from server.storage.keys import KeyRecord

KINDS = ("api", "router", "admin")
PERIODS = ("none", "daily", "monthly")


def key_message(key: KeyRecord) -> admin_pb.ApiKey:
    out = admin_pb.ApiKey(
        id=key.id, prefix=key.prefix, kind=key.kind, name=key.name, owner=key.owner,
        budget_period=key.budget_period, create_time=int(key.created_at), revoked=key.revoked,
        mcp_tools=key.mcp_tools,
    )  # fmt: skip
    if key.requests_per_minute is not None:
        out.requests_per_minute = key.requests_per_minute
    if key.tokens_per_minute is not None:
        out.tokens_per_minute = key.tokens_per_minute
    if key.budget_usd is not None:
        out.budget_usd = key.budget_usd
    if key.expires_at is not None:
        out.expire_time = int(key.expires_at)
    if key.revoked_at is not None:
        out.revoke_time = int(key.revoked_at)
    return out


def validate_new_key(request: admin_pb.CreateKeyRequest) -> dict[str, object]:
    """Checks a CreateKeyRequest; returns the key store's arguments."""
    if not request.name:
        raise InvalidArgument.for_field("name", "is required")
    if request.kind not in KINDS:
        raise InvalidArgument.for_field("kind", f"must be one of {', '.join(KINDS)}")
    period = request.budget_period or "monthly"
    if period not in PERIODS:
        raise InvalidArgument.for_field("budget_period", f"must be one of {', '.join(PERIODS)}")
    args: dict[str, object] = {
        "kind": request.kind, "name": request.name, "owner": request.owner, "budget_period": period,
    }  # fmt: skip
    for name in ("requests_per_minute", "tokens_per_minute"):
        if request.HasField(name):
            if getattr(request, name) < 1:
                raise InvalidArgument.for_field(name, "must be at least 1")
            args[name] = getattr(request, name)
    if request.HasField("budget_usd"):
        if request.budget_usd < 0:
            raise InvalidArgument.for_field("budget_usd", "must be at least 0")
        args["budget_usd"] = request.budget_usd
    if request.HasField("expire_time"):
        if request.expire_time <= time.time():
            raise InvalidArgument.for_field("expire_time", "must be in the future")
        args["expires_at"] = float(request.expire_time)
    if request.mcp_tools:
        try:
            args["mcp_tools"] = tuple(check_tool_globs(list(request.mcp_tools)))
        except ValueError as exc:
            raise InvalidArgument.for_field("mcp_tools", str(exc)) from None
    return args


async def key_of(store: Store | None, id_or_name: str) -> KeyRecord:
    """A key of the key store by id or name; NotFound when there is none."""
    if not id_or_name:
        raise InvalidArgument.for_field("key_id", "is required")
    key = await stored(store).keys.get(id_or_name)
    if key is None:
        raise NotFound(f"key {id_or_name!r} does not exist", {"key": id_or_name})
    return key


def stored(store: Store | None) -> Store:
    if store is None:
        raise Internal("this gateway has no key store", {})
    return store


class AdminService:
    def __init__(
        self,
        live: Live,
        accounts: Accounts,
        store: Store | None,
        control: Control,
        dashboard: Dashboard,
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store
        self.control = control
        self.dashboard = dashboard

    async def _admit(self, call: Call) -> None:
        """Live configuration and the admin page: calls with a ledger row."""
        await self.accounts.admit(call, "admin", self.live.current.keys)

    async def _check(self, call: Call) -> None:
        """Key management: not billed to the admin key, no ledger row."""
        await self.accounts.check(call, "admin", self.live.current.keys)

    # -- keys ------------------------------------------------------------------------

    async def create_key(
        self, request: admin_pb.CreateKeyRequest, call: Call
    ) -> admin_pb.CreateKeyResponse:
        await self._check(call)
        args = validate_new_key(request)
        key, secret = await stored(self.store).keys.create(**args)  # type: ignore[arg-type]
        return admin_pb.CreateKeyResponse(key=key_message(key), secret=secret)

    async def list_keys(
        self, request: admin_pb.ListKeysRequest, call: Call
    ) -> admin_pb.ListKeysResponse:
        await self._check(call)
        keys = await stored(self.store).keys.list(
            kind=request.kind or None, owner=request.owner or None,
            include_revoked=request.include_revoked,
        )  # fmt: skip
        return admin_pb.ListKeysResponse(keys=[key_message(k) for k in keys])

    async def get_key(self, request: admin_pb.GetKeyRequest, call: Call) -> admin_pb.GetKeyResponse:
        await self._check(call)
        return admin_pb.GetKeyResponse(key=key_message(await key_of(self.store, request.key_id)))

    async def revoke_key(
        self, request: admin_pb.RevokeKeyRequest, call: Call
    ) -> admin_pb.RevokeKeyResponse:
        await self._check(call)
        key = await key_of(self.store, request.key_id)
        revoked = await stored(self.store).keys.revoke(key.id)
        if revoked is None:
            raise NotFound(f"key {request.key_id!r} does not exist", {"key": request.key_id})
        self.accounts.admission.keys.forget(key.id)
        return admin_pb.RevokeKeyResponse(key=key_message(revoked))

    # -- live configuration ----------------------------------------------------------

    async def reload_config(
        self, request: admin_pb.ReloadConfigRequest, call: Call
    ) -> admin_pb.ReloadConfigResponse:
        await self._admit(call)
        return await self.control.reload()

    async def retrain_router(
        self, request: admin_pb.RetrainRouterRequest, call: Call
    ) -> admin_pb.RetrainRouterResponse:
        await self._admit(call)
        await self.accounts.ledger.flush()  # the rows of the latest rated answers
        outcome = await retrain_from_ledger(self.live, self.store)
        return admin_pb.RetrainRouterResponse(
            retrained=outcome.retrained, detail=outcome.detail,
            cheapest_rows=outcome.cheapest, above_rows=outcome.above,
            held_out_auc=outcome.held_out_auc, previous_auc=outcome.previous_auc,
            held_out_gain=outcome.held_out_gain, previous_gain=outcome.previous_gain,
        )  # fmt: skip

    async def enable_provider(
        self, request: admin_pb.EnableProviderRequest, call: Call
    ) -> admin_pb.EnableProviderResponse:
        await self._admit(call)
        upstream = self.control.set_enabled(request.provider_id, True)
        return admin_pb.EnableProviderResponse(
            provider=provider_message(upstream), model=upstream.model.id
        )

    async def disable_provider(
        self, request: admin_pb.DisableProviderRequest, call: Call
    ) -> admin_pb.DisableProviderResponse:
        await self._admit(call)
        upstream = self.control.set_enabled(request.provider_id, False)
        return admin_pb.DisableProviderResponse(
            provider=provider_message(upstream), model=upstream.model.id
        )

    # -- the admin page --------------------------------------------------------------

    async def get_dashboard(
        self, request: admin_pb.GetDashboardRequest, call: Call
    ) -> admin_pb.GetDashboardResponse:
        await self._admit(call)
        return await self.dashboard.gather()
