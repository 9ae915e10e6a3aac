"""The governance store over a real SQLite database: every row read back exactly as
written (each limit, each model, the version and the time), lists in the order they
were made, an update conditional on the version it read, a team's deletion taking its
memberships and no one else's, users found by id, email or subject, and the levels above
a key (its organisation, its team and its owner's membership there)."""

from __future__ import annotations

import re

from server.base.caller import Level
from server.storage import Store
from server.storage.governance import Limits, Membership, Scope, new_id

FULL = Limits(12.5, "daily", 30, 4000, ("sim-pro", "sim-mini"))
OTHER = Limits(None, "weekly", None, 7, ("sim-pro",))


def test_limits_as_rows_and_records() -> None:
    assert FULL.values() == [12.5, "daily", 30, 4000, "sim-pro\nsim-mini"]
    assert Limits().values() == [None, "monthly", None, None, ""]
    row = dict(zip(("budget_usd", "budget_period", "requests_per_minute", "tokens_per_minute",
                    "models"), FULL.values(), strict=True))  # fmt: skip
    assert Limits.from_row(row) == FULL
    assert Limits.from_row(row | {"models": None}).models == ()
    assert Limits.from_row(row | {"models": "a\n\nb"}).models == ("a", "b")
    assert Limits.from_row(row | {"models": "my model\nb"}).models == ("my model", "b")
    assert FULL.as_dict() == {"budget_usd": 12.5, "budget_period": "daily",
                              "requests_per_minute": 30, "tokens_per_minute": 4000,
                              "models": ["sim-pro", "sim-mini"]}  # fmt: skip
    assert re.fullmatch(r"team_[0-9a-f]{16}", new_id("team"))
    assert new_id("org") != new_id("org")


async def test_organisations_read_back_listed_and_updated_by_version(store: Store) -> None:
    gov = store.governance
    async with store.db.transaction() as tx:
        first = await gov.create_org(tx, "acme", FULL)
        second = await gov.create_org(tx, "globex", Limits())
    assert first.version == 1 and first.name == "acme" and first.limits == FULL
    assert re.fullmatch(r"org_[0-9a-f]{16}", first.id)
    assert await gov.get_org(first.id) == first
    assert await gov.get_org("acme") == first  # by name too
    assert await gov.get_org("nobody") is None
    assert await gov.list_orgs() == [first, second]
    async with store.db.transaction() as tx:
        changed = await gov.update_org(tx, first, OTHER)
        assert await gov.get_org(first.id, tx) == changed
    assert changed == type(first)(first.id, "acme", OTHER, 2, first.created_at)
    assert await gov.get_org(first.id) == changed
    # An update from a version read before another's is not made.
    async with store.db.transaction() as tx:
        await gov.update_org(tx, first, Limits(1.0))
    assert await gov.get_org(first.id) == changed
    assert await gov.get_org(second.id) == second


async def test_teams_read_back_listed_updated_and_deleted_with_their_memberships(
    store: Store,
) -> None:
    gov = store.governance
    async with store.db.transaction() as tx:
        org = await gov.create_org(tx, "acme", Limits())
        other_org = await gov.create_org(tx, "globex", Limits())
        search = await gov.create_team(tx, org.id, "search", FULL)
        ads = await gov.create_team(tx, other_org.id, "ads", Limits())
        chat = await gov.create_team(tx, org.id, "chat", OTHER)
        user = await gov.create_user(tx, "sub-1", "a@example.com")
    assert (search.org_id, search.name, search.limits, search.version) == (
        org.id, "search", FULL, 1,
    )  # fmt: skip
    assert await gov.get_team(search.id) == search
    assert re.fullmatch(r"team_[0-9a-f]{16}", search.id)
    assert await gov.get_team("search") is None  # teams by id only
    assert await gov.list_teams() == [search, ads, chat]
    assert await gov.list_teams(org.id) == [search, chat]
    async with store.db.transaction() as tx:
        assert await gov.list_teams(other_org.id, ex=tx) == [ads]
        renamed = await gov.update_team(tx, search, "find", OTHER)
        await gov.update_team(tx, chat, "stale", Limits())  # this one's version moves on
        await gov.update_team(tx, chat, "stale again", Limits())  # from a stale read
    assert renamed == type(search)(search.id, org.id, "find", OTHER, 2, search.created_at)
    assert await gov.get_team(search.id) == renamed
    assert (await gov.get_team(chat.id)).name == "stale"  # type: ignore[union-attr]
    async with store.db.transaction() as tx:
        for team in (search, chat):
            await gov.put_membership(tx, Membership(
                org.id, team.id, user.id, "member", "admin", Limits(), 1, 1.0,
            ))  # fmt: skip
        await gov.delete_team(tx, search.id)
    assert await gov.get_team(search.id) is None
    assert await gov.get_team(chat.id) is not None
    assert [m.team_id for m in await gov.memberships(user_id=user.id)] == [chat.id]


async def test_users_by_id_email_and_subject(store: Store) -> None:
    gov = store.governance
    async with store.db.transaction() as tx:
        alice = await gov.create_user(tx, "sub-a", "alice@example.com")
        again = await gov.create_user(tx, "sub-b", "alice@example.com")
        made = await gov.create_user(tx, "", "carol@example.com")
    assert (alice.subject, alice.email) == ("sub-a", "alice@example.com")
    assert re.fullmatch(r"user_[0-9a-f]{16}", alice.id)
    assert await gov.get_user(alice.id) == alice
    assert await gov.get_user(again.id) == again
    assert await gov.get_user("alice@example.com") == alice  # the oldest of that email
    assert await gov.get_user("") is None
    assert await gov.get_user("nobody@example.com") is None
    assert await gov.user_by_subject("sub-b") == again
    assert await gov.user_by_subject("sub-x") is None
    async with store.db.transaction() as tx:
        await gov.set_subject(tx, made.id, "sub-c", "carol@corp.example")
        assert await gov.user_by_subject("sub-c", tx) == type(made)(
            made.id, "sub-c", "carol@corp.example", made.created_at
        )
    assert await gov.get_user("carol@corp.example") == await gov.get_user(made.id)
    assert [u.id for u in await gov.list_users()] == [alice.id, again.id, made.id]
    # An older user whose email is another's id: the id names its own user first.
    async with store.db.transaction() as tx:
        await gov.set_subject(tx, alice.id, "sub-a", again.id)
    assert await gov.get_user(again.id) == again


async def test_memberships_put_replaced_filtered_and_removed(store: Store) -> None:
    gov = store.governance
    async with store.db.transaction() as tx:
        org = await gov.create_org(tx, "acme", Limits())
        team = await gov.create_team(tx, org.id, "search", Limits())
        ann = await gov.create_user(tx, "a", "ann@example.com")
        bob = await gov.create_user(tx, "b", "bob@example.com")
    ann_team = Membership(org.id, team.id, ann.id, "member", "admin", FULL, 1, 10.0)
    ann_org = Membership(org.id, "", ann.id, "viewer", "oidc", Limits(), 1, 20.0)
    bob_team = Membership(org.id, team.id, bob.id, "team_admin", "admin", OTHER, 3, 30.0)
    async with store.db.transaction() as tx:
        for member in (ann_team, ann_org, bob_team):
            await gov.put_membership(tx, member)
        assert await gov.membership(org.id, team.id, ann.id, tx) == ann_team
    assert await gov.membership(org.id, "", ann.id) == ann_org
    assert await gov.membership(org.id, team.id, "nobody") is None
    assert await gov.memberships() == [ann_team, ann_org, bob_team]
    assert await gov.memberships(user_id=ann.id) == [ann_team, ann_org]
    assert await gov.memberships(team_id=team.id) == [ann_team, bob_team]
    assert await gov.memberships(org_id=org.id, team_id=team.id, user_id=bob.id) == [bob_team]
    assert await gov.memberships(org_id="org_other") == []
    promoted = Membership(org.id, team.id, ann.id, "team_admin", "admin", OTHER, 2, 10.0)
    async with store.db.transaction() as tx:
        await gov.put_membership(tx, promoted)  # replaces, never a second row
        await gov.remove_membership(tx, ann_org)
    assert await gov.memberships(user_id=ann.id) == [promoted]
    assert await gov.memberships(user_id=bob.id) == [bob_team]


async def test_the_levels_above_a_key(store: Store) -> None:
    gov = store.governance
    async with store.db.transaction() as tx:
        org = await gov.create_org(tx, "acme", FULL)
        team = await gov.create_team(tx, org.id, "search", OTHER)
        ann = await gov.create_user(tx, "a", "ann@example.com")
        nameless = await gov.create_user(tx, "n", "")
        outsider = await gov.create_user(tx, "o", "out@example.com")
        for user, limits in ((ann, Limits(3.0, "monthly", 5, 6, ("m",))), (nameless, Limits())):
            await gov.put_membership(
                tx, Membership(org.id, team.id, user.id, "member", "admin", limits, 1, 1.0)
            )
    org_level = Level("org", org.id, "acme", 12.5, "daily", 30, 4000, ("sim-pro", "sim-mini"))
    team_level = Level("team", team.id, "search", None, "weekly", None, 7, ("sim-pro",))
    member = Level("member", f"{team.id}/{ann.id}", "ann@example.com", 3.0, "monthly", 5, 6,
                   ("m",))  # fmt: skip
    assert await gov.scope(team.id, ann.id) == Scope(
        org.id, ann.id, (org_level, team_level, member)
    )
    assert await gov.scope(team.id, "ann@example.com") == await gov.scope(team.id, ann.id)
    by_id = await gov.scope(team.id, nameless.id)
    assert by_id.levels[-1].name == nameless.id  # a member without an email: by id
    assert await gov.scope(team.id, outsider.id) == Scope(org.id, outsider.id,
                                                           (org_level, team_level))  # fmt: skip
    assert await gov.scope(team.id, "") == Scope(org.id, "", (org_level, team_level))
    assert await gov.scope(team.id, "ghost@example.com") == Scope(org.id, "",
                                                                 (org_level, team_level))  # fmt: skip
    assert await gov.scope("team_none", ann.id) == Scope()
