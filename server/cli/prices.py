"""`gateway prices`: where each model's price comes from (the config, or the prices
dataset it names), what it is, and which models have none; exits 1 when some model
has no price, so a deployment check can catch one before its costs go missing."""

from __future__ import annotations

import argparse
from typing import Any

from server.base import config, prices
from server.base.config import ModelConfig, Price

COLUMNS = ("input", "output", "cached_input", "cache_write", "cache_write_1h")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "prices", help="show each model's price and where it comes from",
        description="Show each model's price (USD per million tokens), where it comes from "
        "(the config or the prices dataset), and flag the models without one.",
    )  # fmt: skip
    parser.add_argument("--config", help="YAML config file (default: the embedded config)")
    parser.set_defaults(run=run)


async def run(args: argparse.Namespace) -> int:
    cfg, source = config.load(args.config, dataset=False)
    rows = [row(m) for m in cfg.models]
    header = ("model", "price from", *COLUMNS, "tiers")
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    print(f"gateway: prices of {source} (USD per million tokens; {prices.dataset_version()})")
    for r in (header, *rows):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    missing = [r[0] for r in rows if r[1].startswith("NONE")]
    if missing:
        print(f"gateway: no price for {', '.join(missing)}: their costs are reported absent")
        return 1
    return 0


def row(model: ModelConfig) -> tuple[str, ...]:
    """A model's line: its name, the price's origin, the prices and the tiers."""
    price, origin = model.price, "config"
    if price is None and model.price_from is not None:
        named = f"{model.price_from.provider}/{model.price_from.model}"
        found = prices.lookup(model.price_from.provider, model.price_from.model)
        price = Price.model_validate(found) if found is not None else None
        origin = f"dataset: {named}" if price is not None else f"NONE: {named} not in the dataset"
    elif price is None:
        origin = "NONE: no price, no price_from"
    if price is None:
        return (model.id, origin, *("-" for _ in COLUMNS), "-")
    values = tuple("-" if getattr(price, c) is None else f"{getattr(price, c):g}" for c in COLUMNS)
    tiers = ", ".join(f">{t.above_input_tokens}" for t in price.tiers) or "-"
    return (model.id, origin, *values, tiers)
