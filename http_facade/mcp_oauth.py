"""`/mcp` as an OAuth 2.1 resource server (`mcp.oauth`): Bearer JWTs from the issuer,
their signature checked against its JWKS, their issuer, audience (the MCP URL) and
expiry by PyJWT.

The JWKS is fetched off the event loop, kept for JWKS_TTL_S, and fetched again (at
most every JWKS_RETRY_S) when a token names a key it does not hold. A JWKS of one key
without a `kid` signs every token. The token's `key_claim` names, by its id, the gateway
key whose grants, limits and budget apply. The scopes the metadata advertises are the
ones a token needs: each must be in its `scope` claim (or `scp`), else 403
`insufficient_scope`.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import jwt

from server.base.config import McpOAuthConfig
from server.base.errors import PermissionDenied, Unauthenticated

JWKS_TTL_S = 300.0
JWKS_RETRY_S = 30.0
FETCH_TIMEOUT_S = 5.0
# Signature algorithms a token may use, by the kind of key that checks them: asymmetric
# ones only (a shared secret cannot be published in a JWKS).
ALGORITHMS = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC": ("ES256", "ES384", "ES512"),
    "OKP": ("EdDSA",),
}
WELL_KNOWN = "/.well-known/oauth-protected-resource"
INSUFFICIENT_SCOPE = "insufficient_scope"


def metadata_url(resource: str) -> str:
    """Where the metadata of `resource` is published (RFC 9728: the well-known path
    between the host and the resource's path)."""
    url = urlsplit(resource)
    return f"{url.scheme}://{url.netloc}{WELL_KNOWN}{url.path.rstrip('/')}"


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("ey")


class OAuth:
    def __init__(self, config: McpOAuthConfig) -> None:
        self.config = config
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched = -JWKS_TTL_S
        self._lock = asyncio.Lock()

    def metadata(self, resource: str) -> dict[str, Any]:
        """The protected-resource metadata document of `resource`."""
        document: dict[str, Any] = {
            "resource": resource,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
        }
        if self.config.scopes:
            document["scopes_supported"] = self.config.scopes
        return document

    def challenge(self, resource: str, error: str | None = None) -> str:
        """The WWW-Authenticate header of a 401, or with `insufficient_scope` of a 403
        (RFC 6750: the scopes needed named)."""
        value = f'Bearer resource_metadata="{metadata_url(resource)}"'
        if error == INSUFFICIENT_SCOPE:
            value += f', scope="{" ".join(self.config.scopes)}"'
        return value + (f', error="{error}"' if error else "")

    async def subject(self, token: str) -> str:
        """The id of the gateway key a valid token names; Unauthenticated otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _invalid("malformed") from None
        key = await self._key(header.get("kid"))
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS.get(key.key_type or "", ()):
            raise _invalid("signed with an algorithm its key does not take")
        try:
            claims = jwt.decode(
                token, key.key, algorithms=[algorithm], audience=self.config.audience,
                issuer=self.config.issuer, options={"require": ["exp", "iss", "aud"]},
            )  # fmt: skip
        except jwt.ExpiredSignatureError:
            raise _invalid("expired") from None
        except jwt.InvalidAudienceError:
            raise _invalid("for another audience") from None
        except jwt.InvalidIssuerError:
            raise _invalid("from another issuer") from None
        except jwt.PyJWTError:
            raise _invalid("not valid") from None
        name = claims.get(self.config.key_claim)
        if not isinstance(name, str) or not name:
            raise _invalid(f"without a {self.config.key_claim!r} claim")
        granted = _scopes(claims)
        missing = [s for s in self.config.scopes if s not in granted]
        if missing:
            raise InsufficientScope(
                f"the Bearer token lacks the scope {' '.join(missing)!r} this resource needs",
                {"scope": " ".join(missing)},
            )
        return name

    async def _key(self, kid: str | None) -> jwt.PyJWK:
        now = time.monotonic()
        stale = now - self._fetched > JWKS_TTL_S
        if stale or (self._find(kid) is None and now - self._fetched > JWKS_RETRY_S):
            async with self._lock:
                if time.monotonic() - self._fetched > min(JWKS_RETRY_S, JWKS_TTL_S):
                    await self._fetch()
        key = self._find(kid)
        if key is None:
            raise _invalid("signed by a key the issuer does not publish")
        return key

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid in self._keys:
            return self._keys[kid]
        if len(self._keys) == 1 and None in self._keys:
            return self._keys[None]  # one key without a kid signs everything
        return None

    async def _fetch(self) -> None:
        try:
            document = await asyncio.to_thread(_get_json, self.config.jwks_uri)
            keys = {}
            for entry in document.get("keys", []):
                try:
                    keys[entry.get("kid")] = jwt.PyJWK(entry)
                except jwt.PyJWTError:
                    continue  # a key of a kind this gateway cannot use
        except (OSError, ValueError, AttributeError) as exc:
            raise Unauthenticated(
                f"the token cannot be checked now: the issuer's keys are unavailable ({exc})",
                {"header": "authorization"},
            ) from None
        self._keys, self._fetched = keys, time.monotonic()


class InsufficientScope(PermissionDenied):
    """A valid token without a scope the resource needs (403, RFC 6750)."""

    reason = "INSUFFICIENT_SCOPE"


def _scopes(claims: dict[str, Any]) -> set[str]:
    """The scopes a token grants: its `scope` claim (space-separated, RFC 9068), else
    `scp` (a list, or a string, as some issuers write it)."""
    value = claims.get("scope") or claims.get("scp")
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list):
        return {s for s in value if isinstance(s, str)}
    return set()


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:
        return json.loads(answer.read(1 << 20))


def _invalid(why: str) -> Unauthenticated:
    return Unauthenticated(f"the Bearer token is {why}", {"header": "authorization"})
