"""AdminService: keys (the key store), live configuration (reload, providers on and
off) and the admin page's data. Every method takes an administrator: an admin key (of
the whole gateway, or of one team: that team's keys only) or a signed-in user. Every
change is written to the audit log with it, or not made."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from gateway.v1 import admin_service_pb2 as admin_pb

from server.accounting.accounts import Accounts
from server.application import key_pages
from server.application.control import Control
from server.application.dashboard import Dashboard
from server.application.governance.audit import Actor, Admins
from server.application.pipeline.state import Live
from server.application.provider import provider_message
from server.application.retrain import retrain_from_ledger
from server.application.traffic_reports import shadow_report, traffic_state
from server.base.call import Call
from server.base.config import Config, check_tool_globs
from server.base.errors import Conflict, Internal, InvalidArgument, NotFound
from server.storage import Store
from server.storage.keys import KeyRecord

KINDS = ("api", "router", "admin")
PERIODS = ("none", "daily", "monthly")


def key_message(key: KeyRecord) -> admin_pb.ApiKey:
    out = admin_pb.ApiKey(
        id=key.id, prefix=key.prefix, kind=key.kind, name=key.name, owner=key.owner,
        budget_period=key.budget_period, create_time=int(key.created_at), revoked=key.revoked,
        mcp_tools=key.mcp_tools, team=key.team_id, models=key.models,
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
    if request.team:
        args["team_id"] = request.team
    if request.models:
        args["models"] = tuple(check_models(list(request.models), "models"))
    return args


CLEARABLE = ("budget_usd", "requests_per_minute", "tokens_per_minute")


def key_changes(key: KeyRecord, request: admin_pb.UpdateKeyRequest) -> KeyRecord:
    """`key` with what an UpdateKeyRequest changes, each value checked."""
    changes: dict[str, Any] = {}
    for name in ("requests_per_minute", "tokens_per_minute"):
        if request.HasField(name):
            if getattr(request, name) < 1:
                raise InvalidArgument.for_field(name, "must be at least 1")
            changes[name] = getattr(request, name)
    if request.HasField("budget_usd"):
        if not request.budget_usd >= 0:
            raise InvalidArgument.for_field("budget_usd", "must be at least 0")
        changes["budget_usd"] = request.budget_usd
    if request.budget_period:
        if request.budget_period not in PERIODS:
            raise InvalidArgument.for_field("budget_period", f"must be one of {', '.join(PERIODS)}")
        changes["budget_period"] = request.budget_period
    if request.HasField("owner"):
        changes["owner"] = request.owner
    if request.HasField("team"):
        changes["team_id"] = request.team
    if request.replace_models:
        changes["models"] = tuple(check_models(list(request.models), "models"))
    if request.replace_mcp_tools:
        try:
            changes["mcp_tools"] = tuple(check_tool_globs(list(request.mcp_tools)))
        except ValueError as exc:
            raise InvalidArgument.for_field("mcp_tools", str(exc)) from None
    for name in request.clear:
        if name not in CLEARABLE:
            raise InvalidArgument.for_field(
                "clear", f"{name!r} is not one of {', '.join(CLEARABLE)}"
            )
        changes[name] = None
    return dataclasses.replace(key, **changes)


def check_models(models: list[str], name: str) -> list[str]:
    """A model allowlist: ids without blanks or line breaks, each once."""
    for model in models:
        if not model.strip() or model != model.strip() or "\n" in model:
            raise InvalidArgument.for_field(name, f"{model!r} is not a model id")
    return list(dict.fromkeys(models))


def key_record(key: KeyRecord) -> dict[str, object]:
    """A key as the audit log records it: no secret, no digest; its prefix only."""
    return {
        "id": key.id, "prefix": key.prefix, "kind": key.kind, "name": key.name,
        "owner": key.owner, "team": key.team_id, "requests_per_minute": key.requests_per_minute,
        "tokens_per_minute": key.tokens_per_minute, "budget_usd": key.budget_usd,
        "budget_period": key.budget_period, "expires_at": key.expires_at,
        "revoked_at": key.revoked_at, "mcp_tools": list(key.mcp_tools),
        "models": list(key.models),
    }  # fmt: skip


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
        admins: Admins,
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store
        self.control = control
        self.dashboard = dashboard
        self.admins = admins
        self.auditor = admins.auditor

    async def _admit(self, call: Call) -> Actor:
        """Live configuration and the admin page: calls with a ledger row, by an
        administrator of the whole gateway."""
        actor = await self.admins.admit(call)
        actor.require_unrestricted("this method")
        return actor

    async def _check(self, call: Call) -> Actor:
        """Key management: not billed to the admin key, no ledger row."""
        return await self.admins.check(call)

    async def _team_of(self, actor: Actor, team_id: str, field: str = "") -> None:
        """PermissionDenied unless `actor` may manage team `team_id` (a key of no team:
        only an administrator of the whole gateway). `field`: the request's field that
        named the team, named in the refusal of one that does not exist."""
        if not team_id:
            actor.require_unrestricted("a key of no team")
            return
        team = await stored(self.store).governance.get_team(team_id)
        if team is None:
            named = {"field": field} if field else {}
            prefix = f"{field}: " if field else ""
            raise NotFound(f"{prefix}team {team_id!r} does not exist", {"team": team_id, **named})
        actor.require_team(team.id, team.org_id)

    # -- keys ------------------------------------------------------------------------

    async def create_key(
        self, request: admin_pb.CreateKeyRequest, call: Call
    ) -> admin_pb.CreateKeyResponse:
        actor = await self._check(call)
        actor.require_write()
        args = validate_new_key(request)
        if not request.team and actor.teams is not None and len(actor.teams) == 1:
            args["team_id"] = next(iter(actor.teams))  # a team's admin key: its own team
        await self._team_of(actor, str(args.get("team_id", "")), "team" if request.team else "")
        async with self.auditor.change(call, actor) as change:
            key, secret = await stored(self.store).keys.create(**args, ex=change.tx)  # type: ignore[arg-type]
            change.record("key.create", f"key:{key.id}", None, key_record(key))
        return admin_pb.CreateKeyResponse(key=key_message(key), secret=secret)

    async def list_keys(
        self, request: admin_pb.ListKeysRequest, call: Call
    ) -> admin_pb.ListKeysResponse:
        actor = await self._check(call)
        keys = await stored(self.store).keys.list(
            kind=request.kind or None, owner=request.owner or None,
            include_revoked=request.include_revoked,
        )  # fmt: skip
        if not actor.unrestricted:
            teams = {t.id: t.org_id for t in await stored(self.store).governance.list_teams()}
            keys = [
                k for k in keys
                if k.team_id in teams and actor.may_manage_team(k.team_id, teams[k.team_id])
            ]  # fmt: skip
        keys = key_pages.matching(keys, request.query, request.team)
        shown, token = key_pages.page(keys, request.order_by, request.page_size, request.page_token)
        return admin_pb.ListKeysResponse(
            keys=[key_message(k) for k in shown], next_page_token=token, total_size=len(keys)
        )

    async def get_key(self, request: admin_pb.GetKeyRequest, call: Call) -> admin_pb.GetKeyResponse:
        actor = await self._check(call)
        key = await key_of(self.store, request.key_id)
        await self._team_of(actor, key.team_id)
        return admin_pb.GetKeyResponse(key=key_message(key))

    async def revoke_key(
        self, request: admin_pb.RevokeKeyRequest, call: Call
    ) -> admin_pb.RevokeKeyResponse:
        actor = await self._check(call)
        actor.require_write()
        key = await key_of(self.store, request.key_id)
        await self._team_of(actor, key.team_id)
        async with self.auditor.change(call, actor) as change:
            revoked = await stored(self.store).keys.revoke(key.id, change.tx)
            if revoked is None:
                raise NotFound(f"key {request.key_id!r} does not exist", {"key": request.key_id})
            if key.revoked_at is None:  # revoking a revoked key changes nothing
                change.record("key.revoke", f"key:{key.id}", key_record(key), key_record(revoked))
        self.accounts.admission.keys.forget(key.id)
        return admin_pb.RevokeKeyResponse(key=key_message(revoked))

    async def update_key(
        self, request: admin_pb.UpdateKeyRequest, call: Call
    ) -> admin_pb.UpdateKeyResponse:
        actor = await self._check(call)
        actor.require_write()
        key = await key_of(self.store, request.key_id)
        await self._team_of(actor, key.team_id)
        changed = key_changes(key, request)
        if changed.team_id != key.team_id:
            await self._team_of(actor, changed.team_id, "team")  # moved: the new team's too
        async with self.auditor.change(call, actor) as change:
            await stored(self.store).keys.update(change.tx, changed)
            change.record("key.update", f"key:{key.id}", key_record(key), key_record(changed))
        self.accounts.admission.keys.forget(key.id)
        return admin_pb.UpdateKeyResponse(key=key_message(changed))

    async def rotate_key(
        self, request: admin_pb.RotateKeyRequest, call: Call
    ) -> admin_pb.RotateKeyResponse:
        actor = await self._check(call)
        actor.require_write()
        key = await key_of(self.store, request.key_id)
        await self._team_of(actor, key.team_id)
        if key.revoked:
            raise Conflict(f"key {key.id!r} is revoked: it cannot be rotated", {"key": key.id})
        async with self.auditor.change(call, actor) as change:
            rotated, secret = await stored(self.store).keys.rotate(change.tx, key)
            change.record("key.rotate", f"key:{key.id}", key_record(key), key_record(rotated))
        self.accounts.admission.keys.forget(key.id)
        return admin_pb.RotateKeyResponse(key=key_message(rotated), secret=secret)

    # -- live configuration ----------------------------------------------------------

    async def reload_config(
        self, request: admin_pb.ReloadConfigRequest, call: Call
    ) -> admin_pb.ReloadConfigResponse:
        actor = await self._admit(call)
        # Recorded first: a reload the audit log cannot record is not made.
        async with self.control.reloading() as prepared:
            await self.auditor.event(
                call, actor.id, "config.reload", f"config:{prepared.source}",
                config_summary(prepared.before), config_summary(prepared.config),
            )  # fmt: skip
        await self.control.everywhere({"op": "reload"})
        assert prepared.answer is not None
        return prepared.answer

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
        actor = await self._admit(call)
        found = self.control.find(request.provider_id)
        # Recorded first: a switch the audit log cannot record is not made.
        await self.auditor.event(
            call, actor.id, "provider.enable", f"provider:{found.config.id}",
            {"enabled": False}, {"enabled": True},
        )  # fmt: skip
        upstream = self.control.set_enabled(request.provider_id, True)
        await self.control.everywhere(
            {"op": "provider", "provider": upstream.config.id, "enabled": True}
        )
        return admin_pb.EnableProviderResponse(
            provider=provider_message(upstream), model=upstream.model.id
        )

    async def disable_provider(
        self, request: admin_pb.DisableProviderRequest, call: Call
    ) -> admin_pb.DisableProviderResponse:
        actor = await self._admit(call)
        found = self.control.find(request.provider_id)
        # Recorded first: a switch the audit log cannot record is not made.
        await self.auditor.event(
            call, actor.id, "provider.disable", f"provider:{found.config.id}",
            {"enabled": True}, {"enabled": False},
        )  # fmt: skip
        upstream = self.control.set_enabled(request.provider_id, False)
        await self.control.everywhere(
            {"op": "provider", "provider": upstream.config.id, "enabled": False}
        )
        return admin_pb.DisableProviderResponse(
            provider=provider_message(upstream), model=upstream.model.id
        )

    async def get_shadow_report(
        self, request: admin_pb.GetShadowReportRequest, call: Call
    ) -> admin_pb.GetShadowReportResponse:
        actor = await self.admins.admit(call)
        actor.require_reader()
        await self.accounts.ledger.flush()  # this instance's latest rows
        return await shadow_report(self.store, request)

    async def get_traffic(
        self, request: admin_pb.GetTrafficRequest, call: Call
    ) -> admin_pb.GetTrafficResponse:
        actor = await self.admins.admit(call)
        actor.require_reader()
        return await traffic_state(self.accounts, self.store)

    # -- the admin page --------------------------------------------------------------

    async def get_dashboard(
        self, request: admin_pb.GetDashboardRequest, call: Call
    ) -> admin_pb.GetDashboardResponse:
        actor = await self.admins.admit(call)
        actor.require_reader()  # a viewer of the whole gateway reads the page too
        return await self.dashboard.gather(request)


def config_summary(config: Config) -> dict[str, object]:
    """What a reload changes, in short: the models with their providers, the keys of the
    file by name (never their secrets), the guardrails and the MCP servers."""
    return {
        "models": {m.id: [p.id for p in m.providers] for m in config.models},
        "keys": sorted(k.name for k in config.keys),
        "guardrails": sorted(g.id for g in config.guardrails),
        "mcp_servers": sorted(s.id for s in config.mcp.servers),
    }
