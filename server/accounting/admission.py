"""Admission: who is calling (their key) and whether their rate limits let them in.

Keys come from the config file (for development) and from the key store. Store
lookups are cached for `storage.key_cache_ttl_s` (about a second), so the database is
not in the request path, and a key revoked on any instance stops working on every
instance within that time.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import time
from collections.abc import Callable, Mapping

from server.accounting.guard import bounded
from server.accounting.ratelimit import Limiter
from server.base.caller import Principal
from server.base.config import KeyConfig, KeyKind
from server.base.errors import (
    PermissionDenied,
    RateLimited,
    StorageUnavailable,
    Unauthenticated,
)
from server.base.spans import span
from server.storage.keys import KeyRecord, KeyStore

log = logging.getLogger(__name__)

# Interface A takes API keys, interface B router keys, the admin API admin keys; no
# kind ever stands for another.
HEADER: dict[KeyKind, str] = {"api": "x-api-key", "router": "x-router-key", "admin": "x-admin-key"}
# SDKs send their key as `authorization: Bearer <key>` (the openai SDK's api_key,
# huggingface_hub's token). It is accepted wherever a key header is, for that place's
# kind only; a kind header, when sent, wins over it.
AUTHORIZATION = "authorization"
# Google's SDKs and Gemini CLI send an API key in their own header; it stands for
# `x-api-key` (a kind header wins over it, as over a Bearer token).
GOOGLE_KEY = "x-goog-api-key"
KEY_HEADERS = (*HEADER.values(), GOOGLE_KEY, AUTHORIZATION)
_BEARER = "bearer "
# A cached lookup is still used this long past its TTL when the key store is down.
STALE_GRACE_S = 60.0


def principal_of(key: KeyRecord) -> Principal:
    """The principal of a key from the key store."""
    return Principal(
        key.id, key.name, key.kind, key.owner, key.requests_per_minute,  # type: ignore[arg-type]
        key.tokens_per_minute, key.budget_usd, key.budget_period, mcp_tools=key.mcp_tools,
        team_id=key.team_id, org_id=key.scope.org_id, user_id=key.scope.user_id,
        levels=key.scope.levels, models=key.models,
    )  # fmt: skip


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class KeyRing:
    """Keys from the config, held only as SHA-256 digests."""

    def __init__(self, keys: list[KeyConfig]) -> None:
        self._keys = [(_digest(k.secret), Principal.of_config(k)) for k in keys]

    def by_id(self, key_id: str) -> Principal | None:
        return next((p for _, p in self._keys if p.key_id == key_id and p.kind != "admin"), None)

    def by_id_or_name(self, id_or_name: str) -> Principal | None:
        return next(
            (p for _, p in self._keys if id_or_name in (p.key_id, p.name) and p.kind != "admin"),
            None,
        )

    def find(self, digest: bytes, kind: KeyKind) -> Principal | None:
        found = None
        # Compares against every key, in constant time each, without stopping early.
        for known, principal in self._keys:
            if hmac.compare_digest(known, digest) and principal.kind == kind:
                found = principal
        return found


def presented(metadata: Mapping[str, str], kind: KeyKind) -> tuple[str, str]:
    """The header a key of `kind` came in and its secret ("" when none came): the kind's
    own header (or Google's, for an API key), else a Bearer token in `authorization`."""
    header = HEADER[kind]
    secret = metadata.get(header, "")
    if secret:
        return header, secret
    if kind == "api" and (secret := metadata.get(GOOGLE_KEY, "")):
        return GOOGLE_KEY, secret
    auth = metadata.get(AUTHORIZATION, "")
    if auth[: len(_BEARER)].lower() == _BEARER and auth[len(_BEARER) :].strip():
        return AUTHORIZATION, auth[len(_BEARER) :].strip()
    return header, ""


class KeyDirectory:
    """Config keys first, then the key store through a short-lived cache."""

    def __init__(
        self,
        store: KeyStore | None = None,
        ttl_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = 2.0,
    ) -> None:
        self.store = store
        self.ttl_s = ttl_s
        # The bound on one key store lookup (storage.timeout_s).
        self.timeout_s = timeout_s
        self._clock = clock
        # hex digest -> (fetched at, record or None when no such key)
        self._cache: dict[str, tuple[float, KeyRecord | None]] = {}
        self._inflight: dict[str, asyncio.Future[KeyRecord | None]] = {}
        # id -> (fetched at, record or None): the keys OAuth tokens name.
        self._by_id: dict[str, tuple[float, KeyRecord | None]] = {}

    async def identify(
        self, metadata: Mapping[str, str], kind: KeyKind, ring: KeyRing
    ) -> Principal:
        header, secret = presented(metadata, kind)
        if not secret:
            raise Unauthenticated(
                f"missing {header} header (or authorization: Bearer <key>)", {"header": header}
            )
        digest = _digest(secret)
        found = ring.find(digest, kind)
        if found is not None:
            return found
        record = await self._lookup(digest.hex()) if self.store is not None else None
        shown = "Bearer key" if header == AUTHORIZATION else header
        if record is None or record.kind != kind:
            raise Unauthenticated(f"invalid {shown}", {"header": header})
        if record.revoked:
            raise Unauthenticated(f"the {shown} has been revoked", {"header": header})
        if record.expired():
            raise Unauthenticated(f"the {shown} has expired", {"header": header})
        return principal_of(record)

    async def by_id(self, key_id: str, kind: KeyKind, ring: KeyRing) -> Principal:
        """The principal of the live key of `kind` with this id (the subject of an OAuth
        token); Unauthenticated when there is none. An id, never a name: a name may be
        taken again by a newer key, another team's even. Store lookups are cached as
        digests are."""
        found = ring.by_id(key_id)
        if found is None and self.store is not None:
            now = self._clock()
            cached = self._by_id.get(key_id)
            if cached is not None and now - cached[0] < self.ttl_s:
                record = cached[1]
            else:
                lookup = self.store.get(key_id)
                record = await bounded("key store", lookup, self.timeout_s)
                if record is not None and record.id != key_id:
                    record = None  # the store found a key by that name, not that id
                if len(self._by_id) > 10_000:
                    self._by_id.clear()
                self._by_id[key_id] = (now, record)
            live = record is not None and not record.revoked and not record.expired()
            found = principal_of(record) if live and record is not None else None
        if found is None or found.kind != kind:
            raise Unauthenticated(
                f"the token names no live {kind} key of this gateway by its id",
                {"header": AUTHORIZATION},
            )
        return found

    async def bearer_kind(self, metadata: Mapping[str, str], ring: KeyRing) -> KeyKind | None:
        """The kind of the key sent as a Bearer token alone, None when there is no such
        key (or a kind header was sent): for the one API that takes every kind."""
        if any(metadata.get(h) for h in HEADER.values()):
            return None
        header, secret = presented(metadata, "api")
        if header != AUTHORIZATION:
            return None
        digest = _digest(secret)
        for kind in HEADER:
            if ring.find(digest, kind) is not None:
                return kind
        record = await self._lookup(digest.hex()) if self.store is not None else None
        return record.kind if record is not None else None  # type: ignore[return-value]

    async def known(self, secret: str) -> bool:
        """Whether the key store holds `secret` (live, revoked or expired alike)."""
        return self.store is not None and await self._lookup(_digest(secret).hex()) is not None

    async def _lookup(self, digest: str) -> KeyRecord | None:
        now = self._clock()
        cached = self._cache.get(digest)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        pending = self._inflight.get(digest)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[KeyRecord | None] = asyncio.get_running_loop().create_future()
        self._inflight[digest] = future
        try:
            assert self.store is not None
            record = await bounded("key store", self.store.by_digest(digest), self.timeout_s)
        except StorageUnavailable as error:
            if cached is not None and now - cached[0] < self.ttl_s + STALE_GRACE_S:
                log.warning("key store unavailable; using a cached key lookup")
                record = cached[1]
            else:
                future.set_exception(error)
                future.exception()  # marks it retrieved when nobody else waits
                raise
        except BaseException:
            # This lookup was cancelled: the callers sharing it must not wait forever.
            future.set_exception(StorageUnavailable("the key store lookup was interrupted", {}))
            future.exception()
            raise
        else:
            self._cache[digest] = (self._clock(), record)
            if len(self._cache) > 100_000:
                self._cache.clear()
        finally:
            self._inflight.pop(digest, None)
        future.set_result(record)
        return record

    def forget(self, key_id: str) -> None:
        """Drops a key from this instance's cache at once (after a local revocation)."""
        for digest, (_, record) in list(self._cache.items()):
            if record is not None and record.id == key_id:
                del self._cache[digest]
        self._by_id.pop(key_id, None)


class Admission:
    """Authenticates a call and charges it to its key's rate limits."""

    def __init__(self, keys: KeyDirectory, limiter: Limiter) -> None:
        self.keys = keys
        self.limiter = limiter

    async def identify(
        self, metadata: Mapping[str, str], kind: KeyKind, ring: KeyRing
    ) -> Principal:
        with span("gateway.admission.identify"):
            return await self.keys.identify(metadata, kind, ring)

    async def limit(
        self,
        principal: Principal,
        tokens: int,
        ticket: str,
        response_metadata: dict[str, str],
        count: tuple[bool, bool] = (True, True),
    ) -> None:
        """Counts one request of up to `tokens` tokens against the key's rate limits and
        every level's above it (team, organisation, member); RateLimited naming the first
        level it does not fit. `count` says what is counted now, (the request, its
        tokens): a request counted before its tokens are known is counted again for its
        tokens alone. A level that refuses gives back the tokens the levels before it
        took (the request they counted stays counted)."""
        taken: list[str] = []
        for level, account, name, level_rpm, level_tpm in principal.rate_limits:
            rpm = level_rpm if count[0] else None
            tpm = level_tpm if count[1] else None
            if not (rpm or tpm):
                continue
            with span("gateway.admission.limit"):
                decision = await self.limiter.acquire(account, rpm, tpm, tokens, ticket)
            if level == "key" or not taken:
                response_metadata.update(decision.headers())
            if decision.allowed:
                if tpm:
                    taken.append(account)
                continue
            for earlier in taken:
                await self.limiter.settle(earlier, ticket, 0)
            # Whole seconds for Retry-After (at least 1, as HTTP has no smaller), and
            # the exact wait in retry-after-ms, which the OpenAI SDKs read first.
            wait = max(1, math.ceil(decision.retry_after_s))
            response_metadata["retry-after"] = str(wait)
            response_metadata["retry-after-ms"] = str(math.ceil(decision.retry_after_s * 1000))
            if rpm and decision.requests_remaining <= 0:
                what, limit = f"{rpm} requests", str(rpm)
            else:  # refused with requests left: the tokens ran out
                what, limit = f"{tpm} tokens", str(tpm)
            whose = f"key {name!r}" if level == "key" else f"{level} {name!r}"
            metadata = {"key": principal.name, "limit": limit}
            if level != "key":
                metadata |= {"level": level, level: account.partition(":")[2]}
            raise RateLimited(
                f"rate limit of {what} per minute exceeded for {whose}; retry after {wait}s",
                metadata,
                retry_after_s=decision.retry_after_s,
            )


def check_model(principal: Principal, model_id: str) -> None:
    """PermissionDenied when a level's model allowlist leaves `model_id` out."""
    refused = principal.model_refused_by(model_id)
    if refused is not None:
        level, name = refused
        raise PermissionDenied(
            f"model {model_id!r} is not allowed for {level} {name!r}",
            {"model": model_id, "level": level, level: name},
        )
