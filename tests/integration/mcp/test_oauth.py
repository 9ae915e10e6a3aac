"""/mcp as an OAuth 2.1 resource server, against a local issuer: its JWKS served on
loopback, its tokens signed here with PyJWT."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.support.gateways import running_gateway
from tests.support.mcp.upstreams import BOB, http_upstream, mcp_config, sdk_client
from tests.support.ports import steady_port
from tests.support.shared_state import ADMIN_KEY

ISSUER = "https://issuer.example"


class Issuer:
    """A local authorization server's keys: one RSA key, published without a `kid`."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = {"keys": [public]}  # no kid: one key signs everything
        self.fetches = 0

    def token(self, audience: str, subject: str = "cfg-bob", key=None, **claims) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": audience, "sub": subject, "iat": now, "exp": now + 300,
                "scope": "tools"}  # fmt: skip
        claims = {k: v for k, v in {**body, **claims}.items() if v is not None}  # None: left out
        return jwt.encode(claims, key or self.key, algorithm="RS256")

    def serve(self) -> tuple[ThreadingHTTPServer, str]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.fetches += 1
                body = json.dumps(issuer.jwks).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"


@pytest.fixture(scope="module")
async def setup():
    issuer = Issuer()
    jwks_server, jwks_uri = issuer.serve()
    port = steady_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    async with http_upstream() as url:
        data = mcp_config(url, oauth={"issuer": ISSUER, "jwks_uri": jwks_uri,
                                      "audience": audience, "scopes": ["tools"]})  # fmt: skip
        data["server"]["http_port"] = port
        data["keys"].append({"name": "test-admin", "kind": "admin", "secret": ADMIN_KEY})
        async with running_gateway(data) as gw:
            yield issuer, audience, gw
    jwks_server.shutdown()


def listing(token: str) -> tuple[dict, dict]:
    headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}  # fmt: skip
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}, headers


async def test_protected_resource_metadata_and_the_challenge(setup) -> None:
    issuer, audience, gw = setup
    base = f"http://127.0.0.1:{gw.http_port}"
    async with httpx.AsyncClient(base_url=base) as http:
        meta = await http.get("/.well-known/oauth-protected-resource/mcp")
        assert meta.status_code == 200
        assert meta.json() == {"resource": audience, "authorization_servers": [ISSUER],
                               "bearer_methods_supported": ["header"],
                               "scopes_supported": ["tools"]}  # fmt: skip
        body, headers = listing("")
        del headers["authorization"]
        refused = await http.post("/mcp", json=body, headers=headers)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
    )


async def test_a_valid_token_gets_its_keys_grants(setup) -> None:
    issuer, audience, gw = setup
    async with sdk_client(audience, issuer.token(audience)) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"web__echo", "web__add"}
        assert (await client.call_tool("web__add", {"a": 1, "b": 2})).structured_content == {
            "sum": 3
        }
    # The gateway's own keys still work beside tokens.
    async with sdk_client(audience, BOB) as client:
        assert len((await client.list_tools()).tools) == 2


async def test_tokens_that_do_not_hold(setup) -> None:
    issuer, audience, gw = setup
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    bad = {
        "another audience": issuer.token("http://elsewhere.example/mcp"),
        "another issuer": issuer.token(audience, iss="https://evil.example"),
        "expired": issuer.token(audience, exp=int(time.time()) - 60),
        "another key": issuer.token(audience, key=stranger),
        "no such gateway key": issuer.token(audience, subject="mallory"),
        "a key named by its name": issuer.token(audience, subject="bob"),
        "not signed": jwt.encode({"iss": ISSUER, "aud": audience, "sub": "bob",
                                  "exp": int(time.time()) + 60}, None, algorithm="none"),
        "signed by a key of another kind": jwt.encode(
            {"iss": ISSUER, "aud": audience, "sub": "bob", "exp": int(time.time()) + 60},
            ec.generate_private_key(ec.SECP256R1()), algorithm="ES256"),
    }  # fmt: skip
    async with httpx.AsyncClient() as http:
        for why, token in bad.items():
            body, headers = listing(token)
            answer = await http.post(audience, json=body, headers=headers)
            assert answer.status_code == 401, why
            assert answer.headers["www-authenticate"].startswith("Bearer resource_metadata="), why


async def test_the_advertised_scopes_are_the_ones_a_token_needs(setup) -> None:
    issuer, audience, gw = setup
    base = f"http://127.0.0.1:{gw.http_port}"
    async with httpx.AsyncClient() as http:
        for why, token in {
            "no scope": issuer.token(audience, scope=None),
            "other scopes": issuer.token(audience, scope="read write"),
            "a longer scope": issuer.token(audience, scope="tools:read"),
            "scp of others": issuer.token(audience, scope=None, scp=["read"]),
        }.items():
            body, headers = listing(token)
            answer = await http.post(audience, json=body, headers=headers)
            assert answer.status_code == 403, why
            assert answer.headers["www-authenticate"] == (
                f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", '
                'scope="tools", error="insufficient_scope"'
            ), why
            assert "lacks the scope 'tools'" in answer.json()["error"]["message"], why
        for why, token in {
            "among others": issuer.token(audience, scope="read tools write"),
            "scp as a list": issuer.token(audience, scope=None, scp=["tools"]),
        }.items():
            body, headers = listing(token)
            assert (await http.post(audience, json=body, headers=headers)).status_code == 200, why


async def tool_names(audience: str, token: str) -> set[str]:
    async with sdk_client(audience, token) as client:
        return {t.name for t in (await client.list_tools()).tools}


async def test_a_token_names_its_key_by_id_so_a_newer_key_of_that_name_cannot_take_it(
    setup,
) -> None:
    issuer, audience, gw = setup
    admin = {"x-admin-key": ADMIN_KEY}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
        org = (await http.post("/v1/admin/orgs", headers=admin, json={"name": "o"})).json()
        teams = []
        for name in ("a", "b"):
            team = await http.post("/v1/admin/teams", headers=admin,
                                   json={"org_id": org["org"]["id"], "name": name})  # fmt: skip
            teams.append(team.json()["team"]["id"])
        first = await http.post("/v1/admin/keys", headers=admin, json={
            "name": "agent", "kind": "api", "team": teams[0], "mcp_tools": ["web__add"]})  # fmt: skip
        agent = first.json()["key"]["id"]
        assert await tool_names(audience, issuer.token(audience, subject=agent)) == {"web__add"}
        # Another team's administrator makes a newer key of the same name, granted more.
        b_admin = await http.post("/v1/admin/keys", headers=admin,
                                  json={"name": "b-admin", "kind": "admin", "team": teams[1]})  # fmt: skip
        shadow = await http.post(
            "/v1/admin/keys",
            headers={"x-admin-key": b_admin.json()["secret"]},
            json={"name": "agent", "kind": "api", "mcp_tools": ["web__*"]},
        )
        assert shadow.status_code == 200, shadow.text
    # The token still reaches the key it named, with its grants only.
    assert await tool_names(audience, issuer.token(audience, subject=agent)) == {"web__add"}
    # A token naming the key by its name reaches neither.
    body, headers = listing(issuer.token(audience, subject="agent"))
    async with httpx.AsyncClient() as http:
        refused = await http.post(audience, json=body, headers=headers)
    assert refused.status_code == 401, refused.text
    assert "by its id" in refused.text


async def test_the_issuers_keys_are_fetched_once_not_per_call(setup) -> None:
    issuer, audience, gw = setup
    before = issuer.fetches
    async with httpx.AsyncClient() as http:
        for _ in range(5):
            body, headers = listing(issuer.token(audience))
            assert (await http.post(audience, json=body, headers=headers)).status_code == 200
    await asyncio.sleep(0)
    assert issuer.fetches - before <= 1


async def test_without_oauth_there_is_no_metadata() -> None:
    async with (
        running_gateway(mcp_config("http://127.0.0.1:9/mcp")) as gw,
        httpx.AsyncClient() as http,
    ):
        answer = await http.get(
            f"http://127.0.0.1:{gw.http_port}/.well-known/oauth-protected-resource/mcp"
        )
    assert answer.status_code == 404
