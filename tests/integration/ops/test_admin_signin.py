"""Signing in to the admin page with an OpenID provider on loopback (oidc-provider-mock):
the page in headless chromium through the authorization-code flow, the session cookie's
flags, groups changed at the provider and seen at the next sign-in (removals too),
nobody an administrator by default, sign-out revoking the session, the provider's JWTs
as Bearer on the admin API, and every sign-in in the audit log."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import asyncpg
import httpx
import oidc_provider_mock
import pytest

from tests.integration.ops.test_admin_page import SHOTS, chromium_or_skip
from tests.support.gateways import running_gateway
from tests.support.shared_state import ADMIN_KEY, PG_ADMIN_URL, config_with

ADMIN = {"x-admin-key": ADMIN_KEY}
SECRET_ENV = "GW_TEST_OIDC_SECRET"


@pytest.fixture
def provider() -> Iterator[str]:
    with oidc_provider_mock.run_server_in_thread() as server:
        yield f"http://127.0.0.1:{server.server_port}"


def set_user(provider: str, sub: str, groups: list[str]) -> None:
    reply = httpx.put(f"{provider}/users/{quote(sub)}",
                      json={"email": f"{sub}@example.com", "groups": groups})  # fmt: skip
    assert reply.status_code == 204


def signin_config(provider: str, storage: dict[str, Any]) -> dict[str, Any]:
    data = config_with(**storage)
    data["auth"] = {"oidc": {
        "issuer": provider, "client_id": "gateway", "client_secret_env": SECRET_ENV,
        "scopes": ["openid", "email", "profile"], "groups_claim": "groups",
        "role_map": {"gw-admins": [{"role": "admin"}],
                     "search-leads": [{"team": "search", "role": "team_admin"}]},
    }}  # fmt: skip
    return data


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def storage(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[dict[str, Any]]:
    """SQLite, or a PostgreSQL database of this test's own (team names must be unique
    for the role map to name them)."""
    if request.param == "sqlite":
        yield {"sqlite_path": str(tmp_path / "gw.db")}
        return
    name = f"gw_signin_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield {"database_url": PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"}
    admin = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def gateway(provider: str, storage: dict[str, Any]) -> AsyncIterator[str]:
    os.environ[SECRET_ENV] = "s3cret"
    async with running_gateway(signin_config(provider, storage)) as gw:
        base = f"http://127.0.0.1:{gw.http_port}"
        async with httpx.AsyncClient(base_url=base) as http:
            org = await http.post("/v1/admin/orgs", headers=ADMIN, json={"name": "acme"})
            team = await http.post("/v1/admin/teams", headers=ADMIN,
                                   json={"org_id": org.json()["org"]["id"], "name": "search"})  # fmt: skip
            assert team.status_code == 200
        yield base


async def code_flow(base: str, provider: str, sub: str) -> httpx.AsyncClient:
    """Signs in without a browser (the same redirects); returns the client with its cookie."""
    client = httpx.AsyncClient(base_url=base)
    start = await client.get("/admin/signin")
    assert start.status_code == 302
    authorize = start.headers["location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["response_type"] == ["code"]
    assert query["state"][0] and query["nonce"][0] and query["code_challenge"][0]
    async with httpx.AsyncClient() as idp:
        granted = await idp.post(authorize, data={"sub": sub})
    assert granted.status_code == 302, granted.text
    back = await client.get(granted.headers["location"].removeprefix(base))
    assert back.status_code == 302 and back.headers["location"] == "/admin", back.text
    flags = back.headers["set-cookie"].lower()
    assert "httponly" in flags and "secure" in flags and "samesite=lax" in flags
    # For the whole site, for as long as the session lasts (sign-in's default 8 hours).
    assert "path=/;" in flags + ";" and f"max-age={8 * 3600};" in flags + ";"
    assert back.headers["cache-control"] == "no-store"
    # A Secure cookie: httpx keeps it off plain HTTP, so it is sent by hand here (a
    # browser sends it to a loopback gateway; the chromium test shows it).
    session = back.cookies["gw_admin_session"]
    await client.aclose()
    # As the admin page's own requests: a browser sends the page's Origin with a change.
    headers = {"cookie": f"gw_admin_session={session}", "origin": base}
    return httpx.AsyncClient(base_url=base, headers=headers)


async def id_token(provider: str, sub: str) -> str:
    """An ID token of the provider for `sub` (a JWT it signed, audience `gateway`)."""
    redirect = "http://127.0.0.1:1/callback"
    authorize = (f"{provider}/oauth2/authorize?response_type=code&client_id=gateway"
                 f"&redirect_uri={quote(redirect)}&scope=openid+email&state=x&nonce=n")  # fmt: skip
    async with httpx.AsyncClient() as idp:
        granted = await idp.post(authorize, data={"sub": sub})
        code = parse_qs(urlsplit(granted.headers["location"]).query)["code"][0]
        tokens = await idp.post(f"{provider}/oauth2/token", data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
            "client_id": "gateway", "client_secret": "any"})  # fmt: skip
    return str(tokens.json()["id_token"])


async def audit_actions(base: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=base) as http:
        reply = await http.get("/v1/admin/audit", headers=ADMIN, params={"action": "sign"})
        return list(reply.json()["events"])


async def test_groups_at_the_provider_are_synchronised_at_each_sign_in(
    gateway: str, provider: str
) -> None:
    set_user(provider, "bob", [])
    nobody = await code_flow(gateway, provider, "bob")
    # Signed in, but no group gives bob anything: no administrator by default.
    assert (await nobody.get("/admin/session")).json()["signed_in"] is True
    assert (await nobody.get("/v1/admin/dashboard")).status_code == 403
    assert (await nobody.post("/v1/admin/orgs", json={"name": "bobs"})).status_code == 403

    set_user(provider, "bob", ["search-leads"])
    lead = await code_flow(gateway, provider, "bob")
    teams = (await lead.get("/v1/admin/teams")).json()["teams"]
    assert [t["name"] for t in teams] == ["search"]
    made = await lead.post("/v1/admin/keys", json={"name": "bob-svc", "kind": "api"})
    assert made.status_code == 200 and made.json()["key"]["team"] == teams[0]["id"]
    assert (await lead.get("/v1/admin/dashboard")).status_code == 403
    async with httpx.AsyncClient(base_url=gateway) as http:
        users = (await http.get("/v1/admin/users", headers=ADMIN)).json()["users"]
        bob = next(u for u in users if u["subject"] == "bob")
        assert [(m["role"], m["source"]) for m in bob["memberships"]] == [("team_admin", "oidc")]

    # The group taken away at the provider: the next sign-in removes the membership.
    set_user(provider, "bob", [])
    await code_flow(gateway, provider, "bob")
    async with httpx.AsyncClient(base_url=gateway) as http:
        users = (await http.get("/v1/admin/users", headers=ADMIN)).json()["users"]
        assert next(u for u in users if u["subject"] == "bob")["memberships"] == []
    # The earlier session's rights follow the memberships: team_admin no more.
    assert (await lead.get("/v1/admin/teams")).json().get("teams", []) == []

    # Signing out revokes the session server-side: its cookie opens nothing after.
    cookie = lead.headers["cookie"].partition("=")[2]
    assert (await lead.post("/admin/signout")).json() == {"signed_out": True}
    async with httpx.AsyncClient(base_url=gateway) as fresh:
        replay = await fresh.get(
            "/v1/admin/teams", headers={"cookie": f"gw_admin_session={cookie}"}
        )
    assert replay.status_code == 401

    events = await audit_actions(gateway)
    actions = [e["action"] for e in events]
    assert actions == ["signin.succeeded"] * 3 + ["signout"]
    third = json.loads(events[2]["after"])
    assert third["memberships"] == [] and json.loads(events[2]["before"])["memberships"]
    assert all(e["actor"].startswith("user:") for e in events)


REFUSED = {
    403: {"message": "a change signed in with the admin page's cookie must come from the "
                     "gateway's own pages (Sec-Fetch-Site: same-origin, or its own Origin)",
          "type": "permission_error", "code": "permission_denied", "param": "origin"},
    415: {"message": "a change signed in with the admin page's cookie must send "
                     "Content-Type: application/json",
          "type": "invalid_request_error", "code": "unsupported_media_type",
          "param": "content-type"},
}  # fmt: skip


async def test_a_change_the_cookie_signs_comes_from_the_gateways_own_page_as_json(
    gateway: str, provider: str
) -> None:
    set_user(provider, "erin", ["gw-admins"])
    page = await code_flow(gateway, provider, "erin")
    cookie = {"cookie": page.headers["cookie"]}
    host = urlsplit(gateway).netloc
    body = b'{"name": "forged"}'
    json_type = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=gateway) as http:
        for why, headers, status in (
            ("no Origin", json_type, 403),
            ("a page of the same site", {**json_type, "origin": "http://evil.127.0.0.1.nip.io",
                                         "sec-fetch-site": "same-site"}, 403),
            ("another port", {**json_type, "origin": f"http://{host.split(':')[0]}:1"}, 403),
            ("another scheme", {**json_type, "origin": f"https://{host}"}, 403),
            ("a form's type", {"content-type": "text/plain", "origin": gateway}, 415),
            ("a form's other type", {"content-type": "application/x-www-form-urlencoded",
                                     "sec-fetch-site": "same-origin"}, 415),
            ("no type", {"origin": gateway}, 415),
        ):  # fmt: skip
            reply = await http.post("/v1/admin/orgs", content=body, headers={**cookie, **headers})
            assert reply.status_code == status, (why, reply.text)
            assert reply.json()["error"] == REFUSED[status], why
        # The page's own requests: its Origin, or the browser's same-origin word.
        for name, headers in (
            ("by-origin", {**json_type, "origin": gateway}),
            ("by-fetch-site", {**json_type, "sec-fetch-site": "same-origin"}),
            ("with-charset", {"content-type": "Application/JSON ; charset=utf-8",
                              "origin": gateway}),
        ):  # fmt: skip
            reply = await http.post("/v1/admin/orgs", json={"name": name},
                                    headers={**cookie, **headers})  # fmt: skip
            assert reply.status_code == 200, (name, reply.text)
        # Reading needs neither; a key instead of the cookie needs neither either.
        assert (await http.get("/v1/admin/orgs", headers=cookie)).status_code == 200
        keyed = await http.post("/v1/admin/orgs", headers=ADMIN, content=b'{"name": "keyed"}')
        assert keyed.status_code == 200, keyed.text
        orgs = (await http.get("/v1/admin/orgs", headers=ADMIN)).json()["orgs"]
        assert "forged" not in {o["name"] for o in orgs}
        # Signing out is a change too: another page cannot end the session.
        refused = await http.post("/admin/signout", headers={**cookie, "origin": "http://x"})
        assert refused.status_code == 403
        who = await http.get("/admin/session", headers=cookie)
        assert who.headers["cache-control"] == "no-store"
        assert who.json() == {"oidc": True, "signed_in": True, "user": who.json()["user"],
                              "email": "erin@example.com"}  # fmt: skip
        assert who.json()["user"].startswith("user:")
        out = await page.post("/admin/signout")
        assert out.json() == {"signed_out": True} and out.headers["cache-control"] == "no-store"
        # The cookie cleared with the attributes it was set with, or a browser keeps it.
        value, *attributes = out.headers["set-cookie"].split("; ")
        assert value == 'gw_admin_session=""'
        assert {"HttpOnly", "Secure", "Max-Age=0", "Path=/"} <= set(attributes)
        assert "samesite=lax" in {a.lower() for a in attributes}
        for headers in (cookie, {}):  # the ended session's cookie, or none: nobody
            gone = await http.get("/admin/session", headers=headers)
            assert gone.json() == {"oidc": True, "signed_in": False}
        assert (await page.post("/admin/signout")).json() == {"signed_out": False}
        # Each route answers its own method only: a link (GET) cannot sign anybody out.
        for method, path in (("POST", "/admin/signin"), ("POST", "/admin/signin/callback"),
                             ("GET", "/admin/signout"), ("POST", "/admin/session")):  # fmt: skip
            wrong = await http.request(method, path, headers={**cookie, "origin": gateway})
            assert wrong.status_code == 405, (method, path, wrong.text)
    await page.aclose()


async def test_without_redirect_url_only_a_loopback_host_chooses_the_callback(
    gateway: str, provider: str, storage: dict[str, Any]
) -> None:
    port = urlsplit(gateway).port
    async with httpx.AsyncClient(base_url=gateway) as http:
        for host in ("gateway.example.com", "evil.example", "127.0.0.1.nip.io", "10.0.0.1"):
            start = await http.get("/admin/signin", headers={"host": f"{host}:{port}"})
            assert start.status_code == 403, (host, start.headers.get("location"))
            assert "location" not in start.headers
            assert start.text.startswith(
                "<!doctype html><meta charset=utf-8><title>Sign-in</title>"
            )
            assert (
                "sign-in on an address other than loopback needs auth.oidc.redirect_url: "
                "set it to this gateway&#x27;s public URL ending in /admin/signin/callback "
                "(the one registered at the identity provider)"
            ) in start.text
            back = await http.get("/admin/signin/callback", params={"code": "c", "state": "s"},
                                  headers={"host": host})  # fmt: skip
            assert back.status_code == 403 and "redirect_url" in back.text
        for host in (f"localhost:{port}", f"app.localhost:{port}", f"127.0.0.1:{port}",
                     f"[::1]:{port}"):  # fmt: skip
            start = await http.get("/admin/signin", headers={"host": host})
            assert start.status_code == 302, (host, start.text)
            asked = parse_qs(urlsplit(start.headers["location"]).query)["redirect_uri"]
            assert asked == [f"http://{host}/admin/signin/callback"]
    # With redirect_url set, it is the callback whatever the Host says.
    data = signin_config(provider, storage)
    data["auth"]["oidc"]["redirect_url"] = "https://gw.example.com/admin/signin/callback"
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        start = await http.get("/admin/signin", headers={"host": "evil.example"})
        assert start.status_code == 302, start.text
        asked = parse_qs(urlsplit(start.headers["location"]).query)["redirect_uri"]
        assert asked == ["https://gw.example.com/admin/signin/callback"]


async def test_a_failed_sign_in_is_refused_and_recorded(gateway: str, provider: str) -> None:
    client = httpx.AsyncClient(base_url=gateway)
    forged = await client.get("/admin/signin/callback", params={"code": "x", "state": "forged"})
    assert forged.status_code == 401 and "state is unknown" in forged.text
    # A real state replayed after its sign-in: refused too.
    set_user(provider, "carol", ["gw-admins"])
    authorize = (await client.get("/admin/signin")).headers["location"]
    async with httpx.AsyncClient() as idp:
        back = (await idp.post(authorize, data={"sub": "carol"})).headers["location"]
    assert (await client.get(back.removeprefix(gateway))).status_code == 302
    again = await client.get(back.removeprefix(gateway))
    assert again.status_code == 401
    events = await audit_actions(gateway)
    assert [e["action"] for e in events] == ["signin.failed", "signin.succeeded", "signin.failed"]
    assert "state" in json.loads(events[0]["after"])["reason"]
    # A fresh state without the provider's code: refused as such.
    state = parse_qs(urlsplit((await client.get("/admin/signin")).headers["location"]).query)
    no_code = await client.get("/admin/signin/callback", params={"state": state["state"][0]})
    assert no_code.status_code == 401 and "sent no code" in no_code.text, no_code.text


async def test_provider_jwts_as_bearer_on_the_admin_api(gateway: str, provider: str) -> None:
    set_user(provider, "ops-bot", ["gw-admins"])
    token = await id_token(provider, "ops-bot")
    bearer = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=gateway) as http:
        assert (await http.get("/v1/admin/teams", headers=bearer)).status_code == 200
        made = await http.post("/v1/admin/orgs", headers=bearer, json={"name": "bot-org"})
        assert made.status_code == 200
        [event] = [e for e in (await http.get("/v1/admin/audit", headers=ADMIN)).json()["events"]
                   if e["action"] == "org.create" and "bot-org" in e["after"]]  # fmt: skip
        assert event["actor"] == "oidc:ops-bot"
        set_user(provider, "plain", [])
        plain = {"authorization": f"Bearer {await id_token(provider, 'plain')}"}
        assert (
            await http.post("/v1/admin/orgs", headers=plain, json={"name": "p"})
        ).status_code == 403
        broken = {"authorization": f"Bearer {token[:-4]}AAAA"}
        refused = await http.get("/v1/admin/teams", headers=broken)
        assert refused.status_code == 401 and "not valid" in refused.json()["error"]["message"]


@pytest.mark.browser
async def test_the_admin_page_signs_in_through_the_provider_in_chromium(
    gateway: str, provider: str
) -> None:
    executable = chromium_or_skip()
    from playwright.async_api import async_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    set_user(provider, "alice", ["gw-admins"])
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=executable,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            page = await context.new_page()
            await page.goto(f"{gateway}/admin")
            await page.wait_for_selector("#oidc:not([hidden])")
            await page.click("#signin")
            await page.get_by_placeholder("sub").fill("alice")
            await page.get_by_role("button", name="Authorize").click()
            await page.wait_for_selector("#providers tbody tr:nth-child(2)")
            assert "alice@example.com" in await page.inner_text("#who")
            [cookie] = [c for c in await context.cookies() if c["name"] == "gw_admin_session"]
            assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
            # No script of the page can read it.
            assert "gw_admin_session" not in await page.evaluate("document.cookie")
            await page.screenshot(path=str(SHOTS / "admin-signed-in.png"), full_page=True)
            # A change from the page (its JSON, its origin) goes through with the cookie.
            button = page.locator("#providers button").first
            switched = await button.get_attribute("data-provider")
            await button.click()
            await page.wait_for_selector(
                f'#providers button[data-provider="{switched}"]:has-text("Enable")'
            )
            await page.click("#logout")
            await page.wait_for_selector("#login:not([hidden])")
            assert (await page.request.get(f"{gateway}/v1/admin/dashboard")).status == 401

            # The admin group taken away at the provider: the next sign-in has no rights.
            set_user(provider, "alice", [])
            await page.click("#signin")
            await page.get_by_role("button", name="alice").first.click()
            await page.wait_for_selector("#status:has-text('administrator')")
            assert await page.locator("#providers tbody tr").count() == 0
            await page.screenshot(path=str(SHOTS / "admin-signed-in-no-role.png"))
        finally:
            await browser.close()
    events = await audit_actions(gateway)
    assert [e["action"] for e in events] == ["signin.succeeded", "signout", "signin.succeeded"]
    assert json.loads(events[2]["after"])["role"] == ""


async def test_an_administrator_ends_a_users_sessions(gateway: str, provider: str) -> None:
    set_user(provider, "dana", ["gw-admins"])
    dana = await code_flow(gateway, provider, "dana")
    assert (await dana.get("/v1/admin/dashboard")).status_code == 200
    who = (await dana.get("/admin/session")).json()["user"].removeprefix("user:")
    async with httpx.AsyncClient(base_url=gateway) as http:
        ended = await http.post(f"/v1/admin/users/{who}:signout", headers=ADMIN, json={})
        assert ended.json() == {"user_id": who, "sessions_revoked": 1}
        [event] = [e for e in (await http.get("/v1/admin/audit", headers=ADMIN)).json()["events"]
                   if e["action"] == "user.signout"]  # fmt: skip
        assert event["target"] == f"user:{who}" and event["actor"] == "key:cfg-test-admin"
    refused = await dana.get("/v1/admin/dashboard")
    assert refused.status_code == 401 and "sign in again" in refused.json()["error"]["message"]
    await dana.aclose()


async def test_the_providers_refusal_is_a_failure_even_beside_a_code(
    gateway: str, provider: str
) -> None:
    # The provider says the user refused; a code beside that error (sent by a forger,
    # or a provider's bug) signs nobody in.
    set_user(provider, "dave", ["gw-admins"])
    async with httpx.AsyncClient(base_url=gateway) as client:
        start = await client.get("/admin/signin")
        assert start.headers["cache-control"] == "no-store"  # a fresh state each time
        async with httpx.AsyncClient() as idp:
            back = await idp.post(start.headers["location"], data={"sub": "dave"})
        granted = parse_qs(urlsplit(back.headers["location"]).query)
        refused = await client.get(
            "/admin/signin/callback",
            params={"error": "access_denied", "code": granted["code"][0],
                    "state": granted["state"][0]},
            headers={"x-request-id": "signin-refused-1"},
        )  # fmt: skip
    assert refused.status_code == 401 and "set-cookie" not in refused.headers
    assert refused.headers["cache-control"] == "no-store"
    (event,) = await audit_actions(gateway)
    assert (event["action"], json.loads(event["after"])) == (
        "signin.failed", {"reason": "the provider sent no code"},
    )  # fmt: skip
    # Who tried, from where, in which request: as every other change records it.
    assert event["actor_address"].startswith("127.0.0.1:")
    assert event["request_id"] == "signin-refused-1"
