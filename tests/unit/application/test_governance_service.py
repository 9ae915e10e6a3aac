"""The governance service called directly, in a gateway built with its SQLite store (no
servers): each request field checked and named when wrong, limits merged, cleared and
replaced, versions matched from the request or If-Match, a team admin kept to its team,
every change with its audit event, and the audit log paged and exported whole."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from gateway.v1 import admin_service_pb2 as pb

from server.application.governance.service import Governance, limits_message
from server.base import config
from server.base.call import PEER, Call
from server.base.caller import BudgetSpec
from server.base.errors import (
    Conflict,
    GatewayError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
)
from server.base.record import UsageRecord
from server.cli.serve import Gateway, open_gateway
from server.storage.governance import Limits
from tests.support.shared_state import ADMIN_KEY, config_with, redis_settings


@pytest.fixture
async def gateway(tmp_path) -> AsyncIterator[Gateway]:
    built = await open_gateway(config.parse(config_with(sqlite_path=str(tmp_path / "g.db")), "t"))
    yield built
    await built.aclose()


@pytest.fixture
def gov(gateway: Gateway) -> Governance:
    return gateway.services.governance


def admin(**metadata: str) -> Call:
    return Call({"x-admin-key": ADMIN_KEY, PEER: "ipv4:10.0.0.9:5000", **metadata},
                request_id="req-1")  # fmt: skip


async def team_admin(gateway: Gateway, team_id: str) -> Call:
    assert gateway.store is not None
    _, secret = await gateway.store.keys.create(kind="admin", name="ta", team_id=team_id)
    return Call({"x-admin-key": secret})


def refusal(caught: pytest.ExceptionInfo[GatewayError]) -> tuple[str, dict[str, str]]:
    return caught.value.message, dict(caught.value.metadata)


async def events(gov: Governance, **filters: Any) -> list[pb.AuditEvent]:
    listed = await gov.list_audit_events(pb.ListAuditEventsRequest(page_size=1000, **filters),
                                         admin())  # fmt: skip
    return list(listed.events)


LIMITS = pb.Limits(budget_usd=12.5, budget_period="daily", requests_per_minute=30,
                   tokens_per_minute=4000, models=["sim-pro", "sim-mini"])  # fmt: skip


async def test_an_organisations_life_with_its_audit_events(gov: Governance) -> None:
    call = admin()
    made = (await gov.create_organization(pb.CreateOrganizationRequest(name="acme", limits=LIMITS),
                                          call)).org  # fmt: skip
    assert call.response_metadata["etag"] == '"1"'
    assert (made.name, made.version, made.spent_usd) == ("acme", 1, 0)
    assert made.limits == LIMITS and made.create_time > 0
    got = call2 = admin()
    got = (await gov.get_organization(pb.GetOrganizationRequest(org_id="acme"), call2)).org
    assert got == made and call2.response_metadata["etag"] == '"1"'
    with pytest.raises(Conflict) as taken:
        await gov.create_organization(pb.CreateOrganizationRequest(name="acme"), admin())
    assert refusal(taken) == ("organisation 'acme' exists", {"org": "acme"})
    for name in ("", "  "):
        with pytest.raises(InvalidArgument) as nameless:
            await gov.create_organization(pb.CreateOrganizationRequest(name=name), admin())
        assert refusal(nameless) == ("name: is required", {"field": "name"})
    update = admin()
    changed = (await gov.update_organization(pb.UpdateOrganizationRequest(
        id=made.id, limits=pb.Limits(tokens_per_minute=9), clear=["budget_usd"],
        replace_models=True, if_match=1,
    ), update)).org  # fmt: skip
    assert update.response_metadata["etag"] == '"2"'
    assert changed.version == 2
    assert changed.limits == pb.Limits(budget_period="daily", requests_per_minute=30,
                                       tokens_per_minute=9)  # fmt: skip
    with pytest.raises(PreconditionFailed) as stale:
        await gov.update_organization(pb.UpdateOrganizationRequest(id=made.id, if_match=1),
                                      admin())  # fmt: skip
    assert refusal(stale) == (
        f"organisation {made.id!r} is at version 2, not 1: read it again, then change it",
        {"version": "2"},
    )
    with pytest.raises(InvalidArgument) as renamed:
        await gov.update_organization(pb.UpdateOrganizationRequest(id=made.id, name="x"), admin())
    assert refusal(renamed) == ("name: an organisation keeps its name", {"field": "name"})
    with pytest.raises(NotFound) as missing:
        await gov.get_organization(pb.GetOrganizationRequest(org_id="nope"), admin())
    assert refusal(missing) == ("organisation 'nope' does not exist", {"org": "nope"})
    with pytest.raises(InvalidArgument) as unnamed:
        await gov.get_organization(pb.GetOrganizationRequest(), admin())
    assert refusal(unnamed) == ("org_id: is required", {"field": "org_id"})
    listed = await gov.list_organizations(pb.ListOrganizationsRequest(), admin())
    assert [o.id for o in listed.orgs] == [made.id]
    recorded = await events(gov, target=f"org:{made.id}")
    assert [e.action for e in recorded] == ["org.create", "org.update"]
    first, second = recorded
    assert (first.actor, first.actor_address, first.request_id) == (
        "key:cfg-test-admin", "ipv4:10.0.0.9:5000", "req-1",
    )  # fmt: skip
    assert first.before == "" and json.loads(first.after)["limits"]["models"] == [
        "sim-pro", "sim-mini",
    ]  # fmt: skip
    assert json.loads(second.before)["version"] == 1 and json.loads(second.after)["version"] == 2
    assert json.loads(second.after)["limits"]["budget_usd"] is None
    assert set(json.loads(second.after)) == {"id", "name", "limits", "version", "created_at"}
    assert second.prev_hash == first.hash and len(second.hash) == 64 and second.seq == first.seq + 1


@pytest.mark.parametrize(
    ("limits", "field", "why"),
    [
        (pb.Limits(budget_period="yearly"), "limits.budget_period",
         "must be one of none, daily, monthly"),
        (pb.Limits(budget_usd=-0.01), "limits.budget_usd", "must be at least 0"),
        (pb.Limits(budget_usd=float("nan")), "limits.budget_usd", "must be at least 0"),
        (pb.Limits(requests_per_minute=0), "limits.requests_per_minute", "must be at least 1"),
        (pb.Limits(tokens_per_minute=0), "limits.tokens_per_minute", "must be at least 1"),
        (pb.Limits(models=["ok", " bad"]), "limits.models", "' bad' is not a model id"),
    ],
)  # fmt: skip
async def test_each_bad_limit_is_named(gov: Governance, limits, field, why) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await gov.create_organization(pb.CreateOrganizationRequest(name="o", limits=limits),
                                      admin())  # fmt: skip
    assert refusal(refused) == (f"{field}: {why}", {"field": field})


async def test_limits_at_their_bounds_and_defaults(gov: Governance) -> None:
    bounds = pb.Limits(budget_usd=0, requests_per_minute=1, tokens_per_minute=1,
                       models=["a", "a", "b"])  # fmt: skip
    made = (await gov.create_organization(pb.CreateOrganizationRequest(name="o", limits=bounds),
                                          admin())).org  # fmt: skip
    assert made.limits == pb.Limits(budget_usd=0, budget_period="monthly", requests_per_minute=1,
                                    tokens_per_minute=1, models=["a", "b"])  # fmt: skip
    bare = (await gov.create_organization(pb.CreateOrganizationRequest(name="p"), admin())).org
    assert bare.limits == pb.Limits(budget_period="monthly")
    assert not bare.limits.HasField("budget_usd")
    assert limits_message(Limits()) == pb.Limits(budget_period="monthly")


async def test_merged_limits_each_field_set_cleared_or_kept(gov: Governance) -> None:
    org = (await gov.create_organization(pb.CreateOrganizationRequest(name="o", limits=LIMITS),
                                         admin())).org  # fmt: skip

    async def update(**fields: Any) -> pb.Limits:
        reply = await gov.update_organization(pb.UpdateOrganizationRequest(id=org.id, **fields),
                                              admin())  # fmt: skip
        return reply.org.limits

    assert await update() == LIMITS  # nothing asked, nothing changed
    assert (await update(limits=pb.Limits(budget_usd=3))).budget_usd == 3
    assert (await update(limits=pb.Limits(budget_period="none"))).budget_period == "none"
    assert (await update(limits=pb.Limits(requests_per_minute=5))).requests_per_minute == 5
    assert (await update(limits=pb.Limits(tokens_per_minute=6))).tokens_per_minute == 6
    assert list((await update(limits=pb.Limits(models=["x"]))).models) == ["x"]
    kept = await update(clear=["requests_per_minute", "tokens_per_minute"])
    assert kept == pb.Limits(budget_usd=3, budget_period="none", models=["x"])
    with pytest.raises(InvalidArgument) as odd:
        await update(clear=["models"])
    assert refusal(odd) == (
        "clear: 'models' is not one of budget_usd, requests_per_minute, tokens_per_minute",
        {"field": "clear"},
    )
    with pytest.raises(InvalidArgument) as merged:
        await update(limits=pb.Limits(budget_period="weekly"))
    assert refusal(merged)[1] == {"field": "limits.budget_period"}
    assert list((await update(replace_models=True)).models) == []


async def test_if_match_from_the_header(gov: Governance) -> None:
    org = (await gov.create_organization(pb.CreateOrganizationRequest(name="o"), admin())).org
    request = pb.UpdateOrganizationRequest(id=org.id)
    for header in ("*", "", " "):
        await gov.update_organization(request, admin(**{"if-match": header}))
    assert (
        await gov.get_organization(pb.GetOrganizationRequest(org_id="o"), admin())
    ).org.version == 4
    for header in ('W/"4"', '"5"', " 6 "):
        await gov.update_organization(request, admin(**{"if-match": header}))
    with pytest.raises(PreconditionFailed):
        await gov.update_organization(request, admin(**{"if-match": '"3"'}))
    for bad in ("abc", '"-1"', "W/x", '"4X"'):
        with pytest.raises(InvalidArgument) as refused:
            await gov.update_organization(request, admin(**{"if-match": bad}))
        assert refusal(refused) == (
            "If-Match: must be a version this API sent as ETag",
            {"field": "If-Match"},
        )
    # The request's own if_match wins over the header.
    reply = await gov.update_organization(pb.UpdateOrganizationRequest(id=org.id, if_match=7),
                                          admin(**{"if-match": '"1"'}))  # fmt: skip
    assert reply.org.version == 8


async def test_teams_with_their_effective_limits_keys_and_deletion(
    gateway: Gateway, gov: Governance
) -> None:
    parent = pb.Limits(budget_usd=10, models=["sim-pro", "sim-mini"])
    org = (await gov.create_organization(pb.CreateOrganizationRequest(name="acme", limits=parent),
                                         admin())).org  # fmt: skip
    other = (await gov.create_organization(pb.CreateOrganizationRequest(name="globex"),
                                           admin())).org  # fmt: skip
    call = admin()
    team = (await gov.create_team(pb.CreateTeamRequest(
        org_id="acme", name="search", limits=pb.Limits(budget_usd=50, models=["sim-pro", "x"]),
    ), call)).team  # fmt: skip
    assert call.response_metadata["etag"] == '"1"'
    assert (team.org_id, team.name, team.version, team.keys) == (org.id, "search", 1, 0)
    assert team.effective_budget_usd == 10 and list(team.effective_models) == ["sim-pro"]
    loose = (await gov.create_team(pb.CreateTeamRequest(org_id=org.id, name="chat"), admin())).team
    assert list(loose.effective_models) == ["sim-pro", "sim-mini"]
    free = (await gov.create_team(pb.CreateTeamRequest(org_id=other.id, name="ads",
                                                       limits=pb.Limits(models=["m"])),
                                  admin())).team  # fmt: skip
    assert not free.HasField("effective_budget_usd") and list(free.effective_models) == ["m"]
    with pytest.raises(InvalidArgument) as nameless:
        await gov.create_team(pb.CreateTeamRequest(org_id=org.id, name=" "), admin())
    assert refusal(nameless) == ("name: is required", {"field": "name"})
    listed = await gov.list_teams(pb.ListTeamsRequest(org_id=org.id), admin())
    assert [t.id for t in listed.teams] == [team.id, loose.id]
    everything = await gov.list_teams(pb.ListTeamsRequest(), admin())
    assert [t.id for t in everything.teams] == [team.id, loose.id, free.id]
    got = admin()
    assert (await gov.get_team(pb.GetTeamRequest(team_id=team.id), got)).team == team
    assert got.response_metadata["etag"] == '"1"'
    with pytest.raises(NotFound) as missing:
        await gov.get_team(pb.GetTeamRequest(team_id="team_x"), admin())
    assert refusal(missing) == ("team 'team_x' does not exist", {"team": "team_x"})
    with pytest.raises(InvalidArgument) as unnamed:
        await gov.get_team(pb.GetTeamRequest(), admin())
    assert refusal(unnamed) == ("team_id: is required", {"field": "team_id"})
    update = admin()
    renamed = (await gov.update_team(pb.UpdateTeamRequest(
        id=team.id, name=" find ", limits=pb.Limits(requests_per_minute=3), if_match=1,
    ), update)).team  # fmt: skip
    assert (renamed.name, renamed.version, renamed.limits.requests_per_minute) == ("find", 2, 3)
    assert update.response_metadata["etag"] == '"2"'
    kept = (await gov.update_team(pb.UpdateTeamRequest(id=team.id), admin())).team
    assert kept.name == "find"
    with pytest.raises(PreconditionFailed) as stale:
        await gov.update_team(pb.UpdateTeamRequest(id=team.id, if_match=1), admin())
    assert refusal(stale)[0].startswith(f"team {team.id!r} is at version 3, not 1")
    store = gateway.store
    assert store is not None
    key, _ = await store.keys.create(kind="api", name="k1", team_id=team.id)
    expired, _ = await store.keys.create(kind="api", name="k0", team_id=team.id, expires_at=1.0)
    counted = (await gov.get_team(pb.GetTeamRequest(team_id=team.id), admin())).team
    assert counted.keys == 1  # the expired one not counted
    with pytest.raises(Conflict) as live:
        await gov.delete_team(pb.DeleteTeamRequest(team_id=team.id), admin())
    assert refusal(live) == (
        f"team {team.id!r} has 2 live keys; revoke them first or ask to revoke them with it "
        "(revoke_keys)",
        {"team": team.id, "keys": "2"},
    )
    deleted = await gov.delete_team(pb.DeleteTeamRequest(team_id=team.id, revoke_keys=True),
                                    admin())  # fmt: skip
    assert deleted.team_id == team.id and sorted(deleted.revoked_keys) == sorted(
        [key.id, expired.id]
    )
    assert (await store.keys.get(key.id)).revoked_at is not None  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        await gov.get_team(pb.GetTeamRequest(team_id=team.id), admin())
    actions = [e.action for e in await events(gov, action="team.")]
    assert actions == ["team.create"] * 3 + ["team.update"] * 2 + ["team.delete"]
    last = (await events(gov, action="team.delete"))[0]
    assert json.loads(last.after) == {"deleted": True, "revoked_keys": list(deleted.revoked_keys)}
    empty = await gov.delete_team(pb.DeleteTeamRequest(team_id=loose.id), admin())
    assert list(empty.revoked_keys) == []


async def test_a_team_admin_manages_its_team_only(gateway: Gateway, gov: Governance) -> None:
    org = (await gov.create_organization(pb.CreateOrganizationRequest(name="acme"), admin())).org
    mine = (await gov.create_team(pb.CreateTeamRequest(org_id=org.id, name="mine"), admin())).team
    theirs = (await gov.create_team(pb.CreateTeamRequest(org_id=org.id, name="theirs"),
                                    admin())).team  # fmt: skip
    call = await team_admin(gateway, mine.id)
    listed = await gov.list_teams(pb.ListTeamsRequest(), call)
    assert [t.id for t in listed.teams] == [mine.id]
    assert (await gov.list_organizations(pb.ListOrganizationsRequest(), call)).orgs == []
    await gov.update_team(pb.UpdateTeamRequest(id=mine.id, name="ours"), call)
    renamed = (await events(gov, target=f"team:{mine.id}"))[-1]
    # A call that came from no peer (made in this process) records no address.
    assert (renamed.action, renamed.actor_address) == ("team.update", "")
    for attempt in (
        gov.get_team(pb.GetTeamRequest(team_id=theirs.id), call),
        gov.update_team(pb.UpdateTeamRequest(id=theirs.id), call),
    ):
        with pytest.raises(PermissionDenied) as refused:
            await attempt
        assert refusal(refused)[0] == f"this administrator may not manage team {theirs.id!r}"
    for attempt, what in (
        (gov.create_organization(pb.CreateOrganizationRequest(name="x"), call),
         "creating an organisation"),
        (gov.get_organization(pb.GetOrganizationRequest(org_id=org.id), call), "this organisation"),
        (gov.update_organization(pb.UpdateOrganizationRequest(id=org.id), call),
         "this organisation"),
        (gov.create_team(pb.CreateTeamRequest(org_id=org.id, name="n"), call), "creating a team"),
        (gov.delete_team(pb.DeleteTeamRequest(team_id=mine.id), call), "deleting a team"),
        (gov.create_user(pb.CreateUserRequest(email="a@b.c"), call), "creating a user"),
        (gov.list_users(pb.ListUsersRequest(), call), "listing users"),
        (gov.sign_out_user(pb.SignOutUserRequest(user_id="u"), call), "ending a user's sessions"),
        (gov.list_audit_events(pb.ListAuditEventsRequest(), call), "the audit log"),
        (gov.put_membership(pb.PutMembershipRequest(org_id=org.id, user_id="u", role="viewer"),
                            call), "an organisation's roles"),
    ):  # fmt: skip
        with pytest.raises(PermissionDenied) as refused:
            await attempt
        assert refusal(refused)[0] == f"{what} needs an administrator of the whole gateway"
    exported = gov.export_audit_events(pb.ExportAuditEventsRequest(format="jsonl"), call)
    with pytest.raises(PermissionDenied):
        await anext(exported)


async def test_users_and_memberships(gateway: Gateway, gov: Governance) -> None:
    org = (await gov.create_organization(pb.CreateOrganizationRequest(name="acme"), admin())).org
    team = (await gov.create_team(pb.CreateTeamRequest(org_id=org.id, name="t"), admin())).team
    with pytest.raises(InvalidArgument) as nobody:
        await gov.create_user(pb.CreateUserRequest(), admin())
    assert refusal(nobody) == ("subject: a subject or an email is required", {"field": "subject"})
    with pytest.raises(InvalidArgument) as bad:
        await gov.create_user(pb.CreateUserRequest(email="not-an-email"), admin())
    assert refusal(bad) == ("email: is not an email address", {"field": "email"})
    ann = (await gov.create_user(pb.CreateUserRequest(subject="s-ann", email="ann@x.io"),
                                 admin())).user  # fmt: skip
    bob = (await gov.create_user(pb.CreateUserRequest(subject="s-bob"), admin())).user
    assert (ann.subject, ann.email, list(ann.memberships)) == ("s-ann", "ann@x.io", [])
    assert ann.create_time > 0
    with pytest.raises(Conflict) as twice:
        await gov.create_user(pb.CreateUserRequest(subject="s-ann"), admin())
    assert refusal(twice) == ("a user with this subject exists", {"subject": "s-ann"})
    await gov.create_user(pb.CreateUserRequest(email="ann@x.io"), admin())  # no subject: fine
    put = admin()
    member = (await gov.put_membership(pb.PutMembershipRequest(
        user_id=ann.id, team_id=team.id, role="member", limits=pb.Limits(budget_usd=2),
    ), put)).membership  # fmt: skip
    assert put.response_metadata["etag"] == '"1"'
    assert (member.org_id, member.team_id, member.user_id, member.role, member.source,
            member.version, member.limits.budget_usd) == (
        org.id, team.id, ann.id, "member", "admin", 1, 2,
    )  # fmt: skip
    again = admin(**{"if-match": '"1"'})
    promoted = (await gov.put_membership(pb.PutMembershipRequest(
        user_id="ann@x.io", team_id=team.id, role="team_admin",
    ), again)).membership  # fmt: skip
    assert (promoted.version, promoted.role) == (2, "team_admin")
    with pytest.raises(PreconditionFailed) as stale:
        await gov.put_membership(pb.PutMembershipRequest(user_id=bob.id, org_id=org.id,
                                                         role="viewer"),
                                 admin(**{"if-match": '"1"'}))  # fmt: skip
    assert refusal(stale)[0].startswith("the membership is at version 0, not 1")
    await gov.put_membership(pb.PutMembershipRequest(user_id=bob.id, org_id=org.id,
                                                     role="org_admin"), admin())  # fmt: skip
    for request, why, field in (
        (pb.PutMembershipRequest(user_id=ann.id, team_id=team.id), "role: is required", "role"),
        (pb.PutMembershipRequest(user_id=ann.id, team_id=team.id, role="org_admin"),
         "role: a team's role is one of team_admin, member, viewer", "role"),
        (pb.PutMembershipRequest(user_id=ann.id, org_id=org.id, role="member"),
         "role: an organisation's role is one of org_admin, viewer", "role"),
        (pb.PutMembershipRequest(team_id=team.id, role="member"), "user_id: is required",
         "user_id"),
    ):  # fmt: skip
        with pytest.raises(InvalidArgument) as refused:
            await gov.put_membership(request, admin())
        assert refusal(refused) == (why, {"field": field})
    with pytest.raises(NotFound) as ghost:
        await gov.put_membership(pb.PutMembershipRequest(user_id="user_x", team_id=team.id,
                                                         role="member"), admin())  # fmt: skip
    assert refusal(ghost) == ("user 'user_x' does not exist", {"user": "user_x"})
    everyone = await gov.list_memberships(pb.ListMembershipsRequest(), admin())
    assert [(m.user_id, m.team_id) for m in everyone.memberships] == [
        (ann.id, team.id), (bob.id, ""),
    ]  # fmt: skip
    by_team = await gov.list_memberships(pb.ListMembershipsRequest(team_id=team.id), admin())
    assert [m.user_id for m in by_team.memberships] == [ann.id]
    scoped = await gov.list_memberships(pb.ListMembershipsRequest(),
                                        await team_admin(gateway, team.id))  # fmt: skip
    assert [m.user_id for m in scoped.memberships] == [ann.id]
    users = await gov.list_users(pb.ListUsersRequest(), admin())
    assert [u.id for u in users.users][:2] == [ann.id, bob.id]
    assert [m.role for m in users.users[0].memberships] == ["team_admin"]
    removed = await gov.delete_membership(
        pb.DeleteMembershipRequest(user_id=ann.id, team_id=team.id), admin()
    )
    assert removed.membership.role == "team_admin"
    with pytest.raises(NotFound) as gone:
        await gov.delete_membership(pb.DeleteMembershipRequest(user_id=ann.id, team_id=team.id),
                                    admin())  # fmt: skip
    assert refusal(gone) == (f"user {ann.id!r} has no membership there", {"user": ann.id})
    actions = [(e.action, e.target) for e in await events(gov, action="membership.")]
    target = f"membership:{org.id}/{team.id}/{ann.id}"
    assert actions == [("membership.create", target), ("membership.update", target),
                       ("membership.create", f"membership:{org.id}//{bob.id}"),
                       ("membership.delete", target)]  # fmt: skip
    deleted = (await events(gov, action="membership.delete"))[0]
    assert json.loads(deleted.before)["role"] == "team_admin" and deleted.after == ""
    ended = await gov.sign_out_user(pb.SignOutUserRequest(user_id=ann.id), admin())
    assert (ended.user_id, ended.sessions_revoked) == (ann.id, 0)
    signout = (await events(gov, action="user.signout"))[0]
    assert (signout.target, json.loads(signout.after)) == (f"user:{ann.id}", {"live_sessions": 0})
    with pytest.raises(NotFound):
        await gov.sign_out_user(pb.SignOutUserRequest(user_id="user_x"), admin())


async def test_the_audit_log_paged_filtered_and_exported(gov: Governance) -> None:
    for n in range(5):
        await gov.create_organization(pb.CreateOrganizationRequest(name=f"o{n}"), admin())
    page = await gov.list_audit_events(pb.ListAuditEventsRequest(page_size=2), admin())
    assert [e.seq for e in page.events] == [1, 2]
    assert base64.urlsafe_b64decode(page.next_page_token).decode() == "seq:2"
    rest = await gov.list_audit_events(
        pb.ListAuditEventsRequest(page_size=3, page_token=page.next_page_token), admin()
    )
    assert [e.seq for e in rest.events] == [3, 4, 5] and rest.next_page_token == ""
    default = await gov.list_audit_events(pb.ListAuditEventsRequest(), admin())
    assert len(default.events) == 5
    full = default.events[0]
    assert (full.actor, full.action, full.request_id, full.prev_hash) == (
        "key:cfg-test-admin", "org.create", "req-1", "0" * 64,
    )  # fmt: skip
    assert full.time > 0 and full.target.startswith("org:") and full.after
    for size in (-1, 1001):
        with pytest.raises(InvalidArgument) as refused:
            await gov.list_audit_events(pb.ListAuditEventsRequest(page_size=size), admin())
        assert refusal(refused) == ("page_size: must be 1 to 1000", {"field": "page_size"})
    assert len((await gov.list_audit_events(pb.ListAuditEventsRequest(page_size=1000),
                                            admin())).events) == 5  # fmt: skip
    for token in ("!!", base64.urlsafe_b64encode(b"key:3").decode(),
                  base64.urlsafe_b64encode(b"seq:x").decode(), base64.urlsafe_b64encode(b"\xff").decode()):  # fmt: skip
        with pytest.raises(InvalidArgument) as refused:
            await gov.list_audit_events(pb.ListAuditEventsRequest(page_token=token), admin())
        assert refusal(refused) == ("page_token: is not a token this API gave",
                                    {"field": "page_token"})  # fmt: skip
    t = full.time
    window = await events(gov, start_time=t, end_time=default.events[2].time)
    assert [e.seq for e in window] == [1, 2]
    assert [e.seq for e in await events(gov, target=default.events[3].target)] == [4]
    assert [e.seq for e in await events(gov, actor="key:other")] == []
    exported = [r.event async for r in gov.export_audit_events(
        pb.ExportAuditEventsRequest(format="jsonl", action="org."), admin())]  # fmt: skip
    assert [e.seq for e in exported] == [1, 2, 3, 4, 5] and exported[0] == full
    with pytest.raises(InvalidArgument) as csv:
        await anext(gov.export_audit_events(pb.ExportAuditEventsRequest(format="csv"), admin()))
    assert refusal(csv) == ("format: must be jsonl", {"field": "format"})


def spend(cost: float, org_id: str, team_id: str = "") -> UsageRecord:
    """A ledger row of `cost` at a level, from long ago (periods of "none" count it)."""
    return UsageRecord(
        ts=1000.0, request_id=f"r-{org_id}-{team_id}-{cost}", key_id="k", key_name="k",
        method="/chat", model="m", provider="p", prompt_tokens=1, completion_tokens=1,
        total_tokens=2, input_cost_usd=None, output_cost_usd=None, cache_input_cost_usd=None,
        total_cost_usd=cost, latency_ms=1.0, ttft_ms=None, status="OK", team_id=team_id,
        org_id=org_id,
    )  # fmt: skip


@pytest.mark.parametrize("budgets", ["memory", "redis"])
async def test_each_levels_spend_is_its_budgets_count_or_its_ledger_rows(
    tmp_path, request, redis_prefix, budgets
) -> None:
    # Each level's spend as its answers show it: with a budget, what the budget counts
    # (the ledger's rows when it was loaded, and reservations settled since); without,
    # the rows in the database and those still in the ledger's buffer. A gateway whose
    # ledger never flushes by itself keeps the buffered rows in the buffer.
    shared = redis_settings(request, "redis", redis_prefix) if budgets == "redis" else {}
    settings = config_with(sqlite_path=str(tmp_path / "g.db"), **shared,
                           ledger={"flush_interval_s": 3600, "batch_size": 100_000})  # fmt: skip
    first = await open_gateway(config.parse(settings, "t"))
    try:
        gov = first.services.governance
        kept = pb.Limits(budget_period="none")
        budgeted = (
            await gov.create_organization(
                pb.CreateOrganizationRequest(
                    name="budgeted", limits=pb.Limits(budget_usd=100, budget_period="none")
                ),
                admin(),
            )
        ).org
        bt = (
            await gov.create_team(
                pb.CreateTeamRequest(
                    org_id=budgeted.id,
                    name="bt",
                    limits=pb.Limits(budget_usd=50, budget_period="none"),
                ),
                admin(),
            )
        ).team
        unbudgeted = (
            await gov.create_organization(
                pb.CreateOrganizationRequest(name="open", limits=kept), admin()
            )
        ).org
        ot = (
            await gov.create_team(
                pb.CreateTeamRequest(org_id=unbudgeted.id, name="ot", limits=kept), admin()
            )
        ).team
        assert (budgeted.spent_usd, bt.spent_usd, unbudgeted.spent_usd, ot.spent_usd) == (0,) * 4
    finally:
        await first.aclose()
    # A gateway started again (on Redis, under a prefix of its own) loads each budget
    # afresh from the ledger.
    if budgets == "redis":
        settings["storage"] |= redis_settings(request, "redis", redis_prefix)
    gateway = await open_gateway(config.parse(settings, "t"))
    try:
        gov, store, accounts = gateway.services.governance, gateway.store, gateway.accounts
        assert store is not None
        await store.usage.insert([
            spend(1.25, budgeted.id, bt.id), spend(0.125, budgeted.id),
            spend(0.5, unbudgeted.id, ot.id), spend(0.2500000004, unbudgeted.id),
            spend(7.0, "another-org", "another-team"),
        ])  # fmt: skip
        accounts.ledger.record(spend(2.0, budgeted.id, bt.id))
        accounts.ledger.record(spend(4.0, unbudgeted.id, ot.id))
        assert accounts.ledger.pending == 2
        # A reservation settled on the team's budget: counted there, not in the ledger.
        team_budget = BudgetSpec(f"team:{bt.id}", "bt", 50, "none", "team", bt.id,
                                 f"org:{budgeted.id}")  # fmt: skip
        await accounts.budgets.settle(await accounts.budgets.reserve(team_budget, 1.0), 0.5)
        org_budget = BudgetSpec(f"org:{budgeted.id}", "budgeted", 100, "none", "org",
                                budgeted.id, f"org:{budgeted.id}")  # fmt: skip
        await accounts.budgets.settle(await accounts.budgets.reserve(org_budget, 1.0), 0.25)
        # A key of the other team: each team counts its own.
        await store.keys.create(kind="api", name="ot-key", team_id=ot.id)
        orgs = {
            o.name: o.spent_usd
            for o in (await gov.list_organizations(pb.ListOrganizationsRequest(), admin())).orgs
        }
        assert orgs == {"budgeted": 3.625, "open": 4.75}
        assert (await gov.get_organization(pb.GetOrganizationRequest(org_id=unbudgeted.id),
                                           admin())).org.spent_usd == 4.75  # fmt: skip
        teams = {
            t.name: t.spent_usd
            for org_id in (budgeted.id, unbudgeted.id)
            for t in (await gov.list_teams(pb.ListTeamsRequest(org_id=org_id), admin())).teams
        }
        assert teams == {"bt": 3.75, "ot": 4.5}
        listed = [
            t
            for org_id in (budgeted.id, unbudgeted.id)
            for t in (await gov.list_teams(pb.ListTeamsRequest(org_id=org_id), admin())).teams
        ]
        assert {t.name: t.keys for t in listed} == {"bt": 0, "ot": 1}
        assert all(t.create_time == int(t.create_time) > 1_700_000_000 for t in listed)
        assert (await gov.get_team(pb.GetTeamRequest(team_id=bt.id), admin())).team.spent_usd \
            == 3.75  # fmt: skip
    finally:
        await gateway.aclose()
