"""Vertex AI's wire, strict as the real service, and a Google OAuth token endpoint.

Both publishers want `Authorization: Bearer <token>` with a token the token endpoint
issued (or one the test gives); anything else is Vertex's 401 UNAUTHENTICATED.
- Google's models: the Gemini fake's checks (gemini.py) under
  /v1/projects/{project}/locations/{location}/publishers/google/models/; countTokens
  takes the contents themselves; `:predict` embeds `instances`.
- Anthropic's: `:rawPredict` / `:streamRawPredict` take a Messages body without
  `model` and with `anthropic_version` vertex-2023-10-16 (checked, then as the
  Anthropic fake checks a Messages body); `count-tokens:rawPredict` counts.

The token endpoint (`token_server`) takes the JWT-bearer grant of a service account: it
checks the assertion's RS256 signature with the account's public key (cryptography,
not google-auth), its issuer, audience, scope and times, and issues `ya29.fake-<n>` tokens
that live `lifetime_s`.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.faults import RawRequest, http_response, raw_upstream
from tests.support.upstreams.anthropic import AnthropicWire
from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.gemini import FIELDS, GeminiWire, error, invalid, unknown

PROJECT, LOCATION = "fake-project", "us-east5"
PREFIX = f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# The audience Google's token endpoint wants in an assertion: its own address, wherever
# the request is sent.
AUDIENCE = "https://oauth2.googleapis.com/token"


def unauthenticated() -> Refusal:
    message = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."  # noqa: E501
    return Refusal(401, error(401, "UNAUTHENTICATED", message), "bad token")


@dataclass
class Tokens:
    """Access tokens Vertex takes: those the token endpoint issued, and given ones."""

    valid: set[str] = field(default_factory=set)
    issued: list[str] = field(default_factory=list)
    # Of the tokens the endpoint issues, numbered from 1.
    prefix: str = "ya29.fake-"

    def check(self, headers: dict[str, str]) -> Refusal | None:
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth.removeprefix("Bearer ") not in self.valid:
            return unauthenticated()
        return None


@dataclass
class VertexGeminiWire(GeminiWire):
    tokens: Tokens = field(default_factory=Tokens)
    prefix: str = f"{PREFIX}/google/models/"
    # `:predict`'s token counts: the words of each input, this value instead, or none
    # (`statistics` False); `embeddings_missing` leaves predictions out.
    token_count: Any = None
    statistics: bool = True

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        if (refused := self.tokens.check(headers)) is not None:
            return refused
        if "x-goog-api-key" in headers:
            return invalid("API keys are not supported by this API.")
        model, method = self.method(path)
        if method == "countTokens":
            counted = FIELDS | {"model", "instances"}
            if extra := sorted(set(body) - counted):
                return unknown(extra[0])
            return super().checked(path.replace(":countTokens", ":generateContent"), body)
        if method == "predict":
            if set(body) - {"instances", "parameters"}:
                return unknown(sorted(set(body) - {"instances", "parameters"})[0])
            if not body.get("instances") or any(set(i) - {"content", "task_type", "title"}
                                                for i in body["instances"]):  # fmt: skip
                return invalid("instances: each needs a content")
            return None
        return super().checked(path, body)

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        if self.method(path)[1] == "predict":
            size = (body.get("parameters") or {}).get("outputDimensionality") or 8
            instances = body["instances"][: len(body["instances"]) - self.embeddings_missing]
            predictions = []
            for i in instances:
                embedding: dict[str, Any] = {"values": [len(i["content"]) / 10] * size}
                if self.statistics:
                    used = self.token_count
                    embedding["statistics"] = {
                        "token_count": len(i["content"].split()) if used is None else used,
                        "truncated": False,
                    }
                predictions.append({"embeddings": embedding})
            return {}, {"predictions": predictions}
        return super().unary(path, body, reply)


@dataclass
class VertexAnthropicWire(AnthropicWire):
    tokens: Tokens = field(default_factory=Tokens)
    model: str = "claude-fake@20250101"

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        if (refused := self.tokens.check(headers)) is not None:
            return refused
        as_anthropic = {"x-api-key": KEY, "anthropic-version": "2023-06-01",
                        **{k: v for k, v in headers.items() if k == "anthropic-beta"}}  # fmt: skip
        url = urlsplit(path).path
        if url == f"{PREFIX}/anthropic/models/count-tokens:rawPredict":
            return super().refusal("/v1/messages/count_tokens", as_anthropic, body)
        if url not in (self._path("rawPredict"), self._path("streamRawPredict")):
            return Refusal(404, error(404, "NOT_FOUND", f"Unknown path {url}"), "unknown path")
        if "model" in body:
            return invalid("model: Extra inputs are not permitted (the model is in the path)")
        if body.get("anthropic_version") != "vertex-2023-10-16":
            return invalid("anthropic_version: Field required (vertex-2023-10-16)")
        rest = {k: v for k, v in body.items() if k != "anthropic_version"}
        return super().refusal("/v1/messages", as_anthropic, {**rest, "model": self.model})

    def _path(self, method: str) -> str:
        return f"{PREFIX}/anthropic/models/{self.model}:{method}"

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return path.endswith(":streamRawPredict")

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        if "count-tokens" in path:
            return super().unary("/v1/messages/count_tokens", body, reply)
        return super().unary(path, {**body, "model": self.model}, reply)


def service_account(token_uri: str) -> tuple[dict[str, Any], rsa.RSAPrivateKey]:
    """A service-account key file's content (a fresh RSA key) and its private key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()  # fmt: skip
    info = {
        "type": "service_account", "project_id": PROJECT, "private_key_id": "kid-fake",
        "private_key": pem, "client_email": f"gateway@{PROJECT}.iam.gserviceaccount.com",
        "client_id": "1234567890", "token_uri": token_uri,
    }  # fmt: skip
    return info, key


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@dataclass
class TokenEndpoint:
    """Google's OAuth token endpoint for one service account."""

    tokens: Tokens
    lifetime_s: int = 3600
    public_key: Any = None
    email: str = ""
    url: str = ""
    problems: list[str] = field(default_factory=list)

    def grant(self, request: RawRequest) -> tuple[int, Any]:
        form = parse_qs(request.body.decode())
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return 400, {"error": "unsupported_grant_type"}
        head, claims, signature = form["assertion"][0].split(".")
        try:
            self.public_key.verify(
                _b64(signature), f"{head}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except Exception:  # cryptography's InvalidSignature
            self.problems.append("bad signature")
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        said = json.loads(_b64(claims))
        now = time.time()
        if said.get("iss") != self.email or said.get("aud") != AUDIENCE or SCOPE not in said.get(
            "scope", ""
        ) or not said.get("iat", 0) - 300 <= now <= said.get("exp", 0):  # fmt: skip
            self.problems.append("bad claims")
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT claims."}
        token = f"{self.tokens.prefix}{len(self.tokens.issued) + 1}"
        self.tokens.issued.append(token)
        self.tokens.valid.add(token)
        return 200, {"access_token": token, "expires_in": self.lifetime_s, "token_type": "Bearer"}


@asynccontextmanager
async def token_server(tokens: Tokens, lifetime_s: int = 3600) -> AsyncIterator[
    tuple[TokenEndpoint, dict[str, Any]]
]:  # fmt: skip
    """A token endpoint and the key file of the one service account it knows."""
    endpoint = TokenEndpoint(tokens, lifetime_s)

    async def handle(request: RawRequest, writer: Any) -> None:
        status, answer = endpoint.grant(request)
        writer.write(http_response(json.dumps(answer), status))
        await writer.drain()

    async with raw_upstream(handle) as server:
        endpoint.url = f"http://127.0.0.1:{server.port}/token"
        info, key = service_account(endpoint.url)
        endpoint.public_key, endpoint.email = key.public_key(), info["client_email"]
        yield endpoint, info
