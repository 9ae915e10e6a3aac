"""An image call's bill: per image by quality and size, else its tokens priced apart."""

from __future__ import annotations

import pytest

from server.base import costs
from server.base.config import Price
from server.base.images import IMAGES, ImageFile, ImageRequest, Images, ImageTokens, MadeImage

TOKENS = Price(input=5.0, output=40.0, image_input=10.0)
PER_IMAGE = Price.model_validate(
    {"per_image": {"high/1024x1024": 0.167, "1024x1536": 0.25, "default": 0.04}}
)


def made(n: int, size: str, quality: str, tokens: ImageTokens | None = None) -> Images:
    return Images(tuple(MadeImage(data=b"x") for _ in range(n)), size, quality, tokens=tokens)


def test_image_input_tokens_are_priced_apart_from_text_and_output() -> None:
    measure = IMAGES.measure(
        ImageRequest("p"), made(1, "1024x1024", "high", ImageTokens(10, 40, 272))
    )
    bill = costs.billed(measure, TOKENS)
    assert (bill.unit, bill.quantity) == ("tokens", 322)
    assert bill.cost is not None
    assert bill.cost.input_usd == pytest.approx((10 * 5.0 + 40 * 10.0) / 1e6)
    assert bill.cost.total_usd == pytest.approx((10 * 5.0 + 40 * 10.0 + 272 * 40.0) / 1e6)
    # Without image_input, image tokens are input tokens at the input price.
    plain = costs.billed(measure, Price(input=5.0, output=40.0)).cost
    assert plain is not None and plain.input_usd == pytest.approx(50 * 5.0 / 1e6)


def test_per_image_prices_are_looked_up_by_quality_and_size_then_size_then_default() -> None:
    cases = [(("1024x1024", "high"), 0.167), (("1024x1536", "low"), 0.25),
             (("256x256", "low"), 0.04)]  # fmt: skip
    for (size, quality), each in cases:
        bill = costs.billed(IMAGES.measure(ImageRequest("p"), made(3, size, quality)), PER_IMAGE)
        assert (bill.unit, bill.quantity) == ("images", 3)
        assert bill.cost is not None and bill.cost.output_usd == pytest.approx(3 * each)


def test_the_reservation_counts_the_images_asked_for_and_the_inputs() -> None:
    asked = ImageRequest(
        "p", n=4, size="1024x1536", images=(ImageFile(b"x"),), mask=ImageFile(b"m")
    )
    estimate = IMAGES.measure(asked, None)
    assert estimate.units == {"images": 4} and estimate.variant == "auto/1024x1536"
    assert estimate.counts.image_input_tokens == 2 * 323
    assert estimate.counts.completion_tokens == 4 * 1056
    assert costs.billed(estimate, PER_IMAGE).cost.total_usd == pytest.approx(4 * 0.25)  # type: ignore[union-attr]
