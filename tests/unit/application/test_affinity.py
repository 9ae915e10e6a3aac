"""Cache affinity's parts: the prefix key, the order it gives, and the stores it shares
with the response cache (the memory store bounded, the Redis store a miss when Redis
does not answer)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from server.application.pipeline.affinity import Affinity, outcome
from server.application.pipeline.catalog import Upstream
from server.application.pipeline.expiring import MemoryStore, RedisStore
from server.base.config import AffinityConfig, ModelConfig, ProviderConfig
from server.base.generation import GenerationRequest, Message, ToolSpec
from server.providers.simulated import SimulatedParams, SimulatedProvider

ON = AffinityConfig(enabled=True)


def chat(*texts: str, system: str = "Be careful.", **fields) -> GenerationRequest:  # type: ignore[no-untyped-def]
    messages = (Message("system", system), *(Message("user", t) for t in texts))
    return GenerationRequest(messages=messages, **fields)


def upstream(provider_id: str, model_id: str) -> Upstream:
    config = ProviderConfig(id=provider_id, type="primary", adapter="simulated")
    model = ModelConfig.model_validate(
        {"id": model_id, "owned_by": "t", "created": 0, "providers": [config.model_dump()]}
    )
    return Upstream(config, SimulatedProvider(provider_id, SimulatedParams()), model)


def test_the_key_is_the_prefix_agents_resend():
    key = Affinity(MemoryStore(10)).key
    first = key(ON, chat("Fix the bug."), {}, "model m")
    assert first == key(ON, chat("Fix the bug.", "Go on.", "And on."), {}, "model m")
    assert first != key(ON, chat("Another task."), {}, "model m")
    assert first != key(ON, chat("Fix the bug.", system="Other."), {}, "model m")
    assert first != key(ON, chat("Fix the bug.", tools=(ToolSpec("f"),)), {}, "model m")
    assert first != key(ON, chat("Fix the bug."), {}, "model n")
    keyed = key(ON, chat("a", prompt_cache_key="k"), {}, "model m")
    assert keyed == key(ON, chat("b", prompt_cache_key="k"), {}, "model m")
    session = key(ON, chat("a"), {"session_id": "s"}, "model m")
    assert session == key(ON, chat("b"), {"session_id": "s"}, "model m") != first
    assert key(AffinityConfig(), chat("a"), {}, "model m") is None
    assert key(ON, GenerationRequest(prompt="once"), {}, "model m") is None


async def test_only_the_first_models_providers_are_reordered():
    a, b, c = upstream("a", "m"), upstream("b", "m"), upstream("c", "n")
    store = MemoryStore(10)
    affinity = Affinity(store)
    await affinity.remember("k", "b", 60)
    order, remembered = await affinity.ordered("k", [a, b, c])
    assert [u.id for u in order] == ["b", "a", "c"] and remembered == "b"
    await affinity.remember("k", "c", 60)  # another model's: the router's order holds
    order, remembered = await affinity.ordered("k", [a, b, c])
    assert [u.id for u in order] == ["a", "b", "c"] and remembered is None
    assert (outcome(None, "a"), outcome("b", "b"), outcome("b", "a")) == ("miss", "hit", "moved")


async def test_the_memory_store_expires_and_drops_the_least_recently_used():
    now = [0.0]
    store = MemoryStore(2, clock=lambda: now[0])
    await store.put("one", b"a", 10)
    await store.put("two", b"b", 10)
    await store.get("one")
    await store.put("three", b"c", 10)
    assert [await store.get(k) for k in ("one", "two", "three")] == [b"a", None, b"c"]
    now[0] = 11
    assert await store.get("one") is None


@pytest.mark.redis
async def test_redis_unreachable_is_a_miss_not_an_error():
    client = Redis.from_url("redis://127.0.0.1:9/0", socket_connect_timeout=0.2)
    store = RedisStore(client, "gwtest:", "affinity", timeout_s=0.5)
    try:
        await store.put("k", b"a", 60)
        assert await store.get("k") is None
    finally:
        await client.aclose()
