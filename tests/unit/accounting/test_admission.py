"""Admission's key lookups over a real key store: which kind a Bearer key alone is
(config keys first, then stored keys; nothing when a kind header was sent or the key
is unknown), a stored key's principal, forgetting a revoked key's cached lookup, and
the config keys an admin may name by id or name (never an admin's)."""

from __future__ import annotations

import asyncio
import logging
import math
import time

import pytest

from server.accounting.admission import Admission, KeyDirectory, KeyRing
from server.accounting.ratelimit import BucketLimiter
from server.base.caller import Level, Principal
from server.base.config import KeyConfig, StorageConfig
from server.base.errors import RateLimited, StorageUnavailable, Unauthenticated
from server.storage import open_store

RING = KeyRing([
    KeyConfig(name="first-api", kind="api", secret="sk-first-api-000000000000"),
    KeyConfig(name="a-router", kind="router", secret="sk-a-router-0000000000000"),
    KeyConfig(name="the-admin", kind="admin", secret="sk-the-admin-000000000000"),
    KeyConfig(name="second-api", kind="api", secret="sk-second-api-00000000000"),
])  # fmt: skip


def bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


async def test_the_kind_of_a_bearer_key_alone(tmp_path):
    store = await open_store(StorageConfig(sqlite_path=str(tmp_path / "keys.db")))
    try:
        _, stored = await store.keys.create(kind="router", name="stored-router")
        keys = KeyDirectory(store.keys)
        kind = keys.bearer_kind
        assert await kind(bearer("sk-first-api-000000000000"), RING) == "api"
        assert await kind(bearer("sk-a-router-0000000000000"), RING) == "router"
        assert await kind(bearer("sk-the-admin-000000000000"), RING) == "admin"
        assert await kind(bearer(stored), RING) == "router"  # from the key store
        assert await kind(bearer("sk-nobody-0000000000000000"), RING) is None
        assert await kind({}, RING) is None
        # A kind header wins: the Bearer key says nothing then.
        for header in ("x-api-key", "x-router-key", "x-admin-key"):
            sent = {**bearer("sk-a-router-0000000000000"), header: "sk-first-api-000000000000"}
            assert await kind(sent, RING) is None, header
        # Without a key store only the config's keys are known.
        assert await KeyDirectory(None).bearer_kind(bearer(stored), RING) is None
    finally:
        await store.aclose()


def test_an_admin_names_config_keys_by_id_or_name_but_never_an_admin():
    second = RING.by_id_or_name("second-api")
    assert second is not None and second.name == "second-api"
    assert RING.by_id_or_name(second.key_id) == second
    router = RING.by_id_or_name("a-router")
    assert router is not None and router.kind == "router"
    assert RING.by_id_or_name("the-admin") is None
    assert RING.by_id_or_name("nobody") is None


async def test_a_stored_keys_principal_and_forgetting_it(tmp_path):
    store = await open_store(StorageConfig(sqlite_path=str(tmp_path / "keys.db")))
    try:
        one, secret = await store.keys.create(kind="api", name="one", owner="team-x",
                                              requests_per_minute=7)  # fmt: skip
        other, other_secret = await store.keys.create(kind="api", name="other")
        keys = KeyDirectory(store.keys, ttl_s=3600)
        principal = await keys.identify(bearer(secret), "api", RING)
        assert (principal.key_id, principal.name, principal.kind) == (one.id, "one", "api")
        assert (principal.owner, principal.requests_per_minute) == ("team-x", 7)
        await keys.identify(bearer(other_secret), "api", RING)
        assert await keys.bearer_kind(bearer("sk-nobody-0000000000000000"), RING) is None
        # Revoked here: its cached lookup goes at once, the others' stay cached.
        await store.keys.revoke(one.id)
        keys.forget(one.id)
        with pytest.raises(Unauthenticated, match="revoked"):
            await keys.identify(bearer(secret), "api", RING)
        await store.aclose()  # the store is gone: only cached lookups answer now
        assert (await keys.identify(bearer(other_secret), "api", RING)).name == "other"
    finally:
        await store.aclose()


async def test_each_refusal_names_the_header_it_read(tmp_path):
    store = await open_store(StorageConfig(sqlite_path=str(tmp_path / "keys.db")))
    try:
        gone, revoked = await store.keys.create(kind="api", name="gone")
        await store.keys.revoke(gone.id)
        _, expired = await store.keys.create(kind="api", name="old", expires_at=time.time() - 1)
        _, router = await store.keys.create(kind="router", name="r")
        keys = KeyDirectory(store.keys)

        async def refused(metadata: dict[str, str], directory: KeyDirectory = keys) -> tuple:
            with pytest.raises(Unauthenticated) as raised:
                await directory.identify(metadata, "api", RING)
            return raised.value.message, raised.value.metadata

        header = {"header": "x-api-key"}
        assert await refused({}) == (
            "missing x-api-key header (or authorization: Bearer <key>)",
            header,
        )
        assert await refused({"x-api-key": "sk-nobody-0000000000000000"}) == (
            "invalid x-api-key",
            header,
        )
        assert await refused({"x-api-key": router}) == ("invalid x-api-key", header)
        assert await refused({"x-api-key": revoked}) == ("the x-api-key has been revoked", header)
        assert await refused({"x-api-key": expired}) == ("the x-api-key has expired", header)
        # A Bearer key is named as one; without a key store only config keys are known.
        assert await refused(bearer(revoked)) == (
            "the Bearer key has been revoked",
            {"header": "authorization"},
        )
        assert await refused(bearer(revoked), KeyDirectory(None)) == (
            "invalid Bearer key",
            {"header": "authorization"},
        )
    finally:
        await store.aclose()


class CountingKeys:
    """The real key store, counting its lookups."""

    def __init__(self, keys) -> None:  # type: ignore[no-untyped-def]
        self.keys, self.lookups = keys, 0

    async def by_digest(self, digest: str):  # type: ignore[no-untyped-def]
        self.lookups += 1
        await asyncio.sleep(0.05)  # long enough for the others to arrive
        return await self.keys.by_digest(digest)


async def test_lookups_are_cached_for_the_ttl_shared_while_in_flight_and_stale_only_in_grace(
    tmp_path, caplog
):
    store = await open_store(StorageConfig(sqlite_path=str(tmp_path / "keys.db")))
    now = [1000.0]
    try:
        record, secret = await store.keys.create(kind="api", name="cached")
        counting = CountingKeys(store.keys)
        keys = KeyDirectory(counting, ttl_s=10, clock=lambda: now[0])  # type: ignore[arg-type]
        # Twenty callers at once: one lookup, shared.
        found = await asyncio.gather(
            *(keys.identify(bearer(secret), "api", RING) for _ in range(20))
        )
        assert {p.name for p in found} == {"cached"} and counting.lookups == 1
        await store.keys.revoke(record.id)
        now[0] = 1009.9  # within the TTL: the cached lookup answers (revoked elsewhere)
        assert (await keys.identify(bearer(secret), "api", RING)).name == "cached"
        assert counting.lookups == 1
        now[0] = 1010.0  # the TTL is over: asked again, and the revocation is seen
        with pytest.raises(Unauthenticated, match="revoked"):
            await keys.identify(bearer(secret), "api", RING)
        assert counting.lookups == 2
        _, other = await store.keys.create(kind="api", name="other")
        await keys.identify(bearer(other), "api", RING)  # cached at 1010
        await store.db.close()  # the key store goes down
        now[0] = 1010.0 + 10 + 59.9  # past the TTL, within the grace: the stale lookup
        with caplog.at_level(logging.WARNING, logger="server.accounting.admission"):
            assert (await keys.identify(bearer(other), "api", RING)).name == "other"
        said = [r.getMessage() for r in caplog.records if r.name.endswith("admission")]
        assert said == ["key store unavailable; using a cached key lookup"]
        now[0] = 1010.0 + 10 + 60  # past the grace: the outage shows
        with pytest.raises(StorageUnavailable, match="^the key store is unavailable"):
            await keys.identify(bearer(other), "api", RING)
    finally:
        await store.aclose()


async def test_callers_sharing_a_lookup_that_is_cancelled_are_told(tmp_path):
    store = await open_store(StorageConfig(sqlite_path=str(tmp_path / "keys.db")))
    try:
        _, secret = await store.keys.create(kind="api", name="shared")
        keys = KeyDirectory(CountingKeys(store.keys))  # type: ignore[arg-type]
        first = asyncio.create_task(keys.identify(bearer(secret), "api", RING))
        await asyncio.sleep(0.01)  # its lookup is in flight
        second = asyncio.create_task(keys.identify(bearer(secret), "api", RING))
        await asyncio.sleep(0.01)
        first.cancel()
        with pytest.raises(StorageUnavailable) as told:
            await asyncio.wait_for(second, 2)  # told, not left waiting
        assert told.value.message == "the key store lookup was interrupted"
        assert told.value.metadata == {}
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        await store.aclose()


async def refusal(principal: Principal, tokens: list[int]) -> tuple[RateLimited, dict[str, str]]:
    """The refusal of the last of requests of these sizes, and the headers it sets."""
    admission = Admission(KeyDirectory(None), BucketLimiter(window_s=60))
    for i, size in enumerate(tokens[:-1]):
        await admission.limit(principal, size, f"t{i}", {})
    headers: dict[str, str] = {}
    with pytest.raises(RateLimited) as refused:
        await admission.limit(principal, tokens[-1], "last", headers)
    return refused.value, headers


@pytest.mark.parametrize(
    "rpm, tpm, tokens, what, limit",
    [
        (2, 100, [10, 10, 10], "2 requests", "2"),  # the requests ran out, tokens did not
        (None, 100, [60, 50], "100 tokens", "100"),
        (2, 100, [60, 50], "100 tokens", "100"),  # a request left: the tokens ran out
        (1, 100, [200, 200], "1 requests", "1"),  # both ran out: the requests are named
    ],
)
async def test_a_refusal_names_the_limit_it_hit(rpm, tpm, tokens, what, limit):
    key = Principal("k1", "team-a", "api", requests_per_minute=rpm, tokens_per_minute=tpm)
    error, headers = await refusal(key, tokens)
    assert error.message.startswith(
        f"rate limit of {what} per minute exceeded for key 'team-a'; retry after "
    )
    assert error.metadata == {"key": "team-a", "limit": limit}
    assert headers["retry-after"] == str(max(1, math.ceil(error.retry_after_s)))


def in_team(key_id: str, name: str, tpm: int | None = 100) -> Principal:
    """A key of team 'tight' (150 tokens a minute) of organisation 'acme' (1000)."""
    return Principal(
        key_id, name, "api", tokens_per_minute=tpm, team_id="team_t1", org_id="org_o1",
        levels=(Level("org", "org_o1", "acme", tokens_per_minute=1000),
                Level("team", "team_t1", "tight", tokens_per_minute=150)),
    )  # fmt: skip


async def test_a_level_above_the_key_refuses_and_the_levels_before_it_give_back():
    limiter = BucketLimiter(window_s=60)
    admission = Admission(KeyDirectory(None), limiter)
    await admission.limit(in_team("k2", "other"), 100, "t0", {})  # the team's 100 of 150
    headers: dict[str, str] = {}
    with pytest.raises(RateLimited) as refused:
        await admission.limit(in_team("k1", "dev"), 60, "t1", headers)
    error = refused.value
    assert error.message.startswith(
        "rate limit of 150 tokens per minute exceeded for team 'tight'; retry after "
    )
    assert error.metadata == {"key": "dev", "limit": "150", "level": "team", "team": "team_t1"}
    # The headers are the key's own, as callers know them; the wait is the team's.
    assert headers["x-ratelimit-limit-tokens"] == "100"
    assert headers["x-ratelimit-remaining-tokens"] == "40"
    assert headers["retry-after"] == str(max(1, math.ceil(error.retry_after_s)))
    assert headers["retry-after-ms"] == str(math.ceil(error.retry_after_s * 1000))
    # The key's 60 tokens came back; the organisation, after the team, was never asked.
    assert limiter.hit("k1", None, 100, 0).tokens_remaining == 100
    assert limiter.hit("org:org_o1", None, 1000, 0).tokens_remaining == 900


async def test_a_key_without_limits_of_its_own_is_told_its_first_level_s():
    admission = Admission(KeyDirectory(None), BucketLimiter(window_s=60))
    headers: dict[str, str] = {}
    await admission.limit(in_team("k3", "free", tpm=None), 10, "t0", headers)
    assert headers["x-ratelimit-limit-tokens"] == "150"
    assert headers["x-ratelimit-remaining-tokens"] == "140"


async def test_a_request_counted_alone_skips_levels_that_limit_only_tokens():
    key = Principal(
        "k4", "dev", "api", tokens_per_minute=100,
        levels=(Level("team", "team_t2", "one-a-minute", requests_per_minute=1),),
    )  # fmt: skip
    admission = Admission(KeyDirectory(None), BucketLimiter(window_s=60))
    await admission.limit(key, 0, "t0", {}, (True, False))
    with pytest.raises(RateLimited, match="^rate limit of 1 requests per minute exceeded for "
                                          "team 'one-a-minute'"):  # fmt: skip
        await admission.limit(key, 0, "t1", {}, (True, False))


async def test_a_wait_under_a_second_is_one_second_and_its_milliseconds():
    key = Principal("k5", "dev", "api", tokens_per_minute=100)
    error, headers = await refusal(key, [100, 1])  # one token: 0.6 s away
    assert 0 < error.retry_after_s <= 1
    assert headers["retry-after"] == "1"
    assert headers["retry-after-ms"] == str(math.ceil(error.retry_after_s * 1000))
