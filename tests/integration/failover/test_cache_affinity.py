"""Cache affinity through the gateway: a conversation sticks to the provider that
served its prefix (through a failover and back), other conversations keep the
configured order (or their weighted share), the router's choice of model holds, two instances sharing Redis
agree, and the metrics show affinity outcomes and prompt-cache hit rates."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from tests.support.gateways import openai_gateway
from tests.support.shared_state import redis_settings
from tests.support.upstreams.base import FakeUpstream, Fault, Usage, serving
from tests.support.upstreams.config import model, provider, with_models
from tests.support.upstreams.openai import OpenAIWire

SYSTEM = {"role": "system", "content": "You are a careful coding agent. " * 20}


def turn(conversation: str, n: int) -> list[dict[str, str]]:
    """Turn n of a conversation: the same system prompt and first message every turn."""
    history = [SYSTEM, {"role": "user", "content": f"Task {conversation}: fix the bug."}]
    for i in range(n):
        history += [{"role": "assistant", "content": f"Step {i}."},
                    {"role": "user", "content": "Go on."}]  # fmt: skip
    return history


def config(a: FakeUpstream, b: FakeUpstream, **affinity: Any) -> dict[str, Any]:
    data = with_models(
        model("m", provider("a", "openai", a.url), provider("b", "openai", b.url, "backup"))
    )
    data["affinity"] = {"enabled": True, **affinity}
    return data


@pytest.fixture
async def pair() -> AsyncIterator[tuple[FakeUpstream, FakeUpstream]]:
    usage = Usage(prompt_tokens=300, cached_tokens=256)
    async with (
        serving(OpenAIWire(), text=("A",), usage=usage) as a,
        serving(OpenAIWire(), text=("B",), usage=usage) as b,
    ):
        yield a, b


async def answer(sdk: Any, messages: list[dict[str, str]], **extra: Any) -> str:
    reply = await sdk.chat.completions.create(model="m", messages=messages, **extra)
    return str(reply.choices[0].message.content)


async def test_a_conversation_stays_on_the_provider_that_served_it(pair):
    a, b = pair
    async with openai_gateway(config(a, b)) as (sdk, base):
        assert await answer(sdk, turn("one", 0)) == "A"  # miss: the configured order
        a.faults = [Fault("status", status=503)]
        assert await answer(sdk, turn("one", 1)) == "B"  # A fails: moved to B
        # A is back, but conversation one's prefix is cached at B: it stays there.
        assert [await answer(sdk, turn("one", n)) for n in (2, 3)] == ["B", "B"]
        # Another conversation starts in the configured order.
        assert await answer(sdk, turn("two", 0)) == "A"
        # The caller's prompt_cache_key names the prefix even when the messages differ.
        keyed = [await answer(sdk, [{"role": "user", "content": f"q{i}"}],
                              prompt_cache_key="shared") for i in range(2)]  # fmt: skip
        async with httpx.AsyncClient(base_url=base) as http:
            metrics = (await http.get("/metrics")).text
    assert keyed == ["A", "A"]
    assert 'gateway_cache_affinity_total{model="m",result="miss"} 3.0' in metrics
    assert 'gateway_cache_affinity_total{model="m",result="moved"} 1.0' in metrics
    assert 'gateway_cache_affinity_total{model="m",result="hit"} 3.0' in metrics
    assert 'gateway_prompt_cache_tokens_total{kind="read",model="m",provider="b"} 768.0' in metrics
    assert (
        'gateway_prompt_cache_tokens_total{kind="uncached",model="m",provider="b"} 132.0' in metrics
    )


async def test_a_session_header_names_the_prefix(pair):
    a, b = pair
    async with openai_gateway(config(a, b)) as (sdk, _):
        header = {"x-claude-code-session-id": "s-1"}
        a.faults = [Fault("status", status=503)]
        first = await answer(sdk, [{"role": "user", "content": "x"}], extra_headers=header)
        later = await answer(sdk, [{"role": "user", "content": "y"}], extra_headers=header)
        other = await answer(sdk, [{"role": "user", "content": "y"}])
    assert (first, later, other) == ("B", "B", "A")


async def test_affinity_is_off_unless_configured(pair):
    a, b = pair
    data = config(a, b)
    del data["affinity"]
    async with openai_gateway(data) as (sdk, _):
        a.faults = [Fault("status", status=503)]
        replies = [await answer(sdk, turn("one", n)) for n in range(3)]
    assert replies == ["B", "A", "A"]


async def test_weighted_providers_share_the_traffic_and_each_conversation_stays(pair):
    a, b = pair
    data = config(a, b)
    for entry, weight in zip(data["models"][-1]["providers"], (3, 1), strict=True):
        entry["weight"] = weight
    async with openai_gateway(data) as (sdk, _):
        first = [await answer(sdk, turn(f"c{i}", 0)) for i in range(200)]
        later = [await answer(sdk, turn(f"c{i}", 1)) for i in range(200)]
    # Three to one, within what chance gives 200 draws (about 5 standard deviations).
    assert 120 <= first.count("A") <= 180, first.count("A")
    assert later == first


async def test_a_remembered_provider_that_expired_or_was_disabled_is_passed_over(pair):
    a, b = pair
    # Long enough that a loaded machine still asks twice within it.
    async with openai_gateway(config(a, b, ttl_s=1.5)) as (sdk, _):
        a.faults = [Fault("status", status=503)]
        assert await answer(sdk, turn("one", 0)) == "B"
        assert await answer(sdk, turn("one", 1)) == "B"
        await asyncio.sleep(1.6)  # the remembered provider expires
        assert await answer(sdk, turn("one", 2)) == "A", "the cache it pointed at has expired"


@pytest.mark.redis
@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_two_instances_sharing_redis_agree(pair, redis_prefix, request, kind):
    a, b = pair
    data = config(a, b)
    data["storage"] |= redis_settings(request, kind, redis_prefix)
    async with AsyncExitStack() as stack:
        (one, _), (two, _) = [
            await stack.enter_async_context(openai_gateway(data)) for _ in range(2)
        ]
        a.faults = [Fault("status", status=503)]
        assert await answer(one, turn("shared", 0)) == "B"
        assert await answer(two, turn("shared", 1)) == "B", "the other instance knows"
        assert await answer(two, turn("fresh", 0)) == "A"
