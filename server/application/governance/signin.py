"""Signing in to the admin page with the company's OpenID provider (`auth.oidc`), and
its access tokens on the admin API.

A sign-in: `begin` records a state, a nonce and a PKCE verifier (server-side, taken
once) and sends the browser to the provider; `finish` exchanges the code, checks the ID
token (issuer, audience, expiry, nonce, signature), finds or makes the user by subject
(or by the email of a user an administrator made), synchronises the roles their groups
give (`role_map`; memberships the provider gave and no group gives any more are
removed; those an administrator made are left alone), opens a revocable session and
records it all in the audit log. Nobody is an administrator unless a group says so.

A Bearer JWT on the admin API is checked the same way (audience: `audience`, else the
client id) and gets the rights its groups give, with the memberships of its user.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from server.application.governance.audit import SESSION, Actor, Auditor
from server.application.governance.oidc import OidcProvider, SignInFailed, invalid_bearer, pkce_pair
from server.application.pipeline.state import Live
from server.base.call import PEER, Call
from server.base.config import OidcConfig, RoleGrant
from server.base.errors import NotFound, Unauthenticated
from server.storage import Store
from server.storage.db import Executor
from server.storage.governance import Limits, Membership, User

COOKIE = "gw_admin_session"
# Stronger roles first: a user given two roles in one place keeps the stronger.
STRENGTH = ("org_admin", "team_admin", "member", "viewer")


@dataclass(frozen=True, slots=True)
class Rights:
    """What a user's groups give: a gateway-wide role and roles by (org, team)."""

    role: str
    places: dict[tuple[str, str], str]


class SignIn:
    def __init__(self, live: Live, store: Store | None, auditor: Auditor) -> None:
        self.live = live
        self.store = store
        self.auditor = auditor
        self._provider: OidcProvider | None = None

    @property
    def config(self) -> OidcConfig | None:
        return self.live.current.config.auth.oidc

    def provider(self) -> OidcProvider:
        config = self.config
        if config is None or self.store is None:
            raise NotFound("sign-in is not configured (auth.oidc) on this gateway", {})
        if self._provider is None or self._provider.config != config:
            secret = os.environ.get(config.client_secret_env) if config.client_secret_env else None
            self._provider = OidcProvider(config, secret)
        return self._provider

    # -- the browser's sign-in ---------------------------------------------------------

    async def begin(self, redirect_uri: str) -> str:
        """The provider's URL that starts a sign-in returning to `redirect_uri`."""
        provider = self.provider()
        nonce = secrets.token_urlsafe(24)
        verifier, challenge = pkce_pair()
        assert self.store is not None
        state = await self.store.sessions.begin(nonce, verifier)
        try:
            return await provider.authorize_url(redirect_uri, state, nonce, challenge)
        except SignInFailed as exc:
            raise Unauthenticated(f"sign-in is unavailable: {exc}", {}) from None

    async def finish(
        self, code: str, state: str, redirect_uri: str, call: Call
    ) -> tuple[str, float]:
        """Completes a sign-in; returns the session's secret (for the cookie) and its
        lifetime. SignInFailed, recorded in the audit log, when anything does not hold."""
        provider = self.provider()
        assert self.store is not None and self.config is not None
        subject = ""
        try:
            login = await self.store.sessions.take(state) if state else None
            if login is None:
                raise SignInFailed("the sign-in's state is unknown, used or stale")
            if not code:
                raise SignInFailed("the provider sent no code")
            tokens = await provider.exchange(code, login.verifier, redirect_uri)
            claims = await provider.verify(tokens["id_token"], self.config.client_id, login.nonce)
            subject = str(claims["sub"])
            if self.config.groups_claim not in claims:
                claims |= await provider.userinfo(str(tokens.get("access_token", "")))
            return await self._open(claims, call)
        except SignInFailed as exc:
            await self.auditor.event(
                call, f"oidc:{subject}" if subject else "oidc:unknown", "signin.failed",
                f"subject:{subject}" if subject else "", None, {"reason": str(exc)},
            )  # fmt: skip
            raise

    async def _open(self, claims: dict[str, Any], call: Call) -> tuple[str, float]:
        assert self.store is not None and self.config is not None
        governance, sessions = self.store.governance, self.store.sessions
        subject, email = str(claims["sub"]), str(claims.get("email") or "")
        groups = _groups(claims.get(self.config.groups_claim))
        async with self.auditor.change(call, Actor(f"oidc:{subject}")) as change:
            tx = change.tx
            user = await self._user(tx, subject, email)
            rights = await self._rights(groups, tx)
            before = await governance.memberships(user_id=user.id, ex=tx)
            after = await self._synchronise(tx, user, rights, before)
            secret, session = await sessions.open(
                tx, user.id, rights.role, self.config.session_ttl_s
            )
            change.actor_id = f"user:{user.id}"
            change.record(
                "signin.succeeded", f"user:{user.id}",
                {"memberships": [_place(m) for m in before]},
                {"email": email, "groups": groups, "role": rights.role,
                 "memberships": [_place(m) for m in after], "session": session.digest[:12]},
            )  # fmt: skip
        return secret, self.config.session_ttl_s

    async def _user(self, tx: Executor, subject: str, email: str) -> User:
        """The user of `subject`; a user an administrator made by email gets the subject
        at their first sign-in; otherwise a new user."""
        assert self.store is not None
        governance = self.store.governance
        user = await governance.user_by_subject(subject, tx)
        if user is None and email:
            made = await governance.get_user(email, tx)
            if made is not None and not made.subject:
                await governance.set_subject(tx, made.id, subject, email)
                return User(made.id, subject, email, made.created_at)
        if user is None:
            user = await governance.create_user(tx, subject, email)
        elif email and user.email != email:
            await governance.set_subject(tx, user.id, subject, email)
        return user

    async def _rights(self, groups: Iterable[str], ex: Executor | None = None) -> Rights:
        """What `groups` give under `role_map` (places named by id or name)."""
        assert self.config is not None and self.store is not None
        governance = self.store.governance
        grants: list[RoleGrant] = [
            g for group in groups for g in self.config.role_map.get(group, [])
        ]
        role = self.config.default_role
        places: dict[tuple[str, str], str] = {}
        for grant in grants:
            if grant.team:
                team = await governance.get_team(grant.team, ex)
                if team is None:  # by name, when one team has it
                    named = [t for t in await governance.list_teams(ex=ex) if t.name == grant.team]
                    team = named[0] if len(named) == 1 else None
                if team is None:
                    continue  # a team not made yet: nothing to give
                place = (team.org_id, team.id)
            elif grant.org:
                org = await governance.get_org(grant.org, ex)
                if org is None:
                    continue
                place = (org.id, "")
            else:
                role = "admin" if "admin" in (role, grant.role) else grant.role
                continue
            held = places.get(place)
            if held is None or STRENGTH.index(grant.role) < STRENGTH.index(held):
                places[place] = grant.role
        return Rights(role, places)

    async def _synchronise(
        self, tx: Executor, user: User, rights: Rights, before: list[Membership]
    ) -> list[Membership]:
        """The user's memberships made to match `rights`: the provider's ones added,
        changed or removed; an administrator's left as they are."""
        assert self.store is not None
        governance = self.store.governance
        held = {(m.org_id, m.team_id): m for m in before}
        for (org_id, team_id), member in held.items():
            if member.source == "oidc" and (org_id, team_id) not in rights.places:
                await governance.remove_membership(tx, member)
        for (org_id, team_id), role in rights.places.items():
            old = held.get((org_id, team_id))
            if old is not None and (old.source != "oidc" or old.role == role):
                continue
            await governance.put_membership(tx, Membership(
                org_id, team_id, user.id, role, "oidc", old.limits if old else Limits(),
                old.version + 1 if old else 1, old.created_at if old else time.time(),
            ))  # fmt: skip
        return await governance.memberships(user_id=user.id, ex=tx)

    async def sign_out(self, secret: str, call: Call) -> bool:
        """Revokes the session of `secret`; False when it was not live."""
        if self.store is None or not secret:
            return False
        session = await self.store.sessions.live(secret)
        if session is None:
            return False
        actor = Actor(f"user:{session.user_id}")
        async with self.auditor.change(call, actor) as change:
            await self.store.sessions.revoke(change.tx, session.digest)
            change.record(
                "signout", f"user:{session.user_id}", {"session": session.digest[:12]},
                {"session": session.digest[:12], "revoked": True},
            )  # fmt: skip
        return True

    # -- administrators ----------------------------------------------------------------

    async def actor_of_session(self, secret: str) -> tuple[Actor, str] | None:
        """The administrator of a live session and their email; None when it is not."""
        if self.store is None or self.config is None:
            return None
        session = await self.store.sessions.live(secret)
        if session is None:
            return None
        user = await self.store.governance.get_user(session.user_id)
        members = await self.store.governance.memberships(user_id=session.user_id)
        places = {(m.org_id, m.team_id): m.role for m in members}
        actor = _actor(f"user:{session.user_id}", Rights(session.role, places))
        return actor, user.email if user is not None else ""

    async def actor_of_bearer(self, token: str) -> Actor:
        """The administrator of an access token of the provider (a JWT)."""
        config = self.config
        if config is None or self.store is None:
            raise invalid_bearer("it is not an admin key, and sign-in is not configured")
        try:
            claims = await self.provider().verify(token, config.audience or config.client_id)
        except SignInFailed as exc:
            raise invalid_bearer(str(exc)) from None
        rights = await self._rights(_groups(claims.get(config.groups_claim)))
        user = await self.store.governance.user_by_subject(str(claims["sub"]))
        places = dict(rights.places)
        if user is not None:
            for m in await self.store.governance.memberships(user_id=user.id):
                places.setdefault((m.org_id, m.team_id), m.role)
        who = f"user:{user.id}" if user is not None else f"oidc:{claims['sub']}"
        return _actor(who, Rights(rights.role, places))


def _actor(actor_id: str, rights: Rights) -> Actor:
    if rights.role == "admin":
        return Actor(actor_id)
    if rights.role == "viewer":
        return Actor(actor_id, read_only=True)
    teams = frozenset(t for (_, t), role in rights.places.items() if t and role == "team_admin")
    orgs = frozenset(o for (o, t), role in rights.places.items() if not t and role == "org_admin")
    return Actor(actor_id, teams, orgs)


def _groups(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return sorted({str(g) for g in value})
    return []


def _place(member: Membership) -> dict[str, str]:
    return {"org": member.org_id, "team": member.team_id, "role": member.role,
            "source": member.source}  # fmt: skip


__all__ = ["COOKIE", "SESSION", "SignIn", "SignInFailed", "call_for"]


def call_for(address: str, request_id: str) -> Call:
    """A call of a sign-in route (not an RPC): what the audit log records of it."""
    return Call({PEER: address}, request_id=request_id)
