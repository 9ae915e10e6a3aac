"""An operation's bill (costs.billed): the first of its units its model prices, else its
tokens at the token prices; never $0 for want of a price, and the config's unit prices."""

from __future__ import annotations

import pytest

from server.base import costs
from server.base.config import ConfigError, Price, parse
from server.base.generation import TokenCounts
from server.base.operation import Measure, Unit
from tests.support.gateways import default_config_dict

TOKENS = TokenCounts(1000, 0)


def test_a_unit_the_price_names_is_billed_in_it() -> None:
    price = Price(input=1.0, output=2.0, per_search_unit=0.002)
    bill = costs.billed(Measure(TOKENS, {"search_units": 3}), price)
    assert (bill.unit, bill.quantity) == ("search_units", 3)
    assert bill.cost is not None and bill.cost.total_usd == pytest.approx(0.006)
    assert bill.cost.input_usd == pytest.approx(0.006) and bill.cost.output_usd == 0


def test_without_a_price_for_the_unit_the_tokens_are_billed() -> None:
    price = Price(input=1.0, output=2.0)
    bill = costs.billed(Measure(TOKENS, {"search_units": 3}), price)
    assert (bill.unit, bill.quantity) == ("tokens", 1000)
    assert bill.cost is not None and bill.cost.total_usd == pytest.approx(1000 / 1e6)


def test_an_unpriced_model_has_no_cost_not_a_zero_one() -> None:
    bill = costs.billed(Measure(TOKENS, {"seconds": 12.5}), None)
    assert bill.cost is None and bill.unit == "tokens"


@pytest.mark.parametrize(
    ("unit", "quantity", "price", "total"),
    [
        ("seconds", 90.0, {"per_second": 0.0001}, 0.009),
        ("characters", 2000, {"per_million_characters": 15.0}, 0.03),
    ],
)
def test_audio_units_are_input(
    unit: Unit, quantity: float, price: dict[str, float], total: float
) -> None:
    bill = costs.billed(Measure(TOKENS, {unit: quantity}), Price.model_validate(price))
    assert bill.unit == unit and bill.cost is not None
    assert bill.cost.input_usd == pytest.approx(total) and bill.cost.output_usd == 0


def test_images_are_output_priced_by_quality_and_size() -> None:
    price = Price.model_validate(
        {"per_image": {"hd/1024x1024": 0.08, "1024x1024": 0.04, "default": 0.1}}
    )
    for variant, each in (("hd/1024x1024", 0.08), ("standard/1024x1024", 0.04),
                          ("1792x1024", 0.1)):  # fmt: skip
        bill = costs.billed(Measure(TokenCounts(0, 0), {"images": 2}, variant), price)
        assert bill.unit == "images" and bill.cost is not None
        assert bill.cost.output_usd == pytest.approx(2 * each) and bill.cost.input_usd == 0


def test_a_price_in_another_unit_needs_no_token_prices() -> None:
    assert Price.model_validate({"per_search_unit": 0.002}).input == 0
    assert Price.model_validate({"per_second": 0}).output == 0  # a free unit is a price too
    data = default_config_dict()
    data["models"][0]["price"] = {"per_second": -1}
    with pytest.raises(ConfigError, match="per_second"):
        parse(data, "test")
    data["models"][0]["price"] = {"cached_input": 1}
    with pytest.raises(ConfigError, match="input"):
        parse(data, "test")


def test_capabilities_are_checked_and_default_to_embeddings() -> None:
    data = default_config_dict()
    assert parse(data, "test").models[0].serves == ("embeddings",)
    data["models"][0]["capabilities"] = ["rerank", "moderation"]
    assert parse(data, "test").models[0].serves == ("rerank", "moderation")
    data["models"][0]["capabilities"] = ["juggling"]
    with pytest.raises(ConfigError, match="capabilities"):
        parse(data, "test")
