"""The company's OpenID provider, as the admin sign-in speaks to it: discovery, the
authorization URL (code flow with PKCE S256, state and nonce), the code exchange, and
JWT checks (ID tokens and Bearer access tokens) against its JWKS.

The discovery document is read once (again after a failure). The JWKS is kept for
JWKS_TTL_S and fetched again, once, when a token names a key it does not hold (a
provider rotating keys); a JWKS of one key signs a token that names no key (and, when
that key has no `kid` itself, every token). Only
asymmetric algorithms are accepted, each with a key of its own kind.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import jwt

from server.base.config import OidcConfig
from server.base.errors import Unauthenticated

JWKS_TTL_S = 300.0
FETCH_TIMEOUT_S = 10.0
# Seconds of clock difference with the provider a token's times tolerate.
LEEWAY_S = 60
ALGORITHMS = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}


def pkce_pair() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class SignInFailed(Exception):
    """A sign-in the provider or its tokens did not bear out; the message says why
    (safe to log and to record: no token in it)."""


class OidcProvider:
    def __init__(self, config: OidcConfig, client_secret: str | None) -> None:
        self.config = config
        self.client_secret = client_secret
        self.issuer = config.issuer.rstrip("/")
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched = -JWKS_TTL_S
        self._lock = asyncio.Lock()
        # How many times the JWKS was fetched (operators and tests read it).
        self.jwks_fetches = 0

    async def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            url = f"{self.issuer}/.well-known/openid-configuration"
            try:
                document = await asyncio.to_thread(_get_json, url)
            except (OSError, ValueError) as exc:
                raise SignInFailed(
                    f"the provider's discovery document is unavailable ({exc})"
                ) from None
            if (
                not isinstance(document, dict)
                or document.get("issuer", "").rstrip("/") != self.issuer
            ):
                raise SignInFailed("the provider's discovery document names another issuer")
            for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(document.get(field), str):
                    raise SignInFailed(f"the provider's discovery document has no {field}")
            self._metadata = document
        return self._metadata

    async def authorize_url(self, redirect_uri: str, state: str, nonce: str, challenge: str) -> str:
        endpoint = (await self.metadata())["authorization_endpoint"]
        query = urllib.parse.urlencode({
            "response_type": "code", "client_id": self.config.client_id,
            "redirect_uri": redirect_uri, "scope": " ".join(self.config.scopes),
            "state": state, "nonce": nonce, "code_challenge": challenge,
            "code_challenge_method": "S256",
        })  # fmt: skip
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    async def exchange(self, code: str, verifier: str, redirect_uri: str) -> dict[str, Any]:
        """The provider's tokens for an authorization code."""
        endpoint = (await self.metadata())["token_endpoint"]
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "code_verifier": verifier, "client_id": self.config.client_id}  # fmt: skip
        headers = {
            "content-type": "application/x-www-form-urlencoded",
            "accept": "application/json",
        }
        if self.client_secret:
            pair = f"{_quote(self.config.client_id)}:{_quote(self.client_secret)}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        try:
            answer = await asyncio.to_thread(_post_form, endpoint, form, headers)
        except (OSError, ValueError) as exc:
            raise SignInFailed(f"the provider refused the code ({_reason(exc)})") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("id_token"), str):
            raise SignInFailed("the provider's token answer has no id_token")
        return answer

    async def userinfo(self, access_token: str) -> dict[str, Any]:
        endpoint = (await self.metadata()).get("userinfo_endpoint")
        if not isinstance(endpoint, str) or not access_token:
            return {}
        headers = {"authorization": f"Bearer {access_token}", "accept": "application/json"}
        try:
            answer = await asyncio.to_thread(_get_json, endpoint, headers)
        except (OSError, ValueError):
            return {}
        return answer if isinstance(answer, dict) else {}

    async def verify(self, token: str, audience: str, nonce: str | None = None) -> dict[str, Any]:
        """The claims of a JWT the provider signed for `audience`, not expired, with
        `nonce` when one is expected; SignInFailed otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise SignInFailed("the token is malformed") from None
        key = await self._key(header.get("kid"))
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS.get(key.key_type or "", ()):
            raise SignInFailed("the token is signed with an algorithm its key does not take")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=[algorithm], audience=audience, issuer=self.issuer,
                leeway=LEEWAY_S, options={"require": ["exp", "iss", "aud", "sub"]},
            )  # fmt: skip
        except jwt.ExpiredSignatureError:
            raise SignInFailed("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise SignInFailed("the token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise SignInFailed("the token is from another issuer") from None
        except jwt.PyJWTError as exc:
            raise SignInFailed(f"the token is not valid ({type(exc).__name__})") from None
        if nonce is not None and claims.get("nonce") != nonce:
            raise SignInFailed("the ID token's nonce is not this sign-in's")
        return claims

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        if time.monotonic() - self._fetched > JWKS_TTL_S:
            await self._refresh(self._fetched)
        key = self._find(kid)
        if key is None:
            await self._refresh(self._fetched)  # a key rotated in: fetched again, once
            key = self._find(kid)
        if key is None:
            raise SignInFailed("the token is signed by a key the provider does not publish")
        return key

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid in self._keys:
            return self._keys[kid]
        if len(self._keys) == 1 and (kid is None or None in self._keys):
            # One key: it signs a token that names none, and, itself without a kid,
            # every token.
            return next(iter(self._keys.values()))
        return None

    async def _refresh(self, seen: float) -> None:
        async with self._lock:
            if self._fetched != seen:
                return  # another call fetched while this one waited
            uri = (await self.metadata())["jwks_uri"]
            try:
                document = await asyncio.to_thread(_get_json, uri)
            except (OSError, ValueError) as exc:
                raise SignInFailed(f"the provider's keys are unavailable ({exc})") from None
            keys: dict[str | None, jwt.PyJWK] = {}
            for entry in document.get("keys", []) if isinstance(document, dict) else []:
                try:
                    keys[entry.get("kid")] = jwt.PyJWK(entry)
                except jwt.PyJWTError:
                    continue  # a key of a kind this gateway cannot use
            self._keys, self._fetched = keys, time.monotonic()
            self.jwks_fetches += 1


def invalid_bearer(why: str) -> Unauthenticated:
    return Unauthenticated(f"the Bearer token is not accepted: {why}", {"header": "authorization"})


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _reason(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    return type(exc).__name__


def _get_json(url: str, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, headers=headers or {"accept": "application/json"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as answer:
        return json.loads(answer.read(1 << 20))


def _post_form(url: str, form: dict[str, str], headers: dict[str, str]) -> Any:
    body = urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as answer:
        return json.loads(answer.read(1 << 20))
