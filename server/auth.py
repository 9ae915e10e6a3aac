"""Admission: who is calling (their key) and whether their rate limit lets them in."""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Mapping
from dataclasses import dataclass

from server.config import KeyConfig, KeyKind
from server.errors import RateLimited, Unauthenticated
from server.ratelimit import SlidingWindowLimiter

# Interface A takes API keys, interface B router keys; one never stands for the other.
HEADER: dict[KeyKind, str] = {"api": "x-api-key", "router": "x-router-key"}


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    kind: KeyKind
    requests_per_minute: int | None


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class KeyRing:
    """Keys from the config, held only as SHA-256 digests."""

    def __init__(self, keys: list[KeyConfig]) -> None:
        self._keys = [(_digest(k.secret), Principal(k.name, k.kind, k.requests_per_minute)) for k in keys]

    def identify(self, metadata: Mapping[str, str], kind: KeyKind) -> Principal:
        header = HEADER[kind]
        secret = metadata.get(header)
        if not secret:
            raise Unauthenticated(f"missing {header} header", {"header": header})
        digest = _digest(secret)
        found = None
        # Compares against every key, in constant time each, without stopping early.
        for known, principal in self._keys:
            if hmac.compare_digest(known, digest) and principal.kind == kind:
                found = principal
        if found is None:
            raise Unauthenticated(f"invalid {header}", {"header": header})
        return found


class Admission:
    """Authenticates a call and charges it to its key's rate limit."""

    def __init__(self, keys: KeyRing, limiter: SlidingWindowLimiter) -> None:
        self.keys = keys
        self.limiter = limiter

    def admit(
        self, metadata: Mapping[str, str], kind: KeyKind, response_metadata: dict[str, str]
    ) -> Principal:
        principal = self.keys.identify(metadata, kind)
        if principal.requests_per_minute is None:
            return principal
        decision = self.limiter.hit(principal.name, principal.requests_per_minute)
        response_metadata.update(decision.headers())
        if not decision.allowed:
            wait = max(1, math.ceil(decision.retry_after_s))
            response_metadata["retry-after"] = str(wait)
            raise RateLimited(
                f"rate limit of {principal.requests_per_minute} requests per minute "
                f"exceeded for key {principal.name!r}; retry after {wait}s",
                {"key": principal.name, "limit": str(principal.requests_per_minute)},
                retry_after_s=wait,
            )
        return principal
