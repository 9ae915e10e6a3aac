"""AdminService's organisations, teams, users, memberships and audit log.

Every change runs with its audit event in one transaction (`Auditor.change`). A team's
administrator manages that team only; organisations, users and the audit log need an
administrator of the whole gateway. Budgets above a parent's are accepted: enforcement
reserves against every level, so the tightest holds, and answers show it.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from collections.abc import AsyncGenerator
from typing import Any

from gateway.v1 import admin_service_pb2 as admin_pb

from server.accounting.accounts import Accounts
from server.accounting.budget import period_bounds
from server.application.admin import PERIODS, check_models, stored
from server.application.governance.audit import Actor, Admins
from server.base.call import Call
from server.base.caller import BudgetSpec, account_of
from server.base.errors import Conflict, InvalidArgument, NotFound, PreconditionFailed
from server.storage import Store
from server.storage.audit import AuditEvent, AuditFilter
from server.storage.db import Executor
from server.storage.governance import (
    ORG_ROLES,
    TEAM_ROLES,
    Limits,
    Membership,
    Org,
    Team,
    User,
)

MAX_PAGE = 1000
CLEARABLE = ("budget_usd", "requests_per_minute", "tokens_per_minute")


def limits_of(message: admin_pb.Limits, field: str = "limits") -> Limits:
    """A request's limits, checked; each bad value named by its field."""
    period = message.budget_period or "monthly"
    if period not in PERIODS:
        raise InvalidArgument.for_field(
            f"{field}.budget_period", f"must be one of {', '.join(PERIODS)}"
        )
    if message.HasField("budget_usd") and not message.budget_usd >= 0:
        raise InvalidArgument.for_field(f"{field}.budget_usd", "must be at least 0")
    for name in ("requests_per_minute", "tokens_per_minute"):
        if message.HasField(name) and getattr(message, name) < 1:
            raise InvalidArgument.for_field(f"{field}.{name}", "must be at least 1")
    return Limits(
        message.budget_usd if message.HasField("budget_usd") else None,
        period,
        message.requests_per_minute if message.HasField("requests_per_minute") else None,
        message.tokens_per_minute if message.HasField("tokens_per_minute") else None,
        tuple(check_models(list(message.models), f"{field}.models")),
    )


def limits_message(limits: Limits) -> admin_pb.Limits:
    out = admin_pb.Limits(budget_period=limits.budget_period, models=limits.models)
    if limits.budget_usd is not None:
        out.budget_usd = limits.budget_usd
    if limits.requests_per_minute is not None:
        out.requests_per_minute = limits.requests_per_minute
    if limits.tokens_per_minute is not None:
        out.tokens_per_minute = limits.tokens_per_minute
    return out


def updated(
    current: Limits, request: admin_pb.UpdateOrganizationRequest | admin_pb.UpdateTeamRequest
) -> Limits:
    """`current` with the fields the request sets, clears or replaces."""
    asked = request.limits
    changes: dict[str, Any] = {}
    if asked.HasField("budget_usd"):
        changes["budget_usd"] = asked.budget_usd
    if asked.budget_period:
        changes["budget_period"] = asked.budget_period
    for name in ("requests_per_minute", "tokens_per_minute"):
        if asked.HasField(name):
            changes[name] = getattr(asked, name)
    if request.replace_models or asked.models:
        changes["models"] = tuple(asked.models)
    for name in request.clear:
        if name not in CLEARABLE:
            raise InvalidArgument.for_field(
                "clear", f"{name!r} is not one of {', '.join(CLEARABLE)}"
            )
        changes[name] = None
    merged = dataclasses.replace(current, **changes)
    check = limits_message(merged)
    limits_of(check)  # the merged limits, checked as a new level's are
    return merged


def _record(value: Any) -> dict[str, Any]:
    """An organisation, team, user or membership as the audit log records it."""
    out = dataclasses.asdict(value)
    if "limits" in out:
        out["limits"] = value.limits.as_dict()
    return out


def _if_match(
    request: admin_pb.UpdateOrganizationRequest | admin_pb.UpdateTeamRequest | None, call: Call
) -> int | None:
    """The version an update is conditional on: the request's `if_match`, else the
    `If-Match` header; None when the update is unconditional."""
    if request is not None and request.HasField("if_match"):
        return request.if_match
    header = call.metadata.get("if-match", "").strip()
    if not header or header == "*":
        return None
    tag = header.removeprefix("W/").strip('"')
    if not tag.isdigit():
        raise InvalidArgument.for_field("If-Match", "must be a version this API sent as ETag")
    return int(tag)


def _etag(call: Call, version: int) -> None:
    call.response_metadata["etag"] = f'"{version}"'


def event_message(event: AuditEvent) -> admin_pb.AuditEvent:
    return admin_pb.AuditEvent(
        seq=event.seq, time=event.ts, actor=event.actor, actor_address=event.actor_address,
        action=event.action, target=event.target, before=event.before or "",
        after=event.after or "", request_id=event.request_id, prev_hash=event.prev_hash,
        hash=event.hash,
    )  # fmt: skip


class Governance:
    def __init__(self, accounts: Accounts, store: Store | None, admins: Admins) -> None:
        self.accounts = accounts
        self.store = store
        self.admins = admins
        self.auditor = admins.auditor

    async def _actor(self, call: Call) -> Actor:
        return await self.admins.check(call)

    async def _spent(
        self, level: str, level_id: str, name: str, limits: Limits, org_id: str
    ) -> float:
        """A level's spend this budget period: what its budget counts (the ledger's
        rows, and reservations settled since), or, without a budget, its rows."""
        account = account_of(level, level_id)
        await self.accounts.settled()
        if limits.budget_usd is not None:
            # The accounts of an organisation's levels share its Redis hash tag.
            spec = BudgetSpec(
                account, name, limits.budget_usd, limits.budget_period, level, level_id,
                account_of("org", org_id),
            )  # fmt: skip
            spent, _ = await self.accounts.budgets.status(spec)
            return spent
        start, _ = period_bounds(limits.budget_period)
        stored_spend = await stored(self.store).usage.spent_since(account, start)
        return stored_spend + self.accounts.ledger.pending_cost(account, start)

    # -- organisations ---------------------------------------------------------------

    async def _org(self, org_id: str, ex: Executor | None = None) -> Org:
        if not org_id:
            raise InvalidArgument.for_field("org_id", "is required")
        org = await stored(self.store).governance.get_org(org_id, ex)
        if org is None:
            raise NotFound(f"organisation {org_id!r} does not exist", {"org": org_id})
        return org

    async def _org_message(self, org: Org) -> admin_pb.Organization:
        return admin_pb.Organization(
            id=org.id, name=org.name, limits=limits_message(org.limits), version=org.version,
            create_time=int(org.created_at),
            spent_usd=round(await self._spent("org", org.id, org.name, org.limits, org.id), 9),
        )  # fmt: skip

    async def create_organization(
        self, request: admin_pb.CreateOrganizationRequest, call: Call
    ) -> admin_pb.CreateOrganizationResponse:
        actor = await self._actor(call)
        actor.require_unrestricted("creating an organisation")
        if not request.name.strip():
            raise InvalidArgument.for_field("name", "is required")
        limits = limits_of(request.limits)
        governance = stored(self.store).governance
        async with self.auditor.change(call, actor) as change:
            if await governance.get_org(request.name, change.tx) is not None:
                raise Conflict(f"organisation {request.name!r} exists", {"org": request.name})
            org = await governance.create_org(change.tx, request.name, limits)
            change.record("org.create", f"org:{org.id}", None, _record(org))
        _etag(call, org.version)
        return admin_pb.CreateOrganizationResponse(org=await self._org_message(org))

    async def list_organizations(
        self, request: admin_pb.ListOrganizationsRequest, call: Call
    ) -> admin_pb.ListOrganizationsResponse:
        actor = await self._actor(call)
        orgs = await stored(self.store).governance.list_orgs()
        if actor.orgs is not None or actor.teams is not None:
            orgs = [o for o in orgs if actor.orgs is not None and o.id in actor.orgs]
        return admin_pb.ListOrganizationsResponse(orgs=[await self._org_message(o) for o in orgs])

    async def get_organization(
        self, request: admin_pb.GetOrganizationRequest, call: Call
    ) -> admin_pb.GetOrganizationResponse:
        actor = await self._actor(call)
        org = await self._org(request.org_id)
        if not (actor.unrestricted or (actor.orgs is not None and org.id in actor.orgs)):
            actor.require_unrestricted("this organisation")
        _etag(call, org.version)
        return admin_pb.GetOrganizationResponse(org=await self._org_message(org))

    async def update_organization(
        self, request: admin_pb.UpdateOrganizationRequest, call: Call
    ) -> admin_pb.UpdateOrganizationResponse:
        actor = await self._actor(call)
        actor.require_write()
        expected = _if_match(request, call)
        governance = stored(self.store).governance
        async with self.auditor.change(call, actor) as change:
            org = await self._org(request.id, change.tx)
            if not (actor.unrestricted or (actor.orgs is not None and org.id in actor.orgs)):
                actor.require_unrestricted("this organisation")
            _check_version(expected, org.version, f"organisation {org.id!r}")
            if request.name:
                raise InvalidArgument.for_field("name", "an organisation keeps its name")
            changed = await governance.update_org(change.tx, org, updated(org.limits, request))
            change.record("org.update", f"org:{org.id}", _record(org), _record(changed))
        _etag(call, changed.version)
        return admin_pb.UpdateOrganizationResponse(org=await self._org_message(changed))

    # -- teams -----------------------------------------------------------------------

    async def _team(self, team_id: str, ex: Executor | None = None) -> Team:
        if not team_id:
            raise InvalidArgument.for_field("team_id", "is required")
        team = await stored(self.store).governance.get_team(team_id, ex)
        if team is None:
            raise NotFound(f"team {team_id!r} does not exist", {"team": team_id})
        return team

    async def _team_message(self, team: Team) -> admin_pb.Team:
        store = stored(self.store)
        org = await store.governance.get_org(team.org_id)
        own, parent = team.limits, org.limits if org is not None else Limits()
        budgets = [b for b in (own.budget_usd, parent.budget_usd) if b is not None]
        models: tuple[str, ...] = own.models
        if parent.models:
            models = tuple(m for m in (own.models or parent.models) if m in parent.models)
        keys = await store.keys.list(team_id=team.id)
        out = admin_pb.Team(
            id=team.id, org_id=team.org_id, name=team.name, limits=limits_message(own),
            effective_models=models, version=team.version, create_time=int(team.created_at),
            spent_usd=round(await self._spent("team", team.id, team.name, own, team.org_id), 9),
            keys=len([k for k in keys if not k.expired()]),
        )  # fmt: skip
        if budgets:
            out.effective_budget_usd = min(budgets)
        return out

    async def create_team(
        self, request: admin_pb.CreateTeamRequest, call: Call
    ) -> admin_pb.CreateTeamResponse:
        actor = await self._actor(call)
        org = await self._org(request.org_id)
        if not (actor.unrestricted or (actor.orgs is not None and org.id in actor.orgs)):
            actor.require_unrestricted("creating a team")
        if not request.name.strip():
            raise InvalidArgument.for_field("name", "is required")
        limits = limits_of(request.limits)
        governance = stored(self.store).governance
        async with self.auditor.change(call, actor) as change:
            if any(t.name == request.name for t in await governance.list_teams(org.id, change.tx)):
                raise Conflict(
                    f"team {request.name!r} exists in organisation {org.name!r}",
                    {"team": request.name},
                )
            team = await governance.create_team(change.tx, org.id, request.name, limits)
            change.record("team.create", f"team:{team.id}", None, _record(team))
        _etag(call, team.version)
        return admin_pb.CreateTeamResponse(team=await self._team_message(team))

    async def list_teams(
        self, request: admin_pb.ListTeamsRequest, call: Call
    ) -> admin_pb.ListTeamsResponse:
        actor = await self._actor(call)
        teams = await stored(self.store).governance.list_teams(request.org_id)
        teams = [t for t in teams if actor.may_manage_team(t.id, t.org_id)]
        return admin_pb.ListTeamsResponse(teams=[await self._team_message(t) for t in teams])

    async def get_team(
        self, request: admin_pb.GetTeamRequest, call: Call
    ) -> admin_pb.GetTeamResponse:
        actor = await self._actor(call)
        team = await self._team(request.team_id)
        actor.require_team(team.id, team.org_id)
        _etag(call, team.version)
        return admin_pb.GetTeamResponse(team=await self._team_message(team))

    async def update_team(
        self, request: admin_pb.UpdateTeamRequest, call: Call
    ) -> admin_pb.UpdateTeamResponse:
        actor = await self._actor(call)
        actor.require_write()
        expected = _if_match(request, call)
        governance = stored(self.store).governance
        async with self.auditor.change(call, actor) as change:
            team = await self._team(request.id, change.tx)
            actor.require_team(team.id, team.org_id)
            _check_version(expected, team.version, f"team {team.id!r}")
            name = request.name.strip() or team.name
            limits = updated(team.limits, request)
            changed = await governance.update_team(change.tx, team, name, limits)
            change.record("team.update", f"team:{team.id}", _record(team), _record(changed))
        _etag(call, changed.version)
        return admin_pb.UpdateTeamResponse(team=await self._team_message(changed))

    async def delete_team(
        self, request: admin_pb.DeleteTeamRequest, call: Call
    ) -> admin_pb.DeleteTeamResponse:
        actor = await self._actor(call)
        store = stored(self.store)
        async with self.auditor.change(call, actor) as change:
            team = await self._team(request.team_id, change.tx)
            if not (actor.unrestricted or (actor.orgs is not None and team.org_id in actor.orgs)):
                actor.require_unrestricted("deleting a team")
            live = [k for k in await store.keys.list(team_id=team.id, ex=change.tx)]
            if live and not request.revoke_keys:
                raise Conflict(
                    f"team {team.id!r} has {len(live)} live keys; revoke them first or ask "
                    "to revoke them with it (revoke_keys)",
                    {"team": team.id, "keys": str(len(live))},
                )
            for key in live:
                await store.keys.revoke(key.id, change.tx)
            await store.governance.delete_team(change.tx, team.id)
            after = {"deleted": True, "revoked_keys": [k.id for k in live]}
            change.record("team.delete", f"team:{team.id}", _record(team), after)
        for key in live:
            self.accounts.admission.keys.forget(key.id)
        return admin_pb.DeleteTeamResponse(team_id=team.id, revoked_keys=[k.id for k in live])

    # -- users and memberships -------------------------------------------------------

    async def _user_message(self, user: User) -> admin_pb.User:
        members = await stored(self.store).governance.memberships(user_id=user.id)
        return admin_pb.User(
            id=user.id, subject=user.subject, email=user.email,
            create_time=int(user.created_at), memberships=[member_message(m) for m in members],
        )  # fmt: skip

    async def create_user(
        self, request: admin_pb.CreateUserRequest, call: Call
    ) -> admin_pb.CreateUserResponse:
        actor = await self._actor(call)
        actor.require_unrestricted("creating a user")
        if not (request.subject or request.email):
            raise InvalidArgument.for_field("subject", "a subject or an email is required")
        if request.email and "@" not in request.email:
            raise InvalidArgument.for_field("email", "is not an email address")
        governance = stored(self.store).governance
        async with self.auditor.change(call, actor) as change:
            if request.subject and await governance.user_by_subject(request.subject, change.tx):
                raise Conflict("a user with this subject exists", {"subject": request.subject})
            user = await governance.create_user(change.tx, request.subject, request.email)
            change.record("user.create", f"user:{user.id}", None, _record(user))
        return admin_pb.CreateUserResponse(user=await self._user_message(user))

    async def list_users(
        self, request: admin_pb.ListUsersRequest, call: Call
    ) -> admin_pb.ListUsersResponse:
        actor = await self._actor(call)
        actor.require_unrestricted("listing users")
        users = await stored(self.store).governance.list_users()
        return admin_pb.ListUsersResponse(users=[await self._user_message(u) for u in users])

    async def sign_out_user(
        self, request: admin_pb.SignOutUserRequest, call: Call
    ) -> admin_pb.SignOutUserResponse:
        actor = await self._actor(call)
        actor.require_unrestricted("ending a user's sessions")
        store = stored(self.store)
        async with self.auditor.change(call, actor) as change:
            user = await self._user(request.user_id, change.tx)
            ended = await store.sessions.revoke_user(change.tx, user.id)
            change.record(
                "user.signout", f"user:{user.id}", {"live_sessions": ended},
                {"live_sessions": 0},
            )  # fmt: skip
        return admin_pb.SignOutUserResponse(user_id=user.id, sessions_revoked=ended)

    async def _place(
        self, actor: Actor, org_id: str, team_id: str, role: str | None, ex: Executor
    ) -> tuple[str, str]:
        """The (organisation, team) of a membership, checked against the actor's
        rights and the role the place takes."""
        if team_id:
            team = await self._team(team_id, ex)
            actor.require_team(team.id, team.org_id)
            if role is not None and role not in TEAM_ROLES:
                raise InvalidArgument.for_field(
                    "role", f"a team's role is one of {', '.join(TEAM_ROLES)}"
                )
            return team.org_id, team.id
        org = await self._org(org_id, ex)
        if not (actor.unrestricted or (actor.orgs is not None and org.id in actor.orgs)):
            actor.require_unrestricted("an organisation's roles")
        if role is not None and role not in ORG_ROLES:
            raise InvalidArgument.for_field(
                "role", f"an organisation's role is one of {', '.join(ORG_ROLES)}"
            )
        return org.id, ""

    async def _user(self, user_id: str, ex: Executor) -> User:
        if not user_id:
            raise InvalidArgument.for_field("user_id", "is required")
        user = await stored(self.store).governance.get_user(user_id, ex)
        if user is None:
            raise NotFound(f"user {user_id!r} does not exist", {"user": user_id})
        return user

    async def put_membership(
        self, request: admin_pb.PutMembershipRequest, call: Call
    ) -> admin_pb.PutMembershipResponse:
        actor = await self._actor(call)
        actor.require_write()
        expected = _if_match(None, call)
        if not request.role:
            raise InvalidArgument.for_field("role", "is required")
        limits = limits_of(request.limits)
        governance = stored(self.store).governance
        async with self.auditor.change(call, actor) as change:
            org_id, team_id = await self._place(
                actor, request.org_id, request.team_id, request.role, change.tx
            )
            user = await self._user(request.user_id, change.tx)
            old = await governance.membership(org_id, team_id, user.id, change.tx)
            if expected is not None:
                _check_version(expected, old.version if old else 0, "the membership")
            member = Membership(
                org_id, team_id, user.id, request.role, "admin", limits,
                old.version + 1 if old else 1, old.created_at if old else time.time(),
            )  # fmt: skip
            await governance.put_membership(change.tx, member)
            target = f"membership:{org_id}/{team_id}/{user.id}"
            change.record(
                "membership.update" if old else "membership.create", target,
                _record(old) if old else None, _record(member),
            )  # fmt: skip
        _etag(call, member.version)
        return admin_pb.PutMembershipResponse(membership=member_message(member))

    async def list_memberships(
        self, request: admin_pb.ListMembershipsRequest, call: Call
    ) -> admin_pb.ListMembershipsResponse:
        actor = await self._actor(call)
        members = await stored(self.store).governance.memberships(
            org_id=request.org_id, team_id=request.team_id, user_id=request.user_id
        )
        members = [m for m in members if actor.may_manage_team(m.team_id, m.org_id)]
        return admin_pb.ListMembershipsResponse(memberships=[member_message(m) for m in members])

    async def delete_membership(
        self, request: admin_pb.DeleteMembershipRequest, call: Call
    ) -> admin_pb.DeleteMembershipResponse:
        actor = await self._actor(call)
        actor.require_write()
        governance = stored(self.store).governance
        async with self.auditor.change(call, actor) as change:
            org_id, team_id = await self._place(
                actor, request.org_id, request.team_id, None, change.tx
            )
            user = await self._user(request.user_id, change.tx)
            member = await governance.membership(org_id, team_id, user.id, change.tx)
            if member is None:
                raise NotFound(
                    f"user {request.user_id!r} has no membership there", {"user": request.user_id}
                )
            await governance.remove_membership(change.tx, member)
            target = f"membership:{org_id}/{team_id}/{user.id}"
            change.record("membership.delete", target, _record(member), None)
        return admin_pb.DeleteMembershipResponse(membership=member_message(member))

    # -- the audit log ---------------------------------------------------------------

    async def list_audit_events(
        self, request: admin_pb.ListAuditEventsRequest, call: Call
    ) -> admin_pb.ListAuditEventsResponse:
        actor = await self._actor(call)
        actor.require_unrestricted("the audit log")
        size = request.page_size or 100
        if not 1 <= size <= MAX_PAGE:
            raise InvalidArgument.for_field("page_size", f"must be 1 to {MAX_PAGE}")
        after = _page_token(request.page_token)
        match = _filter(request)
        events = await stored(self.store).audit.page(match, after, size + 1)
        token = ""
        if len(events) > size:
            events = events[:size]
            token = base64.urlsafe_b64encode(f"seq:{events[-1].seq}".encode()).decode()
        return admin_pb.ListAuditEventsResponse(
            events=[event_message(e) for e in events], next_page_token=token
        )

    async def export_audit_events(
        self, request: admin_pb.ExportAuditEventsRequest, call: Call
    ) -> AsyncGenerator[admin_pb.ExportAuditEventsResponse, None]:
        actor = await self._actor(call)
        actor.require_unrestricted("the audit log")
        if request.format != "jsonl":
            raise InvalidArgument.for_field("format", "must be jsonl")
        match = _filter(request)
        audit = stored(self.store).audit
        after = 0
        while True:
            events = await audit.page(match, after, MAX_PAGE)
            for event in events:
                yield admin_pb.ExportAuditEventsResponse(event=event_message(event))
            if len(events) < MAX_PAGE:
                return
            after = events[-1].seq


def member_message(member: Membership) -> admin_pb.Membership:
    return admin_pb.Membership(
        org_id=member.org_id, team_id=member.team_id, user_id=member.user_id, role=member.role,
        source=member.source, limits=limits_message(member.limits), version=member.version,
    )  # fmt: skip


def _check_version(expected: int | None, current: int, what: str) -> None:
    if expected is not None and expected != current:
        raise PreconditionFailed(
            f"{what} is at version {current}, not {expected}: read it again, then change it",
            {"version": str(current)},
        )


def _page_token(token: str) -> int:
    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
        kind, _, seq = text.partition(":")
        if kind != "seq" or not seq.isdigit():
            raise ValueError(text)
        return int(seq)
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument.for_field("page_token", "is not a token this API gave") from None


def _filter(
    request: admin_pb.ListAuditEventsRequest | admin_pb.ExportAuditEventsRequest,
) -> AuditFilter:
    return AuditFilter(
        request.actor, request.action, request.target,
        request.start_time if request.HasField("start_time") else None,
        request.end_time if request.HasField("end_time") else None,
    )  # fmt: skip
