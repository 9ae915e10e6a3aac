"""Core pieces without any transport: limits, costs, tokens, simulated replies."""

from __future__ import annotations

import pytest

from server.accounting.ratelimit import BucketLimiter
from server.base import costs, tokens
from server.base.config import Price
from server.base.generation import GenerationRequest, Message, TokenCounts
from server.providers.simulated import SimulatedParams, SimulatedProvider


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_bucket_admits_a_burst_then_one_per_slot_and_tells_when():
    clock = Clock()
    limiter = BucketLimiter(clock)
    # 3 a minute: a full bucket of 3, then one every 20 seconds.
    for remaining in (2, 1, 0):
        decision = limiter.hit("k", 3)
        assert decision.allowed and decision.requests_remaining == remaining
    clock.now += 10
    refused = limiter.hit("k", 3)
    assert not refused.allowed
    # Half a slot has refilled in 10 s: the next is 10 s away, not the minute.
    assert refused.retry_after_s == pytest.approx(10)
    clock.now += 10
    assert limiter.hit("k", 3).allowed
    assert not limiter.hit("k", 3).allowed
    assert limiter.hit("other", 3).allowed


def test_cost_splits_cached_input_and_reasoning():
    price = Price(input=2.0, output=8.0, cached_input=0.5, reasoning=10.0)
    counts = TokenCounts(prompt_tokens=1000, completion_tokens=300, cached_tokens=400,
                         reasoning_tokens=100)  # fmt: skip
    usage = costs.usage(counts, costs.cost(counts, price), latency_ms=12.0, ttft_ms=3.0)
    assert usage.input_cost_usd == pytest.approx(600 * 2e-6)
    assert usage.cache_input_cost_usd == pytest.approx(400 * 0.5e-6)
    assert usage.output_cost_usd == pytest.approx(200 * 8e-6 + 100 * 10e-6)
    assert usage.total_cost_usd == pytest.approx(0.0012 + 0.0002 + 0.0026)
    assert usage.prompt_tokens_details.cached_tokens == 400
    assert usage.completion_tokens_details.reasoning_tokens == 100


def test_cache_writes_are_billed_apart_by_lifetime():
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75, cache_write_1h=6.0)
    counts = TokenCounts(prompt_tokens=1000, completion_tokens=10, cached_tokens=500,
                         cache_write_tokens=300, cache_write_1h_tokens=100)  # fmt: skip
    usage = costs.usage(counts, costs.cost(counts, price), latency_ms=1.0, ttft_ms=None)
    assert usage.input_cost_usd == pytest.approx(200 * 3e-6)
    assert usage.cache_input_cost_usd == pytest.approx(500 * 0.3e-6)
    assert usage.cache_write_cost_usd == pytest.approx(200 * 3.75e-6 + 100 * 6e-6)
    assert usage.total_cost_usd == pytest.approx(
        200 * 3e-6 + 500 * 0.3e-6 + 200 * 3.75e-6 + 100 * 6e-6 + 10 * 15e-6
    )
    assert usage.prompt_tokens_details.cache_write_tokens == 300
    assert usage.prompt_tokens_details.cache_write_1h_tokens == 100
    # Without writes the fields are absent, as in OpenAI's own usage.
    plain = costs.usage(
        TokenCounts(10, 1), costs.cost(TokenCounts(10, 1), price), latency_ms=1.0, ttft_ms=None
    )
    assert not plain.HasField("cache_write_cost_usd")
    assert not plain.prompt_tokens_details.HasField("cache_write_tokens")


def test_a_long_prompt_pays_its_tier_and_the_reservation_covers_it():
    price = Price.model_validate({"input": 1.0, "output": 10.0, "tiers": [
        {"above_input_tokens": 1000, "input": 2.0, "output": 15.0},
        {"above_input_tokens": 5000, "input": 4.0},
    ]})  # fmt: skip
    assert costs.cost(TokenCounts(1000, 100), price).total_usd == pytest.approx(
        (1000 * 1.0 + 100 * 10.0) / 1e6
    )
    assert costs.cost(TokenCounts(1001, 100), price).total_usd == pytest.approx(
        (1001 * 2.0 + 100 * 15.0) / 1e6
    )
    # The highest tier passed wins; what it leaves out is the base price's.
    assert costs.cost(TokenCounts(6000, 100), price).total_usd == pytest.approx(
        (6000 * 4.0 + 100 * 10.0) / 1e6
    )
    request = GenerationRequest(messages=(Message("user", "x" * 3800),), max_tokens=100)
    # About 950 tokens: the estimate may be short, so the next tier's prices are held.
    assert costs.max_cost([price], request, 100) >= (950 * 2.0 + 100 * 15.0) / 1e6


def test_the_reservation_holds_the_dearest_input_price():
    price = Price(input=1.0, output=1.0, cache_write=1.25, cache_write_1h=2.0)
    request = GenerationRequest(messages=(Message("user", "x" * 4000),), max_tokens=10)
    prompt = tokens.estimate_prompt(request)
    assert costs.max_cost([price], request, 10) == pytest.approx((prompt * 2.0 + 10) / 1e6)


def test_unpriced_model_reports_costs_absent_not_zero():
    usage = costs.usage(TokenCounts(10, 5), None, latency_ms=1.0, ttft_ms=None)
    for field in ("input_cost_usd", "output_cost_usd", "total_cost_usd", "ttft_ms"):
        assert not usage.HasField(field)
    assert usage.total_tokens == 15


def test_token_estimates():
    assert tokens.estimate("") == 0
    assert tokens.estimate("a") == 1
    assert tokens.estimate("x" * 400) == 100
    chat = GenerationRequest(messages=(Message("user", "x" * 40),))
    assert (
        tokens.estimate_prompt(chat) == 10 + tokens.TOKENS_PER_MESSAGE + tokens.REPLY_PRIMER_TOKENS
    )


def test_simulated_reply_is_deterministic_and_honours_limits():
    provider = SimulatedProvider("p", SimulatedParams(ttft_ms=0, tokens_per_second=0))
    request = GenerationRequest(prompt="tell me")
    assert provider.reply_tokens(request) == provider.reply_tokens(request)
    assert provider.reply_tokens(request) != provider.reply_tokens(GenerationRequest(prompt="x"))
    pieces, finish = provider.reply_tokens(GenerationRequest(prompt="tell me", max_tokens=2))
    assert len(pieces) == 2 and finish == "length"
    full = "".join(provider.reply_tokens(request)[0])
    stop = full[20:24]
    cut, finish = provider.reply_tokens(GenerationRequest(prompt="tell me", stop=(stop,)))
    assert "".join(cut) == full[: full.find(stop)] and finish == "stop"
