"""The OpenID provider's tokens as the sign-in checks them, against a provider on
loopback whose keys rotate: the JWKS fetched once, again once on an unknown key id,
a one-key set signing tokens that name no key, and every check that refuses a token."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from server.application.governance import oidc as oidc_module
from server.application.governance.oidc import (
    JWKS_TTL_S,
    OidcProvider,
    SignInFailed,
    invalid_bearer,
    pkce_pair,
)
from server.base.config import OidcConfig


class Provider:
    """Discovery and a JWKS whose keys the test changes."""

    def __init__(self) -> None:
        self.keys: dict[str | None, Any] = {}
        self.jwks_requests = 0
        # JWKS entries before the keys' (keys this gateway cannot use), or a body of
        # its own in place of the whole set, or a failure.
        self.extra: list[dict[str, Any]] = []
        self.jwks_body: Any = None
        self.jwks_status = 200
        self.authorize_path = "/authorize"
        # The issuer's path (discovery is served under it) and changes to its discovery
        # document (a field set to None is left out).
        self.prefix = ""
        self.discovery: dict[str, Any] = {}
        # What the token and userinfo endpoints answer (status, body), and each request
        # they were sent (headers, and the token endpoint's form).
        self.answers: dict[str, tuple[int, Any]] = {}
        self.requests: dict[str, list[tuple[dict[str, str], dict[str, list[str]]]]] = {}
        # The headers of each GET, by path.
        self.fetched: dict[str, list[dict[str, str]]] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                seen = {k.lower(): v for k, v in self.headers.items()}
                provider.fetched.setdefault(self.path, []).append(seen)
                if self.path.removeprefix(provider.prefix) == "/.well-known/openid-configuration":
                    body: dict[str, Any] = {
                        "issuer": provider.url + provider.prefix,
                        "jwks_uri": f"{provider.url}/jwks",
                        "authorization_endpoint": f"{provider.url}{provider.authorize_path}",
                        "token_endpoint": f"{provider.url}/token",
                        "userinfo_endpoint": f"{provider.url}/userinfo",
                    } | provider.discovery  # fmt: skip
                    body = {k: v for k, v in body.items() if v is not None}
                elif self.path == "/userinfo":
                    self.answer("/userinfo", {})
                    return
                else:
                    provider.jwks_requests += 1
                    body = provider.jwks_body
                    if body is None:
                        body = {"keys": [*provider.extra,
                                         *(provider.public(kid) for kid in provider.keys)]}  # fmt: skip
                data = json.dumps(body).encode()
                self.send_response(provider.jwks_status if self.path == "/jwks" else 200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("content-length", "0"))
                self.answer(self.path, parse_qs(self.rfile.read(length).decode()))

            def answer(self, path: str, form: dict[str, list[str]]) -> None:
                seen = {k.lower(): v for k, v in self.headers.items()}
                provider.requests.setdefault(path, []).append((seen, form))
                status, body = provider.answers.get(path, (404, {}))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        return Handler

    def add(self, kid: str | None) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def public(self, kid: str | None) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
        if kid is not None:
            jwk["kid"] = kid
        return dict(jwk)

    def token(self, kid: str | None, signer: str | None = "same", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": "gateway", "sub": "alice", "iat": now, "exp": now + 60}
        key = self.keys[kid if signer == "same" else signer]
        headers = {"kid": kid} if kid is not None else {}
        return jwt.encode(body | claims, key, algorithm="RS256", headers=headers)


@pytest.fixture
def provider() -> Iterator[Provider]:
    served = Provider()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def client(provider: Provider) -> OidcProvider:
    return OidcProvider(OidcConfig(issuer=provider.url, client_id="gateway"), None)


async def test_keys_are_fetched_once_and_again_once_for_a_key_rotated_in(provider):
    provider.add("k1")
    oidc = client(provider)
    assert (await oidc.verify(provider.token("k1"), "gateway"))["sub"] == "alice"
    assert (await oidc.verify(provider.token("k1"), "gateway"))["sub"] == "alice"
    assert provider.jwks_requests == 1
    provider.add("k2")  # the provider rotates a key in
    assert (await oidc.verify(provider.token("k2"), "gateway"))["sub"] == "alice"
    assert provider.jwks_requests == 2
    # A key it does not publish: fetched again once, then refused.
    rogue = Provider()
    rogue.add("k3")
    forged = jwt.encode({"iss": provider.url, "aud": "gateway", "sub": "x",
                         "exp": int(time.time()) + 60}, rogue.keys["k3"], algorithm="RS256",
                        headers={"kid": "k3"})  # fmt: skip
    rogue.server.server_close()
    with pytest.raises(SignInFailed, match="a key the provider does not publish"):
        await oidc.verify(forged, "gateway")
    assert provider.jwks_requests == 3 and oidc.jwks_fetches == 3


async def test_one_key_signs_a_token_naming_none(provider):
    provider.add(None)
    oidc = client(provider)
    assert (await oidc.verify(provider.token(None), "gateway"))["sub"] == "alice"
    # A one-key set without a kid signs a token naming one too.
    assert (await oidc.verify(provider.token("any", signer=None), "gateway"))["sub"] == "alice"
    provider.keys = {}
    provider.add("only")
    fresh = client(provider)
    assert (await fresh.verify(provider.token(None, signer="only"), "gateway"))["sub"] == "alice"


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"aud": "another"}, "another audience"),
        ({"iss": "https://elsewhere"}, "another issuer"),
        ({"exp": int(time.time()) - 3600}, "expired"),
    ],
)
async def test_a_token_for_someone_else_or_expired_is_refused(provider, claims, why):
    provider.add("k1")
    with pytest.raises(SignInFailed, match=why):
        await client(provider).verify(provider.token("k1", **claims), "gateway")


async def test_nonce_algorithm_and_signature_are_checked(provider):
    provider.add("k1")
    oidc = client(provider)
    with pytest.raises(SignInFailed, match="nonce"):
        await oidc.verify(provider.token("k1", nonce="old"), "gateway", nonce="new")
    assert (await oidc.verify(provider.token("k1", nonce="n"), "gateway", nonce="n"))[
        "nonce"
    ] == "n"
    # A shared-secret token is refused whatever key it names.
    hs = jwt.encode({"iss": provider.url, "aud": "gateway", "sub": "x", "exp": 2**31},
                    "secret-long-enough-for-hs256-xxxxxxxx", algorithm="HS256",
                    headers={"kid": "k1"})  # fmt: skip
    with pytest.raises(SignInFailed, match="algorithm"):
        await oidc.verify(hs, "gateway")
    tampered = provider.token("k1")[:-6] + "AAAAAA"
    with pytest.raises(SignInFailed, match="not valid"):
        await oidc.verify(tampered, "gateway")
    with pytest.raises(SignInFailed, match="malformed"):
        await oidc.verify("not-a-jwt", "gateway")


async def test_the_authorization_url_carries_pkce_state_and_nonce(provider):
    for _ in range(300):  # the challenge is the verifier's S256, unpadded (RFC 7636)
        verifier, challenge = pkce_pair()
        # 48 random bytes: 64 characters, within RFC 7636's 43 to 128.
        assert len(verifier) == 64 and len(base64.urlsafe_b64decode(verifier)) == 48
        digest = hashlib.sha256(verifier.encode()).digest()
        assert challenge == base64.urlsafe_b64encode(digest).decode().rstrip("=")
    url = await client(provider).authorize_url("https://gw/cb", "st", "no", challenge)
    assert url.startswith(f"{provider.url}/authorize?response_type=code&client_id=gateway")
    for part in ("state=st", "nonce=no", f"code_challenge={challenge}",
                 "scope=openid+email+profile",
                 "code_challenge_method=S256", "redirect_uri=https%3A%2F%2Fgw%2Fcb"):  # fmt: skip
        assert part in url


async def refused(oidc: OidcProvider, token: str, nonce: str | None = None) -> str:
    with pytest.raises(SignInFailed) as caught:
        await oidc.verify(token, "gateway", nonce=nonce)
    return str(caught.value)


async def test_each_refusal_says_exactly_why(provider):
    provider.add("k1")
    oidc = client(provider)
    assert await refused(oidc, "not-a-jwt") == "the token is malformed"
    expired = provider.token("k1", exp=int(time.time()) - 3600)
    assert await refused(oidc, expired) == "the token has expired"
    assert await refused(oidc, provider.token("k1", aud="x")) == "the token is for another audience"
    assert await refused(oidc, provider.token("k1", iss="https://x")) == (
        "the token is from another issuer"
    )
    tampered = provider.token("k1")[:-6] + "AAAAAA"
    assert await refused(oidc, tampered) == "the token is not valid (InvalidSignatureError)"
    assert await refused(oidc, provider.token("k1", nonce="a"), nonce="b") == (
        "the ID token's nonce is not this sign-in's"
    )
    # Every claim the check stands on is required: a token without one is refused.
    for claim in ("exp", "sub"):
        body = {"iss": provider.url, "aud": "gateway", "sub": "x", "exp": int(time.time()) + 60}
        del body[claim]
        token = jwt.encode(body, provider.keys["k1"], algorithm="RS256", headers={"kid": "k1"})
        assert await refused(oidc, token) == "the token is not valid (MissingRequiredClaimError)"
    # A minute of clock difference with the provider is tolerated, no more.
    late = provider.token("k1", exp=int(time.time()) - 30)
    assert (await oidc.verify(late, "gateway"))["sub"] == "alice"
    rogue = jwt.encode({"iss": provider.url, "aud": "gateway", "sub": "x", "exp": 2**31},
                       rsa.generate_private_key(public_exponent=65537, key_size=2048),
                       algorithm="RS256", headers={"kid": "k9"})  # fmt: skip
    assert (
        await refused(oidc, rogue) == "the token is signed by a key the provider does not publish"
    )


async def test_a_shared_secret_in_the_set_signs_nothing(provider):
    provider.extra = [
        {"kty": "oct", "kid": "shared", "k": "c2VjcmV0LWxvbmctZW5vdWdoLWZvci1oczI1Ng"}
    ]
    provider.add("k1")
    oidc = client(provider)
    hs = jwt.encode({"iss": provider.url, "aud": "gateway", "sub": "x", "exp": 2**31},
                    "secret-long-enough-for-hs256", algorithm="HS256",
                    headers={"kid": "shared"})  # fmt: skip
    assert await refused(oidc, hs) == "the token is signed with an algorithm its key does not take"


async def test_keys_of_kinds_it_cannot_use_are_skipped_not_the_rest(provider):
    provider.extra = [{"kty": "XYZ", "kid": "odd"}]
    provider.add("k1")
    assert (await client(provider).verify(provider.token("k1"), "gateway"))["sub"] == "alice"


@pytest.mark.parametrize("body", [[], {}, {"keys": []}])
async def test_a_set_with_no_usable_key_refuses_cleanly(provider, body):
    provider.add("k1")
    provider.jwks_body = body
    assert await refused(client(provider), provider.token("k1")) == (
        "the token is signed by a key the provider does not publish"
    )


async def test_keys_unavailable_and_kept_keys_fetched_again_after_their_time(provider):
    provider.add("k1")
    oidc = client(provider)
    await oidc.verify(provider.token("k1"), "gateway")
    oidc._fetched -= JWKS_TTL_S + 1  # the keys' time is up
    await oidc.verify(provider.token("k1"), "gateway")
    assert provider.jwks_requests == 2
    provider.jwks_status = 500
    oidc._fetched -= JWKS_TTL_S + 1
    assert await refused(oidc, provider.token("k1")) == (
        "the provider's keys are unavailable (HTTP Error 500: Internal Server Error)"
    )


async def test_an_authorization_endpoint_with_a_query_keeps_it(provider):
    provider.authorize_path = "/authorize?tenant=acme"
    url = await client(provider).authorize_url("https://gw/cb", "st", "no", "ch")
    assert url.startswith(f"{provider.url}/authorize?tenant=acme&response_type=code&")


async def test_the_issuer_as_configured_and_as_discovered(provider):
    provider.add("k1")
    # A trailing slash on either side is the same issuer, whatever its path ends with.
    provider.prefix = "/tenantX"
    issuer = provider.url + provider.prefix
    provider.discovery = {"issuer": issuer + "/"}
    oidc = OidcProvider(OidcConfig(issuer=issuer + "/", client_id="gateway"), None)
    assert oidc.issuer == issuer
    claims = await oidc.verify(provider.token("k1", iss=issuer), "gateway")
    assert claims["iss"] == issuer
    assert oidc.jwks_fetches == 1 and provider.jwks_requests == 1


@pytest.mark.parametrize(
    ("discovery", "why"),
    [
        ({"issuer": "https://elsewhere"}, "the provider's discovery document names another issuer"),
        ({"issuer": None}, "the provider's discovery document names another issuer"),
        ({"jwks_uri": None}, "the provider's discovery document has no jwks_uri"),
        ({"token_endpoint": 5}, "the provider's discovery document has no token_endpoint"),
        ({"authorization_endpoint": None},
         "the provider's discovery document has no authorization_endpoint"),
    ],
)  # fmt: skip
async def test_a_discovery_document_that_does_not_hold(provider, discovery, why):
    provider.add("k1")
    provider.discovery = discovery
    assert await refused(client(provider), provider.token("k1")) == why


async def test_a_provider_that_cannot_be_reached():
    with socket.socket() as closed:  # a port nobody listens on once closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    oidc = OidcProvider(OidcConfig(issuer=f"http://127.0.0.1:{port}", client_id="gateway"), None)
    with pytest.raises(SignInFailed) as caught:
        await oidc.metadata()
    assert re.fullmatch(
        r"the provider's discovery document is unavailable \(.+\)", str(caught.value)
    )


async def test_the_code_exchanged_with_the_clients_credentials(provider):
    provider.answers["/token"] = (200, {"id_token": "eyJ.a.b", "access_token": "at"})
    oidc = OidcProvider(OidcConfig(issuer=provider.url, client_id="gate way:1"), "s3cr%t:x/y")
    tokens = await oidc.exchange("the-code", "the-verifier", "https://gw/cb")
    assert tokens == {"id_token": "eyJ.a.b", "access_token": "at"}
    headers, form = provider.requests["/token"][0]
    assert form == {"grant_type": ["authorization_code"], "code": ["the-code"],
                    "redirect_uri": ["https://gw/cb"], "code_verifier": ["the-verifier"],
                    "client_id": ["gate way:1"]}  # fmt: skip
    assert headers["content-type"] == "application/x-www-form-urlencoded"
    assert set(headers) == {"accept", "accept-encoding", "authorization", "connection", "content-length",
                            "content-type", "host", "user-agent"}  # fmt: skip
    assert headers["accept"] == "application/json"
    # Basic credentials of the form-encoded id and secret (RFC 6749 2.3.1).
    pair = base64.b64decode(headers["authorization"].removeprefix("Basic ")).decode()
    assert (
        headers["authorization"].startswith("Basic ") and pair == "gate%20way%3A1:s3cr%25t%3Ax%2Fy"
    )
    public = await client(provider).exchange("c", "v", "https://gw/cb")  # no secret: no header
    assert public["id_token"] == "eyJ.a.b"
    assert "authorization" not in provider.requests["/token"][1][0]


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ((400, {"error": "invalid_grant"}), "the provider refused the code (HTTP 400)"),
        ((200, b"not json"), "the provider refused the code (JSONDecodeError)"),
        ((200, {"access_token": "at"}), "the provider's token answer has no id_token"),
        ((200, {"id_token": 5}), "the provider's token answer has no id_token"),
        ((200, ["id_token"]), "the provider's token answer has no id_token"),
    ],
)
async def test_a_code_the_provider_does_not_exchange(provider, answer, why):
    provider.answers["/token"] = answer
    with pytest.raises(SignInFailed) as caught:
        await client(provider).exchange("c", "v", "https://gw/cb")
    assert str(caught.value) == why


async def test_userinfo_with_the_access_token_or_nothing(provider):
    provider.answers["/userinfo"] = (200, {"groups": ["a"]})
    oidc = client(provider)
    assert await oidc.userinfo("at-1") == {"groups": ["a"]}
    headers, _ = provider.requests["/userinfo"][0]
    assert (headers["authorization"], headers["accept"]) == ("Bearer at-1", "application/json")
    assert await oidc.userinfo("") == {}
    assert len(provider.requests["/userinfo"]) == 1  # no token, no request
    for status, body in ((500, {"groups": ["a"]}), (200, b"{"), (200, ["a"])):
        provider.answers["/userinfo"] = (status, body)
        assert await oidc.userinfo("at-2") == {}
    provider.discovery = {"userinfo_endpoint": None}
    assert await client(provider).userinfo("at-3") == {}
    assert len(provider.requests["/userinfo"]) == 4


async def test_discovery_and_keys_are_asked_for_as_json(provider):
    provider.add("k1")
    await client(provider).verify(provider.token("k1"), "gateway")
    for path in ("/.well-known/openid-configuration", "/jwks"):
        assert [h["accept"] for h in provider.fetched[path]] == ["application/json"]


def padded(provider: Provider, size: int) -> dict[str, str]:
    """A discovery document of exactly `size` bytes as the provider sends it."""
    base = {"issuer": provider.url, "jwks_uri": f"{provider.url}/jwks",
            "authorization_endpoint": f"{provider.url}/authorize",
            "token_endpoint": f"{provider.url}/token",
            "userinfo_endpoint": f"{provider.url}/userinfo", "pad": ""}  # fmt: skip
    return {"pad": "x" * (size - len(json.dumps(base)))}


async def test_an_answer_is_read_up_to_a_mebibyte(provider):
    provider.discovery = padded(provider, 1 << 20)
    assert len((await client(provider).metadata())["pad"]) > 1000
    provider.discovery = padded(provider, (1 << 20) + 1)  # cut short: not JSON
    with pytest.raises(
        SignInFailed, match=r"discovery document is unavailable \(Expecting ',' delimiter"
    ):
        await client(provider).metadata()
    # The token endpoint's answer likewise.
    provider.discovery = {}
    tokens = {"id_token": "eyJ.a.b", "pad": ""}
    tokens["pad"] = "x" * ((1 << 20) - len(json.dumps(tokens)))
    provider.answers["/token"] = (200, json.dumps(tokens).encode())
    assert (await client(provider).exchange("c", "v", "https://gw/cb"))["id_token"] == "eyJ.a.b"
    provider.answers["/token"] = (200, json.dumps(tokens).encode() + b" ")
    assert (await client(provider).exchange("c", "v", "https://gw/cb"))["id_token"] == "eyJ.a.b"
    tokens["pad"] += "x"
    provider.answers["/token"] = (200, json.dumps(tokens).encode())
    with pytest.raises(SignInFailed, match=r"refused the code \(JSONDecodeError\)"):
        await client(provider).exchange("c", "v", "https://gw/cb")


async def test_a_provider_that_never_answers_times_out(provider, monkeypatch):
    monkeypatch.setattr(oidc_module, "FETCH_TIMEOUT_S", 0.2)
    with socket.socket() as silent:  # accepts connections (its backlog), answers nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        quiet = OidcProvider(OidcConfig(issuer=url, client_id="gateway"), None)
        with pytest.raises(SignInFailed, match="discovery document is unavailable"):
            await asyncio.wait_for(quiet.metadata(), 10)
        provider.discovery = {"token_endpoint": f"{url}/token"}
        with pytest.raises(SignInFailed, match="the provider refused the code"):
            await asyncio.wait_for(client(provider).exchange("c", "v", "https://gw/cb"), 10)


def test_a_bearer_token_refused_names_the_header():
    refusal = invalid_bearer("the token has expired")
    assert refusal.message == "the Bearer token is not accepted: the token has expired"
    assert dict(refusal.metadata) == {"header": "authorization"}
