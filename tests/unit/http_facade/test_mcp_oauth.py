"""The OAuth resource-server checks, against a JWKS read from a file URL (the same
fetch as over HTTP): each token that does not hold is refused with its reason."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from http_facade import mcp_oauth
from http_facade.mcp_oauth import InsufficientScope, OAuth, looks_like_jwt, metadata_url
from server.base.config import McpOAuthConfig
from server.base.errors import Unauthenticated

AUDIENCE = "https://gw.example/mcp"
ISSUER = "https://issuer.example"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def jwk(key, kid: str | None) -> dict:
    algorithm = (
        jwt.algorithms.RSAAlgorithm
        if isinstance(key, rsa.RSAPrivateKey)
        else jwt.algorithms.ECAlgorithm
    )
    entry = json.loads(algorithm.to_jwk(key.public_key()))
    if kid is not None:
        entry["kid"] = kid
    return entry


def token(key=RSA_KEY, kid: str | None = None, algorithm: str = "RS256", **claims) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "bob", "exp": now + 60, **claims}
    headers = {"kid": kid} if kid is not None else None
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=algorithm,
                      headers=headers)  # fmt: skip


def oauth(tmp_path, *keys: dict, **changes) -> OAuth:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": list(keys)}))
    settings = {"issuer": ISSUER, "jwks_uri": path.as_uri(), "audience": AUDIENCE, **changes}
    return OAuth(McpOAuthConfig(**settings))


def test_where_the_metadata_is_and_what_it_says() -> None:
    assert metadata_url("https://gw.example/mcp") == (
        "https://gw.example/.well-known/oauth-protected-resource/mcp"
    )
    assert metadata_url("http://127.0.0.1:8080/mcp/files/") == (
        "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp/files"
    )
    assert (
        metadata_url("https://gw.example")
        == "https://gw.example/.well-known/oauth-protected-resource"
    )
    checks = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri="x", audience=AUDIENCE))
    assert checks.metadata(AUDIENCE) == {"resource": AUDIENCE, "authorization_servers": [ISSUER],
                                         "bearer_methods_supported": ["header"]}  # fmt: skip
    assert checks.challenge(AUDIENCE) == (
        'Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"'
    )
    scoped = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri="x", audience=AUDIENCE,
                                  scopes=["tools", "read"]))  # fmt: skip
    assert scoped.metadata(AUDIENCE)["scopes_supported"] == ["tools", "read"]
    assert checks.challenge(AUDIENCE, "invalid_token").endswith(', error="invalid_token"')
    assert looks_like_jwt(token()) and not looks_like_jwt("gw-api-abc.def.ghi")
    assert not looks_like_jwt("eyJabc.def")


async def test_a_valid_token_names_its_key(tmp_path) -> None:
    assert await oauth(tmp_path, jwk(RSA_KEY, None)).subject(token()) == "bob"
    keyed = oauth(tmp_path, jwk(RSA_KEY, "k1"), jwk(EC_KEY, "k2"), key_claim="client_id")
    assert await keyed.subject(token(EC_KEY, "k2", "ES256", client_id="svc")) == "svc"
    assert await keyed.subject(token(RSA_KEY, "k1", client_id="svc2")) == "svc2"


@pytest.mark.parametrize(
    ("made", "why"),
    [
        (lambda: "eyJhbGciOi.not.a-token", "the Bearer token is malformed"),
        (lambda: token(exp=int(time.time()) - 10), "the Bearer token is expired"),
        (lambda: token(aud="https://elsewhere/mcp"), "the Bearer token is for another audience"),
        (lambda: token(iss="https://evil.example"), "the Bearer token is from another issuer"),
        (lambda: token(exp=None), "the Bearer token is not valid"),
        (lambda: token(sub=None), "the Bearer token is without a 'sub' claim"),
        (lambda: token(sub=""), "the Bearer token is without a 'sub' claim"),
        (lambda: token(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
         "the Bearer token is not valid"),
        (lambda: token(EC_KEY, algorithm="ES256"),
         "the Bearer token is signed with an algorithm its key does not take"),
        (lambda: token(algorithm="RS512"), None),
        (lambda: jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "bob",
                             "exp": int(time.time()) + 60}, None, algorithm="none"),
         "the Bearer token is signed with an algorithm its key does not take"),
    ],
)  # fmt: skip
async def test_tokens_that_do_not_hold(tmp_path, made, why) -> None:
    checks = oauth(tmp_path, jwk(RSA_KEY, None))
    if why is None:
        assert await checks.subject(made()) == "bob"
        return
    with pytest.raises(Unauthenticated) as refused:
        await checks.subject(made())
    assert refused.value.message == why
    assert refused.value.metadata == {"header": "authorization"}


async def test_keys_are_fetched_again_for_a_kid_not_held_but_not_on_every_token(
    tmp_path, monkeypatch
) -> None:
    checks = oauth(tmp_path, jwk(RSA_KEY, "old"))
    fetches = []
    real = mcp_oauth._get_json
    monkeypatch.setattr(mcp_oauth, "_get_json", lambda url: fetches.append(url) or real(url))
    assert await checks.subject(token(kid="old")) == "bob"
    assert await checks.subject(token(kid="old")) == "bob"
    assert len(fetches) == 1
    # The issuer rotates: a new kid is fetched at once the first time past the retry
    # interval, and a kid it still lacks is not fetched again within it.
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [jwk(EC_KEY, "new")]}))
    with pytest.raises(Unauthenticated) as unknown:
        await checks.subject(token(EC_KEY, "new", "ES256"))
    assert (
        unknown.value.message == "the Bearer token is signed by a key the issuer does not publish"
    )
    assert len(fetches) == 1  # within JWKS_RETRY_S of the last fetch
    checks._fetched -= mcp_oauth.JWKS_RETRY_S + 1
    assert await checks.subject(token(EC_KEY, "new", "ES256")) == "bob"
    assert len(fetches) == 2
    with pytest.raises(Unauthenticated):
        await checks.subject(token(kid="old"))  # rotated away
    assert len(fetches) == 2
    checks._fetched -= mcp_oauth.JWKS_TTL_S + 1
    await checks.subject(token(EC_KEY, "new", "ES256"))
    assert len(fetches) == 3  # past its TTL the set is fetched again


async def test_an_issuer_whose_keys_cannot_be_read(tmp_path) -> None:
    checks = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri=(tmp_path / "missing.json").as_uri(),
                                  audience=AUDIENCE))  # fmt: skip
    with pytest.raises(Unauthenticated) as refused:
        await checks.subject(token())
    assert refused.value.message.startswith(
        "the token cannot be checked now: the issuer's keys are unavailable"
    )
    assert refused.value.metadata == {"header": "authorization"}
    (tmp_path / "bad.json").write_text('{"keys": [{"kty": "nope"}, 5]}')
    odd = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri=(tmp_path / "bad.json").as_uri(),
                               audience=AUDIENCE))  # fmt: skip
    with pytest.raises(Unauthenticated):
        await odd.subject(token())


def test_the_challenge_names_every_scope_needed() -> None:
    scoped = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri="x", audience=AUDIENCE,
                                  scopes=["tools", "read"]))  # fmt: skip
    assert scoped.challenge(AUDIENCE, "insufficient_scope") == (
        'Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp", '
        'scope="tools read", error="insufficient_scope"'
    )
    # Only the trailing slash leaves the path, whatever it ends with.
    assert metadata_url("https://gw.example/mcp/BOX/") == (
        "https://gw.example/.well-known/oauth-protected-resource/mcp/BOX"
    )


async def test_a_token_lacking_scopes_is_told_each_one(tmp_path) -> None:
    checks = oauth(tmp_path, jwk(RSA_KEY, None), scopes=["tools", "read", "write"])
    with pytest.raises(InsufficientScope) as lacking:
        await checks.subject(token(scope="read"))
    assert lacking.value.message == (
        "the Bearer token lacks the scope 'tools write' this resource needs"
    )
    assert lacking.value.metadata == {"scope": "tools write"}
    assert await checks.subject(token(scope="write read tools")) == "bob"
    assert await checks.subject(token(scp=["tools", "read", "write", 5])) == "bob"


async def test_which_key_signs_what(tmp_path) -> None:
    # A set of two keys, one without a kid: a token naming another kid is not its.
    two = oauth(tmp_path, jwk(RSA_KEY, None), jwk(EC_KEY, "k2"))
    with pytest.raises(Unauthenticated) as unknown:
        await two.subject(token(kid="zzz"))
    assert (
        unknown.value.message == "the Bearer token is signed by a key the issuer does not publish"
    )
    assert await two.subject(token()) == "bob"
    # A shared secret in the set signs nothing (and is no failure of the check itself).
    secret = {"kty": "oct", "kid": "s", "k": "c2VjcmV0LWxvbmctZW5vdWdoLWZvci1oczI1Ng"}
    shared = oauth(tmp_path, secret)
    hs = token("secret-long-enough-for-hs256-xxxxxxxx", "s", "HS256")
    with pytest.raises(Unauthenticated) as refused:
        await shared.subject(hs)
    assert refused.value.message == (
        "the Bearer token is signed with an algorithm its key does not take"
    )


@pytest.mark.parametrize(
    "document",
    [{}, {"keys": [{"kty": "nope"}, jwk(EC_KEY, "k2")]}],
)
async def test_a_set_without_keys_or_with_unusable_ones_first(tmp_path, document) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(document))
    checks = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri=path.as_uri(), audience=AUDIENCE))
    made = token(EC_KEY, "k2", "ES256")
    if not document:
        with pytest.raises(Unauthenticated) as refused:
            await checks.subject(made)
        assert refused.value.message.endswith("signed by a key the issuer does not publish")
    else:
        assert await checks.subject(made) == "bob"


async def test_kept_keys_are_not_fetched_again_before_their_time(tmp_path, monkeypatch) -> None:
    checks = oauth(tmp_path, jwk(RSA_KEY, "old"))
    fetches = []
    real = mcp_oauth._get_json
    monkeypatch.setattr(mcp_oauth, "_get_json", lambda url: fetches.append(url) or real(url))
    # Two callers at once on an empty set: one fetch, the other waits and uses it.
    assert await asyncio.gather(checks.subject(token(kid="old")),
                                checks.subject(token(kid="old"))) == ["bob", "bob"]  # fmt: skip
    assert len(fetches) == 1
    # Past the retry interval but within the set's time: a kid it holds fetches nothing.
    checks._fetched -= mcp_oauth.JWKS_RETRY_S + 1
    assert await checks.subject(token(kid="old")) == "bob"
    assert len(fetches) == 1


async def test_a_set_too_large_is_not_read(tmp_path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"pad": "x" * (3 << 19), "keys": [jwk(RSA_KEY, None)]}))
    checks = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri=path.as_uri(), audience=AUDIENCE))
    with pytest.raises(Unauthenticated) as refused:
        await checks.subject(token())
    assert refused.value.message.startswith("the token cannot be checked now")


async def test_an_issuer_that_never_answers_times_out(monkeypatch) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setattr(mcp_oauth, "FETCH_TIMEOUT_S", 0.2)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/jwks"
        checks = OAuth(McpOAuthConfig(issuer=ISSUER, jwks_uri=url, audience=AUDIENCE))
        with pytest.raises(Unauthenticated) as refused:
            await asyncio.wait_for(checks.subject(token()), 10)
        assert refused.value.message.startswith("the token cannot be checked now")
