"""What an administrator may do, as the audit module's Actor decides it: an administrator
of the whole gateway may do everything; a team's or an organisation's administrator
manages only those teams and reads nothing of the whole; a viewer only reads. Each
refusal names the actor, and the team it was refused, in its message and metadata."""

from __future__ import annotations

import pytest

from server.application.governance.audit import Actor
from server.base.errors import PermissionDenied

ROOT = Actor("key:root")
TEAM_ADMIN = Actor("key:t1-admin", teams=frozenset({"t1"}))
ORG_ADMIN = Actor("user:o1-admin", orgs=frozenset({"o1"}))
VIEWER = Actor("user:viewer", read_only=True)


def refusal(call) -> PermissionDenied:  # type: ignore[no-untyped-def]
    with pytest.raises(PermissionDenied) as refused:
        call()
    return refused.value


def test_an_administrator_of_the_whole_gateway_may_do_everything() -> None:
    assert ROOT.unrestricted
    assert ROOT.may_manage_team("t9", "o9")
    ROOT.require_unrestricted("creating an organisation")
    ROOT.require_reader()
    ROOT.require_write()
    ROOT.require_team("t9", "o9")


def test_a_team_administrator_manages_its_own_teams_only() -> None:
    assert not TEAM_ADMIN.unrestricted
    assert TEAM_ADMIN.may_manage_team("t1", "o9")
    assert not TEAM_ADMIN.may_manage_team("t2", "o1")
    TEAM_ADMIN.require_team("t1", "o1")
    TEAM_ADMIN.require_write()
    refused = refusal(lambda: TEAM_ADMIN.require_team("t2", "o1"))
    assert refused.message == "this administrator may not manage team 't2'"
    assert refused.metadata == {"actor": "key:t1-admin", "team": "t2"}


def test_an_organisation_administrator_manages_the_teams_of_its_organisations() -> None:
    assert not ORG_ADMIN.unrestricted
    assert ORG_ADMIN.may_manage_team("t7", "o1")
    assert not ORG_ADMIN.may_manage_team("t1", "o2")
    ORG_ADMIN.require_team("t7", "o1")
    refused = refusal(lambda: ORG_ADMIN.require_team("t1", "o2"))
    assert refused.metadata == {"actor": "user:o1-admin", "team": "t1"}
    # Both kinds at once: either grants the team.
    both = Actor("key:both", teams=frozenset({"t1"}), orgs=frozenset({"o2"}))
    assert both.may_manage_team("t1", "o9") and both.may_manage_team("t5", "o2")
    assert not both.may_manage_team("t5", "o9")


@pytest.mark.parametrize("actor", [TEAM_ADMIN, ORG_ADMIN], ids=["team", "organisation"])
def test_a_restricted_administrator_reads_nothing_of_the_whole(actor: Actor) -> None:
    refused = refusal(actor.require_reader)
    assert refused.message == "this page needs an administrator of the whole gateway"
    assert refused.metadata == {"actor": actor.id}
    refused = refusal(lambda: actor.require_unrestricted("creating an organisation"))
    assert refused.message == "creating an organisation needs an administrator of the whole gateway"


def test_a_viewer_reads_everything_and_changes_nothing() -> None:
    assert not VIEWER.unrestricted
    VIEWER.require_reader()
    assert VIEWER.may_manage_team("t1", "o1")  # what it may see; writing is refused below
    refused = refusal(VIEWER.require_write)
    assert refused.message == "this administrator may only read"
    assert refused.metadata == {"actor": "user:viewer"}
    refused = refusal(lambda: VIEWER.require_unrestricted("rotating a key"))
    assert refused.metadata == {"actor": "user:viewer"}
