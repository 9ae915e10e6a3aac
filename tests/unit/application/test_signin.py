"""Sign-in called directly, in a gateway built with its SQLite store (no servers of its
own) against an OpenID provider on loopback (oidc-provider-mock): the code flow to a
session, the rights each group gives synchronised at every sign-in (an administrator's
memberships left alone), sign-out, the provider's JWTs as Bearer, and every sign-in,
failed or not, in the audit log."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import flask
import httpx
import oidc_provider_mock
import pytest
from gateway.v1 import admin_service_pb2 as pb
from werkzeug.serving import BaseWSGIServer

from server.application.governance.audit import SESSION, Actor
from server.application.governance.signin import Rights, SignInFailed, _actor, _groups, call_for
from server.base import config
from server.base.call import PEER, Call
from server.base.errors import NotFound, PermissionDenied, Unauthenticated
from server.cli.serve import Gateway, open_gateway
from server.storage.audit import AuditFilter
from tests.support.shared_state import ADMIN_KEY, config_with

CALLBACK = "http://127.0.0.1:1/admin/signin/callback"
ADMIN = Call({"x-admin-key": ADMIN_KEY, PEER: "ipv4:10.0.0.9:5000"})


@pytest.fixture
def idp() -> Iterator[BaseWSGIServer]:
    with oidc_provider_mock.run_server_in_thread() as server:
        yield server


@pytest.fixture
def provider(idp: BaseWSGIServer) -> str:
    return f"http://127.0.0.1:{idp.server_port}"


def set_user(provider: str, sub: str, groups: list[str], email: str | None = "") -> None:
    """The user's claims at the provider: `email` (default SUB@example.com; None: none)."""
    claims: dict[str, Any] = {"groups": groups}
    if email is not None:
        claims["email"] = email or f"{sub}@example.com"
    assert httpx.put(f"{provider}/users/{quote(sub)}", json=claims).status_code == 204


def token_forms(idp: BaseWSGIServer) -> list[dict[str, list[str]]]:
    """The forms the provider's token endpoint is sent from now on, as it reads them."""
    forms: list[dict[str, list[str]]] = []
    app = idp.app

    def recording(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"].endswith("/token"):
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            forms.append(parse_qs(body.decode()))
            environ["wsgi.input"] = io.BytesIO(body)
        return app(environ, start_response)

    idp.app = recording
    return forms


async def granted(url: str, sub: str) -> dict[str, str]:
    """The provider's redirect back for `url` (an authorization URL): code and state."""
    async with httpx.AsyncClient() as idp:
        reply = await idp.post(url, data={"sub": sub})
    return {k: v[0] for k, v in parse_qs(urlsplit(reply.headers["location"]).query).items()}


@pytest.fixture
async def gateway(provider: str, tmp_path, monkeypatch) -> AsyncIterator[Gateway]:
    monkeypatch.setenv("GW_TEST_OIDC_SECRET", "s3cret")
    data = config_with(sqlite_path=str(tmp_path / "g.db"))
    data["auth"] = {"oidc": {
        "issuer": provider, "client_id": "gateway", "session_ttl_s": 600,
        "client_secret_env": "GW_TEST_OIDC_SECRET",
        "role_map": {"gw-admins": [{"role": "admin"}], "gw-viewers": [{"role": "viewer"}],
                     "search-leads": [{"team": "search", "role": "team_admin"}],
                     "search-devs": [{"team": "search", "role": "member"}],
                     "acme-admins": [{"org": "acme", "role": "org_admin"}],
                     "ghosts": [{"team": "nowhere", "role": "member"},
                                {"org": "nowhere", "role": "org_admin"}]},
    }}  # fmt: skip
    built = await open_gateway(config.parse(data, "t"))
    gov = built.services.governance
    org = (await gov.create_organization(pb.CreateOrganizationRequest(name="acme"), ADMIN)).org
    await gov.create_team(pb.CreateTeamRequest(org_id=org.id, name="search"), ADMIN)
    yield built
    await built.aclose()


async def sign_in(gateway: Gateway, sub: str) -> str:
    """The code flow as the browser would run it; the session's secret."""
    url = await gateway.signin.begin(CALLBACK)
    query = parse_qs(urlsplit(url).query)
    assert query["code_challenge_method"] == ["S256"] and query["redirect_uri"] == [CALLBACK]
    # A nonce of 24 random bytes; the challenge an S256 digest (43 characters unpadded).
    assert len(query["nonce"][0]) == 32 and len(query["code_challenge"][0]) == 43
    assert gateway.signin.provider() is gateway.signin.provider()  # discovery kept
    back = await granted(url, sub)
    secret, ttl = await gateway.signin.finish(
        back["code"], back["state"], CALLBACK, call_for("ipv4:10.0.0.1:4000", "req-in")
    )
    assert ttl == 600
    return secret


async def audit(gateway: Gateway, action: str = "sign") -> list[Any]:
    assert gateway.store is not None
    return await gateway.store.audit.page(AuditFilter("", action, "", None, None), 0, 100)


def canonical(record: dict[str, str]) -> str:
    return json.dumps(record, sort_keys=True)


async def test_groups_give_roles_synchronised_at_each_sign_in(gateway, provider) -> None:
    signin, store = gateway.signin, gateway.store
    team = (await store.governance.list_teams())[0]
    set_user(provider, "bob", ["search-leads", "search-devs", "ghosts"])
    secret = await sign_in(gateway, "bob")
    actor, email = await signin.actor_of_session(secret)
    user = await store.governance.user_by_subject("bob")
    assert email == "bob@example.com" and user.email == email
    # Of two roles in one place the stronger; a team or organisation not made: nothing.
    assert actor == Actor(f"user:{user.id}", frozenset({team.id}), frozenset())
    held = await store.governance.memberships(user_id=user.id)
    assert [(m.team_id, m.role, m.source) for m in held] == [(team.id, "team_admin", "oidc")]
    first_made = held[0].created_at
    assert user.created_at <= first_made <= time.time()
    # An administrator's membership is left alone; the provider's follow the groups.
    await gateway.services.governance.put_membership(
        pb.PutMembershipRequest(org_id=team.org_id, user_id=user.id, role="viewer"), ADMIN
    )
    set_user(provider, "bob", ["search-devs", "acme-admins"], email="bob@new.example")
    secret = await sign_in(gateway, "bob")
    held = await store.governance.memberships(user_id=user.id)
    assert sorted((m.org_id, m.team_id, m.role, m.source, m.version) for m in held) == sorted([
        (team.org_id, "", "viewer", "admin", 1), (team.org_id, team.id, "member", "oidc", 2),
    ])  # fmt: skip
    # The provider's membership changed in place: made when it was first given.
    assert {m.created_at for m in held if m.team_id} == {first_made}
    assert (await store.governance.user_by_subject("bob")).email == "bob@new.example"
    actor, _ = await signin.actor_of_session(secret)
    assert actor == Actor(f"user:{user.id}", frozenset(), frozenset())
    set_user(provider, "bob", [])
    await sign_in(gateway, "bob")
    held = await store.governance.memberships(user_id=user.id)
    assert [(m.role, m.source) for m in held] == [("viewer", "admin")]
    events = await audit(gateway)
    assert [e.action for e in events] == ["signin.succeeded"] * 3
    assert all(e.actor == f"user:{user.id}" and e.target == f"user:{user.id}" for e in events)
    first, second, third = (json.loads(e.after) for e in events)
    assert first["groups"] == ["ghosts", "search-devs", "search-leads"]
    assert first["role"] == "" and first["memberships"] == [
        {"org": team.org_id, "team": team.id, "role": "team_admin", "source": "oidc"}
    ]
    viewer = {"org": team.org_id, "team": "", "role": "viewer", "source": "admin"}
    before = json.loads(events[1].before)["memberships"]
    assert sorted(map(canonical, before)) == sorted(map(canonical, [*first["memberships"], viewer]))
    assert second["email"] == "bob@new.example" and len(second["session"]) == 12
    assert third["memberships"] == [viewer]
    assert events[0].actor_address == "ipv4:10.0.0.1:4000" and events[0].request_id == "req-in"


async def test_an_administrator_by_group_only_and_sign_out(gateway, provider) -> None:
    signin, store = gateway.signin, gateway.store
    # A user an administrator made by email gets the subject at the first sign-in.
    made = (
        await gateway.services.governance.create_user(
            pb.CreateUserRequest(email="carol@example.com"), ADMIN
        )
    ).user
    set_user(provider, "carol", ["gw-admins"])
    secret = await sign_in(gateway, "carol")
    assert await signin.actor_of_session(secret) == (Actor(f"user:{made.id}"),
                                                     "carol@example.com")  # fmt: skip
    assert (await store.governance.user_by_subject("carol")).id == made.id
    set_user(provider, "dave", [])
    nobody = await sign_in(gateway, "dave")
    dave = await store.governance.user_by_subject("dave")
    assert (await signin.actor_of_session(nobody))[0] == Actor(f"user:{dave.id}", frozenset(),
                                                               frozenset())  # fmt: skip
    call = call_for("ipv4:10.0.0.1:4000", "req-out")
    assert await signin.sign_out(secret, call) is True
    assert await signin.actor_of_session(secret) is None
    assert await signin.sign_out(secret, call) is False
    assert await signin.sign_out("", call) is False
    out = await audit(gateway, "signout")
    assert [(e.actor, e.target) for e in out] == [(f"user:{made.id}", f"user:{made.id}")]
    opened = json.loads((await audit(gateway, "signin"))[0].after)["session"]
    assert json.loads(out[0].before) == {"session": opened}
    assert json.loads(out[0].after) == {"session": opened, "revoked": True}


async def test_a_sign_in_that_does_not_hold_is_refused_and_recorded(gateway, provider) -> None:
    call = call_for("ipv4:10.0.0.1:4000", "req-bad")
    with pytest.raises(SignInFailed, match="^the sign-in's state is unknown, used or stale$"):
        await gateway.signin.finish("code", "no-such-state", CALLBACK, call)
    with pytest.raises(SignInFailed, match="^the sign-in's state is unknown, used or stale$"):
        await gateway.signin.finish("code", "", CALLBACK, call)
    url = await gateway.signin.begin(CALLBACK)
    state = parse_qs(urlsplit(url).query)["state"][0]
    with pytest.raises(SignInFailed, match="^the provider sent no code$"):
        await gateway.signin.finish("", state, CALLBACK, call)
    with pytest.raises(SignInFailed, match="^the sign-in's state is unknown, used or stale$"):
        await gateway.signin.finish("code", state, CALLBACK, call)  # a state is taken once
    events = await audit(gateway)
    assert [(e.action, e.actor, e.target) for e in events] == [
        ("signin.failed", "oidc:unknown", "")
    ] * 4
    assert json.loads(events[2].after) == {"reason": "the provider sent no code"}


async def test_the_exchange_proves_the_sign_in_and_the_id_token_carries_its_nonce(
    gateway, idp, provider
) -> None:
    """PKCE: the code is exchanged with the verifier whose S256 digest the authorization
    URL carried. An ID token minted for another nonce (one injected or replayed) is
    refused, and the refusal recorded."""
    forms = token_forms(idp)
    set_user(provider, "gil", ["gw-admins"])
    url = await gateway.signin.begin(CALLBACK)
    asked = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    back = await granted(url, "gil")
    call = call_for("ipv4:10.0.0.1:4000", "req-pkce")
    await gateway.signin.finish(back["code"], back["state"], CALLBACK, call)
    [form] = forms
    digest = hashlib.sha256(form["code_verifier"][0].encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == asked["code_challenge"]
    assert form["code"] == [back["code"]] and form["redirect_uri"] == [CALLBACK]
    # The provider signs whatever nonce the authorization URL names.
    url = await gateway.signin.begin(CALLBACK)
    back = await granted(url.replace("&nonce=", "&nonce=x"), "gil")
    with pytest.raises(SignInFailed, match="^the ID token's nonce is not this sign-in's$"):
        await gateway.signin.finish(back["code"], back["state"], CALLBACK, call)
    [failed] = await audit(gateway, "signin.failed")
    assert json.loads(failed.after) == {"reason": "the ID token's nonce is not this sign-in's"}


async def test_groups_the_provider_gives_at_userinfo_only(gateway, provider, monkeypatch) -> None:
    """A provider that leaves the groups out of the ID token (as many do by default) and
    the email out of userinfo: the groups are read at userinfo, beside the token's claims."""
    claims_for = oidc_provider_mock._app._user_claims_for_scope

    def split(user: Any, scope: str) -> dict[str, object]:
        left_out = "email" if flask.request.path.endswith("/userinfo") else "groups"
        return {k: v for k, v in claims_for(user, scope).items() if k != left_out}

    monkeypatch.setattr(oidc_provider_mock._app, "_user_claims_for_scope", split)
    set_user(provider, "hal", ["gw-admins"])
    secret = await sign_in(gateway, "hal")
    hal = await gateway.store.governance.user_by_subject("hal")
    assert await gateway.signin.actor_of_session(secret) == (Actor(f"user:{hal.id}"),
                                                             "hal@example.com")  # fmt: skip


async def test_a_sign_in_changes_no_other_user(gateway, provider) -> None:
    """Memberships are synchronised for the user signing in only; a user the provider
    gives no email is made without one; the subject finds its user even when the
    provider's new email is one an administrator gave a user not signed in yet."""
    signin, governance = gateway.signin, gateway.store.governance
    team = (await governance.list_teams())[0]
    set_user(provider, "ann", ["search-leads"])
    await sign_in(gateway, "ann")
    ann = await governance.user_by_subject("ann")
    set_user(provider, "ivo", [], email=None)
    secret = await sign_in(gateway, "ivo")
    ivo = await governance.user_by_subject("ivo")
    assert ivo.email == "" and (await signin.actor_of_session(secret))[1] == ""
    held = await governance.memberships(user_id=ann.id)
    assert [(m.team_id, m.role) for m in held] == [(team.id, "team_admin")]
    event = (await audit(gateway))[-1]
    assert json.loads(event.before) == {"memberships": []}
    assert json.loads(event.after)["email"] == ""
    assert json.loads(event.after)["memberships"] == []
    assert (await signin.actor_of_session(secret))[0] == Actor(f"user:{ivo.id}", frozenset(),
                                                               frozenset())  # fmt: skip
    made = (await gateway.services.governance.create_user(
        pb.CreateUserRequest(email="ann.new@example.com"), ADMIN)).user  # fmt: skip
    set_user(provider, "ann", ["search-leads"], email="ann.new@example.com")
    secret = await sign_in(gateway, "ann")
    assert (await signin.actor_of_session(secret))[0].id == f"user:{ann.id}"
    assert (await governance.get_user(made.id)).subject == ""
    # A provider that stops giving the email: the one known is kept.
    set_user(provider, "ann", [], email=None)
    await sign_in(gateway, "ann")
    assert (await governance.user_by_subject("ann")).email == "ann.new@example.com"


async def test_a_grant_names_its_team_by_id_or_by_a_name_only_one_team_has(
    gateway, provider
) -> None:
    """A team named by id is found; a name two teams share names neither; a group the
    role map does not name gives nothing. A user an administrator made by email joins
    at the first sign-in with the team their groups give."""
    gov, governance = gateway.services.governance, gateway.store.governance
    team = (await governance.list_teams())[0]
    other = (await gov.create_organization(pb.CreateOrganizationRequest(name="other"),
                                           ADMIN)).org  # fmt: skip
    await gov.create_team(pb.CreateTeamRequest(org_id=other.id, name="search"), ADMIN)
    role_map = gateway.signin.config.role_map
    role_map["a-lead-by-id"] = [config.RoleGrant(team=team.id, role="team_admin")]
    role_map["by-id"] = [config.RoleGrant(team=team.id, role="member")]
    made = (await gov.create_user(pb.CreateUserRequest(email="kai@example.com"), ADMIN)).user
    set_user(provider, "kai", ["by-id", "search-leads", "unmapped", "a-lead-by-id"])
    await sign_in(gateway, "kai")
    held = await governance.memberships(user_id=made.id)  # the stronger of two, given first
    assert [(m.team_id, m.role, m.source) for m in held] == [(team.id, "team_admin", "oidc")]
    assert isinstance(held[0].created_at, float)


async def id_token(provider: str, sub: str) -> str:
    """An ID token the provider signed for `sub` (audience `gateway`), got directly."""
    redirect = "http://127.0.0.1:1/callback"
    authorize = (f"{provider}/oauth2/authorize?response_type=code&client_id=gateway"
                 f"&redirect_uri={quote(redirect)}&scope=openid+email&state=x&nonce=n")  # fmt: skip
    code = (await granted(authorize, sub))["code"]
    async with httpx.AsyncClient() as idp:
        tokens = (await idp.post(f"{provider}/oauth2/token", data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
            "client_id": "gateway", "client_secret": "x"})).json()  # fmt: skip
    return str(tokens["id_token"])


async def test_the_providers_jwt_as_bearer(gateway, provider) -> None:
    set_user(provider, "erin", ["search-leads"])
    team = (await gateway.store.governance.list_teams())[0]
    actor = await gateway.signin.actor_of_bearer(await id_token(provider, "erin"))
    assert actor == Actor("oidc:erin", frozenset({team.id}), frozenset())
    with pytest.raises(Unauthenticated) as refused:
        await gateway.signin.actor_of_bearer("not.a.jwt")
    assert refused.value.message == "the Bearer token is not accepted: the token is malformed"


async def test_gateway_wide_roles_and_a_bearers_own_memberships(
    gateway, provider, monkeypatch
) -> None:
    """Of admin and viewer the stronger; a viewer's team groups still give memberships.
    A Bearer JWT gets its groups' rights with its user's own memberships (no one
    else's). Sign-in configured away (a reload without auth.oidc): no session admits."""
    signin, governance = gateway.signin, gateway.store.governance
    team = (await governance.list_teams())[0]
    set_user(provider, "mo", ["search-leads"])
    await sign_in(gateway, "mo")
    set_user(provider, "lou", ["gw-viewers", "search-devs"])
    secret = await sign_in(gateway, "lou")
    lou = await governance.user_by_subject("lou")
    assert (await signin.actor_of_session(secret))[0] == Actor(f"user:{lou.id}", read_only=True)
    held = await governance.memberships(user_id=lou.id)
    assert [(m.team_id, m.role) for m in held] == [(team.id, "member")]
    set_user(provider, "lou", ["gw-admins", "gw-viewers"])
    secret = await sign_in(gateway, "lou")
    assert (await signin.actor_of_session(secret))[0] == Actor(f"user:{lou.id}")
    assert await signin.actor_of_bearer(await id_token(provider, "lou")) == Actor(f"user:{lou.id}")
    await gateway.services.governance.put_membership(
        pb.PutMembershipRequest(org_id=team.org_id, user_id=lou.id, role="org_admin"), ADMIN
    )
    set_user(provider, "lou", [])
    actor = await signin.actor_of_bearer(await id_token(provider, "lou"))
    assert actor == Actor(f"user:{lou.id}", frozenset(), frozenset({team.org_id}))
    monkeypatch.setattr(type(signin), "config", property(lambda self: None))
    assert await signin.actor_of_session(secret) is None


async def test_which_administrator_a_call_is(gateway, provider) -> None:
    """An admin key, as its header or as Bearer, wins over a session cookie beside it;
    the cookie alone is the signed-in user; a JWT-looking secret in the key's own header
    is a key, never the provider's token; an ended session is refused naming the cookie."""
    admins = gateway.services.governance.admins
    set_user(provider, "fay", ["gw-admins"])
    secret = await sign_in(gateway, "fay")
    fay = await gateway.store.governance.user_by_subject("fay")
    for call in (Call({SESSION: secret}), Call({SESSION: secret, "authorization": ""})):
        assert await admins.check(call) == Actor(f"user:{fay.id}")
        assert await admins.admit(call) == Actor(f"user:{fay.id}")
    root = await admins.check(Call({"x-admin-key": ADMIN_KEY}))
    assert root.id.startswith("key:") and root.unrestricted
    for beside in ({"x-admin-key": ADMIN_KEY}, {"authorization": f"Bearer {ADMIN_KEY}"}):
        assert await admins.check(Call({SESSION: secret, **beside})) == root
        assert await admins.admit(Call({SESSION: secret, **beside})) == root
    with pytest.raises(Unauthenticated) as ended:
        await admins.check(Call({SESSION: "no-such-session"}))
    assert (ended.value.message, dict(ended.value.metadata)) == (
        "the sign-in session has ended (signed out, revoked or expired); sign in again",
        {"header": "cookie"},
    )
    with pytest.raises(Unauthenticated) as nothing:  # no key, no cookie: not a session's end
        await admins.check(Call({}))
    assert "session" not in nothing.value.message
    with pytest.raises(Unauthenticated) as as_key:
        await admins.check(Call({"x-admin-key": "eyJhbGciOi.eyJzdWIi.c2ln"}))
    assert "Bearer" not in as_key.value.message
    with pytest.raises(Unauthenticated) as as_bearer:
        await admins.check(Call({"authorization": "Bearer eyJhbGciOi.eyJzdWIi.c2ln"}))
    assert as_bearer.value.message.startswith("the Bearer token is not accepted: ")


async def test_without_sign_in_configured(tmp_path) -> None:
    built = await open_gateway(config.parse(config_with(sqlite_path=str(tmp_path / "g.db")), "t"))
    try:
        with pytest.raises(NotFound) as missing:
            await built.signin.begin(CALLBACK)
        assert missing.value.message == "sign-in is not configured (auth.oidc) on this gateway"
        assert dict(missing.value.metadata) == {}
        with pytest.raises(Unauthenticated) as refused:
            await built.signin.actor_of_bearer("a.b.c")
        assert refused.value.message == ("the Bearer token is not accepted: it is not an admin "
                                         "key, and sign-in is not configured")  # fmt: skip
        assert await built.signin.actor_of_session("secret") is None
        # Without sign-in, a session cookie or the provider's token is no administrator.
        admins = built.services.governance.admins
        for call in (Call({SESSION: "secret"}), Call({"authorization": "Bearer eyJh.eyJz.c2ln"})):
            with pytest.raises(Unauthenticated):
                await admins.check(call)
    finally:
        await built.aclose()


def test_groups_and_rights_as_an_actor() -> None:
    assert _groups("one") == ["one"] and _groups(["b", "a", "b", 3]) == ["3", "a", "b"]
    assert _groups(None) == [] and _groups({"a": 1}) == []
    assert _actor("u", Rights("admin", {("o", "t"): "member"})) == Actor("u")
    assert _actor("u", Rights("viewer", {})) == Actor("u", read_only=True)
    places = {("o1", ""): "org_admin", ("o2", ""): "member", ("o1", "t1"): "team_admin",
              ("o1", "t2"): "member"}  # fmt: skip
    assert _actor("u", Rights("", places)) == Actor("u", frozenset({"t1"}), frozenset({"o1"}))


async def test_a_provider_that_cannot_be_reached_makes_sign_in_unavailable(tmp_path) -> None:
    with socket.socket() as closed:  # a port nobody listens on once closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    data = config_with(sqlite_path=str(tmp_path / "g.db"))
    data["auth"] = {"oidc": {"issuer": f"http://127.0.0.1:{port}", "client_id": "gateway"}}
    built = await open_gateway(config.parse(data, "t"))
    try:
        with pytest.raises(Unauthenticated) as refused:
            await built.signin.begin(CALLBACK)
        assert refused.value.message.startswith(
            "sign-in is unavailable: the provider's discovery document is unavailable ("
        )
        assert dict(refused.value.metadata) == {}
        assert built.signin.provider().client_secret is None  # a public client: no secret
    finally:
        await built.aclose()


async def test_an_organisations_administrator_sees_and_reads_that_organisation_only(
    gateway, provider
) -> None:
    gov = gateway.services.governance
    other = (await gov.create_organization(pb.CreateOrganizationRequest(name="other"),
                                           ADMIN)).org  # fmt: skip
    set_user(provider, "olga", ["acme-admins"])
    session = Call({SESSION: await sign_in(gateway, "olga")})
    olga = await gateway.store.governance.user_by_subject("olga")
    listed = await gov.list_organizations(pb.ListOrganizationsRequest(), session)
    assert [o.name for o in listed.orgs] == ["acme"]
    acme = listed.orgs[0]
    got = await gov.get_organization(pb.GetOrganizationRequest(org_id=acme.id), session)
    assert got.org.id == acme.id
    with pytest.raises(PermissionDenied) as refused:
        await gov.get_organization(pb.GetOrganizationRequest(org_id=other.id), session)
    assert refused.value.message == "this organisation needs an administrator of the whole gateway"
    assert dict(refused.value.metadata) == {"actor": f"user:{olga.id}"}
    teams = await gov.list_teams(pb.ListTeamsRequest(), session)
    assert [t.name for t in teams.teams] == ["search"]
