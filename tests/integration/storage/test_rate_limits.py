"""Per-key rate limits: requests and tokens per window, in memory and in Redis; the
x-ratelimit-* headers; and a retry_after that tells the truth."""

from __future__ import annotations

import asyncio
import math
import time
import uuid

import grpc
import httpx
import pytest
from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import model_service_pb2 as models
from redis.asyncio import Redis

from server.accounting.ratelimit import BucketLimiter, RedisLimiter
from server.storage.redis_topology import client_for
from tests.support.gateways import running_gateway
from tests.support.grpc_stubs import Stubs, details
from tests.support.shared_state import REDIS_URL, AdminClient, config_with, redis_settings

HELLO = [chat.ChatMessage(role="user", content="hello")]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_memory_limiter_counts_tokens_and_settles_them():
    clock = Clock()
    limiter = BucketLimiter(clock, window_s=60)
    first = await limiter.acquire("k", None, 1000, 600, "a")
    assert first.allowed and first.tokens_remaining == 400
    refused = await limiter.acquire("k", None, 1000, 600, "b")
    # 200 tokens short, refilling at 1000 a minute: 12 seconds, not the minute.
    assert not refused.allowed and refused.retry_after_s == pytest.approx(12)
    await limiter.settle("k", "a", 100)  # it used 100 of the 600 it might have
    assert (await limiter.acquire("k", None, 1000, 600, "b")).allowed
    clock.now += 30
    assert (await limiter.acquire("k", 2, 1000, 1, "c")).allowed
    assert (await limiter.acquire("k", 2, 1000, 1, "d")).allowed
    both = await limiter.acquire("k", 2, 1000, 1, "e")
    assert not both.allowed and both.requests_remaining == 0
    assert both.retry_after_s == pytest.approx(30)  # 2 a minute: one every 30 s
    assert both.headers()["x-ratelimit-limit-tokens"] == "1000"


def gateway_redis() -> Redis:
    """A client as the gateway makes one (its pool bounded, a burst waiting for a free
    connection instead of opening one per command), with room for a loaded machine."""
    return client_for(REDIS_URL, timeout_s=30, max_connections=64)


async def test_redis_limiter_is_exact_under_concurrency(redis_prefix):
    # Two limiters with their own connections stand for two gateway instances.
    one, other = gateway_redis(), gateway_redis()
    try:
        limiters = [RedisLimiter(one, redis_prefix), RedisLimiter(other, redis_prefix)]
        key = "exact-" + uuid.uuid4().hex
        started = time.monotonic()
        decisions = await asyncio.gather(*(
            limiters[i % 2].acquire(key, 60, None, 0, f"t{i}") for i in range(200)
        ))  # fmt: skip
        # The bucket's 60, plus one a second for as long as the burst lasted.
        refills = math.floor(time.monotonic() - started)
        assert 60 <= sum(d.allowed for d in decisions) <= 60 + refills
        refused = next(d for d in decisions if not d.allowed)
        assert 0 < refused.retry_after_s <= 1 and refused.requests_remaining == 0
        # Tokens: take, settle to the real count, and what was given back is usable.
        tkey = "tokens-" + uuid.uuid4().hex
        started = time.monotonic()
        assert (await limiters[0].acquire(tkey, None, 1000, 600, "a")).allowed
        assert not (await limiters[1].acquire(tkey, None, 1000, 600, "b")).allowed
        await limiters[0].settle(tkey, "a", 100)
        allowed = await limiters[1].acquire(tkey, None, 1000, 600, "b")
        # 1000 - 600 + 500 given back - 600, plus what refilled (1000 a minute) meanwhile.
        refilled = math.ceil((time.monotonic() - started) * 1000 / 60)
        assert allowed.allowed and 300 <= allowed.tokens_remaining <= 300 + refilled
    finally:
        await one.aclose()
        await other.aclose()


@pytest.fixture(params=["memory", "redis", "cluster"])
def shared(request, redis_prefix):
    if request.param == "memory":
        return {}
    return redis_settings(request, request.param, redis_prefix)


async def test_headers_on_every_response_over_grpc_and_rest(shared):
    async with running_gateway(config_with(**shared)) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            _, secret = await AdminClient(channel).create(
                "hdr", requests_per_minute=10, tokens_per_minute=5000
            )
            mine = (("x-api-key", secret),)
            call = Stubs(channel).chat.CreateChatCompletion(
                chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO, max_tokens=50),
                metadata=mine,
            )
            await call
            headers = dict(await call.initial_metadata())
        assert headers["x-ratelimit-limit-requests"] == "10"
        assert headers["x-ratelimit-remaining-requests"] == "9"
        assert headers["x-ratelimit-limit-tokens"] == "5000"
        # The request reserved its prompt estimate plus max_tokens.
        assert 4900 < int(headers["x-ratelimit-remaining-tokens"]) <= 4950
        assert headers["x-ratelimit-reset-requests"].endswith("s")
        assert headers["x-ratelimit-reset-tokens"].endswith("s")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
            body = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}
            ok = await http.post("/v1/chat/completions", json=body, headers={"x-api-key": secret})
            assert ok.status_code == 200
            assert ok.headers["x-ratelimit-remaining-requests"] == "8"
            assert "x-ratelimit-remaining-tokens" in ok.headers
            bad = await http.post("/v1/chat/completions", json={**body, "temperature": 9},
                                  headers={"x-api-key": secret})  # fmt: skip
            assert bad.status_code == 400


async def test_retry_after_is_true(shared):
    # A two-second window keeps the test short; the arithmetic is the minute's.
    data = config_with(limits={"window_s": 2, "count_listings": True}, **shared)
    async with running_gateway(data) as gw:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel:
            _, secret = await AdminClient(channel).create("retry", requests_per_minute=2)
            stubs, mine = Stubs(channel), (("x-api-key", secret),)
            before_first = time.monotonic()
            await stubs.models.ListModels(models.ListModelsRequest(), metadata=mine)
            after_first = time.monotonic()
            await asyncio.sleep(0.3)
            await stubs.models.ListModels(models.ListModelsRequest(), metadata=mine)
            before_third = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stubs.models.ListModels(models.ListModelsRequest(), metadata=mine)
            after_third = time.monotonic()
            error = caught.value
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            # Two a (two-second) window: a slot a second. The first request took one of
            # two, the second one more of what had come back since: the next slot is a
            # second after the first request, whenever the third came (timed from
            # outside, so between the bounds of when each was served).
            delay = details(error)["RetryInfo"].retry_delay.ToMilliseconds()  # type: ignore[attr-defined]
            trailers = dict(error.trailing_metadata())
            assert trailers["retry-after"] == "1"  # whole seconds, at least one
            assert int(trailers["retry-after-ms"]) == delay
            longest, shortest = after_third - before_first, before_third - after_first
            assert 1000 * (1 - longest) - 1 <= delay <= 1000 * (1 - shortest) + 1
            await asyncio.sleep(delay / 1000)
            await stubs.models.ListModels(models.ListModelsRequest(), metadata=mine)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http:
            await http.get("/v1/models", headers={"x-api-key": secret})
            refused = await http.get("/v1/models", headers={"x-api-key": secret})
            assert refused.status_code == 429
            wait = int(refused.headers["retry-after-ms"])
            assert refused.headers["retry-after"] == refused.headers["retry_after"] == "1"
            assert 0 < wait <= 1000 and refused.headers["x-ratelimit-remaining-requests"] == "0"
            await asyncio.sleep(wait / 1000)
            again = await http.get("/v1/models", headers={"x-api-key": secret})
            assert again.status_code == 200, again.text


async def test_tokens_per_minute_are_settled_to_real_counts(shared):
    async with (
        running_gateway(config_with(**shared)) as gw,
        grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
    ):
        _, secret = await AdminClient(channel).create("tpm", tokens_per_minute=250)
        stubs, mine = Stubs(channel), (("x-api-key", secret),)
        request = chat.CreateChatCompletionRequest(model="sim-mini", messages=HELLO,
                                                   max_tokens=150)  # fmt: skip
        first = await stubs.chat.CreateChatCompletion(request, metadata=mine)
        assert first.usage.total_tokens < 80  # of the 159 reserved
        await gw.gateway.accounts.settled()
        await stubs.chat.CreateChatCompletion(request, metadata=mine)
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stubs.chat.CreateChatCompletion(request, metadata=mine)
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "250 tokens" in caught.value.details()
        assert time.monotonic() - started < 5  # refused at once, not held for the window


async def test_listings_take_nothing_from_the_limit_unless_configured(shared):
    for counted in (False, True):
        data = config_with(limits={"count_listings": counted}, **shared)
        async with (
            running_gateway(data) as gw,
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.grpc_port}") as channel,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
        ):
            _, secret = await AdminClient(channel).create("lister", requests_per_minute=2)
            mine = {"x-api-key": secret}
            for _ in range(3):
                listed = await http.get("/v1/models", headers=mine)
                assert listed.status_code == (429 if counted and _ == 2 else 200)
            body = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}
            chat_reply = await http.post("/v1/chat/completions", json=body, headers=mine)
            # Uncounted, the key's two requests are still there for what generates.
            assert chat_reply.status_code == (429 if counted else 200)
            if not counted:
                assert chat_reply.headers["x-ratelimit-remaining-requests"] == "1"
                assert "x-ratelimit-remaining-requests" not in listed.headers


@pytest.mark.redis
@pytest.mark.parametrize("kind", ["redis", "cluster", "sentinel"])
async def test_a_redis_pool_exhausted_is_back_pressure_never_an_error(redis_prefix, request, kind):
    # Two connections for 200 requests at once, in two dialects (Anthropic's says 529
    # for what would be a 503): each waits its turn, and the limit holds (60, and the
    # one a second its bucket refills while they run). A cluster's own pools, and a
    # Sentinel's, refuse when full: their clients wait too.
    data = config_with(**redis_settings(request, kind, redis_prefix))
    data["storage"]["redis_max_connections"] = 2
    # Waiting for a connection counts against the storage bound: generous here, where
    # the point is that the pool waits rather than refuses. The gateway runs in this
    # test's own process, so on a loaded machine its 200 calls share a slice of a core
    # and the last waiter's turn can come late (15 s was passed at a load of 9).
    data["storage"]["timeout_s"] = 60
    data["keys"][0]["requests_per_minute"] = 60
    key = data["keys"][0]["secret"]
    chat_body = {"model": "sim-mini", "messages": [{"role": "user", "content": "hi"}]}
    messages_body = {**chat_body, "max_tokens": 16}
    async with (
        running_gateway(data) as gw,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{gw.http_port}", timeout=120,
            limits=httpx.Limits(max_connections=200), headers={"x-api-key": key},
        ) as client,
    ):  # fmt: skip

        async def one(i: int) -> int:
            path, body = (
                ("/v1/chat/completions", chat_body) if i % 2 else ("/v1/messages", messages_body)
            )
            return (await client.post(path, json=body)).status_code

        started = time.monotonic()
        statuses = await asyncio.gather(*(one(i) for i in range(200)))
        took = time.monotonic() - started
    assert set(statuses) <= {200, 429}, sorted(set(statuses))
    # The bucket's 60, and one more for each second the burst lasted.
    assert 60 <= statuses.count(200) <= 60 + math.ceil(took) + 1, took
