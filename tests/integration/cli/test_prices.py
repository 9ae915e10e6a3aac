"""Model prices from the prices dataset: a model that names its entry (`price_from`)
is billed at the dataset's prices (checked against the dataset's own calculator,
tiers and cache prices included), the config's `price` wins over it, a model the
dataset cannot price has its costs absent (never $0), and `gateway prices` shows
where each price comes from and flags the missing ones."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal
from typing import Any

import httpx
import pytest
from genai_prices import Usage, calc_price

from server.base import config, costs, prices
from server.base.config import Price
from server.base.generation import TokenCounts
from tests.support.gateways import API_KEY, default_config_dict, running_gateway, write_config

SONNET = {"provider": "anthropic", "model": "claude-sonnet-4-5"}


def models() -> dict[str, Any]:
    data = default_config_dict()
    sim = [{"id": "{}-p", "type": "primary", "adapter": "simulated", "params": {"ttft_ms": 0}}]
    for name, extra in (
        ("sonnet", {"price_from": SONNET}),
        ("mine", {"price_from": SONNET, "price": {"input": 1.0, "output": 2.0}}),
        ("ghost", {"price_from": {"provider": "openai", "model": "no-such-model"}}),
    ):
        providers = [{**p, "id": p["id"].format(name)} for p in sim]
        data["models"].append({"id": name, "owned_by": "t", "created": 0,
                               "providers": providers, **extra})  # fmt: skip
    return data


def dataset_cost(counts: TokenCounts) -> Decimal:
    """The dataset's own price for these counts (its Usage counts cache tokens inside
    input_tokens, as the gateway does)."""
    usage = Usage(input_tokens=counts.prompt_tokens, output_tokens=counts.completion_tokens,
                  cache_read_tokens=counts.cached_tokens,
                  cache_write_tokens=counts.cache_write_tokens)  # fmt: skip
    return calc_price(usage, SONNET["model"], provider_id=SONNET["provider"]).total_price


@pytest.mark.parametrize(
    "counts",
    [TokenCounts(1200, 300), TokenCounts(250_000, 100),
     TokenCounts(250_000, 100, cached_tokens=100_000, cache_write_tokens=50_000),
     TokenCounts(9000, 40, cached_tokens=8000, cache_write_tokens=500)],
    ids=["plain", "above the tier", "above the tier, cached", "cached"],
)  # fmt: skip
def test_dataset_prices_cost_what_the_dataset_says(counts: TokenCounts):
    price = Price.model_validate(prices.lookup(SONNET["provider"], SONNET["model"]))
    cost = costs.cost(counts, price)
    assert cost is not None
    assert cost.total_usd == pytest.approx(float(dataset_cost(counts)), rel=1e-9)


def test_what_the_dataset_cannot_price_is_absent():
    assert prices.lookup("openai", "no-such-model") is None
    assert prices.lookup("no-such-provider", "gpt-4o") is None


async def test_served_costs_come_from_the_dataset_unless_the_config_prices_the_model():
    async with (
        running_gateway(models()) as gw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}") as http,
    ):
        usage = {}
        for name in ("sonnet", "mine", "ghost"):
            reply = await http.post(
                "/v1/chat/completions", headers={"authorization": f"Bearer {API_KEY}"},
                json={"model": name, "messages": [{"role": "user", "content": "Hello " * 50}]},
            )  # fmt: skip
            assert reply.status_code == 200, reply.text
            usage[name] = reply.json()["usage"]
    sonnet = usage["sonnet"]
    counts = TokenCounts(sonnet["prompt_tokens"], sonnet["completion_tokens"])
    assert sonnet["total_cost_usd"] == pytest.approx(float(dataset_cost(counts)), rel=1e-9)
    mine = usage["mine"]
    expected = (mine["prompt_tokens"] * 1.0 + mine["completion_tokens"] * 2.0) / 1e6
    assert mine["total_cost_usd"] == pytest.approx(expected)
    assert not {"input_cost_usd", "output_cost_usd", "total_cost_usd"} & set(usage["ghost"])


def test_the_prices_command_shows_each_origin_and_flags_the_missing(tmp_path):
    path = write_config(tmp_path, models())
    result = subprocess.run(
        [sys.executable, "-m", "server.cli.main", "prices", "--config", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[2:]}
    assert "dataset: anthropic/claude-sonnet-4-5" in lines["sonnet"]
    assert lines["sonnet"].split()[3:9] == ["3", "15", "0.3", "3.75", "6", ">200000"]
    assert lines["mine"].split()[1:4] == ["config", "1", "2"]
    assert "NONE: openai/no-such-model not in the dataset" in lines["ghost"]
    assert lines["sim-mini"].split()[1] == "config"
    assert "no price for ghost" in result.stdout


def test_the_embedded_default_prices_every_model():
    cfg, _ = config.load(None)
    assert all(m.price is not None for m in cfg.models)
    result = subprocess.run([sys.executable, "-m", "server.cli.main", "prices"],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0 and "NONE" not in result.stdout
