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
        assert decision.allowed and decision.remaining == remaining
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
    usage = costs.usage(counts, price, latency_ms=12.0, ttft_ms=3.0)
    assert usage.input_cost_usd == pytest.approx(600 * 2e-6)
    assert usage.cache_input_cost_usd == pytest.approx(400 * 0.5e-6)
    assert usage.output_cost_usd == pytest.approx(200 * 8e-6 + 100 * 10e-6)
    assert usage.total_cost_usd == pytest.approx(0.0012 + 0.0002 + 0.0026)
    assert usage.prompt_tokens_details.cached_tokens == 400
    assert usage.completion_tokens_details.reasoning_tokens == 100


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
