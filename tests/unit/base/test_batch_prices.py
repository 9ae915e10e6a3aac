"""A batch line's prices: the model's batch rates where its price gives them, every
other rate (per unit and long prompts' tiers too) the live one at the batch's share."""

from __future__ import annotations

import pytest

from server.base import costs
from server.base.config import Price
from server.base.generation import TokenCounts

LIVE = Price.model_validate({
    "input": 2.0, "output": 8.0, "cached_input": 0.5,
    "tiers": [{"above_input_tokens": 1000, "input": 4.0, "output": 16.0}],
})  # fmt: skip


def test_without_batch_rates_every_rate_is_the_configured_share() -> None:
    batch = LIVE.for_batch(0.5)
    assert (batch.input, batch.output, batch.cached_input) == (1.0, 4.0, 0.25)
    assert (batch.tiers[0].input, batch.tiers[0].output) == (2.0, 8.0)
    assert batch.tiers[0].above_input_tokens == 1000


def test_batch_rates_win_and_the_models_share_beats_the_configured_one() -> None:
    price = Price.model_validate({**LIVE.model_dump(), "batch": {"output": 3.0, "factor": 0.25}})
    batch = price.for_batch(0.5)
    assert (batch.input, batch.output, batch.cached_input) == (0.5, 3.0, 0.125)
    assert batch.batch is None


def test_a_line_is_billed_at_the_batch_price_and_a_live_call_at_the_live_one() -> None:
    counts = TokenCounts(prompt_tokens=100, completion_tokens=10)
    live = costs.cost(counts, costs.batch_price(LIVE, None))
    batch = costs.cost(counts, costs.batch_price(LIVE, 0.5))
    assert live is not None and batch is not None
    assert live.total_usd == pytest.approx((100 * 2.0 + 10 * 8.0) / 1e6)
    assert batch.total_usd == pytest.approx(live.total_usd / 2)
    assert costs.batch_price(None, 0.5) is None  # an unpriced model stays unpriced


def test_per_unit_prices_are_shared_too() -> None:
    per_unit = Price.model_validate({"per_search_unit": 0.002, "per_image": {"default": 0.04}})
    batch = per_unit.for_batch(0.5)
    assert batch.per_search_unit == pytest.approx(0.001)
    assert batch.per_image == {"default": pytest.approx(0.02)}
