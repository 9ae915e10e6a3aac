"""Who administers, and the record of what they change.

`Actor` is the caller of an admin method: an admin key of no team (every right), an
admin key of a team (that team's keys, budgets and members only), or a signed-in user
with the roles their memberships give. `Auditor.change` runs one change in a
transaction with its audit event: the event is written before the transaction
commits, and a change whose event cannot be written fails and is not made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from server.accounting.accounts import Accounts
from server.accounting.admission import AUTHORIZATION, HEADER, presented
from server.application.pipeline.state import Live
from server.base.call import PEER, Call
from server.base.caller import Principal
from server.base.errors import (
    AuditUnavailable,
    Conflict,
    GatewayError,
    Internal,
    PermissionDenied,
    Unauthenticated,
)
from server.storage import Store
from server.storage.db import Executor, rejects_row

log = logging.getLogger(__name__)
# The metadata entry the REST facade fills from the admin page's session cookie.
SESSION = "x-gateway-session"


@dataclass(frozen=True, slots=True)
class Actor:
    """An administrator: `id` as the audit log names them (`key:<id>`, `user:<id>`),
    `teams` they may manage (None: every team), `orgs` they administer (None: every
    organisation), and whether they may only read."""

    id: str
    teams: frozenset[str] | None = None
    orgs: frozenset[str] | None = None
    read_only: bool = False

    @property
    def unrestricted(self) -> bool:
        return self.teams is None and self.orgs is None and not self.read_only

    def may_manage_team(self, team_id: str, org_id: str) -> bool:
        if self.teams is None and self.orgs is None:
            return True
        return (self.teams is not None and team_id in self.teams) or (
            self.orgs is not None and org_id in self.orgs
        )

    def require_unrestricted(self, what: str) -> None:
        if not self.unrestricted:
            raise PermissionDenied(
                f"{what} needs an administrator of the whole gateway", {"actor": self.id}
            )

    def require_reader(self) -> None:
        """PermissionDenied unless the actor may read everything (an administrator or a
        viewer of the whole gateway)."""
        if self.teams is not None or self.orgs is not None:
            self.require_unrestricted("this page")

    def require_write(self) -> None:
        if self.read_only:
            raise PermissionDenied("this administrator may only read", {"actor": self.id})

    def require_team(self, team_id: str, org_id: str) -> None:
        if not self.may_manage_team(team_id, org_id):
            raise PermissionDenied(
                f"this administrator may not manage team {team_id!r}",
                {"actor": self.id, "team": team_id},
            )


@dataclass(slots=True)
class Change:
    """One change under way: its transaction and the one event it records."""

    tx: Executor
    action: str = ""
    target: str = ""
    before: Any = None
    after: Any = None
    recorded: bool = field(default=False)
    # Who the event names when only the change itself learns it (a user signing in).
    actor_id: str = ""

    def record(self, action: str, target: str, before: Any, after: Any) -> None:
        self.action, self.target, self.before, self.after = action, target, before, after
        self.recorded = True


class Auditor:
    def __init__(self, store: Store | None) -> None:
        self.store = store

    @asynccontextmanager
    async def change(self, call: Call, actor: Actor) -> AsyncIterator[Change]:
        """A change and its audit event, in one transaction: either both are kept or
        neither is. The body records the event (`Change.record`) once it knows it."""
        if self.store is None:
            raise Internal("this gateway has no database for its audit log", {})
        store = self.store
        action = ""
        try:
            async with store.audit.change() as tx:
                change = Change(tx)
                yield change
                action = change.action
                if change.recorded:
                    await self._append(tx, call, change.actor_id or actor.id, change)
        except _AuditFailed:
            raise AuditUnavailable(
                "the audit log could not record the change, so it was not made",
                {"action": action},
            ) from None
        except GatewayError:
            raise
        except Exception as exc:
            if rejects_row(exc):  # another change got there first (a name taken)
                raise Conflict(
                    "the change conflicts with one made at the same time; read again and retry",
                    {},
                ) from None
            raise

    async def _append(self, tx: Executor, call: Call, actor: str, change: Change) -> None:
        try:
            await self.store.audit.append(  # type: ignore[union-attr]
                tx, ts=time.time(), actor=actor, actor_address=call.metadata.get(PEER, ""),
                action=change.action, target=change.target, before=change.before,
                after=change.after, request_id=call.request_id,
            )  # fmt: skip
        except Exception as exc:
            log.error("audit: cannot record %s: %s", change.action, type(exc).__name__)
            raise _AuditFailed() from exc

    async def event(
        self, call: Call, actor: str, action: str, target: str, before: Any, after: Any
    ) -> None:
        """Records an event that changes nothing in the database (a sign-in, a
        reload): AuditUnavailable when it cannot be written."""
        if self.store is None:
            return
        try:
            async with self.store.audit.change() as tx:
                change = Change(tx)
                change.record(action, target, before, after)
                await self._append(tx, call, actor, change)
        except _AuditFailed:
            raise AuditUnavailable(
                "the audit log could not record the change, so it was not made",
                {"action": action},
            ) from None


class Admins:
    """Who is administering a call: an admin key (`x-admin-key`, or as a Bearer token),
    else, with sign-in configured, the provider's access token as a Bearer JWT or the
    session of a signed-in user (the REST facade's cookie)."""

    def __init__(
        self,
        live: Live,
        accounts: Accounts,
        auditor: Auditor,
        signin: SignInSource | None = None,
    ) -> None:
        self.live = live
        self.accounts = accounts
        self.auditor = auditor
        self.signin = signin

    async def _user(self, call: Call) -> Actor | None:
        """The signed-in user or the provider's token of a call without an admin key."""
        if self.signin is None or call.metadata.get(HEADER["admin"]):
            return None
        header, secret = presented(call.metadata, "admin")
        if header == AUTHORIZATION and looks_like_jwt(secret):
            return await self.signin.actor_of_bearer(secret)
        session = call.metadata.get(SESSION, "")
        if session and not secret:
            found = await self.signin.actor_of_session(session)
            if found is None:
                raise Unauthenticated(
                    "the sign-in session has ended (signed out, revoked or expired); "
                    "sign in again", {"header": "cookie"},
                )  # fmt: skip
            return found[0]
        return None

    async def check(self, call: Call) -> Actor:
        """The administrator of a call that leaves no ledger row (key management)."""
        user = await self._user(call)
        if user is not None:
            return user
        principal = await self.accounts.check(call, "admin", self.live.current.keys)
        return actor_of_key(principal)

    async def admit(self, call: Call) -> Actor:
        """The administrator of a call with a ledger row (live configuration; a
        signed-in user's call has none: it is no key's)."""
        user = await self._user(call)
        if user is not None:
            return user
        principal = await self.accounts.admit(call, "admin", self.live.current.keys)
        return actor_of_key(principal)


class SignInSource(Protocol):
    """What administration needs of sign-in (server/application/governance/signin.py)."""

    async def actor_of_session(self, secret: str) -> tuple[Actor, str] | None: ...
    async def actor_of_bearer(self, token: str) -> Actor: ...


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("ey")


def actor_of_key(principal: Principal) -> Actor:
    """An admin key's rights: a key of a team manages that team only."""
    teams = frozenset({principal.team_id}) if principal.team_id else None
    return Actor(f"key:{principal.key_id}", teams)


class _AuditFailed(Exception):
    """The event of a change could not be written."""
