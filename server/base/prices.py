"""Model prices from a maintained dataset: genai-prices, installed as a pinned package
and read offline (nothing is fetched). A model names its entry with `price_from:
{provider, model}`; its own `price` in the config always wins. What the dataset cannot
price (an unknown provider or model, a model without token prices) stays absent, never
$0. Prices that change with the prompt's size become the price's `tiers`, and the
dataset's cache-read and cache-write (5-minute and 1-hour) prices its cache prices.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import version
from typing import Any

DATASET = "genai-prices"
# The dataset's price keys (USD per million tokens) and the gateway's names for them;
# of two keys for one name, the first the dataset gives wins.
KEYS = (
    ("input_mtok", "input"),
    ("output_mtok", "output"),
    ("cache_read_mtok", "cached_input"),
    ("cache_write_5m_mtok", "cache_write"),
    ("cache_write_mtok", "cache_write"),
    ("cache_write_1h_mtok", "cache_write_1h"),
)


def dataset_version() -> str:
    return f"{DATASET} {version(DATASET)}"


@functools.cache
def _snapshot() -> Any:
    # Imported only when a config asks: the dataset costs memory nobody else needs.
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


def lookup(provider: str, model: str, when: datetime | None = None) -> dict[str, Any] | None:
    """The dataset's prices for `model` of `provider` at `when` (now by default), as
    the fields of a config's `price`; None when it has none."""
    try:
        _, info = _snapshot().find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    prices = info.get_prices(when or datetime.now(UTC))
    given: dict[str, Any] = {}
    for key, name in KEYS:
        if (value := getattr(prices, key, None)) is not None:
            given.setdefault(name, value)
    if "input" not in given or "output" not in given:
        return None
    starts = sorted({t.start for value in given.values() for t in _tiers(value)})
    tiers = [
        {"above_input_tokens": start, **{n: _at(v, start) for n, v in given.items()}}
        for start in starts
    ]
    return {**{name: _at(value, 0) for name, value in given.items()}, "tiers": tiers}


def _tiers(value: Any) -> list[Any]:
    return list(getattr(value, "tiers", ()))


def _at(value: Any, start: int) -> float:
    """A dataset price for prompts above `start` tokens (0: the base price)."""
    if isinstance(value, Decimal):
        return float(value)
    price = value.base
    for tier in _tiers(value):
        if tier.start <= start and start > 0:
            price = tier.price
    return float(price)
